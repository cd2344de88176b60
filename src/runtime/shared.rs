//! State shared by all workers of one runtime, and the paths that make work
//! visible: submitting new fibers, waking parked ones, waking idle workers.
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

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};
use std::thread::Thread;

use crossbeam_deque::{Injector, Stealer};

use crate::runtime::task::job::Runnable;
use crate::runtime::task::stack::{StackMode, Stacks};
use crate::runtime::task::{Task, TaskRef};
use crate::policy::{LoadProbe, Scheduler, StealChunk};
use crate::runtime::io::driver::PollFlag;
use crate::runtime::io::Reactor;
use crate::runtime::worker::idle::{Idle, Sleeper, Sleepers};
use crate::runtime::worker::wake_slot::WakeSlot;
use crate::runtime::worker::WorkerLocal;
use crate::topology::{Topology, WorkerSlot};
use crate::runtime::context;

/// Counters one worker writes (relaxed; read by `Runtime::stats`).
///
/// On cache lines of their own: the owner bumps them on every spawn and
/// every fiber run, and the read-mostly fields beside them in
/// `WorkerShared` (`slot`, read by other workers' spawns through
/// `Shared::node_of`) must not share a line with them. Without the
/// alignment, the 128-byte `PublishedLen` reordered the fields and put
/// `slot` on the line of `spawned`/`completed`: skynet on 2 workers went
/// from 397-428 ms to 366-552 ms, median 402 -> 429.
#[derive(Default, Debug)]
#[repr(align(128))]
pub(crate) struct Counters {
    pub(crate) spawned: AtomicU64,
    pub(crate) completed: AtomicU64,
    pub(crate) resumes: AtomicU64,
    pub(crate) local_steals: AtomicU64,
    pub(crate) remote_steals: AtomicU64,
    pub(crate) failed_steals: AtomicU64,
    pub(crate) stolen_fibers: AtomicU64,
    pub(crate) parks: AtomicU64,
    /// Sleeps of this worker that another thread ended (`WorkerStats::woken`).
    pub(crate) woken: AtomicU64,
    pub(crate) stacks_mapped: AtomicU64,
    /// Joins on this worker that ran their unstarted child at once
    /// (`runtime::spawn::reclaim`).
    pub(crate) reclaimed: AtomicU64,
    /// Spawns on this worker that reused a pooled task (`runtime::task::pool`).
    pub(crate) tasks_reused: AtomicU64,
}

impl Counters {
    /// Increment a counter only its owner writes: a plain load + store is
    /// enough and avoids a locked instruction on the hot path.
    #[inline]
    pub(crate) fn bump(c: &AtomicU64, by: u64) {
        c.store(c.load(Relaxed) + by, Relaxed);
    }
}

/// The part of a worker other threads see.
pub(crate) struct WorkerShared {
    pub(crate) index: usize,
    pub(crate) slot: WorkerSlot,
    pub(crate) stealer: Stealer<Runnable>,
    /// The thieves' end of the worker's FIFO ready queue
    /// (`WorkerLocal::ready`).
    pub(crate) ready_stealer: Stealer<Runnable>,
    /// The thieves' end of the owner's spawn batch (`WorkerLocal::spawned`):
    /// a thief takes the oldest children first, as from the deque, so a
    /// spawner that computes on (or hogs its worker) holds back none.
    pub(crate) batch_stealer: Stealer<Runnable>,
    /// Fibers placed here by other threads, and fibers woken by them.
    pub(crate) inbox: Injector<Runnable>,
    /// Fibers that must run on this worker only (never stolen).
    pub(crate) pinned_inbox: Injector<TaskRef>,
    /// The fiber this worker made runnable last (see `runtime::worker::wake_slot`).
    pub(crate) wake_slot: WakeSlot<Task>,
    /// A child the running fiber spawned for another worker of this node,
    /// held back until that fiber gives control back (then it goes to the
    /// placed worker's inbox), unless the fiber joins it first and runs it
    /// here. Thieves may take it like a wake-slot entry ("The held-child
    /// slot", `runtime/README.md`).
    pub(crate) held: WakeSlot<Task>,
    /// Announced asleep (see `runtime::worker::idle`).
    pub(crate) sleeper: Sleeper,
    pub(crate) thread: OnceLock<Thread>,
    pub(crate) tid: AtomicI32,
    pub(crate) pinned_ok: AtomicBool,
    pub(crate) counters: Counters,
    /// Timers armed on this worker: fired by the worker between fibers,
    /// or by an idle worker when overdue (`worker::timers`).
    pub(crate) timers: crate::runtime::worker::timers::WorkerTimers,
    /// Set while the worker blocks in the reactor's poll (`runtime::io::driver`).
    pub(crate) poll_flag: PollFlag,
    /// The reactor this worker has driven (so `unpark` can reach its waker).
    pub(crate) reactor_waker: OnceLock<Arc<Reactor>>,
    /// This worker's deque length plus its wake-slot entry, as it last
    /// published them (see "The placement probe" below).
    pub(crate) published_len: PublishedLen,
    /// What dumps and the stall monitor read (`runtime::dump::running`).
    pub(crate) insight: crate::runtime::dump::running::WorkerInsight,
}

