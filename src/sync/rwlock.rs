//! `RwLock<T>`: many readers or one writer, FIFO-fair, parks fibers.

use std::cell::UnsafeCell;
use std::fmt;
use std::ops::{Deref, DerefMut};

use super::queue::{acquire_without_parking, wake_all, Inner, Outcome, Reason, WaitQueue};
use crate::runtime::task::wait_kind;

#[derive(Default)]
struct State {
    readers: usize,
    writer: bool,
}

/// A reader-writer lock whose waits park the calling fiber (or thread).
///
/// Fair: requests are served in arrival order, so a queued writer is not
/// starved by a stream of readers (a reader arriving after a queued writer
/// waits behind it), and consecutive queued readers are admitted together.
///
/// ```
/// use std::sync::Arc;
/// use numafiber::{fiber, sync::RwLock, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let l = Arc::new(RwLock::new(vec![1, 2, 3]));
/// let l2 = l.clone();
/// let sum = rt.block_on(move || {
///     let hs: Vec<_> = (0..4).map(|_| { let l = l2.clone(); fiber::spawn(move || l.read().iter().sum::<i32>()) }).collect();
///     l2.write().push(4);
///     fiber::when_all(hs).into_iter().sum::<i32>()
/// });
/// assert!(sum == 24 || sum >= 24);
/// assert_eq!(l.read().len(), 4);
/// ```
pub struct RwLock<T: ?Sized> {
    /// Waiter payload: `true` for a writer.
    queue: WaitQueue<State, bool>,
    data: UnsafeCell<T>,
}

// SAFETY: like `std::sync::RwLock`: writers need `T: Send` (the value may be
// mutated from any thread), readers share `&T` across threads (`T: Sync`).
unsafe impl<T: ?Sized + Send> Send for RwLock<T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Send + Sync> Sync for RwLock<T> {}

/// Shared access to an [`RwLock`]'s data.
///
/// ```
/// let l = numafiber::sync::RwLock::new(1);
/// let (a, b) = (l.read(), l.read());
/// assert_eq!(*a + *b, 2);
/// ```
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockReadGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
}

/// Exclusive access to an [`RwLock`]'s data.
///
/// ```
/// let l = numafiber::sync::RwLock::new(1);
/// *l.write() += 1;
/// assert_eq!(*l.read(), 2);
/// ```
#[must_use = "if unused the RwLock will immediately unlock"]
pub struct RwLockWriteGuard<'a, T: ?Sized> {
    lock: &'a RwLock<T>,
}

// SAFETY: guards give `&T` through a shared reference: `T: Sync` suffices.
unsafe impl<T: ?Sized + Sync> Sync for RwLockReadGuard<'_, T> {}
// SAFETY: as above.
unsafe impl<T: ?Sized + Sync> Sync for RwLockWriteGuard<'_, T> {}

/// Admit queued waiters that can run now (FIFO): a writer at the front if
/// the lock is free, else every reader at the front. Returns them to wake.
fn admit(q: &mut Inner<State, bool>) -> Vec<super::queue::Entry<bool>> {
    let mut out = Vec::new();
    while let Some(front) = q.front() {
        if q.state.writer {
            break;
        }
        if front.payload {
            if q.state.readers == 0 {
                q.state.writer = true;
                out.extend(q.grant_first());
            }
            break;
        }
        q.state.readers += 1;
        out.extend(q.grant_first());
    }
    out
}

impl<T> RwLock<T> {
    /// A new unlocked lock.
    ///
    /// ```
    /// let l = numafiber::sync::RwLock::new("v");
    /// assert_eq!(*l.read(), "v");
    /// ```
    pub const fn new(value: T) -> RwLock<T> {
        RwLock { queue: WaitQueue::new(State { readers: 0, writer: false }), data: UnsafeCell::new(value) }
    }

    /// Consume the lock and return the data.
    ///
    /// ```
    /// assert_eq!(numafiber::sync::RwLock::new(3).into_inner(), 3);
    /// ```
    pub fn into_inner(self) -> T {
        self.data.into_inner()
    }
}

