//! A one-shot completion: one value (or one error) handed from a
//! [`Promise`] to its [`Future`], across fibers and threads.
//!
//! This is corolib's `async_operation<T>` (completed by `set_result` /
//! `set_error` + `completed()`), Boost.Fiber's `promise`/`future` and
//! cppcoro's `single_consumer_event` with a value. The promise is completed
//! at most once, by construction: [`Promise::set`] and
//! [`Promise::set_error`] consume it, and dropping it unset completes the
//! future with [`FutureError::Broken`] (C++'s `broken_promise`). Either side
//! may live on a plain thread or in a fiber; a fiber that waits parks (its
//! worker runs other fibers), a thread blocks.
//!
//! ```
//! use numafiber::{sync, Runtime};
//! let rt = Runtime::builder().workers(2).build().unwrap();
//! let v = rt.block_on(|| {
//!     let (promise, future) = sync::oneshot::<u32>();
//!     // An "event loop" thread completes the operation later.
//!     std::thread::spawn(move || promise.set(42));
//!     future.wait()
//! });
//! assert_eq!(v.unwrap(), 42);
//! ```

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::runtime::task::wait_kind;
use crate::sync::queue::{wake_all, Outcome, Reason, WaitQueue};

/// The error a completion carries: [`Promise::set_error`]'s argument.
///
/// ```
/// let e: numafiber::sync::oneshot::BoxError = "refused".into();
/// assert_eq!(e.to_string(), "refused");
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Why a [`Future`] has no value for the caller.
///
/// ```
/// use numafiber::sync::{self, oneshot::FutureError};
/// let (p, f) = sync::oneshot::<u8>();
/// p.set_error("disk full");
/// match f.wait() {
///     Err(FutureError::Failed(e)) => assert_eq!(e.to_string(), "disk full"),
///     other => panic!("{other:?}"),
/// }
/// ```
#[non_exhaustive]
pub enum FutureError {
    /// The [`Promise`] was dropped without a value or an error (C++
    /// `std::future_errc::broken_promise`).
    Broken,
    /// The operation failed: the error given to [`Promise::set_error`].
    Failed(BoxError),
    /// [`Future::wait_timeout`] ran out of time; the future stays usable.
    TimedOut,
    /// [`Future::try_get`] found no completion yet; the future stays usable.
    NotReady,
    /// The value was already taken by an earlier call on this future.
    Taken,
    /// The waiting fiber is being destroyed by its runtime's shutdown and
    /// cannot park; the completion, if it comes, is dropped.
    Cancelled,
}

impl FutureError {
    /// The promise was dropped unset.
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot::<u8>();
    /// drop(p);
    /// assert!(f.wait().unwrap_err().is_broken());
    /// ```
    pub fn is_broken(&self) -> bool {
        matches!(self, FutureError::Broken)
    }
    /// The promise completed with an error.
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot::<u8>();
    /// p.set_error("no route to host");
    /// assert!(f.wait().unwrap_err().is_failed());
    /// ```
    pub fn is_failed(&self) -> bool {
        matches!(self, FutureError::Failed(_))
    }
    /// The error of a failed completion (`None` for the other kinds).
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot::<u8>();
    /// p.set_error(std::io::Error::from(std::io::ErrorKind::TimedOut));
    /// let e = f.wait().unwrap_err().into_error().unwrap();
    /// assert_eq!(e.downcast::<std::io::Error>().unwrap().kind(), std::io::ErrorKind::TimedOut);
    /// ```
    pub fn into_error(self) -> Option<BoxError> {
        match self {
            FutureError::Failed(e) => Some(e),
            _ => None,
        }
    }
}

impl fmt::Debug for FutureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "FutureError({self})")
    }
}

impl fmt::Display for FutureError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FutureError::Broken => write!(
                f,
                "the promise was dropped without a value (broken promise): complete it with \
                 Promise::set or Promise::set_error on every path"
            ),
            FutureError::Failed(e) => write!(f, "the operation failed: {e}"),
            FutureError::TimedOut => write!(f, "no completion within the timeout; wait again or give up"),
            FutureError::NotReady => write!(f, "not completed yet; wait, or try again later"),
            FutureError::Taken => {
                write!(f, "the value was already taken from this future by an earlier call")
            }
            FutureError::Cancelled => {
                write!(f, "the waiting fiber is being destroyed by its runtime's shutdown and cannot wait")
            }
        }
    }
}

