//! The deadlock report of `Runtime::block_on` (Go's "all goroutines are
//! asleep - deadlock!").
//!
//! `block_on` waits for its root fiber with a timed park and, every
//! [`POLL`], asks [`Detector::check`] whether the runtime is *quiescent*:
//!
//! 1. the runtime is not shutting down and detection is on;
//! 2. the root fiber is parked (no wake-up pending);
//! 3. every worker is asleep, every deque and inbox is empty, and no worker
//!    has a pending timer (a timer could still wake a fiber: `sleep`, a
//!    `recv_timeout`...);
//!    No fiber waits on a socket (`crate::net`: a peer may wake it).
//! 4. no fiber was resumed or parked since the previous poll (the sum of
//!    the workers' `resumes + parks` counters is unchanged).
//!
//! When that has held for [`STABLE_POLLS`] polls in a row (about 100 ms), it
//! reads the parked-fiber registry: if every parked fiber records what it
//! waits on (a sync primitive or a join, see `Task::wait_kind`) and the
//! root is one of them, nothing inside the runtime can ever wake any of
//! them, and the report is returned (`block_on` panics with it).
//!
//! Limit: a plain thread outside the runtime may still wake a fiber (send
//! on a channel, unlock a mutex). If it stays silent for longer than the
//! window while every fiber waits for it, the report is a false alarm;
//! `Builder::deadlock_detection(false)` turns the check off.

use std::fmt::Write as _;
use std::sync::atomic::Ordering::*;
use std::time::Duration;

use crate::fiber::task::{wait_kind, TaskRef};
use crate::runtime::shared::Shared;

/// How often `block_on` checks.
pub(crate) const POLL: Duration = Duration::from_millis(10);
/// Consecutive quiescent polls before reporting.
pub(crate) const STABLE_POLLS: u32 = 10;

/// Per-`block_on` state of the check.
#[derive(Default)]
pub(crate) struct Detector {
    last: Option<u64>,
    stable: u32,
}

impl Detector {
    /// `Some(report)` when the runtime is deadlocked (see module docs).
    pub(crate) fn check(&mut self, shared: &Shared, root: &TaskRef) -> Option<String> {
        if !shared.deadlock_detection.load(Relaxed) {
            return None;
        }
        match quiescent(shared, root) {
            None => {
                self.last = None;
                self.stable = 0;
                None
            }
            Some(progress) => {
                if self.last == Some(progress) {
                    self.stable += 1;
                } else {
                    self.last = Some(progress);
                    self.stable = 0;
                }
                if self.stable < STABLE_POLLS {
                    return None;
                }
                report(shared, root)
            }
        }
    }
}

/// Conditions 1-3; returns the progress counter of condition 4.
fn quiescent(shared: &Shared, root: &TaskRef) -> Option<u64> {
    if shared.is_shutting_down() || !root.is_parked() {
        return None;
    }
    if shared.idle.num_sleeping() != shared.workers.len() {
        return None;
    }
    // Fibers waiting on sockets: a peer may wake them (`crate::reactor`).
    if shared.reactor.get().is_some_and(|r| r.waiting() != 0) {
        return None;
    }
    let mut progress = 0u64;
    for w in shared.workers.iter() {
        if !w.sleeper.is_sleeping() || w.queue_len() != 0 || w.timers.load(SeqCst) != 0 {
            return None;
        }
        progress = progress.wrapping_add(w.counters.resumes.load(Relaxed)).wrapping_add(w.counters.parks.load(Relaxed));
    }
    Some(progress)
}

fn report(shared: &Shared, root: &TaskRef) -> Option<String> {
    let mut parked: Vec<TaskRef> = shared.registry.snapshot().into_iter().filter(|t| t.is_parked()).collect();
    parked.sort_by_key(|t| t.id);
    if !parked.iter().any(|t| t.id == root.id) {
        return None;
    }
    let mut lines = Vec::with_capacity(parked.len());
    for t in &parked {
        let what = wait_kind::describe(t.wait_kind.load(Relaxed), t.wait_obj.load(Relaxed))?;
        let name = match &t.name {
            Some(n) => format!("{n:?}"),
            None => "(unnamed)".to_string(),
        };
        lines.push(format!("fiber {} {name} [{what}]", t.id));
    }
    let mut msg = format!(
        "all fibers are asleep - deadlock! Runtime::block_on waits for fiber {}, and no fiber of \
         the runtime can run again ({} parked, no timer pending):\n",
        root.id,
        parked.len()
    );
    for l in lines {
        let _ = writeln!(msg, "  {l}");
    }
    if let Some(note) = shared.stacks.starvation_note() {
        let _ = writeln!(msg, "{note}");
    }
    Some(msg)
}
