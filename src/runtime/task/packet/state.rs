//! The lock-free [`Packet`]: the state word, the result cell, the owner's
//! inline waiter slot and the locked list of other waiters, with the
//! owner's and the completer's sides of the protocol (the `packet` module
//! docs, "The packet protocol"; "Detaching" for `detach`).

use std::sync::Arc;

use crate::loom::cell::UnsafeCell;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use crate::loom::sync::{Mutex, MutexGuard};
use crate::runtime::task::up::{self, Direct, JoinError, Waiter};

/// Lifecycle bits of `Packet::state` (module docs).
const DONE: usize = 1;
const PANICKED: usize = 2;
const CLAIMED: usize = 4;
const WAITING: usize = 8;
const WOKEN: usize = 16;
const TAKEN: usize = 32;
const MORE: usize = 64;
const DETACHED: usize = 128;

/// Shared between a fiber's main function and its `JoinHandle` (module
/// docs).
pub(crate) struct Packet<T> {
    state: AtomicUsize,
    result: UnsafeCell<Option<Result<T, JoinError>>>,
    waiter: UnsafeCell<Option<Direct>>,
    more: Mutex<Vec<Waiter>>,
}

// SAFETY: the cells are accessed only as the module docs' ownership rules
// allow: at any instant one thread owns the result cell, and the inline
// slot is either owned by one thread or only read. The value moves from
// the completer's thread to the owner's, so `T: Send` is required (as for
// `Mutex<T>`); the raw pointers in a `Direct` waiter are dereferenced only while
// their targets are alive (module docs), and `Task` and `Shared` are
// `Sync`.
unsafe impl<T: Send> Send for Packet<T> {}
// SAFETY: see `Send`: shared access never gives two threads the value.
unsafe impl<T: Send> Sync for Packet<T> {}

impl<T> Packet<T> {
    /// A packet of its own (graph latches, models).
    pub(crate) fn new() -> Arc<Packet<T>> {
        Arc::new(Packet::empty())
    }

    pub(super) fn empty() -> Packet<T> {
        Packet {
            state: AtomicUsize::new(0),
            result: UnsafeCell::new(None),
            waiter: UnsafeCell::new(None),
            more: Mutex::new(Vec::new()),
        }
    }