/// A worker's own queue length (deque + wake slot) as its owner published
/// it, alone on its cache line: spawners on other workers read this one
/// line instead of the owner's deque indices, wake slot and a `SeqCst`
/// fence.
///
/// # The placement probe, and how stale it may be
///
/// NLH places a new fiber on the worker of the chosen node with the
/// shortest queue (thesis Alg. 4.6; the thesis calls the queue size an
/// approximate heuristic, and `LoadProbe` says "approximate"). What the
/// runtime's probe ([`SpawnerProbe`], `impl LoadProbe for Shared`) returns:
///
/// * for the spawning worker itself: its exact queue, read by the owner
///   (deque length without a fence, wake slot, inbox, pinned inbox);
/// * for any other worker `w`: `published(w) + inbox(w) + pinned(w)`,
///   the inboxes read live (other threads push there) and `published(w)`
///   the owner's last publication of its deque length plus wake-slot entry.
///
/// The owner publishes (a store only when the value changed):
///
/// 1. when it starts a fiber (top of `WorkerLocal::run_task`) and when it
///    goes looking for work elsewhere (`WorkerLocal::steal`): exact then;
/// 2. when its own pushes through `Shared::push_local` or
///    `Shared::push_spawned` bring the true value `t` to
///    `published + PUBLISH_SLACK`.
///
/// So between two publications `t - published` is below `PUBLISH_SLACK`
/// (1: every push that grows the queue publishes) plus the entries pushed
/// another way (at most one re-queued fiber per fiber run, and one
/// fork-join job per open `join` of the running fiber), and at least minus
/// what thieves took since (steals only shorten a queue). When the worker
/// is idle (quiescent) the estimate is exact. A stale estimate can only
/// change *which* near-shortest queue is picked; the rule stays the
/// thesis' (shortest estimated queue, ties to the spawner), and thieves
/// still move work where queues are long.
///
/// Only a worker whose estimate some placement reads publishes (`Nlh`, and
/// a node with two workers or more: on a node with one worker NLH probes
/// nobody); for the others [`WorkerShared::queue_estimate`] reads the
/// queues themselves.
#[derive(Debug, Default)]
#[repr(align(128))]
pub(crate) struct PublishedLen {
    len: AtomicUsize,
    /// Fixed when the runtime is built.
    enabled: bool,
}

/// How far a worker's own pushes may take its queue past its published
/// length before `push_local`/`push_spawned` publish again (see
/// [`PublishedLen`]). Measured (skynet 1M, 2 workers): with 8,
/// spawners saw busy spawners' queues up to 7 short, placed more children
/// there and reclaimed fewer (1.47M -> 1.17M reclaims, 400 -> 440-550 ms);
/// with 1 the decisions are the exact probe's again (1.5M reclaims) and
/// the run 383-464 ms against 398-431 ms for the exact probe.
pub(crate) const PUBLISH_SLACK: usize = 1;

impl PublishedLen {
    /// `enabled`: whether the owner publishes (see above).
    pub(crate) fn new(enabled: bool) -> PublishedLen {
        PublishedLen { len: AtomicUsize::new(0), enabled }
    }

    #[inline]
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    #[inline]
    pub(crate) fn get(&self) -> usize {
        self.len.load(Relaxed)
    }

    /// Owner only: publish `len` (no store if unchanged, so that readers'
    /// copies of the line stay valid).
    #[inline]
    pub(crate) fn publish(&self, len: usize) {
        if self.len.load(Relaxed) != len {
            self.len.store(len, Relaxed);
        }
    }
}

/// `q.len()`, with a cheap first look: `Injector::len` is a retry loop with
/// block-boundary fix-ups (about 30 instructions), `is_empty` two loads,
/// and the inboxes are mostly empty.
#[inline]
fn injector_len<T>(q: &Injector<T>) -> usize {
    if q.is_empty() {
        0
    } else {
        q.len()
    }
}

