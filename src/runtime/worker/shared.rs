//! The part of a worker other threads see (`WorkerShared`): its stealers,
//! inboxes, wake and held-child slots, counters and published queue length,
//! and the placement probe that reads them (`SpawnerProbe`).

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;

use crossbeam_deque::{Injector, Stealer};

use crate::policy::LoadProbe;
use crate::runtime::context;
use crate::runtime::io::driver::PollFlag;
use crate::runtime::io::Reactor;
use crate::runtime::shared::Shared;
use crate::runtime::task::job::Runnable;
use crate::runtime::task::{Task, TaskRef};
use crate::runtime::worker::idle::{Sleeper, Sleepers};
use crate::runtime::worker::wake_slot::WakeSlot;
use crate::runtime::worker::WorkerLocal;
use crate::topology::WorkerSlot;

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
        !self.stealer.is_empty()
            || !self.ready_stealer.is_empty()
            || !self.batch_stealer.is_empty()
            || !self.inbox.is_empty()
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
