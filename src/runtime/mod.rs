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
//!    shutdown, waiting: cooperative scheduling cannot preempt it.
//! 2. Each worker leaves its loop and moves every fiber of its deque and
//!    yield queue into its inbox (`hand_back_queues`), drops its timers,
//!    its task pool (finished fibers only, `fiber::task_pool`) and its
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

pub(crate) mod context;
pub(crate) mod deadlock;
pub(crate) mod error;
pub(crate) mod io;
pub(crate) mod park;
pub(crate) mod shared;
pub(crate) mod spawn;
pub(crate) mod task;
pub(crate) mod wait;
pub(crate) mod worker;
#[cfg(test)]
mod probe_tests;
#[cfg(test)]
mod held_child_tests;
#[cfg(test)]
mod test_support;

// The door: what code outside the engine (fiber/, sync/, net/, graph/)
// uses to spawn, park, wake and ask about the running fiber. Nothing else
// of the engine is meant to be reached from outside this folder.
pub(crate) use context::{current_cannot_suspend, set_wait_reason};
pub(crate) use park::{park, park_until, sleep, yield_after_failed_try, yield_now, Waiter};
pub(crate) use spawn::{join, spawn_current, spawn_on, spawn_unchecked, SpawnOpts};
pub(crate) use task::join::wait_child;

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

/// The running fiber's task and its runtime; `None` off a fiber.
pub(crate) fn current_fiber_and_handle() -> Option<(TaskRef, Handle)> {
    context::current_task_and_shared().map(|(t, shared)| (t, Handle { shared }))
}

/// Workers of the running fiber's runtime; `None` off a fiber.
pub(crate) fn current_workers() -> Option<usize> {
    context::current_task_and_shared().map(|(_, s)| s.workers.len())
}

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicUsize, Ordering::*};

use std::sync::{mpsc, Arc, OnceLock};
use std::thread::JoinHandle as ThreadHandle;

use crossbeam_deque::Worker as Deque;

use crate::runtime::error::{BuildError, BuildErrorKind};
use crate::runtime::task::stack::{StackMode, DEFAULT_STACK_SIZE};
use crate::runtime::task::job::Runnable;
use crate::runtime::task::TaskRef;
use crate::runtime::task::join::JoinHandle;
use crate::policy::{Policy, PolicyOptions, Scheduler, StealChunk};
use crate::runtime::shared::{Counters, Shared, WorkerShared};
use crate::topology::{self, Topology};
use crate::runtime::worker::WorkerLocal;

/// Configures and builds a [`Runtime`].
///
/// ```
/// use numafiber::{Policy, Runtime, Topology};
/// let rt = Runtime::builder()
///     .workers(2)
///     .topology(Topology::uniform(2, 1))
///     .policy(Policy::RandomSteal)
///     .build()
///     .unwrap();
/// assert_eq!(rt.block_on(|| 6 * 7), 42);
/// ```
#[derive(Debug, Clone)]
pub struct Builder {
    workers: Option<usize>,
    topology: Option<Topology>,
    policy: Policy,
    options: PolicyOptions,
    stack_size: usize,
    pin_workers: bool,
    strict_pinning: bool,
    steal_chunk: StealChunk,
    name: String,
    stack_mode: StackMode,
    deadlock_detection: bool,
    strict_deadlock: bool,
}

impl Default for Builder {
    fn default() -> Self {
        Builder {
            workers: None,
            topology: None,
            policy: Policy::default(),
            options: PolicyOptions::default(),
            stack_size: DEFAULT_STACK_SIZE,
            pin_workers: true,
            strict_pinning: false,
            steal_chunk: StealChunk::Half,
            name: "numafiber".into(),
            stack_mode: StackMode::Guarded,
            deadlock_detection: true,
            strict_deadlock: false,
        }
    }
}