impl std::error::Error for FutureError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FutureError::Failed(e) => Some(&**e),
            _ => None,
        }
    }
}

pub(super) enum State<T> {
    Empty,
    Value(T),
    Failed(BoxError),
    /// A failure seen by a [`SharedFuture`](super::SharedFuture): the
    /// error, shared by every reader.
    FailedShared(std::sync::Arc<dyn std::error::Error + Send + Sync + 'static>),
    Broken,
    Taken,
}

pub(super) struct Inner<T> {
    pub(super) queue: WaitQueue<State<T>>,
    /// The future was dropped (`Promise::is_closed`).
    pub(super) future_gone: AtomicBool,
}

/// How a non-consuming wait ([`Future::wait_for`], [`Future::wait_until`],
/// and the same on [`SharedFuture`](super::SharedFuture)) ended: Boost's
/// `future_status`.
///
/// ```
/// use std::time::Duration;
/// use numafiber::sync::{oneshot, oneshot::FutureStatus};
/// let (p, f) = oneshot::<u8>();
/// assert_eq!(f.wait_for(Duration::from_millis(1)), FutureStatus::Timeout);
/// p.set(1);
/// assert_eq!(f.wait_for(Duration::from_millis(1)), FutureStatus::Ready);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FutureStatus {
    /// The promise completed (value, error or broken): taking the result
    /// does not wait.
    Ready,
    /// The time ran out first (or the waiting fiber is being destroyed by
    /// its runtime's shutdown and cannot wait).
    Timeout,
}

/// How [`Inner::wait_ready`] ended.
pub(super) enum Ready {
    Completed,
    TimedOut,
    Cancelled,
}

impl<T> Inner<T> {
    /// Park until the promise completed (the state is no longer `Empty`),
    /// the deadline passed, or the caller cannot suspend. Takes nothing.
    #[track_caller]
    pub(super) fn wait_ready(&self, deadline: Option<Instant>) -> Ready {
        loop {
            let (id, node) = {
                let mut q = self.queue.lock();
                if !matches!(q.state, State::Empty) {
                    return Ready::Completed;
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ready::TimedOut;
                }
                q.push(())
            };
            let reason = Reason::new(wait_kind::ONESHOT, self);
            // Completion wakes every waiter; nothing is handed over by the
            // grant itself, so a grant seen while unwinding needs no passing on.
            match self.queue.park(id, &node, deadline, reason, |_| {}, || {}) {
                Outcome::Signalled => continue,
                // The completion may have landed right at the deadline.
                Outcome::TimedOut(()) if self.is_completed() => return Ready::Completed,
                Outcome::TimedOut(()) => return Ready::TimedOut,
                Outcome::Cancelled(()) if self.is_completed() => return Ready::Completed,
                Outcome::Cancelled(()) => return Ready::Cancelled,
            }
        }
    }

    pub(super) fn is_completed(&self) -> bool {
        !matches!(self.queue.lock().state, State::Empty)
    }

    /// `wait_ready` as a [`FutureStatus`].
    #[track_caller]
    pub(super) fn status_until(&self, deadline: Option<Instant>) -> FutureStatus {
        match self.wait_ready(deadline) {
            Ready::Completed => FutureStatus::Ready,
            Ready::TimedOut | Ready::Cancelled => FutureStatus::Timeout,
        }
    }
}

/// The completing side: [`set`](Self::set) or [`set_error`](Self::set_error)
/// once, from any thread or fiber. Dropping it unset breaks the promise.
pub struct Promise<T> {
    inner: Arc<Inner<T>>,
    done: bool,
}

/// The waiting side: one consumer, which may be a fiber or a thread.
pub struct Future<T> {
    inner: Arc<Inner<T>>,
}

