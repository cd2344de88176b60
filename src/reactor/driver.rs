//! The driver hand-off: which idle worker sleeps in `epoll_wait`, and how a
//! waker reaches it. The protocol is in `README.md` beside this file; this
//! is its whole synchronisation, on the loom facade, so that the models in
//! `tests/loom.rs` run this code (with a stand-in for `mio::Poll`).

use crate::loom::sync::atomic::{AtomicBool, Ordering::*};
use crate::runtime::idle::Sleeper;

/// Who may poll the reactor: at most one worker at a time (the *driver*).
#[derive(Debug)]
pub(crate) struct Gate {
    /// A worker holds the driver role (polls, or is about to).
    driving: AtomicBool,
    /// A worker failed to enter while the role was held: the holder must
    /// wake a sleeper when it leaves, so that someone polls again.
    contended: AtomicBool,
}

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate { driving: AtomicBool::new(false), contended: AtomicBool::new(false) }
    }

    /// Try to become the driver. On failure the contention is recorded, and
    /// the entry retried once: if the holder left between the first attempt
    /// and the record, the retry succeeds; otherwise the holder's `leave`
    /// comes after the record in the `SeqCst` order and sees it.
    pub(crate) fn try_enter(&self) -> bool {
        if self.driving.compare_exchange(false, true, SeqCst, Relaxed).is_ok() {
            return true;
        }
        self.contended.store(true, SeqCst);
        self.driving.compare_exchange(false, true, SeqCst, Relaxed).is_ok()
    }

    /// Give the role back. Returns whether some worker failed to enter
    /// meanwhile (then the caller must hand off: wake a sleeper).
    pub(crate) fn leave(&self) -> bool {
        self.driving.store(false, SeqCst);
        self.contended.swap(false, SeqCst)
    }
}

/// One worker's "I am in `epoll_wait`" flag, read by whoever unparks it.
#[derive(Debug)]
pub(crate) struct PollFlag {
    polling: AtomicBool,
}

impl PollFlag {
    pub(crate) fn new() -> PollFlag {
        PollFlag { polling: AtomicBool::new(false) }
    }

    /// The driver is about to block in the poll. Set the flag, then check
    /// that nobody claimed the worker meanwhile (a claimer clears
    /// `sleeping` *before* it reads this flag): if one did, do not block.
    /// Either the claimer's read comes after our store in the `SeqCst`
    /// order (it sees `polling` and wakes the poll), or its claim comes
    /// before our check (we see it and do not poll).
    pub(crate) fn begin_poll(&self, me: &Sleeper) -> bool {
        self.polling.store(true, SeqCst);
        if !me.is_sleeping() {
            self.polling.store(false, SeqCst);
            return false;
        }
        true
    }

    /// The poll returned.
    pub(crate) fn end_poll(&self) {
        self.polling.store(false, SeqCst);
    }

    /// Unpark side, after the claim: whether the worker must be woken
    /// through the reactor's waker (as well as its thread's park token).
    pub(crate) fn in_poll(&self) -> bool {
        self.polling.load(SeqCst)
    }
}
