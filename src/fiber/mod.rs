//! Fibers: spawn, yield, join, sleep, fork-join, scopes.
//!
//! A fiber is a function running on its own stack, switched cooperatively on
//! the worker threads of a [`Runtime`](crate::Runtime). Everything here
//! mirrors `std::thread`:
//!
//! ```
//! use numafiber::{fiber, Runtime};
//! let rt = Runtime::builder().workers(2).build().unwrap();
//! let out = rt.block_on(|| {
//!     let h = fiber::spawn(|| {
//!         fiber::yield_now();
//!         21
//!     });
//!     fiber::await_fiber(h) * 2
//! });
//! assert_eq!(out, 42);
//! ```
//!
//! # Thread-locals and migration
//!
//! A fiber that suspends (yield, join, sleep, a contended lock) may resume
//! on another worker thread. A `thread_local!` read before the suspension
//! and one after it may then see *different* threads' values, and in
//! optimised builds the compiler may even reuse the first thread's address
//! after the switch. Rules for user code:
//!
//! * do not hold a reference into a `thread_local!` across a suspension
//!   point, and do not rely on two accesses seeing the same thread;
//! * for thread-affine state (thread-locals, `!Send` handles that must stay
//!   on their thread) use [`spawn_pinned`], whose fiber never migrates;
//! * for per-fiber state, keep it in the fiber's own variables (its stack
//!   moves with it).
//!
//! The runtime follows the same rule internally: its per-thread state is
//! only read through non-inlined accessors, so [`current`] always reports
//! the worker that is really running the fiber.
//!
//! # Stacks
//!
//! A fiber owns no stack until it first runs, so spawning is never limited
//! by how many fibers exist. Its stack is [`DEFAULT_STACK_SIZE`] (256 KiB)
//! of address space, committed lazily: a fiber costs the pages it touches
//! (one 4 KiB page for a fiber that just parks; measured 4.5 KiB of RSS per
//! parked fiber with a million of them). Below each stack is a guard page,
//! so an overflow is caught, reported with the fiber's id, name and stack
//! size, and the process aborts, like Rust's report for threads. Stacks are
//! carved from large slabs, and on Linux 6.13 and newer the guard pages are
//! `MADV_GUARD_INSTALL` markers that need no memory mapping of their own,
//! so `vm.max_map_count` limits nothing. On older kernels (or with
//! `NUMAFIBER_NO_GUARD_INSTALL=1`) each stack is a mapping with an
//! `mprotect`ed guard, and the process can afford about
//! `vm.max_map_count / 2` of them ([`StackUsage::fallback_budget`]): a
//! worker at that budget runs the fibers that have stacks first and starts
//! new ones as stacks are freed; only when nothing can proceed does
//! `Runtime::block_on` report it, naming the limit and the fix. Any
//! `stack_size` from [`MIN_STACK_SIZE`] (16 KiB) up to [`MAX_STACK_SIZE`]
//! works; the runtime's panic report runs on a side stack of the worker.

pub(crate) mod blocking;
mod join_set;

use std::cell::Cell;
use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::error::{JoinError, SpawnError, SpawnErrorKind};
pub use join_set::JoinSet;
pub use blocking::{block_in_place, spawn_blocking, BLOCKING_KEEP_ALIVE, MAX_BLOCKING_THREADS};
pub use crate::runtime::task::stack::{stack_usage, StackUsage, DEFAULT_STACK_SIZE, MAX_STACK_SIZE, MIN_SLAB_STACK_SIZE, MIN_STACK_SIZE};

use crate::runtime::shared::{Counters, Shared};
use crate::runtime::context;
use crate::runtime::task::{self, job, packet, stack};
use job::OwnedJob;
use packet::{park_caller, Completion};
use task::{Suspend, Task, TaskRef};

// ---------------------------------------------------------------------------
// Internal helpers: the running fiber and its runtime.

/// The running fiber, if any.
fn current_task() -> Option<&'static Task> {
    let p = context::current_task_ptr();
    // SAFETY: a non-null CURRENT points to the task the worker (or the
    // shutdown drain) is running on this thread, and it holds a `TaskRef`
    // for at least as long as the fiber runs. The `'static` is never
    // exposed beyond one non-suspending use.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// A new strong reference to the running task.
fn current_task_ref() -> Option<TaskRef> {
    let p = context::current_task_ptr();
    if p.is_null() {
        return None;
    }
    // SAFETY: CURRENT was set from `&*task` of a live `Arc<Task>` (so it is
    // the `Arc`'s pointer) that the runner keeps alive meanwhile.
    unsafe {
        Arc::increment_strong_count(p);
        Some(Arc::from_raw(p))
    }
}

/// The runtime of the calling worker thread.
fn current_shared() -> Option<Arc<Shared>> {
    let w = context::worker_ptr();
    // SAFETY: a non-null WORKER points to this thread's live worker.
    (!w.is_null()).then(|| unsafe { (*w).shared.clone() })
}

/// The running fiber's runtime, as a pointer (no count); null off a
/// worker. The `Arc` behind it lives while this thread's worker runs.
#[inline]
pub(crate) fn current_shared_ptr() -> *const Shared {
    let w = context::worker_ptr();
    // SAFETY: a non-null WORKER points to this thread's live worker.
    if w.is_null() { std::ptr::null() } else { unsafe { Arc::as_ptr(&(*w).shared) } }
}

pub(crate) fn current_task_and_shared() -> Option<(TaskRef, Arc<Shared>)> {
    let t = current_task_ref()?;
    let s = current_shared()?;
    Some((t, s))
}

