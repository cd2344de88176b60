//! Spawning: validate the options, place the fiber, allocate its task,
//! submit it; and the fork-join `join`.

use std::cell::Cell;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::Arc;

use crate::runtime::cancel::ShieldGuard;
use crate::runtime::context::{
    self, cannot_suspend, current_is_cancelling, current_shared, current_shared_ptr, current_task,
};
use crate::runtime::error::{SpawnError, SpawnErrorKind};
use crate::runtime::park::{suspend, suspend_task};
use crate::runtime::shared::Shared;
use crate::runtime::task::join::{current_shared_for_drain, settle_job, JoinHandle};
use crate::runtime::task::{self, job, packet, stack, Suspend, TaskRef};
use crate::runtime::worker::Counters;
use crate::runtime::worker::WorkerLocal;
use job::OwnedJob;

static NEXT_ID_BLOCK: AtomicU64 = AtomicU64::new(1);
const ID_BLOCK: u64 = 1024;
thread_local! {
    static IDS: Cell<(u64, u64)> = const { Cell::new((0, 0)) };
}

/// A process-unique fiber id (ids are handed to threads in blocks).
#[inline(never)]
pub(crate) fn next_fiber_id() -> u64 {
    IDS.with(|c| {
        let (n, end) = c.get();
        if n < end {
            c.set((n + 1, end));
            n
        } else {
            let b = NEXT_ID_BLOCK.fetch_add(ID_BLOCK, Relaxed);
            c.set((b + 1, b + ID_BLOCK));
            b
        }
    })
}

#[derive(Default, Clone)]
pub(crate) struct SpawnOpts {
    pub(crate) name: Option<Arc<str>>,
    pub(crate) stack_size: Option<usize>,
    pub(crate) node: Option<usize>,
    pub(crate) worker: Option<usize>,
    pub(crate) pinned: bool,
    /// Push onto the spawner's own deque (fork-join children).
    pub(crate) local: bool,
    /// Run the child at once on this worker; the parent is queued.
    pub(crate) eager: bool,
    /// While the runtime shuts down, return a handle whose fiber is
    /// already cancelled (its closure dropped unrun) instead of
    /// [`SpawnErrorKind::ShuttingDown`]: the spawns that have no `Result`
    /// (`fiber::spawn` and its kin), so that a fiber finishing its slice
    /// during shutdown, or a destructor the drain runs, cannot panic there.
    pub(crate) cancelled_if_shutting_down: bool,
}

impl SpawnOpts {
    /// The options of a spawn without a `Result` (see
    /// `cancelled_if_shutting_down`).
    pub(crate) fn infallible() -> SpawnOpts {
        SpawnOpts { cancelled_if_shutting_down: true, ..SpawnOpts::default() }
    }
}

/// Largest closure-plus-result size a fiber with a `stack_size` byte stack
/// accepts: the closure is moved onto the fiber's stack (in unoptimised
/// builds more than once) before it runs, so it may take a quarter.
pub(crate) fn closure_limit(stack_size: usize) -> usize {
    stack_size / 4
}

#[track_caller]
pub(crate) fn spawn_on<F, T>(shared: &Arc<Shared>, f: F, opts: SpawnOpts) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    // SAFETY: `F` and `T` are `'static`, so nothing can dangle.
    unsafe { spawn_unchecked(shared, f, opts) }
}

