//! The worker's own queues: which fiber runs next (`next_local`), the spawn
//! batch and the work-first `run_next` slot, surplus entries, and fibers
//! waiting for a stack.
//!
//! Rule: only the owning worker pops these queues (thieves go through the
//! stealers, `steal.rs`); the order in which `next_local` serves them is
//! the book's "Run order" and "One loop iteration", step 3
//! (`../README.md`).

use crossbeam_deque::Steal;

use crate::runtime::shared::WorkerShared;
use crate::runtime::task::job::Runnable;
use crate::runtime::task::stack::budget;
use crate::runtime::task::TaskRef;

use super::{Next, WorkerLocal, BEHIND_MAX, FAIRNESS_TICKS, FAIR_QUEUES, INBOX_BACKLOG, SLOT_STREAK_MAX, SURPLUS_SKIP};

impl WorkerLocal {
    /// Work was pushed onto this worker's own deque (`fiber::join`): let an
    /// idle worker know, unless no other worker could take it.
    #[inline]
    pub(crate) fn notify_idle_after_push(&self) {
        if self.can_share {
            self.shared.notify_idle();
        }
    }

    /// Fibers in the deque and the ready queue (owner's view, no fence).
    #[inline]
    pub(crate) fn queued_len(&self) -> usize {
        self.deque.len() + self.ready.len() + self.spawned.len()
    }

    /// A child spawned here while the wake slot was occupied
    /// (`Shared::push_spawned`): kept in spawn order until the running
    /// fiber gives control back; thieves may take the oldest meanwhile.
    #[inline]
    pub(crate) fn batch_spawned(&self, task: TaskRef) {
        self.spawned.push(Runnable::Task(task));
        self.has_spawned.set(true);
    }

    /// Owner: `task`, a child of the running fiber, is the next one this
    /// worker starts (its wake slot holds it) and more of the fiber's
    /// children wait in the spawn batch: the fiber's join may suspend with
    /// `Suspend::Behind` (`fiber::reclaim`).
    #[inline]
    pub(crate) fn joins_first_of_batch(&self, task: &TaskRef) -> bool {
        self.has_spawned.get() && self.me().wake_slot.holds(task)
    }

    /// `Suspend::Behind`: `task` (the fiber that gave control back, whose
    /// run permission we hold) goes onto the deque first, then its spawn
    /// batch above it (`flush_spawned`), so the children start first, in
    /// spawn order, and it runs after them, stealable meanwhile like any
    /// queued fiber.
    pub(super) fn queue_behind_batch(&self, task: TaskRef) {
        // Queued where other threads see it: not while a dump reads it
        // (`runtime::dump::running`).
        self.me().insight.wait_unprotected(&*task);
        task.transition_to_queued_after_yield();
        self.deque.push(Runnable::Task(task));
        self.flush_spawned();
    }

    /// The running fiber gave control back: its spawn batch goes onto the
    /// deque, last spawned first, so the owner pops the children in spawn
    /// order, before anything queued there earlier (the spawner's own
    /// siblings: depth first), and thieves take the oldest entries.
    #[inline(never)]
    pub(super) fn flush_spawned(&self) {
        self.has_spawned.set(false);
        while let Some(t) = self.spawned.pop() {
            self.deque.push(t);
        }
    }

    /// `task`, just woken on this worker (the caller holds its run
    /// permission), waited for a child it had queued here (`task::BEHIND`,
    /// set by `fiber::reclaim`): if the deque's top holds children it
    /// spawned that have not started, it goes onto the deque under them
    /// (at most `BEHIND_MAX`), so they start first, in spawn order, and it
    /// runs after them instead of waking, joining the next one and parking
    /// again. `Err(task)` when no such child is on top: queue it as any
    /// woken fiber. Owner only; everything else on the deque keeps its
    /// order.
    pub(crate) fn queue_behind_children(&self, task: TaskRef) -> Result<(), TaskRef> {
        task.flags_and(!crate::runtime::task::BEHIND);
        let mut kids = self.behind.borrow_mut();
        while kids.len() < BEHIND_MAX {
            match self.deque.pop() {
                Some(Runnable::Task(t)) if t.reclaim_by == task.id && t.is_fresh() => kids.push(Runnable::Task(t)),
                Some(other) => {
                    self.deque.push(other);
                    break;
                }
                None => break,
            }
        }
        if kids.is_empty() {
            return Err(task);
        }
        self.deque.push(Runnable::Task(task));
        while let Some(k) = kids.pop() {
            self.deque.push(k);
        }
        Ok(())
    }

