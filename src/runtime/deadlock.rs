//! The deadlock report of `Runtime::block_on` (Go's "all goroutines are
//! asleep - deadlock!"), which must never be a false alarm.
//!
//! # What is checked
//!
//! `block_on` waits for its root fiber with a timed park and, every
//! [`POLL`], asks [`Detector::check`]. A runtime is *quiescent* when
//!
//! 1. it is not shutting down and detection is on;
//! 2. every worker is asleep, every deque and inbox (and the I/O ready
//!    queue) is empty, no worker
//!    has a pending timer (`sleep`, `recv_timeout`...), and no fiber waits
//!    on an *external wake source* ([`ExternalWait`]: the I/O reactor's
//!    hook), and no fiber waits on a socket (`crate::net`'s reactor:
//!    a peer may wake it);
//! 3. (for the runtime of this `block_on`) the root fiber is parked.
//!
//! The *progress key* sums every live runtime's `resumes + parks` counters
//! and the counters of thread waits below; it must stay unchanged.
//!
//! # The verdicts
//!
//! * **Deadlock (panic)**, after [`STABLE_POLLS`] quiescent polls (about
//!   100 ms), only when the report *cannot be wrong*: every live runtime
//!   of the process is quiescent, every parked fiber of every runtime
//!   records what it waits on (a sync primitive or a join), and **every
//!   thread of the process is accounted for** as a worker of a live
//!   runtime, a thread blocked in an untimed numafiber wait
//!   ([`ThreadBlocked`]), a thread in `block_on` whose root fiber is
//!   parked ([`BlockOnRoot`]), an idle helper thread of the blocking pool
//!   (it runs nothing until a fiber submits work), or one of numafiber's
//!   own helper threads that never wake a fiber (stall monitors, the
//!   dump-on-signal reader). Then nothing is left that could wake anyone:
//!   no fiber runs, no timer or I/O source is armed, and no other thread
//!   exists (`/proc/self/task`).
//! * **Warning (once per runtime)**, after [`SUSPECT_POLLS`] (about 1 s),
//!   when this runtime is quiescent but the proof fails: some other thread
//!   exists (it may still unlock, send, set a promise: corolib's completion
//!   threads), or another runtime is still running (its fibers may wake
//!   ours). The same report goes to stderr, and `block_on` keeps waiting.
//! * With [`Builder::strict_deadlock_detection`](crate::Builder::strict_deadlock_detection)
//!   the old rule applies: panic as soon as this runtime alone has been
//!   quiescent for the short window, whatever other threads exist.
//!
//! Before `block_on` panics it destroys the root fiber (and, through its
//! scopes and joins, every fiber borrowing from it): the root may borrow
//! from the caller's frame, which the panic unwinds.
//!
//! # What it cannot see
//!
//! Neither verdict comes (`block_on` waits silently) when:
//!
//! * a fiber is parked on a wait that something outside the runtime may
//!   end: a socket (`crate::net`: the reactor counts its waiters, so the
//!   runtime is never quiescent), `fiber::block_on_future` (wait kind
//!   `FUTURE`: its waker may be held by another executor or thread), a
//!   `spawn_blocking` / `block_in_place` call on a helper thread (`BLOCKING`:
//!   the helper may be stuck in the OS forever). `report` gives `None` for
//!   a parked fiber whose wait it cannot describe, and with it the
//!   warning goes too. A fiber parked there forever, and every fiber that
//!   waits for it, is never reported;
//! * any worker has a timer (condition 2): a fiber in `sleep`, a timed
//!   wait, a deadline, and also a stale timer whose wait ended early (it
//!   stays in the heap until due or compacted); the check resumes after
//!   it fires;
//! * a worker does not sleep: a fiber blocked in an OS call or a
//!   `std::sync` lock, or computing (the stall monitor's case), so also a
//!   deadlock among some fibers while others run;
//! * nobody is in `block_on`, or its root fiber runs (condition 3): a
//!   plain thread's `JoinHandle::join` is never checked.
//!
//! # The one assumption
//!
//! A thread counted as blocked was last seen inside its park. A wake-up
//! given to it is counted ([`note_thread_wake`]) and resets the window, so
//! a wrong verdict needs a woken thread that the OS does not run for the
//! whole window (about 100 ms) *and* no other event in between.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use crate::runtime::shared::Shared;
use crate::runtime::task::{wait_kind, TaskRef};

/// How often `block_on` checks.
pub(crate) const POLL: Duration = Duration::from_millis(10);
/// Consecutive quiescent polls before a certain report (about 100 ms).
pub(crate) const STABLE_POLLS: u32 = 10;
/// Consecutive quiescent polls before a warning (about 1 s).
pub(crate) const SUSPECT_POLLS: u32 = 100;

