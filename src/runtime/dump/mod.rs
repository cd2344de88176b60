//! Seeing inside a running runtime: [`Dump`] (Go's goroutine dump), taken
//! by [`Runtime::dump`](crate::Runtime::dump), [`Handle::dump`](crate::runtime::Handle::dump),
//! a signal the user names ([`Builder::dump_on_signal`](crate::Builder::dump_on_signal))
//! and the deadlock report.
//!
//! # How to read a dump
//!
//! ```text
//! numafiber dump of runtime "numafiber": 4 fibers listed (1 running, 1 runnable, 2 parked), 0 runnable not listed; 2 workers, 1 node; taken in 0.2 ms
//!
//! node 0: workers [0, 1]; NLH workload 0, placements 4
//! worker 0 (node 0, cpu 0): running fiber 3 for 1.20 s [held]; deque 1, slots 0, inbox 0, pinned 0, timers 1
//! worker 1 (node 0, cpu 1): parked; deque 0, slots 0, inbox 0, pinned 0, timers 0
//!
//! fiber 3 "hog" [running, 1.20 s]:
//!     spawned at examples/dump.rs:41:5
//!     worker 0 (node 0); stack on node 0, 8 KiB touched; age 1.3 s; migrated 0 local, 0 remote
//!
//! fiber 2 "ticker" [parked: sleep until +8 ms]:
//!     waiting at examples/dump.rs:35:13
//!     spawned at examples/dump.rs:33:5
//!     worker 0 (node 0); stack on node 0, 4 KiB touched; age 1.3 s; migrated 0 local, 0 remote
//! ```
//!
//! * The first line counts the fibers listed and those that are queued but
//!   have never parked (not listed one by one: see "What is listed").
//! * A **node** line: the workers on it and its load as the placement
//!   policy sees it (NLH's workload count and its placements so far).
//! * A **worker** line: what it does now (`running fiber N for T`,
//!   `searching`, `parked`), `[held]` when the stall monitor found its fiber
//!   running longer than the threshold, and its queue lengths: the deque,
//!   its two slots (the wake slot and the held-child slot), the inbox
//!   other threads push to, the pinned inbox, and armed timers.
//! * A **fiber** block: `[state]` is `running` (on a worker now),
//!   `runnable` (in a queue, or kept by its worker's private yield queue)
//!   or `parked: <what it waits on>`; `waiting at` is the line of user
//!   code that called the waiting function (`Mutex::lock`, `recv`,
//!   `sleep`, `join`, a socket read...), `spawned at` the line that spawned
//!   it. Then the worker that last ran it and that worker's node, the NUMA
//!   node its stack pages are on and how much of its stack it has touched
//!   (resident pages), its age and how often it moved to another worker
//!   of the same node (local) or of another node (remote).
//!
//! [`Dump::grouped`] folds the fibers by state, wait and call site, with
//! counts: the form to read when there are thousands.
//!
//! # Backtraces of parked fibers
//!
//! While [`Runtime::set_park_backtraces`](crate::Runtime::set_park_backtraces)
//! is on, each wait a fiber begins captures a backtrace, and a parked
//! fiber's block gains
//!
//! ```text
//!     backtrace of the wait:
//!        0: numafiber::runtime::wait::Node::set_wait_reason
//!                  at ./src/runtime/wait.rs:314:13
//!        ...
//!        4: server::read_request
//!                  at ./src/server.rs:88:17
//!        5: server::main::{{closure}}
//!                  at ./src/server.rs:41:29
//!          (the fiber's start in the runtime)
//! ```
//!
//! from the runtime's waiting code down to the fiber's closure (the frames
//! of the capture itself and of the runtime code that starts the fiber are
//! left out; [`FiberDump::backtrace`] has them all). A fiber that began its
//! wait before capture was turned on shows none until it waits again; the
//! trace shown is always the one of the wait the fiber is in (same call
//! site and object). Function names and lines need debug information in
//! the binary.
//!
//! # The `tracing` feature
//!
//! Built with the cargo feature `tracing`, each spawned fiber gets a
//! TRACE-level span `numafiber.fiber` (target `numafiber::fiber`; fields
//! `fiber.id`, `fiber.name`, `worker`, `node`, `spawn.file`,
//! `spawn.line`, `spawn.column`), entered on the thread that runs it and
//! exited before each suspension, with the events `park` (`wait`,
//! `wait.file`, `wait.line`), `yield` and `resume` (`worker`, `migrated`)
//! inside it. Without the feature none of it is compiled.
//!
//! # What is a snapshot and what may be stale
//!
//! A dump is taken while the runtime runs; nothing stops. Each fiber's
//! state, wait and sites are read once, atomically per field, so a fiber
//! may be shown parked while its waker is already queuing it (each line is
//! true at some instant during the dump, not all at the same instant).
//! Worker queue lengths are read one after the other. Each fiber is
//! listed once: one that moved to another worker while the workers were
//! read is shown running on the worker read last, and the worker it left
//! as between fibers. "Running for" and
//! ages are measured by the stall monitor's clock (its sampling period,
//! a quarter of the threshold); without the monitor they are not shown.
//!
//! # What is listed
//!
//! Every fiber that has parked at least once (the runtime registers a
//! fiber when it first parks) and every fiber running on a worker now.
//! A fiber that is queued and has never parked (spawned and not started,
//! or yielding without ever waiting) sits in lock-free queues that other
//! threads cannot walk; registering every spawn would cost the spawn path
//! a lock, so these are counted per worker (the queue lengths) and in the
//! first line, not listed.