    /// Another worker may take work from this one (a stealing policy, two
    /// or more workers).
    #[inline]
    pub(crate) fn can_share(&self) -> bool {
        self.can_share
    }

    /// Owner, while other workers may take work (`can_share`: the wake
    /// slot is stealable, as `take_if` requires): `task`'s entry if it is
    /// the next fiber this worker would start, its wake slot's entry or the
    /// top of its deque, for a join to run it next (`fiber::reclaim`).
    /// Counted as a wake-slot pick: once `SLOT_STREAK_MAX` of those ran in
    /// a row, not while fibers woken earlier wait in `ready` or another
    /// fiber waits in the wake slot; and not once the fairness pass is due
    /// (`FAIRNESS_TICKS`: only a pick from the other queues makes it) while
    /// fibers that only this worker can run wait for it (yielded ones,
    /// pinned ones). A join loop must not hold those fibers up: declined,
    /// the join waits, and the worker's next pick serves them.
    pub(crate) fn take_back(&self, task: &TaskRef) -> Option<TaskRef> {
        let streak = self.slot_streak.get();
        let tired = streak >= SLOT_STREAK_MAX;
        if tired && !self.ready.is_empty() {
            return None;
        }
        // Fibers only this worker can run (yielded ones, pinned ones) wait
        // for the fairness pass, which only a pick from the other queues
        // makes.
        let me = self.me();
        if self.tick.get().wrapping_sub(self.fair_at.get()) >= FAIRNESS_TICKS
            && (!self.yielded.is_empty() || !me.pinned_inbox.is_empty())
        {
            return None;
        }
        let slot = &me.wake_slot;
        let t = match slot.take_if(task) {
            Some(t) => t,
            None if tired && slot.is_occupied() => return None,
            None => self.pop_if_top(task)?,
        };
        self.slot_streak.set(streak + 1);
        Some(t)
    }

    /// Owner only: take `task`'s entry if it is the deque's top (the next
    /// one this worker would pop), else leave the deque as it was.
    fn pop_if_top(&self, task: &TaskRef) -> Option<TaskRef> {
        match self.deque.pop() {
            Some(Runnable::Task(t)) if std::sync::Arc::ptr_eq(&t, task) => Some(t),
            Some(other) => {
                self.deque.push(other);
                None
            }
            None => None,
        }
    }

    /// Work-first spawn: run `task` right after the current fiber suspends.
    pub(crate) fn set_run_next(&self, task: TaskRef) {
        let prev = self.run_next.borrow_mut().replace(task);
        debug_assert!(prev.is_none());
        self.first_pending.set(true);
    }

