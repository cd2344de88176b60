//! Cancellation in the engine: the request, the cancellation point in the
//! park path, shields, and the [`Cancelled`] payload. The user's calls are
//! `JoinHandle::cancel`, `fiber::shield`, `fiber::is_cancelled`.
//!
//! # Protocol
//!
//! 1. *Request.* [`request`] sets `CANCEL` in the task's `flags` (a
//!    `fetch_or`; a second request does nothing) and then wakes the task
//!    like any waker (`Task::transition_to_notified`): a parked fiber is
//!    moved to `QUEUED` and pushed by the canceller, a running or queued
//!    one keeps a wake-up token, so its next park returns at once. The
//!    flag is set *before* the wake-up, so whoever resumes the fiber finds
//!    it (the state CAS orders them).
//! 2. *Cancellation points.* A fiber checks the flag on entry to every
//!    suspension (`runtime::yield_now`, every park) and after every park
//!    returns. Every wait of the crate (locks, condition variables,
//!    channels, events, joins, sleep, socket readiness, `block_on_future`,
//!    `fiber::park`) parks through `park::park_task`, so each one is a
//!    cancellation point. A fiber that finds the flag, is not shielded
//!    ([`ShieldGuard`]) and is not already unwinding, unwinds with the
//!    payload [`Cancelled`] (`std::panic::resume_unwind`: the panic hook
//!    does not run, nothing is printed). The entry check is what keeps a
//!    request alive after its one wake-up was consumed without an unwind
//!    (by a shielded wait, or by a park whose unwind was caught): the
//!    flag stays set, and the next park unwinds before it suspends
//!    (loom model `cancel_flag_outlives_its_wake_up`). A timed park
//!    (`park::park_until`, `sleep`) checks before it arms its timer, and
//!    a timer armed for a park that unwinds goes stale with it.
//! 3. *Leaving the wait.* The unwind leaves the wait the way a forced
//!    unwind at shutdown does: each wait's drop guard takes its queue's
//!    lock and removes the fiber's entry; if the entry is gone, the fiber
//!    was granted meanwhile (the mutex handed over, a permit, a channel
//!    value put into its cell) and the guard passes the grant on (unlocks,
//!    releases the permit, hands the value back to the channel), so a
//!    grant racing with a cancellation is never lost and the queue stays
//!    consistent (`sync::queue`, step 4; loom model `cancel_vs_grant`).
//!    The fiber is resumed once: the grant and the cancellation both go
//!    through `transition_to_notified`, and only one of them wins
//!    `PARKED -> QUEUED`.
//! 4. *The end.* The fiber's entry (`packet::MainPacket::run_here`)
//!    catches the unwind and completes its packet with
//!    `JoinError::is_cancelled()`; fiber-locals are dropped before, as on
//!    any end. A fiber cancelled before it first ran never runs its
//!    closure.
//! 5. *Waits that must finish.* A wait whose caller's frame is still in
//!    use by another fiber (a stolen `fiber::join` job, the children of a
//!    `fiber::scope`) is shielded internally: a scope whose fiber is
//!    cancelled cancels its children first, waits for them
//!    (`join::wait_child_or_cancel`), and then unwinds. A `fiber::join`
//!    whose job was stolen does the same with the job
//!    (`job::StackJob::wait_or_cancel`): it cancels the job's runner fiber,
//!    or, when no runner exists yet, marks the job so that the runner the
//!    thief makes later never runs the closure (`task::job` module docs,
//!    loom model `join_cancel_vs_steal`); then it waits and unwinds. A
//!    join or scope inside the caller's own shield passes nothing on.

use std::any::Any;
use std::marker::PhantomData;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::runtime::context;
use crate::runtime::shared::Shared;
use crate::runtime::task::locals::end_of_fiber;
use crate::runtime::task::packet::drop_on_fiber;
use crate::runtime::task::{Task, TaskRef, CANCEL};

/// The payload of a cancellation unwind (the fiber's
/// [`JoinHandle::cancel`](crate::fiber::JoinHandle::cancel) was called):
/// what a `catch_unwind` inside a cancelled fiber catches. Code that
/// catches panics should let it through (`resume_unwind`), or the
/// cancellation is swallowed there: the fiber runs on, and the flag stays
/// set, so its next suspension point (any wait of the crate, `sleep`,
/// `fiber::park` or `yield_now`) unwinds again, without a second `cancel()`.
///
/// ```
/// use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
/// use numafiber::{fiber, sync, Runtime};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| {
///     let ev = std::sync::Arc::new(sync::Event::new());
///     let ev2 = ev.clone();
///     let h = fiber::spawn(move || {
///         let r = catch_unwind(AssertUnwindSafe(|| ev2.wait()));
///         match r {
///             Err(p) if p.is::<fiber::Cancelled>() => resume_unwind(p), // let it through
///             Err(p) => resume_unwind(p),
///             Ok(()) => unreachable!("nobody sets the event"),
///         }
///     });
///     fiber::yield_now(); // let it park
///     h.cancel();
///     assert!(h.join().unwrap_err().is_cancelled());
/// });
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the fiber was cancelled")
    }
}

impl std::error::Error for Cancelled {}

/// A cancellation point (step 2): unwind with [`Cancelled`] if a
/// cancellation was requested and the fiber is neither shielded nor
/// unwinding already. One load on the fast path.
#[inline(always)]
pub(crate) fn cancel_point(t: &Task) {
    if t.flags_load() & CANCEL != 0 {
        cancel_point_slow(t);
    }
}