/// Spawn without the `'static` bound: [`validate`] the options, [`place`]
/// the fiber, [`allocate`] its task and packet, [`submit`] it.
///
/// # Safety
/// The caller guarantees the fiber finishes (or is destroyed) before
/// anything it borrows goes away: `scope` and `join` wait for their
/// children on every path, including unwinding and shutdown.
#[track_caller]
pub(crate) unsafe fn spawn_unchecked<'a, F, T>(
    shared: &Arc<Shared>,
    f: F,
    opts: SpawnOpts,
) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let site = std::panic::Location::caller();
    let closure_size = std::mem::size_of::<F>().saturating_add(std::mem::size_of::<T>());
    let stack_size = match validate(shared, &opts, closure_size) {
        Ok(s) => s,
        Err(e) if opts.cancelled_if_shutting_down && matches!(e.kind(), SpawnErrorKind::ShuttingDown) => {
            // SAFETY: forwarded (the caller's contract on what `f` borrows).
            return Ok(unsafe { spawn_cancelled(shared, f, opts, site) });
        }
        Err(e) => return Err(e),
    };
    // No limit on how many fibers exist: an unstarted fiber owns no stack.
    let local = shared.local_worker();
    // SAFETY: a non-null `local_worker` is this thread's live worker, used
    // below only before this function suspends (work-first).
    let local = unsafe { local.as_ref() };
    let me = local.map(|w| w.index);
    if me.is_none() && shared.in_forked_child() {
        // Only a foreign thread can get here in a forked child: no worker
        // of this runtime exists there.
        return Err(SpawnError::new(SpawnErrorKind::ForkedChild));
    }
    let at = place(shared, &opts, me);
    let new = task::NewTask {
        id: next_fiber_id(),
        name: opts.name,
        stack_size,
        pinned: at.pinned,
        placed: at.pinned.unwrap_or(at.target),
        reclaim_by: at.reclaim_by,
        spawn_site: Some(site),
        born_ms: shared.insight.born_now(),
        entry: None,
    };
    // SAFETY: forwarded (the caller's contract on what `f` borrows).
    let (task, packet) = unsafe { allocate(shared, local, new, f) };
    let handle = JoinHandle {
        packet,
        task: std::mem::ManuallyDrop::new(task.clone()),
        shared: Arc::as_ptr(shared),
        _p: PhantomData,
    };
    // SAFETY: `place` sets `work_first` only when `me` is `Some`: this
    // thread runs a live worker of `shared`.
    unsafe { submit(shared, task, &at) };
    Ok(handle)
}

/// A spawn while the runtime shuts down, for a caller that asked for a
/// handle rather than an error (`SpawnOpts::cancelled_if_shutting_down`):
/// the fiber's task and packet are made as usual and destroyed at once,
/// never queued, as the shutdown drain destroys an unstarted fiber: its
/// closure is dropped unrun (a destructor's panic there is contained and
/// reported) and its join reports `JoinError::is_cancelled`.
///
/// # Safety
/// As [`spawn_unchecked`] (the closure is dropped before this returns).
#[cold]
#[inline(never)]
unsafe fn spawn_cancelled<'a, F, T>(
    shared: &Arc<Shared>,
    f: F,
    opts: SpawnOpts,
    site: &'static std::panic::Location<'static>,
) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let local = shared.local_worker();
    // SAFETY: a non-null `local_worker` is this thread's live worker, used
    // only for its task pool; nothing here suspends.
    let local = unsafe { local.as_ref() };
    let new = task::NewTask {
        id: next_fiber_id(),
        name: opts.name,
        stack_size: opts.stack_size.unwrap_or(shared.default_stack),
        pinned: None,
        placed: local.map_or(0, |w| w.index),
        reclaim_by: 0,
        spawn_site: Some(site),
        born_ms: shared.insight.born_now(),
        entry: None,
    };
    // SAFETY: forwarded; the closure is dropped below, before we return.
    let (task, packet) = unsafe { allocate(shared, local, new, f) };
    let handle = JoinHandle {
        packet,
        task: std::mem::ManuallyDrop::new(task.clone()),
        shared: Arc::as_ptr(shared),
        _p: PhantomData,
    };
    // Never queued: we hold its run permission (`task` module docs, step
    // 1), so the destruction succeeds.
    let destroyed = crate::runtime::destroy(shared, &task);
    debug_assert!(destroyed, "a task nobody else can reach is destroyed");
    handle
}

/// Check a spawn's options against the runtime (stack size, worker, node,
/// closure size, shutdown); returns the fiber's stack size.
#[inline]
fn validate(shared: &Arc<Shared>, opts: &SpawnOpts, size: usize) -> Result<usize, SpawnError> {
    let stack_size = opts.stack_size.unwrap_or(shared.default_stack);
    match stack::check_size(stack_size, shared.stack_mode) {
        Ok(()) => {}
        Err(stack::SizeError::TooSmall { minimum }) => {
            return Err(SpawnError::new(SpawnErrorKind::StackTooSmall { requested: stack_size, minimum }));
        }
        Err(stack::SizeError::TooLarge { maximum }) => {
            return Err(SpawnError::new(SpawnErrorKind::StackTooLarge { requested: stack_size, maximum }));
        }
    }
    let nworkers = shared.workers.len();
    if let Some(w) = opts.worker {
        if w >= nworkers {
            return Err(SpawnError::new(SpawnErrorKind::NoSuchWorker { worker: w, workers: nworkers }));
        }
    }
    if let Some(n) = opts.node {
        if !shared.workers.iter().any(|w| w.slot.node == n) {
            let nodes = shared.workers.iter().map(|w| w.slot.node + 1).max().unwrap_or(0);
            return Err(SpawnError::new(SpawnErrorKind::NoSuchNode { node: n, nodes }));
        }
        if let Some(w) = opts.worker {
            let worker_node = shared.workers[w].slot.node;
            if worker_node != n {
                return Err(SpawnError::new(SpawnErrorKind::WorkerNotOnNode { worker: w, node: n, worker_node }));
            }
        }
    }
    let limit = closure_limit(stack_size);
    if size > limit {
        return Err(SpawnError::new(SpawnErrorKind::ClosureTooLarge { size, stack_size, limit }));
    }
    if shared.is_shutting_down() {
        return Err(SpawnError::new(SpawnErrorKind::ShuttingDown));
    }
    Ok(stack_size)
}

