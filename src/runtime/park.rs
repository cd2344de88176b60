//! The door's parking calls: how any code parks the caller (a fiber or a
//! plain thread) and how a waiter is woken.
//!
//! Protocol: `README.md` in this directory, "Parking and why no wake-up is
//! lost".

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::loom::thread::{self, Thread};
use crate::runtime::cancel::cancel_point;
use crate::runtime::context::{self, cannot_suspend, current_is_cancelling, current_task, current_task_ref};
use crate::runtime::shared::Shared;
use crate::runtime::task::join::current_shared_for_drain;
use crate::runtime::task::{wait_kind, Suspend, Task, TaskRef, CANCEL, DRAINING};
use crate::runtime::wait::{notify_parked, unpark_thread};

/// Someone blocked until an event: a parked fiber or a parked thread, or
/// an async task awaiting a join (`fiber::future::JoinFuture`).
#[derive(Clone)]
pub(crate) enum Waiter {
    Fiber { task: TaskRef, shared: Arc<Shared> },
    Thread(Thread),
    Async(std::task::Waker),
}

impl Waiter {
    /// The caller, as a waiter.
    pub(crate) fn current() -> Waiter {
        match context::current_task_and_shared() {
            Some((task, shared)) => Waiter::Fiber { task, shared },
            None => Waiter::Thread(thread::current()),
        }
    }

    /// The waiter is a fiber (not a plain thread).
    pub(crate) fn is_fiber(&self) -> bool {
        matches!(self, Waiter::Fiber { .. })
    }

    pub(crate) fn same(&self, o: &Waiter) -> bool {
        match (self, o) {
            (Waiter::Fiber { task: a, .. }, Waiter::Fiber { task: b, .. }) => Arc::ptr_eq(a, b),
            (Waiter::Thread(a), Waiter::Thread(b)) => a.id() == b.id(),
            (Waiter::Async(a), Waiter::Async(b)) => a.will_wake(b),
            _ => false,
        }
    }

    /// Wake the waiter (a token if it is not parked yet): a fiber or a
    /// thread by the same two steps as the runtime's other waiters
    /// (`wait::notify_parked`, `wait::unpark_thread`).
    pub(crate) fn wake(self) {
        match self {
            Waiter::Fiber { task, shared } => {
                // SAFETY: `task` is a live `Arc<Task>`: we hold a count.
                if let Some(t) = unsafe { notify_parked(Arc::as_ptr(&task)) } {
                    shared.reschedule(t);
                }
                // Our count is released here; the run queue holds the
                // reference the parked task held on itself.
            }
            Waiter::Thread(t) => unpark_thread(&t),
            Waiter::Async(w) => w.wake(),
        }
    }
}

/// Block the caller (fiber or thread) until woken; may return spuriously.
#[inline] // the switch inlined into the waiting loop: see `fiber::yield_now`
pub(crate) fn park() {
    let t = context::current_task_ptr();
    if t.is_null() {
        // Counted for the deadlock proof: this thread wakes nobody now.
        let _blocked = crate::runtime::deadlock::ThreadBlocked::enter();
        thread::park();
    } else {
        park_task(t);
    }
}

/// Block the caller until woken or until `deadline`; may return early
/// (spuriously): callers loop on their condition and compare the time.
pub(crate) fn park_until(deadline: Instant) {
    let now = Instant::now();
    if now >= deadline {
        return;
    }
    let (Some(w), Some(task)) = (context::worker(), current_task_ref()) else {
        std::thread::park_timeout(deadline - now);
        return;
    };
    // A cancellation point before the timer is armed: a fiber that unwinds
    // here leaves no timer behind.
    cancel_point(&task);
    let t: *const Task = &*task;
    // The worker is not used after the park below.
    w.add_timer(deadline, task);
    let _over = TimedWaitOver(t);
    park_current();
}

/// Held across a park whose timer is armed: the timer is stale once the
/// wait is over, whether the park returns or unwinds (a cancellation).
/// Holds the running fiber's own task.
pub(crate) struct TimedWaitOver(pub(crate) *const Task);