mod api;
mod display;
mod grouped;
mod memory;
pub(crate) mod running;
pub(crate) mod signal;
pub(crate) mod trace;
pub(crate) use display::Secs;
#[cfg(feature = "tracing")]
pub(crate) mod fiber_tracing;

use std::fmt;
use std::panic::Location;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::runtime::shared::Shared;
use crate::runtime::task::{self, wait_kind, Task, TaskRef};

pub use grouped::Grouped;

/// A report of every fiber and worker of a runtime (module docs: how to
/// read it), with a Go-style [`Display`](fmt::Display).
///
/// ```
/// use numafiber::{fiber, sync::Event, Runtime};
/// use std::sync::Arc;
/// let rt = Runtime::builder().workers(1).build()?;
/// let ev = Arc::new(Event::new());
/// let e = ev.clone();
/// let h = rt.handle().spawn(move || e.wait());
/// while !rt.dump().fibers().any(|f| f.state() == numafiber::runtime::FiberState::Parked) {
///     std::thread::yield_now();
/// }
/// let d = rt.dump();
/// let f = d.fibers().next().unwrap();
/// assert_eq!(f.wait().unwrap().kind(), numafiber::runtime::WaitKind::Event);
/// println!("{d}");
/// ev.set();
/// h.join().unwrap();
/// # Ok::<(), numafiber::BuildError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Dump {
    runtime: String,
    fibers: Vec<FiberDump>,
    workers: Vec<WorkerDump>,
    nodes: Vec<NodeDump>,
    not_listed: usize,
    took: Duration,
    shut_down: bool,
}

/// One fiber of a [`Dump`].
#[derive(Debug, Clone)]
pub struct FiberDump {
    id: u64,
    name: Option<Arc<str>>,
    state: FiberState,
    wait: Option<Wait>,
    wait_site: Option<&'static Location<'static>>,
    spawn_site: Option<&'static Location<'static>>,
    worker: usize,
    node: usize,
    stack_node: Option<usize>,
    stack_touched: Option<usize>,
    age: Option<Duration>,
    running_for: Option<Duration>,
    migrated: (u32, u32),
    backtrace: Option<Arc<trace::ParkBacktrace>>,
}

/// What a fiber is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum FiberState {
    /// On a worker now.
    Running,
    /// Ready to run: in a queue, or kept by its worker to run next.
    Runnable,
    /// Waiting for something ([`FiberDump::wait`]).
    Parked,
}

