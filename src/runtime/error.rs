//! Typed errors of the public API. Each says what was wrong and how to fix it.

use std::any::Any;
use std::fmt;

use crate::topology::TopologyError;

/// Why [`crate::runtime::Builder::build`] refused to build a runtime.
#[derive(Debug)]
pub struct BuildError {
    kind: BuildErrorKind,
}

/// The kind of a [`BuildError`], for matching in code and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum BuildErrorKind {
    /// `workers(0)` was requested.
    ZeroWorkers,
    /// More workers than PUs while strict pinning was asked for.
    TooManyWorkers {
        /// Workers requested.
        workers: usize,
        /// PUs in the topology.
        pus: usize,
    },
    /// The default stack size is below the minimum.
    StackTooSmall {
        /// Requested size in bytes.
        requested: usize,
        /// Smallest accepted size in bytes.
        minimum: usize,
    },
    /// The default stack size is above the maximum.
    StackTooLarge {
        /// Requested size in bytes.
        requested: usize,
        /// Largest accepted size in bytes ([`crate::fiber::MAX_STACK_SIZE`]).
        maximum: usize,
    },
    /// The timer slack is above [`MAX_TIMER_SLACK`](crate::runtime::MAX_TIMER_SLACK).
    TimerSlackTooLarge {
        /// Requested slack.
        requested: std::time::Duration,
        /// Largest accepted slack.
        maximum: std::time::Duration,
    },
    /// The topology was invalid.
    Topology(TopologyError),
    /// A worker could not be pinned to its processing unit (strict pinning).
    Pinning {
        /// Worker index.
        worker: usize,
        /// OS index of the PU.
        cpu: usize,
        /// What the OS said.
        reason: String,
    },
    /// The OS refused to start a worker thread.
    ThreadSpawn(String),
    /// More workers than the runtime accepts (see
    /// [`max_workers`](crate::runtime::max_workers)).
    WorkerLimit {
        /// Workers requested.
        workers: usize,
        /// The most this runtime accepts.
        limit: usize,
    },
    /// The thread name prefix given to
    /// [`Builder::name`](crate::runtime::Builder::name) contains a NUL byte.
    InvalidName(String),
    /// Strict pinning would pin a worker to a PU outside the process CPU
    /// affinity (`taskset`, `sched_setaffinity`, cgroup cpusets).
    CpuNotAllowed {
        /// Worker index.
        worker: usize,
        /// OS index of the PU it was planned on.
        cpu: usize,
        /// The PUs the process may run on.
        allowed: Vec<usize>,
    },
    /// Strict pinning could not give each worker a processing unit of its
    /// own: the topology is not this machine and its PUs are mapped onto
    /// fewer CPUs than there are workers (the CPUs the process may use), so
    /// two workers would be pinned to the same CPU.
    SharedPu {
        /// The later of the two workers.
        worker: usize,
        /// The earlier worker planned on the same CPU.
        shares_with: usize,
        /// OS index of the CPU both would be pinned to.
        cpu: usize,
        /// The CPUs the topology's PUs are mapped onto.
        cpus: Vec<usize>,
    },
    /// [`Builder::dump_on_signal`](crate::runtime::Builder::dump_on_signal)
    /// named a signal that cannot be caught, or its handler could not be
    /// installed.
    Signal {
        /// The signal number given.
        signal: i32,
        /// What was wrong.
        reason: String,
    },
    /// [`Builder::stall_threshold`](crate::runtime::Builder::stall_threshold)
    /// was zero.
    ZeroStallThreshold,
    /// [`Builder::dump_on_signal`](crate::runtime::Builder::dump_on_signal)
    /// named `SIGSEGV`, `SIGBUS`, `SIGILL` or `SIGFPE`: the program's own
    /// faults raise them, and on `SIGSEGV` and `SIGBUS` the runtime's
    /// fiber stack-overflow report runs, which a dump handler would stand
    /// in the way of. Use `SIGQUIT`, `SIGUSR1` or `SIGUSR2`.
    FaultSignal {
        /// The signal number given.
        signal: i32,
        /// Its name (`"SIGSEGV"`, ...).
        name: &'static str,
    },
}