impl Builder {
    /// A builder with the defaults of [`Runtime::new`].
    pub fn new() -> Builder {
        Builder::default()
    }
    /// Number of worker threads (default: one per PU of the topology; a
    /// detected topology only has the PUs the process CPU affinity allows).
    /// At most [`max_workers`] of the topology: more is a
    /// [`BuildErrorKind::WorkerLimit`] error at [`build`](Self::build).
    ///
    /// ```
    /// use numafiber::{BuildErrorKind, Runtime, Topology};
    /// let e = Runtime::builder().workers(100_000).topology(Topology::uniform(1, 2)).build().unwrap_err();
    /// assert_eq!(e.kind(), &BuildErrorKind::WorkerLimit { workers: 100_000, limit: 1024 });
    /// ```
    pub fn workers(mut self, n: usize) -> Builder {
        self.workers = Some(n);
        self
    }
    /// The topology the policies see (default: [`Topology::detect`]).
    pub fn topology(mut self, t: Topology) -> Builder {
        self.topology = Some(t);
        self
    }
    /// The scheduling policy (default: [`Policy::Nlh`]).
    pub fn policy(mut self, p: Policy) -> Builder {
        self.policy = p;
        self
    }
    /// The policy switches that go beyond the thesis.
    pub fn policy_options(mut self, o: PolicyOptions) -> Builder {
        self.options = o;
        self
    }
    /// Default fiber stack size in bytes (default
    /// [`crate::runtime::task::stack::DEFAULT_STACK_SIZE`], 256 KiB; from
    /// [`crate::fiber::MIN_STACK_SIZE`], 16 KiB, to
    /// [`crate::fiber::MAX_STACK_SIZE`]; `build` returns
    /// `BuildErrorKind::StackTooSmall` / `StackTooLarge` outside). Stacks
    /// are committed lazily: a fiber costs the pages it touches, not this
    /// size (see [`crate::fiber`], "Stacks").
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.stack_size = bytes;
        self
    }
    /// Pin each worker to its processing unit (default true).
    pub fn pin_workers(mut self, pin: bool) -> Builder {
        self.pin_workers = pin;
        self
    }
    /// Fail the build when a worker cannot have a PU of its own (more
    /// workers than PUs: [`BuildErrorKind::TooManyWorkers`]; a topology that
    /// is not this machine mapped onto fewer allowed CPUs than workers:
    /// [`BuildErrorKind::SharedPu`]), would be pinned outside the process
    /// CPU affinity ([`BuildErrorKind::CpuNotAllowed`]), or cannot be pinned
    /// (default false: best effort, reported in [`Stats`]).
    pub fn strict_pinning(mut self, strict: bool) -> Builder {
        self.strict_pinning = strict;
        self
    }
    /// How much a thief takes from its victim (default half).
    pub fn steal_chunk(mut self, c: StealChunk) -> Builder {
        self.steal_chunk = c;
        self
    }
    /// Carve fiber stacks from large slabs without guard pages. Each stack
    /// gets a canary word at its bottom, checked every time its fiber
    /// switches out; a damaged canary aborts with an overflow report. The
    /// minimum stack size drops to
    /// [`MIN_SLAB_STACK_SIZE`](crate::fiber::MIN_SLAB_STACK_SIZE).
    ///
    /// Deprecated: it was the only way to have a million fibers alive while
    /// guarded stacks cost two memory mappings each. The default guarded
    /// slab stacks now hold a million parked fibers with less memory
    /// (measured 4.5 KiB of RSS per parked fiber against 6.6 KiB for 6 KiB
    /// unguarded stacks, `tests/stacks.rs` and `tests/million.rs`) at the
    /// same spawn + join cost (2,590 against 2,586 instructions under
    /// callgrind, `examples/spawn_join_count.rs`), and they catch overflows.
    ///
    /// # Safety
    /// Without a guard page an overflowing fiber writes into the stack below
    /// its own before the canary check notices; the caller promises its
    /// fibers stay within their stack size. Unbounded recursion in
    /// particular usually runs off the slab into unmapped memory and ends
    /// in a bare SIGSEGV, with no report naming the fiber (the canary is
    /// never checked); develop recursive code on guarded stacks.
    ///
    /// ```
    /// # #![allow(deprecated)]
    /// use numafiber::{fiber, Runtime};
    /// // SAFETY: these fibers use a few hundred bytes of stack.
    /// let rt = unsafe { Runtime::builder().workers(1).stack_size(16 << 10).unguarded_stacks() }.build().unwrap();
    /// assert_eq!(rt.block_on(|| fiber::await_fiber(fiber::spawn(|| 5))), 5);
    /// ```
    #[deprecated(note = "the default guarded slab stacks hold a million fibers with less memory and catch \
                         overflows; remove the call")]
    pub unsafe fn unguarded_stacks(mut self) -> Builder {
        self.stack_mode = StackMode::Slab;
        self
    }
    /// Let [`Runtime::block_on`] report deadlocks (default true): it
    /// panics with a report ("all fibers are asleep - deadlock!") when
    /// every fiber of every runtime is parked on a sync primitive or a
    /// join, no timer or I/O is pending, the fiber it waits for is one of
    /// them, **and no other thread exists** that could still wake one; when
    /// only the last condition fails (a completion thread, a busy second
    /// runtime) it prints the same report once as a warning and keeps
    /// waiting. See [`crate::sync`], "Deadlock report", and
    /// [`strict_deadlock_detection`](Self::strict_deadlock_detection).
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(1).deadlock_detection(false).build().unwrap();
    /// assert_eq!(rt.block_on(|| 1), 1);
    /// ```
    pub fn deadlock_detection(mut self, on: bool) -> Builder {
        self.deadlock_detection = on;
        self
    }
    /// Panic as soon as this runtime alone has been quiescent for about
    /// 100 ms (every fiber parked on a sync primitive or a join, no timer
    /// pending, the `block_on` root among them), even when another thread
    /// or runtime could still wake a fiber (default false). This was the
    /// default rule before the proof of [`deadlock_detection`](Self::deadlock_detection);
    /// use it in tests that must fail fast, never with completion threads.
    ///
    /// ```
    /// use std::panic::{catch_unwind, AssertUnwindSafe};
    /// let rt = numafiber::Runtime::builder().workers(1).strict_deadlock_detection(true).build().unwrap();
    /// let e = numafiber::sync::Event::new();
    /// let r = catch_unwind(AssertUnwindSafe(|| rt.block_on(|| e.wait()))); // nobody sets it
    /// let msg = r.unwrap_err().downcast::<String>().unwrap();
    /// assert!(msg.contains("all fibers are asleep - deadlock!"));
    /// ```
    pub fn strict_deadlock_detection(mut self, strict: bool) -> Builder {
        self.strict_deadlock = strict;
        self
    }
    /// Prefix of the worker thread names (default `numafiber`). A name
    /// with a NUL byte is a [`BuildErrorKind::InvalidName`] error at
    /// [`build`](Self::build).
    ///
    /// ```
    /// use numafiber::{BuildErrorKind, Runtime};
    /// let e = Runtime::builder().workers(1).name("a\0b").build().unwrap_err();
    /// assert!(matches!(e.kind(), BuildErrorKind::InvalidName(_)));
    /// ```
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.name = name.into();
        self
    }

    /// Start the workers.
    ///
    /// # Errors
    /// A [`BuildError`] whose [`kind`](BuildError::kind) says which setting
    /// was wrong: zero workers or more than [`max_workers`], a stack below
    /// the minimum, an invalid topology, a thread name with a NUL byte,
    /// strict pinning that cannot be honoured, or a thread the OS refused.
    pub fn build(self) -> Result<Runtime, BuildError> {
        if self.workers == Some(0) {
            return Err(BuildError::new(BuildErrorKind::ZeroWorkers));
        }
        register_fork_handler();
        if self.name.contains('\0') {
            return Err(BuildError::new(BuildErrorKind::InvalidName(self.name)));
        }
        match crate::runtime::task::stack::check_size(self.stack_size, self.stack_mode) {
            Ok(()) => {}
            Err(crate::runtime::task::stack::SizeError::TooSmall { minimum }) => {
                return Err(BuildError::new(BuildErrorKind::StackTooSmall { requested: self.stack_size, minimum }));
            }
            Err(crate::runtime::task::stack::SizeError::TooLarge { maximum }) => {
                return Err(BuildError::new(BuildErrorKind::StackTooLarge { requested: self.stack_size, maximum }));
            }
        }
        let topology = match self.topology {
            Some(t) => t,
            None => Topology::detect()?,
        };
        topology.validate()?;
        let nworkers = self.workers.unwrap_or_else(|| topology.num_pus());
        let limit = max_workers(&topology);
        if nworkers > limit {
            return Err(BuildError::new(BuildErrorKind::WorkerLimit { workers: nworkers, limit }));
        }
        let strict = self.strict_pinning && self.pin_workers;
        if strict && nworkers > topology.num_pus() {
            return Err(BuildError::new(BuildErrorKind::TooManyWorkers {
                workers: nworkers,
                pus: topology.num_pus(),
            }));
        }
        let slots = topology.plan_workers(nworkers, strict)?;
        if strict {
            let allowed = topology::allowed_cpus();
            if let Some((worker, s)) = slots.iter().enumerate().find(|(_, s)| !allowed.contains(&s.cpu)) {
                return Err(BuildError::new(BuildErrorKind::CpuNotAllowed { worker, cpu: s.cpu, allowed }));
            }
            // A topology that is not this machine is mapped onto the CPUs
            // the process may use; with fewer of them than workers, two
            // workers would share one.
            let mut first_on = std::collections::HashMap::with_capacity(slots.len());
            for (worker, s) in slots.iter().enumerate() {
                if let Some(&shares_with) = first_on.get(&s.cpu) {
                    return Err(BuildError::new(BuildErrorKind::SharedPu {
                        worker,
                        shares_with,
                        cpu: s.cpu,
                        cpus: topology::real_cpus(),
                    }));
                }
                first_on.insert(s.cpu, worker);
            }
        }
        // Two queues per worker (run order: `worker/README.md`): the LIFO
        // deque for spawned fibers and fork-join work (depth first), the
        // FIFO ready queue for fibers made runnable again (wake order).
        let deques: Vec<(Deque<Runnable>, Deque<Runnable>)> =
            (0..nworkers).map(|_| (Deque::new_lifo(), Deque::new_fifo())).collect();
        // Thieves exist only with two workers or more and a stealing policy
        // (`WorkerLocal::steal`); otherwise the wake slots are private.
        let slots_stealable = nworkers >= 2 && self.policy.steals();
        // NLH reads the published queue lengths of the workers of nodes
        // with two workers or more (`shared::PublishedLen`).
        let nodes = slots.iter().map(|s| s.node + 1).max().unwrap_or(0).max(topology.num_nodes());
        let mut node_workers = vec![0usize; nodes];
        for s in &slots {
            node_workers[s.node] += 1;
        }
        let published = |node: usize| self.policy == Policy::Nlh && node_workers[node] >= 2;
        let workers: Box<[WorkerShared]> = deques
            .iter()
            .enumerate()
            .map(|(i, d)| WorkerShared {
                index: i,
                slot: slots[i],
                stealer: d.0.stealer(),
                ready_stealer: d.1.stealer(),
                batched: AtomicUsize::new(0),
                wake_slot: crate::runtime::worker::wake_slot::WakeSlot::new(slots_stealable),
                held: crate::runtime::worker::wake_slot::WakeSlot::new(true),
                inbox: Default::default(),
                pinned_inbox: Default::default(),
                sleeper: crate::runtime::worker::idle::Sleeper::new(),
                thread: OnceLock::new(),
                tid: AtomicI32::new(0),
                pinned_ok: AtomicBool::new(false),
                counters: Counters::default(),
                timers: crate::runtime::worker::timers::WorkerTimers::new(),
                poll_flag: crate::runtime::io::driver::PollFlag::new(),
                reactor_waker: OnceLock::new(),
                published_len: crate::runtime::shared::PublishedLen::new(published(slots[i].node)),
            })
            .collect();
        let worker_node: Vec<usize> = slots.iter().map(|s| s.node).collect();
        // Non-worker spawners may be placed by the node of the CPU they run
        // on: map each real CPU to the node of the first worker on it.
        let max_cpu = slots.iter().map(|s| s.cpu).max().unwrap_or(0);
        let mut cpu_node = vec![None; max_cpu + 1];
        for s in &slots {
            cpu_node[s.cpu].get_or_insert(s.node);
        }
        let sched = Scheduler::new(self.policy, self.options, worker_node, &topology).with_cpu_node_map(cpu_node);
        let shared = Arc::new(Shared::new(
            workers,
            sched,
            self.steal_chunk,
            self.stack_size,
            topology,
            self.stack_mode,
        ));
        crate::runtime::task::overflow::install_handler();
        crate::runtime::task::stack::side::install_panic_hook();
        shared.deadlock_detection.store(self.deadlock_detection, Relaxed);
        shared.deadlock.strict.store(self.strict_deadlock, Relaxed);
        // Only strict pinning waits for the workers' pinning results (a
        // channel per runtime otherwise unused).
        let (tx, rx) = if strict {
            let (tx, rx) = mpsc::channel::<(usize, Result<(), String>)>();
            (Some(tx), Some(rx))
        } else {
            (None, None)
        };
        let mut threads = Vec::with_capacity(nworkers);
        for (i, deque) in deques.into_iter().enumerate() {
            let sh = shared.clone();
            let tx = tx.clone();
            let pin = self.pin_workers;
            let spawned = std::thread::Builder::new()
                .name(format!("{}-w{i}", self.name))
                .spawn(move || worker_main(i, sh, deque, pin, tx));
            match spawned {
                Ok(h) => threads.push(h),
                Err(e) => {
                    let rt = Runtime { shared: shared.clone(), threads };
                    drop(rt);
                    return Err(BuildError::new(BuildErrorKind::ThreadSpawn(e.to_string())));
                }
            }
        }
        drop(tx);
        // Only strict pinning needs each worker's pinning result before
        // `build` returns; otherwise the workers start while the caller
        // goes on (about a quarter of a start-up's time). A
        // worker that starts late finds its queue and the shutdown flag as
        // any worker between two checks does; `Stats` waits for them all.
        let mut failure = None;
        if let Some(rx) = rx {
            for _ in 0..nworkers {
                match rx.recv() {
                    Ok((i, Err(reason))) if failure.is_none() => {
                        failure = Some(BuildErrorKind::Pinning { worker: i, cpu: slots[i].cpu, reason });
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        }
        let rt = Runtime { shared, threads };
        if let Some(kind) = failure {
            drop(rt);
            return Err(BuildError::new(kind));
        }
        crate::runtime::deadlock::register_runtime(&rt.shared);
        Ok(rt)
    }
}

/// The floor of [`max_workers`].
pub const MIN_WORKER_LIMIT: usize = 1024;
/// Workers per processing unit [`max_workers`] allows above its floor.
pub const WORKERS_PER_PU_LIMIT: usize = 4;

/// The most workers a runtime on `topology` accepts: the larger of
/// [`MIN_WORKER_LIMIT`] and [`WORKERS_PER_PU_LIMIT`] per PU. Every worker is
/// an OS thread (about 16 KiB resident each, measured by
/// `examples/worker_rss.rs`); its policy state does not grow with the
/// worker count (a few words per NUMA node, see
/// [`ThiefState::heap_bytes`](crate::policy::ThiefState::heap_bytes)), so the
/// bound is on threads, not on a per-worker cost that grows with n.
///
/// ```
/// use numafiber::{runtime::max_workers, Topology};
/// assert_eq!(max_workers(&Topology::uniform(2, 4)), 1024);
/// assert_eq!(max_workers(&Topology::uniform(4, 128)), 2048);
/// ```
pub fn max_workers(topology: &Topology) -> usize {
    MIN_WORKER_LIMIT.max(WORKERS_PER_PU_LIMIT.saturating_mul(topology.num_pus()))
}

fn worker_main(
    i: usize,
    shared: Arc<Shared>,
    deque: (Deque<Runnable>, Deque<Runnable>),
    pin: bool,
    tx: Option<mpsc::Sender<(usize, Result<(), String>)>>,
) {
    let me = &shared.workers[i];
    let _ = me.thread.set(std::thread::current());
    // SAFETY: gettid has no preconditions.
    me.tid.store(unsafe { libc::gettid() }, Relaxed);
    let pinned = if pin { topology::pin_current_thread(me.slot.cpu) } else { Ok(()) };
    me.pinned_ok.store(pin && pinned.is_ok(), Relaxed);
    // Publishes `tid` and `pinned_ok` to `Stats::collect` (Acquire there).
    shared.started.fetch_add(1, Release);
    if let Some(tx) = tx {
        let _ = tx.send((i, pinned));
    }
    let altstack = crate::runtime::task::overflow::install_altstack();
    let guard = AbortOnPanic("the worker loop");
    let local = WorkerLocal::new(i, shared.clone(), deque.0, deque.1);
    context::set_worker(&local);
    local.run();
    context::set_worker(std::ptr::null());
    drop(local);
    std::mem::forget(guard);
    finish_handed_off_shutdown(&shared);
    // No fiber runs on this thread any more: the signal stack can go.
    drop(altstack);
}

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
        let h = unsafe { spawn::spawn_unchecked(&shared, f, SpawnOpts::default()) }
            .unwrap_or_else(|e| panic!("{e}"));
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

    /// Spawn a fiber from any thread; it is placed by the policy.
    ///
    /// # Panics
    /// When [`fiber::Builder::spawn_on`](crate::fiber::Builder::spawn_on)
    /// would return an error: the runtime is shutting down (from a
    /// destructor that the shutdown drain runs), or this is a `fork()`ed
    /// child. Never because of how many fibers exist: an unstarted fiber
    /// owns no stack and counts against no limit.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(2).build().unwrap();
    /// let h = rt.spawn(|| 1 + 1);
    /// assert_eq!(h.join().unwrap(), 2);
    /// ```
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        spawn::spawn_on(&self.shared, f, SpawnOpts::default())
            .unwrap_or_else(|e| panic!("{e}"))
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
    shared.workers.iter().all(|w| w.inbox.is_empty() && w.pinned_inbox.is_empty())
}

/// Destroy every queued fiber and cancel every queued job, until the
/// queues stay empty.
fn drain_queues(shared: &Shared) {
    loop {
        let mut progressed = false;
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
/// [`SpawnErrorKind::ShuttingDown`](crate::SpawnErrorKind::ShuttingDown).
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
    /// by the policy ([`Runtime::spawn`]).
    ///
    /// # Panics
    /// If the runtime has shut down; [`Handle::try_spawn`] returns the
    /// error instead.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(1).build().unwrap();
    /// assert_eq!(rt.handle().spawn(|| 1).join().unwrap(), 1);
    /// ```
    pub fn spawn<F, T>(&self, f: F) -> JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        self.try_spawn(f).unwrap_or_else(|e| panic!("{e}"))
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
        // `PARKED -> DONE` handed to us (`fiber::task`, step 5); `t` keeps
        // the count above zero.
        unsafe { Arc::decrement_strong_count(Arc::as_ptr(t)) };
    }
    t.cancelling.set(true);
    let prev = context::replace_current_task(&**t);
    // SAFETY: `transition_to_cancelled` gave us the run permission.
    let (coro, entry, registered) = {
        let body = unsafe { t.body() };
        (body.coro.take(), body.entry.take(), body.registered)
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

/// Counters of one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Worker index.
    pub worker: usize,
    /// NUMA node of the worker in the runtime's topology.
    pub node: usize,
    /// Real PU (OS index) the worker was mapped to.
    pub cpu: usize,
    /// Whether pinning to `cpu` succeeded.
    pub pinned: bool,
    /// Linux thread id of the worker.
    pub tid: i32,
    /// Fibers spawned from fibers running on this worker.
    pub spawned: u64,
    /// Fibers that finished on this worker.
    pub executed: u64,
    /// Times a fiber was resumed on this worker.
    pub resumes: u64,
    /// Successful steals from a worker of the same node.
    pub local_steals: u64,
    /// Successful steals from a worker of another node.
    pub remote_steals: u64,
    /// Steal attempts that found nothing.
    pub failed_steals: u64,
    /// Fibers moved here by steals.
    pub stolen_fibers: u64,
    /// Times a fiber parked on this worker.
    pub parks: u64,
    /// Stacks this worker mapped (fresh `mmap`s, not pool hits).
    pub stacks_mapped: u64,
    /// Joins by a fiber on this worker that ran their own child at once
    /// because nobody had started it yet (the child was queued on another
    /// worker of the node; see [`JoinHandle::join`](crate::fiber::JoinHandle::join)).
    /// A child that had not left this worker yet (its spawner had not given
    /// control back since the spawn: the held-child slot) is simply taken
    /// back. One that was already in the other worker's inbox leaves a
    /// surplus queue entry behind there, which that worker drops without
    /// running anything; [`stolen_fibers`](Self::stolen_fibers) counts such
    /// entries when a steal moves them.
    pub reclaimed: u64,
    /// Fibers spawned on this worker (by its fibers, or as the fiber of a
    /// stolen [`fiber::join`](crate::fiber::join) job) whose control block
    /// reused the memory of a finished fiber from this worker's pool
    /// instead of a new allocation. A worker keeps up to 256 finished
    /// fibers' blocks (about 350 bytes each) for that, so the memory of a
    /// fiber started on one worker and finished on another is not freed
    /// across threads (which contends on the allocator's locks).
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     for i in 0..10 {
    ///         assert_eq!(fiber::spawn(move || i).join().unwrap(), i);
    ///     }
    /// });
    /// // The first child's block came from the allocator; each later one
    /// // reuses the block of the child joined before it.
    /// assert_eq!(rt.stats().workers[0].tasks_reused, 9);
    /// ```
    pub tasks_reused: u64,
    /// Timers in this worker's heap (sleeps and timed waits), as last
    /// published by the worker. Includes stale ones (a timed wait that
    /// ended before its deadline) until the heap is next compacted, which
    /// keeps it within about twice the live timers (at least 64).
    pub pending_timers: usize,
}

/// Counters of one NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// Node index.
    pub node: usize,
    /// Workers on the node.
    pub workers: usize,
    /// Fibers finished on the node.
    pub executed: u64,
    /// Successful steals by this node's workers from the same node.
    pub local_steals: u64,
    /// Successful steals by this node's workers from other nodes.
    pub remote_steals: u64,
    /// Failed steal attempts by this node's workers.
    pub failed_steals: u64,
    /// Fibers placed on this node by the placement policy
    /// ([`Scheduler::placements`](crate::policy::Scheduler::placements):
    /// counted per spawner and summed, exact once spawning has stopped).
    pub placements: u64,
    /// The placement policy's workload count of the node
    /// ([`Scheduler::node_workload`](crate::policy::Scheduler::node_workload)).
    pub workload: i64,
}

/// A snapshot of a runtime's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Fibers spawned (from fibers and from other threads).
    pub spawned: u64,
    /// Fibers finished.
    pub completed: u64,
    /// Successful same-node steals.
    pub local_steals: u64,
    /// Successful cross-node steals.
    pub remote_steals: u64,
    /// Steal attempts that found nothing.
    pub failed_steals: u64,
    /// Per worker.
    pub workers: Vec<WorkerStats>,
    /// Per node of the topology.
    pub nodes: Vec<NodeStats>,
    /// The policy.
    pub policy: Policy,
    /// The topology's description.
    pub topology: String,
    /// The topology is not this machine: its logical PUs were mapped onto
    /// the real PUs round-robin and pinning is best effort.
    pub mapped_onto_real_pus: bool,
    /// The topology had no distance matrix: 10 local / 20 remote is used.
    pub default_distances: bool,
    /// Socket system calls made by this runtime's fibers (`numafiber::net`)
    /// that returned `WouldBlock`: the wasted ones. A socket known to be
    /// drained (a call said `WouldBlock` and no readiness event came since)
    /// is not tried again before the fiber waits, so this stays at or
    /// below one per wait.
    pub io_would_block: u64,
}

impl Stats {
    fn collect(shared: &Shared) -> Stats {
        // Every worker's thread id and pinning result, once it started
        // (`build` does not wait for that unless pinning is strict).
        // (In a forked child the workers are the parent's: do not wait.)
        while shared.started.load(Acquire) < shared.workers.len() && !shared.in_forked_child() {
            std::thread::yield_now();
        }
        let workers: Vec<WorkerStats> = shared
            .workers
            .iter()
            .map(|w| {
                let c = &w.counters;
                WorkerStats {
                    worker: w.index,
                    node: w.slot.node,
                    cpu: w.slot.cpu,
                    pinned: w.pinned_ok.load(Relaxed),
                    tid: w.tid.load(Relaxed),
                    spawned: c.spawned.load(Relaxed),
                    executed: c.completed.load(Relaxed),
                    resumes: c.resumes.load(Relaxed),
                    local_steals: c.local_steals.load(Relaxed),
                    remote_steals: c.remote_steals.load(Relaxed),
                    failed_steals: c.failed_steals.load(Relaxed),
                    stolen_fibers: c.stolen_fibers.load(Relaxed),
                    parks: c.parks.load(Relaxed),
                    stacks_mapped: c.stacks_mapped.load(Relaxed),
                    reclaimed: c.reclaimed.load(Relaxed),
                    tasks_reused: c.tasks_reused.load(Relaxed),
                    pending_timers: w.timers.len(),
                }
            })
            .collect();
        let nodes = (0..shared.topology.nodes().len())
            .map(|n| {
                let ws = workers.iter().filter(|w| w.node == n);
                let mut s = NodeStats {
                    node: n,
                    workers: 0,
                    executed: 0,
                    local_steals: 0,
                    remote_steals: 0,
                    failed_steals: 0,
                    placements: shared.sched.placements(n),
                    workload: shared.sched.node_workload(n),
                };
                for w in ws {
                    s.workers += 1;
                    s.executed += w.executed;
                    s.local_steals += w.local_steals;
                    s.remote_steals += w.remote_steals;
                    s.failed_steals += w.failed_steals;
                }
                s
            })
            .collect();
        Stats {
            spawned: workers.iter().map(|w| w.spawned).sum::<u64>() + shared.foreign_spawned.load(Relaxed),
            completed: workers.iter().map(|w| w.executed).sum(),
            local_steals: workers.iter().map(|w| w.local_steals).sum(),
            remote_steals: workers.iter().map(|w| w.remote_steals).sum(),
            failed_steals: workers.iter().map(|w| w.failed_steals).sum(),
            workers,
            nodes,
            policy: shared.sched.policy(),
            topology: shared.topology.description().to_string(),
            mapped_onto_real_pus: !shared.topology.is_this_machine(),
            default_distances: !shared.topology.has_distance_matrix(),
            io_would_block: shared.reactor.get().map_or(0, |r| r.would_block()),
        }
    }

    /// Remote steals over all successful steals (0 when none).
    pub fn remote_steal_ratio(&self) -> f64 {
        let all = self.local_steals + self.remote_steals;
        if all == 0 {
            0.0
        } else {
            self.remote_steals as f64 / all as f64
        }
    }
}