impl WorkerShared {
    /// The worker's queue length, read from its queues themselves (the
    /// deadlock detector, explicit-node spawns).
    pub(crate) fn queue_len(&self) -> usize {
        self.stealer.len()
            + self.ready_stealer.len()
            + self.batch_stealer.len()
            + self.inbox.len()
            + self.pinned_inbox.len()
            + usize::from(self.wake_slot.is_occupied())
            + usize::from(self.held.is_occupied())
    }

    /// The placement probe's estimate of another worker's queue (see
    /// [`PublishedLen`]).
    #[inline]
    pub(crate) fn queue_estimate(&self) -> usize {
        if !self.published_len.enabled() {
            return self.queue_len();
        }
        self.published_len.get() + injector_len(&self.inbox) + injector_len(&self.pinned_inbox)
    }

    /// Owner only: this worker's deque and ready queue plus wake-slot
    /// entry, read without a fence (the owner's own `Worker::len`).
    #[inline]
    pub(crate) fn own_deque_and_slot(&self, w: &WorkerLocal) -> usize {
        w.queued_len() + usize::from(self.wake_slot.is_occupied())
    }

    /// Owner only: the exact queue length (see [`SpawnerProbe`]).
    #[inline]
    pub(crate) fn own_queue_len(&self, w: &WorkerLocal) -> usize {
        self.own_deque_and_slot(w) + injector_len(&self.inbox) + injector_len(&self.pinned_inbox)
    }

    /// Owner only, right after a push into its own wake slot (which is
    /// occupied now) and maybe deque: publish when the queue has grown
    /// `PUBLISH_SLACK` past the published length ([`PublishedLen`], rule 2).
    #[inline]
    pub(crate) fn note_own_push(&self, w: &WorkerLocal) {
        if self.published_len.enabled() {
            let t = w.queued_len() + 1;
            if t >= self.published_len.get() + PUBLISH_SLACK {
                self.published_len.publish(t);
            }
        }
    }

    /// Owner only: publish the exact deque plus wake-slot length
    /// ([`PublishedLen`], rule 1).
    #[inline]
    pub(crate) fn publish_len(&self, w: &WorkerLocal) {
        if self.published_len.enabled() {
            self.published_len.publish(self.own_deque_and_slot(w));
        }
    }

    pub(crate) fn has_stealable_work(&self) -> bool {
        !self.stealer.is_empty() || !self.ready_stealer.is_empty() || !self.batch_stealer.is_empty() || !self.inbox.is_empty()
    }
}

impl Sleepers for [WorkerShared] {
    #[inline]
    fn count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn sleeper(&self, i: usize) -> &Sleeper {
        &self[i].sleeper
    }
    #[inline]
    fn unpark(&self, i: usize) {
        if let Some(th) = self[i].thread.get() {
            th.unpark();
        }
        // A worker sleeping in `epoll_wait` instead of its futex.
        crate::runtime::io::unpark_poller(&self[i].poll_flag, &self[i].reactor_waker);
    }
}

/// Parked fibers, so that shutdown can find and unwind them.
pub(crate) struct Registry {
    shards: Box<[Mutex<HashMap<u64, TaskRef>>]>,
}

const REGISTRY_SHARDS: usize = 16;

impl Registry {
    fn new() -> Registry {
        Registry { shards: (0..REGISTRY_SHARDS).map(|_| Mutex::new(HashMap::new())).collect() }
    }
    fn shard(&self, id: u64) -> std::sync::MutexGuard<'_, HashMap<u64, TaskRef>> {
        self.shards[(id as usize) % REGISTRY_SHARDS].lock().unwrap_or_else(|e| e.into_inner())
    }
    pub(crate) fn insert(&self, t: &TaskRef) {
        self.shard(t.id).insert(t.id, t.clone());
    }
    pub(crate) fn remove(&self, id: u64) {
        let t = self.shard(id).remove(&id);
        drop(t);
    }
    /// Every registered task (deadlock report).
    pub(crate) fn snapshot(&self) -> Vec<TaskRef> {
        let mut v = Vec::new();
        for s in self.shards.iter() {
            v.extend(s.lock().unwrap_or_else(|e| e.into_inner()).values().cloned());
        }
        v
    }
    /// Take every task of the first non-empty shard out of the registry
    /// (shutdown drain).
    pub(crate) fn take_shard(&self) -> Vec<TaskRef> {
        for s in self.shards.iter() {
            let mut g = s.lock().unwrap_or_else(|e| e.into_inner());
            if !g.is_empty() {
                return std::mem::take(&mut *g).into_values().collect();
            }
        }
        Vec::new()
    }
    pub(crate) fn is_empty(&self) -> bool {
        self.shards.iter().all(|s| s.lock().unwrap_or_else(|e| e.into_inner()).is_empty())
    }
}

