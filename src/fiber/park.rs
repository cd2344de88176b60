//! `fiber::park`, `park_timeout`, `current_handle` and [`Fiber::unpark`]:
//! `std::thread::park` for fibers. The token protocol is the engine's
//! (`runtime::unpark`).

use std::time::Duration;

// A public type defined by the engine, re-exported as `JoinHandle` is.
pub use crate::runtime::unpark::Fiber;

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
    crate::runtime::current_unpark_handle()
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
#[track_caller]
pub fn park() {
    crate::runtime::park_fiber()
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
#[track_caller]
pub fn park_timeout(d: Duration) {
    crate::runtime::park_fiber_timeout(d)
}
