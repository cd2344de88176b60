//! `Runtime`: its builder, `block_on`, statistics and shutdown.
//!
//! # Shutdown (numbered argument)
//!
//! 0. Called inside one of the runtime's own fibers (the last
//!    `Arc<Runtime>` dropped there), `shutdown` cannot join the worker it
//!    runs on. It leaves the worker threads' handles in
//!    `Shared::finisher`, then does step 1 and returns; the first worker to
//!    leave its loop (step 2) takes the handles, joins every *other* worker
//!    and drains (step 3) on its own thread, which then exits detached. The
//!    shutdown is complete, only not finished when the drop returns.
//!    In a `fork()`ed child none of this runs: the worker threads do not
//!    exist there, so dropping the copy leaks it (no join, no destructor
//!    runs twice).
//! 1. `shutdown` sets `Shared::shutdown` and wakes every worker. A worker
//!    checks the flag between two fibers, so a fiber that is running
//!    finishes its current slice (until it yields, parks or returns) first.
//!    A fiber that never gives control back keeps its worker, and so
//!    shutdown, waiting: cooperative scheduling cannot preempt it. A spawn
//!    in that slice (or in a destructor the drain runs, step 3) is refused
//!    (`SpawnErrorKind::ShuttingDown`); the spawns without a `Result`
//!    (`fiber::spawn` and its kin) make the fiber and destroy it at once
//!    instead, as step 3 destroys an unstarted fiber
//!    (`spawn::spawn_cancelled`).
//! 2. Each worker leaves its loop and moves every fiber of its deque and
//!    yield queue into its inbox (`hand_back_queues`), drops its timers,
//!    its task pool (finished fibers only, `runtime::task::pool`) and its
//!    stack pool (unmapping pooled stacks), and exits. `shutdown` joins
//!    every worker thread. The drain runs on a thread without a worker, so
//!    nothing it destroys goes into a pool.
//! 3. With no worker left, the calling thread *drains*: it first destroys
//!    every queued fiber (unstarted ones just drop their closure; suspended
//!    ones are force-unwound by dropping their coroutine, which runs their
//!    destructors once and unmaps their stack), repeating while destructors
//!    queue more; then it destroys the parked fibers found in the registry.
//!    Queued fibers go first so that no scoped child outlives the frame of
//!    the parent it borrows from; a parent unwound first destroys its
//!    unfinished children itself (see `fiber::scope`).
//! 4. Destroying a fiber first takes its run permission by a CAS out of
//!    `QUEUED`/`PARKED` into `DONE` (`Task::transition_to_cancelled`), so a
//!    concurrent `wake` from a foreign thread either loses (sees `DONE`) or
//!    wins and queues it, in which case the drain finds it in a queue.
//!    While a fiber is being unwound it may not suspend: `park` returns at
//!    once (`std::thread::panicking()` is true).
//! 5. Every destroyed fiber's join packet receives `JoinError::cancelled`,
//!    so a thread blocked in `join` returns instead of hanging.

mod builder;
pub(crate) mod cancel;
pub(crate) mod context;
pub(crate) mod deadlock;
pub(crate) mod dump;
pub(crate) mod error;
pub(crate) mod io;
pub(crate) mod monitor;
pub(crate) mod park;
pub(crate) mod shared;
pub(crate) mod spawn;
mod stats;
pub(crate) mod task;
pub(crate) mod unpark;
pub(crate) mod wait;
pub(crate) mod worker;

pub use dump::{Dump, FiberDump, FiberState, Grouped, NodeDump, Wait, WaitKind, WorkerActivity, WorkerDump};
pub use monitor::{StallCause, StallReport, DEFAULT_STALL_THRESHOLD};
#[cfg(test)]
mod held_child_tests;
#[cfg(test)]
mod probe_tests;
#[cfg(test)]
mod test_support;