/// Count one finished fiber on the worker running this thread.
pub(crate) fn note_completed() {
    let w = context::worker_ptr();
    if !w.is_null() {
        // SAFETY: this thread's live worker.
        let w = unsafe { &*w };
        Counters::bump(&w.shared.workers[w.index].counters.completed, 1);
    }
}

/// Id of the running fiber, if any.
pub(crate) fn current_id() -> Option<u64> {
    current_task().map(|t| t.id)
}

/// The running fiber is being destroyed by the shutdown drain.
pub(crate) fn current_is_cancelling() -> bool {
    current_task().is_some_and(|t| t.cancelling.get())
}

/// The running fiber cannot suspend now (being destroyed, or unwinding):
/// a wait loop must not spin on `park` then. `false` on plain threads.
pub(crate) fn current_cannot_suspend() -> bool {
    current_task().is_some_and(cannot_suspend)
}

/// Record what the running fiber is about to wait on (deadlock report,
/// dumps) and the user call that waits (the caller's location, passed
/// down by `#[track_caller]` from the public waiting function); no-op on
/// plain threads. Clear with `task::wait_kind::NONE`.
#[track_caller]
pub(crate) fn set_wait_reason(kind: u8, obj: u64) {
    set_wait_reason_at(kind, obj, std::panic::Location::caller());
}

/// `set_wait_reason` with the waiting call's location given.
pub(crate) fn set_wait_reason_at(kind: u8, obj: u64, site: &'static std::panic::Location<'static>) {
    if let Some(t) = current_task() {
        set_task_wait_reason_at(t, kind, obj, site);
    }
}

/// `set_wait_reason` for a caller that knows its own task `t`.
#[track_caller]
#[allow(dead_code)] // the task pool's tests
pub(crate) fn set_task_wait_reason(t: &Task, kind: u8, obj: u64) {
    set_task_wait_reason_at(t, kind, obj, std::panic::Location::caller());
}

/// `set_wait_reason_at` for a caller that knows its own task `t`.
#[inline]
pub(crate) fn set_task_wait_reason_at(t: &Task, kind: u8, obj: u64, site: &'static std::panic::Location<'static>) {
    t.set_wait_site(site);
    t.wait_obj.store(obj, Relaxed);
    t.wait_kind.store(kind, Relaxed);
}

/// The running fiber may not suspend: it is being destroyed, or it is
/// unwinding a panic (the panic count is per thread, so another fiber
/// resumed on this thread would see it).
#[inline]
pub(crate) fn cannot_suspend(t: &Task) -> bool {
    t.cancelling.get() || std::thread::panicking()
}

fn suspend(reason: Suspend) {
    suspend_task(context::current_task_ptr(), reason);
}

/// Suspend the running fiber, whose task is `t` (read from TLS by the
/// caller just before: one accessor call per suspension, not two).
#[inline(always)]
fn suspend_task(t: *const Task, reason: Suspend) {
    debug_assert!(!t.is_null());
    // SAFETY: we are the running fiber, so our task's body is ours; we only
    // read the yielder pointer, which points into our own stack and was set
    // when the coroutine started.
    let y = unsafe { (*(*t).body_ptr()).yielder };
    debug_assert!(!y.is_null());
    // SAFETY: the yielder lives on this fiber's stack for its whole life.
    unsafe { (*y).suspend(reason) };
    // From here on we may be on another thread: re-read all TLS (`t` is
    // not TLS: it is our own task, the same on every thread).
}

/// Park the running fiber until `Shared::wake` (or return at once if a
/// wake-up token is pending). May return spuriously: callers loop.
pub(crate) fn park_current() {
    park_task(context::current_task_ptr());
}

/// `park_current` for a caller that already read the running task `t`
/// (null on a plain thread) from TLS, without suspending since.
#[inline]
pub(crate) fn park_task(t: *const Task) {
    if t.is_null() {
        crate::loom::thread::park();
        return;
    }
    // SAFETY: non-null CURRENT: the running task, alive while it runs (see
    // `current_task`).
    let task = unsafe { &*t };
    if task.take_token() || cannot_suspend(task) {
        return;
    }
    suspend_task(t, Suspend::Park);
}

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