/// Per-runtime part of the detector (in `Shared::deadlock`).
#[derive(Default)]
pub(crate) struct RuntimeState {
    /// Panic on local quiescence alone (the pre-proof rule).
    pub(crate) strict: AtomicBool,
    /// The one-time warning was printed.
    warned: AtomicBool,
    /// Fibers parked on an external wake source (I/O readiness).
    external: AtomicUsize,
}

/// A fiber waits on something outside the runtime that will wake it (the
/// I/O reactor: a socket becoming ready). While one is alive the runtime is
/// never quiescent, so a fiber parked on I/O is not reported. Create it
/// before parking, drop it after waking.
#[allow(dead_code)] // the hook for the reactor
pub(crate) struct ExternalWait {
    shared: Arc<Shared>,
}

#[allow(dead_code)]
impl ExternalWait {
    pub(crate) fn new(shared: &Arc<Shared>) -> ExternalWait {
        shared.deadlock.external.fetch_add(1, SeqCst);
        ExternalWait { shared: shared.clone() }
    }
}

impl Drop for ExternalWait {
    fn drop(&mut self) {
        self.shared.deadlock.external.fetch_sub(1, SeqCst);
    }
}

/// Live runtimes of the process (for the cross-runtime proof).
static RUNTIMES: Mutex<Vec<Weak<Shared>>> = Mutex::new(Vec::new());

/// Register a new runtime.
pub(crate) fn register_runtime(shared: &Arc<Shared>) {
    let mut g = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    g.retain(|w| w.strong_count() > 0);
    g.push(Arc::downgrade(shared));
}

/// The live runtime whose `Shared` is at `p`, if any (`JoinHandle::cancel`
/// from a thread that is not one of its workers).
pub(crate) fn runtime_at(p: *const Shared) -> Option<Arc<Shared>> {
    let g = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    g.iter().find(|w| std::ptr::eq(w.as_ptr(), p)).and_then(Weak::upgrade)
}

/// Runtimes whose worker threads may still exist (not yet drained).
fn live_runtimes() -> Vec<Arc<Shared>> {
    let g = RUNTIMES.lock().unwrap_or_else(|e| e.into_inner());
    g.iter().filter_map(Weak::upgrade).filter(|s| !s.draining.load(Acquire)).collect()
}

/// Plain threads inside an untimed numafiber park (they cannot wake
/// anyone until someone wakes them).
static THREADS_BLOCKED: AtomicUsize = AtomicUsize::new(0);
/// Bumped on every enter/leave of such a park and every wake-up given to
/// a thread: part of the progress key.
static THREAD_EVENTS: AtomicU64 = AtomicU64::new(0);

/// A plain thread is in an untimed park (see `packet::park_caller`).
pub(crate) struct ThreadBlocked(());

impl ThreadBlocked {
    pub(crate) fn enter() -> ThreadBlocked {
        THREADS_BLOCKED.fetch_add(1, SeqCst);
        THREAD_EVENTS.fetch_add(1, SeqCst);
        ThreadBlocked(())
    }
}

impl Drop for ThreadBlocked {
    fn drop(&mut self) {
        THREAD_EVENTS.fetch_add(1, SeqCst);
        THREADS_BLOCKED.fetch_sub(1, SeqCst);
    }
}

/// Helper threads of the blocking pool waiting for work: they wake no
/// fiber until a fiber submits work (a running fiber), so they are
/// accounted for.
static IDLE_HELPERS: AtomicUsize = AtomicUsize::new(0);

/// A helper thread of the blocking pool (`fiber::spawn_blocking`) waits
/// for work while this lives.
pub(crate) struct IdleHelper(());

impl IdleHelper {
    pub(crate) fn enter() -> IdleHelper {
        IDLE_HELPERS.fetch_add(1, SeqCst);
        IdleHelper(())
    }
}

impl Drop for IdleHelper {
    fn drop(&mut self) {
        IDLE_HELPERS.fetch_sub(1, SeqCst);
    }
}

/// A wake-up was given to a plain thread.
pub(crate) fn note_thread_wake() {
    THREAD_EVENTS.fetch_add(1, SeqCst);
}

/// Threads in `block_on`, with their root fibers.
static BLOCK_ON_ROOTS: Mutex<Option<HashMap<u64, TaskRef>>> = Mutex::new(None);

/// The calling thread is in `block_on` waiting for `root`.
pub(crate) struct BlockOnRoot(u64);