// The door: what code outside the engine (fiber/, sync/, net/, graph/)
// uses to spawn, park, wake and ask about the running fiber. Nothing else
// of the engine is meant to be reached from outside this folder.
pub use builder::{max_workers, Builder, MAX_TIMER_SLACK, MIN_WORKER_LIMIT, WORKERS_PER_PU_LIMIT};
pub(crate) use cancel::{cancel_point_current, current_requested as cancel_requested, request_in as cancel_in};
pub(crate) use context::{current_cannot_suspend, set_wait_reason};
pub(crate) use deadlock::IdleHelper;
pub(crate) use park::{park, park_until, sleep, yield_after_failed_try, yield_now, Waiter};
pub(crate) use spawn::{join, spawn_current, spawn_on, spawn_unchecked, SpawnOpts};
pub use stats::{NodeStats, Stats, WorkerStats};
pub(crate) use task::join::{wait_child, wait_child_or_cancel};
pub(crate) use task::locals::{current_slot as current_locals, LocalMap, LocalSlot};
pub(crate) use unpark::{current as current_unpark_handle, park as park_fiber, park_timeout as park_fiber_timeout};

/// The running fiber: id, name, worker index, NUMA node; `None` off a
/// fiber.
pub(crate) fn current_fiber() -> Option<(u64, Option<String>, usize, usize)> {
    let t = context::current_task()?;
    let w = context::worker()?;
    Some((t.id, t.name.as_deref().map(str::to_owned), w.index, w.shared.node_of(w.index)))
}

/// The runtime of the calling worker thread (fiber or not).
pub(crate) fn current_handle() -> Option<Handle> {
    context::current_shared().map(|shared| Handle { shared })
}

/// `f` on the running fiber's task and its runtime; `None` off a fiber.
/// The runtime is lent, not counted: a socket wait calls this once per
/// wait, and a count on the runtime's `Arc` would be one line every
/// worker writes.
pub(crate) fn with_current_fiber<R>(f: impl FnOnce(TaskRef, &Shared) -> R) -> Option<R> {
    let t = context::current_task_ref()?;
    let s = context::current_shared_ptr();
    if s.is_null() {
        return None;
    }
    // SAFETY: non-null, `s` is this thread's worker's `Arc<Shared>`, which
    // that worker holds for as long as it runs, so at least for this call.
    Some(f(t, unsafe { &*s }))
}

/// Workers of the running fiber's runtime; `None` off a fiber.
pub(crate) fn current_workers() -> Option<usize> {
    context::current_task_and_shared().map(|(_, s)| s.workers.len())
}

use std::fmt;
use std::sync::atomic::Ordering::*;

use std::sync::Arc;
use std::thread::JoinHandle as ThreadHandle;

use crate::policy::Policy;
use crate::runtime::error::BuildError;
use crate::runtime::shared::Shared;
use crate::runtime::task::job::Runnable;
use crate::runtime::task::join::JoinHandle;
use crate::runtime::task::TaskRef;
use crate::topology::Topology;

/// A pool of pinned worker threads running fibers.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let sum = rt.block_on(|| {
///     let hs: Vec<_> = (0..10u64).map(|i| fiber::spawn(move || i * i)).collect();
///     hs.into_iter().map(fiber::await_fiber).sum::<u64>()
/// });
/// assert_eq!(sum, 285);
/// ```
pub struct Runtime {
    shared: Arc<Shared>,
    threads: Vec<ThreadHandle<()>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("workers", &self.shared.workers.len())
            .field("policy", &self.shared.sched.policy())
            .field("topology", &self.shared.topology.description())
            .finish()
    }
}

impl Runtime {
    /// A builder; see [`Builder`].
    pub fn builder() -> Builder {
        Builder::new()
    }

    /// A runtime with the defaults: detected topology, one worker per PU,
    /// [`Policy::Nlh`], 256 KiB lazily committed stacks, pinned workers.
    ///
    /// ```
    /// let rt = numafiber::Runtime::new().unwrap();
    /// assert_eq!(rt.block_on(|| "hi"), "hi");
    /// ```
    pub fn new() -> Result<Runtime, BuildError> {
        Builder::new().build()
    }