/// Everything the workers of one runtime share.
pub(crate) struct Shared {
    pub(in crate::runtime) workers: Box<[WorkerShared]>,
    pub(in crate::runtime) sched: Scheduler,
    pub(in crate::runtime) chunk: StealChunk,
    pub(in crate::runtime) default_stack: usize,
    pub(in crate::runtime) topology: Topology,
    pub(in crate::runtime) shutdown: AtomicBool,
    pub(in crate::runtime) draining: AtomicBool,
    /// Sleeping and searching workers (`runtime::worker::idle`).
    pub(in crate::runtime) idle: Idle,
    /// Fibers made ready by a busy worker's reactor poll, in readiness
    /// order, for whichever worker is free first.
    pub(in crate::runtime) io_ready: crossbeam_deque::Injector<TaskRef>,
    pub(in crate::runtime) registry: Registry,
    /// Spawns from threads that are not workers of this runtime.
    pub(in crate::runtime) foreign_spawned: AtomicU64,
    pub(in crate::runtime) stack_mode: StackMode,
    /// Stack settings, slabs and the fallback's starved-worker counts
    /// (`runtime::task::stack`).
    pub(in crate::runtime) stacks: Stacks,
    /// `block_on` reports a deadlock instead of hanging (see
    /// `crate::runtime::deadlock`).
    pub(in crate::runtime) deadlock_detection: AtomicBool,
    /// How long past its earliest timer an idle worker may sleep, in
    /// nanoseconds (`Builder::timer_slack`; set once before the workers
    /// start).
    pub(in crate::runtime) timer_slack_ns: AtomicU64,
    /// The rest of the detector's per-runtime state (strict mode, the
    /// one-time warning, external wake sources such as I/O).
    pub(in crate::runtime) deadlock: crate::runtime::deadlock::RuntimeState,
    /// The I/O reactor, created by the first socket a fiber of this runtime
    /// waits on (`crate::runtime::io`).
    pub(in crate::runtime) reactor: OnceLock<Arc<Reactor>>,
    pub(in crate::runtime) reactor_init: Mutex<()>,
    /// Worker threads left to join when the runtime was dropped inside one
    /// of its own fibers: the first worker to leave its loop takes them,
    /// joins the others and drains (`runtime`, shutdown step 0).
    pub(in crate::runtime) finisher: Mutex<Option<Vec<std::thread::JoinHandle<()>>>>,
    /// `fork()` generation at build (see `runtime::fork_generation`).
    pub(in crate::runtime) fork_gen: u64,
    /// Workers that have recorded their thread id and pinning result
    /// (`worker_main`). `build` does not wait for them unless pinning is
    /// strict; [`crate::runtime::Stats`] waits until all have.
    pub(in crate::runtime) started: AtomicUsize,
    /// Spent tasks beyond what the workers' pools keep
    /// (`runtime::task::pool`).
    pub(in crate::runtime) task_spill: crate::runtime::task::pool::TaskSpill,
    /// Dumps and the stall monitor (`runtime::dump`, `runtime::monitor`).
    pub(crate) insight: crate::runtime::dump::Insight,
}

/// The probe of a spawner that is not a worker of this runtime: every
/// worker's estimate ([`PublishedLen`]).
impl LoadProbe for Shared {
    fn queue_len(&self, w: usize) -> usize {
        self.workers[w].queue_estimate()
    }
}

/// The probe of spawning worker `me`, on its own thread: its own queue
/// exactly (owner reads, no fence), the others' estimates
/// ([`PublishedLen`]).
pub(crate) struct SpawnerProbe<'a> {
    pub(in crate::runtime) shared: &'a Shared,
    pub(in crate::runtime) me: usize,
    /// `me`'s thread-owned part (looked up when first needed: a spawn onto
    /// a node with one worker probes nobody).
    pub(crate) local: std::cell::Cell<Option<&'a WorkerLocal>>,
}

