//! Fiber-aware synchronisation: these block the calling *fiber* (its worker
//! thread goes on running other fibers), and on a plain thread they block
//! the thread. Fibers and threads may share every primitive.
//!
//! | type | what | std / C++ counterpart |
//! | --- | --- | --- |
//! | [`Mutex`] | FIFO hand-off lock, `try_lock`, guards | `std::sync::Mutex`, cppcoro `async_mutex` |
//! | [`Condvar`] | `wait`, `wait_while`, `wait_timeout`, `wait_until`, `notify_*` | `std::sync::Condvar` |
//! | [`CondvarAny`] | a condition variable over any [`Lockable`] lock | Boost `condition_variable_any` |
//! | [`RwLock`] | fair reader-writer lock | `std::sync::RwLock` |
//! | [`Semaphore`] | counted permits released on drop | corolib/cppcoro semaphores |
//! | [`Barrier`] | cyclic barrier with a leader | `std::sync::Barrier` |
//! | [`WaitGroup`] | `add`/`done`/`wait` | Go `sync.WaitGroup`, C++ `latch` |
//! | [`Event`] | manual-reset event | cppcoro `async_manual_reset_event` |
//! | [`AutoResetEvent`] | auto-reset event: a set releases one waiter | corolib `auto_reset_event`, cppcoro `async_auto_reset_event` |
//! | [`oneshot()`] | one value or error, [`oneshot::Promise`] → [`oneshot::Future`] | corolib `async_operation<T>`, Boost.Fiber `promise`/`future` |
//! | [`SharedFuture`] | many readers of one completion ([`oneshot::Future::share`]) | Boost.Fiber `shared_future` |
//! | [`PackagedTask`] | a function whose run completes its future | Boost.Fiber `packaged_task` |
//! | [`channel`] | `bounded(cap)` (0 = rendezvous), `unbounded()`, `close()` | `crossbeam-channel`, Go channels, cppcoro queues |
//! | [`select!`](crate::select) / [`Select`] | wait on several channel operations, with a default or deadline arm | Go `select`, crossbeam `select!` / `Select` |
//!
//! ```
//! use std::sync::Arc;
//! use numafiber::{fiber, sync::{channel, Mutex}, Runtime};
//! let rt = Runtime::builder().workers(2).build().unwrap();
//! let n = rt.block_on(|| {
//!     let seen = Arc::new(Mutex::new(0));
//!     let (tx, rx) = channel::bounded(8);
//!     let consumers: Vec<_> = (0..2).map(|_| {
//!         let (rx, seen) = (rx.clone(), seen.clone());
//!         fiber::spawn(move || for _ in rx { *seen.lock() += 1; })
//!     }).collect();
//!     for i in 0..100 { tx.send(i).unwrap(); }
//!     drop(tx);
//!     fiber::when_all(consumers);
//!     let n = *seen.lock();
//!     n
//! });
//! assert_eq!(n, 100);
//! ```
//!
//! # How waiting works
//!
//! Every primitive sits on one wait-queue core: an internal lock (a spin
//! lock that yields, then sleeps, while its holder is preempted) guards the
//! primitive's state and a FIFO of waiters. That internal lock is held for
//! a few instructions and **never across a park, a wake-up or user code**,
//! so it cannot block a worker for long and cannot deadlock with fibers. A waiter
//! is granted by being popped from the FIFO (hand-off), then woken; wake-ups
//! that arrive before the park are kept as a token, so none is lost. The
//! granter hands over what was waited for *into* the waiter (a channel
//! value goes into a cell on the blocked receiver's stack), so a hand-off
//! takes the internal lock once on each side and the woken waiter returns
//! without locking again; a fiber's wait allocates nothing and counts no
//! reference.
//!
//! A fiber parked here may be resumed by a worker of another NUMA node (it
//! migrates); fibers spawned with
//! [`spawn_pinned`](crate::fiber::spawn_pinned) return to their own worker.
//! Timeouts (`wait_timeout`, `recv_timeout`, ...) and their deadline forms
//! (`wait_until`, `recv_deadline`, `try_lock_until`, ...) use the worker's
//! timer inside fibers and `park_timeout` on threads.
//!
//! # Shutdown
//!
//! When a runtime shuts down, fibers still parked here are destroyed: their
//! stacks unwind, their queue entries are removed and anything they were
//! granted (a lock, a permit) is passed on. A fiber being destroyed cannot
//! park: `recv`/`send` fail, `Condvar::wait`, `Barrier::wait`,
//! `WaitGroup::wait` and `Event::wait` return at once, and an acquire that
//! is contended (`Mutex::lock`, `RwLock`, `Semaphore::acquire`) polls for up
//! to a second for a plain thread to release it, then aborts the process
//! with a message (returning without the lock would be unsound, and its
//! holder can never run again).
//!
//! # Deadlock report
//!
//! When every fiber of every runtime of the process is parked on one of
//! these primitives or on a join, no timer or I/O wait is pending,
//! [`Runtime::block_on`](crate::Runtime::block_on) waits for one of them,
//! **and no other thread exists that could still wake one** (every thread
//! is a worker, blocked in a numafiber wait, or in `block_on`), `block_on`
//! panics with a report instead of hanging (after about 100 ms):
//!
//! ```text
//! all fibers are asleep - deadlock! Runtime::block_on waits for fiber 1, and no fiber of
//! the runtime can run again (3 parked, no timer pending, no other thread exists):
//!   fiber 1 (unnamed) [join of fiber 2]
//!   fiber 2 "a" [Mutex lock 0x55d1c2a0e010]
//!   fiber 3 "b" [Mutex lock 0x55d1c2a0e050]
//! ```
//!
//! That report cannot be a false alarm. When only the last condition fails
//! (a completion thread exists, as in corolib's examples, or another
//! runtime is still running), a plain thread *might* still wake a fiber:
//! after about a second the same report is printed **once** to stderr as
//! a warning ("numafiber: warning: possible deadlock ...") and `block_on`
//! keeps waiting. So a deadlock on these primitives is never a silent
//! hang, and a slow completion is never a panic.
//!
//! What the detector cannot see gets neither the report nor the warning:
//! a fiber parked on a socket (`crate::net`), in
//! [`fiber::block_on_future`](crate::fiber::block_on_future) (the future's
//! waker may be held outside the runtime) or behind a
//! [`spawn_blocking`](crate::fiber::spawn_blocking) /
//! [`block_in_place`](crate::fiber::block_in_place) call still running,
//! and every fiber waiting for it; any state with a timer armed (it waits
//! until the timer is due, also for a timed wait that already ended); a worker that does not park (a blocking OS call
//! or `std::sync` lock in a fiber, a loop that computes), including a
//! deadlock among some fibers while others run; and waits outside
//! `block_on`, or while its own fiber runs.
//! [`Builder::strict_deadlock_detection`](crate::Builder::strict_deadlock_detection)
//! restores the old rule (panic once this runtime alone has been quiescent
//! for about 100 ms, whatever other threads exist), and
//! [`Builder::deadlock_detection`](crate::Builder::deadlock_detection)
//! turns the check off. Before it panics, `block_on` destroys its root
//! fiber (running its destructors), because the root may borrow from the
//! caller's frame. The proof rests on one timing assumption: a thread
//! counted as blocked and then woken is run by the OS within the check's
//! window (about 100 ms).

mod auto_reset_event;
pub mod channel;
mod condvar;
mod condvar_any;
mod latch;
pub(crate) mod lock;
mod mutex;
pub mod oneshot;
mod packaged_task;
pub(crate) mod queue;
mod rwlock;
pub mod select;
mod semaphore;
mod shared_future;

pub use auto_reset_event::AutoResetEvent;
pub use condvar::{Condvar, WaitTimeoutResult};
pub use condvar_any::{CondvarAny, Lockable};
pub use latch::{Barrier, BarrierWaitResult, Event, WaitGroup};
pub use mutex::{Mutex, MutexGuard};
pub use oneshot::oneshot;
pub use packaged_task::{PackagedTask, TaskPanicked};
pub use rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
pub use select::{Select, SelectTimeoutError, SelectedOperation, TrySelectError};
pub use semaphore::{Semaphore, SemaphorePermit};
pub use shared_future::{SharedError, SharedFuture};