impl fmt::Display for FiberState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FiberState::Running => "running",
            FiberState::Runnable => "runnable",
            FiberState::Parked => "parked",
        })
    }
}

/// What a parked fiber waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wait {
    kind: WaitKind,
    object: u64,
    until: Option<Instant>,
}

/// The kind of thing a fiber waits on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum WaitKind {
    /// `JoinHandle::join` / `await_fiber` (the object is the fiber id).
    Join,
    /// `when_any` (the object is the first fiber's id).
    JoinAny,
    /// The end of a `scope`, joining a child (the object is its id).
    Scope,
    /// `JoinSet::join_next`.
    JoinSet,
    /// `Mutex::lock`.
    Mutex,
    /// `Condvar::wait`.
    Condvar,
    /// `RwLock::read`.
    RwLockRead,
    /// `RwLock::write`.
    RwLockWrite,
    /// `Semaphore::acquire`.
    Semaphore,
    /// `Barrier::wait`.
    Barrier,
    /// `WaitGroup::wait`.
    WaitGroup,
    /// `Event::wait`.
    Event,
    /// `AutoResetEvent::wait`.
    AutoResetEvent,
    /// A oneshot `Future::wait`.
    Oneshot,
    /// A channel receive.
    ChannelRecv,
    /// A channel send (bounded channel full).
    ChannelSend,
    /// A blocking `select` over channels ([`Wait::object`] is its first
    /// channel).
    Select,
    /// `fiber::sleep` ([`Wait::until`] is the deadline).
    Sleep,
    /// `fiber::park`, until a `Fiber::unpark`.
    Park,
    /// `fiber::block_on_future`, until the future's waker is called.
    Future,
    /// A socket (`numafiber::net`): readiness for reading.
    SocketRead,
    /// A socket: readiness for writing.
    SocketWrite,
    /// `spawn_blocking` / `block_in_place`: a helper thread runs the call.
    Blocking,
    /// Something this version of the dump does not name.
    Other,
}

impl WaitKind {
    pub(crate) fn from_raw(k: u8) -> Option<WaitKind> {
        use wait_kind as w;
        Some(match k {
            w::NONE => return None,
            w::JOIN => WaitKind::Join,
            w::JOIN_ANY => WaitKind::JoinAny,
            w::SCOPE => WaitKind::Scope,
            w::JOIN_SET => WaitKind::JoinSet,
            w::MUTEX => WaitKind::Mutex,
            w::CONDVAR => WaitKind::Condvar,
            w::RWLOCK_READ => WaitKind::RwLockRead,
            w::RWLOCK_WRITE => WaitKind::RwLockWrite,
            w::SEMAPHORE => WaitKind::Semaphore,
            w::BARRIER => WaitKind::Barrier,
            w::WAITGROUP => WaitKind::WaitGroup,
            w::EVENT => WaitKind::Event,
            w::AUTO_EVENT => WaitKind::AutoResetEvent,
            w::ONESHOT => WaitKind::Oneshot,
            w::CHAN_RECV => WaitKind::ChannelRecv,
            w::CHAN_SEND => WaitKind::ChannelSend,
            w::SELECT => WaitKind::Select,
            w::SLEEP => WaitKind::Sleep,
            w::PARK => WaitKind::Park,
            w::FUTURE => WaitKind::Future,
            w::IO => WaitKind::SocketRead,
            w::IO_WRITE => WaitKind::SocketWrite,
            w::BLOCKING => WaitKind::Blocking,
            _ => WaitKind::Other,
        })
    }

