//! The stall monitor (Go's sysmon): a thread per runtime that finds a fiber
//! running too long without giving control back, gets the fibers queued
//! behind it taken by other workers, and reports it when something waited
//! on it.
//!
//! # How it samples (nothing on the switch path)
//!
//! Every period (a quarter of the threshold, at least 1 ms) the monitor
//! reads, for each worker, the switch counter the worker keeps anyway
//! (`Counters::resumes`, bumped after every resume) and the fiber it runs
//! (its `CURRENT` cell, `dump::running`). When both are unchanged since
//! the sample that first saw them, the same fiber has been running since
//! then (one *slice*; a new sample with another counter or fiber ends it).
//!
//! # Rescue (silent)
//!
//! Once a slice lasts the threshold, its worker is marked held
//! (`WorkerInsight::held_since_ms`, shown in dumps), its wake slot's and
//! held-child slot's entries go to another worker's inbox at every sample
//! while it stays held (`Shared::take_over`: a busy worker serves its
//! inbox too), and an idle worker is woken (`Shared::notify_idle`), which
//! steals the held worker's deque, ready queue, spawn batch and inbox. Its
//! timers are fired by an idle worker once overdue ("Timers any worker can
//! fire", `runtime/README.md`). What stays behind: fibers pinned to the
//! held worker, and fibers in its private yield queue.
//!
//! # When a long slice is a stall (reported)
//!
//! A long slice alone is no fault: fork-join and task-graph code computes
//! for tens of milliseconds by design, and nothing waits on it that
//! another worker cannot take. A held slice is reported (once; the hook
//! gets a [`StallReport`] with its [`StallCause`]) only when it hurts:
//!
//! * **starved**: fibers queued on the held worker (any queue the monitor
//!   can see: deque, ready queue, spawn batch, inboxes, slots) at every
//!   sample for a threshold while some other worker slept, woken by the
//!   rescue, and did not take them: pinned to the held worker, or out of
//!   reach of the policy. Fibers that wait only because every worker is
//!   busy are not starved by the hog: they would wait for a free worker
//!   anyway (on one worker, for the one). (Asleep, not searching: a
//!   searching worker that the OS preempted is no sign of a stall.);
//! * **timer overdue**: the held worker's earliest timer (a sleep, a
//!   timeout, a deadline) is overdue by a threshold: no idle worker was
//!   there to fire it;
//! * **sockets unpolled**: fibers wait on sockets and no worker polled
//!   for readiness for a threshold (see `watch_reactor`).
//!
//! Every other held slice is counted (`Stats::long_slices`), and the count
//! is said once, when the runtime shuts down: one
//! [`StallCause::LongSlices`] report naming the longest, to a hook set
//! with `Builder::on_stall`. The default hook (stderr) leaves that report
//! out, so programs that compute in long slices by design (fork-join,
//! task graphs) keep a clean stderr.
//!
//! # A hook that panics
//!
//! The hook runs under `catch_unwind`: its panic is said once on stderr,
//! and the monitor carries on (later reports still go to the hook, and
//! the rescue goes on). A panic that escaped would end the monitor thread
//! for good: no report and no rescue from then on.
//!
//! # Idle
//!
//! When every worker is asleep at two samples in a row and no fiber was
//! resumed between them (the workers' `resumes` counters are unchanged),
//! the monitor parks without a timeout worth mentioning (one wake-up a
//! minute); a worker that leaves its sleep unparks it
//! (`MonitorShared::worker_woke`, a load on that path only, and a futex
//! wake when the monitor is parked). The quiet period keeps a runtime
//! that idles between requests (a server with one connection: every worker
//! asleep most of the time, woken thousands of times a second) from paying
//! that futex wake on a worker's way back to its fibers; a runtime that
//! stays idle still parks its monitor within two periods.
//! The handshake: the monitor stores `parked = true` and then reads
//! `Idle::num_sleeping`; a worker leaves the sleepers (`num_sleeping`
//! decremented) and then reads `parked`; all four `SeqCst`, so one of the
//! two sees the other (and `Thread::unpark` leaves a token if it comes
//! first). So an idle runtime costs no CPU, and a fiber started after an
//! idle spell is watched from its first slice.

use std::fmt;
use std::panic::{AssertUnwindSafe, Location};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::Thread;
use std::time::{Duration, Instant};

