//! The worker's own queues: which fiber runs next (`next_local`), the spawn
//! batch and the work-first `run_next` slot, surplus entries, and fibers
//! waiting for a stack.
//!
//! Rule: only the owning worker pops these queues (thieves go through the
//! stealers, `steal.rs`); the order in which `next_local` serves them is
//! the book's "Run order" and "One loop iteration", step 3
//! (`../README.md`).
//!
//! The pushes and wake-ups that fill these queues are here too (`impl
//! Shared` below: `submit`, `push_local`, `push_spawned`, `hold`,
//! `release_held`, `take_over`, `reschedule_from`, `wake_for_self`,
//! `notify_*`), so push and pop live together.
//!
//! # Wake-up protocol (no lost wake-ups, no spinning)
//!
//! A worker that finds no work goes to sleep in three steps (see
//! `WorkerLocal::park_idle`, `worker/sleep.rs`):
//!
//! 1. it announces itself: `sleeping = true`, `num_sleeping += 1`;
//! 2. `fence(SeqCst)`, then it re-checks every place work can appear for it
//!    (its inbox, its pinned inbox, and with a stealing policy every other
//!    worker's queues); if it finds any, it withdraws the announcement;
//! 3. otherwise it parks its thread (`thread::park`, or `park_timeout` up to
//!    its next timer).
//!
//! Whoever makes work visible (`notify_*` below) first pushes it, then
//! issues `fence(SeqCst)`, then reads the flags. With both fences in the
//! single total order, either the pusher sees `sleeping == true` (and wakes
//! the worker), or the worker's re-check in step 2 sees the pushed work. A
//! waker *claims* a sleeping worker with a CAS `sleeping: true -> false`
//! before `unpark`, and only the claimer decrements `num_sleeping`, so two
//! wakers never both count the same sleeper. `thread::park` keeps a token,
//! so an `unpark` that lands before the `park` is not lost either.
//!
//! *When* and *whom* a pusher wakes (the wake slot, searching workers) is
//! in `runtime/README.md`.
//!
//! Stealing policies also wake *some* sleeper when work is pushed to a busy
//! worker's own deque, but only when no worker is already searching
//! (`num_searching == 0`): a searching worker re-scans before it sleeps, so
//! it will find the work, and a push storm does not cost a futex wake per
//! fiber.

use std::sync::atomic::Ordering::*;
use std::sync::Arc;

use crossbeam_deque::Steal;

use crate::runtime::context;
use crate::runtime::shared::Shared;
use crate::runtime::task::job::Runnable;
use crate::runtime::task::stack::budget;
use crate::runtime::task::TaskRef;

use super::{
    Next, WorkerLocal, WorkerShared, BEHIND_MAX, FAIRNESS_TICKS, FAIR_QUEUES, INBOX_BACKLOG, SLOT_STREAK_MAX,
    SURPLUS_SKIP,
};

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
    /// `Suspend::Behind` (`runtime::spawn::reclaim`).
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
    /// set by `runtime::spawn::reclaim`): if the deque's top holds children it
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
    /// top of its deque, for a join to run it next (`runtime::spawn::reclaim`).
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
    /// (protocol: `runtime::task`, "Reclaim").
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

// ---- Pushes and wake-ups: where a runnable fiber goes, and whom that wakes ----

impl Shared {
    /// Queue a new fiber. `target` was chosen by placement (or pinning).
    pub(crate) fn submit(self: &Arc<Self>, task: TaskRef, target: usize) {
        if let Some(p) = task.pinned() {
            self.workers[p].pinned_inbox.push(task);
            self.notify_worker(p);
            return;
        }
        if let Some(me) = self.local_worker_index() {
            // SAFETY: `local_worker_index` checked that this thread runs
            // a worker of this runtime; the pointer is valid for the
            // duration of this call (no suspension in between).
            let w = unsafe { &*context::worker_ptr() };
            if me == target {
                self.push_spawned(me, w, task);
                return;
            }
            if task.reclaim_by != 0 {
                // Placed on another worker of this node by its spawner, a
                // fiber that may join it at once and then run it here
                // (`runtime::spawn::reclaim`): hold it back until that fiber gives
                // control back ("The held-child slot", `runtime/README.md`).
                self.hold(w, task);
                return;
            }
        }
        self.push_inbox(target, task);
    }

