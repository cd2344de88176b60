//! `fiber::park`, `park_timeout`, `current_handle` and [`Fiber::unpark`]:
//! `std::thread::park` for fibers.
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

use crate::runtime::task::{TaskRef, UNPARK};
use crate::runtime::shared::Shared;
use crate::runtime::context as tls;

/// A handle on a fiber, for [`unpark`](Fiber::unpark) (`std::thread::Thread`
/// shape). Get one with [`current_handle`]; it is `Clone + Send + Sync`, so
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
    /// Wake the fiber if it is in [`park`] / [`park_timeout`]; otherwise
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
        if self.task.transition_to_notified() {
            // SAFETY: we won `PARKED -> QUEUED`: the reference the parked
            // task held on itself is ours to push (`fiber::task`, step 5).
            let t = unsafe { Arc::from_raw(Arc::as_ptr(&self.task)) };
            self.shared.reschedule(t);
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

/// A handle on the running fiber, for [`Fiber::unpark`]; `None` outside a
/// fiber (a plain thread uses `std::thread::current()` instead).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// assert!(fiber::current_handle().is_none());
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// assert!(rt.block_on(|| fiber::current_handle().is_some()));
/// ```
pub fn current_handle() -> Option<Fiber> {
    let (task, shared) = super::current_task_and_shared()?;
    Some(Fiber { task, shared })
}

/// Consume the running fiber's unpark token if it is set.
fn take_unpark(t: &crate::runtime::task::Task) -> bool {
    if t.flags_load() & UNPARK != 0 {
        t.flags_and(!UNPARK);
        true
    } else {
        false
    }
}

/// Park the running fiber (not its worker) until [`Fiber::unpark`], or
/// return at once if its token is set (`std::thread::park` semantics).
/// May return spuriously (after a wake-up meant for an earlier wait):
/// call it in a loop on your condition. Outside a fiber this is
/// `std::thread::park`. A cancellation point.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| {
///     let me = fiber::current_handle().unwrap();
///     let h = fiber::spawn(move || me.unpark());
///     fiber::park();
///     fiber::await_fiber(h);
/// });
/// ```
pub fn park() {
    let t = tls::current_task_ptr();
    if t.is_null() {
        std::thread::park();
        return;
    }
    // SAFETY: the running task, alive while its fiber runs.
    let task = unsafe { &*t };
    if take_unpark(task) {
        super::cancel_point(task);
        return;
    }
    super::set_task_wait_reason(task, crate::runtime::task::wait_kind::PARK, 0);
    let _clear = ClearWait(t);
    super::park_task(t);
    take_unpark(task);
}

/// Resets the wait reason even when the park unwinds (cancellation).
struct ClearWait(*const crate::runtime::task::Task);
impl Drop for ClearWait {
    fn drop(&mut self) {
        // SAFETY: the running fiber's own task (made by `park` from TLS).
        super::set_task_wait_reason(unsafe { &*self.0 }, crate::runtime::task::wait_kind::NONE, 0);
    }
}

/// [`park`] for at most `d`. Outside a fiber this is
/// `std::thread::park_timeout`. May return spuriously, and says nothing
/// about why it returned (as std): check your condition and the time.
///
/// ```
/// use std::time::{Duration, Instant};
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| {
///     let t = Instant::now();
///     while t.elapsed() < Duration::from_millis(5) {
///         fiber::park_timeout(Duration::from_millis(5) - t.elapsed().min(Duration::from_millis(5)));
///     }
/// });
/// ```
pub fn park_timeout(d: Duration) {
    let t = tls::current_task_ptr();
    let w = tls::worker_ptr();
    if t.is_null() || w.is_null() {
        std::thread::park_timeout(d);
        return;
    }
    // SAFETY: the running task, alive while its fiber runs.
    let task = unsafe { &*t };
    if take_unpark(task) {
        super::cancel_point(task);
        return;
    }
    let Some(deadline) = Instant::now().checked_add(d) else {
        park(); // beyond any clock: no timer
        return;
    };
    if let Some(me) = super::current_task_ref() {
        // SAFETY: a non-null WORKER is this thread's live worker; the
        // reference is not kept across the park below.
        unsafe { (*w).add_timer(deadline, me) };
    }
    super::set_task_wait_reason(task, crate::runtime::task::wait_kind::PARK, 0);
    struct Over(*const crate::runtime::task::Task);
    impl Drop for Over {
        fn drop(&mut self) {
            // SAFETY: the running fiber's own task (from TLS above); the
            // timer armed for this wait is stale from now on.
            let t = unsafe { &*self.0 };
            t.timed_wait_over();
            super::set_task_wait_reason(t, crate::runtime::task::wait_kind::NONE, 0);
        }
    }
    let _over = Over(t);
    super::park_task(t);
    take_unpark(task);
}

impl Fiber {
    /// Wake without a token (`block_on_future`'s waker keeps its own flag).
    pub(crate) fn wake_only(&self) {
        if self.task.transition_to_notified() {
            // SAFETY: as in `unpark`.
            let t = unsafe { Arc::from_raw(Arc::as_ptr(&self.task)) };
            self.shared.reschedule(t);
        }
    }
}

#[allow(dead_code)]
fn _assert_send_sync() {
    fn f<T: Send + Sync>() {}
    f::<Fiber>();
}
