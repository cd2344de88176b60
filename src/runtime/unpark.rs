//! The engine's side of `fiber::park`, `park_timeout`, `current_handle`
//! and [`Fiber::unpark`]: `std::thread::park` for fibers.
//!
//! # The token
//!
//! Each fiber has one unpark token (`UNPARK` in `Task::flags`), separate
//! from the wake-up token the runtime's own waits use (`NOTIFIED` in the
//! task state), so a wait on a lock or a channel never consumes a user's
//! `unpark`. Like `std::thread`'s, a fiber holds at most one token, and an
//! `unpark` that finds the fiber outside `park` leaves nothing but that
//! token (no wake-up token that a later `park` would mistake for a second
//! unpark). The fiber marks its time inside `park` with `PARKING` in the
//! same flag byte, so both sides decide with one read-modify-write each,
//! ordered by that byte's modification order:
//!
//! 1. `unpark` sets the token (`fetch_or`). Only when the previous flags
//!    show the fiber inside `park` (`PARKING`) without a token does it
//!    wake it like any waker (`transition_to_notified`: pushes it if it
//!    is parked, else leaves a wake-up token that the park consumes).
//!    Outside `park` the token alone is enough: the fiber sees it on its
//!    way in. With a token already set, the unpark that set it did the
//!    waking.
//! 2. `park` sets `PARKING` (`fetch_or`). If the previous flags hold the
//!    token, it clears both and returns: no unpark woke it. Otherwise it
//!    parks once (any wake-up ends that park), then clears `PARKING` and
//!    the token together (`fetch_and`); if the token had come, its wake-up
//!    either ended the park or left a wake-up token, which it consumes too.
//!
//! No unpark is lost: an unpark whose `fetch_or` comes before `park`'s is
//! seen by it; one that comes after sees `PARKING` and wakes the fiber, and
//! the park either has not suspended yet (the wake-up token ends it at
//! once) or is ended by that wake-up (the state CAS orders them). The
//! loom model `unpark_vs_park` (`tests/loom/unpark.rs`) runs this code.
//!
//! `park` may return without an `unpark` (a wake-up meant for an earlier
//! wait, its timeout): callers loop on their own condition, as with std.
//! One such early return is left where a park ends by its timeout while an
//! `unpark` is half done (it has set the token and not yet woken the
//! fiber): the token is consumed by that park and the late wake-up ends
//! the next one early.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::runtime::cancel::cancel_point;
use crate::runtime::context::{self, set_task_wait_reason};
use crate::runtime::park::{park_task, TimedWaitOver};
use crate::runtime::shared::Shared;
use crate::runtime::task::{wait_kind, Task, TaskRef, PARKING, UNPARK};

/// A handle on a fiber, for [`unpark`](Fiber::unpark) (`std::thread::Thread`
/// shape). Get one with [`fiber::current_handle`](crate::fiber::current_handle); it is `Clone + Send + Sync`, so
/// another fiber or a plain thread can wake the fiber.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// use std::sync::atomic::{AtomicBool, Ordering};
/// use std::sync::Arc;
///
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let me = fiber::current_handle().unwrap();
///     let flag = Arc::new(AtomicBool::new(false));
///     let f2 = flag.clone();
///     let _waker = fiber::spawn(move || {
///         f2.store(true, Ordering::Release);
///         me.unpark();
///     });
///     while !flag.load(Ordering::Acquire) {
///         fiber::park(); // may return spuriously: loop on the condition
///     }
/// });
/// ```
#[derive(Clone)]
pub struct Fiber {
    task: TaskRef,
    shared: Arc<Shared>,
}

impl Fiber {
    /// Wake the fiber if it is in [`fiber::park`](crate::fiber::park) / [`park_timeout`](crate::fiber::park_timeout); otherwise
    /// its next `park` returns at once (one token: several unparks before a
    /// park release one park). Unparking a finished fiber does nothing.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     fiber::current_handle().unwrap().unpark();
    ///     fiber::park(); // returns at once: the token was there
    /// });
    /// ```
    pub fn unpark(&self) {
        if unpark_token(&self.task) {
            self.wake_only();
        }
    }

    /// The fiber's id (as in [`FiberInfo::id`](crate::fiber::FiberInfo::id)).
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     assert_eq!(fiber::current_handle().unwrap().id(), fiber::current().unwrap().id);
    /// });
    /// ```
    pub fn id(&self) -> u64 {
        self.task.id
    }