    /// Worker `held` has run one fiber past the stall threshold (the stall
    /// monitor's take-over): the fibers only it would run soon go to an
    /// inbox, which its owner serves even while busy (its fairness pass),
    /// instead of waiting for an idle thief: its wake slot's entry to the
    /// next worker's, its held-back child to the inbox of the worker it was
    /// placed on. Its deque, ready queue and spawn batch are stealable as
    /// they are. Stealing policies with two workers or more only (otherwise
    /// the slots are private to their owner).
    pub(crate) fn take_over(&self, held: usize) {
        let n = self.workers.len();
        if n < 2 || !self.sched.steals() {
            return;
        }
        let target = (held + 1) % n;
        let w = &self.workers[held];
        if let Some(t) = w.wake_slot.steal() {
            self.sched.fiber_moved(self.node_of(held), self.node_of(target), 1);
            self.push_inbox(target, t);
        }
        // A held-back child goes where placement put it, as when its
        // spawner gives control back.
        self.release_held(held);
    }

    /// `task` into worker `target`'s inbox, then make sure someone runs it
    /// (`notify_worker`).
    #[inline]
    fn push_inbox(&self, target: usize, task: TaskRef) {
        self.workers[target].inbox.push(Runnable::Task(task));
        self.notify_worker(target);
    }

    /// Put `task` (placed on another worker, `Task::last_worker`) into the
    /// held-child slot of this thread's worker `w`, and flag it for release
    /// (`WorkerLocal::holding`); the entry it displaces goes on to the
    /// worker it was placed on. Then wake a sleeper as for a spawn into the
    /// wake slot ([`Shared::push_spawned`]): if the spawner computes on, a
    /// searching or watching worker takes the entry once it has sat there
    /// for the grace period.
    #[inline]
    fn hold(&self, w: &crate::runtime::worker::WorkerLocal, task: TaskRef) {
        w.holding.set(true);
        if let Some(prev) = self.workers[w.index].held.put(task) {
            self.send_on(prev);
        }
        self.notify_spawned();
    }

    /// A held-back child goes to the inbox of the worker placement chose
    /// (`Task::last_worker`). Out of line: `reschedule_from`'s own
    /// `push_inbox` stays inlined (calling this from there cost the 1-worker
    /// spawn + join 5 Ir in callgrind).
    #[inline(never)]
    fn send_on(&self, task: TaskRef) {
        self.push_inbox(task.last_worker(), task);
    }

    /// Worker `me`'s running fiber gave control back (or its spawn cannot
    /// be joined here): send its held-back child on, if any. Owner only.
    #[inline]
    pub(crate) fn release_held(&self, me: usize) {
        let slot = &self.workers[me].held;
        if slot.is_occupied() {
            if let Some(t) = slot.steal() {
                self.send_on(t);
            }
        }
    }

    /// Wake a parked fiber (or leave a token if it is still running).
    pub(crate) fn wake(self: &Arc<Self>, task: TaskRef) {
        // SAFETY: `task` is a live `Arc<Task>`: we hold a count, released
        // here; the run queue gets the parked task's own reference.
        if let Some(t) = unsafe { crate::runtime::wait::notify_parked(Arc::as_ptr(&task)) } {
            self.reschedule(t);
        }
    }

