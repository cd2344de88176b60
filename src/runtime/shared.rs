//! State shared by all workers of one runtime: the workers' public halves
//! (`WorkerShared`, `worker/shared.rs`), the policy, stacks, the parked-fiber
//! registry, the reactor, the inspectors and the shutdown flags. The paths
//! that push work onto a worker and wake workers are beside the pops, in
//! `worker/queues.rs`; the wake-up protocol is described there.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};

use crate::policy::{LoadProbe, Scheduler, StealChunk};
use crate::runtime::context;
use crate::runtime::io::Reactor;
use crate::runtime::task::stack::{StackMode, Stacks};
use crate::runtime::task::TaskRef;
use crate::runtime::worker::idle::Idle;
use crate::runtime::worker::{SpawnerProbe, WorkerShared};
use crate::topology::Topology;

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