    /// Next fiber from this worker's own queues.
    ///
    /// Fibers in the private yield queue keep the `RUNNING` state (nobody
    /// but this worker can reach them, and a waker only sets `NOTIFIED`),
    /// so a yield costs no atomic read-modify-write; those come back as
    /// `Next::Owned`.
    pub(super) fn next_local(&self) -> Option<Next> {
        // Every pick counts towards the fairness pass (`FAIRNESS_TICKS`).
        let tick = self.tick.get().wrapping_add(1);
        self.tick.set(tick);
        if self.first_pending.get() {
            if let Some(n) = self.next_first() {
                return Some(n);
            }
        }
        let me = self.me();
        if tick.wrapping_sub(self.fair_at.get()) >= FAIRNESS_TICKS {
            self.fair_at.set(tick);
            // Each pass begins one queue further on (`FAIR_QUEUES`).
            let turn = self.fair_turn.get();
            self.fair_turn.set((turn + 1) % FAIR_QUEUES);
            for k in 0..FAIR_QUEUES {
                if let Some(n) = self.fair_pick((turn + k) % FAIR_QUEUES, me) {
                    return Some(n);
                }
            }
        }
        // The wake slot first, but not more than `SLOT_STREAK_MAX` times
        // in a row while other queues hold work.
        let streak = self.slot_streak.get();
        if streak < SLOT_STREAK_MAX {
            if let Some(t) = me.wake_slot.take() {
                self.slot_streak.set(streak + 1);
                return Some(Next::Queued(Runnable::Task(t)));
            }
        }
        if let Some(r) = self.next_queued(me) {
            self.slot_streak.set(0);
            return Some(r);
        }
        if let Some(t) = me.wake_slot.take() {
            self.slot_streak.set(1);
            return Some(Next::Queued(Runnable::Task(t)));
        }
        let t = self.yielded.pop_front();
        t.map(Next::Owned)
    }

    /// `next_local`'s first queues: the work-first child (`run_next`),
    /// the parents that reclaimed their child (`resume_after`), the
    /// fibers waiting for a stack (`starved`, once a slot is free). Clears
    /// `first_pending` when all three are empty.
    fn next_first(&self) -> Option<Next> {
        if let Some(t) = self.run_next.borrow_mut().take() {
            return Some(Next::Queued(Runnable::Task(t)));
        }
        if let Some(t) = self.resume_after.borrow_mut().pop() {
            return Some(Next::Owned(t));
        }
        if self.starved_len.get() != 0 {
            // A stack slot is free again: the fibers waiting longest first.
            if budget::has_room() {
                return self.pop_starved().map(Next::Owned);
            }
            return None;
        }
        self.first_pending.set(false);
        None
    }

    /// The fairness pass's queue number `q` (`FAIR_QUEUES`): the pinned
    /// inbox, the I/O ready queue, the inbox (dropping surplus entries),
    /// the deque, the yield queue.
    #[cold]
    fn fair_pick(&self, q: u8, me: &WorkerShared) -> Option<Next> {
        match q {
            0 => steal_one(&me.pinned_inbox).map(|t| Next::Queued(Runnable::Task(t))),
            1 => self.take_io_ready().map(|t| Next::Queued(Runnable::Task(t))),
            2 => self.pop_inbox_skipping_surplus().map(Next::Queued),
            3 => {
                let r = self.deque.pop()?;
                self.slot_streak.set(0);
                Some(Next::Queued(r))
            }
            _ => self.yielded.pop_front().map(Next::Owned),
        }
    }

    /// `next_local`'s queues after the wake slot: the ready queue (fibers
    /// woken again, in wake order: they finish work already started), the
    /// deque (spawned and fork-join work, depth first), the pinned inbox,
    /// the inbox.
    #[inline]
    pub(super) fn next_queued(&self, me: &WorkerShared) -> Option<Next> {
        // `is_empty` is two inlined loads; `pop` is a call.
        if !self.ready.is_empty() {
            if let Some(t) = self.ready.pop() {
                return Some(Next::Queued(t));
            }
        }
        if let Some(t) = self.take_io_ready() {
            return Some(Next::Queued(Runnable::Task(t)));
        }
        if !self.deque.is_empty() {
            if let Some(t) = self.deque.pop() {
                return Some(Next::Queued(t));
            }
        }
        if !me.pinned_inbox.is_empty() {
            if let Some(t) = steal_one(&me.pinned_inbox) {
                return Some(Next::Queued(Runnable::Task(t)));
            }
        }
        // The inbox before the yield queue: a fiber woken from another
        // thread has waited longer than one that just yielded. A batch
        // goes to the ready queue, in inbox order.
        if !me.inbox.is_empty() {
            if let Some(t) = me.inbox.steal_batch_and_pop(&self.ready).success() {
                return Some(Next::Queued(t));
            }
        }
        None
    }