impl BuildError {
    pub(crate) fn new(kind: BuildErrorKind) -> BuildError {
        BuildError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &BuildErrorKind {
        &self.kind
    }
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            BuildErrorKind::ZeroWorkers => write!(
                f,
                "a runtime needs at least one worker: pass workers(n) with n >= 1, \
                 or leave workers() out to get one worker per processing unit"
            ),
            BuildErrorKind::TooManyWorkers { workers, pus } => write!(
                f,
                "{workers} workers requested but the topology has only {pus} processing units \
                 and strict pinning is on: lower workers() to at most {pus}, or call \
                 strict_pinning(false) to let workers share processing units"
            ),
            BuildErrorKind::StackTooSmall { requested, minimum } => write!(
                f,
                "fiber stack size {requested} bytes is below the minimum of {minimum} bytes: \
                 pass stack_size(n) with n >= {minimum} (or leave it out: 256 KiB, committed lazily)"
            ),
            BuildErrorKind::StackTooLarge { requested, maximum } => write!(
                f,
                "fiber stack size {requested} bytes is above the maximum of {maximum} bytes: \
                 pass stack_size(n) with n <= {maximum} (stacks are committed lazily: the \
                 default of 256 KiB costs only the pages a fiber touches)"
            ),
            BuildErrorKind::TimerSlackTooLarge { requested, maximum } => write!(
                f,
                "timer slack {requested:?} is above the maximum of {maximum:?}: an idle worker \
                 would let its timers fire that late; pass timer_slack(d) with d <= {maximum:?} \
                 (or leave it out: timers fire at their deadline)"
            ),
            BuildErrorKind::Topology(e) => write!(f, "invalid topology: {e}"),
            BuildErrorKind::Pinning { worker, cpu, reason } => write!(
                f,
                "could not pin worker {worker} to cpu {cpu}: {reason}; check the process \
                 affinity (taskset, cgroups cpuset) or build with pin_workers(false) or \
                 strict_pinning(false)"
            ),
            BuildErrorKind::ThreadSpawn(e) => write!(
                f,
                "the OS refused to start a worker thread: {e}; lower workers() or raise the \
                 process thread limit (ulimit -u)"
            ),
            BuildErrorKind::WorkerLimit { workers, limit } => write!(
                f,
                "{workers} workers requested but a runtime accepts at most {limit} (the larger of \
                 {} and {} per processing unit of its topology): every worker is an OS thread \
                 pinned to a PU, so more only oversubscribes the machine; lower workers() to at \
                 most {limit} and spawn more fibers instead",
                crate::runtime::MIN_WORKER_LIMIT,
                crate::runtime::WORKERS_PER_PU_LIMIT
            ),
            BuildErrorKind::InvalidName(name) => write!(
                f,
                "thread name prefix {name:?} contains a NUL byte, which thread names cannot hold: \
                 pass a name() without '\\0'"
            ),
            BuildErrorKind::CpuNotAllowed { worker, cpu, allowed } => write!(
                f,
                "strict pinning would pin worker {worker} to cpu {cpu}, which is outside the CPU \
                 affinity of this process (allowed: {}); run with a wider affinity (taskset, \
                 cgroup cpuset), use Topology::detect() (it only lists allowed PUs), lower \
                 workers(), or call strict_pinning(false)",
                crate::topology::format_cpu_list(allowed)
            ),
            BuildErrorKind::SharedPu { worker, shares_with, cpu, cpus } => write!(
                f,
                "strict pinning could not give each worker its own processing unit: the topology \
                 is not this machine, its PUs are mapped onto the {} CPU(s) this process may use \
                 ({}), so workers {shares_with} and {worker} would both be pinned to cpu {cpu}; \
                 lower workers() to at most {}, run with a wider CPU affinity (taskset, cgroup \
                 cpuset), or call strict_pinning(false) to let workers share CPUs",
                cpus.len(),
                crate::topology::format_cpu_list(cpus),
                cpus.len()
            ),
            BuildErrorKind::Signal { signal, reason } => write!(
                f,
                "cannot dump on signal {signal}: {reason}; pass a signal that can be caught \
                 (libc::SIGQUIT, libc::SIGUSR1, ...; not SIGKILL or SIGSTOP)"
            ),
            BuildErrorKind::FaultSignal { signal, name } => write!(
                f,
                "cannot dump on signal {signal} ({name}): the program's own faults raise it, and \
                 a dump handler would replace the fiber stack-overflow report (SIGSEGV, SIGBUS) \
                 or return to the faulting instruction; pass libc::SIGQUIT (Ctrl-\\ in a \
                 terminal), libc::SIGUSR1 or libc::SIGUSR2"
            ),
            BuildErrorKind::ZeroStallThreshold => write!(
                f,
                "a stall threshold of zero would report every fiber: pass \
                 stall_threshold(Some(d)) with d > 0 (tens of milliseconds), or None to turn \
                 the monitor off"
            ),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &self.kind {
            BuildErrorKind::Topology(e) => Some(e),
            _ => None,
        }
    }
}