    fn lock_more(&self) -> MutexGuard<'_, Vec<Waiter>> {
        // Never held across user code, so never poisoned; recover anyway.
        self.more.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Acquire) & DONE != 0
    }

    /// Publish `r` from the packet's one completer (a [`Main`](super::main_packet::MainPacket)).
    ///
    /// # Safety
    /// No other completion of this packet ever happens: neither another
    /// `complete_unique` nor [`Packet::complete`].
    ///
    /// Returns the result back when the owner detached first
    /// ([`Packet::detach`]: a spawn whose packet lives in its task): the
    /// completer then drops it (on the fiber's stack). `None` otherwise.
    #[inline]
    #[must_use = "a detached result must be dropped by the caller"]
    pub(crate) unsafe fn complete_unique(&self, r: Result<T, JoinError>) -> Option<Result<T, JoinError>> {
        let p = if matches!(&r, Err(e) if e.is_panic()) { PANICKED } else { 0 };
        // SAFETY: before `DONE` the result cell is the completer's, and we
        // are the only one (caller). It still holds its initial `None` (this
        // is the one completion), so it is overwritten without a drop.
        self.result.with_mut(|c| unsafe {
            debug_assert!((*c).is_none(), "a packet completes once");
            c.write(Some(r))
        });
        let prev = self.state.fetch_or(DONE | CLAIMED | p, AcqRel);
        debug_assert_eq!(prev & (DONE | CLAIMED), 0, "a packet completes once");
        // SAFETY: we just set `DONE` and `prev` is the word before.
        unsafe { self.after_done(prev) };
        if prev & DETACHED == 0 {
            return None;
        }
        // SAFETY: the owner's `fetch_or(DETACHED)` came before our
        // `fetch_or(DONE)` on the one word, so it saw no `DONE` and left
        // for good: it never touches the result cell again (module docs,
        // "Detaching"). The cell is ours again.
        self.result.with_mut(|c| unsafe { (*c).take() })
    }

    /// Owner, leaving without taking the result (a `JoinHandle` dropped
    /// unjoined, whose packet lives in its task): after this call the
    /// owner never touches the packet again. Returns the result when the
    /// packet was done already: the caller drops it. Otherwise the
    /// completer will (`complete_unique` returns it there). A packet whose
    /// result was taken is left alone. `TAKEN` is not set, so a scope
    /// still sees an unjoined panic (`Completion::unjoined_panic`).
    ///
    /// # Safety
    /// The caller is the packet's owner, has withdrawn its inline waiter
    /// (`clear_waiter`) and does not use the packet afterwards. The
    /// packet's completer is a [`Main`](super::main_packet::MainPacket) (`complete_unique`), never the
    /// general [`Packet::complete`], which ignores `DETACHED`.
    #[inline]
    pub(crate) unsafe fn detach(&self) -> Option<Result<T, JoinError>> {
        if self.state.load(Acquire) & TAKEN != 0 {
            // Joined (the owner's own store: no race).
            return None;
        }
        let prev = self.state.fetch_or(DETACHED, AcqRel);
        if prev & DONE == 0 {
            return None;
        }
        // Done before we detached: the result is the owner's (the AcqRel
        // RMW read the completer's `DONE` RMW). The waiter was withdrawn,
        // so `settled` returns at once unless the completer still wakes
        // a waiter registered before (`clear_waiter` waited for that).
        self.settled();
        // SAFETY: `DONE`, settled, and we are the owner.
        self.result.with_mut(|c| unsafe { (*c).take() })
    }

    /// Publish `r` unless the packet was completed already (then `r` is
    /// dropped): for latches that several parties may open.
    pub(crate) fn complete(&self, r: Result<T, JoinError>) {
        if self.state.load(Acquire) & CLAIMED != 0 {
            return;
        }
        if self.state.fetch_or(CLAIMED, AcqRel) & CLAIMED != 0 {
            return;
        }
        let p = if matches!(&r, Err(e) if e.is_panic()) { PANICKED } else { 0 };
        // SAFETY: we won `CLAIMED`: the result cell is ours until `DONE`.
        self.result.with_mut(|c| unsafe { *c = Some(r) });
        let prev = self.state.fetch_or(DONE | p, AcqRel);
        // SAFETY: we just set `DONE` and `prev` is the word before.
        unsafe { self.after_done(prev) };
    }

    /// The completer's wake-ups after its `fetch_or(DONE)` returned `prev`.
    ///
    /// # Safety
    /// The caller is the completer that set `DONE`.
    unsafe fn after_done(&self, prev: usize) {
        if prev & WAITING != 0 {
            // The registration is fixed now (the owner's CASes fail on
            // `DONE`), and the owner waits for `WOKEN` before it touches
            // the slot: a shared read is race-free.
            self.waiter.with(|w| {
                // SAFETY: `WAITING` was set, so the owner wrote the slot
                // before its Release CAS, which our AcqRel RMW read.
                if let Some(w) = unsafe { &*w } {
                    // SAFETY: we are before our `WOKEN` store, and the
                    // owner waits for it before it leaves its wait (or
                    // unwinds out of it), so its task and runtime are
                    // alive: `Direct::wake`'s contract (module docs).
                    unsafe { w.wake() };
                }
            });
            // A read-modify-write, not a plain store of `now | WOKEN`: a
            // scope's `MORE` or a second latch opener's `CLAIMED` may land
            // in between, and the loom models do not terminate with the
            // plain store (the owner's spin on `WOKEN` then reads a stale
            // word forever in loom's model), so this stays an RMW.
            self.state.fetch_or(WOKEN, Release);
        }
        if prev & MORE != 0 {
            // Counted waiters: safe to wake after `WOKEN`. The completer
            // keeps the packet alive (it holds an `Arc`).
            let ws = std::mem::take(&mut *self.lock_more());
            for w in ws {
                w.wake();
            }
        }
    }

    /// Owner: wait until the completer is done with our inline waiter.
    /// Returns the state word then. Only spins in a window of a few
    /// instructions of a running completer (module docs).
    #[inline]
    fn settled(&self) -> usize {
        let mut s = self.state.load(Acquire);
        let mut spins = 0u32;
        while s & (DONE | WAITING | WOKEN) == DONE | WAITING {
            spins += 1;
            backoff(spins);
            s = self.state.load(Acquire);
        }
        s
    }

    /// Owner: take the result of a packet seen `DONE`.
    ///
    /// # Safety
    /// The caller is the packet's owner (one `JoinHandle`, or a latch's one
    /// waiter), saw `DONE`, and has not taken the result before.
    unsafe fn take_done(&self) -> Result<T, JoinError> {
        let s = self.settled();
        // SAFETY: `DONE` and settled: both cells are the owner's now.
        self.waiter.with_mut(|w| unsafe { *w = None });
        // SAFETY: as above; the completer published the cell with `DONE`.
        let r = self.result.with_mut(|c| unsafe { (*c).take() });
        // Plain store: module docs.
        self.state.store(s | TAKEN, Release);
        r.expect("a done packet holds its result until the owner takes it")
    }

    /// Owner: put `w` in the inline slot. `false` when the packet is done
    /// already (nothing registered; the caller takes the result).
    ///
    /// # Safety
    /// The caller is the packet's owner (see `take_done`).
    unsafe fn register(&self, w: Direct) -> bool {
        let mut s = self.state.load(Acquire);
        let mut w = Some(w);
        loop {
            if s & DONE != 0 {
                return false;
            }
            if s & WAITING != 0 {
                // SAFETY: a shared read, which the docs allow while
                // `WAITING` is set (our earlier registration: a spurious
                // wake-up, another round of `when_any`).
                let same =
                    self.waiter.with(|x| unsafe { &*x }.as_ref().zip(w.as_ref()).is_some_and(|(a, b)| a.same(b)));
                if same {
                    return true;
                }
                // Another waiter (a handle that changed hands after an
                // abandoned wait): take the slot back first.
                match self.state.compare_exchange(s, s & !WAITING, Acquire, Acquire) {
                    Ok(_) => s &= !WAITING,
                    Err(a) => {
                        s = a;
                        continue;
                    }
                }
            }
            // SAFETY: `WAITING` is clear and `DONE` is not set: the slot is
            // the owner's alone.
            self.waiter.with_mut(|x| unsafe { *x = w.take() });
            match self.state.compare_exchange(s, s | WAITING, Release, Acquire) {
                Ok(_) => return true,
                Err(a) => {
                    // Not published: still ours (for another try, or to drop
                    // if `DONE` came meanwhile).
                    // SAFETY: as above, `WAITING` was never set.
                    w = self.waiter.with_mut(|x| unsafe { (*x).take() });
                    s = a;
                }
            }
        }
    }

    /// Owner: withdraw the inline waiter, if any; when the completer has
    /// it already, wait until it is done with it. Afterwards nobody reads
    /// the waiter, so the waiting fiber may go (`when_any` for the losers,
    /// `JoinHandle`'s drop, an unwinding `wait`).
    ///
    /// # Safety
    /// The caller is the packet's owner (see `take_done`).
    #[inline]
    pub(crate) unsafe fn clear_waiter(&self) {
        let s = self.state.load(Acquire);
        if s & WAITING == 0 || s & TAKEN != 0 {
            return;
        }
        // SAFETY: forwarded (caller).
        unsafe { self.clear_waiter_slow(s) }
    }

    /// `clear_waiter` with a waiter registered at `s`.
    ///
    /// # Safety
    /// As `clear_waiter`.
    #[cold]
    unsafe fn clear_waiter_slow(&self, mut s: usize) {
        loop {
            if s & WAITING == 0 || s & TAKEN != 0 {
                return;
            }
            if s & DONE != 0 {
                self.settled();
                // SAFETY: done and settled: the slot is the owner's.
                self.waiter.with_mut(|x| unsafe { *x = None });
                return;
            }
            match self.state.compare_exchange(s, s & !WAITING, Acquire, Acquire) {
                Ok(_) => {
                    // SAFETY: we cleared `WAITING` before any `DONE`: no
                    // completer read this registration, the slot is ours.
                    self.waiter.with_mut(|x| unsafe { *x = None });
                    return;
                }
                Err(a) => s = a,
            }
        }
    }

    /// Owner: the result if the packet is done.
    ///
    /// # Safety
    /// The caller is the packet's owner and has not taken the result.
    pub(crate) unsafe fn try_take(&self) -> Option<Result<T, JoinError>> {
        // SAFETY: forwarded (caller), `DONE` seen.
        self.is_done().then(|| unsafe { self.take_done() })
    }

    /// Owner: take the result if it is there; otherwise register the caller
    /// as the inline waiter (a spurious wake-up re-registers nothing).
    ///
    /// # Safety
    /// The caller is the packet's owner and has not taken the result.
    pub(crate) unsafe fn try_take_or_register(&self) -> Option<Result<T, JoinError>> {
        // SAFETY: forwarded (caller).
        if self.is_done() || !unsafe { self.register(Direct::current()) } {
            // SAFETY: forwarded (caller), `DONE` seen.
            return Some(unsafe { self.take_done() });
        }
        None
    }

    /// Owner: register the caller as the inline waiter unless done;
    /// returns done (`when_any`).
    ///
    /// # Safety
    /// The caller is the packet's owner.
    pub(crate) unsafe fn register_owner(&self) -> bool {
        // SAFETY: forwarded (caller).
        self.is_done() || !unsafe { self.register(Direct::current()) }
    }

    /// Owner: block until the result is there and take it.
    ///
    /// # Safety
    /// The caller is the packet's owner (one `JoinHandle`, or a latch's one
    /// waiter) and has not taken the result.
    pub(crate) unsafe fn wait(&self) -> Result<T, JoinError> {
        if !self.is_done() {
            /// Withdraws the waiter if the wait unwinds (a fiber destroyed
            /// while it joins): the completer must not wake it later.
            struct Leave<'a, T>(&'a Packet<T>);
            impl<T> Drop for Leave<'_, T> {
                fn drop(&mut self) {
                    // SAFETY: the owner's wait, unwinding.
                    unsafe { self.0.clear_waiter() };
                }
            }
            // SAFETY: forwarded (caller).
            if unsafe { self.register(Direct::current()) } {
                let leave = Leave(self);
                loop {
                    up::park();
                    if self.is_done() {
                        break;
                    }
                    // A spurious wake-up: the registration is still there.
                }
                std::mem::forget(leave);
            }
        }
        // SAFETY: forwarded (caller); `DONE` seen.
        unsafe { self.take_done() }
    }
}

