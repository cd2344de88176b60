//! The wake slot: one fiber per worker that was just made runnable on that
//! worker (woken by, or spawned from, the fiber it runs), to be run by the
//! worker as soon as its current fiber gives control back (Go's `runnext`,
//! tokio's LIFO slot). The protocol is in `../README.md`, "The wake slot".
//!
//! The slot holds one `Arc<T>` (a `TaskRef` in the runtime) as a raw
//! pointer. Only the owning worker thread [`put`](WakeSlot::put)s; the owner
//! [`take`](WakeSlot::take)s and thieves [`steal`](WakeSlot::steal) with an
//! atomic swap, so exactly one party gets each entry, and the entry's run
//! permission travels with it (`AcqRel` on every swap). A slot that no
//! thief can reach (a runtime with one worker, or a policy that does not
//! steal: `WorkerLocal::steal` returns at once there, and nothing else
//! calls `steal` on another worker's slot; fixed when the runtime is built)
//! is private to its owner, which then puts and takes with plain loads and
//! stores (two locked instructions less per wake-up on one worker).
//!
//! Thieves take an
//! entry only once it has sat in the slot for a grace period: the
//! [`generation`](WakeSlot::generation) (bumped by every `put`) lets a thief
//! tell "the same entry as before" from "a fresh one".
//!
//! The first sighting of an entry is stamped in the slot itself
//! ([`ripe`](WakeSlot::ripe)), shared by all thieves, so that no thief
//! keeps a record per victim (memory per worker independent of the worker
//! count). The stamp is a relaxed hint outside the handshake: a
//! stale or racing stamp can only make a thief take an entry a little early
//! or late, and the swap still gives each entry to exactly one party.

use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::loom::sync::atomic::{AtomicPtr, AtomicUsize, Ordering::*};

/// One slot (see the module docs).
pub(crate) struct WakeSlot<T> {
    ptr: AtomicPtr<T>,
    /// Some other thread may `steal` (fixed at construction: the runtime
    /// has two or more workers and a stealing policy). `false`: the owner
    /// takes with plain loads and stores (module docs).
    stealable: bool,
    /// Number of `put`s so far (written by the owner only; relaxed).
    gen: AtomicUsize,
    /// When a thief first saw the current entry: the low 32 bits of its
    /// generation (high half) and of the nanoseconds since [`EPOCH`] (low
    /// half). Relaxed, written by thieves (see `ripe`).
    seen: std::sync::atomic::AtomicU64,
}

/// Time base of the `seen` stamps.
static EPOCH: OnceLock<Instant> = OnceLock::new();

// SAFETY: the slot owns at most one `Arc<T>`; moving it between threads is
// moving that `Arc`, which needs `T: Send + Sync`.
unsafe impl<T: Send + Sync> Send for WakeSlot<T> {}
// SAFETY: every access to the pointer is an atomic swap or load, and each
// non-null value is taken out by exactly one swap (see `put`/`take`/`steal`).
unsafe impl<T: Send + Sync> Sync for WakeSlot<T> {}