use super::dump::{running, Secs};
use crate::runtime::shared::Shared;
use crate::runtime::worker::WorkerShared;

/// Default [`Builder::stall_threshold`](crate::Builder::stall_threshold).
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(50);

/// Longest park of an idle monitor (it is unparked by any worker waking).
const IDLE_PARK: Duration = Duration::from_secs(60);

/// The monitor thread's stack: it samples counters and runs the stall
/// hook (user code that prints or takes a dump).
const MONITOR_STACK: usize = 256 << 10;

/// Why a fiber that ran past the stall threshold is reported: what waited
/// on it ([`StallReport::cause`]; module `runtime::monitor`, "When a long
/// slice is a stall").
///
/// ```
/// use numafiber::runtime::StallCause;
/// let c = StallCause::Starved { fibers: 2 };
/// assert!(c.is_stall());
/// assert!(!StallCause::LongSlices { count: 3 }.is_stall());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum StallCause {
    /// Fibers queued on its worker waited a threshold while another worker
    /// slept and did not take them (pinned to that worker, or out of reach
    /// of the policy).
    Starved {
        /// How many were queued at the report.
        fibers: usize,
    },
    /// A timer of its worker (a sleep, a timeout, a deadline) was overdue
    /// by this much, at least a threshold: no idle worker fired it.
    TimerOverdue(Duration),
    /// Fibers wait on sockets and no worker polled for readiness for a
    /// threshold.
    SocketsUnpolled,
    /// Not a stall: said once per runtime, when it shuts down, for the
    /// `count` slices that ran past the threshold while nothing waited on
    /// them (other workers took what was queued behind them). The report's
    /// fiber, worker and [`running_for`](StallReport::running_for) are
    /// those of the longest.
    LongSlices {
        /// Slices past the threshold that were not stalls.
        count: u64,
    },
}

impl StallCause {
    /// Whether something waited on the fiber (every cause but
    /// [`LongSlices`](StallCause::LongSlices)).
    ///
    /// ```
    /// assert!(numafiber::runtime::StallCause::SocketsUnpolled.is_stall());
    /// ```
    pub fn is_stall(&self) -> bool {
        !matches!(self, StallCause::LongSlices { .. })
    }
}

/// A fiber ran longer than the stall threshold without giving control back
/// to its worker, and something waited on it ([`cause`](Self::cause)); or,
/// once per runtime at shutdown, the count of such slices nothing waited
/// on. Given to the [`Builder::on_stall`](crate::Builder::on_stall) hook;
/// its `Display` is what the default hook prints.
///
/// ```
/// use numafiber::{fiber, runtime::StallCause, Runtime};
/// use std::sync::{Arc, Mutex};
/// use std::time::{Duration, Instant};
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let s = seen.clone();
/// let rt = Runtime::builder()
///     .workers(2)
///     .stall_threshold(Some(Duration::from_millis(20)))
///     .on_stall(move |r| s.lock().unwrap().push((r.name().map(str::to_owned), r.cause())))
///     .build()?;
/// rt.block_on(|| {
///     // A spinner on worker 1, and a fiber pinned there behind it: no
///     // other worker may take it, so it waits, and that is a stall.
///     let h = fiber::Builder::new().name("spinner").worker(1).spawn(|| {
///         let t = Instant::now();
///         while t.elapsed() < Duration::from_millis(300) {} // never yields
///     }).unwrap();
///     std::thread::sleep(Duration::from_millis(5));
///     let behind = fiber::Builder::new().worker(1).spawn(|| ()).unwrap();
///     h.join().unwrap();
///     behind.join().unwrap();
/// });
/// assert!(seen.lock().unwrap().iter().any(|(n, c)| n.as_deref() == Some("spinner") && matches!(c, StallCause::Starved { .. })));
/// # Ok::<(), numafiber::BuildError>(())
/// ```
#[derive(Debug, Clone)]
pub struct StallReport {
    fiber: Option<u64>,
    name: Option<Arc<str>>,
    spawn_site: Option<&'static Location<'static>>,
    worker: usize,
    node: usize,
    cpu: usize,
    running_for: Duration,
    threshold: Duration,
    cause: StallCause,
}