impl<'a> SpawnerProbe<'a> {
    /// The probe of the calling worker `me` of `shared`.
    ///
    /// # Safety
    /// This thread runs worker `me` of `shared` (`local_worker_index`), and
    /// the probe is used before the calling fiber suspends.
    pub(crate) unsafe fn new(shared: &'a Shared, me: usize) -> SpawnerProbe<'a> {
        SpawnerProbe { shared, me, local: std::cell::Cell::new(None) }
    }

    #[inline]
    fn own_local(&self) -> &'a WorkerLocal {
        if let Some(d) = self.local.get() {
            return d;
        }
        let w = context::worker_ptr();
        debug_assert!(!w.is_null());
        // SAFETY: `new`'s contract: this thread runs worker `me`, alive
        // (and not suspended away from) while the probe is used.
        let d = unsafe { &*w };
        self.local.set(Some(d));
        d
    }
}

impl LoadProbe for SpawnerProbe<'_> {
    #[inline]
    fn queue_len(&self, w: usize) -> usize {
        if w == self.me {
            self.shared.workers[w].own_queue_len(self.own_local())
        } else {
            self.shared.workers[w].queue_estimate()
        }
    }
}

impl Shared {
    pub(crate) fn new(
        workers: Box<[WorkerShared]>,
        sched: Scheduler,
        chunk: StealChunk,
        default_stack: usize,
        topology: Topology,
        stack_mode: StackMode,
    ) -> Shared {
        let nworkers = workers.len();
        Shared {
            workers,
            sched,
            chunk,
            default_stack,
            topology,
            shutdown: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            idle: Idle::new(),
            io_ready: crossbeam_deque::Injector::new(),
            registry: Registry::new(),
            foreign_spawned: AtomicU64::new(0),
            stack_mode,
            stacks: Stacks::new(stack_mode, nworkers),
            deadlock_detection: AtomicBool::new(true),
            timer_slack_ns: AtomicU64::new(0),
            deadlock: Default::default(),
            reactor: OnceLock::new(),
            reactor_init: Mutex::new(()),
            finisher: Mutex::new(None),
            fork_gen: crate::runtime::fork_generation(),
            started: AtomicUsize::new(0),
            task_spill: crate::runtime::task::pool::TaskSpill::new(),
            insight: crate::runtime::dump::Insight::new(),
        }
    }

    /// The index of the calling worker if the caller is a worker of *this*
    /// runtime.
    pub(crate) fn local_worker_index(self: &Arc<Self>) -> Option<usize> {
        let w = context::worker_ptr();
        if w.is_null() {
            return None;
        }
        // SAFETY: a non-null WORKER pointer refers to the `Worker` living
        // for the whole worker loop of this thread (see `worker::run`), and
        // we are on that thread.
        let w = unsafe { &*w };
        Arc::ptr_eq(&w.shared, self).then_some(w.index)
    }

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

    /// Choose the worker for a new fiber of spawner `me` (a worker of this
    /// runtime, or `None`), on the spawner's thread: `Scheduler::place`
    /// with the runtime's probe ([`SpawnerProbe`], [`PublishedLen`]) and the
    /// spawner's own counter shard.
    #[inline]
    pub(crate) fn place_new(&self, me: Option<usize>) -> usize {
        match me {
            Some(m) => {
                // SAFETY: the caller got `me` from `local_worker_index` on
                // this thread, so this thread runs worker `m` of this
                // runtime, and nothing suspends during this call.
                let probe = unsafe { SpawnerProbe::new(self, m) };
                self.sched.place_on_spawner_thread(Some(m), &probe)
            }
            None => self.sched.place_on_spawner_thread(None, self),
        }
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

    /// Wake every worker (shutdown).
    pub(crate) fn wake_all(&self) {
        self.idle.wake_all(&*self.workers);
        self.insight.monitor.unpark();
    }

    /// Some worker is searching for work or asleep (stealing policies only).
    #[inline]
    pub(crate) fn has_idle_workers(&self) -> bool {
        self.sched.steals() && self.idle.any_idle()
    }

    /// A fallback stack was unmapped (a budget slot is free): wake the
    /// workers that keep fibers waiting for one. Pairs with the re-check in
    /// the worker's `has_visible_work` (wake-up protocol above: the slot is
    /// the "work", the budget counter its queue).
    pub(crate) fn notify_stack_freed(&self) {
        if self.stacks.starved() == 0 {
            return;
        }
        for w in self.stacks.starved_workers() {
            self.notify_worker(w);
        }
    }

    pub(crate) fn node_of(&self, w: usize) -> usize {
        self.workers[w].slot.node
    }

    pub(crate) fn is_shutting_down(&self) -> bool {
        self.shutdown.load(Acquire)
    }

    /// This process is a `fork()`ed copy of the one that built the runtime:
    /// its worker threads do not exist here.
    pub(crate) fn in_forked_child(&self) -> bool {
        crate::runtime::fork_generation() != self.fork_gen
    }
}
