//! `CondvarAny`: a condition variable over any lock (Boost
//! `condition_variable_any`), for locks other than [`Mutex`](super::Mutex):
//! [`RwLock`](super::RwLock)'s write side, `std::sync::Mutex`, or a lock of
//! your own through the [`Lockable`] trait.

use std::time::{Duration, Instant};

use super::condvar::{WaitTimeoutResult, Waiters};

/// A lock a [`CondvarAny`] can release and take again: `lock` blocks until
/// the lock is held and returns the guard whose drop releases it.
///
/// Implemented for [`Mutex`](super::Mutex), [`RwLock`](super::RwLock)
/// (exclusive side, like Boost's `shared_mutex::lock`) and
/// `std::sync::Mutex` (poisoning is ignored: the guard is taken from the
/// `PoisonError`). Implement it for a lock of your own:
///
/// ```
/// use numafiber::sync::{CondvarAny, Lockable, Semaphore, SemaphorePermit};
/// struct Binary(Semaphore); // a lock made of a one-permit semaphore
/// impl Lockable for Binary {
///     type Guard<'a> = SemaphorePermit<'a>;
///     fn lock(&self) -> SemaphorePermit<'_> { self.0.acquire() }
/// }
/// let (l, cv) = (Binary(Semaphore::new(1)), CondvarAny::new());
/// let g = l.lock();
/// let (_g, r) = cv.wait_timeout(&l, g, std::time::Duration::from_millis(1));
/// assert!(r.timed_out());
/// ```
pub trait Lockable {
    /// Holding the lock; dropping it releases the lock.
    type Guard<'a>
    where
        Self: 'a;
    /// Take the lock, waiting as long as it takes.
    fn lock(&self) -> Self::Guard<'_>;
}

impl<T: ?Sized> Lockable for super::Mutex<T> {
    type Guard<'a>
        = super::MutexGuard<'a, T>
    where
        Self: 'a;
    fn lock(&self) -> Self::Guard<'_> {
        super::Mutex::lock(self)
    }
}

impl<T: ?Sized> Lockable for super::RwLock<T> {
    type Guard<'a>
        = super::RwLockWriteGuard<'a, T>
    where
        Self: 'a;
    fn lock(&self) -> Self::Guard<'_> {
        self.write()
    }
}

impl<T: ?Sized> Lockable for std::sync::Mutex<T> {
    type Guard<'a>
        = std::sync::MutexGuard<'a, T>
    where
        Self: 'a;
    fn lock(&self) -> Self::Guard<'_> {
        std::sync::Mutex::lock(self).unwrap_or_else(|p| p.into_inner())
    }
}

/// A condition variable that works with any [`Lockable`] lock (Boost
/// `condition_variable_any`): `wait(&lock, guard)` releases the lock by
/// dropping `guard`, parks the calling fiber (or thread) until notified,
/// and returns a new guard of `lock`. Notifications wake waiters in FIFO
/// order. Unlike [`Condvar`](super::Condvar) it may be used with several
/// locks over time (each waiter names its own).
///
/// Wake-ups may be spurious, as with every condition variable: re-check
/// the condition, or use [`wait_while`](Self::wait_while). A fiber being
/// destroyed by the runtime's shutdown cannot park, so its `wait` returns
/// at once. Waiting on a `std::sync::Mutex` from a fiber is fine, but
/// while the fiber *takes* it again the whole worker thread blocks (keep
/// such sections short, as always with a thread lock in a fiber).
///
/// ```
/// use std::sync::Arc;
/// use numafiber::{fiber, sync::{CondvarAny, RwLock}, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let n = rt.block_on(|| {
///     let st = Arc::new((RwLock::new(0), CondvarAny::new()));
///     let st2 = st.clone();
///     let h = fiber::spawn(move || { *st2.0.write() = 7; st2.1.notify_all(); });
///     let g = st.1.wait_while(&st.0, st.0.write(), |n| *n == 0);
///     let n = *g;
///     drop(g);
///     fiber::await_fiber(h);
///     n
/// });
/// assert_eq!(n, 7);
/// ```
pub struct CondvarAny {
    core: Waiters,
}

impl Default for CondvarAny {
    fn default() -> Self {
        CondvarAny::new()
    }
}

impl std::fmt::Debug for CondvarAny {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CondvarAny").field("waiting", &self.core.waiting()).finish()
    }
}

impl CondvarAny {
    /// A new condition variable.
    ///
    /// ```
    /// numafiber::sync::CondvarAny::new().notify_one(); // nobody waits: no effect
    /// ```
    pub const fn new() -> CondvarAny {
        CondvarAny { core: Waiters::new() }
    }

    /// Release `lock` (drop `guard`, which must be a guard of `lock`), park
    /// until notified, take `lock` again and return its new guard.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use numafiber::sync::CondvarAny;
    /// let st = Arc::new((Mutex::new(false), CondvarAny::new()));
    /// let st2 = st.clone();
    /// let t = std::thread::spawn(move || { *st2.0.lock().unwrap() = true; st2.1.notify_one(); });
    /// let mut g = st.0.lock().unwrap();
    /// while !*g { g = st.1.wait(&st.0, g); }
    /// t.join().unwrap();
    /// ```
    #[track_caller]
    pub fn wait<'a, L: Lockable + ?Sized>(&self, lock: &'a L, guard: L::Guard<'a>) -> L::Guard<'a> {
        self.core.wait(self, || drop(guard), None);
        lock.lock()
    }