/// Spawn without the `'static` bound.
///
/// # Safety
/// The caller guarantees the fiber finishes (or is destroyed) before
/// anything it borrows goes away: `scope` and `join` wait for their
/// children on every path, including unwinding and shutdown.
#[track_caller]
pub(crate) unsafe fn spawn_unchecked<'a, F, T>(shared: &Arc<Shared>, f: F, opts: SpawnOpts) -> Result<JoinHandle<T>, SpawnError>
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let site = std::panic::Location::caller();
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
    let size = std::mem::size_of::<F>().saturating_add(std::mem::size_of::<T>());
    let limit = closure_limit(stack_size);
    if size > limit {
        return Err(SpawnError::new(SpawnErrorKind::ClosureTooLarge { size, stack_size, limit }));
    }
    if shared.is_shutting_down() {
        return Err(SpawnError::new(SpawnErrorKind::ShuttingDown));
    }
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
    let reclaim_by = match me {
        Some(m) if placed_by_policy && target != m && shared.node_of(target) == shared.node_of(m) && shared.sched.steals() => {
            current_task().map_or(0, |t| t.id)
        }
        _ => 0,
    };
    let new = task::NewTask {
        id: next_fiber_id(),
        name: opts.name,
        stack_size,
        pinned,
        placed: pinned.unwrap_or(target),
        reclaim_by,
        spawn_site: Some(site),
        born_ms: shared.insight.born_now(),
        entry: None,
    };
    let make_task = |entry: Option<task::Entry>| {
        let new = task::NewTask { entry, ..new };
        match (local, me) {
            (Some(w), Some(m)) => {
                let counters = &shared.workers[m].counters;
                Counters::bump(&counters.spawned, 1);
                // A finished task's memory from this worker's pool, if any
                // (`task_pool`).
                w.tasks.alloc(new, &counters.tasks_reused, &shared.task_spill)
            }
            _ => {
                shared.foreign_spawned.fetch_add(1, Relaxed);
                Arc::new(new.into_task())
            }
        }
    };
    let (task, packet) = if packet::fits_in_task::<F, T>() {
        // The closure and the packet in the task itself: no allocation
        // (`packet` module docs, "In the task").
        let task = make_task(None);
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
        // The closure and the packet in one allocation (issue 15).
        // SAFETY: the caller's contract keeps every borrow of `f` alive
        // until the fiber is finished or destroyed.
        let (entry, packet) = unsafe { packet::new_main(f) };
        (make_task(Some(entry)), packet)
    };
    let handle = JoinHandle { packet, task: std::mem::ManuallyDrop::new(task.clone()), _p: PhantomData };
    if work_first {
        // Work-first (Cilk): run the child now; this fiber goes to the
        // deque where thieves may take it.
        let w = context::worker_ptr();
        // SAFETY: `me.is_some()` so this thread runs a live worker of
        // `shared`; the reference is dropped before we suspend.
        unsafe { (*w).set_run_next(task) };
        suspend(Suspend::Handoff);
    } else {
        shared.submit(task, target);
    }
    Ok(handle)
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
#[inline]
fn reclaim(task: &TaskRef) {
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
    if let Some(child) = shared.workers[w.index].held.take_if(task) {
        // Still held back here (`Shared::hold`): the one entry there is;
        // no surplus entry elsewhere.
        Counters::bump(&shared.workers[w.index].counters.reclaimed, 1);
        w.set_run_next(child);
        suspend_task(t, Suspend::Reclaim);
        return;
    }
    // The spawner's fibers never leave its runtime, so `placed` indexes
    // this runtime's workers (checked anyway: a hint read racily).
    let placed = task.last_worker();
    if placed >= shared.workers.len()
        || shared.node_of(placed) != shared.node_of(w.index)
        || shared.workers[placed].inbox.len() >= RECLAIM_INBOX_LIMIT
    {
        return;
    }
    Counters::bump(&shared.workers[w.index].counters.reclaimed, 1);
    shared.sched.fiber_entered_node(shared.node_of(w.index));
    w.set_run_next(task.clone());
    suspend_task(t, Suspend::Reclaim);
}

fn shared_or_no_runtime() -> Result<Arc<Shared>, SpawnError> {
    if let Some(s) = current_shared() {
        return Ok(s);
    }
    // A destructor run by the shutdown drain (no worker on this thread any
    // more) is still inside its runtime, which accepts no new fibers.
    if current_shared_for_drain().is_some() {
        return Err(SpawnError::new(SpawnErrorKind::ShuttingDown));
    }
    Err(SpawnError::new(SpawnErrorKind::NoRuntime))
}

// ---------------------------------------------------------------------------
// Public API.

/// An owned permission to join a fiber (`std::thread::JoinHandle` shape).
///
/// Dropping it detaches the fiber: it keeps running.
pub struct JoinHandle<T> {
    packet: packet::PacketRef<T>,
    /// Dropped by `Drop` (into the worker's task pool when it is the last
    /// reference), never elsewhere.
    task: std::mem::ManuallyDrop<TaskRef>,
    _p: PhantomData<T>,
}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // A handle never leaves its waiter behind (`when_any` unwinding,
        // an abandoned `join_watching`): `fiber::packet`'s protocol.
        // SAFETY: the handle is its packet's one owner.
        unsafe { self.packet.clear_waiter() };
        // An in-task packet dies with the task, not with an `Arc` of its
        // own: leave it to the fiber (which then drops the result on its
        // stack), or take the result out if it is there (`packet` module
        // docs, "Detaching"). A joined handle (`TAKEN`) only loads.
        let detached = if self.packet.in_task() {
            // SAFETY: the one owner, waiter withdrawn just above, and the
            // packet is not used again (the field is only dropped: a plain
            // pointer).
            unsafe { self.packet.detach() }
        } else {
            None
        };
        // SAFETY: the field is taken only here, once, and not used after.
        let t = unsafe { std::mem::ManuallyDrop::take(&mut self.task) };
        // After a join this is usually the task's last reference.
        crate::runtime::task::pool::release(t);
        // Dropped here, as the handle's last `Arc` dropped it before: a
        // destructor's panic reaches the handle's owner.
        drop(detached);
    }
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.task.id).field("finished", &self.is_finished()).finish()
    }
}