    /// Run `f` as a fiber of this runtime and block the calling thread until
    /// it returns (corolib `synchronous`, cppcoro `sync_wait`, the caller's
    /// `io_context.run()`). A panic of the fiber is re-raised here. `f` may
    /// borrow from the caller: `block_on` does not return or unwind before
    /// the fiber has finished or been destroyed.
    ///
    /// While it waits it checks for deadlocks (see
    /// [`Builder::deadlock_detection`]).
    ///
    /// # Panics
    /// When called from inside a fiber (that would block a worker thread:
    /// use [`crate::fiber::await_fiber`] there), in a `fork()`ed child of
    /// the process that built the runtime (its workers do not exist there;
    /// the panic comes at once instead of a hang), when `f` panics (its
    /// payload is resumed), when the runtime is shutting down, and with
    /// the deadlock report (the root fiber is destroyed first).
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(1).build().unwrap();
    /// assert_eq!(rt.block_on(|| 40 + 2), 42);
    /// let mut local = vec![1, 2, 3];          // borrowed, not moved
    /// rt.block_on(|| local.push(4));
    /// assert_eq!(local, [1, 2, 3, 4]);
    /// ```
    #[track_caller]
    pub fn block_on<'a, F, T>(&self, f: F) -> T
    where
        F: FnOnce() -> T + Send + 'a,
        T: Send + 'a,
    {
        if !context::current_task_ptr().is_null() {
            panic!(
                "Runtime::block_on called from inside a fiber: this would block a worker thread; \
                 use fiber::spawn + fiber::await_fiber inside fibers"
            );
        }
        if self.shared.in_forked_child() {
            panic!("Runtime::block_on: {}", crate::SpawnError::new(crate::SpawnErrorKind::ForkedChild));
        }
        let shared = self.shared.clone();
        // SAFETY: the fiber may borrow anything that lives for 'a, i.e.
        // longer than this call. This call neither returns nor unwinds
        // while the fiber may still run: `join_watching` returns only once
        // the fiber's result is published (it finished, or was destroyed),
        // and on every unwinding path out of it (the deadlock panic below,
        // or any other) it first destroys the fiber, or waits until it
        // finishes, see `JoinHandle::join_watching`. Fibers that borrow
        // from the root (scoped children, `fiber::join` jobs) are destroyed
        // or awaited by the root's own unwinding.
        let h = unsafe { spawn::spawn_unchecked(&shared, f, SpawnOpts::default()) }.unwrap_or_else(|e| panic!("{e}"));
        let mut detector = crate::runtime::deadlock::Detector::default();
        let r = h.join_watching(&shared, crate::runtime::deadlock::POLL, |root| {
            use crate::runtime::deadlock::Verdict;
            match detector.check(&shared, root) {
                Verdict::Wait => None,
                Verdict::Warn(report) => {
                    eprintln!("{report}");
                    None
                }
                Verdict::Deadlock(report) => Some(report),
            }
        });
        match r {
            Ok(v) => v,
            Err(e) => e.resume(),
        }
    }

    /// Spawn a fiber from any thread; it is placed by the policy. While
    /// the runtime shuts down (a destructor that the shutdown drain runs)
    /// the fiber is cancelled at once, as with
    /// [`fiber::spawn`](crate::fiber::spawn): its closure is dropped unrun
    /// and its join reports [`is_cancelled()`](crate::JoinError::is_cancelled).
    ///
    /// # Panics
    /// In a `fork()`ed child of the process that built the runtime, and
    /// when the closure plus its result is larger than a quarter of the
    /// runtime's stack size (box large captures);
    /// [`fiber::Builder::spawn_on`](crate::fiber::Builder::spawn_on)
    /// returns these as errors. Never because of how many fibers exist: an
    /// unstarted fiber owns no stack and counts against no limit.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(2).build().unwrap();
    /// let h = rt.spawn(|| 1 + 1);
    /// assert_eq!(h.join().unwrap(), 2);
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn::spawn_on(&self.shared, f, SpawnOpts::infallible()).unwrap_or_else(|e| panic!("{e}"))
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// A [`Handle`] to this runtime: spawns from any thread without an
    /// `Arc<Runtime>` (completion threads, callbacks).
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.handle();
    /// let t = std::thread::spawn(move || h.spawn(|| 6 * 7).join().unwrap());
    /// assert_eq!(t.join().unwrap(), 42);
    /// ```
    pub fn handle(&self) -> Handle {
        Handle { shared: self.shared.clone() }
    }

    /// A snapshot of the runtime's counters.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(2).build().unwrap();
    /// rt.block_on(|| ());
    /// let s = rt.stats();
    /// assert_eq!(s.spawned, 1);
    /// assert_eq!(s.workers.len(), 2);
    /// ```
    pub fn stats(&self) -> Stats {
        Stats::collect(&self.shared)
    }

    /// Number of worker threads.
    pub fn workers(&self) -> usize {
        self.shared.workers.len()
    }