    /// The oldest fiber of the runtime's I/O ready queue, now this worker's.
    /// The emptiness check (two loads) inlined into every pick; the queue
    /// is empty outside busy polls.
    #[inline(always)]
    pub(super) fn take_io_ready(&self) -> Option<TaskRef> {
        if self.shared.io_ready.is_empty() {
            return None;
        }
        self.take_io_ready_slow()
    }

    #[inline(never)]
    fn take_io_ready_slow(&self) -> Option<TaskRef> {
        let t = steal_one(&self.shared.io_ready)?;
        self.shared.note_arrival(&t, self.index);
        Some(t)
    }

    /// The fairness pass's inbox entry: the first one that may still run,
    /// dropping the surplus entries of reclaimed children before it (at
    /// most `SURPLUS_SKIP` of them per pass). When the inbox holds
    /// `INBOX_BACKLOG` entries or more, the pass also looks at the next
    /// `INBOX_BACKLOG` entries behind that one, drops the surplus ones and
    /// queues the others again at the back (their parents may still
    /// reclaim them; running them here would move them across cores).
    /// Without this, a busy worker, which serves its inbox only on this
    /// pass until its deque runs dry, collected surplus entries behind
    /// live ones: skynet on 2 workers left up to 200,000 in one inbox
    /// (protocol: `fiber::task`, "Reclaim").
    pub(super) fn pop_inbox_skipping_surplus(&self) -> Option<Runnable> {
        let inbox = &self.me().inbox;
        let mut first = None;
        for _ in 0..SURPLUS_SKIP {
            match steal_one(inbox)? {
                Runnable::Task(t) if t.is_surplus() => self.drop_surplus(t),
                r => {
                    first = Some(r);
                    break;
                }
            }
        }
        let first = first.or_else(|| steal_one(inbox))?;
        if inbox.len() >= INBOX_BACKLOG {
            for _ in 0..INBOX_BACKLOG {
                match steal_one(inbox) {
                    Some(Runnable::Task(t)) if t.is_surplus() => self.drop_surplus(t),
                    Some(r) => inbox.push(r),
                    None => break,
                }
            }
        }
        Some(first)
    }

    /// Drop a queue entry whose task is not `QUEUED` (see `run_task`).
    #[inline]
    pub(super) fn drop_surplus(&self, t: TaskRef) {
        self.shared.sched.fiber_left_node(self.shared.node_of(self.index));
        // Often the last reference (a reclaimed child's other entry).
        self.tasks.recycle(t, &self.shared.task_spill);
    }

    /// Fallback path at its budget: keep the unstarted `task` (whose run
    /// permission we hold) until a stack slot is free; meanwhile the worker
    /// runs fibers that have stacks.
    pub(super) fn starve(&self, task: TaskRef) {
        self.starved.borrow_mut().push_back(task);
        self.starved_len.set(self.starved_len.get() + 1);
        self.first_pending.set(true);
        self.shared.stacks.add_starved(self.index, 1);
    }

    pub(super) fn pop_starved(&self) -> Option<TaskRef> {
        let t = self.starved.borrow_mut().pop_front()?;
        self.starved_len.set(self.starved_len.get() - 1);
        self.shared.stacks.add_starved(self.index, -1);
        Some(t)
    }

    /// A reclaiming parent waits in `resume_after`.
    #[inline]
    pub(super) fn has_resume_after(&self) -> bool {
        !self.resume_after.borrow().is_empty()
    }
}

pub(super) fn steal_one<T>(q: &crossbeam_deque::Injector<T>) -> Option<T> {
    loop {
        match q.steal() {
            Steal::Success(t) => return Some(t),
            Steal::Empty => return None,
            Steal::Retry => continue,
        }
    }
}

/// Pop anything from an injector (shutdown drain).
pub(crate) fn drain_one<T>(q: &crossbeam_deque::Injector<T>) -> Option<T> {
    steal_one(q)
}
