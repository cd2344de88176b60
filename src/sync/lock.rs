//! The wait queue's internal lock (`WaitQueue`): a
//! test-and-test-and-set spin lock whose unlock is a plain release store.
//!
//! # Why a spin lock here
//!
//! The lock guards a primitive's state and its FIFO of waiters, and is held
//! only for O(1) work (check the state, push or pop an entry, move a value;
//! O(waiters) only when a close or `notify_all` wakes everyone), **never
//! across a park, a wake-up or user code** (`queue`'s protocol). So the
//! holder is nearly always running, and a waiter rarely waits longer than
//! a few dozen instructions. `std::sync::Mutex` pays a locked swap in
//! `unlock` to learn whether a sleeper must be woken (a futex lock must);
//! here nobody sleeps on the lock word, so `unlock` is a release store
//! (x86: a plain `mov`): one locked instruction less per acquisition,
//! i.e. two per channel hand-off (Boost.Fiber's `spinlock_ttas` does the
//! same for the same kind of critical section).
//!
//! # Never a hang
//!
//! The holder's thread may be preempted by the OS (it may be a plain
//! thread, or a worker thread the OS descheduled) for as long as the OS
//! likes. A waiter therefore does not only spin: it spins with a growing
//! number of `spin_loop` hints for about a microsecond, then gives its CPU
//! away with `std::thread::yield_now` (the holder may be waiting for this
//! very CPU, e.g. on a machine with fewer CPUs than runnable threads), and
//! after a few dozen yields sleeps 50 µs between looks, so a long-preempted
//! holder does not cost a busy CPU. Every look is a relaxed load (the
//! "test" before the "test-and-set"), so waiters do not bounce the lock's
//! cache line while they wait. The lock is taken again with a CAS
//! (`Acquire`); the holder's `Release` store orders its critical section
//! before the next holder's.
//!
//! Not fair: an unlocking thread may take the lock again before a spinning
//! waiter sees it free. The critical sections are FIFO queue operations
//! and the primitives built on them keep their own FIFO order of waiters,
//! so fairness between fibers comes from the queue, not from this lock.
//!
//! The loom models (`tests/loom.rs`: `queue_lock_mutual_exclusion`, and
//! `handoff_grant_vs_leave` / `handoff_grant_vs_park`, which run the real
//! `queue::Inner` under this lock) instantiate the same code with loom's
//! `AtomicBool` as the flag (the [`LockFlag`] parameter; `std`'s is used
//! otherwise, so that `WaitQueue::new` and the public `const fn new`s built
//! on it stay `const`).

use std::cell::UnsafeCell;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::Ordering::*;

/// The lock word: `true` while held. Implemented for `std`'s `AtomicBool`
/// and, under `cfg(loom)`, loom's, whose `backoff` hands the step to the
/// model checker.
pub(crate) trait LockFlag {
    /// Take the lock if it is free (`Acquire` on success).
    fn try_acquire(&self) -> bool;
    /// Held now (a relaxed hint for the waiter's "test").
    fn is_held(&self) -> bool;
    /// Release the lock (`Release` store).
    fn release(&self);
    /// Wait a little before the next look; `step` counts the looks so far.
    fn backoff(step: &mut u32);
}

/// Spin rounds (each `2^min(step, 6)` `spin_loop` hints: about 1 µs in all).
const SPIN_STEPS: u32 = 10;
/// Then `yield_now` this many times.
const YIELD_STEPS: u32 = 40;
/// Then sleep this long between looks.
const SLEEP: std::time::Duration = std::time::Duration::from_micros(50);

impl LockFlag for std::sync::atomic::AtomicBool {
    #[inline(always)]
    fn try_acquire(&self) -> bool {
        self.compare_exchange_weak(false, true, Acquire, Relaxed).is_ok()
    }
    #[inline(always)]
    fn is_held(&self) -> bool {
        self.load(Relaxed)
    }
    #[inline(always)]
    fn release(&self) {
        self.store(false, Release)
    }
    fn backoff(step: &mut u32) {
        let s = *step;
        *step = s.saturating_add(1);
        if s < SPIN_STEPS {
            for _ in 0..(1u32 << s.min(6)) {
                std::hint::spin_loop();
            }
        } else if s < SPIN_STEPS + YIELD_STEPS {
            std::thread::yield_now();
        } else {
            std::thread::sleep(SLEEP);
        }
    }
}