impl StallReport {
    /// The fiber's id (`None` when it could not be read safely: no
    /// `membarrier(2)` on this kernel).
    pub fn fiber_id(&self) -> Option<u64> {
        self.fiber
    }
    /// Its name, if it has one.
    pub fn name(&self) -> Option<&str> {
        self.name.as_deref()
    }
    /// Where it was spawned.
    pub fn spawn_site(&self) -> Option<&'static Location<'static>> {
        self.spawn_site
    }
    /// The worker it holds.
    pub fn worker(&self) -> usize {
        self.worker
    }
    /// That worker's NUMA node.
    pub fn node(&self) -> usize {
        self.node
    }
    /// That worker's CPU.
    pub fn cpu(&self) -> usize {
        self.cpu
    }
    /// How long it had run without giving control back when reported (at
    /// least this; the monitor samples every quarter threshold).
    pub fn running_for(&self) -> Duration {
        self.running_for
    }
    /// The threshold it crossed.
    pub fn threshold(&self) -> Duration {
        self.threshold
    }
    /// What waited on it: why it is reported.
    pub fn cause(&self) -> StallCause {
        self.cause
    }
}

impl fmt::Display for StallReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let StallCause::LongSlices { count } = self.cause {
            write!(
                f,
                "numafiber: {count} fiber slice(s) ran longer than the stall threshold ({}) without giving \
                 control back, and no fiber waited on them: other workers took what was queued behind them, so \
                 none was a stall. The longest: ",
                Secs(self.threshold)
            )?;
            self.fmt_fiber(f)?;
            return write!(
                f,
                " ran {} on worker {}. Fork-join and task-graph code computes this long by design; where \
                 latency matters, call fiber::yield_now() in long loops.",
                Secs(self.running_for),
                self.worker
            );
        }
        f.write_str("numafiber: stall: ")?;
        self.fmt_fiber(f)?;
        write!(
            f,
            " has been running for {} on worker {} (node {}, cpu {}) without giving control back (threshold {}), ",
            Secs(self.running_for),
            self.worker,
            self.node,
            self.cpu,
            Secs(self.threshold)
        )?;
        match self.cause {
            StallCause::Starved { fibers } => write!(
                f,
                "and {fibers} fiber(s) queued on that worker waited that long while another worker slept and \
                 could not take them (pinned to that worker, or out of reach of the policy)."
            )?,
            StallCause::TimerOverdue(d) => {
                write!(f, "and a timer on that worker (a sleep, a timeout or a deadline) is {} overdue.", Secs(d))?
            }
            _ => f.write_str("and fibers waiting on sockets have not been polled for that long.")?,
        }
        f.write_str(" Call fiber::yield_now() in long loops, and wrap blocking calls in fiber::block_in_place.")
    }
}

impl StallReport {
    /// "fiber 5 "name" (spawned at ...)".
    fn fmt_fiber(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.fiber {
            Some(id) => write!(f, "fiber {id}")?,
            None => f.write_str("a fiber")?,
        }
        if let Some(n) = &self.name {
            write!(f, " {n:?}")?;
        }
        if let Some(l) = self.spawn_site {
            write!(f, " (spawned at {l})")?;
        }
        Ok(())
    }
}

/// The hook type behind [`Builder::on_stall`](crate::Builder::on_stall).
#[derive(Clone)]
pub(crate) struct StallHook(pub(crate) Arc<dyn Fn(&StallReport) + Send + Sync>);

impl fmt::Debug for StallHook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("StallHook(..)")
    }
}

impl StallHook {
    /// Prints each stall to stderr. The shutdown's count of long slices
    /// that were no stall ([`StallCause::LongSlices`]) is not printed: a
    /// program that computes in long slices by design keeps a clean stderr,
    /// and the count is in [`Stats::long_slices`](crate::runtime::Stats::long_slices)
    /// and goes to a hook set with `Builder::on_stall`.
    pub(crate) fn stderr() -> StallHook {
        StallHook(Arc::new(|r: &StallReport| {
            if r.cause().is_stall() {
                eprintln!("{r}")
            }
        }))
    }
}

/// The monitor's part of `Shared` (in `Insight`).
#[derive(Debug, Default)]
pub(crate) struct MonitorShared {
    thread: OnceLock<Thread>,
    parked: AtomicBool,
    /// Joined by `Runtime::shutdown` (so a program that builds and drops
    /// runtimes in a loop does not pile up exiting monitor threads).
    handle: std::sync::Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Held slices that ended unreported (`Stats::long_slices`), shared with
    /// the monitor thread, which counts them.
    long_slices: Arc<AtomicU64>,
}

