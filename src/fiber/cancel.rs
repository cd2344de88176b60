//! Cancellation, the user's side: [`JoinHandle::cancel`](crate::fiber::JoinHandle::cancel),
//! [`shield`], [`is_cancelled`], [`Cancelled`]. The protocol (request,
//! cancellation points in the park path, shields) is the engine's:
//! `runtime::cancel`.

// Public types defined by the engine, re-exported as `JoinHandle` is.
pub use crate::runtime::cancel::{Cancelled, ShieldGuard};

/// Whether a cancellation was requested for the running fiber (its
/// [`JoinHandle::cancel`](crate::fiber::JoinHandle::cancel) was called),
/// whether or not it is shielded now. `false` outside a fiber.
///
/// A fiber that computes for long without suspending can poll it (or call
/// [`yield_now`](crate::fiber::yield_now), itself a cancellation point).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| assert!(!fiber::is_cancelled()));
/// assert!(!fiber::is_cancelled()); // a plain thread
/// ```
pub fn is_cancelled() -> bool {
    crate::runtime::cancel_requested()
}

/// Run `f` shielded from cancellation: the suspension points inside `f`
/// do not unwind on a cancellation request (the request stays pending and
/// takes effect at the first cancellation point after `f`). Shields nest.
/// Outside a fiber it just runs `f`.
///
/// Use it for a section that must finish once started: a two-step update
/// of shared state, a reply that must be sent, a cleanup that waits.
///
/// ```
/// use std::sync::Arc;
/// use numafiber::{fiber, sync, Runtime};
///
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| {
///     let (tx, rx) = sync::channel::bounded::<u32>(0);
///     let h = fiber::spawn(move || {
///         // Cancelled while waiting here, it still receives and returns...
///         let v = fiber::shield(|| rx.recv().unwrap());
///         // ...and unwinds at the next cancellation point.
///         fiber::yield_now();
///         v
///     });
///     fiber::yield_now(); // it parks in recv
///     h.cancel();
///     tx.send(7).unwrap();
///     assert!(h.join().unwrap_err().is_cancelled());
/// });
/// ```
pub fn shield<R>(f: impl FnOnce() -> R) -> R {
    let _g = ShieldGuard::new();
    f()
}