impl<T> JoinHandle<T> {
    /// Wait for the fiber and take its result; `Err` carries its panic.
    /// Inside a fiber this suspends the fiber; on a plain thread it blocks
    /// the thread.
    ///
    /// **A fiber joining its own child that nobody has started yet runs it
    /// now** (Cilk's `sync`, a lazy task's `co_await`): when placement sent
    /// the child to another worker of the caller's NUMA node and that
    /// worker has not got to it, the child starts at once on the caller's
    /// worker, before anything else queued there, and the caller continues
    /// on the same worker right after the child finishes or first suspends
    /// (if it suspended, the caller then waits for it as usual). It is the same
    /// fiber: its id, name, stack size and result are the ones of the
    /// handle, and [`WorkerStats::reclaimed`](crate::runtime::WorkerStats::reclaimed)
    /// counts these joins. Without it a recursive tree of `spawn` + `join`
    /// (skynet) unfolds breadth-first on two workers: each parent waits for
    /// a child in the other worker's inbox while its own worker starts more
    /// subtrees (13,000-27,000 live stacks instead of about 7). Nothing
    /// changes for children that are pinned, placed with
    /// [`Builder::node`], [`Builder::worker`] or [`Builder::local`], placed
    /// on another node (the thesis' node choice stands), placed under a
    /// policy that does not steal ([`Policy::RoundRobin`](crate::policy::Policy::RoundRobin)),
    /// or already started; nor for a joiner other than the spawning fiber
    /// (a fiber handed the handle, a plain thread): those wait, and the
    /// child runs where it was placed or is stolen as before. The same
    /// holds for the implicit joins at the end of a [`scope`].
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let err = rt.block_on(|| fiber::spawn(|| -> u8 { panic!("boom") }).join().unwrap_err());
    /// assert_eq!(err.panic_message(), Some("boom"));
    /// ```
    #[track_caller]
    pub fn join(self) -> Result<T, JoinError> {
        // SAFETY (both waits): a `JoinHandle` is its packet's one owner
        // (not `Clone`; `join` consumes it).
        if self.packet.is_done() {
            return unsafe { self.packet.wait() };
        }
        reclaim(&self.task);
        set_wait_reason(task::wait_kind::JOIN, self.task.id);
        let r = unsafe { self.packet.wait() };
        set_wait_reason(task::wait_kind::NONE, 0);
        r
    }

    /// `join` for `Runtime::block_on`: wake every `every` and call `check`
    /// with the joined task (the deadlock detector). When `check` returns a
    /// report, destroy the fiber, then panic with it. On every unwinding
    /// path the fiber is destroyed or awaited first (its closure may borrow
    /// from `block_on`'s caller).
    pub(crate) fn join_watching(
        self,
        shared: &Arc<Shared>,
        every: Duration,
        mut check: impl FnMut(&TaskRef) -> Option<String>,
    ) -> Result<T, JoinError> {
        struct Guard<'h, T> {
            h: &'h JoinHandle<T>,
            shared: &'h Arc<Shared>,
        }
        impl<T> Drop for Guard<'_, T> {
            fn drop(&mut self) {
                destroy_until_done(self.shared, &self.h.task, &*self.h.packet);
            }
        }
        let _root = crate::runtime::deadlock::BlockOnRoot::register(&self.task);
        let guard = Guard { h: &self, shared };
        loop {
            // SAFETY: the handle (consumed) is the packet's owner.
            if let Some(r) = unsafe { self.packet.try_take_or_register() } {
                std::mem::forget(guard);
                return r;
            }
            std::thread::park_timeout(every);
            if !self.packet.is_done() {
                if let Some(report) = check(&self.task) {
                    drop(guard); // destroys the root before we unwind
                    panic!("{report}");
                }
            }
        }
    }

    /// Whether the fiber has finished (its result is ready).
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| 1);
    /// while !h.is_finished() { std::thread::yield_now(); }
    /// assert_eq!(h.join().unwrap(), 1);
    /// ```
    pub fn is_finished(&self) -> bool {
        self.packet.is_done()
    }

    /// The fiber's id (as in [`FiberInfo::id`]).
    pub fn id(&self) -> u64 {
        self.task.id
    }
}

/// Spawn a fiber on the current fiber's runtime; it is placed by the
/// runtime's policy.
///
/// # Panics
/// Outside a fiber of a runtime (like `tokio::spawn`), and from a
/// destructor that runs while the runtime shuts down; use
/// [`Runtime::spawn`](crate::Runtime::spawn) from plain threads, or
/// [`Builder::spawn`] for a `Result`. Never because of how many fibers
/// exist: a fiber owns no stack until it first runs, and stacks are carved
/// from slabs without a memory mapping each (see "Stacks" in the module
/// docs).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// assert_eq!(rt.block_on(|| fiber::await_fiber(fiber::spawn(|| 7))), 7);
/// ```
#[track_caller]
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new().spawn(f).unwrap_or_else(|e| panic!("{e}"))
}

/// Spawn a fiber that never migrates: it always runs on the current worker
/// (or, from a plain thread, on the worker placement picks). Use it for
/// fibers that touch `thread_local!` state or thread-affine handles.
///
/// # Panics
/// Outside a fiber of a runtime.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let same = rt.block_on(|| {
///     fiber::await_fiber(fiber::spawn_pinned(|| {
///         let w = fiber::current().unwrap().worker;
///         (0..100).all(|_| { fiber::yield_now(); fiber::current().unwrap().worker == w })
///     }))
/// });
/// assert!(same);
/// ```
#[track_caller]
pub fn spawn_pinned<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    Builder::new().pinned(true).spawn(f).unwrap_or_else(|e| panic!("{e}"))
}

/// Let other fibers run; the caller is requeued behind them. Outside a
/// fiber this is `std::thread::yield_now`.
///
/// ```
/// numafiber::fiber::yield_now(); // fine on a plain thread too
/// ```
#[inline]
pub fn yield_now() {
    // Inlined into the caller on purpose: the fiber then resumes inside its
    // caller's frame, and the worker's `call` into the fiber is matched by
    // the `ret` of the fiber's next switch back, so the CPU's return-address
    // predictor stays right (a non-inlined `yield_now` returns to its
    // caller where the predictor expects the worker, twice per yield). The
    // TLS read is therefore the non-inlined accessor (see `worker::tls`).
    let t = context::current_task_ptr();
    if t.is_null() {
        std::thread::yield_now();
        return;
    }
    // SAFETY: as in `current_task`; not used after the suspension.
    if cannot_suspend(unsafe { &*t }) {
        return;
    }
    suspend_task(t, Suspend::Yield);
}

