//! `Condvar`: wait for a condition under a [`Mutex`](super::Mutex).

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::time::{Duration, Instant};

use super::mutex::MutexGuard;
use super::queue::{wake_all, Outcome, Reason, WaitQueue};
use crate::runtime::task::wait_kind;

/// A condition variable for [`Mutex`](super::Mutex): `wait` unlocks the
/// mutex and parks the calling fiber (or thread) until notified, then locks
/// again. Notifications wake waiters in FIFO order.
///
/// As with `std::sync::Condvar`, wake-ups may be spurious (always re-check
/// the condition, or use [`Condvar::wait_while`]). One extra case: a fiber
/// that is being destroyed by the runtime's shutdown cannot park, so its
/// `wait` returns at once.
///
/// A `Condvar` belongs to the first [`Mutex`](super::Mutex) it is used
/// with; waiting with a guard of another mutex panics (as
/// `std::sync::Condvar` documents). For a lock other than `Mutex`, use
/// [`CondvarAny`](super::CondvarAny).
///
/// ```
/// use std::sync::Arc;
/// use numafiber::{fiber, sync::{Condvar, Mutex}, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let pair = Arc::new((Mutex::new(false), Condvar::new()));
/// let p2 = pair.clone();
/// rt.block_on(move || {
///     let p3 = p2.clone();
///     let h = fiber::spawn(move || { *p3.0.lock() = true; p3.1.notify_one(); });
///     let g = p2.1.wait_while(p2.0.lock(), |ready| !*ready);
///     assert!(*g);
///     drop(g);
///     fiber::await_fiber(h);
/// });
/// ```
pub struct Condvar {
    core: Waiters,
    /// Address of the mutex this condvar is used with (0: none yet).
    mutex: AtomicUsize,
}

/// The waiting core of [`Condvar`] and [`CondvarAny`](super::CondvarAny):
/// a FIFO of waiters; the caller's lock is released only after the caller
/// is queued, so a notify made under that lock after the release finds it.
pub(crate) struct Waiters {
    queue: WaitQueue<()>,
    /// Number of queued waiters (lets `notify_*` skip the lock when 0).
    waiting: AtomicUsize,
}

impl Waiters {
    pub(crate) const fn new() -> Waiters {
        Waiters { queue: WaitQueue::new(()), waiting: AtomicUsize::new(0) }
    }

    pub(crate) fn waiting(&self) -> usize {
        self.waiting.load(Relaxed)
    }

    /// Queue the caller, run `unlock` (release the caller's lock), park
    /// until notified or `deadline`. `true` when it timed out. The caller
    /// locks again afterwards. `obj` names the condvar in the deadlock
    /// report.
    #[track_caller]
    pub(crate) fn wait(&self, obj: &impl Sized, unlock: impl FnOnce(), deadline: Option<Instant>) -> bool {
        // Queue first, then unlock: a notify after our unlock finds us.
        let (id, node) = {
            let mut q = self.queue.lock();
            self.waiting.fetch_add(1, Relaxed);
            q.push(())
        };
        unlock();
        let reason = Reason::new(wait_kind::CONDVAR, obj);
        let dec = |_: &mut _| {
            self.waiting.fetch_sub(1, Relaxed);
        };
        // A forced unwind after a notify_one was consumed passes it on.
        let out = self.queue.park(id, &node, deadline, reason, dec, || self.notify_one());
        matches!(out, Outcome::TimedOut(()))
    }

    pub(crate) fn notify_one(&self) {
        if self.waiting.load(SeqCst) == 0 {
            return;
        }
        let e = {
            let mut q = self.queue.lock();
            let e = q.grant_first();
            if e.is_some() {
                self.waiting.fetch_sub(1, Relaxed);
            }
            e
        };
        if let Some(e) = e {
            e.node.wake();
        }
    }

    pub(crate) fn notify_all(&self) {
        if self.waiting.load(SeqCst) == 0 {
            return;
        }
        let es = {
            let mut q = self.queue.lock();
            let es = q.grant_all();
            self.waiting.fetch_sub(es.len(), Relaxed);
            es
        };
        wake_all(es);
    }
}

impl Default for Condvar {
    fn default() -> Self {
        Condvar::new()
    }
}