/// Where a new fiber goes ([`place`]).
struct Placement {
    /// The worker it is pinned to, if any.
    pinned: Option<usize>,
    /// The worker whose queue it enters (the spawner's own for
    /// work-first and local spawns).
    target: usize,
    /// It runs now on the spawner's worker, which is `Some`.
    work_first: bool,
    /// The fiber that may reclaim it, or 0 (`Task::reclaim_by`).
    reclaim_by: u64,
}

/// Place a spawn whose options passed [`validate`]; `me` is the spawning
/// worker of `shared`, if the caller runs on one.
#[inline]
fn place(shared: &Arc<Shared>, opts: &SpawnOpts, me: Option<usize>) -> Placement {
    let nworkers = shared.workers.len();
    let node_worker = |n: usize| {
        (0..nworkers)
            .filter(|&w| shared.workers[w].slot.node == n)
            .min_by_key(|&w| (shared.workers[w].queue_len(), Some(w) != me))
            .expect("checked above that the node has workers")
    };
    // Pinned: to `worker(w)`, else to a worker of `node(n)`, else to the
    // spawning worker, else where placement says.
    let pinned = match (opts.worker, opts.pinned) {
        (Some(w), _) => Some(w),
        (None, true) => Some(match (opts.node, me) {
            (Some(n), _) => node_worker(n),
            (None, Some(m)) => m,
            (None, None) => shared.sched.place(None, &**shared),
        }),
        (None, false) => None,
    };
    // Work-first (runtime-wide option) or eager (per spawn): the child runs
    // now on this worker. Only from a fiber of this runtime that may
    // suspend, and only when the child may run here.
    let work_first = (pinned.is_none() || (opts.eager && pinned == me))
        && opts.node.is_none()
        && me.is_some()
        && (opts.eager || (shared.sched.options().work_first && !opts.local))
        && current_task().is_some_and(|t| !cannot_suspend(t));
    let target = if let Some(p) = pinned {
        p
    } else if let Some(n) = opts.node {
        node_worker(n)
    } else if let (true, Some(m)) = (opts.local || work_first, me) {
        m
    } else {
        shared.place_new(me)
    };
    let placed_by_policy = pinned.is_none() && opts.node.is_none() && !(opts.local || work_first);
    if !placed_by_policy {
        shared.sched.record_placement_on_spawner_thread(me, target);
    }
    // Reclaim (`task` module docs): the spawning fiber may run this child
    // itself when it joins it unstarted, if placement sent it to another
    // worker of this node with a stealing policy (the thesis' node choice
    // stands; round-robin stays a no-stealing baseline).
    // A child queued on the spawner's own worker carries its spawner's id
    // too: a join that finds it unstarted there runs it next if it is the
    // next one this worker would start (other workers may take work), or
    // waits to be woken behind its siblings (no other worker takes work:
    // one worker, or a policy without stealing; `runtime::spawn::reclaim`).
    let steals = shared.sched.steals();
    let reclaim_by = match me {
        Some(m) if placed_by_policy && target != m && shared.node_of(target) == shared.node_of(m) && steals => {
            current_task().map_or(0, |t| t.id)
        }
        Some(m) if target == m && pinned.is_none() && !work_first => current_task().map_or(0, |t| t.id),
        _ => 0,
    };
    Placement { pinned, target, work_first, reclaim_by }
}