    /// Short human name (`"channel receive"`).
    pub fn as_str(self) -> &'static str {
        match self {
            WaitKind::Join => "join",
            WaitKind::JoinAny => "when_any",
            WaitKind::Scope => "scope end",
            WaitKind::JoinSet => "JoinSet::join_next",
            WaitKind::Mutex => "Mutex lock",
            WaitKind::Condvar => "Condvar wait",
            WaitKind::RwLockRead => "RwLock read",
            WaitKind::RwLockWrite => "RwLock write",
            WaitKind::Semaphore => "Semaphore acquire",
            WaitKind::Barrier => "Barrier wait",
            WaitKind::WaitGroup => "WaitGroup wait",
            WaitKind::Event => "Event wait",
            WaitKind::AutoResetEvent => "AutoResetEvent wait",
            WaitKind::Oneshot => "oneshot wait",
            WaitKind::ChannelRecv => "channel receive",
            WaitKind::ChannelSend => "channel send",
            WaitKind::Select => "select",
            WaitKind::Sleep => "sleep",
            WaitKind::Park => "fiber::park",
            WaitKind::Future => "future",
            WaitKind::SocketRead => "socket read",
            WaitKind::SocketWrite => "socket write",
            WaitKind::Blocking => "blocking call",
            WaitKind::Other => "wait",
        }
    }
}

impl fmt::Display for WaitKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Wait {
    /// The kind of thing waited on.
    pub fn kind(&self) -> WaitKind {
        self.kind
    }

    /// The object: the primitive's (or socket registration's) address, or
    /// a fiber id for joins; 0 where there is none (sleep, blocking call).
    pub fn object(&self) -> u64 {
        self.object
    }

    /// The deadline of a sleep.
    pub fn until(&self) -> Option<Instant> {
        self.until
    }
}

impl fmt::Display for Wait {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind {
            WaitKind::Join | WaitKind::Scope => write!(f, "{} of fiber {}", self.kind, self.object),
            WaitKind::JoinAny => write!(f, "{} (first: fiber {})", self.kind, self.object),
            WaitKind::Sleep => match self.until {
                Some(u) => match u.checked_duration_since(Instant::now()) {
                    Some(left) => write!(f, "sleep, {} left", Secs(left)),
                    None => f.write_str("sleep, due"),
                },
                None => f.write_str("sleep"),
            },
            WaitKind::Blocking => f.write_str("blocking call on a helper thread"),
            WaitKind::Park => f.write_str("fiber::park"),
            WaitKind::Future => f.write_str("block_on_future"),
            k => write!(f, "{k} {:#x}", self.object),
        }
    }
}

/// One worker of a [`Dump`].
#[derive(Debug, Clone)]
pub struct WorkerDump {
    index: usize,
    node: usize,
    cpu: usize,
    activity: WorkerActivity,
    running: Option<u64>,
    running_for: Option<Duration>,
    held: bool,
    deque: usize,
    slots: usize,
    inbox: usize,
    pinned: usize,
    timers: usize,
}

/// What a worker does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerActivity {
    /// Running a fiber.
    Running,
    /// Between fibers, looking for work.
    Searching,
    /// Asleep (no work).
    Parked,
}

/// One NUMA node of a [`Dump`]: its load as the placement policy sees it.
#[derive(Debug, Clone)]
pub struct NodeDump {
    node: usize,
    workers: Vec<usize>,
    workload: i64,
    placements: u64,
}

impl Dump {
    /// Every listed fiber, running ones first, then by id (module docs:
    /// "What is listed").
    pub fn fibers(&self) -> impl Iterator<Item = &FiberDump> {
        self.fibers.iter()
    }

    /// Every worker.
    pub fn workers(&self) -> impl Iterator<Item = &WorkerDump> {
        self.workers.iter()
    }

    /// Every node with workers.
    pub fn nodes(&self) -> impl Iterator<Item = &NodeDump> {
        self.nodes.iter()
    }

    /// Fibers queued that have never parked: counted, not listed.
    pub fn not_listed(&self) -> usize {
        self.not_listed
    }

    /// How long taking the dump took.
    pub fn took(&self) -> Duration {
        self.took
    }

    /// The fibers folded by state, wait and call site, largest groups
    /// first, with counts; at most 60 lines
    /// of groups however many fibers there are.
    ///
    /// ```
    /// # let rt = numafiber::Runtime::builder().workers(1).build()?;
    /// print!("{}", rt.dump().grouped());
    /// # Ok::<(), numafiber::BuildError>(())
    /// ```
    pub fn grouped(&self) -> Grouped<'_> {
        Grouped::new(self)
    }
}