impl Drop for TimedWaitOver {
    fn drop(&mut self) {
        // SAFETY: the running fiber's own task, alive while its fiber runs,
        // which it does again here (after the park, or while it unwinds
        // from it).
        unsafe { (*self.0).timed_wait_over() };
    }
}

pub(crate) fn suspend(reason: Suspend) {
    suspend_task(context::current_task_ptr(), reason);
}

/// Suspend the running fiber, whose task is `t` (read from TLS by the
/// caller just before: one accessor call per suspension, not two).
#[inline(always)]
pub(crate) fn suspend_task(t: *const Task, reason: Suspend) {
    debug_assert!(!t.is_null());
    // SAFETY: we are the running fiber, so our task's body is ours; we only
    // read the yielder pointer, which points into our own stack and was set
    // when the coroutine started.
    let y = unsafe { (*(*t).body_ptr()).yielder };
    debug_assert!(!y.is_null());
    #[cfg(feature = "tracing")]
    // SAFETY: `t` is our own task, alive while we run.
    let was_on = unsafe {
        crate::runtime::dump::fiber_tracing::before_suspend(&*t, &reason);
        crate::runtime::dump::fiber_tracing::current_worker()
    };
    // A park: where the resumption will start reading this stack (a
    // prefetch hint for whoever resumes the fiber woken before us,
    // `Task::chain_prefetch`). Yields, hand-offs and reclaims are resumed
    // by the worker that just ran them, from warm lines: nothing to note.
    if matches!(reason, Suspend::Park) {
        let here = 0u8;
        // SAFETY: `t` is our own task, alive while we run.
        unsafe { (*t).note_resume_sp(std::hint::black_box(&here) as *const u8 as usize) };
    }
    // SAFETY: the yielder lives on this fiber's stack for its whole life.
    unsafe { (*y).suspend(reason) };
    #[cfg(feature = "tracing")]
    // SAFETY: as above; we run again.
    unsafe {
        crate::runtime::dump::fiber_tracing::after_resume(&*t, was_on)
    };
    // From here on we may be on another thread: re-read all TLS (`t` is
    // not TLS: it is our own task, the same on every thread).
}

/// Park the running fiber until `Shared::wake` (or return at once if a
/// wake-up token is pending). May return spuriously: callers loop.
pub(crate) fn park_current() {
    park_task(context::current_task_ptr());
}

/// `park_current` for a caller that already read the running task `t`
/// (null on a plain thread) from TLS, without suspending since.
///
/// Every park of the crate comes here, so this is where a fiber meets a
/// cancellation request (`cancel` module docs, step 2): on the way in,
/// before the park (a request whose wake-up was consumed earlier, by a
/// shielded wait or by a park whose `Cancelled` unwind was caught, finds
/// no token to end this park), and on the way out of every park, a
/// pending wake-up token included.
#[inline]
pub(crate) fn park_task(t: *const Task) {
    if t.is_null() {
        crate::loom::thread::park();
        return;
    }
    // SAFETY: non-null CURRENT: the running task, alive while it runs (see
    // `current_task`).
    let task = unsafe { &*t };
    if needs_slow_park(task) {
        park_task_slow(task);
        return;
    }
    park_task_fast(task);
}

/// `park_task` for a waiting loop that leaves when the caller cannot
/// suspend (`wait::Node::park_or_refuse`): `false`, without parking, if
/// the fiber `t` (not null) cannot suspend; else `park_task` (its
/// cancellation points included) and `true`.
#[inline(always)]
pub(crate) fn park_task_or_refuse(t: *const Task) -> bool {
    debug_assert!(!t.is_null());
    // SAFETY: the running fiber's own task, alive while it runs.
    let task = unsafe { &*t };
    if needs_slow_park(task) {
        if cannot_suspend(task) {
            return false;
        }
        park_task_slow(task);
        return true;
    }
    park_task_fast(task);
    true
}

/// One load of the flags for the entry's cancellation point and the
/// drain's mark, and the panic count: whether a park must take the slow
/// path (which checks each of them again, in the order of the rules).
#[inline(always)]
fn needs_slow_park(task: &Task) -> bool {
    task.flags_load() & (CANCEL | DRAINING) != 0 || std::thread::panicking()
}