/// Wait for a fiber and return its value (corolib `co_await` on a task).
/// A panic of the fiber is re-raised in the caller.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// assert_eq!(rt.block_on(|| fiber::await_fiber(fiber::spawn(|| "done"))), "done");
/// ```
#[track_caller]
pub fn await_fiber<T>(h: JoinHandle<T>) -> T {
    match h.join() {
        Ok(v) => v,
        Err(e) => e.resume(),
    }
}

/// Park the fiber (not the worker thread) for at least `d`. Outside a fiber
/// this is `std::thread::sleep`. In a destructor that the shutdown drain
/// runs (a fiber being destroyed by [`Runtime::shutdown`](crate::Runtime::shutdown)
/// or drop) it returns at once, so it never delays shutdown.
///
/// ```
/// use std::time::{Duration, Instant};
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let t = Instant::now();
/// rt.block_on(|| fiber::sleep(Duration::from_millis(5)));
/// assert!(t.elapsed() >= Duration::from_millis(5));
/// ```
#[track_caller]
pub fn sleep(d: Duration) {
    if current_is_cancelling() || current_shared_for_drain().is_some() {
        // A destructor run by the shutdown drain: nothing can wake a timer
        // any more and sleeping would only delay the shutdown.
        return;
    }
    let (Some(t), false) = (current_task(), context::worker_ptr().is_null()) else {
        std::thread::sleep(d);
        return;
    };
    let Some(deadline) = Instant::now().checked_add(d) else {
        // Effectively forever: park until woken spuriously, again and again.
        loop {
            sleep(Duration::from_secs(3600 * 24));
        }
    };
    if cannot_suspend(t) {
        std::thread::sleep(d);
        return;
    }
    loop {
        if Instant::now() >= deadline {
            return;
        }
        let w = context::worker_ptr();
        let me = current_task_ref().expect("in a fiber");
        // SAFETY: non-null WORKER is this thread's live worker; no
        // suspension happens while the reference is used.
        unsafe { (*w).add_timer(deadline, me) };
        set_wait_reason(task::wait_kind::SLEEP, crate::runtime::dump::deadline_code(deadline));
        park_current();
        set_wait_reason(task::wait_kind::NONE, 0);
        let t = current_task();
        if let Some(t) = t {
            t.timed_wait_over();
        }
        if t.is_some_and(cannot_suspend) {
            return;
        }
    }
}

/// Run `a` and `b` in parallel, possibly, and return both results
/// (`rayon::join` shape). `b` is offered to thieves on the current
/// worker's deque while the caller runs `a`; if nobody took it, the caller
/// runs it inline, without a fiber or a stack of its own (no allocation).
/// A stolen `b` runs as a fiber on the thief. Both closures may borrow from
/// the caller. Outside a fiber both run sequentially on the caller. A panic
/// in either is re-raised after both have finished.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// fn fib(n: u64) -> u64 {
///     if n < 2 { return n; }
///     let (a, b) = fiber::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// assert_eq!(rt.block_on(|| fib(20)), 6765);
/// ```
#[track_caller]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
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
    let rb = if mine {
        std::mem::forget(settle);
        let r = job.run_inline();
        debug_assert!(job.is_empty(), "an inline job holds nothing to drop");
        r
    } else {
        if current_is_cancelling() {
            settle_job(&|| (job.runner(), job.is_done()));
        }
        let r = job.wait();
        std::mem::forget(settle);
        job.clear();
        r
    };
    match (ra, rb) {
        (Ok(ra), Ok(rb)) => (ra, rb),
        (Err(p), _) => resume_unwind(p),
        (Ok(_), Err(e)) => e.resume(),
    }
}