    /// Wait while `condition` holds (checked with the lock held).
    ///
    /// ```
    /// use numafiber::sync::{CondvarAny, Mutex};
    /// let (m, cv) = (Mutex::new(2), CondvarAny::new());
    /// let g = cv.wait_while(&m, m.lock(), |n| *n == 0); // already false: no wait
    /// assert_eq!(*g, 2);
    /// ```
    #[track_caller]
    pub fn wait_while<'a, L, T>(
        &self,
        lock: &'a L,
        mut guard: L::Guard<'a>,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> L::Guard<'a>
    where
        L: Lockable + ?Sized,
        T: ?Sized,
        L::Guard<'a>: std::ops::DerefMut<Target = T>,
    {
        while condition(&mut *guard) {
            guard = self.wait(lock, guard);
            if crate::runtime::current_cannot_suspend() {
                break; // a dying fiber cannot wait (type docs)
            }
        }
        guard
    }

    /// [`wait`](Self::wait) for at most `dur`; the flag says whether the
    /// time ran out.
    ///
    /// ```
    /// use std::time::Duration;
    /// use numafiber::sync::{CondvarAny, RwLock};
    /// let (l, cv) = (RwLock::new(()), CondvarAny::new());
    /// let (_g, r) = cv.wait_timeout(&l, l.write(), Duration::from_millis(1));
    /// assert!(r.timed_out());
    /// ```
    #[track_caller]
    pub fn wait_timeout<'a, L: Lockable + ?Sized>(
        &self,
        lock: &'a L,
        guard: L::Guard<'a>,
        dur: Duration,
    ) -> (L::Guard<'a>, WaitTimeoutResult) {
        self.wait_deadline(lock, guard, Instant::now().checked_add(dur))
    }

    /// [`wait`](Self::wait) until `deadline` at the latest (Boost
    /// `condition_variable_any::wait_until`).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use numafiber::sync::{CondvarAny, Mutex};
    /// let (m, cv) = (Mutex::new(()), CondvarAny::new());
    /// let (_g, r) = cv.wait_until(&m, m.lock(), Instant::now() + Duration::from_millis(1));
    /// assert!(r.timed_out());
    /// ```
    #[track_caller]
    pub fn wait_until<'a, L: Lockable + ?Sized>(
        &self,
        lock: &'a L,
        guard: L::Guard<'a>,
        deadline: Instant,
    ) -> (L::Guard<'a>, WaitTimeoutResult) {
        self.wait_deadline(lock, guard, Some(deadline))
    }

    /// [`wait_while`](Self::wait_while) until `deadline` at the latest; the
    /// flag says whether it gave up with the condition still true.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use numafiber::sync::{CondvarAny, Mutex};
    /// let (m, cv) = (Mutex::new(false), CondvarAny::new());
    /// let d = Instant::now() + Duration::from_millis(1);
    /// let (g, r) = cv.wait_while_until(&m, m.lock(), d, |ok| !*ok);
    /// assert!(r.timed_out() && !*g);
    /// ```
    #[track_caller]
    pub fn wait_while_until<'a, L, T>(
        &self,
        lock: &'a L,
        mut guard: L::Guard<'a>,
        deadline: Instant,
        mut condition: impl FnMut(&mut T) -> bool,
    ) -> (L::Guard<'a>, WaitTimeoutResult)
    where
        L: Lockable + ?Sized,
        T: ?Sized,
        L::Guard<'a>: std::ops::DerefMut<Target = T>,
    {
        loop {
            if !condition(&mut *guard) {
                return (guard, WaitTimeoutResult::new(false));
            }
            let (g, r) = self.wait_deadline(lock, guard, Some(deadline));
            guard = g;
            if r.timed_out() || crate::runtime::current_cannot_suspend() {
                let still = condition(&mut *guard);
                return (guard, WaitTimeoutResult::new(still));
            }
        }
    }

    #[track_caller]
    fn wait_deadline<'a, L: Lockable + ?Sized>(
        &self,
        lock: &'a L,
        guard: L::Guard<'a>,
        deadline: Option<Instant>,
    ) -> (L::Guard<'a>, WaitTimeoutResult) {
        let timed_out = self.core.wait(self, || drop(guard), deadline);
        (lock.lock(), WaitTimeoutResult::new(timed_out))
    }

    /// Wake the first waiter, if any.
    ///
    /// ```
    /// numafiber::sync::CondvarAny::new().notify_one();
    /// ```
    pub fn notify_one(&self) {
        self.core.notify_one();
    }

    /// Wake every waiter.
    ///
    /// ```
    /// numafiber::sync::CondvarAny::new().notify_all();
    /// ```
    pub fn notify_all(&self) {
        self.core.notify_all();
    }
}