impl From<TopologyError> for BuildError {
    fn from(e: TopologyError) -> BuildError {
        BuildError::new(BuildErrorKind::Topology(e))
    }
}

/// Why [`crate::fiber::Builder::spawn`] could not spawn a fiber.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnError {
    kind: SpawnErrorKind,
}

/// The kind of a [`SpawnError`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SpawnErrorKind {
    /// Called outside any runtime (not inside a fiber of one).
    NoRuntime,
    /// The requested stack size is below the minimum.
    StackTooSmall {
        /// Requested size in bytes.
        requested: usize,
        /// Smallest accepted size in bytes.
        minimum: usize,
    },
    /// `node(n)` named a node the runtime does not have.
    NoSuchNode {
        /// Requested node.
        node: usize,
        /// Nodes that have workers.
        nodes: usize,
    },
    /// `worker(n)` named a worker the runtime does not have.
    NoSuchWorker {
        /// Requested worker.
        worker: usize,
        /// Workers of the runtime.
        workers: usize,
    },
    /// The runtime is shutting down.
    ShuttingDown,
    /// The requested stack size is above the maximum.
    StackTooLarge {
        /// Requested size in bytes.
        requested: usize,
        /// Largest accepted size in bytes ([`crate::fiber::MAX_STACK_SIZE`]).
        maximum: usize,
    },
    /// `worker(w)` and `node(n)` were both given, and worker `w` is not on
    /// node `n`.
    WorkerNotOnNode {
        /// Requested worker.
        worker: usize,
        /// Requested node.
        node: usize,
        /// The node worker `worker` is on.
        worker_node: usize,
    },
    /// The closure (plus its result) is too large for the fiber's stack: it
    /// is moved onto that stack when the fiber starts.
    ClosureTooLarge {
        /// `size_of` the closure plus `size_of` its result, in bytes.
        size: usize,
        /// The fiber's stack size in bytes.
        stack_size: usize,
        /// The largest accepted size for that stack.
        limit: usize,
    },
    /// The runtime was built in another process: this process is a
    /// `fork()`ed copy, in which the runtime's worker threads do not exist.
    ForkedChild,
}

impl SpawnError {
    pub(crate) fn new(kind: SpawnErrorKind) -> SpawnError {
        SpawnError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &SpawnErrorKind {
        &self.kind
    }
}

impl fmt::Display for SpawnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            SpawnErrorKind::NoRuntime => write!(
                f,
                "fiber::spawn called outside a numafiber runtime: call it from inside a fiber, \
                 or use Runtime::spawn / Runtime::block_on from a plain thread"
            ),
            SpawnErrorKind::StackTooSmall { requested, minimum } => write!(
                f,
                "fiber stack size {requested} bytes is below the minimum of {minimum} bytes: \
                 pass stack_size(n) with n >= {minimum}"
            ),
            SpawnErrorKind::NoSuchNode { node, nodes } => write!(
                f,
                "node({node}) requested but the runtime's workers cover nodes 0..{nodes}: \
                 pick a node below {nodes}"
            ),
            SpawnErrorKind::NoSuchWorker { worker, workers } => write!(
                f,
                "worker({worker}) requested but the runtime has {workers} workers: \
                 pick a worker below {workers}"
            ),
            SpawnErrorKind::WorkerNotOnNode { worker, node, worker_node } => write!(
                f,
                "worker({worker}) and node({node}) requested, but worker {worker} is on node \
                 {worker_node}: give only one of them, or a worker of node {node}"
            ),
            SpawnErrorKind::ClosureTooLarge { size, stack_size, limit } => write!(
                f,
                "the fiber's closure and result take {size} bytes, more than the {limit} bytes a \
                 {stack_size} byte stack accepts (the closure is moved onto the fiber's stack): \
                 box large captures (Box<[T]>, Vec) or raise stack_size()"
            ),
            SpawnErrorKind::ForkedChild => write!(
                f,
                "this runtime belongs to the parent of a fork(): its worker threads do not exist \
                 in this child process; build a new Runtime in the child (or exec first)"
            ),
            SpawnErrorKind::ShuttingDown => write!(f, "the runtime is shutting down and accepts no new fibers"),
            SpawnErrorKind::StackTooLarge { requested, maximum } => write!(
                f,
                "fiber stack size {requested} bytes is above the maximum of {maximum} bytes: \
                 pass stack_size(n) with n <= {maximum} (stacks are committed lazily, so the \
                 default of 256 KiB costs only the pages a fiber touches)"
            ),
        }
    }
}