/// A connected promise and future (also reachable as `sync::oneshot()`).
///
/// ```
/// use numafiber::sync;
/// let (p, mut f) = sync::oneshot::<&str>();
/// assert!(f.try_get().unwrap_err().to_string().contains("not completed"));
/// p.set("done");
/// assert_eq!(f.try_get().unwrap(), "done");
/// ```
pub fn oneshot<T>() -> (Promise<T>, Future<T>) {
    let inner = Arc::new(Inner { queue: WaitQueue::new(State::Empty), future_gone: AtomicBool::new(false) });
    (Promise { inner: inner.clone(), done: false }, Future { inner })
}

impl<T> fmt::Debug for Promise<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Promise").field("closed", &self.is_closed()).finish()
    }
}

impl<T> fmt::Debug for Future<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Future").field("ready", &self.is_ready()).finish()
    }
}

impl<T> Promise<T> {
    fn complete(mut self, s: State<T>) {
        self.done = true;
        let waiters = {
            let mut q = self.inner.queue.lock();
            q.state = s;
            q.grant_all()
        };
        wake_all(waiters);
    }

    /// Complete with a value and wake the waiter. If the future is gone the
    /// value is dropped (check [`is_closed`](Self::is_closed) first to avoid
    /// computing it).
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot();
    /// p.set(vec![1, 2]);
    /// assert_eq!(f.wait().unwrap(), vec![1, 2]);
    /// ```
    pub fn set(self, value: T) {
        self.complete(State::Value(value));
    }

    /// Complete with an error (corolib `set_error`, C++
    /// `promise::set_exception`): the future's `wait` returns
    /// [`FutureError::Failed`] with it.
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot::<u8>();
    /// p.set_error(std::io::Error::other("connection reset"));
    /// let e = f.wait().unwrap_err();
    /// assert!(e.is_failed());
    /// assert_eq!(e.into_error().unwrap().to_string(), "connection reset");
    /// ```
    pub fn set_error(self, error: impl Into<BoxError>) {
        self.complete(State::Failed(error.into()));
    }

    /// Whether the future was dropped (nobody will look at a completion).
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot::<u8>();
    /// drop(f);
    /// assert!(p.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.inner.future_gone.load(Acquire)
    }
}

impl<T> Drop for Promise<T> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let waiters = {
            let mut q = self.inner.queue.lock();
            q.state = State::Broken;
            q.grant_all()
        };
        wake_all(waiters);
    }
}

impl<T> Drop for Future<T> {
    fn drop(&mut self) {
        self.inner.future_gone.store(true, Release);
    }
}

impl<T> Future<T> {
    /// Whether the promise has completed (value, error or broken) and the
    /// completion was not taken yet.
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot();
    /// assert!(!f.is_ready());
    /// p.set(1);
    /// assert!(f.is_ready());
    /// ```
    pub fn is_ready(&self) -> bool {
        !matches!(self.inner.queue.lock().state, State::Empty | State::Taken)
    }

    /// Take the completion without waiting: `Err(FutureError::NotReady)`
    /// when the promise has not completed yet (the future stays usable).
    ///
    /// ```
    /// use numafiber::sync::oneshot::{oneshot, FutureError};
    /// let (p, mut f) = oneshot();
    /// assert!(matches!(f.try_get(), Err(FutureError::NotReady)));
    /// p.set(5);
    /// assert_eq!(f.try_get().unwrap(), 5);
    /// assert!(matches!(f.try_get(), Err(FutureError::Taken)));
    /// ```
    pub fn try_get(&mut self) -> Result<T, FutureError> {
        take(&mut self.inner.queue.lock().state).unwrap_or(Err(FutureError::NotReady))
    }

    /// Park (fiber) or block (thread) until the promise completes, and take
    /// the completion: the value, [`FutureError::Failed`] with the error, or
    /// [`FutureError::Broken`] when the promise was dropped unset.
    ///
    /// ```
    /// use numafiber::sync::oneshot::oneshot;
    /// let (p, f) = oneshot::<u8>();
    /// drop(p);
    /// assert!(f.wait().unwrap_err().is_broken());
    /// ```
    #[track_caller]
    pub fn wait(mut self) -> Result<T, FutureError> {
        self.wait_inner(None)
    }