/// The owner's pause while a completer finishes with its waiter.
#[inline]
fn backoff(spins: u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        crate::loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    if spins < 64 {
        std::hint::spin_loop();
    } else {
        up::yield_now();
    }
}

/// Type-erased view of a packet, for scopes.
pub(crate) trait Completion {
    fn is_done(&self) -> bool;
    /// Register the caller as waiter unless done; returns done.
    fn register_current(&self) -> bool;
    /// The fiber panicked and nobody took the panic.
    fn unjoined_panic(&self) -> bool;
}

impl<T> Completion for Packet<T> {
    fn is_done(&self) -> bool {
        Packet::is_done(self)
    }
    /// The slow path for waiters other than the owner (module docs).
    fn register_current(&self) -> bool {
        if self.is_done() {
            return true;
        }
        self.register_more(Waiter::current())
    }
    fn unjoined_panic(&self) -> bool {
        let s = self.state.load(Acquire);
        s & PANICKED != 0 && s & TAKEN == 0
    }
}

impl<T> Packet<T> {
    /// An async waiter (`JoinFuture::poll`): register `w` in the list of
    /// other waiters unless done; returns done. A later poll with another
    /// waker adds that one too; the earlier one is woken spuriously, which
    /// wakers allow.
    pub(crate) fn register_async(&self, w: &std::task::Waker) -> bool {
        if self.is_done() {
            return true;
        }
        self.register_more(Waiter::Async(w.clone()))
    }

    /// Push `w` to the list of other waiters (module docs); returns done
    /// (then `w` is not left behind).
    fn register_more(&self, w: Waiter) -> bool {
        let mut g = self.lock_more();
        let pushed = !g.iter().any(|x| x.same(&w));
        if pushed {
            g.push(w);
        }
        if self.state.fetch_or(MORE, AcqRel) & DONE != 0 {
            // The completer did not see our `MORE`: do not wait (and do
            // not leave the waiter behind for a later spurious wake-up).
            if pushed {
                g.pop();
            }
            return true;
        }
        false
    }
}
