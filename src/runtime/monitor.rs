//! The stall monitor (Go's sysmon): a thread per runtime that finds a fiber
//! running too long without giving control back, reports it once per
//! incident, and gets the fibers queued behind it taken by other workers.
//!
//! # How it samples (nothing on the switch path)
//!
//! Every period (a quarter of the threshold, at least 1 ms) the monitor
//! reads, for each worker, the switch counter the worker keeps anyway
//! (`Counters::resumes`, bumped after every resume) and the fiber it runs
//! (its `CURRENT` cell, `dump::running`). When both are unchanged since
//! the sample that first saw them, the same fiber has been running since
//! then: once that lasts the threshold, the incident is reported (once:
//! a new sample with another counter or fiber ends it), the worker is
//! marked held (`WorkerInsight::held_since_ms`, shown in dumps), its wake
//! slot's and held-child slot's entries go to another worker's inbox at
//! every sample while it stays held (`Shared::take_over`: a busy worker
//! serves its inbox too), and an idle worker is woken
//! (`Shared::notify_idle`), which steals the held worker's deque, ready
//! queue, spawn batch and inbox. Its timers are fired by an idle worker
//! once overdue ("Timers any worker can fire", `runtime/README.md`).
//! What stays behind: fibers in the held worker's private yield queue.
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
use std::panic::Location;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, OnceLock, Weak};
use std::thread::Thread;
use std::time::Duration;

use super::dump::{running, Secs};
use crate::runtime::shared::Shared;

/// Default [`Builder::stall_threshold`](crate::Builder::stall_threshold).
pub const DEFAULT_STALL_THRESHOLD: Duration = Duration::from_millis(50);

/// Longest park of an idle monitor (it is unparked by any worker waking).
const IDLE_PARK: Duration = Duration::from_secs(60);

/// The monitor thread's stack: it samples counters and runs the stall
/// hook (user code that prints or takes a dump).
const MONITOR_STACK: usize = 256 << 10;

/// A fiber ran longer than the stall threshold without giving control back
/// to its worker. Given to the [`Builder::on_stall`](crate::Builder::on_stall)
/// hook once per incident; its `Display` is what the default hook prints.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// use std::sync::{Arc, Mutex};
/// use std::time::{Duration, Instant};
/// let seen = Arc::new(Mutex::new(Vec::new()));
/// let s = seen.clone();
/// let rt = Runtime::builder()
///     .workers(2)
///     .stall_threshold(Some(Duration::from_millis(20)))
///     .on_stall(move |r| s.lock().unwrap().push(r.name().map(str::to_owned)))
///     .build()?;
/// rt.block_on(|| {
///     let h = fiber::Builder::new().name("spinner").spawn(|| {
///         let t = Instant::now();
///         while t.elapsed() < Duration::from_millis(200) {} // never yields
///     }).unwrap();
///     h.join().unwrap();
/// });
/// // (another fiber may be reported too if the OS preempts a worker that long)
/// assert!(seen.lock().unwrap().contains(&Some("spinner".to_string())));
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
}

impl fmt::Display for StallReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("numafiber: stall: ")?;
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
        write!(
            f,
            " has been running for {} on worker {} (node {}, cpu {}) without giving control back (threshold {}); \
             the fibers queued on that worker go to other workers. Call fiber::yield_now() in long loops, \
             and wrap blocking calls in fiber::block_in_place.",
            Secs(self.running_for),
            self.worker,
            self.node,
            self.cpu,
            Secs(self.threshold)
        )
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
    /// Prints the report to stderr.
    pub(crate) fn stderr() -> StallHook {
        StallHook(Arc::new(|r: &StallReport| eprintln!("{r}")))
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

/// What the monitor last saw on one worker.
#[derive(Clone, Copy, Default)]
struct Sample {
    resumes: u64,
    running: usize,
    since_ms: u64,
    reported: bool,
}

fn run(weak: Weak<Shared>, threshold: Duration, hook: StallHook) {
    let period = (threshold / 4).clamp(Duration::from_millis(1), Duration::from_millis(250));
    let threshold_ms = threshold.as_millis().max(1) as u64;
    let mut last: Vec<Sample> = Vec::new();
    let mut last_polls = 0u64;
    // The workers' resume count when the last sample found every worker
    // asleep (module docs, "Idle").
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
        last.resize(n, Sample::default());
        let reports = sample(&shared, &mut last, now, threshold_ms, threshold);
        watch_reactor(&shared, &mut last_polls);
        for r in &reports {
            (hook.0)(r);
        }
        drop(shared);
        // A park, so that shutdown's unpark ends the wait at once.
        std::thread::park_timeout(period);
    }
}

