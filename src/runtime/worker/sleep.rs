//! Parking an idle worker: give back stack memory, sleep on the thread's
//! futex or in the reactor (no longer than the next timer or the watch
//! deadline), and the re-check of visible work that closes the wake-up
//! handshake.
//!
//! Rule: a worker sleeps only through `Idle::sleep` (`idle.rs`), whose
//! re-check (`has_visible_work`) sees every queue a waker may have pushed
//! to; the book's "Parking and why no wake-up is lost", "The wake slot"
//! (watching parks) and "The I/O driver" (`../README.md`).

use std::sync::atomic::Ordering::*;
use std::time::Instant;

use super::Counters;
use crate::runtime::task::stack::budget;

use super::{WorkerLocal, WATCH_MAX};

impl WorkerLocal {
    /// Sleep until work may be there (protocol in `runtime::worker::idle` and
    /// `runtime::shared`): on the thread's futex, or in the reactor's
    /// `epoll_wait` if this worker is the driver (`runtime/README.md`, "The I/O driver");
    /// either way no longer than the next timer.
    pub(super) fn park_idle(&self) {
        let shared = &self.shared;
        let me = self.me();
        let released = {
            let mut pool = self.stacks.borrow_mut();
            me.counters.stacks_mapped.store(pool.mapped, Relaxed);
            pool.trim();
            shared.stacks.trim_spill();
            // Fallback: fibers wait for a stack somewhere; our free ones
            // must not sit in a pool meanwhile.
            shared.stacks.budgeted() && shared.stacks.starved() != 0 && pool.release_free() != 0
        };
        if released {
            shared.notify_stack_freed();
        }
        let mut ready = std::mem::take(&mut *self.io_ready.borrow_mut());
        let watch_until = self.watch_deadline();
        if watch_until.is_some() {
            shared.idle.set_watching(true);
        }
        let claimed = shared.idle.sleep(
            &me.sleeper,
            || self.has_visible_work() || shared.shutdown.load(SeqCst),
            || {
                if shared.shutdown.load(SeqCst) {
                    return false;
                }
                // Timers due within the slack fire together
                // (`Builder::timer_slack`; 0 unless set).
                let slack = std::time::Duration::from_nanos(shared.timer_slack_ns.load(Relaxed));
                let timers = self.next_deadline().map(|d| d.checked_add(slack).unwrap_or(d));
                let deadline = match (timers, watch_until) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                crate::runtime::io::park_worker(shared, self.index, deadline, &mut ready)
            },
        );
        if watch_until.is_some() {
            shared.idle.set_watching(false);
        }
        if claimed {
            Counters::bump(&me.counters.woken, 1);
        }
        // The stall monitor parks while every worker sleeps.
        shared.insight.monitor.worker_woke();
        // Withdrawn from the sleepers now: wake the fibers whose sockets
        // became ready. The first one is ours to run next and wakes nobody
        // (we are about to run it); the others go behind it and may wake
        // an idle worker ("Cheap wake-ups", `runtime/README.md`).
        let mut it = ready.drain(..);
        if let Some(t) = it.next() {
            shared.wake_for_self(self, t);
        }
        for t in it {
            shared.wake(t);
        }
        *self.io_ready.borrow_mut() = ready;
    }

    /// The deadline of a *watching* park, or `None` for a plain one.
    ///
    /// A fiber made runnable into a busy worker's wake slot by a fiber
    /// that then computes on (a producer feeding a consumer) wakes nobody
    /// (`Shared::push_local`: in a chain of hand-offs the waker runs it
    /// next, within nanoseconds). Searching workers take such an entry
    /// after `SLOT_GRACE`, but with every other worker asleep nobody would
    /// look, and the pair would run one after the other on one core. So a
    /// worker that parks while some other worker runs fibers (stealing
    /// policy, two or more workers) sleeps only until this deadline, then
    /// makes its steal passes again; each watch that finds nothing doubles
    /// the timeout up to `WATCH_MAX`, a successful steal resets it. When no
    /// other worker runs fibers (all asleep, searching, or driving the
    /// reactor), the park is plain: an idle runtime does not poll.
    pub(super) fn watch_deadline(&self) -> Option<Instant> {
        let shared = &self.shared;
        // `set_busy(false)` ran at the start of our search, so every busy
        // worker counted here is another one.
        if !self.can_share || shared.idle.num_busy() == 0 {
            return None;
        }
        let t = self.watch.get();
        self.watch.set((t * 2).min(WATCH_MAX));
        Some(Instant::now() + t)
    }

    pub(super) fn has_visible_work(&self) -> bool {
        let shared = &self.shared;
        let me = self.me();
        if !self.deque.is_empty()
            || !self.ready.is_empty()
            || me.wake_slot.is_occupied()
            || !me.inbox.is_empty()
            || !me.pinned_inbox.is_empty()
            || !shared.io_ready.is_empty()
            || !self.yielded.is_empty()
            || self.has_resume_after()
            || (self.starved_len.get() != 0 && budget::has_room())
        {
            return true;
        }
        if let Some(d) = self.next_deadline() {
            if d <= Instant::now() {
                return true;
            }
        }
        shared.sched.steals()
            && shared.workers.iter().enumerate().any(|(i, w)| i != self.index && w.has_stealable_work())
    }
}
