//! The arms of a select and its one-shot token: how each channel operation is tried, queued, granted and withdrawn (steps 1-4 of the protocol in the module above).

use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use crate::sync::channel::{Receiver, RecvError, SendError, Sender, TryRecvError, TrySendError};
use crate::sync::queue::Handoff;

/// The token is not claimed (entries of this round may be granted).
pub(super) const WAITING: usize = 0;
/// The select left the round (deadline, close, abort) before a granter
/// claimed it.
pub(super) const ABORTED: usize = 1;
/// `state == FIRST_ARM + i`: arm `i` was claimed.
pub(super) const FIRST_ARM: usize = 2;

/// A select's one-shot selection token: each round it is claimed at most
/// once (CAS from `WAITING`), by a granter or by the select's abort.
pub(crate) struct Token {
    state: AtomicUsize,
}

impl Token {
    pub(crate) fn new() -> Token {
        Token { state: AtomicUsize::new(WAITING) }
    }
    /// Start a round. Call only with no entry of this token queued (the
    /// queue locks taken to remove them order this store before any later
    /// granter's read).
    pub(crate) fn reset(&self) {
        self.state.store(WAITING, Relaxed);
    }
    /// The arm claimed this round, if any.
    pub(crate) fn selected(&self) -> Option<usize> {
        self.state.load(Acquire).checked_sub(FIRST_ARM)
    }
    /// Leave the round: `None` if the abort won, else the arm a granter
    /// claimed first.
    pub(crate) fn abort(&self) -> Option<usize> {
        match self.state.compare_exchange(WAITING, ABORTED, AcqRel, Acquire) {
            Ok(_) => None,
            Err(s) => s.checked_sub(FIRST_ARM),
        }
    }
    /// The reference an entry of arm `arm` carries.
    pub(crate) fn at(&self, arm: usize) -> TokenRef {
        TokenRef { tok: self, arm }
    }
}

/// A queued entry's pointer to its select's [`Token`], with its arm.
///
/// Dereferenced only under the lock of the queue holding the entry, while
/// the entry is queued: the select removes every entry of a round (under
/// each queue's lock) before its `Select` can move or be dropped, so the
/// token is alive then (the argument of `queue::Handoff`).
pub(crate) struct TokenRef {
    tok: *const Token,
    arm: usize,
}

// SAFETY: the pointer is only dereferenced under the queue lock while the
// entry is queued (type docs), and `Token` is `Sync` (an atomic).
unsafe impl Send for TokenRef {}

impl TokenRef {
    /// Claim the select for this entry's arm; call under the entry's queue
    /// lock, then grant (pop) this entry and no other of the select.
    pub(crate) fn claim(&self) -> bool {
        // SAFETY: under the queue lock with the entry queued (type docs).
        let t = unsafe { &*self.tok };
        t.state.compare_exchange(WAITING, FIRST_ARM + self.arm, AcqRel, Acquire).is_ok()
    }
    /// Both entries belong to the same select.
    pub(crate) fn same_select(&self, other: &TokenRef) -> bool {
        std::ptr::eq(self.tok, other.tok)
    }
    /// The select could still be granted through this entry.
    pub(crate) fn is_waiting(&self) -> bool {
        // SAFETY: as in `claim`.
        unsafe { &*self.tok }.state.load(Acquire) == WAITING
    }
}

/// One operation of a [`Select`], with its channel's type erased.
pub(super) trait Arm {
    /// Try the operation without waiting; `true` when it completed (or
    /// failed for good) and its outcome is stored.
    fn try_now(&mut self) -> bool;
    /// Queue an entry carrying `tok`; `false` when nothing was queued
    /// because the operation could complete now.
    fn register(&mut self, tok: TokenRef) -> bool;
    /// Remove the queued entry, if any; `true` if it had been granted.
    fn unregister(&mut self) -> bool;
    /// This arm was granted: wait out the granter's critical section
    /// (channel lock), then store the outcome.
    fn complete_granted(&mut self);
    /// Granted while the select unwinds: give a received value back.
    fn give_back_granted(&mut self);
    /// The channel is over (closed, or the other side all gone).
    fn gone(&self) -> bool;
    /// The caller cannot wait: fail the operation.
    fn fail(&mut self);
    /// The outcome was not collected (`SelectedOperation` dropped): give a
    /// received value back to its channel.
    fn discard_outcome(&mut self);
    fn chan(&self) -> *const ();
    fn is_send(&self) -> bool;
}