impl BlockOnRoot {
    pub(crate) fn register(root: &TaskRef) -> BlockOnRoot {
        let mut g = BLOCK_ON_ROOTS.lock().unwrap_or_else(|e| e.into_inner());
        g.get_or_insert_with(HashMap::new).insert(root.id, root.clone());
        BlockOnRoot(root.id)
    }
}

impl Drop for BlockOnRoot {
    fn drop(&mut self) {
        let mut g = BLOCK_ON_ROOTS.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = g.as_mut() {
            m.remove(&self.0);
        }
    }
}

/// What `block_on` should do after a check.
pub(crate) enum Verdict {
    /// Keep waiting.
    Wait,
    /// Print this once (the report could be wrong).
    Warn(String),
    /// Panic with this report.
    Deadlock(String),
}

/// Which report `report` writes.
enum Kind<'a> {
    /// Proven: nothing can wake any fiber.
    Certain,
    /// `strict_deadlock_detection`: this runtime is quiescent.
    Strict,
    /// A warning, with the reason the proof failed.
    Suspect(&'a str),
}

/// Per-`block_on` state of the check.
#[derive(Default)]
pub(crate) struct Detector {
    last: Option<(u64, bool)>,
    stable: u32,
}

impl Detector {
    /// See the module docs.
    pub(crate) fn check(&mut self, shared: &Arc<Shared>, root: &TaskRef) -> Verdict {
        if !shared.deadlock_detection.load(Relaxed) {
            return Verdict::Wait;
        }
        let Some(own) = quiescent(shared).filter(|_| root.is_parked()) else {
            self.last = None;
            self.stable = 0;
            return Verdict::Wait;
        };
        let runtimes = live_runtimes();
        let mut progress = own;
        let mut all_quiet = true;
        for r in runtimes.iter().filter(|r| !Arc::ptr_eq(r, shared)) {
            match quiescent(r) {
                Some(p) => progress = progress.wrapping_add(p),
                None => all_quiet = false,
            }
        }
        progress = progress.wrapping_add(THREAD_EVENTS.load(SeqCst));
        let key = (progress, all_quiet);
        if self.last == Some(key) {
            self.stable = self.stable.saturating_add(1);
        } else {
            self.last = Some(key);
            self.stable = 0;
        }
        if self.stable < STABLE_POLLS {
            return Verdict::Wait;
        }
        if shared.deadlock.strict.load(Relaxed) {
            return match report(std::slice::from_ref(shared), shared, root, Kind::Strict) {
                Some(r) => Verdict::Deadlock(r),
                None => Verdict::Wait,
            };
        }
        let unaccounted = if all_quiet { unaccounted_threads(&runtimes) } else { None };
        if all_quiet && unaccounted == Some(0) {
            return match report(&runtimes, shared, root, Kind::Certain) {
                Some(r) => Verdict::Deadlock(r),
                None => Verdict::Wait,
            };
        }
        if self.stable < SUSPECT_POLLS || shared.deadlock.warned.load(Relaxed) {
            return Verdict::Wait;
        }
        let why = if !all_quiet {
            "another runtime of this process is still running, and its fibers may wake these".to_string()
        } else {
            match unaccounted {
                Some(n) => format!(
                    "{n} thread(s) of this process are neither workers nor blocked in numafiber, \
                     and may still wake one of these fibers"
                ),
                None => "the threads of this process cannot be counted (no /proc/self/task)".to_string(),
            }
        };
        match report(std::slice::from_ref(shared), shared, root, Kind::Suspect(&why)) {
            Some(r) if !shared.deadlock.warned.swap(true, Relaxed) => Verdict::Warn(r),
            _ => Verdict::Wait,
        }
    }
}

/// Conditions 1-2 (module docs); returns the runtime's progress counter.
fn quiescent(shared: &Shared) -> Option<u64> {
    if shared.is_shutting_down() || shared.deadlock.external.load(SeqCst) != 0 {
        return None;
    }
    if shared.idle.num_sleeping() != shared.workers.len() {
        return None;
    }
    // Fibers waiting on sockets: a peer may wake them (`crate::runtime::io`).
    if shared.reactor.get().is_some_and(|r| r.waiting() != 0) || !shared.io_ready.is_empty() {
        return None;
    }
    let mut progress = 0u64;
    for w in shared.workers.iter() {
        if !w.sleeper.is_sleeping() || w.queue_len() != 0 || w.timers.len() != 0 {
            return None;
        }
        progress = progress.wrapping_add(w.counters.resumes.load(Relaxed)).wrapping_add(w.counters.parks.load(Relaxed));
    }
    Some(progress)
}