impl MonitorShared {
    pub(crate) fn new() -> MonitorShared {
        MonitorShared::default()
    }

    /// A worker left its sleep (module docs, "Idle").
    #[inline]
    pub(crate) fn worker_woke(&self) {
        if self.parked.load(SeqCst) {
            self.unpark();
        }
    }

    /// Held slices that ended unreported so far (`Stats::long_slices`).
    pub(crate) fn long_slices(&self) -> u64 {
        self.long_slices.load(Relaxed)
    }

    /// Wake the monitor (a worker woke, or shutdown).
    pub(crate) fn unpark(&self) {
        if let Some(t) = self.thread.get() {
            t.unpark();
        }
    }

    /// Shutdown, after `Shared::shutdown` is set and the monitor unparked:
    /// wait for the monitor thread to exit (it does at its next sample).
    pub(crate) fn join(&self) {
        let h = self.handle.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(h) = h {
            let _ = h.join();
        }
    }
}

/// Helper threads of numafiber that never wake a fiber while every worker
/// sleeps (monitors, the dump-on-signal reader): the deadlock detector
/// counts them as accounted for.
static INTERNAL_THREADS: AtomicUsize = AtomicUsize::new(0);

/// See `INTERNAL_THREADS`.
pub(crate) fn internal_threads() -> usize {
    INTERNAL_THREADS.load(SeqCst)
}

/// An internal thread that lives as long as the process started.
pub(crate) fn internal_thread_started() {
    INTERNAL_THREADS.fetch_add(1, SeqCst);
}

/// Start the monitor of `shared`.
pub(crate) fn start(shared: &Arc<Shared>, threshold: Duration, hook: StallHook) -> std::io::Result<()> {
    let weak = Arc::downgrade(shared);
    INTERNAL_THREADS.fetch_add(1, SeqCst);
    let r = std::thread::Builder::new().name("numafiber-monitor".into()).stack_size(MONITOR_STACK).spawn(move || {
        run(weak, threshold, hook);
        INTERNAL_THREADS.fetch_sub(1, SeqCst);
    });
    match r {
        Ok(h) => {
            let mon = &shared.insight.monitor;
            let _ = mon.thread.set(h.thread().clone());
            *mon.handle.lock().unwrap_or_else(|e| e.into_inner()) = Some(h);
            Ok(())
        }
        Err(e) => {
            INTERNAL_THREADS.fetch_sub(1, SeqCst);
            Err(e)
        }
    }
}

/// What the monitor last saw on one worker: its current slice.
#[derive(Default)]
struct Sample {
    resumes: u64,
    running: usize,
    since_ms: u64,
    /// The slice lasted the threshold: its worker is held (rescue on).
    held: bool,
    /// The slice was reported as a stall.
    reported: bool,
    /// First sample of this slice, in a run of samples that each saw
    /// fibers queued on the worker while another worker slept; 0: the
    /// last sample did not.
    waiting_since: u64,
    /// The slice's report, made when it was held (cause filled in when it
    /// is sent); for the long-slice summary when it ends unreported.
    report: Option<StallReport>,
}

/// The monitor thread's state.
struct Monitor {
    hook: StallHook,
    threshold: Duration,
    threshold_ms: u64,
    last: Vec<Sample>,
    /// Reactor polls at the last sample, and since when (coarse ms) fibers
    /// wait on sockets that nobody polled (0: not now).
    last_polls: u64,
    unpolled_since: u64,
    /// Held slices that ended unreported, and the longest of them.
    long_slices: u64,
    /// The same count, for `Stats` (`MonitorShared::long_slices`).
    long_slices_shared: Arc<AtomicU64>,
    longest: Option<StallReport>,
    /// The hook panicked once (said on stderr, not again).
    hook_panicked: bool,
}

fn run(weak: Weak<Shared>, threshold: Duration, hook: StallHook) {
    let long_slices_shared = match weak.upgrade() {
        Some(s) => s.insight.monitor.long_slices.clone(),
        None => return, // the runtime is gone before its monitor started
    };
    let mut m = Monitor {
        long_slices_shared,
        hook,
        threshold,
        threshold_ms: threshold.as_millis().max(1) as u64,
        last: Vec::new(),
        last_polls: 0,
        unpolled_since: 0,
        long_slices: 0,
        longest: None,
        hook_panicked: false,
    };
    m.watch(&weak);
    m.summarise();
}