/// A fiber being destroyed waits for its `fiber::join` job (`probe`: its
/// runner fiber, whether it is done): destroy the runner if it is parked;
/// during the shutdown drain nothing else can run it, so give up there;
/// otherwise (`block_on`'s deadlock path, workers alive) wait for it.
fn settle_job(probe: &dyn Fn() -> (Option<TaskRef>, bool)) {
    loop {
        let (runner, done) = probe();
        if done {
            return;
        }
        let Some(shared) = current_shared_for_drain() else { return };
        if let Some(t) = runner {
            if crate::runtime::destroy(&shared, &t) {
                continue;
            }
        }
        if shared.draining.load(Acquire) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Block until `packet` completes; during cancellation destroy the child
/// instead of waiting for it.
#[track_caller]
pub(crate) fn wait_child(task: &TaskRef, packet: &dyn Completion) {
    if packet.is_done() {
        return;
    }
    reclaim(task);
    set_wait_reason(task::wait_kind::JOIN, task.id);
    wait_child_inner(task, packet);
    set_wait_reason(task::wait_kind::NONE, 0);
}

fn wait_child_inner(task: &TaskRef, packet: &dyn Completion) {
    while !packet.is_done() {
        if current_is_cancelling() {
            let Some(shared) = current_shared_for_drain() else { return };
            if crate::runtime::destroy(&shared, task) || packet.is_done() {
                continue;
            }
            if shared.draining.load(Acquire) {
                // Running elsewhere cannot happen during the drain (no
                // worker is left); do not spin on it either.
                return;
            }
            // `block_on`'s deadlock path destroys fibers while the workers
            // still run: the child is running or queued there. It borrows
            // from us, so wait for it to finish or park (then destroy it).
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        if !packet.register_current() {
            park_caller();
        }
    }
}

/// Make sure the fiber of `task` is finished or destroyed before the
/// caller goes on: destroy it when it is queued or parked, otherwise (it
/// runs on a worker) wait and retry. Used by `block_on` on its unwinding
/// paths, from a plain thread, while the workers run; destructors of the
/// destroyed fiber run on this thread (as in the shutdown drain).
fn destroy_until_done(shared: &Arc<Shared>, task: &TaskRef, packet: &dyn Completion) {
    if packet.is_done() {
        return;
    }
    let prev = DRAINING.with(|d| d.replace(Some(shared.clone())));
    while !packet.is_done() {
        if crate::runtime::destroy(shared, task) {
            continue;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    DRAINING.with(|d| *d.borrow_mut() = prev);
}

/// During the drain there is no worker on this thread; the registry that a
/// destroyed child must leave is reached through the draining runtime,
/// which `destroy` only needs for bookkeeping.
fn current_shared_for_drain() -> Option<Arc<Shared>> {
    DRAINING.with(|d| d.borrow().clone())
}

thread_local! {
    /// The runtime this thread is draining, if any.
    pub(crate) static DRAINING: std::cell::RefCell<Option<Arc<Shared>>> = const { std::cell::RefCell::new(None) };
}

/// Wait for every handle, in order, and return their values.
/// A panic of any fiber is re-raised (after the earlier ones were taken).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let v = rt.block_on(|| fiber::when_all((0..4).map(|i| fiber::spawn(move || i * 10)).collect()));
/// assert_eq!(v, vec![0, 10, 20, 30]);
/// ```
///
/// Scoped handles work too (all of one kind per call):
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let data = [1u64, 2, 3, 4];
/// let sums = rt.block_on(|| fiber::scope(|s| {
///     fiber::when_all(data.chunks(2).map(|c| s.spawn(move || c.iter().sum::<u64>())).collect())
/// }));
/// assert_eq!(sums, vec![3, 7]);
/// ```
#[track_caller]
pub fn when_all<H: FiberHandle>(handles: Vec<H>) -> Vec<H::Output> {
    handles.into_iter().map(FiberHandle::await_fiber).collect()
}

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for super::JoinHandle<T> {}
    impl<T> Sealed for super::ScopedJoinHandle<'_, T> {}
}

/// A handle [`when_all`] can wait for: [`JoinHandle`] and
/// [`ScopedJoinHandle`] (sealed).
///
/// ```
/// use numafiber::{fiber::{self, FiberHandle}, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// assert_eq!(rt.block_on(|| fiber::spawn(|| 3).await_fiber()), 3);
/// ```
pub trait FiberHandle: sealed::Sealed {
    /// The fiber's value.
    type Output;
    /// Wait for the fiber and return its value; re-raise its panic.
    ///
    /// # Panics
    /// When the fiber panicked (its payload is resumed) or was cancelled.
    #[track_caller]
    fn await_fiber(self) -> Self::Output;
}

impl<T> FiberHandle for JoinHandle<T> {
    type Output = T;
    #[track_caller]
    fn await_fiber(self) -> T {
        await_fiber(self)
    }
}

impl<T> FiberHandle for ScopedJoinHandle<'_, T> {
    type Output = T;
    #[track_caller]
    fn await_fiber(self) -> T {
        await_fiber(self.inner)
    }
}

/// Wait until the first of `handles` finishes; return its index and value.
/// The others keep running, detached (their results are dropped). A panic
/// of the first finisher is re-raised.
///
/// # Panics
/// If `handles` is empty.
///
/// ```
/// use std::time::Duration;
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let (i, v) = rt.block_on(|| fiber::when_any(vec![
///     fiber::spawn(|| { fiber::sleep(Duration::from_millis(200)); "slow" }),
///     fiber::spawn(|| "fast"),
/// ]));
/// assert_eq!((i, v), (1, "fast"));
/// ```
#[track_caller]
pub fn when_any<T>(handles: Vec<JoinHandle<T>>) -> (usize, T) {
    assert!(!handles.is_empty(), "fiber::when_any needs at least one handle");
    loop {
        for (i, h) in handles.iter().enumerate() {
            // SAFETY (the packet calls of this loop): `when_any` owns the
            // handles, so it is each packet's owner; it takes one result.
            if let Some(r) = unsafe { h.packet.try_take() } {
                for h in &handles {
                    unsafe { h.packet.clear_waiter() };
                }
                return match r {
                    Ok(v) => (i, v),
                    Err(e) => e.resume(),
                };
            }
        }
        let mut any_done = false;
        for h in &handles {
            // SAFETY: as above.
            any_done |= unsafe { h.packet.register_owner() };
        }
        if !any_done {
            set_wait_reason(task::wait_kind::JOIN_ANY, handles[0].task.id);
            park_caller();
            set_wait_reason(task::wait_kind::NONE, 0);
        }
    }
}

/// What [`current`] reports about the running fiber.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FiberInfo {
    /// Process-unique id.
    pub id: u64,
    /// Name given with [`Builder::name`].
    pub name: Option<String>,
    /// Index of the worker running the fiber right now.
    pub worker: usize,
    /// NUMA node of that worker (in the runtime's topology).
    pub node: usize,
}

/// The running fiber, or `None` on a plain thread.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// assert!(fiber::current().is_none());
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let info = rt.block_on(|| fiber::current().unwrap());
/// assert_eq!(info.worker, 0);
/// ```
pub fn current() -> Option<FiberInfo> {
    let t = current_task()?;
    let w = context::worker_ptr();
    if w.is_null() {
        return None;
    }
    // SAFETY: this thread's live worker.
    let w = unsafe { &*w };
    Some(FiberInfo {
        id: t.id,
        name: t.name.as_deref().map(str::to_owned),
        worker: w.index,
        node: w.shared.node_of(w.index),
    })
}

/// Configures one fiber (`std::thread::Builder` shape).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let name = rt.block_on(|| {
///     let h = fiber::Builder::new().name("io").stack_size(256 << 10)
///         .spawn(|| fiber::current().unwrap().name)
///         .unwrap();
///     fiber::await_fiber(h)
/// });
/// assert_eq!(name.as_deref(), Some("io"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Builder {
    opts: BuilderOpts,
}

#[derive(Debug, Clone, Default)]
struct BuilderOpts {
    name: Option<String>,
    stack_size: Option<usize>,
    node: Option<usize>,
    worker: Option<usize>,
    pinned: bool,
    local: bool,
    eager: bool,
}

impl Builder {
    /// Defaults: unnamed, the runtime's stack size, placed by the policy.
    pub fn new() -> Builder {
        Builder::default()
    }
    /// Name (shown by [`current`] and in reports).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.opts.name = Some(name.into());
        self
    }
    /// Stack size in bytes, from [`MIN_STACK_SIZE`] (16 KiB) to
    /// [`MAX_STACK_SIZE`]; outside that range `spawn` returns
    /// `SpawnErrorKind::StackTooSmall` / `StackTooLarge`. Guarded stacks are
    /// rounded up to a power of two; only touched pages cost memory.
    /// The closure and its result are moved onto this stack when the fiber starts, so
    /// together they may take at most a quarter of it: a larger closure is a
    /// [`SpawnErrorKind::ClosureTooLarge`] error, not a stack overflow (box
    /// large captures instead).
    ///
    /// ```
    /// use numafiber::{fiber, Runtime, SpawnErrorKind};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let big = [1u8; 32 << 10];
    /// let e = fiber::Builder::new().stack_size(64 << 10).spawn_on(&rt, move || big[0]).unwrap_err();
    /// assert!(matches!(e.kind(), SpawnErrorKind::ClosureTooLarge { .. }));
    /// let boxed = Box::new(big); // 8 bytes to move
    /// assert_eq!(fiber::Builder::new().stack_size(64 << 10).spawn_on(&rt, move || boxed[0]).unwrap().join().unwrap(), 1);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.opts.stack_size = Some(bytes);
        self
    }
    /// Start on the least-loaded worker of NUMA node `node` (it may still be
    /// stolen later unless pinned). Given together with
    /// [`worker`](Self::worker), the worker wins and must be on `node`:
    /// otherwise spawning fails with [`SpawnErrorKind::WorkerNotOnNode`].
    ///
    /// ```
    /// use numafiber::{fiber, Runtime, SpawnErrorKind, Topology};
    /// let rt = Runtime::builder().workers(2).topology(Topology::uniform(2, 1)).build().unwrap();
    /// let e = fiber::Builder::new().worker(0).node(1).spawn_on(&rt, || ()).unwrap_err();
    /// assert_eq!(e.kind(), &SpawnErrorKind::WorkerNotOnNode { worker: 0, node: 1, worker_node: 0 });
    /// assert!(fiber::Builder::new().worker(1).node(1).spawn_on(&rt, || ()).is_ok());
    /// ```
    pub fn node(mut self, node: usize) -> Builder {
        self.opts.node = Some(node);
        self
    }
    /// Run on worker `worker` and never migrate.
    pub fn worker(mut self, worker: usize) -> Builder {
        self.opts.worker = Some(worker);
        self
    }
    /// Never migrate (see [`spawn_pinned`]).
    pub fn pinned(mut self, pinned: bool) -> Builder {
        self.opts.pinned = pinned;
        self
    }
    /// Start on the spawning worker's own deque instead of asking the
    /// placement policy (thieves may still take it). From a thread that is
    /// not a worker of the runtime this has no effect.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let w = fiber::Builder::new().worker(1).spawn_on(&rt, || {
    ///     // a fiber that nobody steals runs where it was spawned
    ///     fiber::await_fiber(fiber::Builder::new().local(true).spawn(|| fiber::current().unwrap().worker).unwrap())
    /// }).unwrap().join().unwrap();
    /// assert!(w < 2);
    /// ```
    pub fn local(mut self, local: bool) -> Builder {
        self.opts.local = local;
        self
    }

    /// Start the child *now*, on this worker, before `spawn` returns
    /// (corolib's order: a task runs in its caller until its first
    /// suspension). The spawning fiber is queued on this worker's deque,
    /// where an idle worker may steal it, and continues when the child
    /// suspends or finishes (or a thief picks it up earlier). Plain
    /// `spawn` instead queues the child and the parent keeps running until
    /// it suspends; see "Things that behave differently" in
    /// `docs/porting-from-cpp.md`.
    ///
    /// No effect when spawning from a plain thread or from another
    /// runtime, with [`node`](Self::node), or when the child is pinned to
    /// another worker: the child is then queued as usual.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let order = rt.block_on(|| {
    ///     let log = Arc::new(Mutex::new(Vec::new()));
    ///     let l = log.clone();
    ///     log.lock().unwrap().push("parent: before spawn");
    ///     let h = fiber::Builder::new().eager(true)
    ///         .spawn(move || l.lock().unwrap().push("child runs first"))
    ///         .unwrap();
    ///     log.lock().unwrap().push("parent: after spawn");
    ///     fiber::await_fiber(h);
    ///     let v = log.lock().unwrap().clone();
    ///     v
    /// });
    /// assert_eq!(order, ["parent: before spawn", "child runs first", "parent: after spawn"]);
    /// ```
    pub fn eager(mut self, eager: bool) -> Builder {
        self.opts.eager = eager;
        self
    }

    fn spawn_opts(&self) -> SpawnOpts {
        SpawnOpts {
            name: self.opts.name.as_deref().map(Arc::from),
            stack_size: self.opts.stack_size,
            node: self.opts.node,
            worker: self.opts.worker,
            pinned: self.opts.pinned,
            local: self.opts.local,
            eager: self.opts.eager,
        }
    }

    /// Spawn on the current fiber's runtime.
    ///
    /// # Errors
    /// [`SpawnErrorKind::NoRuntime`] outside a fiber,
    /// [`SpawnErrorKind::ShuttingDown`] while the runtime shuts down (also
    /// from a destructor the shutdown drain runs), and the kinds of bad
    /// options: stack size, worker, node, closure size, too many fibers.
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        let p = current_shared_ptr();
        if !p.is_null() {
            // On a worker thread: borrow its runtime instead of counting a
            // reference per spawn (issue 15). The `Shared` outlives this
            // call even if the spawn suspends (work-first): it outlives
            // every fiber of its runtime (`sync::queue`'s `SharedRef`
            // docs), and off a fiber nothing suspends while the worker,
            // which holds an `Arc`, runs this thread.
            // SAFETY: `p` is `Arc::as_ptr` of that live `Arc<Shared>`;
            // `ManuallyDrop` leaves its count alone.
            let shared = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(p) });
            return spawn_on(&shared, f, self.spawn_opts());
        }
        let shared = shared_or_no_runtime()?;
        spawn_on(&shared, f, self.spawn_opts())
    }

    /// Spawn on `rt`, from any thread.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let h = fiber::Builder::new().worker(1).spawn_on(&rt, || fiber::current().unwrap().worker).unwrap();
    /// assert_eq!(h.join().unwrap(), 1);
    /// ```
    #[track_caller]
    pub fn spawn_on<F, T>(self, rt: &crate::Runtime, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn_on(rt.shared(), f, self.spawn_opts())
    }
}

