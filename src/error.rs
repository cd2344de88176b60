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
            SpawnErrorKind::ShuttingDown => write!(
                f,
                "the runtime is shutting down and accepts no new fibers"
            ),
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
    NoStack(String),
}

impl JoinError {
    pub(crate) fn panicked(p: Box<dyn Any + Send + 'static>) -> JoinError {
        JoinError { repr: JoinRepr::Panicked(p) }
    }
    pub(crate) fn cancelled() -> JoinError {
        JoinError { repr: JoinRepr::Cancelled }
    }
    pub(crate) fn no_stack(msg: String) -> JoinError {
        JoinError { repr: JoinRepr::NoStack(msg) }
    }
    /// The fiber panicked.
    pub fn is_panic(&self) -> bool {
        matches!(self.repr, JoinRepr::Panicked(_))
    }
    /// The fiber never finished: its runtime shut down first, or its stack
    /// could not be allocated.
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
            JoinRepr::Panicked(p) => p
                .downcast_ref::<&'static str>()
                .copied()
                .or_else(|| p.downcast_ref::<String>().map(|s| s.as_str())),
            _ => None,
        }
    }
    /// Re-raise: resume the panic, or panic with the cancellation message.
    pub(crate) fn resume(self) -> ! {
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
            JoinRepr::Cancelled => write!(
                f,
                "the fiber was cancelled because its runtime shut down before it finished"
            ),
            JoinRepr::NoStack(m) => write!(
                f,
                "the fiber never ran: its stack could not be allocated ({m}); lower the stack \
                 size, or check the process's address-space limit (ulimit -v)"
            ),
        }
    }
}

impl std::error::Error for JoinError {}