impl Monitor {
    /// Sample until the runtime shuts down (module docs).
    fn watch(&mut self, weak: &Weak<Shared>) {
        let period = (self.threshold / 4).clamp(Duration::from_millis(1), Duration::from_millis(250));
        // The workers' resume count when the last sample found every
        // worker asleep (module docs, "Idle").
        let mut asleep_at: Option<u64> = None;
        loop {
            let Some(shared) = weak.upgrade() else { return };
            if shared.is_shutting_down() {
                return;
            }
            let n = shared.workers.len();
            // Every worker asleep: the resume count now.
            let quiet = (shared.idle.num_sleeping() == n).then(|| total_resumes(&shared));
            if quiet.is_some() && quiet == asleep_at {
                asleep_at = None;
                let mon = &shared.insight.monitor;
                mon.parked.store(true, SeqCst);
                let idle = shared.idle.num_sleeping() == n && !shared.is_shutting_down();
                if idle {
                    drop(shared);
                    std::thread::park_timeout(IDLE_PARK);
                    match weak.upgrade() {
                        Some(s) => s.insight.monitor.parked.store(false, SeqCst),
                        None => return,
                    }
                } else {
                    mon.parked.store(false, SeqCst);
                }
                continue;
            }
            asleep_at = quiet;
            let now = shared.insight.tick();
            self.last.resize_with(n, Sample::default);
            self.watch_reactor(&shared, now);
            let reports = self.sample(&shared, now);
            for r in &reports {
                self.deliver(r);
            }
            drop(shared);
            // A park, so that shutdown's unpark ends the wait at once.
            std::thread::park_timeout(period);
        }
    }

    /// Run the hook on `r`; a panic of the hook is caught and said once
    /// (module docs, "A hook that panics").
    fn deliver(&mut self, r: &StallReport) {
        let hook = &self.hook.0;
        if std::panic::catch_unwind(AssertUnwindSafe(|| hook(r))).is_err() && !self.hook_panicked {
            self.hook_panicked = true;
            eprintln!(
                "numafiber: the on_stall hook panicked; the stall monitor carries on (later reports still go to \
                 the hook, fibers still move off held workers; a later panic of the hook is not said again)"
            );
        }
    }

    /// Shutdown: the slices still held end here; the long-slice count, if
    /// any, goes to the hook once.
    fn summarise(&mut self) {
        for i in 0..self.last.len() {
            self.end_slice(i);
        }
        if let Some(mut r) = self.longest.take() {
            r.cause = StallCause::LongSlices { count: self.long_slices };
            self.deliver(&r);
        }
    }

    /// Worker `i`'s slice ended: counted when it was held and not reported.
    fn end_slice(&mut self, i: usize) {
        let s = &mut self.last[i];
        if !s.held || s.reported {
            return;
        }
        if let Some(r) = s.report.take() {
            self.long_slices += 1;
            self.long_slices_shared.fetch_add(1, Relaxed);
            if self.longest.as_ref().is_none_or(|l| r.running_for > l.running_for) {
                self.longest = Some(r);
            }
        }
    }

    /// Sockets nobody polls: a driver that left with the one fiber its
    /// poll made ready hands the reactor to nobody (`io::driver::park_step`),
    /// and polls again when it is idle. If that fiber runs on without
    /// giving control back, and no busy worker polled since the last sample
    /// while fibers wait on sockets, nobody drives and a worker sleeps on
    /// its futex: wake it, so it becomes the driver (Go's sysmon polls the
    /// network when nobody has for 10 ms). Bounds how long readiness waits
    /// to one period when a worker sleeps; when none does, a threshold of
    /// this is a stall of the held workers (`StallCause::SocketsUnpolled`).
    fn watch_reactor(&mut self, shared: &Arc<Shared>, now: u64) {
        let Some(r) = shared.reactor.get() else { return };
        let polls = r.polls();
        let unpolled = polls == self.last_polls && r.waiting() > 0 && !r.is_driven();
        if unpolled && shared.idle.num_sleeping() > 0 {
            shared.notify_idle();
        }
        self.unpolled_since = match (unpolled, self.unpolled_since) {
            (false, _) => 0,
            (true, 0) => now,
            (true, t) => t,
        };
        self.last_polls = polls;
    }