impl FiberDump {
    /// The fiber's id (as in `fiber::current`).
    pub fn id(&self) -> u64 {
        self.id
    }
    /// Its name, if it was given one (`fiber::Builder::name`).
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// Running, runnable or parked.
    pub fn state(&self) -> FiberState {
        self.state
    }
    /// What it waits on, when parked on something the runtime knows.
    pub fn wait(&self) -> Option<&Wait> {
        self.wait.as_ref()
    }
    /// The user code line that called the waiting function.
    pub fn wait_site(&self) -> Option<&'static Location<'static>> {
        self.wait_site
    }
    /// The user code line that spawned it (`None` for fibers the runtime
    /// spawned itself: `block_on`'s root, stolen `join` halves).
    pub fn spawn_site(&self) -> Option<&'static Location<'static>> {
        self.spawn_site
    }
    /// The worker that runs it (for a running fiber: the worker whose
    /// line names it) or last ran it (until it first runs: the worker
    /// placement chose).
    pub fn worker(&self) -> usize {
        self.worker
    }
    /// That worker's NUMA node.
    pub fn node(&self) -> usize {
        self.node
    }
    /// The NUMA node (OS index) its stack's top page is on, when the
    /// kernel says (`None`: no stack yet, or `move_pages` unavailable).
    pub fn stack_node(&self) -> Option<usize> {
        self.stack_node
    }
    /// Bytes of its stack that are resident (touched), by `mincore`.
    pub fn stack_touched(&self) -> Option<usize> {
        self.stack_touched
    }
    /// Time since it was spawned (at the stall monitor's resolution;
    /// `None` without the monitor).
    pub fn age(&self) -> Option<Duration> {
        self.age
    }
    /// For a running fiber: how long its current slice has lasted, at the
    /// monitor's resolution.
    pub fn running_for(&self) -> Option<Duration> {
        self.running_for
    }
    /// How often it moved to another worker of the same node.
    pub fn migrated_local(&self) -> u32 {
        self.migrated.0
    }
    /// How often it moved to a worker of another node.
    pub fn migrated_remote(&self) -> u32 {
        self.migrated.1
    }
    /// For a parked fiber, while the runtime captures park backtraces
    /// ([`Runtime::set_park_backtraces`](crate::Runtime::set_park_backtraces)):
    /// the stack of calls that led to its wait, captured when it began
    /// waiting. `None` when capture is off, or the fiber began its current
    /// wait before capture was turned on.
    pub fn backtrace(&self) -> Option<&std::backtrace::Backtrace> {
        self.backtrace.as_deref().map(|b| &b.trace)
    }
}

impl WorkerDump {
    /// The worker's index.
    pub fn index(&self) -> usize {
        self.index
    }
    /// Its NUMA node (topology index).
    pub fn node(&self) -> usize {
        self.node
    }
    /// The OS CPU it is pinned to.
    pub fn cpu(&self) -> usize {
        self.cpu
    }
    /// What it does.
    pub fn activity(&self) -> WorkerActivity {
        self.activity
    }
    /// The fiber it runs, if any.
    pub fn running(&self) -> Option<u64> {
        self.running
    }
    /// How long that fiber has run without giving control back (monitor
    /// resolution).
    pub fn running_for(&self) -> Option<Duration> {
        self.running_for
    }
    /// The stall monitor found its fiber running past the threshold.
    pub fn held(&self) -> bool {
        self.held
    }
    /// Deque length (stealable).
    pub fn deque(&self) -> usize {
        self.deque
    }
    /// Occupied slots (wake slot and held-child slot).
    pub fn slots(&self) -> usize {
        self.slots
    }
    /// Inbox length (pushes from other threads).
    pub fn inbox(&self) -> usize {
        self.inbox
    }
    /// Pinned inbox length.
    pub fn pinned(&self) -> usize {
        self.pinned
    }
    /// Armed timers.
    pub fn timers(&self) -> usize {
        self.timers
    }
}