/// The new fiber's task and its handle's packet: the closure and the
/// packet in the task when they fit, else in one allocation beside it.
///
/// # Safety
/// As [`spawn_unchecked`]: every borrow of `f` outlives the fiber.
#[inline]
unsafe fn allocate<'a, F, T>(
    shared: &Arc<Shared>,
    local: Option<&WorkerLocal>,
    new: task::NewTask,
    f: F,
) -> (TaskRef, packet::PacketRef<T>)
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    if packet::fits_in_task::<F, T>() {
        // The closure and the packet in the task itself: no allocation
        // (`packet` module docs, "In the task").
        let task = new_task(shared, local, new);
        // SAFETY: the caller's contract keeps every borrow of `f` alive
        // until the fiber is finished or destroyed; `task` was just made
        // (its slot empty: `write_over` resets it) and nobody else can
        // reach it until we clone or queue it below; it fits; the handle
        // built below holds a `TaskRef` as long as its `PacketRef`.
        let (entry, packet) = unsafe { packet::new_in_task(&task.main, f) };
        // SAFETY: the spawner holds the new task's run permission until it
        // queues the task (`task` module docs, step 1): nobody else
        // touches the body.
        unsafe { task.body().entry = Some(entry) };
        (task, packet)
    } else {
        // The closure and the packet in one allocation.
        // SAFETY: the caller's contract keeps every borrow of `f` alive
        // until the fiber is finished or destroyed.
        let (entry, packet) = unsafe { packet::new_main(f) };
        (new_task(shared, local, task::NewTask { entry: Some(entry), ..new }), packet)
    }
}

/// The task for `new`: from the spawning worker's pool (`local`, a worker
/// of `shared`), or a fresh allocation on a foreign thread.
#[inline]
fn new_task(shared: &Arc<Shared>, local: Option<&WorkerLocal>, new: task::NewTask) -> TaskRef {
    match local {
        Some(w) => {
            let counters = &shared.workers[w.index].counters;
            Counters::bump(&counters.spawned, 1);
            // A finished task's memory from this worker's pool, if any
            // (`task_pool`).
            w.tasks.alloc(new, &counters.tasks_reused, &shared.task_spill)
        }
        None => {
            shared.foreign_spawned.fetch_add(1, Relaxed);
            Arc::new(new.into_task())
        }
    }
}

/// Queue the new fiber where [`place`] put it, or, work-first, run it now
/// on this worker and queue the spawner instead.
///
/// # Safety
/// `at.work_first` only if this thread runs a live worker of `shared`.
#[inline]
unsafe fn submit(shared: &Arc<Shared>, task: TaskRef, at: &Placement) {
    if at.work_first {
        // Work-first (Cilk): run the child now; this fiber goes to the
        // deque where thieves may take it.
        let w = context::worker_ptr();
        // SAFETY: this thread runs a live worker of `shared` (caller); the
        // reference is dropped before we suspend.
        unsafe { (*w).set_run_next(task) };
        suspend(Suspend::Handoff);
    } else {
        shared.submit(task, at.target);
    }
}

/// Surplus entries a reclaim may leave in one inbox: at this many queued
/// entries in the inbox the child was placed in, a join waits instead (the
/// surplus entries of reclaimed children are dropped only when that worker
/// or a thief gets to them, so a worker stuck in one long fiber must not
/// collect them without bound: about 350 bytes each).
const RECLAIM_INBOX_LIMIT: usize = 1024;

/// The running fiber joins `task` (not finished yet). If it spawned the
/// child, the child has not started, and placement sent it to another
/// worker of this node (`Task::reclaim_by`), run it now on this worker:
/// take it back from this worker's held-child slot if it is still held there
/// (`Shared::hold`), else queue a second entry for it in `run_next`, and
/// suspend with `Suspend::Reclaim`, so the child runs next here and this
/// fiber resumes
/// right after it, on this worker (protocol: `task` module docs,
/// "Reclaim"). Returns when this fiber runs again:
/// usually after the child finished; the caller then waits as usual
/// (the child may have parked, or another worker may have started it
/// first, and then our entry is surplus).
///
/// If placement queued the child on this worker, the child is in this
/// worker's wake slot and more children of this fiber wait in its spawn
/// batch (the first join of a join loop), suspend with `Suspend::Behind`:
/// this fiber is queued under them all and runs after them ("Run order",
/// 7, in `runtime/README.md`).
///
/// Otherwise, if placement queued the child on this worker and other workers take
/// work, take it back only if it is the next one this worker would start:
/// still in the wake slot, or on top of the deque (no second entry), and
/// no other fiber has waited long enough (`WorkerLocal::take_back`); then
/// it runs next and this fiber right after it, as above. Otherwise the
/// caller waits ("Run order", 5, in `runtime/README.md`).
///
/// If placement queued the child on this worker, and no other worker takes
/// work, mark this fiber `task::BEHIND` instead and return: the caller
/// waits, and the child's end wakes it behind its unstarted siblings
/// ("Run order", 6, in `runtime/README.md`).
#[inline]
pub(crate) fn reclaim(task: &TaskRef) {
    if task.reclaim_by != 0 {
        reclaim_slow(task);
    }
}

