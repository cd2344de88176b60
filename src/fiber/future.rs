//! Async interop, both ways: [`block_on_future`] runs a `std::future::Future`
//! inside a fiber, and a [`JoinHandle`] is a future that async code can
//! `.await` ([`JoinFuture`]).
//!
//! # A future inside a fiber
//!
//! `block_on_future` polls the future on the fiber's own stack. Its
//! `Waker` sets a flag and wakes the fiber (the runtime's ordinary
//! wake-up: `Task::transition_to_notified`, then a push), so between polls
//! the *fiber* is parked and its worker runs other fibers. The flag is set
//! before the wake-up, and the fiber clears it before each poll, so no
//! wake-up is lost and a wake-up during the poll leads to one more poll,
//! not to a park. On a plain thread the same is done with
//! `std::thread::park`.
//!
//! # Using a tokio-based library from a fiber
//!
//! Keep a tokio runtime beside the numafiber one, spawn the async work on
//! it and wait for its `JoinHandle` with `block_on_future`: the fiber parks,
//! the numafiber worker runs other fibers, and tokio's threads drive the
//! I/O.
//!
//! ```ignore
//! let tokio_rt = tokio::runtime::Runtime::new()?;
//! let th = tokio_rt.handle().clone();
//! let rt = numafiber::Runtime::builder().build()?;
//! let body = rt.block_on(move || {
//!     let h = th.spawn(async { some_async_client::get("http://...").await });
//!     numafiber::fiber::block_on_future(h).expect("the tokio task panicked")
//! });
//! ```
//!
//! Futures that need a tokio *context* to be polled (a `tokio::net`
//! socket, `tokio::time::sleep`) must run on tokio's threads like that;
//! futures that only need a waker (channels, `futures` combinators, a
//! tokio `JoinHandle` or `oneshot`) can be polled by `block_on_future`
//! directly.
//!
//! # Awaiting a fiber from async code
//!
//! `JoinHandle<T>` implements `IntoFuture<Output = Result<T, JoinError>>`:
//! `handle.await` in any executor parks that task until the fiber ends.
//! Dropping the future detaches the fiber, as dropping the handle does.
//!
//! ```ignore
//! // in a tokio task
//! let h = numafiber_handle.spawn(|| heavy_computation());
//! let v = h.await?;
//! ```
//!
//! `examples/async_interop.rs` in the peers' crate runs both directions
//! against tokio.

use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use super::park::Fiber;
use super::JoinHandle;
use crate::runtime::error::JoinError;
use crate::runtime::{self, task::wait_kind};

/// The waker of a fiber blocked in `block_on_future`.
struct FiberWaker {
    woken: AtomicBool,
    fiber: Fiber,
}

impl Wake for FiberWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if !self.woken.swap(true, AcqRel) {
            self.fiber.wake_only();
        }
    }
}

/// The waker of a plain thread blocked in `block_on_future`.
struct ThreadWaker {
    woken: AtomicBool,
    thread: std::thread::Thread,
}

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        if !self.woken.swap(true, AcqRel) {
            self.thread.unpark();
        }
    }
}

