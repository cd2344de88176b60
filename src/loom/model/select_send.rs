//! loom model: a `select` parked on a send arm while its channel is
//! closed (`sync::select`, `channel::Chan::close`).

use super::QueueLock;
use crate::sync::queue::Inner;
use crate::sync::select::{Token, TokenRef};

/// A select's send entry, as `channel::Slot::SelSend`: the value (in the
/// queue while the arm is registered) and the select's token.
type SelSendEntry = (u64, TokenRef);

/// One channel's wait queue (`closed` under its lock, as
/// `channel::State::closed`) with its unlocked mirror (`Chan::closed`),
/// and a select with one send arm registered on it.
pub struct SendArmModel {
    queue: QueueLock<Inner<bool, SelSendEntry>>,
    closed: ::loom::sync::atomic::AtomicBool,
}

/// The select's side: its token, and its send arm as `select::SendArm`
/// keeps it (the value while not registered, the entry id while it is).
pub struct SendArmWaiter {
    token: Token,
    value: Option<u64>,
    id: Option<u64>,
}

impl SendArmWaiter {
    pub fn new(v: u64) -> SendArmWaiter {
        SendArmWaiter { token: Token::new(), value: Some(v), id: None }
    }
    /// `Round::wait`'s loop: a granter claimed the token.
    pub fn selected(&self) -> Option<usize> {
        self.token.selected()
    }
}

impl SendArmModel {
    pub fn new() -> SendArmModel {
        SendArmModel {
            queue: QueueLock::new_loom(Inner::new(false)),
            closed: ::loom::sync::atomic::AtomicBool::new(false),
        }
    }
    /// Step 2 (`SendArm::register` -> `Sender::sel_register`): reset the
    /// token and queue the value with an entry, unless the channel is over.
    pub fn register(&self, w: &mut SendArmWaiter) -> bool {
        w.token.reset();
        let mut q = self.queue.lock();
        if q.state {
            return false;
        }
        let v = w.value.take().expect("an unspent arm holds its value");
        let (id, _node) = q.push((v, w.token.at(0)));
        w.id = Some(id);
        true
    }
    /// `SendArm::gone`: the arm still waits (its value is held, or queued)
    /// and the channel is over (the unlocked mirror).
    pub fn gone(&self, w: &SendArmWaiter) -> bool {
        (w.value.is_some() || w.id.is_some()) && self.closed.load(::loom::sync::atomic::Ordering::Acquire)
    }
    /// `Chan::close`: under the lock set the flag and its mirror, then wake
    /// every waiter without granting.
    pub fn close(&self) {
        let nodes = {
            let mut q = self.queue.lock();
            q.state = true;
            self.closed.store(true, ::loom::sync::atomic::Ordering::Release);
            q.nodes()
        };
        for n in nodes {
            n.wake();
        }
    }
    /// Step 4 (`Round::leave`, `SendArm::unregister`): abort the token and
    /// take the entry back; the value is the arm's again.
    pub fn leave(&self, w: &mut SendArmWaiter) -> Option<usize> {
        let won = w.token.abort();
        if let Some(id) = w.id.take() {
            if let Some(e) = self.queue.lock().remove(id) {
                w.value = Some(e.payload.0);
            }
        }
        won
    }
    /// The value the arm holds after the round (`SendError(v)` next).
    pub fn value(&self, w: &SendArmWaiter) -> Option<u64> {
        w.value
    }
}
