//! `PackagedTask<T>`: a callable that completes its future when run
//! (Boost `packaged_task`, corolib's `async_operation` fed by a function).

use std::fmt;

use super::oneshot::{oneshot, Future, Promise};

/// A function packaged with the [`Promise`] of its result: run it (on any
/// fiber or thread, once) and its [`Future`] completes with the return
/// value. Dropped without running, the future gets
/// [`FutureError::Broken`](super::oneshot::FutureError::Broken) (C++'s
/// `broken_promise`). If the function panics, the future gets
/// [`FutureError::Failed`](super::oneshot::FutureError::Failed) with a
/// [`TaskPanicked`] error and the panic goes on unwinding the runner (it
/// is not swallowed).
///
/// ```
/// use numafiber::{fiber, sync::PackagedTask, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let v = rt.block_on(|| {
///     let (task, future) = PackagedTask::new(|| 6 * 7);
///     fiber::spawn(move || task.run()); // or a plain thread, or inline
///     future.wait()
/// });
/// assert_eq!(v.unwrap(), 42);
/// ```
pub struct PackagedTask<T> {
    f: Box<dyn FnOnce() -> T + Send + 'static>,
    promise: Promise<T>,
}

/// The function of a [`PackagedTask`] panicked; carries the panic message
/// when it was a string.
///
/// ```
/// use numafiber::sync::{PackagedTask, TaskPanicked};
/// let (task, future) = PackagedTask::new(|| -> u8 { panic!("bad input") });
/// let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.run()));
/// assert!(r.is_err(), "the panic goes on unwinding the runner");
/// let e = future.wait().unwrap_err().into_error().unwrap();
/// assert_eq!(e.downcast_ref::<TaskPanicked>().unwrap().message(), Some("bad input"));
/// ```
#[derive(Debug, Clone)]
pub struct TaskPanicked {
    message: Option<String>,
}

impl TaskPanicked {
    /// The panic message, if the payload was a string.
    ///
    /// ```
    /// use numafiber::sync::{PackagedTask, TaskPanicked};
    /// let (task, future) = PackagedTask::new(|| -> () { std::panic::panic_any(17u32) });
    /// let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| task.run()));
    /// let e = future.wait().unwrap_err().into_error().unwrap();
    /// assert_eq!(e.downcast_ref::<TaskPanicked>().unwrap().message(), None);
    /// ```
    pub fn message(&self) -> Option<&str> {
        self.message.as_deref()
    }
}

impl fmt::Display for TaskPanicked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.message {
            Some(m) => write!(f, "the packaged task panicked: {m}"),
            None => write!(f, "the packaged task panicked (with a non-string payload)"),
        }
    }
}

impl std::error::Error for TaskPanicked {}

impl<T> fmt::Debug for PackagedTask<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PackagedTask").field("future_dropped", &self.promise.is_closed()).finish()
    }
}

impl<T: Send + 'static> PackagedTask<T> {
    /// Package `f`; returns the task and the future of its result. Share
    /// the future ([`Future::share`]) for several readers.
    ///
    /// ```
    /// let (task, future) = numafiber::sync::PackagedTask::new(|| "done");
    /// task.run();
    /// assert_eq!(future.wait().unwrap(), "done");
    /// ```
    pub fn new(f: impl FnOnce() -> T + Send + 'static) -> (PackagedTask<T>, Future<T>) {
        let (promise, future) = oneshot();
        (PackagedTask { f: Box::new(f), promise }, future)
    }

    /// Run the function on the calling fiber or thread and complete the
    /// future with its result.
    ///
    /// # Panics
    /// If the function panics: the future is completed with
    /// [`TaskPanicked`] first, then the panic resumes.
    ///
    /// ```
    /// let (task, future) = numafiber::sync::PackagedTask::new(|| 1 + 1);
    /// std::thread::spawn(move || task.run()).join().unwrap();
    /// assert_eq!(future.wait().unwrap(), 2);
    /// ```
    pub fn run(self) {
        let PackagedTask { f, promise } = self;
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
            Ok(v) => promise.set(v),
            Err(payload) => {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned());
                promise.set_error(TaskPanicked { message });
                std::panic::resume_unwind(payload);
            }
        }
    }

    /// Whether the future was dropped (running would compute a result
    /// nobody reads).
    ///
    /// ```
    /// let (task, future) = numafiber::sync::PackagedTask::new(|| 0);
    /// drop(future);
    /// assert!(task.is_future_dropped());
    /// ```
    pub fn is_future_dropped(&self) -> bool {
        self.promise.is_closed()
    }
}
