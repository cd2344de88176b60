//! What a select needs of a channel: queue an arm's entry, take it back,
//! and hand a value back when a select gives up a granted one.

use std::sync::atomic::Ordering::Acquire;
use std::sync::Arc;

use super::{live_recv, live_send, Receiver, Sender, Slot};
use crate::sync::queue::{Handoff, Me};
use crate::sync::select::TokenRef;

// A select's arm registers with `sel_register` after trying the operation
// without waiting; it gets `None`/`Err` instead of an entry when the
// operation could complete now (the select then aborts its round and tries
// again, claiming the other side's token if that is a select). It removes
// its entry with `sel_unregister`; `false`/`None` there means the entry
// was granted (popped) by whoever claimed the select's token.

impl<T> Receiver<T> {
    /// The channel's identity (its allocation): checked by
    /// `SelectedOperation::recv`.
    pub(crate) fn chan_addr(&self) -> *const () {
        Arc::as_ptr(&self.chan) as *const ()
    }
    /// Queue a select's receive arm, pointing at `cell`; `None` (nothing
    /// queued) when a receive would not wait now: a value is buffered, a
    /// sender that can still be granted waits, or the channel is over.
    pub(crate) fn sel_register(&self, cell: &Handoff<T>, tok: TokenRef) -> Option<u64> {
        let mut q = self.chan.q.lock();
        let me = Me::current();
        let sender_waits = !q.state.closed && q.state.send_waiters > 0 && q.any_waiter(|s| live_send(s, &tok));
        if !q.state.buf.is_empty() || sender_waits || q.state.recv_disconnected() || me.cannot_suspend() {
            return None;
        }
        q.state.recv_waiters += 1;
        Some(q.push_as(me, Slot::SelRecv(cell.ptr(), tok)).0)
    }
    /// Remove entry `id`: `true` if it was still queued, `false` if it was
    /// granted (its value is in the arm's cell).
    pub(crate) fn sel_unregister(&self, id: u64) -> bool {
        let mut q = self.chan.q.lock();
        let removed = q.remove(id).is_some();
        if removed {
            q.state.recv_waiters -= 1;
        }
        removed
    }
    /// Every sender is gone or the channel is closed (unlocked check, for
    /// a woken select).
    pub(crate) fn sel_gone(&self) -> bool {
        self.chan.no_senders.load(Acquire) || self.chan.closed.load(Acquire)
    }
    /// Take and release the channel's internal lock: a select that saw its
    /// token claimed by a granter of this channel waits here until that
    /// granter's critical section (fill and signal) is over.
    pub(crate) fn sel_barrier(&self) {
        drop(self.chan.q.lock());
    }
    /// A value granted to a select that is unwound before using it.
    pub(crate) fn sel_put_back(&self, v: T) {
        self.chan.put_back(v);
    }
}

impl<T> Sender<T> {
    /// The channel's identity (see `Receiver::chan_addr`).
    pub(crate) fn chan_addr(&self) -> *const () {
        Arc::as_ptr(&self.chan) as *const ()
    }
    /// Queue a select's send arm with its value; `Err(v)` (nothing queued)
    /// when a send would not wait now: room in the buffer, a receiver that
    /// can still be granted waits, or the channel is over.
    pub(crate) fn sel_register(&self, v: T, tok: TokenRef) -> Result<u64, T> {
        let mut q = self.chan.q.lock();
        let me = Me::current();
        let room = q.state.cap.is_none_or(|c| q.state.buf.len() < c);
        let receiver_waits = q.state.recv_waiters > 0 && q.any_waiter(|s| live_recv(s, &tok));
        if room || receiver_waits || q.state.send_disconnected() || me.cannot_suspend() {
            return Err(v);
        }
        q.state.send_waiters += 1;
        Ok(q.push_as(me, Slot::SelSend(v, tok)).0)
    }
    /// Remove entry `id`: its value back if it was still queued, `None` if
    /// it was granted (a receiver took the value).
    pub(crate) fn sel_unregister(&self, id: u64) -> Option<T> {
        let e = {
            let mut q = self.chan.q.lock();
            let e = q.remove(id);
            if e.is_some() {
                q.state.send_waiters -= 1;
            }
            e
        };
        match e?.payload {
            Slot::SelSend(v, _) => Some(v),
            _ => unreachable!("a select's send entry holds its value"),
        }
    }
    /// Every receiver is gone or the channel is closed (unlocked check).
    pub(crate) fn sel_gone(&self) -> bool {
        self.chan.no_receivers.load(Acquire) || self.chan.closed.load(Acquire)
    }
    /// See `Receiver::sel_barrier`.
    pub(crate) fn sel_barrier(&self) {
        drop(self.chan.q.lock());
    }
}