impl<T: ?Sized> RwLock<T> {
    /// Shared access; parks while a writer holds or waits for the lock.
    ///
    /// ```
    /// let l = numafiber::sync::RwLock::new(5);
    /// assert_eq!(*l.read(), 5);
    /// ```
    #[track_caller]
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.acquire(false);
        RwLockReadGuard { lock: self }
    }

    /// Exclusive access; parks while anyone else holds the lock.
    ///
    /// ```
    /// let l = numafiber::sync::RwLock::new(5);
    /// *l.write() = 6;
    /// assert_eq!(*l.read(), 6);
    /// ```
    #[track_caller]
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.acquire(true);
        RwLockWriteGuard { lock: self }
    }

    /// Shared access if available now. In a fiber, a failure first lets the worker's
    /// other fibers run (a yield), as `Mutex::try_lock` does.
    ///
    /// ```
    /// let l = numafiber::sync::RwLock::new(0);
    /// let w = l.write();
    /// assert!(l.try_read().is_none());
    /// drop(w);
    /// assert!(l.try_read().is_some());
    /// ```
    pub fn try_read(&self) -> Option<RwLockReadGuard<'_, T>> {
        let g = self.try_acquire(false).then(|| RwLockReadGuard { lock: self });
        if g.is_none() {
            crate::runtime::yield_after_failed_try();
        }
        g
    }

    /// Exclusive access if available now. In a fiber, a failure first lets the worker's
    /// other fibers run (a yield), as `Mutex::try_lock` does.
    ///
    /// ```
    /// let l = numafiber::sync::RwLock::new(0);
    /// let r = l.read();
    /// assert!(l.try_write().is_none());
    /// drop(r);
    /// assert!(l.try_write().is_some());
    /// ```
    pub fn try_write(&self) -> Option<RwLockWriteGuard<'_, T>> {
        let g = self.try_acquire(true).then(|| RwLockWriteGuard { lock: self });
        if g.is_none() {
            crate::runtime::yield_after_failed_try();
        }
        g
    }

    /// Mutable access without locking.
    ///
    /// ```
    /// let mut l = numafiber::sync::RwLock::new(1);
    /// *l.get_mut() = 2;
    /// assert_eq!(*l.read(), 2);
    /// ```
    pub fn get_mut(&mut self) -> &mut T {
        self.data.get_mut()
    }

    fn try_acquire(&self, write: bool) -> bool {
        let mut q = self.queue.lock();
        let free = !q.state.writer && !q.has_waiters() && (!write || q.state.readers == 0);
        if free {
            if write {
                q.state.writer = true;
            } else {
                q.state.readers += 1;
            }
        }
        free
    }

    #[track_caller]
    fn acquire(&self, write: bool) {
        let (id, node) = {
            let mut q = self.queue.lock();
            if !q.state.writer && !q.has_waiters() && (!write || q.state.readers == 0) {
                if write {
                    q.state.writer = true;
                } else {
                    q.state.readers += 1;
                }
                return;
            }
            q.push(write)
        };
        let kind = if write { wait_kind::RWLOCK_WRITE } else { wait_kind::RWLOCK_READ };
        // A waiter leaving from the front may let the ones behind it in.
        let on_removed = |q: &mut Inner<State, bool>| {
            wake_all(admit(q));
        };
        let release = || self.release(write);
        match self.queue.park(id, &node, None, Reason::new(kind, self), on_removed, release) {
            Outcome::Signalled => {}
            Outcome::TimedOut(_) => unreachable!("no deadline"),
            Outcome::Cancelled(_) => acquire_without_parking("RwLock", || self.try_acquire(write).then_some(())),
        }
    }

    fn release(&self, write: bool) {
        let es = {
            let mut q = self.queue.lock();
            if write {
                q.state.writer = false;
            } else {
                q.state.readers -= 1;
            }
            admit(&mut q)
        };
        wake_all(es);
    }
}

impl<T: ?Sized> Deref for RwLockReadGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a read guard exists only while the lock counts it as a
        // reader, which excludes every writer.
        unsafe { &*self.lock.data.get() }
    }
}
impl<T: ?Sized> Drop for RwLockReadGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.release(false);
    }
}
impl<T: ?Sized> Deref for RwLockWriteGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: a write guard exists only while it is the lock's single
        // writer, which excludes every other guard.
        unsafe { &*self.lock.data.get() }
    }
}
impl<T: ?Sized> DerefMut for RwLockWriteGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as in `deref`; `&mut self` makes the access unique.
        unsafe { &mut *self.lock.data.get() }
    }
}
impl<T: ?Sized> Drop for RwLockWriteGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.release(true);
    }
}

impl<T: ?Sized + fmt::Debug> fmt::Debug for RwLock<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("RwLock");
        match self.try_acquire(false).then(|| RwLockReadGuard { lock: self }) {
            Some(g) => d.field("data", &&*g),
            None => d.field("data", &format_args!("<locked>")),
        };
        d.finish()
    }
}

impl<T: Default> Default for RwLock<T> {
    fn default() -> Self {
        RwLock::new(T::default())
    }
}