#[cfg(loom)]
impl LockFlag for ::loom::sync::atomic::AtomicBool {
    fn try_acquire(&self) -> bool {
        self.compare_exchange(false, true, Acquire, Relaxed).is_ok()
    }
    fn is_held(&self) -> bool {
        self.load(Relaxed)
    }
    fn release(&self) {
        self.store(false, Release)
    }
    fn backoff(_: &mut u32) {
        // Every spinning look must give the model a chance to run the
        // holder, or loom explores an endless loop.
        ::loom::thread::yield_now();
    }
}

/// A value behind the spin lock (module docs).
pub(crate) struct SpinLock<T, F: LockFlag = std::sync::atomic::AtomicBool> {
    flag: F,
    data: UnsafeCell<T>,
}

// SAFETY: the data is reached only through a guard, and at most one guard
// exists at a time (the flag's acquire/release protocol), so sharing the
// lock shares `T` only by moving access between threads: `T: Send`.
unsafe impl<T: Send, F: LockFlag + Sync> Sync for SpinLock<T, F> {}
// SAFETY: moving the lock moves the `T` and the flag.
unsafe impl<T: Send, F: LockFlag + Send> Send for SpinLock<T, F> {}

impl<T> SpinLock<T> {
    pub(crate) const fn new(value: T) -> SpinLock<T> {
        SpinLock { flag: std::sync::atomic::AtomicBool::new(false), data: UnsafeCell::new(value) }
    }
}

#[cfg(loom)]
impl<T> SpinLock<T, ::loom::sync::atomic::AtomicBool> {
    /// The same lock on loom's flag (the loom models).
    pub(crate) fn new_loom(value: T) -> Self {
        SpinLock { flag: ::loom::sync::atomic::AtomicBool::new(false), data: UnsafeCell::new(value) }
    }
}

impl<T, F: LockFlag> SpinLock<T, F> {
    /// Take the lock (spinning, then yielding, then sleeping while it is
    /// held: module docs).
    #[inline]
    pub(crate) fn lock(&self) -> SpinGuard<'_, T, F> {
        if !self.flag.try_acquire() {
            self.lock_contended();
        }
        SpinGuard { lock: self }
    }

    #[cold]
    #[inline(never)]
    fn lock_contended(&self) {
        let mut step = 0;
        loop {
            while self.flag.is_held() {
                F::backoff(&mut step);
            }
            if self.flag.try_acquire() {
                return;
            }
        }
    }
}

/// Access to the locked value; unlocks when dropped (also while unwinding:
/// the lock has no poisoning, its critical sections run no user code).
pub(crate) struct SpinGuard<'a, T, F: LockFlag = std::sync::atomic::AtomicBool> {
    lock: &'a SpinLock<T, F>,
}

impl<T, F: LockFlag> Deref for SpinGuard<'_, T, F> {
    type Target = T;
    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: we hold the lock, so no other guard exists.
        unsafe { &*self.lock.data.get() }
    }
}

impl<T, F: LockFlag> DerefMut for SpinGuard<'_, T, F> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: we hold the lock, and `&mut self` makes this the only
        // access through this guard.
        unsafe { &mut *self.lock.data.get() }
    }
}

impl<T, F: LockFlag> Drop for SpinGuard<'_, T, F> {
    #[inline]
    fn drop(&mut self) {
        self.lock.flag.release();
    }
}

#[cfg(test)]
mod tests {
    use super::SpinLock;
    use std::sync::Arc;

    /// Threads (more than this machine's cores, so holders get preempted)
    /// increment a plain counter under the lock: no increment is lost.
    #[test]
    fn counts_every_increment_under_contention() {
        let lock = Arc::new(SpinLock::new(0u64));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let lock = lock.clone();
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        *lock.lock() += 1;
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*lock.lock(), 8 * 20_000);
    }

    /// A guard dropped while unwinding releases the lock (no poisoning).
    #[test]
    fn unlocks_on_unwind() {
        let lock = Arc::new(SpinLock::new(1u32));
        let l2 = lock.clone();
        let r = std::thread::spawn(move || {
            let _g = l2.lock();
            panic!("inside the critical section");
        })
        .join();
        assert!(r.is_err());
        assert_eq!(*lock.lock(), 1);
    }
}