    /// The topology the policies see.
    pub fn topology(&self) -> &Topology {
        &self.shared.topology
    }

    /// The scheduling policy.
    pub fn policy(&self) -> Policy {
        self.shared.sched.policy()
    }

    /// Stop the workers, unwind every fiber that has not finished (running
    /// its destructors once), free every stack and join every worker.
    /// Also done on drop. See the module docs for the protocol.
    ///
    /// Called (or dropped) inside one of this runtime's own fibers, it
    /// cannot wait for the worker it runs on: it returns at once, and the
    /// same complete shutdown happens on a worker thread as soon as the
    /// calling fiber gives control back (returns, yields or parks; it is
    /// then unwound like every other unfinished fiber). Nothing waits for
    /// that worker thread, so a process that exits right away may end
    /// before the destructors ran.
    ///
    /// In a `fork()`ed child of the process that built the runtime the
    /// copy is leaked instead: its worker threads do not exist there, and
    /// its fibers' destructors must not run a second time.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(2).build().unwrap();
    /// let h = rt.spawn(|| loop { numafiber::fiber::sleep(std::time::Duration::from_secs(60)) });
    /// rt.shutdown();
    /// assert!(h.join().unwrap_err().is_cancelled());
    /// ```
    pub fn shutdown(mut self) {
        self.shutdown_inner();
    }

    fn shutdown_inner(&mut self) {
        if self.threads.is_empty() && (self.shared.draining.load(Acquire) || self.shared.is_shutting_down()) {
            return; // done already, or handed to a worker (step 0)
        }
        if self.shared.in_forked_child() {
            // The JoinHandles name threads of the parent process.
            std::mem::forget(std::mem::take(&mut self.threads));
            return;
        }
        if self.shared.local_worker_index().is_some() {
            // Step 0: inside one of our own fibers.
            let threads = std::mem::take(&mut self.threads);
            *self.shared.finisher.lock().unwrap_or_else(|e| e.into_inner()) = Some(threads);
            self.shared.shutdown.store(true, SeqCst);
            std::sync::atomic::fence(SeqCst); // as below
            self.shared.wake_all();
            return;
        }
        self.shared.shutdown.store(true, SeqCst);
        // Pairs with the sleeper's fence (announce, fence, re-check the
        // flag): a worker that announces itself after `wake_all` read its
        // flag sees `shutdown`. Needed since an idle worker may block in
        // the reactor's `epoll_wait`, where the futex token `wake_all`
        // leaves does not reach it (loom model `reactor_busy_poll_vs_idle`).
        std::sync::atomic::fence(SeqCst);
        self.shared.wake_all();
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.shared.insight.monitor.join();
        drain(&self.shared);
    }
}

/// Step 0 of the shutdown argument, on a worker thread that left its loop:
/// if the runtime was dropped inside one of its fibers, join every other
/// worker and drain here.
fn finish_handed_off_shutdown(shared: &Arc<Shared>) {
    let Some(threads) = shared.finisher.lock().unwrap_or_else(|e| e.into_inner()).take() else {
        return;
    };
    let me = std::thread::current().id();
    for t in threads {
        if t.thread().id() != me {
            let _ = t.join();
        }
        // Our own handle is dropped: this thread exits detached.
    }
    drain(shared);
}

/// Step 3 of the shutdown argument.
fn drain(shared: &Arc<Shared>) {
    shared.draining.store(true, SeqCst);
    let prev = crate::runtime::task::join::DRAINING.with(|d| d.replace(Some(shared.clone())));
    drain_all(shared);
    crate::runtime::task::join::DRAINING.with(|d| *d.borrow_mut() = prev);
}

fn drain_all(shared: &Arc<Shared>) {
    loop {
        drain_queues(shared);
        // Parked fibers, one registry shard at a time; the queues are
        // drained again before each (destructors may queue fibers).
        let batch = shared.registry.take_shard();
        if batch.is_empty() {
            if shared.registry.is_empty() && queues_empty(shared) {
                break;
            }
            continue;
        }
        for t in batch {
            drain_queues(shared);
            // Not destroyed here: finished meanwhile, or woken and
            // queued by a foreign thread (the queue drain gets it).
            destroy(shared, &t);
        }
    }
}

