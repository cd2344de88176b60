//! `Semaphore`: counted permits, FIFO hand-off, released on drop.

use std::time::{Duration, Instant};

use super::queue::{acquire_without_parking, Outcome, Reason, WaitQueue};
use crate::runtime::task::wait_kind;

/// A counting semaphore whose `acquire` parks the calling fiber (or
/// thread). Permits are handed to waiters in FIFO order and given back when
/// the [`SemaphorePermit`] is dropped.
///
/// ```
/// use std::sync::{Arc, atomic::{AtomicUsize, Ordering}};
/// use numafiber::{fiber, sync::Semaphore, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let max = rt.block_on(|| {
///     let sem = Arc::new(Semaphore::new(2));
///     let (now, max) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
///     let hs: Vec<_> = (0..8).map(|_| {
///         let (sem, now, max) = (sem.clone(), now.clone(), max.clone());
///         fiber::spawn(move || {
///             let _p = sem.acquire();
///             let n = now.fetch_add(1, Ordering::SeqCst) + 1;
///             max.fetch_max(n, Ordering::SeqCst);
///             fiber::yield_now();
///             now.fetch_sub(1, Ordering::SeqCst);
///         })
///     }).collect();
///     fiber::when_all(hs);
///     max.load(Ordering::SeqCst)
/// });
/// assert!(max <= 2);
/// ```
pub struct Semaphore {
    queue: WaitQueue<usize>,
}

/// One permit of a [`Semaphore`]; dropping it releases the permit.
///
/// ```
/// let s = numafiber::sync::Semaphore::new(1);
/// let p = s.acquire();
/// assert_eq!(s.available_permits(), 0);
/// drop(p);
/// assert_eq!(s.available_permits(), 1);
/// ```
#[must_use = "the permit is released at once if unused"]
pub struct SemaphorePermit<'a> {
    sem: &'a Semaphore,
}

impl std::fmt::Debug for Semaphore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Semaphore").field("available", &self.available_permits()).finish()
    }
}

impl std::fmt::Debug for SemaphorePermit<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SemaphorePermit")
    }
}

impl Semaphore {
    /// A semaphore with `permits` permits.
    ///
    /// ```
    /// assert_eq!(numafiber::sync::Semaphore::new(3).available_permits(), 3);
    /// ```
    pub const fn new(permits: usize) -> Semaphore {
        Semaphore { queue: WaitQueue::new(permits) }
    }