/// Fibers resumed so far by all workers of `shared`.
fn total_resumes(shared: &Shared) -> u64 {
    shared.workers.iter().map(|w| w.counters.resumes.load(Relaxed)).fold(0, u64::wrapping_add)
}

/// Sockets nobody polls: a driver that left with the one fiber its poll
/// made ready hands the reactor to nobody (`io::driver::park_step`), and
/// polls again when it is idle. If that fiber runs on without giving
/// control back, and no busy worker polled since the last sample while
/// fibers wait on sockets, nobody drives and a worker sleeps on its futex:
/// wake it, so it becomes the driver (Go's sysmon polls the network when
/// nobody has for 10 ms). Bounds how long readiness waits to one period.
fn watch_reactor(shared: &Arc<Shared>, last_polls: &mut u64) {
    let Some(r) = shared.reactor.get() else { return };
    let polls = r.polls();
    if polls == *last_polls && r.waiting() > 0 && !r.is_driven() && shared.idle.num_sleeping() > 0 {
        shared.notify_idle();
    }
    *last_polls = polls;
}

/// One pass over the workers; returns the incidents to report (the hook
/// runs after the inspect lock is released: it may take a dump).
fn sample(shared: &Arc<Shared>, last: &mut [Sample], now: u64, threshold_ms: u64, threshold: Duration) -> Vec<StallReport> {
    let mut out = Vec::new();
    // Dropped after the lock: a reference we hold may be a task's last.
    let mut keep = Vec::new();
    let guard = shared.insight.inspect.lock().unwrap_or_else(|e| e.into_inner());
    if *guard {
        return out;
    }
    for (i, w) in shared.workers.iter().enumerate() {
        let s = &mut last[i];
        let resumes = w.counters.resumes.load(Relaxed);
        let slot = w.insight.current_slot.load(Acquire);
        let running = if slot.is_null() {
            0
        } else {
            // SAFETY: as in `running::protect`: we hold the inspect lock.
            unsafe { (*slot).load(Relaxed) as usize }
        };
        if running == 0 || resumes != s.resumes || running != s.running {
            *s = Sample { resumes, running, since_ms: now, reported: false };
            w.insight.slice_start_ms.store(now, Relaxed);
            w.insight.held_since_ms.store(0, Relaxed);
            continue;
        }
        if s.reported {
            // Still held: whatever reached its slots since is taken over.
            shared.take_over(i);
            continue;
        }
        if now.saturating_sub(s.since_ms) < threshold_ms {
            continue;
        }
        s.reported = true;
        let t = running::protect(w);
        if t.as_ref().is_some_and(|t| Arc::as_ptr(t) as usize != running) {
            continue; // another slice began meanwhile
        }
        w.insight.held_since_ms.store(now, Relaxed);
        out.push(StallReport {
            fiber: t.as_ref().map(|t| t.id),
            name: t.as_ref().and_then(|t| t.name.clone()),
            spawn_site: t.as_ref().and_then(|t| t.spawn_site),
            worker: i,
            node: w.slot.node,
            cpu: w.slot.cpu,
            running_for: Duration::from_millis(now - s.since_ms),
            threshold,
        });
        keep.extend(t);
    }
    drop(guard);
    drop(keep);
    for r in &out {
        // Take-over: the held worker's slot entries go to another worker
        // now; an idle worker looks at its other queues.
        shared.take_over(r.worker);
    }
    if !out.is_empty() {
        shared.notify_idle();
    }
    out
}