fn queues_empty(shared: &Shared) -> bool {
    shared.io_ready.is_empty() && shared.workers.iter().all(|w| w.inbox.is_empty() && w.pinned_inbox.is_empty())
}

/// Destroy every queued fiber and cancel every queued job, until the
/// queues stay empty.
fn drain_queues(shared: &Shared) {
    loop {
        let mut progressed = false;
        while let Some(t) = worker::drain_one(&shared.io_ready) {
            progressed = true;
            destroy(shared, &t);
        }
        for w in shared.workers.iter() {
            while let Some(t) = worker::drain_one(&w.pinned_inbox) {
                progressed = true;
                destroy(shared, &t);
            }
            while let Some(r) = worker::drain_one(&w.inbox) {
                progressed = true;
                match r {
                    Runnable::Task(t) => {
                        destroy(shared, &t);
                    }
                    // SAFETY: we consumed the only JobRef to it; its
                    // owner is parked waiting for the latch.
                    Runnable::Job(j) => unsafe { j.cancel() },
                }
            }
        }
        if !progressed {
            return;
        }
    }
}

/// A cheap, cloneable reference to a [`Runtime`] (`Clone + Send + Sync`),
/// for spawning from threads and callbacks that should not own the
/// runtime (tokio's `runtime::Handle`).
///
/// A handle does not keep the workers alive: once its runtime has been
/// shut down (dropped), [`try_spawn`](Handle::try_spawn) returns
/// [`SpawnErrorKind::ShuttingDown`](crate::SpawnErrorKind::ShuttingDown),
/// and [`spawn`](Handle::spawn) a handle of a fiber cancelled at once.
///
/// ```
/// use numafiber::{fiber, runtime::Handle, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let v = rt.block_on(|| {
///     let h = Handle::current(); // the runtime running this fiber
///     let t = std::thread::spawn(move || h.spawn(|| 5).join().unwrap());
///     t.join().unwrap()
/// });
/// assert_eq!(v, 5);
/// ```
#[derive(Clone)]
pub struct Handle {
    shared: Arc<Shared>,
}

impl fmt::Debug for Handle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Handle")
            .field("workers", &self.shared.workers.len())
            .field("shut_down", &self.shared.is_shutting_down())
            .finish()
    }
}

impl Handle {
    /// The handle of the runtime whose fiber calls it.
    ///
    /// # Panics
    /// Outside a fiber (on a plain thread); use [`Handle::try_current`]
    /// for an `Option`.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(1).build().unwrap();
    /// let workers = rt.block_on(|| numafiber::runtime::Handle::current().workers());
    /// assert_eq!(workers, 1);
    /// ```
    pub fn current() -> Handle {
        Handle::try_current().unwrap_or_else(|| {
            panic!("runtime::Handle::current() called outside a fiber: use Runtime::handle() on plain threads")
        })
    }

    /// The handle of the calling fiber's runtime, `None` on a plain thread.
    ///
    /// ```
    /// assert!(numafiber::runtime::Handle::try_current().is_none());
    /// ```
    pub fn try_current() -> Option<Handle> {
        context::current_task_and_shared().map(|(_, shared)| Handle { shared })
    }

    /// Spawn a fiber on the runtime, from any thread or fiber; it is placed
    /// by the policy ([`Runtime::spawn`]). While the runtime shuts down,
    /// or once it has shut down, the fiber is cancelled at once, as with
    /// [`fiber::spawn`](crate::fiber::spawn): its closure is dropped unrun
    /// and its join reports [`is_cancelled()`](crate::JoinError::is_cancelled);
    /// [`Handle::try_spawn`] returns
    /// [`SpawnErrorKind::ShuttingDown`](crate::SpawnErrorKind::ShuttingDown)
    /// instead.
    ///
    /// # Panics
    /// As [`Runtime::spawn`]: in a `fork()`ed child, or for a closure too
    /// large for the stack; [`Handle::try_spawn`] returns these as errors.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.handle();
    /// assert_eq!(h.spawn(|| 1).join().unwrap(), 1);
    /// drop(rt);
    /// assert!(h.spawn(|| 2).join().unwrap_err().is_cancelled());
    /// ```
    #[track_caller]
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn::spawn_on(&self.shared, f, SpawnOpts::infallible()).unwrap_or_else(|e| panic!("{e}"))
    }

    /// [`spawn`](Handle::spawn) with the error as a value.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.handle();
    /// drop(rt);
    /// let e = h.try_spawn(|| ()).unwrap_err();
    /// assert!(matches!(e.kind(), numafiber::SpawnErrorKind::ShuttingDown));
    /// ```
    #[track_caller]
    pub fn try_spawn<F, T>(&self, f: F) -> Result<JoinHandle<T>, crate::SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn::spawn_on(&self.shared, f, SpawnOpts::default())
    }

    /// Number of worker threads of the runtime.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(2).build().unwrap();
    /// assert_eq!(rt.handle().workers(), 2);
    /// ```
    pub fn workers(&self) -> usize {
        self.shared.workers.len()
    }

    pub(crate) fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }
}