/// A park with neither a cancellation request nor the drain's mark, by a
/// fiber that is not unwinding: no entry check left to make.
#[inline(always)]
fn park_task_fast(task: &Task) {
    if !task.take_token() {
        suspend_task(task, Suspend::Park);
    }
    cancel_point(task);
}

/// A park that found a flag or a panic on entry: the cancellation point,
/// the token, the cannot-suspend check, the park and the cancellation
/// point on the way out, one by one.
#[cold]
#[inline(never)]
fn park_task_slow(task: &Task) {
    cancel_point(task);
    if !task.take_token() {
        if cannot_suspend(task) {
            return;
        }
        suspend_task(task, Suspend::Park);
    }
    cancel_point(task);
}

/// Let other fibers run (see `fiber::yield_now`).
#[inline]
pub(crate) fn yield_now() {
    // Inlined into the caller on purpose: the fiber then resumes inside its
    // caller's frame, and the worker's `call` into the fiber is matched by
    // the `ret` of the fiber's next switch back, so the CPU's return-address
    // predictor stays right (a non-inlined `yield_now` returns to its
    // caller where the predictor expects the worker, twice per yield). The
    // TLS read is therefore the non-inlined accessor (see `context`).
    let t = context::current_task_ptr();
    if t.is_null() {
        std::thread::yield_now();
        return;
    }
    // SAFETY: as in `current_task`; not used after the suspension.
    let task = unsafe { &*t };
    // One load of the flags for the drain's mark and a cancellation
    // request (a cancellation point on entry: `cancel` module docs); the
    // unpark token sends it to the slow path too, which then suspends.
    if task.flags_load() != 0 || std::thread::panicking() {
        if cannot_suspend(task) {
            return;
        }
        cancel_point(task);
    }
    suspend_task(t, Suspend::Yield);
}

/// A failed `try_lock` / `try_acquire` / `try_recv` in a fiber gives the
/// other fibers of its worker a turn (as Boost.Fiber's `try_lock` does):
/// a loop that spins on it then lets the holder (or a timer that wakes the
/// holder) run, even on one worker. Outside a fiber, or in a fiber that
/// cannot suspend, nothing happens.
#[inline]
pub(crate) fn yield_after_failed_try() {
    let t = context::current_task_ptr();
    if t.is_null() {
        return;
    }
    // SAFETY: as in `current_task`; not used after the suspension.
    if cannot_suspend(unsafe { &*t }) {
        return;
    }
    suspend_task(t, Suspend::Yield);
}

/// Park the caller for at least `d` (see `fiber::sleep`).
#[track_caller]
pub(crate) fn sleep(d: Duration) {
    if current_is_cancelling() || current_shared_for_drain().is_some() {
        // A destructor run by the shutdown drain: nothing can wake a timer
        // any more and sleeping would only delay the shutdown.
        return;
    }
    let (Some(t), Some(_)) = (current_task(), context::worker()) else {
        std::thread::sleep(d);
        return;
    };
    let Some(deadline) = Instant::now().checked_add(d) else {
        // Effectively forever: park until woken spuriously, again and again.
        loop {
            sleep(Duration::from_secs(3600 * 24));
        }
    };
    if cannot_suspend(t) {
        std::thread::sleep(d);
        return;
    }
    // A cancellation point on entry, whatever the duration (`cancel`
    // module docs, step 2).
    cancel_point(t);
    context::set_task_wait_reason(t, wait_kind::SLEEP, crate::runtime::dump::deadline_code(deadline));
    // The reason is cleared however the sleep ends (a cancellation
    // unwinds from `park_until`). `t` is our own task, the same after the
    // parks (on any thread).
    struct Clear<'t>(&'t Task);
    impl Drop for Clear<'_> {
        fn drop(&mut self) {
            context::set_task_wait_reason(self.0, wait_kind::NONE, 0);
        }
    }
    let _clear = Clear(t);
    loop {
        if Instant::now() >= deadline {
            break;
        }
        park_until(deadline);
        if current_task().is_some_and(cannot_suspend) {
            break;
        }
    }
}