impl NodeDump {
    /// The node's topology index.
    pub fn node(&self) -> usize {
        self.node
    }
    /// Its workers.
    pub fn workers(&self) -> &[usize] {
        &self.workers
    }
    /// NLH's workload count for it (0 for policies that keep none).
    pub fn workload(&self) -> i64 {
        self.workload
    }
    /// Fibers placed on it so far.
    pub fn placements(&self) -> u64 {
        self.placements
    }
}

/// The runtime-wide part of the insight machinery (in `Shared::insight`).
pub(crate) struct Insight {
    /// Serializes inspectors (dumps, the monitor) against each other and
    /// against worker threads leaving (`running::retire`): `true` once the
    /// workers are gone.
    pub(crate) inspect: std::sync::Mutex<bool>,
    /// Coarse clock: milliseconds since `origin`, advanced by the stall
    /// monitor at each sample (0 while it never ran). Read by spawns (the
    /// fiber's birth) and dumps (ages).
    pub(crate) clock_ms: std::sync::atomic::AtomicU64,
    pub(crate) origin: Instant,
    /// The stall monitor's shared part.
    pub(crate) monitor: crate::runtime::monitor::MonitorShared,
    /// The runtime's name (for reports).
    pub(crate) name: std::sync::OnceLock<String>,
    /// Backtraces at park points are captured (`trace`).
    pub(crate) traces: trace::Traces,
}

impl Insight {
    pub(crate) fn new() -> Insight {
        Insight {
            inspect: std::sync::Mutex::new(false),
            clock_ms: std::sync::atomic::AtomicU64::new(0),
            origin: Instant::now(),
            monitor: crate::runtime::monitor::MonitorShared::new(),
            name: std::sync::OnceLock::new(),
            traces: trace::Traces::new(),
        }
    }

    /// The coarse clock now (0: not running).
    #[inline]
    pub(crate) fn now_ms(&self) -> u64 {
        self.clock_ms.load(Relaxed)
    }

    /// The coarse clock for a new fiber's `born_ms` (saturating at
    /// `u32::MAX` ms, 49 days).
    #[inline]
    pub(crate) fn born_now(&self) -> u32 {
        self.now_ms().min(u64::from(u32::MAX)) as u32
    }

    /// Advance the coarse clock (monitor thread, and a dump).
    pub(crate) fn tick(&self) -> u64 {
        // +1: 0 means "no clock".
        let ms = self.origin.elapsed().as_millis() as u64 + 1;
        self.clock_ms.fetch_max(ms, Relaxed);
        ms
    }

    /// The age of something born at coarse time `born` (0: unknown).
    fn age(&self, born: u64, now: u64) -> Option<Duration> {
        (born != 0 && now >= born).then(|| Duration::from_millis(now - born))
    }
}