/// Bumped in every child process `fork()` creates (a `pthread_atfork`
/// child handler, registered when the first runtime is built); a runtime
/// remembers the value it was built under.
static FORK_GEN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

extern "C" fn note_fork_in_child() {
    // Async-signal-safe: one atomic add.
    FORK_GEN.fetch_add(1, SeqCst);
}

pub(crate) fn fork_generation() -> u64 {
    FORK_GEN.load(Relaxed)
}

fn register_fork_handler() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        // SAFETY: registers a plain function without captured state; it
        // only touches an atomic, so it is safe in the forked child.
        unsafe { libc::pthread_atfork(None, None, Some(note_fork_in_child)) };
    });
}

/// Destroy a queued or parked fiber during the drain (single thread).
/// Returns whether this call destroyed it.
pub(crate) fn destroy(shared: &Shared, t: &TaskRef) -> bool {
    let Some(was_parked) = t.cancel() else {
        return false;
    };
    if was_parked {
        // SAFETY: a parked task holds one reference to itself, which
        // `PARKED -> DONE` handed to us (`runtime::task`, step 5); `t` keeps
        // the count above zero.
        unsafe { Arc::decrement_strong_count(Arc::as_ptr(t)) };
    }
    t.set_cancelling();
    let prev = context::replace_current_task(&**t);
    // SAFETY: `transition_to_cancelled` gave us the run permission.
    let (coro, entry, registered) = {
        let body = unsafe { t.body() };
        (body.coro.take(), body.entry.take(), t.registered.get())
    };
    // Dropping a suspended coroutine force-unwinds it: destructors run on
    // its own stack, then the stack is unmapped.
    let had_stack = coro.is_some();
    // A panic escaping here (a destructor that panics while an unstarted
    // fiber's closure is dropped) is contained: the drain goes on. A panic
    // *during* the forced unwind of a suspended fiber is a panic while
    // panicking, which Rust turns into an abort before we could see it.
    contain_drop_panic(t.id, move || drop(coro));
    if had_stack
        && shared.stack_mode == crate::runtime::task::stack::StackMode::Slab
        && !crate::runtime::task::stack::canary_intact(t.stack_lo.load(Relaxed))
    {
        // The unwinder ran past the bottom of an unguarded stack.
        crate::runtime::task::overflow::report_canary(t);
    }
    contain_drop_panic(t.id, move || drop(entry));
    // Its fiber-locals (`fiber::local`, rule 3), after everything that
    // could still use them.
    // SAFETY: we hold the run permission and the fiber is gone: no borrow
    // of a value can be alive.
    contain_drop_panic(t.id, || unsafe { crate::runtime::task::locals::clear_slot(&t.locals) });
    context::replace_current_task(prev);
    if registered {
        shared.registry.remove(t.id);
    }
    true
}

fn contain_drop_panic(id: u64, f: impl FnOnce()) {
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        let msg = p
            .downcast_ref::<&str>()
            .copied()
            .or_else(|| p.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("<non-string payload>");
        eprintln!("numafiber: a destructor of fiber {id} panicked during shutdown ({msg}); contained");
    }
}

/// Aborts the process if a panic unwinds through it: scheduler internals
/// must never be left half-updated by an internal bug (user panics are
/// caught per fiber and never reach the worker loop).
pub(crate) struct AbortOnPanic(pub(crate) &'static str);

impl Drop for AbortOnPanic {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!("numafiber: internal error: a panic escaped {}; aborting", self.0);
            std::process::abort();
        }
    }
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shutdown_inner();
    }
}
