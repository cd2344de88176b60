//! `Mutex<T>`: FIFO hand-off, parks the fiber (or the plain thread).

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicU8, Ordering::*};
use std::time::{Duration, Instant};

use super::queue::{acquire_without_parking, Inner, Outcome, Reason, WaitQueue};
use crate::runtime::task::wait_kind;

/// The lock is held.
const LOCKED: u8 = 0b01;
/// The wait queue is not empty (then `LOCKED` is set too: a hand-off keeps
/// it set while the lock changes owner). Changed only under the queue lock.
const QUEUED: u8 = 0b10;

/// A mutual-exclusion lock whose `lock` parks the calling *fiber* (not its
/// worker thread) or, on a plain thread, the thread. Fibers and threads may
/// share one mutex.
///
/// Contended locks are handed over in FIFO order: an unlock with waiters
/// gives the lock directly to the first of them, so nobody can barge ahead
/// of a queued waiter and nobody starves. The uncontended path is one
/// compare-and-swap to lock and one to unlock.
///
/// There is no poisoning: a panic while the lock is held just unlocks it.
/// A guard may be held across suspension points (the fiber may migrate to
/// another worker and unlock there).
///
/// ```
/// use std::sync::Arc;
/// use numafiber::{fiber, sync::Mutex, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let m = Arc::new(Mutex::new(0u64));
/// let m2 = m.clone();
/// rt.block_on(move || {
///     let hs: Vec<_> = (0..8).map(|_| {
///         let m = m2.clone();
///         fiber::spawn(move || for _ in 0..100 { *m.lock() += 1; fiber::yield_now(); })
///     }).collect();
///     fiber::when_all(hs);
/// });
/// assert_eq!(*m.lock(), 800); // and from a plain thread
/// ```
pub struct Mutex<T: ?Sized> {
    state: AtomicU8,
    queue: WaitQueue<()>,
    data: UnsafeCell<T>,
}

// SAFETY: the mutex hands out access to `T` to one guard at a time, on
// whatever thread holds it, so it needs exactly what `std::sync::Mutex`
// needs: `T: Send`.
unsafe impl<T: ?Sized + Send> Send for Mutex<T> {}
// SAFETY: as above; `&Mutex<T>` only gives exclusive access through a guard.
unsafe impl<T: ?Sized + Send> Sync for Mutex<T> {}

/// Exclusive access to a [`Mutex`]'s data; unlocks on drop.
///
/// ```
/// let m = numafiber::sync::Mutex::new(vec![1]);
/// let mut g = m.lock();
/// g.push(2);
/// drop(g);
/// assert_eq!(*m.lock(), [1, 2]);
/// ```
#[must_use = "if unused the Mutex will immediately unlock"]
pub struct MutexGuard<'a, T: ?Sized> {
    lock: &'a Mutex<T>,
}

// SAFETY: a guard only gives `&T` through `&MutexGuard`, so sharing it needs
// `T: Sync`, as for `std::sync::MutexGuard`.
unsafe impl<T: ?Sized + Sync> Sync for MutexGuard<'_, T> {}

impl<T> Mutex<T> {
    /// A new unlocked mutex.
    ///
    /// ```
    /// let m = numafiber::sync::Mutex::new(5);
    /// assert_eq!(*m.lock(), 5);
    /// ```
    pub const fn new(value: T) -> Mutex<T> {
        Mutex { state: AtomicU8::new(0), queue: WaitQueue::new(()), data: UnsafeCell::new(value) }
    }

    /// Consume the mutex and return its data.
    ///
    /// ```
    /// let m = numafiber::sync::Mutex::new(String::from("x"));
    /// assert_eq!(m.into_inner(), "x");
    /// ```
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> Mutex<T> {
    /// Acquire the lock, parking the caller (fiber or thread) while another
    /// holds it. Waiters are served in FIFO order.
    ///
    /// ```
    /// let m = numafiber::sync::Mutex::new(1);
    /// *m.lock() += 1;
    /// assert_eq!(*m.lock(), 2);
    /// ```
    #[track_caller]
    pub fn lock(&self) -> MutexGuard<'_, T> {
        if self.state.compare_exchange(0, LOCKED, Acquire, Relaxed).is_err() {
            self.lock_slow(None);
        }
        MutexGuard { lock: self }
    }