/// Threads of the process not accounted for as a worker of a live runtime,
/// a thread blocked in numafiber, or a `block_on` thread whose root is
/// parked. `None` when the threads cannot be counted.
fn unaccounted_threads(runtimes: &[Arc<Shared>]) -> Option<usize> {
    let total = std::fs::read_dir("/proc/self/task").ok()?.count();
    let workers: usize = runtimes.iter().map(|r| r.workers.len()).sum();
    let block_ons = {
        let g = BLOCK_ON_ROOTS.lock().unwrap_or_else(|e| e.into_inner());
        g.as_ref().map_or(0, |m| m.values().filter(|t| t.is_parked()).count())
    };
    let known = workers
        + THREADS_BLOCKED.load(SeqCst)
        + block_ons
        + IDLE_HELPERS.load(SeqCst)
        + crate::runtime::monitor::internal_threads();
    Some(total.saturating_sub(known))
}

/// The report over the parked fibers of `runtimes`; `None` unless every
/// one of them records what it waits on and the root is one of them.
fn report(runtimes: &[Arc<Shared>], own: &Arc<Shared>, root: &TaskRef, kind: Kind<'_>) -> Option<String> {
    let mut lines = Vec::new();
    let mut n = 0usize;
    let mut root_seen = false;
    for (k, r) in runtimes.iter().enumerate() {
        let mut parked: Vec<TaskRef> = r.registry.snapshot().into_iter().filter(|t| t.is_parked()).collect();
        parked.sort_by_key(|t| t.id);
        root_seen |= Arc::ptr_eq(r, own) && parked.iter().any(|t| t.id == root.id);
        for t in &parked {
            let what = wait_kind::describe(t.wait_kind.load(Relaxed), t.wait_obj.load(Relaxed))?;
            let name = match &t.name {
                Some(n) => format!("{n:?}"),
                None => "(unnamed)".to_string(),
            };
            let rt = if runtimes.len() > 1 {
                if Arc::ptr_eq(r, own) {
                    "this runtime: ".to_string()
                } else {
                    format!("runtime #{k}: ")
                }
            } else {
                String::new()
            };
            lines.push(format!("{rt}fiber {} {name} [{what}]", t.id));
            n += 1;
        }
    }
    if !root_seen {
        return None;
    }
    let scope = if runtimes.len() > 1 {
        format!("no fiber of the {} runtimes of this process can run again", runtimes.len())
    } else {
        "no fiber of the runtime can run again".to_string()
    };
    let mut msg = match kind {
        Kind::Certain => format!(
            "all fibers are asleep - deadlock! Runtime::block_on waits for fiber {}, and {scope} \
             ({n} parked, no timer pending, no other thread exists):\n",
            root.id
        ),
        Kind::Strict => format!(
            "all fibers are asleep - deadlock! Runtime::block_on waits for fiber {}, and {scope} \
             ({n} parked, no timer pending; strict check: other threads and runtimes are not \
             considered):\n",
            root.id
        ),
        Kind::Suspect(why) => format!(
            "numafiber: warning: possible deadlock (printed once; block_on keeps waiting, because \
             {why}). all fibers are asleep - deadlock? Runtime::block_on waits for fiber {}, and no \
             fiber of the runtime has run for a second ({n} parked, no timer pending). Build the \
             runtime with strict_deadlock_detection(true) to panic here instead, or \
             deadlock_detection(false) to silence this:\n",
            root.id
        ),
    };
    for l in lines {
        let _ = writeln!(msg, "  {l}");
    }
    if let Some(note) = own.stacks.starvation_note() {
        let _ = writeln!(msg, "{note}");
    }
    // Where they wait, folded by call site (`runtime::dump`).
    let _ = write!(msg, "{}", crate::runtime::dump::capture(own).grouped());
    Some(msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The reactor hook: a fiber parked on an external wake source keeps
    /// the runtime from being quiescent, so even the strict check (which
    /// ignores other threads) does not report it.
    #[test]
    fn a_fiber_waiting_on_an_external_source_is_not_a_deadlock() {
        let rt = crate::Runtime::builder().workers(1).strict_deadlock_detection(true).build().unwrap();
        let ev = Arc::new(crate::sync::Event::new());
        let e2 = ev.clone();
        let t = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(400));
            e2.set(); // stands in for a socket becoming ready
        });
        let shared = rt.shared().clone();
        let woke = rt.block_on(move || {
            let _io = ExternalWait::new(&shared);
            ev.wait();
            true
        });
        assert!(woke);
        t.join().unwrap();
        // Without the hook the same wait is reported by the strict check.
        let ev = Arc::new(crate::sync::Event::new());
        let e2 = ev.clone();
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(move || e2.wait())));
        assert!(r.is_err());
        ev.set();
    }
}
