//! `AutoResetEvent`: a set releases exactly one waiter (or stays set until
//! one comes), and releasing it resets the event.

use std::time::{Duration, Instant};

use crate::runtime::task::wait_kind;
use crate::sync::queue::{wake_all, Outcome, Reason, WaitQueue};

/// An auto-reset event (corolib `auto_reset_event`, cppcoro
/// `async_auto_reset_event`, Win32 auto-reset events).
///
/// The event is a single bit. [`set`](Self::set) releases the first
/// waiter if one is parked (the event stays clear), otherwise it sets the
/// bit; [`wait`](Self::wait) returns at once when the bit is set and
/// clears it, otherwise it parks. So **two `set`s before a `wait` release
/// one waiter**: the bit cannot count (use a
/// [`Semaphore`](crate::sync::Semaphore) for that). Waiters are released
/// in FIFO order. Fibers park (their worker runs others); plain threads
/// block.
///
/// ```
/// use std::sync::Arc;
/// use numafiber::{fiber, sync::AutoResetEvent, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let got = rt.block_on(|| {
///     let ev = Arc::new(AutoResetEvent::new());
///     let e2 = ev.clone();
///     // Completed from a plain thread, as corolib's examples do.
///     let t = std::thread::spawn(move || e2.set());
///     ev.wait();
///     t.join().unwrap();
///     ev.is_set() // waking us reset it
/// });
/// assert!(!got);
/// ```
pub struct AutoResetEvent {
    queue: WaitQueue<bool>,
}

impl Default for AutoResetEvent {
    fn default() -> Self {
        AutoResetEvent::new()
    }
}

impl std::fmt::Debug for AutoResetEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AutoResetEvent").field("set", &self.is_set()).finish()
    }
}

impl AutoResetEvent {
    /// A new event, not set.
    ///
    /// ```
    /// assert!(!numafiber::sync::AutoResetEvent::new().is_set());
    /// ```
    pub const fn new() -> AutoResetEvent {
        AutoResetEvent { queue: WaitQueue::new(false) }
    }

    /// Release the first parked waiter, or, with nobody waiting, set the
    /// event so that the next `wait` returns at once. Setting an event that
    /// is already set does nothing.
    ///
    /// ```
    /// use std::time::Duration;
    /// let e = numafiber::sync::AutoResetEvent::new();
    /// e.set();
    /// e.set(); // still one bit
    /// assert!(e.wait_timeout(Duration::ZERO));
    /// assert!(!e.wait_timeout(Duration::from_millis(1)), "the second set was absorbed");
    /// ```
    pub fn set(&self) {
        let granted = {
            let mut q = self.queue.lock();
            match q.grant_first() {
                Some(e) => vec![e],
                None => {
                    q.state = true;
                    Vec::new()
                }
            }
        };
        wake_all(granted);
    }

    /// Clear the event without releasing anyone.
    ///
    /// ```
    /// let e = numafiber::sync::AutoResetEvent::new();
    /// e.set();
    /// e.reset();
    /// assert!(!e.is_set());
    /// ```
    pub fn reset(&self) {
        self.queue.lock().state = false;
    }

    /// Whether the event is set (nobody has consumed the last `set` yet).
    ///
    /// ```
    /// let e = numafiber::sync::AutoResetEvent::new();
    /// e.set();
    /// assert!(e.is_set());
    /// ```
    pub fn is_set(&self) -> bool {
        self.queue.lock().state
    }

    /// Park until the event is set, and reset it. Returns at once (and
    /// resets it) when it is already set. A fiber being destroyed by the
    /// runtime's shutdown returns at once.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let e = Arc::new(numafiber::sync::AutoResetEvent::new());
    /// let e2 = e.clone();
    /// std::thread::spawn(move || e2.set());
    /// e.wait();
    /// ```
    #[track_caller]
    pub fn wait(&self) {
        self.wait_inner(None);
    }

    /// [`wait`](Self::wait) for at most `dur`; returns whether this call
    /// consumed a `set` (`false`: timed out, the event is untouched).
    ///
    /// ```
    /// use std::time::Duration;
    /// let e = numafiber::sync::AutoResetEvent::new();
    /// assert!(!e.wait_timeout(Duration::from_millis(1)));
    /// ```
    #[track_caller]
    pub fn wait_timeout(&self, dur: Duration) -> bool {
        self.wait_inner(Instant::now().checked_add(dur))
    }

    /// [`wait`](Self::wait) until `deadline` at the latest; returns whether
    /// this call consumed a `set` (Boost's `*_until` shape).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let e = numafiber::sync::AutoResetEvent::new();
    /// e.set();
    /// let deadline = Instant::now() + Duration::from_millis(1);
    /// assert!(e.wait_until(deadline));
    /// assert!(!e.wait_until(deadline), "the set was consumed");
    /// ```
    #[track_caller]
    pub fn wait_until(&self, deadline: Instant) -> bool {
        self.wait_inner(Some(deadline))
    }

    #[track_caller]
    fn wait_inner(&self, deadline: Option<Instant>) -> bool {
        let (id, node) = {
            let mut q = self.queue.lock();
            if q.state {
                q.state = false;
                return true;
            }
            if deadline.is_some_and(|d| Instant::now() >= d) {
                return false;
            }
            q.push(())
        };
        let reason = Reason::new(wait_kind::AUTO_EVENT, self);
        // Granted while being force-unwound: hand the set on.
        match self.queue.park(id, &node, deadline, reason, |_| {}, || self.set()) {
            Outcome::Signalled => true,
            Outcome::TimedOut(()) | Outcome::Cancelled(()) => false,
        }
    }
}
