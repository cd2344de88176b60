//! `SharedFuture<T>`: a oneshot completion that many readers wait on, each
//! getting a clone of the value (Boost `shared_future`, made by
//! [`Future::share`](super::oneshot::Future::share)).

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::oneshot::{FutureError, FutureStatus, Inner, Ready, State};

/// A future many fibers and threads can wait on: clone it freely; every
/// [`wait`](Self::wait) returns a clone of the value (or of the failure).
/// Made by [`Future::share`](super::oneshot::Future::share); the promise
/// side is the same [`Promise`](super::oneshot::Promise).
/// [`Promise::is_closed`](super::oneshot::Promise::is_closed) turns true
/// once the last clone is dropped.
///
/// ```
/// use numafiber::{fiber, sync, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let sum = rt.block_on(|| {
///     let (p, f) = sync::oneshot::<u64>();
///     let shared = f.share();
///     let readers: Vec<_> = (0..4).map(|_| {
///         let s = shared.clone();
///         fiber::spawn(move || s.wait().unwrap())
///     }).collect();
///     p.set(10);
///     fiber::when_all(readers).into_iter().sum::<u64>()
/// });
/// assert_eq!(sum, 40);
/// ```
pub struct SharedFuture<T> {
    hold: Arc<Hold<T>>,
}

/// Keeps the oneshot's state; marks the future gone when the last
/// `SharedFuture` clone drops it.
struct Hold<T> {
    inner: Arc<Inner<T>>,
}

impl<T> Drop for Hold<T> {
    fn drop(&mut self) {
        self.inner.future_gone.store(true, std::sync::atomic::Ordering::Release);
    }
}

/// The error of a failed completion as a [`SharedFuture`] reports it: the
/// promise's error, shared by every reader (an error cannot be cloned).
/// It displays as the original and gives it as its `source()`; get at the
/// original type with [`get`](Self::get).
///
/// ```
/// use numafiber::sync::{oneshot, oneshot::FutureError, SharedError};
/// let (p, f) = oneshot::<u8>();
/// let s = f.share();
/// p.set_error(std::io::Error::other("disk on fire"));
/// let e = s.wait().unwrap_err().into_error().unwrap();
/// assert_eq!(e.to_string(), "disk on fire");
/// let shared = e.downcast_ref::<SharedError>().unwrap();
/// assert!(shared.get().downcast_ref::<std::io::Error>().is_some());
/// ```
#[derive(Clone)]
pub struct SharedError(pub(super) Arc<dyn std::error::Error + Send + Sync + 'static>);

impl SharedError {
    /// The error the promise was completed with.
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot::<u8>();
    /// let s = f.share();
    /// p.set_error("nope");
    /// let e = s.wait().unwrap_err().into_error().unwrap();
    /// let e = e.downcast_ref::<numafiber::sync::SharedError>().unwrap();
    /// assert_eq!(e.get().to_string(), "nope");
    /// ```
    pub fn get(&self) -> &(dyn std::error::Error + Send + Sync + 'static) {
        &*self.0
    }
}

impl fmt::Debug for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for SharedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl std::error::Error for SharedError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&*self.0)
    }
}

impl<T> Clone for SharedFuture<T> {
    fn clone(&self) -> Self {
        SharedFuture { hold: self.hold.clone() }
    }
}

impl<T> fmt::Debug for SharedFuture<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedFuture").field("ready", &self.is_ready()).finish()
    }
}

impl<T> SharedFuture<T> {
    fn inner(&self) -> &Inner<T> {
        &self.hold.inner
    }

    /// Whether the promise has completed (value, error or broken).
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot();
    /// let s = f.share();
    /// assert!(!s.is_ready());
    /// p.set(1);
    /// assert!(s.is_ready());
    /// ```
    pub fn is_ready(&self) -> bool {
        self.inner().is_completed()
    }
}

impl<T: Clone> SharedFuture<T> {
    pub(super) fn from_inner(inner: Arc<Inner<T>>) -> SharedFuture<T> {
        SharedFuture { hold: Arc::new(Hold { inner }) }
    }

    /// A clone of the completion, without waiting:
    /// `Err(FutureError::NotReady)` while the promise has not completed.
    ///
    /// ```
    /// use numafiber::sync::{oneshot, oneshot::FutureError};
    /// let (p, f) = oneshot();
    /// let s = f.share();
    /// assert!(matches!(s.try_get(), Err(FutureError::NotReady)));
    /// p.set(3);
    /// assert_eq!(s.try_get().unwrap(), 3);
    /// assert_eq!(s.try_get().unwrap(), 3, "not consumed");
    /// ```
    pub fn try_get(&self) -> Result<T, FutureError> {
        read(&mut self.inner().queue.lock().state).unwrap_or(Err(FutureError::NotReady))
    }