    /// [`wait`](Self::wait) for at most `dur`; `Err(FutureError::TimedOut)`
    /// leaves the future usable.
    ///
    /// ```
    /// use std::time::Duration;
    /// use numafiber::sync::oneshot::{oneshot, FutureError};
    /// let (p, mut f) = oneshot();
    /// assert!(matches!(f.wait_timeout(Duration::from_millis(1)), Err(FutureError::TimedOut)));
    /// p.set('x');
    /// assert_eq!(f.wait_timeout(Duration::from_secs(1)).unwrap(), 'x');
    /// ```
    #[track_caller]
    pub fn wait_timeout(&mut self, dur: Duration) -> Result<T, FutureError> {
        match Instant::now().checked_add(dur) {
            Some(d) => self.wait_inner(Some(d)),
            None => self.wait_inner(None), // "forever": the deadline does not fit in an Instant
        }
    }

    /// Wait at most `dur` for the completion without taking it (Boost
    /// `future::wait_for`): [`FutureStatus::Ready`] once the promise has
    /// completed (then [`try_get`](Self::try_get) returns at once), else
    /// [`FutureStatus::Timeout`].
    ///
    /// ```
    /// use std::time::Duration;
    /// use numafiber::sync::{oneshot, oneshot::FutureStatus};
    /// let (p, mut f) = oneshot();
    /// std::thread::spawn(move || p.set("hi"));
    /// while f.wait_for(Duration::from_millis(10)) == FutureStatus::Timeout {}
    /// assert_eq!(f.try_get().unwrap(), "hi");
    /// ```
    #[track_caller]
    pub fn wait_for(&self, dur: Duration) -> FutureStatus {
        self.inner.status_until(Instant::now().checked_add(dur))
    }

    /// Wait until `deadline` at the latest for the completion without
    /// taking it (Boost `future::wait_until`).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use numafiber::sync::{oneshot, oneshot::FutureStatus};
    /// let (p, f) = oneshot::<()>();
    /// assert_eq!(f.wait_until(Instant::now() + Duration::from_millis(1)), FutureStatus::Timeout);
    /// drop(p); // a broken promise is a completion too
    /// assert_eq!(f.wait_until(Instant::now()), FutureStatus::Ready);
    /// assert!(f.wait().unwrap_err().is_broken());
    /// ```
    #[track_caller]
    pub fn wait_until(&self, deadline: Instant) -> FutureStatus {
        self.inner.status_until(Some(deadline))
    }

    /// Turn this future into a [`SharedFuture`](super::SharedFuture) that
    /// many readers (fibers or threads) can clone and wait on, each getting
    /// a clone of the value (Boost `future::share`).
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot::<String>();
    /// let s = f.share();
    /// let s2 = s.clone();
    /// p.set("both see it".to_string());
    /// assert_eq!(s.wait().unwrap(), "both see it");
    /// assert_eq!(s2.wait().unwrap(), "both see it");
    /// ```
    pub fn share(self) -> super::SharedFuture<T>
    where
        T: Clone,
    {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never used or dropped again, so the `Arc` is
        // moved out exactly once (its count stays right): `Future`'s drop,
        // which would mark the future gone, does not run.
        let inner = unsafe { std::ptr::read(&me.inner) };
        super::SharedFuture::from_inner(inner)
    }

    #[track_caller]
    fn wait_inner(&mut self, deadline: Option<Instant>) -> Result<T, FutureError> {
        let r = self.inner.wait_ready(deadline);
        if let Some(v) = take(&mut self.inner.queue.lock().state) {
            return v;
        }
        match r {
            Ready::Completed => unreachable!("completed, so `take` found a completion"),
            Ready::TimedOut => Err(FutureError::TimedOut),
            Ready::Cancelled => Err(FutureError::Cancelled),
        }
    }
}

/// Take a completion out of `s`; `None` while it is still empty.
fn take<T>(s: &mut State<T>) -> Option<Result<T, FutureError>> {
    match std::mem::replace(s, State::Taken) {
        State::Empty => {
            *s = State::Empty;
            None
        }
        State::Value(v) => Some(Ok(v)),
        State::Failed(e) => Some(Err(FutureError::Failed(e))),
        State::FailedShared(e) => Some(Err(FutureError::Failed(Box::new(super::shared_future::SharedError(e))))),
        State::Broken => Some(Err(FutureError::Broken)),
        State::Taken => Some(Err(FutureError::Taken)),
    }
}