impl std::error::Error for SpawnError {}

/// A fiber did not produce its value: it panicked, or it was cancelled.
pub struct JoinError {
    repr: JoinRepr,
}

pub(crate) enum JoinRepr {
    Panicked(Box<dyn Any + Send + 'static>),
    Cancelled,
    /// `JoinHandle::cancel` (and the set, scope and `when_any` forms).
    CancelledByHandle,
    NoStack(String),
}

impl JoinError {
    pub(crate) fn panicked(p: Box<dyn Any + Send + 'static>) -> JoinError {
        JoinError { repr: JoinRepr::Panicked(p) }
    }
    pub(crate) fn cancelled() -> JoinError {
        JoinError { repr: JoinRepr::Cancelled }
    }
    pub(crate) fn cancelled_by_handle() -> JoinError {
        JoinError { repr: JoinRepr::CancelledByHandle }
    }
    pub(crate) fn no_stack(msg: String) -> JoinError {
        JoinError { repr: JoinRepr::NoStack(msg) }
    }
    /// The fiber panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, JoinRepr::Panicked(_))
    }
    /// The fiber never finished: it was cancelled
    /// ([`JoinHandle::cancel`](crate::fiber::JoinHandle::cancel),
    /// [`JoinSet::cancel_all`](crate::fiber::JoinSet::cancel_all), a
    /// cancelled [`scope`](crate::fiber::scope)), its runtime shut down
    /// first, or its stack could not be allocated.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let e = rt.block_on(|| {
    ///     let h = fiber::spawn(|| fiber::sleep(std::time::Duration::from_secs(60)));
    ///     h.cancel();
    ///     h.join().unwrap_err()
    /// });
    /// assert!(e.is_cancelled());
    /// ```
    pub fn is_cancelled(&self) -> bool {
        !self.is_panic()
    }
    /// The panic payload, if the fiber panicked.
    pub fn into_panic(self) -> Option<Box<dyn Any + Send + 'static>> {
        match self.repr {
            JoinRepr::Panicked(p) => Some(p),
            _ => None,
        }
    }
    /// The panic message, when the payload is a string.
    pub fn panic_message(&self) -> Option<&str> {
        match &self.repr {
            JoinRepr::Panicked(p) => {
                p.downcast_ref::<&'static str>().copied().or_else(|| p.downcast_ref::<String>().map(|s| s.as_str()))
            }
            _ => None,
        }
    }
    /// Re-raise the fiber's failure in the caller (C++: rethrowing the
    /// exception a task stored): resume the fiber's panic with its original
    /// payload, or panic with this error's message when the fiber was
    /// cancelled or never ran.
    ///
    /// # Panics
    /// Always; that is its purpose.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let caught = rt.block_on(|| {
    ///     let e = fiber::spawn(|| -> u32 { std::panic::panic_any(7u32) }).join().unwrap_err();
    ///     // Re-raise in this fiber, catch it one level up.
    ///     std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.resume())).unwrap_err()
    /// });
    /// assert_eq!(caught.downcast_ref::<u32>(), Some(&7));
    /// ```
    pub fn resume(self) -> ! {
        match self.repr {
            JoinRepr::Panicked(p) => std::panic::resume_unwind(p),
            _ => panic!("{self}"),
        }
    }
}

impl fmt::Debug for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "JoinError({self})")
    }
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.repr {
            JoinRepr::Panicked(_) => match self.panic_message() {
                Some(m) => write!(f, "the fiber panicked: {m}"),
                None => write!(f, "the fiber panicked"),
            },
            JoinRepr::Cancelled => {
                write!(f, "the fiber was cancelled because its runtime shut down before it finished")
            }
            JoinRepr::CancelledByHandle => write!(f, "the fiber was cancelled (JoinHandle::cancel)"),
            JoinRepr::NoStack(m) => write!(
                f,
                "the fiber never ran: its stack could not be allocated ({m}); lower the stack \
                 size, or check the process's address-space limit (ulimit -v)"
            ),
        }
    }
}

impl std::error::Error for JoinError {}