pub(super) struct RecvArm<'a, T> {
    pub(super) rx: &'a Receiver<T>,
    /// Where a sender puts the value (`queue::Handoff`); boxed with the
    /// arm, so it stays put while an entry points at it.
    pub(super) cell: Handoff<T>,
    pub(super) id: Option<u64>,
    pub(super) out: Option<Result<T, RecvError>>,
}

pub(super) struct SendArm<'a, T> {
    pub(super) tx: &'a Sender<T>,
    /// `None` once sent (the arm is spent: never ready again).
    pub(super) value: Option<T>,
    pub(super) id: Option<u64>,
    pub(super) out: Option<Result<(), SendError<T>>>,
}

impl<T> Arm for RecvArm<'_, T> {
    fn try_now(&mut self) -> bool {
        self.out = match self.rx.try_recv() {
            Ok(v) => Some(Ok(v)),
            Err(TryRecvError::Disconnected) => Some(Err(RecvError)),
            Err(TryRecvError::Empty) => return false,
        };
        true
    }
    fn register(&mut self, tok: TokenRef) -> bool {
        self.id = self.rx.sel_register(&self.cell, tok);
        self.id.is_some()
    }
    fn unregister(&mut self) -> bool {
        self.id.take().is_some_and(|id| !self.rx.sel_unregister(id))
    }
    fn complete_granted(&mut self) {
        self.rx.sel_barrier();
        // SAFETY: the arm's own cell; its entry was granted, and the
        // barrier above ordered the granter's write before this read.
        let v = unsafe { self.cell.take() };
        self.out = Some(Ok(v.expect("a granted receive arm has its value in its cell")));
    }
    fn give_back_granted(&mut self) {
        self.rx.sel_barrier();
        // SAFETY: as in `complete_granted`.
        if let Some(v) = unsafe { self.cell.take() } {
            self.rx.sel_put_back(v);
        }
    }
    fn gone(&self) -> bool {
        self.rx.sel_gone()
    }
    fn fail(&mut self) {
        self.out = Some(Err(RecvError));
    }
    fn discard_outcome(&mut self) {
        if let Some(Ok(v)) = self.out.take() {
            self.rx.sel_put_back(v);
        }
    }
    fn chan(&self) -> *const () {
        self.rx.chan_addr()
    }
    fn is_send(&self) -> bool {
        false
    }
}

impl<T> Arm for SendArm<'_, T> {
    fn try_now(&mut self) -> bool {
        let Some(v) = self.value.take() else { return false };
        self.out = match self.tx.try_send(v) {
            Ok(()) => Some(Ok(())),
            Err(TrySendError::Disconnected(v)) => Some(Err(SendError(v))),
            Err(TrySendError::Full(v)) => {
                self.value = Some(v);
                return false;
            }
        };
        true
    }
    fn register(&mut self, tok: TokenRef) -> bool {
        let Some(v) = self.value.take() else { return true }; // spent: waits for nothing
        match self.tx.sel_register(v, tok) {
            Ok(id) => {
                self.id = Some(id);
                true
            }
            Err(v) => {
                self.value = Some(v);
                false
            }
        }
    }
    fn unregister(&mut self) -> bool {
        let Some(id) = self.id.take() else { return false };
        match self.tx.sel_unregister(id) {
            Some(v) => {
                self.value = Some(v);
                false
            }
            None => true,
        }
    }
    fn complete_granted(&mut self) {
        self.tx.sel_barrier();
        self.out = Some(Ok(()));
    }
    fn give_back_granted(&mut self) {
        // The value was taken by a receiver: the send happened.
    }
    fn gone(&self) -> bool {
        // While registered the value sits in the channel's queue, not in
        // `value`: the arm still waits then. Only a spent arm (sent, and
        // not queued) waits for nothing.
        (self.value.is_some() || self.id.is_some()) && self.tx.sel_gone()
    }
    fn fail(&mut self) {
        if let Some(v) = self.value.take() {
            self.out = Some(Err(SendError(v)));
        }
    }
    fn discard_outcome(&mut self) {
        self.out = None;
    }
    fn chan(&self) -> *const () {
        self.tx.chan_addr()
    }
    fn is_send(&self) -> bool {
        true
    }
}