#[inline(never)]
fn reclaim_slow(task: &TaskRef) {
    let (w, t) = context::worker_and_task();
    if w.is_null() || t.is_null() {
        return; // a plain thread (or the shutdown drain)
    }
    // SAFETY: the running task (see `current_task`); used before the
    // suspension below only.
    let me = unsafe { &*t };
    if me.id != task.reclaim_by || !task.is_fresh() {
        return;
    }
    // SAFETY: this thread's live worker; not used after the suspension.
    let w = unsafe { &*w };
    let shared = &*w.shared;
    if cannot_suspend(me) || shared.is_shutting_down() {
        // The caller waits without giving control back: the child must
        // not stay in our held-child slot meanwhile.
        shared.release_held(w.index);
        return;
    }
    // The spawner's fibers never leave its runtime, so `placed` indexes
    // this runtime's workers (checked anyway: a hint read racily).
    let placed = task.last_worker();
    if placed == w.index && me.pinned().is_none() && w.joins_first_of_batch(task) {
        // The first join of a join loop over children spawned here, the
        // child next to start: wait behind them all ("Run order", 7).
        suspend_task(t, Suspend::Behind);
        return;
    }
    let child = if placed == w.index {
        if w.can_share() {
            // Queued here, where thieves may take it: run it next if it is
            // the next one we would start anyway (a thief may have taken it
            // or started it, or other work may be queued above it, or
            // fibers woken earlier have waited long enough: then wait).
            w.take_back(task)
        } else {
            // Queued on this worker, in spawn order: this fiber waits, and
            // the child's end wakes it behind the siblings still queued
            // above it (`WorkerLocal::queue_behind_children`), so a join
            // loop over the children parks once, not once per child.
            if me.flags_load() & task::BEHIND == 0 {
                me.flags_or(task::BEHIND);
            }
            None
        }
    } else if let Some(child) = shared.workers[w.index].held.take_if(task) {
        // Still held back here (`Shared::hold`): the one entry there is;
        // no surplus entry elsewhere.
        Some(child)
    } else if placed >= shared.workers.len()
        || shared.node_of(placed) != shared.node_of(w.index)
        || shared.workers[placed].inbox.len() >= RECLAIM_INBOX_LIMIT
    {
        None
    } else {
        // A second entry: whichever of the two is popped later is surplus
        // (`task` module docs, "Reclaim").
        shared.sched.fiber_entered_node(shared.node_of(w.index));
        Some(task.clone())
    };
    if let Some(child) = child {
        Counters::bump(&shared.workers[w.index].counters.reclaimed, 1);
        w.set_run_next(child);
        suspend_task(t, Suspend::Reclaim);
    }
}

fn shared_or_no_runtime(opts: &SpawnOpts) -> Result<Arc<Shared>, SpawnError> {
    if let Some(s) = current_shared() {
        return Ok(s);
    }
    // A destructor run by the shutdown drain (no worker on this thread any
    // more) is still inside its runtime, which accepts no new fibers: an
    // error, or a cancelled fiber (the spawn's validation says so).
    if let Some(s) = current_shared_for_drain() {
        if opts.cancelled_if_shutting_down {
            return Ok(s);
        }
        return Err(SpawnError::new(SpawnErrorKind::ShuttingDown));
    }
    Err(SpawnError::new(SpawnErrorKind::NoRuntime))
}

/// `fiber::Builder::spawn`: spawn on the calling worker's runtime.
#[track_caller]
pub(crate) fn spawn_current<F, T>(f: F, opts: SpawnOpts) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let p = current_shared_ptr();
    if !p.is_null() {
        // On a worker thread: borrow its runtime instead of counting a
        // reference per spawn. The `Shared` outlives this
        // call even if the spawn suspends (work-first): it outlives
        // every fiber of its runtime (`sync::queue`'s `SharedRef`
        // docs), and off a fiber nothing suspends while the worker,
        // which holds an `Arc`, runs this thread.
        // SAFETY: `p` is `Arc::as_ptr` of that live `Arc<Shared>`;
        // `ManuallyDrop` leaves its count alone.
        let shared = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(p) });
        return spawn_on(&shared, f, opts);
    }
    let shared = shared_or_no_runtime(&opts)?;
    spawn_on(&shared, f, opts)
}