    /// The fiber's name, if it was given one.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let n = rt.block_on(|| {
    ///     let h = fiber::Builder::new().name("worker-a").spawn(|| {
    ///         fiber::current_handle().unwrap().name().map(str::to_owned)
    ///     }).unwrap();
    ///     fiber::await_fiber(h)
    /// });
    /// assert_eq!(n.as_deref(), Some("worker-a"));
    /// ```
    pub fn name(&self) -> Option<&str> {
        self.task.name.as_deref()
    }
}

impl std::fmt::Debug for Fiber {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fiber").field("id", &self.task.id).field("name", &self.name()).finish()
    }
}

impl Fiber {
    /// Wake without a token (`block_on_future`'s waker keeps its own flag).
    pub(crate) fn wake_only(&self) {
        // SAFETY: `self.task` is a live `Arc<Task>`.
        if let Some(t) = unsafe { crate::runtime::wait::notify_parked(Arc::as_ptr(&self.task)) } {
            self.shared.reschedule(t);
        }
    }
}

/// A handle on the running fiber; `None` outside a fiber.
pub(crate) fn current() -> Option<Fiber> {
    let (task, shared) = context::current_task_and_shared()?;
    Some(Fiber { task, shared })
}

/// Step 1 of the token protocol: set `t`'s token; `true` when the caller
/// must wake the fiber (it is inside `park` and had no token).
#[inline]
pub(crate) fn unpark_token(t: &Task) -> bool {
    t.flags_or(UNPARK) & (UNPARK | PARKING) == PARKING
}

/// Step 2, on the way in (the running fiber `t`): mark it inside `park`;
/// `true` when its token was set, which is then consumed (and the mark
/// cleared): the park returns at once.
#[inline]
pub(crate) fn enter_park(t: &Task) -> bool {
    if t.flags_or(PARKING) & UNPARK != 0 {
        t.flags_and(!(PARKING | UNPARK));
        true
    } else {
        false
    }
}

/// Step 2, on the way out (the running fiber `t`, its park over): clear
/// the mark and consume the token. A token that came during the park was
/// set by an unpark that wakes the fiber: its wake-up ended the park or
/// left a wake-up token, consumed here, so that it does not end the next
/// park. Returns whether the token had come.
#[inline]
pub(crate) fn leave_park(t: &Task) -> bool {
    let came = t.flags_and(!(PARKING | UNPARK)) & UNPARK != 0;
    if came {
        t.take_token();
    }
    came
}

/// Resets the wait reason and leaves the park (`leave_park`) even when the
/// park unwinds (cancellation): a fiber outside `park` never keeps
/// `PARKING`.
struct Leave(*const Task);
impl Drop for Leave {
    fn drop(&mut self) {
        // SAFETY: the running fiber's own task (from TLS by `park` or
        // `park_timeout`), alive while its fiber runs.
        let t = unsafe { &*self.0 };
        leave_park(t);
        set_task_wait_reason(t, wait_kind::NONE, 0);
    }
}

/// `fiber::park`: step 2 of the token protocol; a cancellation point.
#[track_caller]
pub(crate) fn park() {
    let t = context::current_task_ptr();
    if t.is_null() {
        std::thread::park();
        return;
    }
    // SAFETY: the running task, alive while its fiber runs.
    let task = unsafe { &*t };
    if enter_park(task) {
        cancel_point(task);
        return;
    }
    set_task_wait_reason(task, wait_kind::PARK, 0);
    let leave = Leave(t);
    park_task(t);
    // Consumes the token and a wake-up token its unpark left.
    drop(leave);
    // A consumed wake-up token may have been a canceller's.
    cancel_point(task);
}

/// `fiber::park_timeout`: [`park`] for at most `d`, with a worker timer.
#[track_caller]
pub(crate) fn park_timeout(d: Duration) {
    let t = context::current_task_ptr();
    let (Some(w), false) = (context::worker(), t.is_null()) else {
        std::thread::park_timeout(d);
        return;
    };
    // SAFETY: the running task, alive while its fiber runs.
    let task = unsafe { &*t };
    let Some(deadline) = Instant::now().checked_add(d) else {
        park(); // beyond any clock: no timer
        return;
    };
    // A cancellation point before the timer is armed: a fiber that unwinds
    // here leaves no timer behind (as `park::park_until`).
    cancel_point(task);
    if enter_park(task) {
        cancel_point(task);
        return;
    }
    if let Some(me) = context::current_task_ref() {
        // The worker is not used after the park below.
        w.add_timer(deadline, me);
    }
    set_task_wait_reason(task, wait_kind::PARK, 0);
    let leave = Leave(t);
    let over = TimedWaitOver(t);
    park_task(t);
    drop(over);
    drop(leave);
    cancel_point(task);
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn f<T: Send + Sync>() {}
    f::<Fiber>();
}
