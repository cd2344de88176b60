//! [`Builder`]: check the settings, place the workers, build the shared
//! state, start the worker threads.

use std::sync::atomic::{AtomicBool, AtomicI32, Ordering::*};
use std::sync::{mpsc, Arc, OnceLock};

use crossbeam_deque::Worker as Deque;

use super::{context, finish_handed_off_shutdown, register_fork_handler, AbortOnPanic, Runtime};
use crate::policy::{Policy, PolicyOptions, Scheduler, StealChunk};
use crate::runtime::error::{BuildError, BuildErrorKind};
use crate::runtime::shared::Shared;
use crate::runtime::task::job::Runnable;
use crate::runtime::task::stack::{StackMode, DEFAULT_STACK_SIZE};
use crate::runtime::worker::WorkerLocal;
use crate::runtime::worker::{Counters, WorkerShared};
use crate::topology::{self, Topology, WorkerSlot};

/// A worker's own queue ends: its LIFO deque, its FIFO ready queue, its
/// LIFO spawn batch.
type WorkerQueues = (Deque<Runnable>, Deque<Runnable>, Deque<Runnable>);

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
    timer_slack: std::time::Duration,
    // The stall monitor's and the dump signal's settings (their setters:
    // `runtime::dump::api`).
    pub(in crate::runtime) stall_threshold: Option<std::time::Duration>,
    pub(in crate::runtime) on_stall: Option<crate::runtime::monitor::StallHook>,
    pub(in crate::runtime) dump_signal: Option<i32>,
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
            timer_slack: std::time::Duration::ZERO,
            stall_threshold: Some(crate::runtime::monitor::DEFAULT_STALL_THRESHOLD),
            on_stall: None,
            dump_signal: None,
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
    /// (default false: best effort, reported in [`Stats`](crate::Stats)).
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
    /// waiting. Neither comes for what the check cannot see: a fiber
    /// parked on a socket, in `block_on_future` or behind a running
    /// `spawn_blocking` / `block_in_place` call (and every fiber waiting
    /// for it), a pending timer, a worker blocked in an OS call or
    /// computing, waits outside `block_on`. See [`crate::sync`], "Deadlock
    /// report", and [`strict_deadlock_detection`](Self::strict_deadlock_detection).
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
    /// Let an idle worker sleep up to `slack` past its earliest timer, so
    /// that the timers due within that window fire together (default 0:
    /// an idle worker wakes at its earliest deadline). A timer then fires
    /// up to `slack` late while its worker is idle (a busy worker fires due
    /// timers between fibers, as always), never early. Where many fibers
    /// sleep and wake at a moderate rate this trades that precision for
    /// CPU per wake-up (BENCHMARKS.md, "Wake storms"); tokio's timers have
    /// 1 ms resolution. At most
    /// [`MAX_TIMER_SLACK`]; more is a [`BuildErrorKind::TimerSlackTooLarge`]
    /// error at [`build`](Self::build).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let rt = numafiber::Runtime::builder().workers(1).timer_slack(Duration::from_millis(1)).build().unwrap();
    /// let t = Instant::now();
    /// rt.block_on(|| numafiber::fiber::sleep(Duration::from_millis(2)));
    /// assert!(t.elapsed() >= Duration::from_millis(2)); // late at most, never early
    /// ```
    pub fn timer_slack(mut self, slack: std::time::Duration) -> Builder {
        self.timer_slack = slack;
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
    pub fn build(mut self) -> Result<Runtime, BuildError> {
        let topology = self.topology.take();
        let (topology, slots, strict) = self.plan(topology)?;
        let nworkers = slots.len();
        // Three queues per worker (run order: `runtime/README.md`): the
        // LIFO deque for spawned fibers and fork-join work (depth first),
        // the FIFO ready queue for fibers made runnable again (wake order),
        // the LIFO spawn batch (children of the running fiber, moved onto
        // the deque in spawn order when it gives control back).
        let deques: Vec<WorkerQueues> =
            (0..nworkers).map(|_| (Deque::new_lifo(), Deque::new_fifo(), Deque::new_lifo())).collect();
        let shared = self.make_shared(topology, &slots, &deques);
        self.start(shared, deques, &slots, strict)
    }

    /// Check the settings and place the workers: the topology, one slot
    /// (CPU, node) per worker, and whether pinning is strict.
    fn plan(&self, topology: Option<Topology>) -> Result<(Topology, Vec<WorkerSlot>, bool), BuildError> {
        if self.workers == Some(0) {
            return Err(BuildError::new(BuildErrorKind::ZeroWorkers));
        }
        register_fork_handler();
        if self.name.contains('\0') {
            return Err(BuildError::new(BuildErrorKind::InvalidName(self.name.clone())));
        }
        self.check_insight()?;
        if self.timer_slack > MAX_TIMER_SLACK {
            return Err(BuildError::new(BuildErrorKind::TimerSlackTooLarge {
                requested: self.timer_slack,
                maximum: MAX_TIMER_SLACK,
            }));
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
        let topology = match topology {
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
            return Err(BuildError::new(BuildErrorKind::TooManyWorkers { workers: nworkers, pus: topology.num_pus() }));
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
        Ok((topology, slots, strict))
    }

    /// The state every worker shares: one entry per worker (its stealer,
    /// wake slots, inboxes, counters) and the policy's scheduler.
    fn make_shared(&self, topology: Topology, slots: &[WorkerSlot], deques: &[WorkerQueues]) -> Arc<Shared> {
        let nworkers = slots.len();
        // Thieves exist only with two workers or more and a stealing policy
        // (`WorkerLocal::steal`); otherwise the wake slots are private.
        let slots_stealable = nworkers >= 2 && self.policy.steals();
        // NLH reads the published queue lengths of the workers of nodes
        // with two workers or more (`worker::shared::PublishedLen`).
        let nodes = slots.iter().map(|s| s.node + 1).max().unwrap_or(0).max(topology.num_nodes());
        let mut node_workers = vec![0usize; nodes];
        for s in slots {
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
                batch_stealer: d.2.stealer(),
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
                published_len: crate::runtime::worker::PublishedLen::new(published(slots[i].node)),
                insight: Default::default(),
            })
            .collect();
        let worker_node: Vec<usize> = slots.iter().map(|s| s.node).collect();
        // Non-worker spawners may be placed by the node of the CPU they run
        // on: map each real CPU to the node of the first worker on it.
        let max_cpu = slots.iter().map(|s| s.cpu).max().unwrap_or(0);
        let mut cpu_node = vec![None; max_cpu + 1];
        for s in slots {
            cpu_node[s.cpu].get_or_insert(s.node);
        }
        let sched = Scheduler::new(self.policy, self.options, worker_node, &topology).with_cpu_node_map(cpu_node);
        Arc::new(Shared::new(workers, sched, self.steal_chunk, self.stack_size, topology, self.stack_mode))
    }

    /// Start one thread per worker; with strict pinning, wait for each
    /// worker's pinning result.
    fn start(
        self,
        shared: Arc<Shared>,
        deques: Vec<WorkerQueues>,
        slots: &[WorkerSlot],
        strict: bool,
    ) -> Result<Runtime, BuildError> {
        let nworkers = slots.len();
        crate::runtime::task::overflow::install_handler();
        crate::runtime::task::stack::side::install_panic_hook();
        shared.deadlock_detection.store(self.deadlock_detection, Relaxed);
        // At most `MAX_TIMER_SLACK` (checked in `plan`): fits in 64 bits.
        shared.timer_slack_ns.store(self.timer_slack.as_nanos() as u64, Relaxed);
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
        Builder::start_insight(rt, &self.name, self.dump_signal, self.stall_threshold, self.on_stall.clone())
    }
}

/// The largest [`Builder::timer_slack`]: an idle worker lets its timers
/// fire at most this late.
///
/// ```
/// assert_eq!(numafiber::runtime::MAX_TIMER_SLACK, std::time::Duration::from_secs(1));
/// ```
pub const MAX_TIMER_SLACK: std::time::Duration = std::time::Duration::from_secs(1);

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
    deque: WorkerQueues,
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
    let local = WorkerLocal::new(i, shared.clone(), deque.0, deque.1, deque.2);
    context::set_worker(&local);
    local.run();
    context::set_worker(std::ptr::null());
    drop(local);
    std::mem::forget(guard);
    finish_handed_off_shutdown(&shared);
    // No fiber runs on this thread any more: the signal stack can go.
    drop(altstack);
}
