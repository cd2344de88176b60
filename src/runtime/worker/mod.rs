//! The worker loop: own deque -> yield queue -> inboxes -> steal -> park.
//!
//! See `../README.md` (the protocol book) for the parking and shutdown protocol.

pub(crate) mod idle;
pub(crate) mod timers;
pub(crate) mod wake_slot;
mod yield_queue;

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use yield_queue::YieldQueue;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::Instant;

use corosensei::{Coroutine, CoroutineResult};
use crossbeam_deque::{Steal, Worker as Deque};

use crate::runtime::error::JoinError;
use crate::runtime::task::stack::{budget, StackError, StackMode, StackPool};
use crate::runtime::task::job::{JobMain, JobRef, Runnable};
use crate::runtime::task::{NewTask, Suspend, Task, TaskRef};
use crate::runtime::task::pool::TaskPool;
use crate::policy::ThiefState;
use crate::runtime::context;
use crate::runtime::shared::{Counters, Shared, WorkerShared};

/// Every this many scheduling ticks the inboxes and the yield queue are
/// served before the own deque, so a fiber that keeps spawning cannot starve
/// fibers woken from other threads or yielded ones.
const FAIRNESS_TICKS: u32 = 61;
/// The wake slot is taken before the other queues at most this many times
/// in a row (tokio's LIFO-slot limit): then the deque, the ready queue and
/// the inboxes get a turn, so fibers that keep waking each other cannot
/// starve the ones readied meanwhile ("Run order", `README.md`).
const SLOT_STREAK_MAX: u32 = 3;
/// Surplus inbox entries the fairness pass drops before it takes one that
/// may run (`pop_inbox_skipping_surplus`).
const SURPLUS_SKIP: usize = 256;
/// Inbox length at which the fairness pass also sweeps that many entries
/// behind the one it takes (`pop_inbox_skipping_surplus`).
const INBOX_BACKLOG: usize = 64;

/// Longest an idle worker keeps searching (counted in `num_searching`)
/// before it parks. While one searches, pushers wake nobody. The budget of
/// each worker adapts (`WorkerLocal::spin_budget`): halved by every search
/// that found nothing, back to this after a search that found work.
const SPIN_BUDGET: std::time::Duration = std::time::Duration::from_micros(25);
/// Below this the adaptive budget is zero: one steal pass, then park.
const SPIN_BUDGET_MIN: std::time::Duration = std::time::Duration::from_micros(2);
/// A searching worker polls the reactor (without blocking) at most this
/// often while fibers wait on sockets: a socket that became ready while we
/// searched is served by us at once, not by a hand-off after we park.
const SPIN_POLL_EVERY: std::time::Duration = std::time::Duration::from_micros(5);
/// Yields in a row (no park, no finish) timed together by `has_other_work`.
const YIELD_STREAK: u32 = 16;
/// Average time between yields from which yielding fibers count as
/// parallel work that idle workers should take.
const LONG_SLICE: std::time::Duration = std::time::Duration::from_micros(5);
/// `spin_loop` hints between two steal passes of a searching worker.
const SPIN_PAUSES: u32 = 64;
/// The pause count doubles after every fruitless pass, up to this many
/// (a pass reads lines the victims keep writing: polling them less often
/// costs a busy neighbour fewer cache misses; `runtime/README.md`).
const SPIN_PAUSES_MAX: u32 = 256;
/// How long a wake-slot entry must sit unchanged before a thief may take it
/// (Go's `runnext` waits about 3 us).
const SLOT_GRACE: std::time::Duration = std::time::Duration::from_micros(5);
/// First timeout of a *watching* park: an idle worker that parks while
/// another worker is still running sleeps at most this long before it looks
/// at the other workers' wake slots again (`park_idle`; protocol:
/// `runtime/README.md`, "Watching parks"). Doubles with every watch that
/// finds nothing, up to `WATCH_MAX`; back to this after a successful steal.
const WATCH_MIN: std::time::Duration = std::time::Duration::from_micros(50);
/// Longest timeout of a watching park: a fiber made runnable into a busy
/// worker's wake slot waits at most about this long (plus `SLOT_GRACE`) for
/// an idle worker while its waker computes on.
const WATCH_MAX: std::time::Duration = std::time::Duration::from_millis(2);
/// How long a searching worker leaves a lone fresh entry in its own inbox
/// to the worker that placed it there (which takes it back if it runs out
/// of work first: spawn, then join at once) before running it itself.
const INBOX_GRACE: std::time::Duration = std::time::Duration::from_micros(5);