    /// An idle worker `w`, on its own thread, woke `task` and will run it
    /// next (the first fiber its reactor poll made ready): into its empty
    /// wake slot, waking nobody. Any other case (a pinned fiber, the
    /// shutdown drain, an occupied slot) is a plain [`Shared::wake`].
    pub(crate) fn wake_for_self(self: &Arc<Self>, w: &WorkerLocal, task: TaskRef) {
        let ws = &self.workers[w.index];
        if task.pinned().is_some() || self.draining.load(Relaxed) || ws.wake_slot.is_occupied() {
            return self.wake(task);
        }
        // SAFETY: as in `wake`.
        if let Some(t) = unsafe { crate::runtime::wait::notify_parked(Arc::as_ptr(&task)) } {
            self.note_arrival(&t, w.index);
            // Only the owner puts into its slot: still empty (checked
            // above, on this thread).
            ws.wake_slot.put(t);
            ws.note_own_push(w);
        }
    }

    /// `task`, last on another worker, is pushed onto worker `me`: the
    /// policy's node accounting follows it.
    #[inline]
    pub(crate) fn note_arrival(&self, task: &TaskRef, me: usize) {
        let last = task.last_worker();
        if last != me {
            self.sched.fiber_moved(self.node_of(last), self.node_of(me), 1);
        }
    }

    /// Fibers made ready by a busy worker's reactor poll: into the
    /// runtime's I/O ready queue, which every worker serves in order
    /// (pinned fibers and the shutdown drain as [`Shared::wake`]).
    pub(crate) fn wake_io_batch(self: &Arc<Self>, ready: Vec<TaskRef>) {
        let mut queued = 0usize;
        for task in ready {
            // SAFETY: as in `wake`.
            if let Some(t) = unsafe { crate::runtime::wait::notify_parked(Arc::as_ptr(&task)) } {
                if t.pinned().is_some() || self.draining.load(Relaxed) {
                    self.reschedule(t);
                } else {
                    self.io_ready.push(t);
                    queued += 1;
                }
            }
        }
        match queued {
            0 => {}
            1 => self.idle.notify_unwatched(&*self.workers, self.sched.steals()),
            _ => self.notify_idle(),
        }
    }

    /// The caller holds the run permission of `task` (it won the CAS out of
    /// `PARKED`): push it where it will run.
    pub(crate) fn reschedule(self: &Arc<Self>, task: TaskRef) {
        self.reschedule_from(self.local_worker(), task)
    }

    /// This thread's worker if it is a worker of *this* runtime, else null
    /// (one TLS accessor call).
    #[inline]
    pub(crate) fn local_worker(&self) -> *const crate::runtime::worker::WorkerLocal {
        let w = context::worker_ptr();
        // SAFETY: a non-null WORKER pointer refers to this thread's live
        // worker (see `local_worker_index`).
        if !w.is_null() && std::ptr::eq(Arc::as_ptr(unsafe { &(*w).shared }), self) {
            w
        } else {
            std::ptr::null()
        }
    }

    /// `reschedule` by a caller that read `local_worker()` itself (a
    /// wait-queue granter reads it once under the lock, `sync::queue`),
    /// on this thread and without suspending since.
    #[inline]
    pub(crate) fn reschedule_from(&self, local: *const crate::runtime::worker::WorkerLocal, task: TaskRef) {
        if let Some(p) = task.pinned() {
            self.workers[p].pinned_inbox.push(task);
            self.notify_worker(p);
            return;
        }
        if !local.is_null() && !self.draining.load(Relaxed) {
            // SAFETY: `local` is this thread's live worker (caller).
            let w = unsafe { &*local };
            self.note_arrival(&task, w.index);
            self.push_local(w.index, w, task);
            return;
        }
        // Not the body: the shutdown drain may be destroying it already
        // (see `Task::last_worker`).
        self.push_inbox(task.last_worker(), task);
    }

