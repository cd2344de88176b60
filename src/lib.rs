//! # numafiber
//!
//! Stackful fibers (green threads) scheduled cooperatively on worker threads
//! pinned to the machine's processing units, with NUMA-aware and load-aware
//! work stealing: the schedulers of the thesis *Design and Implementation of
//! a NUMA-Aware Cooperative Scheduler* (Univ. Stuttgart, 2025), used like
//! `std::thread`.
//!
//! ```
//! use numafiber::{fiber, sync, Runtime};
//!
//! let rt = Runtime::builder().workers(2).build()?;
//! let out = rt.block_on(|| {
//!     let (tx, rx) = sync::channel::bounded(4);
//!     let producer = fiber::spawn(move || {
//!         for i in 1..=10u64 {
//!             tx.send(i * i).unwrap(); // parks the fiber when full
//!         }
//!     });
//!     let sum: u64 = rx.iter().sum(); // ends when the sender is dropped
//!     fiber::await_fiber(producer);
//!     sum
//! });
//! assert_eq!(out, 385);
//! # Ok::<(), numafiber::BuildError>(())
//! ```
//!
//! ## Modules
//!
//! * [`runtime`]: [`Runtime`] and its [`Builder`]
//!   (workers, one per PU by default, pinned with hwloc; topology; policy;
//!   stack size), [`Runtime::block_on`], [`Runtime::spawn`] from plain
//!   threads, [`Runtime::stats`], [`Runtime::shutdown`] (also on drop),
//!   [`runtime::Handle`] to spawn from anywhere, and a window inside:
//!   [`Runtime::dump`] (every fiber: state, what it waits on, where it was
//!   spawned, where its stack lives) and the stall monitor
//!   ([`Builder::stall_threshold`], [`Builder::on_stall`]) that moves the
//!   fibers queued behind a fiber holding its worker too long, and reports
//!   it when something waited on it.
//! * [`fiber`]: `spawn`, `spawn_pinned`, `yield_now`, `await_fiber`,
//!   `join` (fork-join), `when_all`, `when_any`, `scope`, `sleep`,
//!   `current`, [`JoinSet`](fiber::JoinSet) (results in finishing order),
//!   [`Builder`](fiber::Builder) (name, stack size, node, worker, `local`,
//!   `eager`), and [`spawn_blocking`](fiber::spawn_blocking), which runs a
//!   blocking call on a helper thread while the fiber parks;
//!   cancellation ([`JoinHandle::cancel`](fiber::JoinHandle::cancel),
//!   [`shield`](fiber::shield)), fiber-locals ([`fiber_local!`]),
//!   [`park`](fiber::park) / [`Fiber::unpark`](fiber::Fiber::unpark), and
//!   futures both ways ([`block_on_future`](fiber::block_on_future),
//!   `JoinHandle: IntoFuture`).
//! * [`signal`]: `ctrl_c()` and named signals, waited for by a fiber.
//! * [`sync`]: `Mutex`, `Condvar`, `CondvarAny`, `RwLock`, `Semaphore`,
//!   `Barrier`, `WaitGroup`, `Event`, `AutoResetEvent`,
//!   [`oneshot`](fn@sync::oneshot) (promise and future; `SharedFuture`,
//!   `PackagedTask`) and [`sync::channel`] (bounded, rendezvous, unbounded;
//!   `close`), with a deadline form of every wait, and [`select!`] over
//!   channel operations; they park the fiber, not the thread, and work from
//!   plain threads too. `block_on` reports deadlocks Go-style.
//! * [`net`]: `TcpListener`, `TcpStream`, `UdpSocket` with std's shapes; a
//!   blocked call parks the fiber on the runtime's reactor, and on a plain
//!   thread they behave like std.
//! * [`graph`]: NABBIT task graphs, static (dependencies known up front) and
//!   dynamic (nodes discovered through keys).
//! * [`policy`]: [`Policy`] (`RoundRobin`, `RandomSteal`, `NumaSteal`,
//!   `LoadSteal`, `HybridSteal`, `Nlh`, the default) and [`PolicyOptions`]
//!   (the switches beyond the thesis), and the schedulers as pure functions
//!   over a snapshot of the queues.
//! * [`topology`]: [`Topology`], detected with hwloc, or synthetic, XML or
//!   uniform, with NUMA distances; the process' CPU affinity.
//! * [`sim`]: a deterministic simulator that runs the same policy code on
//!   machines you do not have.
//!
//! Which policy suits which workload, and what every operation costs against
//! Go, Boost.Fiber, rayon, may and tokio, is in the repository's
//! `BENCHMARKS.md`.
//!
//! ## Stacks
//!
//! A fiber costs the stack pages it touches, not its stack size: stacks are
//! 256 KiB of lazily committed address space by default, carved from large
//! slabs, each with a guard page below it, so an overflow is caught and
//! reported (fiber id, name, size) instead of corrupting memory. A million
//! parked fibers take about 4.5 KiB of RSS each with default settings. On
//! Linux 6.13+ the guard pages are `MADV_GUARD_INSTALL` markers without a
//! memory mapping each; on older kernels a fallback maps each stack on its
//! own, within a budget of `vm.max_map_count / 2` stacks, running started
//! fibers first when at the budget. See [`fiber`], "Stacks".
//!
//! ## Caveats
//!
//! * Scheduling is cooperative: a fiber that never yields, parks or returns
//!   keeps its worker (and shutdown waits for it).
//! * A blocking OS call inside a fiber (file I/O, `std::net`, a C library)
//!   blocks its worker thread: wrap long ones in [`fiber::spawn_blocking`],
//!   and use [`net`] for sockets.
//! * A fiber may resume on another worker after any suspension point: do not
//!   hold `thread_local!` references across one; use [`fiber_local!`] for
//!   per-fiber state and [`fiber::spawn_pinned`]
//!   for thread-affine work (see [`fiber`], "Thread-locals and migration").
//! * Stack overflow aborts the process (after a report naming the fiber),
//!   as it does for threads.
//! * A destructor that panics while shutdown unwinds a suspended fiber
//!   aborts the process (Rust aborts on a panic during unwinding).
//!
//! ## Misuse that is refused or contained
//!
//! * Workers follow the process CPU affinity ([`topology::allowed_cpus`]);
//!   at most [`runtime::max_workers`] workers; topologies are bounded
//!   ([`topology::MAX_PUS`], [`topology::MAX_NODES`], [`topology::MAX_ARITY`]).
//! * A panicking destructor of a detached fiber's result is contained.
//! * Dropping the last `Arc<Runtime>` inside one of its own fibers returns
//!   at once and completes the shutdown on a worker thread (see
//!   [`Runtime::shutdown`]).
//! * In a `fork()`ed child the parent's runtime refuses work
//!   ([`SpawnErrorKind::ForkedChild`]) and its drop leaks it.
//! * Unguarded stacks have no guard page: unbounded recursion there is a
//!   bare SIGSEGV (see [`runtime::Builder::unguarded_stacks`]).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod fiber;
pub mod graph;
#[allow(dead_code)]
pub(crate) mod loom;
pub mod net;
pub mod policy;
pub mod runtime;
pub mod signal;
pub mod sim;
pub mod sync;
pub mod topology;

/// Thin public wrappers around the protocol code, for the project's loom
/// models only (built with `RUSTFLAGS="--cfg loom"`).
#[cfg(loom)]
#[doc(hidden)]
pub use crate::loom::model as __loom;

pub use policy::{Policy, PolicyOptions, StealChunk};
pub use runtime::error::{BuildError, BuildErrorKind, JoinError, SpawnError, SpawnErrorKind};
pub use runtime::{Builder, NodeStats, Runtime, Stats, WorkerStats};
pub use topology::{NumaNode, Topology, TopologyError, TopologyErrorKind, WorkerSlot};
