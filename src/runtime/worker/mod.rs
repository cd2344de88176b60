//! The worker loop: own deque -> yield queue -> inboxes -> steal -> park.
//!
//! See `../README.md` (the protocol book) for the parking and shutdown protocol.
//!
//! This file holds the worker's state (`WorkerLocal`), its tunables and the
//! loop itself (`run`, the book's "One loop iteration"); the loop's steps
//! live beside it, each an `impl WorkerLocal` of its own: `queues.rs` (the
//! own queues, `next_local`, and the pushes and wake-ups that fill them,
//! `impl Shared`), `run.rs` (resuming one fiber, `run_task`),
//! `steal.rs` (searching and stealing), `poll.rs` (timers and the reactor
//! between fibers), `sleep.rs` (parking an idle worker) and `shutdown.rs`
//! (the hand-back of queued fibers). `shared.rs` holds the worker's half
//! that other threads see (`WorkerShared`) and the spawner's placement
//! probe.

pub(crate) mod idle;
mod poll;
mod queues;
mod run;
pub(crate) mod shared;
mod shutdown;
mod sleep;
mod steal;
pub(crate) mod timers;
pub(crate) mod wake_slot;
mod yield_queue;

pub(crate) use queues::drain_one;
pub(crate) use shared::{Counters, PublishedLen, SpawnerProbe, WorkerShared};

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::Instant;
use yield_queue::YieldQueue;

use crossbeam_deque::Worker as Deque;

use crate::policy::ThiefState;
use crate::runtime::context;
use crate::runtime::shared::Shared;
use crate::runtime::task::job::Runnable;
use crate::runtime::task::pool::TaskPool;
use crate::runtime::task::stack::{StackMode, StackPool};
use crate::runtime::task::{Task, TaskRef};

/// Every this many fibers run, the fairness pass serves one of the queues
/// a busy worker's usual order may never reach (at the first pick after
/// that which is not a `run_next` or `resume_after` one; which queue:
/// `FAIR_QUEUES`), so a fiber that keeps spawning cannot starve fibers
/// woken from other threads or yielded ones, a stream of readiness events
/// cannot starve those or unstarted fibers, and an inbox's
/// surplus entries are dropped at that pace however many fibers are run
/// through `run_next` (a join loop that runs its children itself): an
/// inbox must not pass `RECLAIM_INBOX_LIMIT` with surplus entries
/// (`runtime/README.md`, "Surplus entries in a busy worker's inbox").
const FAIRNESS_TICKS: u32 = 61;
/// The queues of the fairness pass: the pinned inbox, the runtime's I/O
/// ready queue, the inbox, the deque, the yield queue. Each pass begins at
/// the queue after the one the previous pass began at and takes the first
/// fiber found from there on (wrapping), so each of them that holds a
/// fiber is served at least once in `FAIR_QUEUES` passes, whatever the
/// others hold: a full I/O queue must not keep the inbox and the deque
/// waiting ("The fairness pass rotates", `runtime/README.md`).
const FAIR_QUEUES: u8 = 5;
/// The wake slot is taken before the other queues at most this many times
/// in a row (tokio's LIFO-slot limit): then the deque, the ready queue and
/// the inboxes get a turn, so fibers that keep waking each other cannot
/// starve the ones readied meanwhile ("Run order", `README.md`).
const SLOT_STREAK_MAX: u32 = 3;
/// Surplus inbox entries the fairness pass drops before it takes one that
/// may run (`pop_inbox_skipping_surplus`).
const SURPLUS_SKIP: usize = 256;
/// A parent woken by a child goes behind at most this many of its
/// unstarted children (`queue_behind_children`); past them it waits again.
const BEHIND_MAX: usize = 32;
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
/// The shortest search of a worker woken for a spawned fiber in a slot
/// (`Idle::notify_spawned`): twice `SLOT_GRACE`, so that an entry its
/// spawner does not run at once ripens within the search. Shorter, every
/// spawn of a spawn + join loop woke the sleeper anew (a futex wake each)
/// for one pass that could not take the fresh entry.
const SPAWN_SEARCH: std::time::Duration = std::time::Duration::from_micros(10);
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
    /// (`runtime::task::pool`).
    pub(crate) tasks: TaskPool,
    /// Fallback path at its budget: unstarted fibers waiting for a stack
    /// (still `RUNNING`: only this worker can reach them, as in `yielded`).
    starved: RefCell<VecDeque<TaskRef>>,
    /// `starved.len()`, read on the hot path without a borrow.
    starved_len: Cell<usize>,
    thief: RefCell<ThiefState>,
    /// Picks by `next_local` (`FAIRNESS_TICKS`).
    tick: Cell<u32>,
    /// `tick` at the last fairness pass.
    fair_at: Cell<u32>,
    /// The queue the next fairness pass begins at (`FAIR_QUEUES`).
    fair_turn: Cell<u8>,
    /// Status last told to the policy (busy running fibers, or idle).
    busy: Cell<bool>,
    /// `run_next`, `resume_after` or `starved` may hold a fiber: set by
    /// whoever puts one there, cleared by `next_local` when it finds all
    /// three empty, so a pick looks at them with one load.
    first_pending: Cell<bool>,
    /// A work-first child to run before anything else.
    run_next: RefCell<Option<TaskRef>>,
    /// Parents that reclaimed their child (`Suspend::Reclaim`), innermost
    /// last: still `RUNNING`, each resumed right after its child suspends
    /// or finishes (a reclaimed child may reclaim its own child in turn).
    resume_after: RefCell<Vec<TaskRef>>,
    /// Scratch for `queue_behind_children` (capacity `BEHIND_MAX`).
    behind: RefCell<Vec<Runnable>>,
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
            fair_at: Cell::new(0),
            fair_turn: Cell::new(0),
            busy: Cell::new(false),
            first_pending: Cell::new(false),
            run_next: RefCell::new(None),
            resume_after: RefCell::new(Vec::new()),
            behind: RefCell::new(Vec::with_capacity(BEHIND_MAX)),
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
}