/// Where the next fiber came from.
enum Next {
    /// From a queue: a fiber still `QUEUED` (the run permission comes
    /// with it), or a stolen fork-join job.
    Queued(Runnable),
    /// From the private yield queue: already `RUNNING`.
    Owned(TaskRef),
}

/// The thread-owned part of a worker. Lives on the worker thread's stack
/// for the whole loop; fibers running on this thread reach it through
/// `context::worker_ptr`, and only through shared references (all mutation is
/// by `Cell`/`RefCell`, borrowed briefly and never across a resume).
pub(crate) struct WorkerLocal {
    pub(crate) index: usize,
    pub(crate) shared: Arc<Shared>,
    /// `&shared.workers[index]`, without the bounds check and the two
    /// loads on every use (see `me`).
    me: *const WorkerShared,
    /// This thread's `CURRENT` cell (`context::current_task_slot`), cached by
    /// `run`: the worker loop never runs on a fiber stack, so it never
    /// changes threads, and it writes the running fiber around each resume
    /// without an accessor call.
    current: Cell<*const std::sync::atomic::AtomicPtr<Task>>,
    /// LIFO for the owner: spawned fibers (in spawn batches, see
    /// `flush_spawned`), fork-join jobs and work-first parents.
    pub(crate) deque: Deque<Runnable>,
    /// FIFO: fibers made runnable again on this worker (woken by I/O,
    /// timers, sync wake-ups, finished children) that did not fit in the
    /// wake slot, and fibers taken in batches from the inbox.
    pub(crate) ready: Deque<Runnable>,
    /// Children the running fiber spawned here while the wake slot was
    /// occupied (the spawn batch, LIFO): moved onto the deque when the
    /// fiber gives control back (`flush_spawned`), so they start in spawn
    /// order; thieves take the oldest meanwhile (`batch_stealer`).
    spawned: Deque<Runnable>,
    /// `spawned` is not empty (one private load per resume).
    has_spawned: Cell<bool>,
    /// Wake-slot entries run in a row (`SLOT_STREAK_MAX`).
    slot_streak: Cell<u32>,
    yielded: YieldQueue,
    /// `shared.stack_mode == StackMode::Slab`: check the stack canary after
    /// each resume.
    slab_stacks: bool,
    /// Other workers exist and may take work from this one (a stealing
    /// policy and at least two workers): only then can a yield hand its
    /// fiber to an idle worker.
    can_share: bool,
    stacks: RefCell<StackPool>,
    /// Finished tasks kept for reuse by spawns on this worker
    /// (`fiber::task_pool`).
    pub(crate) tasks: TaskPool,
    /// Fallback path at its budget: unstarted fibers waiting for a stack
    /// (still `RUNNING`: only this worker can reach them, as in `yielded`).
    starved: RefCell<VecDeque<TaskRef>>,
    /// `starved.len()`, read on the hot path without a borrow.
    starved_len: Cell<usize>,
    thief: RefCell<ThiefState>,
    tick: Cell<u32>,
    /// Status last told to the policy (busy running fibers, or idle).
    busy: Cell<bool>,
    /// A work-first child to run before anything else.
    run_next: RefCell<Option<TaskRef>>,
    /// Parents that reclaimed their child (`Suspend::Reclaim`), innermost
    /// last: still `RUNNING`, each resumed right after its child suspends
    /// or finishes (a reclaimed child may reclaim its own child in turn).
    resume_after: RefCell<Vec<TaskRef>>,
    /// Loop iterations until the next non-blocking reactor poll.
    io_tick: Cell<u32>,
    /// Fibers the reactor made ready while this worker drove it.
    io_ready: RefCell<Vec<TaskRef>>,
    /// Yields in a row on this worker without a park or a finish (while
    /// some worker is idle), when the streak began, and whether the last
    /// full streak had long slices (see `has_other_work`).
    yield_streak: Cell<u32>,
    streak_start: Cell<Instant>,
    long_slices: Cell<bool>,
    /// Timeout of the next watching park (`WATCH_MIN` ..= `WATCH_MAX`).
    watch: Cell<std::time::Duration>,
    /// This worker's current search budget (`SPIN_BUDGET`, adaptive):
    /// searches that keep finding nothing (a server between requests)
    /// stop burning the core the load generator or the next request needs.
    spin_budget: Cell<std::time::Duration>,
    /// The running fiber put a child into this worker's held-child slot
    /// (`Shared::hold`): release it when the fiber gives control back.
    /// Cleared there; the slot itself may be empty by then (a join took the
    /// child back, a thief took it).
    pub(crate) holding: Cell<bool>,
}