impl<T> WakeSlot<T> {
    /// `stealable`: whether any thread but the owner will ever call
    /// [`steal`](WakeSlot::steal) (module docs).
    pub(crate) fn new(stealable: bool) -> WakeSlot<T> {
        WakeSlot {
            ptr: AtomicPtr::new(std::ptr::null_mut()),
            stealable,
            gen: AtomicUsize::new(0),
            seen: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Owner only: put `t` in the slot and return the previous entry (the
    /// caller queues it where thieves see it, and may wake a worker).
    ///
    /// `SeqCst`, so that a later `SeqCst` read of the idle counters by the
    /// pusher is ordered against a sleeper's announcement (`runtime::worker::idle`).
    /// A private slot (module docs) is written with a plain store.
    #[inline]
    pub(crate) fn put(&self, t: Arc<T>) -> Option<Arc<T>> {
        self.gen.store(self.gen.load(Relaxed).wrapping_add(1), Relaxed);
        let new = Arc::into_raw(t) as *mut T;
        let p = if self.stealable {
            self.ptr.swap(new, SeqCst)
        } else {
            // Nobody else touches the pointer: no read-modify-write needed.
            let p = self.ptr.load(Relaxed);
            self.ptr.store(new, Relaxed);
            p
        };
        // SAFETY: a non-null pointer in the slot came from `Arc::into_raw`
        // in `put`, and this swap (or, in a private slot, this store) took
        // it out: we own that reference now.
        (!p.is_null()).then(|| unsafe { Arc::from_raw(p) })
    }

    /// Owner: take the entry, if any.
    #[inline]
    pub(crate) fn take(&self) -> Option<Arc<T>> {
        let p = self.ptr.load(Relaxed);
        if p.is_null() {
            return None;
        }
        if self.stealable {
            return self.steal();
        }
        // Nobody else touches the pointer (module docs): the entry is ours.
        self.ptr.store(std::ptr::null_mut(), Relaxed);
        // SAFETY: as in `put`: the pointer came from `Arc::into_raw`, and
        // we just took the only copy out of the slot.
        Some(unsafe { Arc::from_raw(p) })
    }

    /// Owner of a stealable slot: take the entry if it is `t` (a thief may
    /// have taken it already).
    #[inline]
    pub(crate) fn take_if(&self, t: &Arc<T>) -> Option<Arc<T>> {
        let want = Arc::as_ptr(t) as *mut T;
        match self.ptr.compare_exchange(want, std::ptr::null_mut(), AcqRel, Relaxed) {
            // SAFETY: the slot owned the reference it stored for `want`
            // (`put`), and the successful exchange moved it to us alone.
            Ok(p) => Some(unsafe { Arc::from_raw(p) }),
            Err(_) => None,
        }
    }

    /// Owner: the slot holds `t` now (a thief may take it right after).
    #[inline]
    pub(crate) fn holds(&self, t: &Arc<T>) -> bool {
        std::ptr::eq(self.ptr.load(Relaxed), Arc::as_ptr(t))
    }

    /// Anyone: take the entry, if any (thieves call this only after the
    /// grace period; see the module docs).
    pub(crate) fn steal(&self) -> Option<Arc<T>> {
        let p = self.ptr.swap(std::ptr::null_mut(), AcqRel);
        // SAFETY: as in `put`: the swap took the only copy of this pointer.
        (!p.is_null()).then(|| unsafe { Arc::from_raw(p) })
    }

    /// An entry is in the slot now (a hint unless the caller is the owner).
    #[inline]
    pub(crate) fn is_occupied(&self) -> bool {
        !self.ptr.load(Acquire).is_null()
    }

    /// How many entries were ever put (changes with every `put`).
    #[inline]
    pub(crate) fn generation(&self) -> usize {
        self.gen.load(Relaxed)
    }

    /// Thief: whether the entry of generation `gen` (read before checking
    /// that the slot is occupied) has been seen in the slot for `grace`
    /// since some thief first saw it at or before `now`. The first thief to
    /// see a generation stamps it and gets `false`. Stamps keep 32 bits of
    /// time (about 4.3 s of nanoseconds, compared with wrap-around), enough
    /// for graces of microseconds.
    pub(crate) fn ripe(&self, gen: usize, now: Instant, grace: Duration) -> bool {
        let epoch = *EPOCH.get_or_init(Instant::now);
        let t = now.saturating_duration_since(epoch).as_nanos() as u32; // wraps on purpose
        let g = gen as u32; // the low 32 bits name the entry
        let seen = self.seen.load(std::sync::atomic::Ordering::Relaxed);
        if (seen >> 32) as u32 == g {
            return u128::from(t.wrapping_sub(seen as u32)) >= grace.as_nanos();
        }
        self.seen.store((u64::from(g) << 32) | u64::from(t), std::sync::atomic::Ordering::Relaxed);
        false
    }
}

impl<T> Drop for WakeSlot<T> {
    fn drop(&mut self) {
        drop(self.steal());
    }
}
