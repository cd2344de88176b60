//! Stealing: the search of an idle worker (`steal`, spinning while counted
//! as searching), one pass over the policy's victims, and what is taken
//! from one victim (deque, ready queue, spawn batch, inbox, then its ripe
//! wake-slot or held-child entry).
//!
//! Rule: a thief takes a chunk through the stealers only, and a slot entry
//! only after it has sat there for `SLOT_GRACE`; the book's "One loop
//! iteration", step 4, "Searching (spinning) workers" and "The wake slot"
//! (`../README.md`).

use std::sync::atomic::Ordering::*;
use std::time::Instant;

use crossbeam_deque::Steal;

use super::Counters;
use crate::runtime::task::job::Runnable;
use crate::runtime::task::{Task, TaskRef};

use super::{
    WorkerLocal, INBOX_GRACE, SLOT_GRACE, SPAWN_SEARCH, SPIN_BUDGET, SPIN_BUDGET_MIN, SPIN_PAUSES, SPIN_PAUSES_MAX,
    SPIN_POLL_EVERY, WATCH_MIN,
};

impl WorkerLocal {
    /// Look for work elsewhere: steal passes over the policy's victims,
    /// spinning for up to `SPIN_BUDGET` while counted as searching (so that
    /// pushers need not wake a sleeper), then give up and let the caller
    /// park. At most half the workers spin at once; the others make one
    /// pass. Protocol: `runtime/README.md`.
    pub(super) fn steal(&self) -> Option<Runnable> {
        let shared = &self.shared;
        // Own queues empty: the placement probe's estimate is exact.
        self.me().publish_len(self);
        if !shared.sched.steals() || shared.workers.len() < 2 {
            return None;
        }
        self.set_busy(false);
        let others = shared.idle.begin_search();
        let (stored, budget) = self.search_budget();
        let spin = 2 * others < shared.workers.len() && !budget.is_zero();
        // While fibers wait on sockets, the core goes to whoever wants it
        // between passes (`sched_yield`) instead of being held by spin
        // hints: a server's cores are shared with the other ends of its
        // connections (a load generator, a proxy), and the thread about to
        // send the next request must not wait for our budget to run out.
        let give_core = shared.reactor.get().is_some_and(|r| r.waiting() != 0);
        let mut start: Option<Instant> = None;
        let mut polled: Option<Instant> = None;
        let mut spun_out = false;
        // When a lone entry was first seen in our own inbox while spinning.
        let mut home_seen: Option<Instant> = None;
        let mut pauses = SPIN_PAUSES;
        let found = loop {
            if let Some(t) = self.take_io_ready() {
                break Some(Runnable::Task(t));
            }
            if let Some(r) = self.steal_pass() {
                break Some(r);
            }
            if !spin || shared.shutdown.load(Relaxed) {
                break None;
            }
            let now = Instant::now();
            match start {
                None => start = Some(now),
                Some(t0) if now.duration_since(t0) >= budget => {
                    spun_out = true;
                    break None;
                }
                Some(_) => {}
            }
            between_passes(give_core, &mut pauses);
            // Work may have appeared at home while we spun. A lone fresh
            // inbox entry was placed here by a busy worker: if that worker
            // runs out of work first (it spawned the fiber and joins it at
            // once), it takes the entry back and nothing crosses cores; so
            // leave it for `INBOX_GRACE` (protocol: `runtime/README.md`).
            let me = self.me();
            if !me.pinned_inbox.is_empty() || self.next_deadline().is_some_and(|d| d <= now) {
                break None;
            }
            // Another worker's overdue timers: the fibers come here.
            if self.fire_others_timers(now) {
                break None;
            }
            // Sockets that became ready while we searched: their fibers go
            // to the I/O ready queue, which the worker loop's `next_local`
            // takes from; pinned ones go to their worker's pinned inbox,
            // and during the shutdown drain to our own wake slot or ready
            // queue. Either way the search ends without counting as one
            // that found work: the budget stays as it is (a variant that
            // reset it to the full budget here cost a server more user CPU
            // per request; BENCHMARKS "Servers, part 12").
            if polled.is_none_or(|p| now.duration_since(p) >= SPIN_POLL_EVERY) {
                polled = Some(now);
                crate::runtime::io::poll_busy(shared, self.index);
                if me.wake_slot.is_occupied() || !self.ready.is_empty() || !shared.io_ready.is_empty() {
                    break None;
                }
            }
            match me.inbox.len() {
                0 => home_seen = None,
                1 => match home_seen {
                    None => home_seen = Some(now),
                    Some(t0) if now.duration_since(t0) >= INBOX_GRACE => break None,
                    Some(_) => {}
                },
                _ => break None,
            }
        };
        shared.idle.end_search();
        if found.is_some() {
            self.spin_budget.set(SPIN_BUDGET);
        } else if spun_out {
            let half = stored / 2;
            self.spin_budget.set(if half < SPIN_BUDGET_MIN { std::time::Duration::ZERO } else { half });
        }
        if found.is_some() {
            self.watch.set(WATCH_MIN);
            self.set_busy(true);
            // We may have taken more than we can run soon: if nobody else
            // is searching, let a sleeper have a go at our deque.
            if !self.deque.is_empty() {
                shared.notify_idle();
            }
        }
        found
    }