    /// Acquire the lock, waiting at most `dur` (Boost `timed_mutex::try_lock_for`);
    /// `None` if it is still held by someone else then. Timed by the
    /// runtime's timer inside fibers. A waiter that times out leaves the
    /// FIFO; the others keep their places.
    ///
    /// ```
    /// use std::time::Duration;
    /// let m = numafiber::sync::Mutex::new(0);
    /// let g = m.lock();
    /// assert!(m.try_lock_for(Duration::from_millis(2)).is_none());
    /// drop(g);
    /// assert!(m.try_lock_for(Duration::from_millis(2)).is_some());
    /// ```
    #[track_caller]
    pub fn try_lock_for(&self, dur: Duration) -> Option<MutexGuard<'_, T>> {
        match Instant::now().checked_add(dur) {
            Some(d) => self.try_lock_until(d),
            None => Some(self.lock()), // beyond any representable time: wait as long as it takes
        }
    }

    /// Acquire the lock, waiting until `deadline` at the latest (Boost
    /// `timed_mutex::try_lock_until`); `None` if it is still held then. A
    /// deadline in the past still takes a free lock. A fiber being
    /// destroyed by the runtime's shutdown cannot wait: it gets `None`
    /// unless the lock is free.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let m = numafiber::sync::Mutex::new(());
    /// assert!(m.try_lock_until(Instant::now()).is_some(), "free: taken at once");
    /// let _g = m.lock();
    /// assert!(m.try_lock_until(Instant::now() + Duration::from_millis(1)).is_none());
    /// ```
    #[track_caller]
    pub fn try_lock_until(&self, deadline: Instant) -> Option<MutexGuard<'_, T>> {
        if self.state.compare_exchange(0, LOCKED, Acquire, Relaxed).is_ok() || self.lock_slow(Some(deadline)) {
            Some(MutexGuard { lock: self })
        } else {
            None
        }
    }

    /// Acquire the lock if it is free (and nobody is queued for it).
    ///
    /// In a fiber, a failure first lets the worker's other fibers run (a
    /// yield, as Boost.Fiber's `try_lock`), so a loop spinning on
    /// `try_lock` lets the holder finish even on one worker.
    ///
    /// ```
    /// let m = numafiber::sync::Mutex::new(1);
    /// let g = m.lock();
    /// assert!(m.try_lock().is_none());
    /// drop(g);
    /// assert!(m.try_lock().is_some());
    /// ```
    pub fn try_lock(&self) -> Option<MutexGuard<'_, T>> {
        let g = self.try_lock_now();
        if g.is_none() {
            crate::runtime::yield_after_failed_try();
        }
        g
    }

    /// `try_lock` without the yield after a failure.
    fn try_lock_now(&self) -> Option<MutexGuard<'_, T>> {
        self.state.compare_exchange(0, LOCKED, Acquire, Relaxed).ok().map(|_| MutexGuard { lock: self })
    }

    /// Whether the lock is held right now (a hint; it may change at once).
    ///
    /// ```
    /// let m = numafiber::sync::Mutex::new(());
    /// let g = m.lock();
    /// assert!(m.is_locked());
    /// drop(g);
    /// assert!(!m.is_locked());
    /// ```
    pub fn is_locked(&self) -> bool {
        self.state.load(Relaxed) & LOCKED != 0
    }

    /// Mutable access without locking (the borrow proves exclusivity).
    ///
    /// ```
    /// let mut m = numafiber::sync::Mutex::new(1);
    /// *m.get_mut() = 2;
    /// assert_eq!(*m.lock(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    /// Queue and wait; `true` once the lock is ours, `false` when the
    /// deadline passed first (or, with a deadline, the caller cannot
    /// suspend). Without a deadline it returns only with the lock.
    #[cold]
    #[track_caller]
    fn lock_slow(&self, deadline: Option<Instant>) -> bool {
        let (id, node) = {
            let mut q = self.queue.lock();
            let mut s = self.state.load(Relaxed);
            loop {
                if s & LOCKED == 0 {
                    // Free and (so) nobody queued: take it.
                    match self.state.compare_exchange_weak(s, s | LOCKED, Acquire, Relaxed) {
                        Ok(_) => return true,
                        Err(a) => s = a,
                    }
                } else {
                    match self.state.compare_exchange_weak(s, s | QUEUED, Relaxed, Relaxed) {
                        Ok(_) => break,
                        Err(a) => s = a,
                    }
                }
            }
            q.push(())
        };
        let clear_if_empty = |q: &mut Inner<(), ()>| {
            if !q.has_waiters() {
                self.state.fetch_and(!QUEUED, Relaxed);
            }
        };
        let reason = Reason::new(wait_kind::MUTEX, self);
        match self.queue.park(id, &node, deadline, reason, clear_if_empty, || self.unlock()) {
            // Handed over: LOCKED stayed set for us. The Acquire pairs with
            // the releaser's queue-lock release and signal store.
            Outcome::Signalled => {
                std::sync::atomic::fence(Acquire);
                true
            }
            // Our entry is gone (`clear_if_empty` ran): nothing was granted.
            Outcome::TimedOut(()) => false,
            Outcome::Cancelled(()) if deadline.is_some() => {
                self.state.compare_exchange(0, LOCKED, Acquire, Relaxed).is_ok()
            }
            Outcome::Cancelled(()) => {
                acquire_without_parking("Mutex", || {
                    self.state.compare_exchange(0, LOCKED, Acquire, Relaxed).ok().map(drop)
                });
                true
            }
        }
    }

    /// Release: hand the lock to the first waiter, if any.
    fn unlock(&self) {
        if self.state.compare_exchange(LOCKED, 0, Release, Relaxed).is_ok() {
            return;
        }
        self.unlock_slow();
    }

    #[cold]
    fn unlock_slow(&self) {
        let mut q = self.queue.lock();
        match q.grant_first() {
            Some(e) => {
                if !q.has_waiters() {
                    self.state.store(LOCKED, Release);
                }
                drop(q);
                e.node.wake();
            }
            None => {
                // The last waiter left (timeout/cancel) meanwhile.
                self.state.store(0, Release);
            }
        }
    }
}