/// Run a spawned fiber's closure `f` for its entry
/// (`packet::MainPacket::run_here`), catching its unwind: not at all when
/// the fiber was cancelled before it first ran (step 4, the result is then
/// a [`Cancelled`] unwind), and with the fiber's locals dropped after it,
/// before the result is published (`task::locals`, rule 3); a destructor's
/// panic there is the fiber's panic unless it already failed. A fiber the
/// drain destroys has its locals dropped by the drain.
#[inline]
pub(crate) fn run_main<T>(f: impl FnOnce() -> T) -> std::thread::Result<T> {
    let task = context::current_task();
    #[cfg(feature = "tracing")]
    if let Some(t) = task {
        crate::runtime::dump::fiber_tracing::fiber_start(t);
    }
    let r = if task.is_some_and(|t| t.flags_load() & CANCEL != 0) {
        catch_unwind(AssertUnwindSafe(move || drop(f))).and(Err(Box::new(Cancelled) as Box<dyn Any + Send>))
    } else {
        catch_unwind(AssertUnwindSafe(f))
    };
    if let Some(t) = task {
        crate::runtime::dump::trace::at_end(t);
        #[cfg(feature = "tracing")]
        crate::runtime::dump::fiber_tracing::fiber_end(t);
    }
    match task {
        Some(t) if !t.is_cancelling() => match (r, end_of_fiber(t)) {
            (Ok(v), Err(p)) => {
                drop_on_fiber(v);
                Err(p)
            }
            (r, Err(p)) => {
                drop_on_fiber(p);
                r
            }
            (r, Ok(())) => r,
        },
        _ => r,
    }
}

/// [`cancel_point`] for the running fiber; nothing on a plain thread.
pub(crate) fn cancel_point_current() {
    if let Some(t) = context::current_task() {
        cancel_point(t);
    }
}

/// Step 2, slow path: the flag is set. Unwind unless shielded or already
/// unwinding.
#[cold]
#[inline(never)]
pub(crate) fn cancel_point_slow(t: &Task) {
    if t.flags_load() & CANCEL != 0 && t.shield.get() == 0 && !std::thread::panicking() && !t.is_cancelling() {
        std::panic::resume_unwind(Box::new(Cancelled));
    }
}

/// Step 1: request the cancellation of `task`, waking it through `wake`
/// (which gets the task's own reference when the caller won
/// `PARKED -> QUEUED`, and must push it to a queue).
pub(crate) fn request(task: &TaskRef, wake: impl FnOnce(TaskRef)) {
    if task.flags_or(CANCEL) & CANCEL != 0 {
        return; // requested before: that request woke it
    }
    // SAFETY: `task` is a live `Arc<Task>`.
    if let Some(t) = unsafe { crate::runtime::wait::notify_parked(Arc::as_ptr(task)) } {
        wake(t);
    }
}

/// Request the cancellation of `task`, a fiber of the runtime at `shared`
/// (an address, no count: `JoinHandle` keeps only that). The runtime is
/// needed only to push a fiber this call moved out of `PARKED`. On one of
/// its workers it is alive (the worker holds an `Arc`); elsewhere it is
/// looked up among the live runtimes and held while it is used. A parked
/// fiber's runtime is alive (it outlives its fibers), so a runtime found at
/// the same address while the fiber is still parked is that one. None
/// found: the runtime is gone and its fibers are finished or destroyed,
/// so setting the flag is all there is to do.
pub(crate) fn request_at(task: &TaskRef, shared: *const Shared) {
    if context::current_shared_ptr() == shared {
        // SAFETY: `shared` is the `Arc::as_ptr` of this thread's worker's
        // live runtime; `ManuallyDrop` keeps its count.
        let shared = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(shared) });
        request(task, |t| shared.reschedule(t));
    } else if let Some(shared) = crate::runtime::deadlock::runtime_at(shared) {
        request(task, |t| shared.reschedule(t));
    } else {
        task.flags_or(CANCEL);
    }
}

/// Request the cancellation of `task`, a fiber of `shared` (a scope's
/// children).
pub(crate) fn request_in(task: &TaskRef, shared: &Arc<Shared>) {
    request(task, |t| shared.reschedule(t));
}

/// A cancellation was requested for the running fiber, shielded or not.
/// `false` outside a fiber.
pub(crate) fn current_requested() -> bool {
    context::current_task().is_some_and(|t| t.flags_load() & CANCEL != 0)
}

/// A shield held as a guard (see [`fiber::shield`](crate::fiber::shield)):
/// the running fiber ignores cancellation requests until the guard is
/// dropped. `!Send`: it belongs to the fiber that made it.
///
/// ```
/// use numafiber::fiber;
/// let g = fiber::ShieldGuard::new();
/// // ... a section that must not be interrupted ...
/// drop(g);
/// ```
pub struct ShieldGuard {
    task: Option<TaskRef>,
    _not_send: PhantomData<*const ()>,
}

impl ShieldGuard {
    /// Shield the running fiber (nothing outside a fiber).
    ///
    /// # Panics
    /// If shields are nested more than 65,535 deep in one fiber.
    ///
    /// ```
    /// let _g = numafiber::fiber::ShieldGuard::new();
    /// ```
    #[allow(clippy::new_without_default)]
    pub fn new() -> ShieldGuard {
        let task = context::current_task_ref();
        if let Some(t) = &task {
            let d = t.shield.get().checked_add(1).expect("numafiber::fiber::shield: more than 65,535 nested shields");
            t.shield.set(d);
        }
        ShieldGuard { task, _not_send: PhantomData }
    }
}

impl Drop for ShieldGuard {
    fn drop(&mut self) {
        if let Some(t) = &self.task {
            t.shield.set(t.shield.get() - 1);
        }
    }
}

impl std::fmt::Debug for ShieldGuard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShieldGuard").field("fiber", &self.task.as_ref().map(|t| t.id)).finish()
    }
}