/// Fork-join (see `fiber::join`).
#[track_caller]
pub(crate) fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    // One accessor call for both (read again after `a`, which may suspend).
    let (w, t) = context::worker_and_task();
    // SAFETY: a non-null CURRENT is the running task (see `current_task`).
    if w.is_null() || t.is_null() || cannot_suspend(unsafe { &*t }) {
        return (a(), b());
    }
    // In `ManuallyDrop`: when the caller runs `b` inline, the job holds
    // nothing (its closure was taken, no result, waiter or runner was ever
    // stored), so that common path skips the drop glue; the other paths
    // empty it with `clear`.
    let job = std::mem::ManuallyDrop::new(job::StackJob::new(b));
    let jref = job.as_job_ref();
    // SAFETY: this thread's live worker; not kept across `a`.
    unsafe {
        (*w).deque.push(job::Runnable::Job(jref));
        (*w).notify_idle_after_push();
    }
    // A forced unwind (shutdown drain, `block_on`'s deadlock path) through
    // `job.wait()` below must not free the job while its runner uses it.
    struct Settle<'j>(&'j dyn job::OwnedJob);
    impl Drop for Settle<'_> {
        fn drop(&mut self) {
            if std::thread::panicking() {
                settle_job(&|| (self.0.runner(), self.0.is_done()));
            }
            self.0.clear();
        }
    }
    let settle = Settle(&*job);
    let ra = catch_unwind(AssertUnwindSafe(a));
    // `a` may have suspended: we may be on another worker now (TLS re-read).
    let w = context::worker_ptr();
    let mut mine = false;
    if !w.is_null() {
        // SAFETY: as above.
        let w = unsafe { &*w };
        match w.deque.pop() {
            Some(job::Runnable::Job(j)) if j == jref => mine = true,
            Some(other) => w.deque.push(other),
            None => {}
        }
    }
    let (rb, passes_on) = if mine {
        std::mem::forget(settle);
        let r = job.run_inline();
        debug_assert!(job.is_empty(), "an inline job holds nothing to drop");
        (r, false)
    } else {
        let r = wait_stolen(&job);
        std::mem::forget(settle);
        job.clear();
        r
    };
    // A cancellation passed on to the job, or one that came while the job
    // finished, unwinds here, as a scope does after its children; a panic
    // of `a` or `b` goes first.
    match (ra, rb) {
        (Ok(ra), Ok(rb)) => {
            if passes_on {
                crate::runtime::cancel::cancel_point_current();
            }
            (ra, rb)
        }
        (Err(p), _) => resume_unwind(p),
        (Ok(_), Err(e)) => {
            if passes_on && e.is_cancelled() {
                crate::runtime::cancel::cancel_point_current();
            }
            e.resume()
        }
    }
}

/// `join`'s wait for its stolen job, shielded: the thief runs `b` on our
/// frame, so this wait must end. A cancellation of this fiber (one it
/// would unwind for: not shielded by the caller, not destroyed by the
/// drain) is passed on to the job, as a scope passes it on to its children
/// (`cancel` module docs, step 5). Returns `b`'s result and whether a
/// cancellation of this fiber is to unwind it after the wait.
fn wait_stolen<B, RB>(job: &job::StackJob<B, RB>) -> (Result<RB, crate::runtime::error::JoinError>, bool)
where
    B: FnOnce() -> RB + Send,
    RB: Send,
{
    if current_is_cancelling() {
        settle_job(&|| (job.runner(), job.is_done()));
    }
    // SAFETY: a non-null CURRENT is the running task (see `current_task`).
    let me = unsafe { context::current_task_ptr().as_ref() };
    let passes_on = me.is_some_and(|t| t.shield.get() == 0 && !t.is_cancelling());
    let _shield = ShieldGuard::new();
    let (r, _) = job.wait_or_cancel(
        || passes_on && crate::runtime::cancel::current_requested(),
        |runner| crate::runtime::cancel::request_at(&runner, current_shared_ptr()),
    );
    (r, passes_on)
}