    /// The budget kept for this worker's searches (adaptive: "Cheap
    /// wake-ups", `runtime/README.md`) and this search's: at least
    /// `SPAWN_SEARCH` after a wake-up for a spawned fiber in a slot, so
    /// that the search lasts until such an entry can ripen.
    fn search_budget(&self) -> (std::time::Duration, std::time::Duration) {
        let stored = self.spin_budget.get();
        let budget = if self.me().sleeper.take_spawn_wake() { stored.max(SPAWN_SEARCH) } else { stored };
        (stored, budget)
    }

    /// One pass over the policy's victims (a lazy walk: no allocation, no
    /// per-worker list of victims); steal a chunk from the first that has
    /// work, keep one to run.
    pub(super) fn steal_pass(&self) -> Option<Runnable> {
        let shared = &self.shared;
        let mut thief = self.thief.borrow_mut();
        let mut victims = shared.sched.victims(self.index, &mut thief);
        let my_node = shared.node_of(self.index);
        let mut found = None;
        while let Some(v) = victims.next() {
            let got = self.steal_from(v);
            let counters = self.counters();
            match got {
                Some((t, n)) => {
                    #[cfg(feature = "tracing")]
                    crate::runtime::dump::fiber_tracing::steal(self.index, v, n, shared.node_of(v) != my_node);
                    if shared.node_of(v) == my_node {
                        Counters::bump(&counters.local_steals, 1);
                    } else {
                        Counters::bump(&counters.remote_steals, 1);
                    }
                    Counters::bump(&counters.stolen_fibers, n as u64);
                    victims.record_steal(v, true);
                    shared.sched.fiber_moved(shared.node_of(v), my_node, n);
                    found = Some(t);
                    break;
                }
                None => {
                    Counters::bump(&counters.failed_steals, 1);
                    victims.record_steal(v, false);
                }
            }
        }
        found
    }

    /// Steal a chunk from worker `v`'s deque, else from its inbox.
    pub(super) fn steal_from(&self, v: usize) -> Option<(Runnable, usize)> {
        let vs = &self.shared.workers[v];
        // The victim's deque into ours (LIFO), its ready queue, its spawn
        // batch (oldest child first) and its inbox into our ready queue
        // (FIFO: their order is kept).
        let queues = [(&vs.stealer, &self.deque), (&vs.ready_stealer, &self.ready), (&vs.batch_stealer, &self.ready)];
        for (stealer, dest) in queues {
            let before = dest.len();
            for _ in 0..4 {
                let len = stealer.len();
                if len == 0 {
                    break;
                }
                let limit = self.shared.chunk.limit(len).max(1);
                match stealer.steal_batch_with_limit_and_pop(dest, limit) {
                    Steal::Success(t) => return Some((t, 1 + dest.len() - before)),
                    Steal::Empty => break,
                    Steal::Retry => continue,
                }
            }
        }
        let before = self.ready.len();
        for _ in 0..4 {
            let len = vs.inbox.len();
            if len == 0 {
                break;
            }
            let limit = self.shared.chunk.limit(len).max(1);
            match vs.inbox.steal_batch_with_limit_and_pop(&self.ready, limit) {
                Steal::Success(t) => return Some((t, 1 + self.ready.len() - before)),
                Steal::Empty => break,
                Steal::Retry => continue,
            }
        }
        self.steal_wake_slot(v).or_else(|| self.steal_held(v)).map(|t| (Runnable::Task(t), 1))
    }

    /// Take worker `v`'s held-back child (`WorkerShared::held`) once it
    /// has sat there for `SLOT_GRACE`: its spawner computes on instead of
    /// joining it.
    pub(super) fn steal_held(&self, v: usize) -> Option<TaskRef> {
        steal_ripe(&self.shared.workers[v].held)
    }

    /// Take worker `v`'s wake-slot entry once the same entry has been seen
    /// there for `SLOT_GRACE` (its owner is stuck in one fiber); a fresh
    /// entry is left to the owner, which runs it next. The first sighting
    /// is stamped in the slot (shared by all thieves: no per-victim memory
    /// here).
    pub(super) fn steal_wake_slot(&self, v: usize) -> Option<TaskRef> {
        steal_ripe(&self.shared.workers[v].wake_slot)
    }
}

/// The wait between two steal passes: the core given away (`give_core`:
/// fibers wait on sockets, `WorkerLocal::steal`), or `pauses` spin hints,
/// doubled for the next time up to `SPIN_PAUSES_MAX`.
fn between_passes(give_core: bool, pauses: &mut u32) {
    if give_core {
        // SAFETY: `sched_yield` takes no arguments and only asks the
        // kernel to run another thread on this core first.
        unsafe { libc::sched_yield() };
        return;
    }
    for _ in 0..*pauses {
        std::hint::spin_loop();
    }
    *pauses = (*pauses * 2).min(SPIN_PAUSES_MAX);
}

/// A thief's take of another worker's slot entry: only once the same entry
/// (generation) has been seen there for `SLOT_GRACE`.
pub(super) fn steal_ripe(slot: &crate::runtime::worker::wake_slot::WakeSlot<Task>) -> Option<TaskRef> {
    let gen = slot.generation();
    if !slot.is_occupied() || !slot.ripe(gen, Instant::now(), SLOT_GRACE) {
        return None;
    }
    slot.steal()
}
