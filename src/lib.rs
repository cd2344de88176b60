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
//! ## Pieces
//!
//! * [`Runtime`]: workers (one per PU by default, pinned with hwloc),
//!   [`Runtime::block_on`], [`Runtime::spawn`], [`Runtime::stats`], shutdown
//!   on drop.
//! * [`fiber`]: `spawn`, `yield_now`, `await_fiber`, `join` (fork-join),
//!   `when_all`, `when_any`, `scope`, `sleep`, `spawn_pinned`, `current`,
//!   `JoinSet` (results in finishing order), `Builder::eager`;
//!   cancellation (`JoinHandle::cancel`, `shield`), fiber-locals
//!   ([`fiber_local!`]), `park` / `unpark`, and futures both ways
//!   (`block_on_future`, `JoinHandle: IntoFuture`).
//! * [`signal`]: `ctrl_c()` and named signals, waited for by a fiber.
//! * [`runtime::Handle`]: `Runtime::handle()`, `Handle::current()`,
//!   `Handle::spawn` from any thread.
//! * [`sync`]: `Mutex`, `Condvar`, `RwLock`, `Semaphore`, `Barrier`,
//!   `WaitGroup`, `Event`, `AutoResetEvent`, `oneshot` (promise/future),
//!   channels; they park the fiber, not the thread, and work from plain
//!   threads too.
//! * [`Policy`]: `RoundRobin`, `RandomSteal`, `NumaSteal`, `LoadSteal`,
//!   `HybridSteal` (NLLASS), `Nlh` (default); [`policy`] has them as pure
//!   functions, which [`sim`] reuses to simulate machines we do not have.
//! * [`Topology`]: detected with hwloc, or synthetic, XML, uniform.
//! * [`graph`]: NABBIT task graphs, static and dynamic.
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
//! * A fiber may resume on another worker after any suspension point: do not
//!   hold `thread_local!` references across one; use [`fiber::spawn_pinned`]
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

mod error;
pub mod fiber;
#[allow(dead_code)]
pub(crate) mod loom;
pub mod graph;
pub mod policy;
pub mod net;
pub(crate) mod reactor;
pub mod runtime;
pub mod signal;
pub mod sim;
pub mod sync;
pub mod topology;
mod worker;

/// Thin public wrappers around the protocol code, for the loom models in
/// `tests/loom.rs` only (built with `RUSTFLAGS="--cfg loom"`).
#[cfg(loom)]
#[doc(hidden)]
pub use crate::loom::model as __loom;

pub use error::{BuildError, BuildErrorKind, JoinError, SpawnError, SpawnErrorKind};
pub use policy::{Policy, PolicyOptions, StealChunk};
pub use runtime::{Builder, NodeStats, Runtime, Stats, WorkerStats};
pub use topology::{NumaNode, Topology, TopologyError, TopologyErrorKind, WorkerSlot};