impl std::fmt::Debug for Condvar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Condvar").field("waiting", &self.core.waiting()).finish()
    }
}

/// Whether a timed wait ended by timeout (`std::sync::WaitTimeoutResult`
/// shape).
///
/// ```
/// use std::time::Duration;
/// use numafiber::sync::{Condvar, Mutex};
/// let (m, cv) = (Mutex::new(()), Condvar::new());
/// let (_g, r) = cv.wait_timeout(m.lock(), Duration::from_millis(1));
/// assert!(r.timed_out());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaitTimeoutResult(bool);

impl WaitTimeoutResult {
    pub(crate) fn new(timed_out: bool) -> WaitTimeoutResult {
        WaitTimeoutResult(timed_out)
    }
    /// The wait ended because the time ran out.
    pub fn timed_out(&self) -> bool {
        self.0
    }
}

impl Condvar {
    /// A new condition variable.
    ///
    /// ```
    /// let cv = numafiber::sync::Condvar::new();
    /// cv.notify_all(); // nobody waits: no effect
    /// ```
    pub const fn new() -> Condvar {
        Condvar { core: Waiters::new(), mutex: AtomicUsize::new(0) }
    }

    /// Unlock `guard`'s mutex, park until notified, lock again.
    ///
    /// # Panics
    /// If this condvar was used before with a different mutex (every
    /// waiting call checks this, before unlocking anything).
    ///
    /// ```
    /// use std::sync::Arc;
    /// use numafiber::sync::{Condvar, Mutex};
    /// let pair = Arc::new((Mutex::new(0), Condvar::new()));
    /// let p = pair.clone();
    /// let t = std::thread::spawn(move || { *p.0.lock() = 1; p.1.notify_all(); });
    /// let mut g = pair.0.lock();
    /// while *g == 0 { g = pair.1.wait(g); }
    /// t.join().unwrap();
    /// ```
    #[track_caller]
    pub fn wait<'a, T: ?Sized>(&self, guard: MutexGuard<'a, T>) -> MutexGuard<'a, T> {
        self.wait_until_inner(guard, None).0
    }

    /// Wait while `condition` holds (checked under the lock).
    ///
    /// # Panics
    /// If this condvar was used before with a different mutex.
    ///
    /// ```
    /// use numafiber::sync::{Condvar, Mutex};
    /// let (m, cv) = (Mutex::new(3), Condvar::new());
    /// let g = cv.wait_while(m.lock(), |n| *n == 0); // already false: no wait
    /// assert_eq!(*g, 3);
    /// ```
    #[track_caller]
    pub fn wait_while<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> MutexGuard<'a, T> {
        while condition(&mut *guard) {
            guard = self.wait(guard);
            if crate::runtime::current_cannot_suspend() {
                break; // see the type docs: a dying fiber cannot wait
            }
        }
        guard
    }

    /// [`wait`](Condvar::wait) for at most `dur`, timed by the runtime's
    /// timer inside fibers. Returns the guard and whether it timed out.
    ///
    /// # Panics
    /// If this condvar was used before with a different mutex.
    ///
    /// ```
    /// use std::time::Duration;
    /// use numafiber::{sync::{Condvar, Mutex}, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let timed_out = rt.block_on(|| {
    ///     let (m, cv) = (Mutex::new(()), Condvar::new());
    ///     let (_g, r) = cv.wait_timeout(m.lock(), Duration::from_millis(5));
    ///     r.timed_out()
    /// });
    /// assert!(timed_out);
    /// ```
    #[track_caller]
    pub fn wait_timeout<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: Duration,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        let deadline = Instant::now().checked_add(dur);
        let (g, t) = self.wait_until_inner(guard, deadline);
        (g, WaitTimeoutResult(t))
    }

    /// [`wait`](Condvar::wait) until `deadline` at the latest (Boost
    /// `condition_variable::wait_until`). Returns the guard and whether the
    /// deadline passed (a notification may still have come at the same
    /// time: re-check the condition).
    ///
    /// # Panics
    /// If this condvar was used before with a different mutex.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use numafiber::{sync::{Condvar, Mutex}, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let timed_out = rt.block_on(|| {
    ///     let (m, cv) = (Mutex::new(()), Condvar::new());
    ///     let (_g, r) = cv.wait_until(m.lock(), Instant::now() + Duration::from_millis(5));
    ///     r.timed_out()
    /// });
    /// assert!(timed_out);
    /// ```
    #[track_caller]
    pub fn wait_until<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Instant,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        let (g, t) = self.wait_until_inner(guard, Some(deadline));
        (g, WaitTimeoutResult(t))
    }

    /// [`wait_while`](Condvar::wait_while) until `deadline` at the latest
    /// (Boost's `wait_until` with a predicate); the flag says whether it
    /// gave up with the condition still true.
    ///
    /// # Panics
    /// If this condvar was used before with a different mutex.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use numafiber::sync::{Condvar, Mutex};
    /// let (m, cv) = (Mutex::new(0), Condvar::new());
    /// let deadline = Instant::now() + Duration::from_millis(2);
    /// let (g, r) = cv.wait_while_until(m.lock(), deadline, |n| *n == 0);
    /// assert!(r.timed_out() && *g == 0);
    /// ```
    #[track_caller]
    pub fn wait_while_until<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Instant,
        condition: impl FnMut(&mut T) -> bool,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        self.wait_while_deadline(guard, Some(deadline), condition)
    }

    /// [`wait_while`](Condvar::wait_while) for at most `dur`; the flag
    /// says whether it gave up with the condition still true.
    ///
    /// # Panics
    /// If this condvar was used before with a different mutex.
    ///
    /// ```
    /// use std::time::Duration;
    /// use numafiber::sync::{Condvar, Mutex};
    /// let (m, cv) = (Mutex::new(false), Condvar::new());
    /// let (g, r) = cv.wait_timeout_while(m.lock(), Duration::from_millis(2), |ok| !*ok);
    /// assert!(r.timed_out() && !*g);
    /// ```
    #[track_caller]
    pub fn wait_timeout_while<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        dur: Duration,
        condition: impl FnMut(&mut T) -> bool,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        self.wait_while_deadline(guard, Instant::now().checked_add(dur), condition)
    }

    #[track_caller]
    fn wait_while_deadline<'a, T: ?Sized>(
        &self,
        mut guard: MutexGuard<'a, T>,
        deadline: Option<Instant>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> (MutexGuard<'a, T>, WaitTimeoutResult) {
        loop {
            if !condition(&mut *guard) {
                return (guard, WaitTimeoutResult(false));
            }
            let (g, timed_out) = self.wait_until_inner(guard, deadline);
            guard = g;
            if timed_out || crate::runtime::current_cannot_suspend() {
                let still = condition(&mut *guard);
                return (guard, WaitTimeoutResult(still));
            }
        }
    }

    #[track_caller]
    fn wait_until_inner<'a, T: ?Sized>(
        &self,
        guard: MutexGuard<'a, T>,
        deadline: Option<Instant>,
    ) -> (MutexGuard<'a, T>, bool) {
        self.check_mutex(guard.mutex_addr());
        let mut m = None;
        let timed_out = self.core.wait(self, || m = Some(guard.unlock_into()), deadline);
        let m = m.expect("`Waiters::wait` runs `unlock`");
        (MutexGuard::relock(m), timed_out)
    }

    /// Bind this condvar to the mutex at `addr` on first use; panic if it
    /// is bound to another one (before the caller unlocks anything, so the
    /// guard is dropped by the unwind and the mutex is left unlocked).
    fn check_mutex(&self, addr: usize) {
        match self.mutex.compare_exchange(0, addr, Relaxed, Relaxed) {
            Ok(_) => {}
            Err(a) if a == addr => {}
            Err(_) => panic!(
                "numafiber::sync::Condvar used with two different mutexes: a Condvar belongs to the \
                 first Mutex it waits with; use one Condvar per Mutex (or CondvarAny for other locks)"
            ),
        }
    }

    /// Wake the first waiter, if any.
    ///
    /// ```
    /// numafiber::sync::Condvar::new().notify_one();
    /// ```
    pub fn notify_one(&self) {
        self.core.notify_one();
    }

    /// Wake every waiter.
    ///
    /// ```
    /// numafiber::sync::Condvar::new().notify_all();
    /// ```
    pub fn notify_all(&self) {
        self.core.notify_all();
    }
}