/// Run `fut` to completion on the calling fiber and return its output:
/// the fiber (not its worker) parks until the future's `Waker` fires, so
/// the worker runs other fibers meanwhile. Works on a plain thread too
/// (the thread parks). Each park is a cancellation point: a cancelled
/// fiber drops the future while unwinding.
///
/// See the module docs of [`fiber::future`](self) for using a tokio-based
/// library from a fiber.
///
/// # Panics
/// If polling the future panics (the panic passes through).
///
/// ```
/// use std::future::Future;
/// use std::pin::Pin;
/// use std::sync::{Arc, Mutex};
/// use std::task::{Context, Poll, Waker};
/// use numafiber::{fiber, Runtime};
///
/// /// Ready once some other party stored a value and woke us.
/// #[derive(Default)]
/// struct Slot { value: Option<u32>, waker: Option<Waker> }
/// struct Wait(Arc<Mutex<Slot>>);
/// impl Future for Wait {
///     type Output = u32;
///     fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<u32> {
///         let mut s = self.0.lock().unwrap();
///         match s.value.take() {
///             Some(v) => Poll::Ready(v),
///             None => { s.waker = Some(cx.waker().clone()); Poll::Pending }
///         }
///     }
/// }
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let v = rt.block_on(|| {
///     let slot = Arc::new(Mutex::new(Slot::default()));
///     let s2 = slot.clone();
///     std::thread::spawn(move || {
///         std::thread::sleep(std::time::Duration::from_millis(5));
///         let w = { let mut s = s2.lock().unwrap(); s.value = Some(42); s.waker.take() };
///         if let Some(w) = w { w.wake() }
///     });
///     fiber::block_on_future(Wait(slot))
/// });
/// assert_eq!(v, 42);
/// ```
#[track_caller]
pub fn block_on_future<F: Future>(fut: F) -> F::Output {
    let mut fut = std::pin::pin!(fut);
    match super::park::current_handle() {
        Some(fiber) => {
            let w = Arc::new(FiberWaker { woken: AtomicBool::new(false), fiber });
            let waker = Waker::from(w.clone());
            let mut cx = Context::from_waker(&waker);
            loop {
                if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                    return v;
                }
                if !w.woken.swap(false, AcqRel) {
                    // Reset even when a park unwinds (a cancellation).
                    struct Reason;
                    impl Drop for Reason {
                        fn drop(&mut self) {
                            runtime::set_wait_reason(wait_kind::NONE, 0);
                        }
                    }
                    runtime::set_wait_reason(wait_kind::FUTURE, 0);
                    let _reason = Reason;
                    while !w.woken.swap(false, AcqRel) {
                        runtime::park();
                    }
                }
            }
        }
        None => {
            let w = Arc::new(ThreadWaker { woken: AtomicBool::new(false), thread: std::thread::current() });
            let waker = Waker::from(w.clone());
            let mut cx = Context::from_waker(&waker);
            loop {
                if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
                    return v;
                }
                while !w.woken.swap(false, AcqRel) {
                    std::thread::park();
                }
            }
        }
    }
}

/// A fiber's [`JoinHandle`] as a future (`handle.into_future()`, or just
/// `handle.await`): ready with the fiber's `Result` when it ends.
/// Dropping it detaches the fiber.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let h = rt.spawn(|| 6 * 7);
/// // Any executor will do; here the calling thread polls it.
/// assert_eq!(fiber::block_on_future(async { h.await }).unwrap(), 42);
/// ```
pub struct JoinFuture<T> {
    handle: Option<JoinHandle<T>>,
}

impl<T> std::fmt::Debug for JoinFuture<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinFuture").field("handle", &self.handle).finish()
    }
}

impl<T> IntoFuture for JoinHandle<T> {
    type Output = Result<T, JoinError>;
    type IntoFuture = JoinFuture<T>;
    fn into_future(self) -> JoinFuture<T> {
        JoinFuture { handle: Some(self) }
    }
}

impl<T> Unpin for JoinFuture<T> {}

impl<T> Future for JoinFuture<T> {
    type Output = Result<T, JoinError>;

    /// # Panics
    /// When polled again after it returned `Ready`.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let h = self.handle.as_ref().expect("JoinFuture polled after it completed");
        if h.register_async(cx.waker()) {
            let h = self.handle.take().expect("checked above");
            // SAFETY: the handle is its packet's one owner, and the packet
            // is done (`register_async` returned true).
            Poll::Ready(h.take_done())
        } else {
            Poll::Pending
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pending `n` times, waking itself each time; then ready.
    struct Countdown(u32);
    impl Future for Countdown {
        type Output = &'static str;
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<&'static str> {
            if self.0 == 0 {
                return Poll::Ready("done");
            }
            self.0 -= 1;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }

    #[test]
    fn self_waking_future_on_a_thread() {
        assert_eq!(block_on_future(Countdown(5)), "done");
    }
}