    /// Park (fiber) or block (thread) until the promise completes; a clone
    /// of the value, [`FutureError::Failed`] (with a [`SharedError`]) or
    /// [`FutureError::Broken`]. Every clone of the future, and every call,
    /// gets the same completion.
    ///
    /// ```
    /// let (p, f) = numafiber::sync::oneshot::<Vec<u8>>();
    /// let s = f.share();
    /// std::thread::spawn(move || p.set(vec![1, 2]));
    /// assert_eq!(s.wait().unwrap(), [1, 2]);
    /// assert_eq!(s.wait().unwrap(), [1, 2]);
    /// ```
    #[track_caller]
    pub fn wait(&self) -> Result<T, FutureError> {
        self.wait_inner(None)
    }

    /// [`wait`](Self::wait) for at most `dur`; `Err(FutureError::TimedOut)`
    /// when the time runs out first.
    ///
    /// ```
    /// use std::time::Duration;
    /// use numafiber::sync::{oneshot, oneshot::FutureError};
    /// let (_p, f) = oneshot::<u8>();
    /// let s = f.share();
    /// assert!(matches!(s.wait_timeout(Duration::from_millis(1)), Err(FutureError::TimedOut)));
    /// ```
    #[track_caller]
    pub fn wait_timeout(&self, dur: Duration) -> Result<T, FutureError> {
        self.wait_inner(Instant::now().checked_add(dur))
    }

    /// Wait at most `dur` for the completion without reading it (Boost
    /// `shared_future::wait_for`).
    ///
    /// ```
    /// use std::time::Duration;
    /// use numafiber::sync::{oneshot, oneshot::FutureStatus};
    /// let (p, f) = oneshot::<u8>();
    /// let s = f.share();
    /// assert_eq!(s.wait_for(Duration::from_millis(1)), FutureStatus::Timeout);
    /// p.set(0);
    /// assert_eq!(s.wait_for(Duration::from_millis(1)), FutureStatus::Ready);
    /// ```
    #[track_caller]
    pub fn wait_for(&self, dur: Duration) -> FutureStatus {
        self.inner().status_until(Instant::now().checked_add(dur))
    }

    /// Wait until `deadline` at the latest for the completion without
    /// reading it (Boost `shared_future::wait_until`).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use numafiber::sync::{oneshot, oneshot::FutureStatus};
    /// let (p, f) = oneshot::<u8>();
    /// let s = f.share();
    /// p.set(9);
    /// assert_eq!(s.wait_until(Instant::now() + Duration::from_secs(1)), FutureStatus::Ready);
    /// ```
    #[track_caller]
    pub fn wait_until(&self, deadline: Instant) -> FutureStatus {
        self.inner().status_until(Some(deadline))
    }

    #[track_caller]
    fn wait_inner(&self, deadline: Option<Instant>) -> Result<T, FutureError> {
        let r = self.inner().wait_ready(deadline);
        if let Some(v) = read(&mut self.inner().queue.lock().state) {
            return v;
        }
        match r {
            Ready::Completed => unreachable!("completed, so `read` found a completion"),
            Ready::TimedOut => Err(FutureError::TimedOut),
            Ready::Cancelled => Err(FutureError::Cancelled),
        }
    }
}

/// Read (clone) a completion, leaving it in place; `None` while empty. A
/// `Failed` error is moved into a shared `Arc` on first read (under the
/// queue lock), so every reader gets the same error.
fn read<T: Clone>(s: &mut State<T>) -> Option<Result<T, FutureError>> {
    if let State::Failed(_) = s {
        let State::Failed(e) = std::mem::replace(s, State::Empty) else { unreachable!("matched above") };
        *s = State::FailedShared(Arc::from(e));
    }
    match s {
        State::Empty => None,
        State::Value(v) => Some(Ok(v.clone())),
        State::FailedShared(e) => Some(Err(FutureError::Failed(Box::new(SharedError(e.clone()))))),
        State::Broken => Some(Err(FutureError::Broken)),
        // `Future::try_get` took the value before `share`.
        State::Taken => Some(Err(FutureError::Taken)),
        State::Failed(_) => unreachable!("converted above"),
    }
}