/// A scope for fibers that borrow from the caller (`std::thread::scope`
/// shape). See [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    shared: Arc<Shared>,
    /// Children and their packets. The packets' lifetime is erased to
    /// `'static` (see `Scope::spawn`).
    children: Mutex<Vec<(TaskRef, packet::CompletionRef)>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// Handle of a scoped fiber.
pub struct ScopedJoinHandle<'scope, T> {
    inner: JoinHandle<T>,
    _scope: PhantomData<&'scope ()>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Wait for the fiber; `Err` carries its panic.
    #[track_caller]
    pub fn join(self) -> Result<T, JoinError> {
        self.inner.join()
    }
    /// Whether the fiber has finished.
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawn a fiber that may borrow anything that outlives the scope.
    ///
    /// # Panics
    /// If the runtime is shutting down.
    #[track_caller]
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        // SAFETY: `scope` waits for (or destroys) every child before it
        // returns or unwinds, so borrows of 'scope outlive the fiber.
        let h = unsafe { spawn_unchecked(&self.shared, f, SpawnOpts::default()) }.unwrap_or_else(|e| panic!("{e}"));
        // Lifetime-erased already (`packet::new_main`): `scope` drops
        // every entry of `children` before it returns, i.e. while 'scope
        // is still alive, and only waits for completion through them.
        // SAFETY: the view is kept beside a `TaskRef` of the child's task,
        // which keeps an in-task packet alive.
        let c = unsafe { h.packet.completion() };
        self.children.lock().unwrap_or_else(|e| e.into_inner()).push(((*h.task).clone(), c));
        ScopedJoinHandle { inner: h, _scope: PhantomData }
    }
}