impl WorkerLocal {
    pub(crate) fn new(
        index: usize,
        shared: Arc<Shared>,
        deque: Deque<Runnable>,
        ready: Deque<Runnable>,
        spawned: Deque<Runnable>,
    ) -> WorkerLocal {
        let thief = shared.sched.new_thief_state(index, 0x2545_F491_4F6C_DD1D ^ index as u64);
        // Bind stack memory to the worker's node when the topology is this
        // machine's and has several nodes.
        let topo = &shared.topology;
        let node = if topo.is_this_machine() && topo.num_nodes() > 1 {
            topo.node_os_index(shared.workers[index].slot.node)
        } else {
            None
        };
        let me: *const WorkerShared = &shared.workers[index];
        let slab_stacks = shared.stack_mode == StackMode::Slab;
        let can_share = shared.sched.steals() && shared.workers.len() > 1;
        WorkerLocal {
            index,
            me,
            current: Cell::new(std::ptr::null()),
            shared,
            deque,
            ready,
            spawned,
            has_spawned: Cell::new(false),
            slot_streak: Cell::new(0),
            yielded: YieldQueue::new(),
            slab_stacks,
            can_share,
            stacks: RefCell::new(StackPool::new(node)),
            tasks: TaskPool::new(),
            starved: RefCell::new(VecDeque::new()),
            starved_len: Cell::new(0),
            thief: RefCell::new(thief),
            tick: Cell::new(0),
            busy: Cell::new(false),
            run_next: RefCell::new(None),
            resume_after: RefCell::new(Vec::new()),
            io_tick: Cell::new(0),
            io_ready: RefCell::new(Vec::new()),
            yield_streak: Cell::new(0),
            streak_start: Cell::new(Instant::now()),
            long_slices: Cell::new(false),
            watch: Cell::new(WATCH_MIN),
            spin_budget: Cell::new(SPIN_BUDGET),
            holding: Cell::new(false),
        }
    }

    /// The part of this worker that other threads see.
    #[inline]
    fn me(&self) -> &WorkerShared {
        // SAFETY: `me` points into `self.shared.workers`, a boxed slice
        // that `self.shared` keeps alive and never moves.
        unsafe { &*self.me }
    }

    #[inline]
    fn counters(&self) -> &Counters {
        &self.me().counters
    }

