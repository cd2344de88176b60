//! The engine's side of `fiber::park`, `park_timeout`, `current_handle`
//! and [`Fiber::unpark`]: `std::thread::park` for fibers.
//!
//! # The token
//!
//! Each fiber has one unpark token (`UNPARK` in `Task::flags`), separate
//! from the wake-up token the runtime's own waits use (`NOTIFIED` in the
//! task state), so a wait on a lock or a channel never consumes a user's
//! `unpark`:
//!
//! 1. `unpark` sets the token (`fetch_or`, release) and then wakes the
//!    fiber like any waker (`transition_to_notified`): pushes it if it is
//!    parked, else leaves a wake-up token.
//! 2. `park` consumes the token and returns if it was set; otherwise it
//!    parks once (any wake-up ends that park) and then consumes the token
//!    if it arrived meanwhile.
//!
//! No unpark is lost: the token is set before the wake-up, and the park
//! either saw it or is ended by that wake-up (the state CAS orders them).
//! `park` may return without an `unpark` (a wake-up meant for an earlier
//! wait, a timer): callers loop on their own condition, as with std.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::runtime::context::{self, set_task_wait_reason};
use crate::runtime::park::park_task;
use crate::runtime::cancel::cancel_point;
use crate::runtime::shared::Shared;
use crate::runtime::task::{wait_kind, Task, TaskRef, UNPARK};

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
        self.task.flags_or(UNPARK);
        self.wake_only();
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

/// Consume the running fiber's unpark token if it is set.
#[inline]
fn take_unpark(t: &Task) -> bool {
    if t.flags_load() & UNPARK != 0 {
        t.flags_and(!UNPARK);
        true
    } else {
        false
    }
}

/// Resets the wait reason even when the park unwinds (cancellation).
struct ClearWait(*const Task);
impl Drop for ClearWait {
    fn drop(&mut self) {
        // SAFETY: the running fiber's own task (made by `park` from TLS).
        set_task_wait_reason(unsafe { &*self.0 }, wait_kind::NONE, 0);
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
    if take_unpark(task) {
        cancel_point(task);
        return;
    }
    set_task_wait_reason(task, wait_kind::PARK, 0);
    let _clear = ClearWait(t);
    park_task(t);
    take_unpark(task);
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
    if take_unpark(task) {
        cancel_point(task);
        return;
    }
    let Some(deadline) = Instant::now().checked_add(d) else {
        park(); // beyond any clock: no timer
        return;
    };
    if let Some(me) = context::current_task_ref() {
        // The worker is not used after the park below.
        w.add_timer(deadline, me);
    }
    set_task_wait_reason(task, wait_kind::PARK, 0);
    struct Over(*const Task);
    impl Drop for Over {
        fn drop(&mut self) {
            // SAFETY: the running fiber's own task (from TLS above); the
            // timer armed for this wait is stale from now on.
            let t = unsafe { &*self.0 };
            t.timed_wait_over();
            set_task_wait_reason(t, wait_kind::NONE, 0);
        }
    }
    let _over = Over(t);
    park_task(t);
    take_unpark(task);
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn f<T: Send + Sync>() {}
    f::<Fiber>();
}