    /// Take a permit, parking until one is free.
    ///
    /// ```
    /// let s = numafiber::sync::Semaphore::new(1);
    /// let _p = s.acquire();
    /// assert!(s.try_acquire().is_none());
    /// ```
    #[track_caller]
    pub fn acquire(&self) -> SemaphorePermit<'_> {
        self.acquire_inner(None).expect("no deadline")
    }

    /// Take a permit, waiting at most `dur` (timed by the runtime's timer
    /// inside fibers).
    ///
    /// ```
    /// use std::time::Duration;
    /// let s = numafiber::sync::Semaphore::new(0);
    /// assert!(s.acquire_timeout(Duration::from_millis(1)).is_none());
    /// ```
    #[track_caller]
    pub fn acquire_timeout(&self, dur: Duration) -> Option<SemaphorePermit<'_>> {
        self.acquire_inner(Instant::now().checked_add(dur))
    }

    /// Take a permit, waiting until `deadline` at the latest (Boost's
    /// `*_until` shape). A deadline in the past still takes a free permit.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let s = numafiber::sync::Semaphore::new(1);
    /// let deadline = Instant::now() + Duration::from_millis(2);
    /// let p = s.acquire_until(deadline).expect("one permit is free");
    /// assert!(s.acquire_until(deadline).is_none(), "timed out");
    /// drop(p);
    /// ```
    #[track_caller]
    pub fn acquire_until(&self, deadline: Instant) -> Option<SemaphorePermit<'_>> {
        self.acquire_inner(Some(deadline))
    }

    /// Take a permit if one is free now (and nobody is queued).
    ///
    /// In a fiber, a failure first lets the worker's other fibers run (a
    /// yield), so a loop spinning on `try_acquire` lets the holders finish
    /// even on one worker.
    ///
    /// ```
    /// let s = numafiber::sync::Semaphore::new(1);
    /// assert!(s.try_acquire().is_some());
    /// ```
    pub fn try_acquire(&self) -> Option<SemaphorePermit<'_>> {
        let p = self.try_acquire_now();
        if p.is_none() {
            crate::runtime::yield_after_failed_try();
        }
        p
    }

    /// `try_acquire` without the yield after a failure.
    fn try_acquire_now(&self) -> Option<SemaphorePermit<'_>> {
        let mut q = self.queue.lock();
        if q.state > 0 && !q.has_waiters() {
            q.state -= 1;
            Some(SemaphorePermit { sem: self })
        } else {
            None
        }
    }

    /// Permits free right now.
    ///
    /// ```
    /// assert_eq!(numafiber::sync::Semaphore::new(2).available_permits(), 2);
    /// ```
    pub fn available_permits(&self) -> usize {
        self.queue.lock().state
    }

    /// Add `n` permits (waking up to `n` waiters). Takes time in the
    /// number of waiters woken, not in `n`.
    ///
    /// # Panics
    /// If the free permits would exceed `usize::MAX` (like std's counters,
    /// an overflow is a bug, never a silent wrap-around); nothing is
    /// changed then.
    ///
    /// ```
    /// let s = numafiber::sync::Semaphore::new(0);
    /// s.add_permits(2);
    /// assert_eq!(s.available_permits(), 2);
    /// ```
    pub fn add_permits(&self, n: usize) {
        let mut woken = Vec::new();
        {
            let mut q = self.queue.lock();
            // Every waiter that takes a permit lowers what is left to add;
            // with waiters queued the free count is 0, so only the
            // no-waiter case can overflow: check before changing anything.
            if !q.has_waiters() && q.state.checked_add(n).is_none() {
                let free = q.state;
                drop(q);
                panic!("Semaphore::add_permits({n}) with {free} permits free would exceed usize::MAX permits");
            }
            let mut left = n;
            while left > 0 {
                match q.grant_first() {
                    Some(e) => {
                        woken.push(e);
                        left -= 1;
                    }
                    None => break,
                }
            }
            // Cannot saturate after the check above (see there); saturate
            // rather than wrap if an invariant ever breaks.
            q.state = q.state.saturating_add(left);
        }
        for e in woken {
            e.node.wake();
        }
    }

    #[track_caller]
    fn acquire_inner(&self, deadline: Option<Instant>) -> Option<SemaphorePermit<'_>> {
        let (id, node) = {
            let mut q = self.queue.lock();
            if q.state > 0 && !q.has_waiters() {
                q.state -= 1;
                return Some(SemaphorePermit { sem: self });
            }
            q.push(())
        };
        let reason = Reason::new(wait_kind::SEMAPHORE, self);
        match self.queue.park(id, &node, deadline, reason, |_| {}, || self.release()) {
            Outcome::Signalled => Some(SemaphorePermit { sem: self }),
            Outcome::TimedOut(()) => None,
            Outcome::Cancelled(()) => Some(acquire_without_parking("Semaphore", || self.try_acquire_now())),
        }
    }

    fn release(&self) {
        let e = {
            let mut q = self.queue.lock();
            let e = q.grant_first();
            if e.is_none() {
                // Saturates: a permit given back while `add_permits` filled
                // the count to usize::MAX is lost rather than wrapping to 0.
                q.state = q.state.saturating_add(1);
            }
            e
        };
        if let Some(e) = e {
            e.node.wake();
        }
    }
}

impl SemaphorePermit<'_> {
    /// Keep the permit taken forever (it is not released).
    ///
    /// ```
    /// let s = numafiber::sync::Semaphore::new(1);
    /// s.acquire().forget();
    /// assert_eq!(s.available_permits(), 0);
    /// ```
    pub fn forget(self) {
        std::mem::forget(self);
    }
}

impl Drop for SemaphorePermit<'_> {
    fn drop(&mut self) {
        self.sem.release();
    }
}