/// The process-wide origin of `deadline_code`.
fn epoch() -> Instant {
    static EPOCH: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// A deadline as a `u64` (nanoseconds after a process-wide origin), for
/// `Task::wait_obj` of a sleep.
pub(crate) fn deadline_code(d: Instant) -> u64 {
    d.saturating_duration_since(epoch()).as_nanos().min(u128::from(u64::MAX)) as u64
}

/// The deadline `deadline_code` made `c` of.
pub(crate) fn deadline_from_code(c: u64) -> Instant {
    epoch() + Duration::from_nanos(c)
}

/// Take a dump of `shared` (module docs).
pub(crate) fn capture(shared: &Arc<Shared>) -> Dump {
    let start = Instant::now();
    let ins = &shared.insight;
    let guard = ins.inspect.lock().unwrap_or_else(|e| e.into_inner());
    let shut_down = *guard;
    let now = if ins.now_ms() != 0 { ins.tick() } else { 0 };
    let mut fibers: Vec<FiberDump> = Vec::new();
    // Each listed fiber's stack (low end, size), beside `fibers`.
    let mut stacks: Vec<(usize, usize)> = Vec::new();
    let (workers, queued) = capture_workers(shared, shut_down, now, &mut fibers, &mut stacks);
    drop(guard);
    let listed_queued = capture_registered(shared, now, &mut fibers, &mut stacks);
    memory::fill(&mut fibers, &stacks, shared.stack_mode);
    attach_backtraces(ins, &mut fibers);
    Dump {
        runtime: ins.name.get().cloned().unwrap_or_default(),
        fibers,
        workers,
        nodes: nodes_of(shared),
        not_listed: queued.saturating_sub(listed_queued),
        took: start.elapsed(),
        shut_down,
    }
}

/// Every worker's line, and the fibers running now (first in `fibers`).
/// Returns the lines and how many queue entries the workers hold.
fn capture_workers(
    shared: &Shared,
    shut_down: bool,
    now: u64,
    fibers: &mut Vec<FiberDump>,
    stacks: &mut Vec<(usize, usize)>,
) -> (Vec<WorkerDump>, usize) {
    let mut workers = Vec::with_capacity(shared.workers.len());
    let mut queued = 0usize;
    let mut running_on = running_fibers(shared, shut_down);
    for (i, w) in shared.workers.iter().enumerate() {
        let running = running_on[i].take();
        let held_since = w.insight.held_since_ms.load(Relaxed);
        let slice_ms = w.insight.slice_start_ms.load(Relaxed);
        let running_for = running
            .as_ref()
            .filter(|_| slice_ms != 0 && now >= slice_ms)
            .map(|_| Duration::from_millis(now - slice_ms));
        let activity = if running.is_some() {
            WorkerActivity::Running
        } else if w.sleeper.is_sleeping() {
            WorkerActivity::Parked
        } else {
            WorkerActivity::Searching
        };
        let slots = usize::from(w.wake_slot.is_occupied()) + usize::from(w.held.is_occupied());
        // The deque with the ready queue and the spawn batch.
        let deque = w.stealer.len() + w.ready_stealer.len() + w.batch_stealer.len();
        let inbox = w.inbox.len();
        let pinned = w.pinned_inbox.len();
        queued += deque + slots + inbox + pinned;
        workers.push(WorkerDump {
            index: i,
            node: w.slot.node,
            cpu: w.slot.cpu,
            activity,
            running: running.as_ref().map(|t| t.id),
            running_for,
            held: held_since != 0 && running.is_some(),
            deque,
            slots,
            inbox,
            pinned,
            timers: w.timers.len(),
        });
        if let Some(t) = running {
            let mut f = fiber_of(shared, &t, FiberState::Running, running_for, now);
            // Where it was seen running (its last worker may have moved on).
            f.worker = i;
            f.node = w.slot.node;
            fibers.push(f);
            stacks.push(stack_of(&t));
        }
    }
    // Fibers a busy poll made ready, not yet taken by any worker.
    queued += shared.io_ready.len();
    (workers, queued)
}

/// The fiber running on each worker, protected (`running::protect`), each
/// fiber on one worker at most. The workers are read one after the other,
/// so a fiber that gives control back on one worker and is resumed on a
/// later one between the two reads is seen on both: it is kept where it
/// was read last, and the worker it left is shown between fibers (which
/// it was, at some instant after its read: module docs, "What is a
/// snapshot"). A fiber runs on one worker at a time, so the later read is
/// the newer one.
fn running_fibers(shared: &Shared, shut_down: bool) -> Vec<Option<TaskRef>> {
    let mut on: Vec<Option<TaskRef>> =
        shared.workers.iter().map(|w| if shut_down { None } else { running::protect(w) }).collect();
    for i in 0..on.len() {
        let Some(t) = &on[i] else { continue };
        if on[i + 1..].iter().flatten().any(|later| Arc::ptr_eq(t, later)) {
            on[i] = None;
        }
    }
    on
}

/// Every registered fiber not running now, in id order, after the running
/// ones `fibers` holds. Returns how many of them were queued (their queue
/// entries were counted with the workers).
fn capture_registered(
    shared: &Shared,
    now: u64,
    fibers: &mut Vec<FiberDump>,
    stacks: &mut Vec<(usize, usize)>,
) -> usize {
    let nrunning = fibers.len();
    let mut queued = 0usize;
    // Read every registered task once, in id order: the ids are sorted
    // beside their places in the snapshot (no task is touched by the
    // sort), and each task's reference is dropped right after it is read
    // (its line is still in cache).
    let mut registered: Vec<Option<TaskRef>> = shared.registry.snapshot().into_iter().map(Some).collect();
    let mut order: Vec<(u64, u32)> =
        registered.iter().enumerate().filter_map(|(i, t)| Some((t.as_ref()?.id, i as u32))).collect();
    order.sort_unstable();
    fibers.reserve(order.len());
    stacks.reserve(order.len());
    for (id, i) in order {
        let Some(t) = registered[i as usize].take() else { continue };
        if fibers[..nrunning].iter().any(|r| r.id == id) {
            continue;
        }
        let state = match t.lifecycle() {
            task::QUEUED => {
                queued += 1;
                FiberState::Runnable
            }
            // Running but not on a worker now: kept by its worker (yield
            // queue, a reclaiming parent) or between our two reads.
            task::RUNNING => FiberState::Runnable,
            task::PARKED => FiberState::Parked,
            _ => continue, // finished meanwhile
        };
        fibers.push(fiber_of(shared, &t, state, None, now));
        stacks.push(stack_of(&t));
    }
    queued
}

/// Park-point backtraces, where capture is on: only a trace of the wait
/// the fiber is in now (`trace`, rules).
fn attach_backtraces(ins: &Insight, fibers: &mut [FiberDump]) {
    if !ins.traces.is_on() {
        return;
    }
    ins.traces.with_map(|map| {
        for f in fibers.iter_mut() {
            let (Some(w), Some(site)) = (f.wait, f.wait_site) else { continue };
            f.backtrace = map
                .get(&f.id)
                .filter(|b| *b.site == *site && (w.kind == WaitKind::Sleep || b.obj == w.object))
                .cloned();
        }
    });
}

/// Each node's workers and load as the policies see it.
fn nodes_of(shared: &Shared) -> Vec<NodeDump> {
    let mut nodes: Vec<NodeDump> = Vec::new();
    for (i, w) in shared.workers.iter().enumerate() {
        match nodes.iter_mut().find(|n| n.node == w.slot.node) {
            Some(n) => n.workers.push(i),
            None => nodes.push(NodeDump {
                node: w.slot.node,
                workers: vec![i],
                workload: shared.sched.node_workload(w.slot.node),
                placements: shared.sched.placements(w.slot.node),
            }),
        }
    }
    nodes
}

/// A task's stack as `memory::fill` reads it: (low end, 0 while it has
/// none; requested size).
fn stack_of(t: &Task) -> (usize, usize) {
    (t.stack_lo.load(Relaxed), t.stack_size)
}

fn fiber_of(shared: &Shared, t: &Task, state: FiberState, running_for: Option<Duration>, now: u64) -> FiberDump {
    let kind = t.wait_kind.load(Relaxed);
    let obj = t.wait_obj.load(Relaxed);
    let wait = if state == FiberState::Parked {
        WaitKind::from_raw(kind).map(|k| Wait {
            kind: k,
            object: if k == WaitKind::Sleep { 0 } else { obj },
            until: (k == WaitKind::Sleep).then(|| deadline_from_code(obj)),
        })
    } else {
        None
    };
    let worker = t.last_worker().min(shared.workers.len().saturating_sub(1));
    let wait_site = wait.as_ref().and_then(|_| t.wait_site());
    FiberDump {
        id: t.id,
        name: t.name.clone(),
        state,
        wait_site,
        wait,
        spawn_site: t.spawn_site,
        worker,
        node: shared.node_of(worker),
        stack_node: None,
        stack_touched: None,
        age: shared.insight.age(u64::from(t.born_ms), now),
        running_for,
        migrated: t.migrations(),
        backtrace: None,
    }
}