impl<T: ?Sized> Deref for MutexGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this caller holds the lock,
        // which excludes every other guard.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T: ?Sized> DerefMut for MutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`, and `&mut self` makes this access unique.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T: ?Sized> Drop for MutexGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.unlock();
    }
}

impl<'a, T: ?Sized> MutexGuard<'a, T> {
    /// Unlock without dropping the borrow's target; returns the mutex.
    pub(crate) fn unlock_into(self) -> &'a Mutex<T> {
        let m = self.lock;
        drop(self);
        m
    }
    /// The mutex's address: its identity for `Condvar`'s one-mutex check.
    pub(crate) fn mutex_addr(&self) -> usize {
        self.lock as *const Mutex<T> as *const () as usize
    }
    /// Re-create a guard after `lock` (used by [`super::Condvar`]).
    #[track_caller]
    pub(crate) fn relock(m: &'a Mutex<T>) -> MutexGuard<'a, T> {
        m.lock()
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for MutexGuard<'_, T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for Mutex<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Mutex");
        match self.try_lock_now() {
            Some(g) => d.field("data", &&*g),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

impl<T: Default> Default for Mutex<T> {
    fn default() -> Self {
        Mutex::new(T::default())
    }
}

impl<T> From<T> for Mutex<T> {
    fn from(v: T) -> Self {
        Mutex::new(v)
    }
}