    /// One pass over the workers: rescue for the held ones; returns the
    /// stalls to report (the hook runs after the inspect lock is released:
    /// it may take a dump).
    fn sample(&mut self, shared: &Arc<Shared>, now: u64) -> Vec<StallReport> {
        let mut out = Vec::new();
        // Dropped after the lock: a reference we hold may be a task's last.
        let mut keep = Vec::new();
        // Held workers to rescue, and whether to wake an idle worker.
        let mut rescue = Vec::new();
        let mut wake = false;
        let guard = shared.insight.inspect.lock().unwrap_or_else(|e| e.into_inner());
        if *guard {
            return out;
        }
        let idle = shared.idle.num_sleeping() > 0;
        let unpolled = self.unpolled_since != 0 && now - self.unpolled_since >= self.threshold_ms;
        let clock = Instant::now();
        for (i, w) in shared.workers.iter().enumerate() {
            let resumes = w.counters.resumes.load(Relaxed);
            let slot = w.insight.current_slot.load(Acquire);
            let running = if slot.is_null() {
                0
            } else {
                // SAFETY: as in `running::protect`: we hold the inspect lock.
                unsafe { (*slot).load(Relaxed) as usize }
            };
            if running == 0 || resumes != self.last[i].resumes || running != self.last[i].running {
                self.end_slice(i);
                self.last[i] = Sample { resumes, running, since_ms: now, ..Sample::default() };
                w.insight.slice_start_ms.store(now, Relaxed);
                w.insight.held_since_ms.store(0, Relaxed);
                continue;
            }
            let queued = queued_on(w);
            let s = &mut self.last[i];
            s.waiting_since = match (queued > 0 && idle, s.waiting_since) {
                (false, _) => 0,
                (true, 0) => now,
                (true, t) => t,
            };
            if now.saturating_sub(s.since_ms) < self.threshold_ms {
                continue;
            }
            rescue.push(i);
            wake |= queued > 0;
            if !s.held {
                s.held = true;
                wake = true;
                w.insight.held_since_ms.store(now, Relaxed);
                let t = running::protect(w);
                if t.as_ref().is_some_and(|t| Arc::as_ptr(t) as usize != running) {
                    continue; // another slice began meanwhile
                }
                s.report = Some(StallReport {
                    fiber: t.as_ref().map(|t| t.id),
                    name: t.as_ref().and_then(|t| t.name.clone()),
                    spawn_site: t.as_ref().and_then(|t| t.spawn_site),
                    worker: i,
                    node: w.slot.node,
                    cpu: w.slot.cpu,
                    running_for: Duration::ZERO,
                    threshold: self.threshold,
                    cause: StallCause::LongSlices { count: 0 },
                });
                keep.extend(t);
            }
            let Some(r) = s.report.as_mut() else { continue };
            r.running_for = Duration::from_millis(now - s.since_ms);
            if s.reported {
                continue;
            }
            let starved = s.waiting_since != 0 && now - s.waiting_since >= self.threshold_ms;
            let late =
                w.timers.next_deadline().map(|d| clock.saturating_duration_since(d)).filter(|d| *d >= self.threshold);
            let cause = if starved {
                StallCause::Starved { fibers: queued }
            } else if let Some(d) = late {
                StallCause::TimerOverdue(d)
            } else if unpolled {
                StallCause::SocketsUnpolled
            } else {
                continue;
            };
            s.reported = true;
            r.cause = cause;
            out.push(r.clone());
        }
        drop(guard);
        drop(keep);
        for &i in &rescue {
            // Take-over: the held worker's slot entries go to another
            // worker now; an idle worker looks at its other queues.
            shared.take_over(i);
        }
        if wake {
            shared.notify_idle();
        }
        out
    }
}

/// Fibers queued on worker `w` that the monitor can see (not its private
/// yield queue): deque, ready queue, spawn batch, inboxes and slots.
fn queued_on(w: &WorkerShared) -> usize {
    w.stealer.len()
        + w.ready_stealer.len()
        + w.batch_stealer.len()
        + w.inbox.len()
        + w.pinned_inbox.len()
        + usize::from(w.wake_slot.is_occupied())
        + usize::from(w.held.is_occupied())
}

/// Fibers resumed so far by all workers of `shared`.
fn total_resumes(shared: &Shared) -> u64 {
    shared.workers.iter().map(|w| w.counters.resumes.load(Relaxed)).fold(0, u64::wrapping_add)
}