    /// Arm a timer that wakes `task` at `deadline` (`timers::WorkerTimers::add`).
    pub(crate) fn add_timer(&self, deadline: Instant, task: TaskRef) {
        self.me().timers.add(deadline, task);
    }

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
        self.me().note_own_push(self);
        // Stealable now: like a push onto the deque, a hint for sleepers.
        self.shared.notify_idle();
    }

    /// The running fiber gave control back: its spawn batch goes onto the
    /// deque, last spawned first, so the owner pops the children in spawn
    /// order, before anything queued there earlier (the spawner's own
    /// siblings: depth first), and thieves take the oldest entries.
    #[inline(never)]
    fn flush_spawned(&self) {
        self.has_spawned.set(false);
        while let Some(t) = self.spawned.pop() {
            self.deque.push(t);
        }
    }

    /// Work-first spawn: run `task` right after the current fiber suspends.
    pub(crate) fn set_run_next(&self, task: TaskRef) {
        let prev = self.run_next.borrow_mut().replace(task);
        debug_assert!(prev.is_none());
    }

    fn set_busy(&self, busy: bool) {
        if self.busy.get() != busy {
            self.busy.set(busy);
            self.shared.sched.set_own_status(self.index, &self.thief.borrow(), busy);
            if self.can_share {
                self.shared.idle.set_busy(busy);
            }
        }
    }

    /// The worker's main loop. Returns when the runtime shuts down.
    pub(crate) fn run(&self) {
        let shared = &self.shared;
        self.current.set(context::current_task_slot());
        // Dumps and the stall monitor read the running fiber from here
        // (`runtime::dump::running`).
        self.me().insight.publish(self.current.get());
        loop {
            if shared.shutdown.load(Acquire) {
                break;
            }
            self.fire_timers();
            self.poll_reactor_if_due();
            match self.next_local() {
                Some(Next::Queued(r)) => {
                    self.set_busy(true);
                    self.run_runnable(r);
                    continue;
                }
                Some(Next::Owned(t)) => {
                    self.set_busy(true);
                    self.run_task(t, true);
                    continue;
                }
                None => {}
            }
            if let Some(r) = self.steal() {
                self.run_runnable(r);
                continue;
            }
            if self.can_share && self.fire_others_timers(Instant::now()) {
                continue;
            }
            self.park_idle();
        }
        self.set_busy(false);
        crate::runtime::dump::running::retire(shared, self.me());
        self.hand_back_queues();
        self.tasks.clear();
    }

    /// Next fiber from this worker's own queues.
    ///
    /// Fibers in the private yield queue keep the `RUNNING` state (nobody
    /// but this worker can reach them, and a waker only sets `NOTIFIED`),
    /// so a yield costs no atomic read-modify-write; those come back as
    /// `Next::Owned`.
    fn next_local(&self) -> Option<Next> {
        if let Some(t) = self.run_next.borrow_mut().take() {
            return Some(Next::Queued(Runnable::Task(t)));
        }
        if let Some(t) = self.resume_after.borrow_mut().pop() {
            return Some(Next::Owned(t));
        }
        if self.starved_len.get() != 0 && budget::has_room() {
            // A stack slot is free again: the fibers waiting longest first.
            if let Some(t) = self.pop_starved() {
                return Some(Next::Owned(t));
            }
        }
        let tick = self.tick.get().wrapping_add(1);
        self.tick.set(tick);
        let me = self.me();
        if tick % FAIRNESS_TICKS == 0 {
            if let Some(t) = steal_one(&me.pinned_inbox) {
                return Some(Next::Queued(Runnable::Task(t)));
            }
            if let Some(r) = self.pop_inbox_skipping_surplus() {
                return Some(Next::Queued(r));
            }
            if let Some(r) = self.deque.pop() {
                self.slot_streak.set(0);
                return Some(Next::Queued(r));
            }
            if let Some(t) = self.yielded.pop_front() {
                return Some(Next::Owned(t));
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

    /// `next_local`'s queues after the wake slot: the ready queue (fibers
    /// woken again, in wake order: they finish work already started), the
    /// deque (spawned and fork-join work, depth first), the pinned inbox,
    /// the inbox.
    #[inline]
    fn next_queued(&self, me: &WorkerShared) -> Option<Next> {
        // `is_empty` is two inlined loads; `pop` is a call.
        if !self.ready.is_empty() {
            if let Some(t) = self.ready.pop() {
                return Some(Next::Queued(t));
            }
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
    fn pop_inbox_skipping_surplus(&self) -> Option<Runnable> {
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
    fn drop_surplus(&self, t: TaskRef) {
        self.shared.sched.fiber_left_node(self.shared.node_of(self.index));
        // Often the last reference (a reclaimed child's other entry).
        self.tasks.recycle(t, &self.shared.task_spill);
    }

    /// Fallback path at its budget: keep the unstarted `task` (whose run
    /// permission we hold) until a stack slot is free; meanwhile the worker
    /// runs fibers that have stacks.
    fn starve(&self, task: TaskRef) {
        self.starved.borrow_mut().push_back(task);
        self.starved_len.set(self.starved_len.get() + 1);
        self.shared.stacks.add_starved(self.index, 1);
    }

    fn pop_starved(&self) -> Option<TaskRef> {
        let t = self.starved.borrow_mut().pop_front()?;
        self.starved_len.set(self.starved_len.get() - 1);
        self.shared.stacks.add_starved(self.index, -1);
        Some(t)
    }

    #[inline]
    fn fire_timers(&self) {
        if self.me().timers.any() {
            self.me().timers.fire_due(&self.shared, Instant::now(), false);
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        self.me().timers.next_deadline()
    }

    /// Fire the timers of other workers that are overdue by
    /// `timers::STEAL_GRACE`: their owner runs a fiber that does not give
    /// control back ("Timers any worker can fire", `README.md`). The
    /// fibers woken come to this worker. Returns whether any was woken.
    fn fire_others_timers(&self, now: Instant) -> bool {
        let shared = &self.shared;
        let mut woken = 0;
        for (i, w) in shared.workers.iter().enumerate() {
            if i != self.index && w.timers.overdue(now, timers::STEAL_GRACE) {
                woken += w.timers.fire_due(shared, now, true);
            }
        }
        woken != 0
    }

    /// Look for work elsewhere: steal passes over the policy's victims,
    /// spinning for up to `SPIN_BUDGET` while counted as searching (so that
    /// pushers need not wake a sleeper), then give up and let the caller
    /// park. At most half the workers spin at once; the others make one
    /// pass. Protocol: `runtime/README.md`.
    fn steal(&self) -> Option<Runnable> {
        let shared = &self.shared;
        // Own queues empty: the placement probe's estimate is exact.
        self.me().publish_len(self);
        if !shared.sched.steals() || shared.workers.len() < 2 {
            return None;
        }
        self.set_busy(false);
        let others = shared.idle.begin_search();
        let budget = self.spin_budget.get();
        let spin = 2 * others < shared.workers.len() && !budget.is_zero();
        let mut start: Option<Instant> = None;
        let mut polled: Option<Instant> = None;
        let mut spun_out = false;
        // When a lone entry was first seen in our own inbox while spinning.
        let mut home_seen: Option<Instant> = None;
        let mut pauses = SPIN_PAUSES;
        let found = loop {
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
            for _ in 0..pauses {
                std::hint::spin_loop();
            }
            pauses = (pauses * 2).min(SPIN_PAUSES_MAX);
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
            // Sockets that became ready while we searched: their fibers
            // come here (our wake slot or ready queue), read by `next_local`.
            if polled.is_none_or(|p| now.duration_since(p) >= SPIN_POLL_EVERY) {
                polled = Some(now);
                crate::runtime::io::poll_busy(shared, self.index);
                if self.me().wake_slot.is_occupied() || !self.ready.is_empty() {
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
            let half = budget / 2;
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

    /// One pass over the policy's victims (a lazy walk: no allocation, no
    /// per-worker list of victims); steal a chunk from the first that has
    /// work, keep one to run.
    fn steal_pass(&self) -> Option<Runnable> {
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
    fn steal_from(&self, v: usize) -> Option<(Runnable, usize)> {
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
        self.steal_wake_slot(v)
            .or_else(|| self.steal_held(v))
            .map(|t| (Runnable::Task(t), 1))
    }

    /// Take worker `v`'s held-back child (`WorkerShared::held`) once it
    /// has sat there for `SLOT_GRACE`: its spawner computes on instead of
    /// joining it.
    fn steal_held(&self, v: usize) -> Option<TaskRef> {
        steal_ripe(&self.shared.workers[v].held)
    }

    /// Take worker `v`'s wake-slot entry once the same entry has been seen
    /// there for `SLOT_GRACE` (its owner is stuck in one fiber); a fresh
    /// entry is left to the owner, which runs it next. The first sighting
    /// is stamped in the slot (shared by all thieves: no per-victim memory
    /// here).
    fn steal_wake_slot(&self, v: usize) -> Option<TaskRef> {
        steal_ripe(&self.shared.workers[v].wake_slot)
    }

    fn run_runnable(&self, r: Runnable) {
        match r {
            Runnable::Task(t) => self.run_task(t, false),
            Runnable::Job(j) => {
                let t = self.job_task(j);
                self.run_task(t, false)
            }
        }
    }

    /// A fork-join job left this worker's hands (stolen, or its owner
    /// migrated): run it as a fiber of its own.
    fn job_task(&self, j: JobRef) -> TaskRef {
        let new = NewTask {
            id: crate::runtime::spawn::next_fiber_id(),
            name: None,
            stack_size: self.shared.default_stack,
            pinned: None,
            placed: self.index,
            reclaim_by: 0,
            spawn_site: None,
            born_ms: self.shared.insight.born_now(),
            entry: Some(Box::new(JobMain::new(j)).into()),
        };
        let t = self.tasks.alloc(new, &self.counters().tasks_reused, &self.shared.task_spill);
        // SAFETY: we consumed the JobRef from a queue.
        unsafe { j.set_runner(t.clone()) };
        Counters::bump(&self.counters().spawned, 1);
        t
    }

    /// Resume `task` until it yields, parks or finishes. `owned`: it comes
    /// from the private yield queue (or the starved queue) and is still
    /// `RUNNING`.
    ///
    /// After a yield, if nothing but the yield queue has work for this
    /// worker, the next yielded fiber is resumed right here, without a pass
    /// through `run` (see `next_after_yield`).
    fn run_task(&self, mut task: TaskRef, owned: bool) {
        // The placement probe's estimate (`runtime::shared::PublishedLen`).
        self.me().publish_len(self);
        if !owned {
            if !task.transition_to_running() {
                // A surplus entry (a reclaimed child's other entry, see
                // `fiber::task`) or a task cancelled by the drain: dropped
                // unrun. With `decrement_workload` the NLH count of the
                // entry leaves here (`Scheduler::fiber_entered_node`).
                self.drop_surplus(task);
                return;
            }
            let last = task.last_worker();
            if last != self.index {
                task.set_last_worker(self.index);
                // SAFETY: we hold the run permission. A fiber with a
                // coroutine ran before: count the move (dumps).
                if unsafe { (*task.body_ptr()).coro.is_some() } {
                    task.note_migration(self.shared.node_of(last) != self.shared.node_of(self.index));
                }
            }
        }
        // Owned fibers were last run by this worker (the yield and starved
        // queues are private), so `last_worker` is already ours.
        debug_assert_eq!(task.last_worker(), self.index);
        let shared = &self.shared;
        // SAFETY: we hold the run permission (from the queue entry or the
        // private yield queue), so the body is ours. Only the `coro` field
        // is borrowed mutably across the resume below; the fiber itself
        // reads the disjoint `yielder` field through the raw pointer.
        let (slot, entry) = unsafe {
            let body = task.body_ptr();
            (&mut *std::ptr::addr_of_mut!((*body).coro), &mut *std::ptr::addr_of_mut!((*body).entry))
        };
        if slot.is_none() {
            let stack = match self.stacks.borrow_mut().get(task.stack_size, &shared.stacks) {
                Ok(s) => s,
                Err(StackError::AtBudget) => {
                    self.starve(task);
                    return;
                }
                Err(StackError::Os(e)) => {
                    let main = entry.take().expect("a queued unstarted fiber has its entry");
                    task.transition_to_done();
                    main.fail(JoinError::no_stack(format!("mmap of a {} byte stack failed: {e}", task.stack_size)));
                    return;
                }
            };
            let main = entry.take().expect("a queued unstarted fiber has its entry");
            task.stack_lo.store(corosensei::stack::Stack::limit(&stack).get(), Relaxed);
            let tp: *const crate::runtime::task::Task = &*task;
            *slot = Some(Coroutine::with_stack(stack, move |y: &crate::runtime::task::FiberYielder, ()| {
                // SAFETY: the coroutine runs only while its task's run
                // permission is held by the resuming worker, and the task
                // outlives its coroutine (the coroutine lives in the task's
                // body). The yielder lives on this stack for the
                // coroutine's whole life.
                unsafe { (*(*tp).body_ptr()).yielder = y };
                main.run();
            }));
        }
        let current = self.current.get();
        debug_assert!(!current.is_null(), "run_task outside WorkerLocal::run");
        // SAFETY: set by `run` on this thread, which outlives the loop.
        let current = unsafe { &*current };
        loop {
            // SAFETY: as above, for the task of this iteration (every task
            // here has its permission with us, and has started: only a
            // fiber that ran can yield).
            let coro = unsafe { (*task.body_ptr()).coro.as_mut() }.expect("started above or yielded");
            let prev = current.load(Relaxed);
            current.store(Arc::as_ptr(&task) as *mut Task, Relaxed);
            let r = coro.resume(());
            current.store(prev, Relaxed);
            // A child the fiber placed elsewhere and did not join at once
            // goes to its worker now ("The held-child slot").
            if self.holding.get() {
                self.holding.set(false);
                shared.release_held(self.index);
            }
            // Children spawned while the wake slot was occupied go onto
            // the deque now, in spawn order ("Run order", `README.md`).
            if self.has_spawned.get() {
                self.flush_spawned();
            }
            if self.slab_stacks && !crate::runtime::task::stack::canary_intact(task.stack_lo.load(Relaxed)) {
                crate::runtime::task::overflow::report_canary(&task);
            }
            Counters::bump(&self.counters().resumes, 1);
            match r {
                CoroutineResult::Yield(Suspend::Yield) => {
                    if self.can_share && task.pinned.is_none() && shared.has_idle_workers() && self.has_other_work() {
                        // Somebody is idle and this worker has more to run
                        // than this fiber: requeue where thieves can see it
                        // (the inbox), not in the private yield queue.
                        // Otherwise it stays here: it is what this worker
                        // runs next anyway.
                        // Given away: not while a dump reads it
                        // (`runtime::dump::running`).
                        self.me().insight.wait_unprotected(&*task);
                        task.transition_to_queued_after_yield();
                        self.me().inbox.push(Runnable::Task(task));
                        shared.notify_idle();
                        return;
                    }
                    // Stays RUNNING: see `next_local`.
                    match self.next_after_yield(task) {
                        Some(next) => task = next,
                        None => return,
                    }
                }
                CoroutineResult::Yield(Suspend::Handoff) => {
                    self.me().insight.wait_unprotected(&*task);
                    task.transition_to_queued_after_yield();
                    if task.pinned.is_some() {
                        // A pinned parent of an eager child: not stealable.
                        self.me().pinned_inbox.push(task);
                    } else {
                        self.deque.push(Runnable::Task(task));
                        shared.notify_idle();
                    }
                    return;
                }
                CoroutineResult::Yield(Suspend::Reclaim) => {
                    // Stays RUNNING, private to this worker (see
                    // `next_local`): the child in `run_next` runs first.
                    self.resume_after.borrow_mut().push(task);
                    return;
                }
                CoroutineResult::Yield(Suspend::Park) => {
                    self.me().insight.wait_unprotected(&*task);
                    self.end_yield_streak();
                    // SAFETY: still our permission; the fiber is suspended.
                    let body = unsafe { task.body() };
                    if !body.registered {
                        body.registered = true;
                        shared.registry.insert(&task);
                    }
                    Counters::bump(&self.counters().parks, 1);
                    if task.transition_to_parked() {
                        // The parked task owns this reference now; its
                        // waker takes it over (`fiber::task`, step 5).
                        std::mem::forget(task);
                    } else {
                        // A wake-up raced with the suspension: run it again,
                        // behind the fibers readied before it.
                        self.ready.push(Runnable::Task(task));
                    }
                    return;
                }
                CoroutineResult::Return(()) => {
                    self.me().insight.wait_unprotected(&*task);
                    self.end_yield_streak();
                    // SAFETY: as above.
                    let coro = unsafe { task.body() }.coro.take().expect("it just returned");
                    let stack = coro.into_stack();
                    if self.stacks.borrow_mut().put(stack, &shared.stacks) {
                        shared.notify_stack_freed();
                    }
                    // SAFETY: as above.
                    let registered = unsafe { task.body() }.registered;
                    task.transition_to_done();
                    if registered {
                        shared.registry.remove(task.id);
                    }
                    shared.sched.fiber_left_node(shared.node_of(self.index));
                    // The last reference if the handle went first.
                    self.tasks.recycle(task, &shared.task_spill);
                    return;
                }
            }
        }
    }

    /// `task` just yielded and stays with this worker (still `RUNNING`).
    /// If what `run` would do next is to take the front of the yield queue
    /// (no shutdown, no timer armed, no reactor poll due, every other queue
    /// of `next_local` empty), return that fiber (or `task` itself when it
    /// is the only one) for `run_task` to resume without leaving; otherwise
    /// queue `task` and return `None`. Fairness is unchanged: the fast path
    /// is taken only when the yield queue is the only source of work, and
    /// the queue stays FIFO. It counts as a loop iteration for the
    /// reactor's busy poll.
    #[inline]
    fn next_after_yield(&self, task: TaskRef) -> Option<TaskRef> {
        // `run_next` is only set right before a `Handoff`.
        debug_assert!(self.run_next.borrow().is_none());
        let me = self.me();
        let io_tick = self.io_tick.get() + 1;
        if io_tick >= crate::runtime::io::BUSY_POLL_TICKS
            || self.has_resume_after()
            || me.timers.any()
            || self.starved_len.get() != 0
            || me.wake_slot.is_occupied()
            || !self.deque.is_empty()
            || !self.ready.is_empty()
            || !me.pinned_inbox.is_empty()
            || !me.inbox.is_empty()
            || self.shared.shutdown.load(Acquire)
        {
            self.yielded.push_back(task);
            return None;
        }
        self.io_tick.set(io_tick);
        Some(self.yielded.rotate(task))
    }

    /// A reclaiming parent waits in `resume_after`.
    #[inline]
    fn has_resume_after(&self) -> bool {
        !self.resume_after.borrow().is_empty()
    }

    /// Every `BUSY_POLL_TICKS` iterations, poll the reactor without
    /// blocking if fibers wait on sockets (a runtime whose workers never go
    /// idle must still see readiness).
    #[inline]
    fn poll_reactor_if_due(&self) {
        let t = self.io_tick.get() + 1;
        if t < crate::runtime::io::BUSY_POLL_TICKS {
            self.io_tick.set(t);
            return;
        }
        self.io_tick.set(0);
        crate::runtime::io::poll_busy(&self.shared, self.index);
    }

    /// Sleep until work may be there (protocol in `runtime::idle` and
    /// `runtime::shared`): on the thread's futex, or in the reactor's
    /// `epoll_wait` if this worker is the driver (`runtime/README.md`, "The I/O driver");
    /// either way no longer than the next timer.
    fn park_idle(&self) {
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
        shared.idle.sleep(
            &me.sleeper,
            || self.has_visible_work() || shared.shutdown.load(SeqCst),
            || {
                if shared.shutdown.load(SeqCst) {
                    return false;
                }
                let deadline = match (self.next_deadline(), watch_until) {
                    (Some(a), Some(b)) => Some(a.min(b)),
                    (a, b) => a.or(b),
                };
                crate::runtime::io::park_worker(shared, self.index, deadline, &mut ready)
            },
        );
        if watch_until.is_some() {
            shared.idle.set_watching(false);
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
    fn watch_deadline(&self) -> Option<Instant> {
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

    /// This worker has runnable fibers besides the one that just yielded.
    /// Fibers in the private yield queue count only when the recent yields
    /// came after long slices (on average `LONG_SLICE` or more over the
    /// last `YIELD_STREAK` yields without a park or a finish, timed once
    /// per streak): fibers that yield to each other while handing work back
    /// and forth (a channel's receive spin) stay on one core, fibers that
    /// compute and yield spread to idle workers.
    #[inline]
    fn has_other_work(&self) -> bool {
        let me = self.me();
        if !self.deque.is_empty() || !self.ready.is_empty() || me.wake_slot.is_occupied() || !me.inbox.is_empty() {
            return true;
        }
        let streak = self.yield_streak.get() + 1;
        if streak == 1 {
            self.streak_start.set(Instant::now());
        }
        if streak >= YIELD_STREAK {
            let spent = self.streak_start.get().elapsed();
            self.long_slices.set(spent >= LONG_SLICE * YIELD_STREAK);
            self.yield_streak.set(0);
        } else {
            self.yield_streak.set(streak);
        }
        self.long_slices.get() && !self.yielded.is_empty()
    }

    /// A park or a finish ends a streak of yields.
    #[inline]
    fn end_yield_streak(&self) {
        self.yield_streak.set(0);
        self.long_slices.set(false);
    }

    fn has_visible_work(&self) -> bool {
        let shared = &self.shared;
        let me = self.me();
        if !self.deque.is_empty()
            || !self.ready.is_empty()
            || me.wake_slot.is_occupied()
            || !me.inbox.is_empty()
            || !me.pinned_inbox.is_empty()
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

    /// Shutdown: move every queued fiber of this worker to its inbox, where
    /// the draining thread finds it. Timers only hold extra references to
    /// parked fibers, which the registry also holds.
    fn hand_back_queues(&self) {
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

/// A thief's take of another worker's slot entry: only once the same entry
/// (generation) has been seen there for `SLOT_GRACE`.
fn steal_ripe(slot: &crate::runtime::worker::wake_slot::WakeSlot<Task>) -> Option<TaskRef> {
    let gen = slot.generation();
    if !slot.is_occupied() || !slot.ripe(gen, Instant::now(), SLOT_GRACE) {
        return None;
    }
    slot.steal()
}

fn steal_one<T>(q: &crossbeam_deque::Injector<T>) -> Option<T> {
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