    /// The running fiber of worker `me` (whose thread-owned part is `w`)
    /// woke `task`: put it in `me`'s wake slot if the slot is empty, to run
    /// as soon as the current fiber gives control back; otherwise at the
    /// back of `w`'s FIFO ready queue, behind the fibers readied before it
    /// (the slot keeps the first one: fibers woken by one fiber run in wake
    /// order, "Run order" in `runtime/README.md`), and then an idle worker
    /// is woken: there is more work than this worker takes next. A lone
    /// entry wakes somebody only if no worker searches or watches
    /// (`Idle::notify_unwatched`): a woken fiber is usually what this
    /// worker runs next in a chain of hand-offs, and a watching worker
    /// takes it if this worker's fiber computes on (protocol:
    /// `runtime/README.md`); spawns go through [`Shared::push_spawned`].
    #[inline]
    pub(crate) fn push_local(&self, me: usize, w: &WorkerLocal, task: TaskRef) {
        let ws = &self.workers[me];
        // A parent woken by its child's end, with siblings of that child
        // queued here unstarted: behind them (`queue_behind_children`).
        let task = if !w.deque.is_empty() && task.flags_load() & crate::runtime::task::BEHIND != 0 {
            match w.queue_behind_children(task) {
                Ok(()) => return,
                Err(t) => t,
            }
        } else {
            task
        };
        // Only the owner puts into its slot, so an empty slot stays empty
        // until the `put` below (a thief may only empty it further).
        if !ws.wake_slot.is_occupied() {
            ws.wake_slot.put(task);
            ws.note_own_push(w);
            self.idle.notify_unwatched(&*self.workers, self.sched.steals());
        } else {
            w.ready.push(Runnable::Task(task));
            ws.note_own_push(w);
            self.notify_idle();
        }
    }

    /// A fiber just *spawned* on worker `me` by its running fiber: into the
    /// wake slot if it is empty, else into `w`'s spawn batch, which goes
    /// onto the deque when the spawner gives control back
    /// (`WorkerLocal::flush_spawned`), so siblings start in spawn order
    /// and a child's own children start before its later siblings (depth
    /// first). One sleeper is woken (if nobody searches) even when the slot
    /// was empty. A spawn asks for parallelism, and the spawner often
    /// computes on before it joins (`spawn(f); g(); join`): the searcher
    /// takes the entry once it has sat in the slot for `SLOT_GRACE`, while
    /// spawn + join at once still runs the child here (the searcher leaves
    /// a fresh entry alone, and searches long enough to see one ripen:
    /// `notify_spawned`). Without this wake a lone child waited for the
    /// whole rest of the spawner's slice while the other workers slept
    /// ("Why a lone spawned entry wakes a sleeper", `runtime/README.md`).
    #[inline]
    pub(crate) fn push_spawned(&self, me: usize, w: &WorkerLocal, task: TaskRef) {
        let ws = &self.workers[me];
        if !ws.wake_slot.is_occupied() {
            ws.wake_slot.put(task);
        } else {
            w.batch_spawned(task);
        }
        ws.note_own_push(w);
        self.notify_spawned();
    }

    /// Work was pushed to worker `target`'s inbox: make sure someone will
    /// run it.
    pub(crate) fn notify_worker(&self, target: usize) {
        self.idle.notify_worker(&*self.workers, target, self.sched.steals());
    }

    /// Work was pushed to the caller's own deque: wake an idle worker to
    /// steal it, unless one is already searching.
    ///
    /// No fence here, unlike `notify_worker`: work on the caller's own
    /// deque is never *lost* without a wake-up, because the caller itself
    /// pops it when its current fiber gives control back. The wake-up only
    /// buys parallelism, so a momentarily stale view of `num_sleeping` is
    /// acceptable, and the fork-join hot path saves a full fence per push.
    #[inline]
    pub(crate) fn notify_idle(&self) {
        self.idle.notify_idle(&*self.workers, self.sched.steals());
    }

    /// A spawned fiber went into the caller's wake slot (or its spawn
    /// batch behind the slot) or held-child slot: as [`Shared::notify_idle`],
    /// and the worker woken searches for at least `SPAWN_SEARCH`, long
    /// enough to see a slot entry ripen ("Why a lone spawned entry wakes a
    /// sleeper", `runtime/README.md`).
    #[inline]
    pub(crate) fn notify_spawned(&self) {
        self.idle.notify_spawned(&*self.workers, self.sched.steals());
    }
}