/// Run `f` with a [`Scope`] whose fibers may borrow from the caller; every
/// fiber spawned in it is joined before `scope` returns. If one of them
/// panicked and was not joined, `scope` panics after all are done.
///
/// # Panics
/// Outside a fiber of a runtime (scoped fibers need the current runtime).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let total = rt.block_on(|| {
///     let data = vec![1u64, 2, 3, 4];
///     let mut sums = [0u64; 2];
///     fiber::scope(|s| {
///         let (l, r) = sums.split_at_mut(1);
///         s.spawn(|| l[0] = data[..2].iter().sum());
///         s.spawn(|| r[0] = data[2..].iter().sum());
///     });
///     sums[0] + sums[1]
/// });
/// assert_eq!(total, 10);
/// ```
#[track_caller]
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let shared = current_shared().unwrap_or_else(|| panic!("{}", SpawnError::new(SpawnErrorKind::NoRuntime)));
    let scope = Scope { shared, children: Mutex::new(Vec::new()), _scope: PhantomData, _env: PhantomData };
    let r = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    // Waits for every child again when dropped: a forced unwind of this
    // fiber (shutdown drain, `block_on`'s deadlock path) that starts inside
    // the wait below still destroys or awaits the children, which borrow
    // from our frame, before the frame goes.
    struct Children(Vec<(TaskRef, packet::CompletionRef)>);
    impl Drop for Children {
        fn drop(&mut self) {
            for (t, c) in &self.0 {
                wait_child(t, &**c);
            }
        }
    }
    let children = Children(std::mem::take(&mut *scope.children.lock().unwrap_or_else(|e| e.into_inner())));
    for (t, c) in &children.0 {
        wait_child(t, &**c);
    }
    let child_panicked = children.0.iter().any(|(_, c)| c.unjoined_panic());
    drop(children);
    match r {
        Err(p) => resume_unwind(p),
        Ok(_) if child_panicked => panic!("a scoped fiber panicked"),
        Ok(r) => r,
    }
}
