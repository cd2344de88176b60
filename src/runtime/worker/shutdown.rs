//! Shutdown hand-back: a worker leaving its loop moves every fiber it
//! still holds to its inbox, where the draining thread finds it.
//!
//! Rule: after this no fiber is reachable only through this worker's
//! private queues; the book's "Shutdown" (`../README.md`) and the numbered
//! argument at the top of `../mod.rs`.

use std::sync::atomic::Ordering::*;

use crate::runtime::task::job::Runnable;

use super::WorkerLocal;

impl WorkerLocal {
    /// Shutdown: move every queued fiber of this worker to its inbox, where
    /// the draining thread finds it. Timers only hold extra references to
    /// parked fibers, which the registry also holds.
    pub(super) fn hand_back_queues(&self) {
        let me = self.me();
        while let Some(t) = self.deque.pop() {
            me.inbox.push(t);
        }
        while let Some(t) = self.ready.pop() {
            me.inbox.push(t);
        }
        while let Some(t) = self.spawned.pop() {
            me.inbox.push(t);
        }
        while let Some(t) = self.yielded.pop_front() {
            t.transition_to_queued_after_yield();
            me.inbox.push(Runnable::Task(t));
        }
        if let Some(t) = self.run_next.borrow_mut().take() {
            me.inbox.push(Runnable::Task(t));
        }
        let waiting = std::mem::take(&mut *self.resume_after.borrow_mut());
        for t in waiting {
            t.transition_to_queued_after_yield();
            me.inbox.push(Runnable::Task(t));
        }
        if let Some(t) = me.wake_slot.take() {
            me.inbox.push(Runnable::Task(t));
        }
        if let Some(t) = me.held.steal() {
            me.inbox.push(Runnable::Task(t));
        }
        while let Some(t) = self.pop_starved() {
            t.transition_to_queued_after_yield();
            me.inbox.push(Runnable::Task(t));
        }
        me.timers.clear();
        let stacks = self.stacks.borrow();
        me.counters.stacks_mapped.store(stacks.mapped, Relaxed);
    }
}
