//! Backtraces of parked fibers, captured at the park point while the user
//! has turned them on ([`Runtime::set_park_backtraces`](crate::Runtime::set_park_backtraces)).
//!
//! Rules:
//! * Off (the default), a wait record and a fiber's end each pay one
//!   relaxed load of a process-wide count (runtimes with capture on) and a
//!   branch: nothing else, and no task field.
//! * On, every wait of a fiber of that runtime captures
//!   `std::backtrace::Backtrace::force_capture()` (tens of microseconds:
//!   a diagnosis setting) when it records its wait reason, into the
//!   runtime's map by fiber id (`Traces`), replacing the fiber's previous
//!   one. The entry goes when the fiber ends (`cancel::run_main`), and
//!   every entry when capture is turned off (under the map's lock, which
//!   a capture also takes to check the switch: none is left behind).
//! * A dump shows a fiber's trace only if it was taken at the wait the
//!   fiber is in now (same site, and same object except for a sleep), and
//!   only while capture is on.

use std::backtrace::Backtrace;
use std::collections::HashMap;
use std::panic::Location;
use std::sync::atomic::Ordering::*;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};

use crate::runtime::task::Task;

/// Runtimes of this process with capture on.
static ANY_ON: AtomicUsize = AtomicUsize::new(0);

/// A backtrace taken when a fiber recorded its wait.
#[derive(Debug)]
pub(crate) struct ParkBacktrace {
    pub(crate) site: &'static Location<'static>,
    pub(crate) obj: u64,
    pub(crate) trace: Backtrace,
}

/// Per runtime (in `Insight`): the switch and the traces by fiber id.
pub(crate) struct Traces {
    on: AtomicBool,
    map: Mutex<HashMap<u64, Arc<ParkBacktrace>>>,
}

impl Traces {
    pub(crate) fn new() -> Traces {
        Traces { on: AtomicBool::new(false), map: Mutex::new(HashMap::new()) }
    }

    pub(crate) fn is_on(&self) -> bool {
        self.on.load(Relaxed)
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Arc<ParkBacktrace>>> {
        self.map.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Turn capture on or off (off drops every trace); keeps the
    /// process-wide count.
    pub(crate) fn set(&self, on: bool) {
        let mut map = self.map();
        match (self.on.swap(on, Relaxed), on) {
            (false, true) => {
                ANY_ON.fetch_add(1, Relaxed);
            }
            (true, false) => {
                ANY_ON.fetch_sub(1, Relaxed);
                *map = HashMap::new();
            }
            _ => {}
        }
    }

    /// Read the traces by fiber id (under the lock).
    pub(crate) fn with_map<R>(&self, f: impl FnOnce(&HashMap<u64, Arc<ParkBacktrace>>) -> R) -> R {
        f(&self.map())
    }
}

impl Drop for Traces {
    fn drop(&mut self) {
        self.set(false);
    }
}

/// The running worker's `Shared`, if any.
fn current_traces<'a>() -> Option<&'a Traces> {
    let shared = crate::runtime::context::current_shared_ptr();
    // SAFETY: a non-null pointer is the running worker's `Shared`, alive
    // while the calling fiber runs on it (the caller uses it only until
    // it returns).
    (!shared.is_null()).then(|| &unsafe { &*shared }.insight.traces)
}

/// At a fiber's wait record (its own task `t`): capture a trace if its
/// runtime has capture on. One load and a branch while no runtime has.
#[inline]
pub(crate) fn at_wait(t: &Task, kind: u8, obj: u64, site: &'static Location<'static>) {
    if ANY_ON.load(Relaxed) != 0 {
        capture(t, kind, obj, site);
    }
}

#[cold]
#[inline(never)]
fn capture(t: &Task, kind: u8, obj: u64, site: &'static Location<'static>) {
    if kind == crate::runtime::task::wait_kind::NONE {
        return;
    }
    let Some(traces) = current_traces() else { return };
    if !traces.is_on() {
        return;
    }
    let b = Arc::new(ParkBacktrace { site, obj, trace: Backtrace::force_capture() });
    let mut map = traces.map();
    if traces.is_on() {
        map.insert(t.id, b);
    }
}

/// A fiber ends (its own task `t`): drop its trace. One load and a branch
/// while no runtime captures.
#[inline]
pub(crate) fn at_end(t: &Task) {
    if ANY_ON.load(Relaxed) != 0 {
        forget(t.id);
    }
}

#[cold]
#[inline(never)]
fn forget(id: u64) {
    if let Some(traces) = current_traces() {
        traces.map().remove(&id);
    }
}

/// Write `bt` as `Backtrace`'s `Display` does, each line after `indent`,
/// without the frames of the capture itself (the first ones, in this
/// module and `context`) nor those that start the fiber (from the
/// runtime's `run_main` on, with the `catch_unwind` frames just above it),
/// renumbered from 0. A trace that does not parse as frames is written as is.
pub(crate) fn write_trimmed(f: &mut std::fmt::Formatter<'_>, bt: &Backtrace, indent: &str) -> std::fmt::Result {
    let text = bt.to_string();
    // (symbol, the frame's lines after its first).
    let mut frames: Vec<(&str, Vec<&str>)> = Vec::new();
    for line in text.lines() {
        let t = line.trim_start();
        match t.split_once(": ") {
            Some((n, sym)) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => frames.push((sym, Vec::new())),
            _ => match frames.last_mut() {
                Some(fr) => fr.1.push(line),
                None => return text.lines().try_for_each(|l| writeln!(f, "{indent}{l}")),
            },
        }
    }
    let runtime_capture =
        |s: &str| s.starts_with("numafiber::runtime::dump::trace::") || s.starts_with("numafiber::runtime::context::");
    let start = frames.iter().position(|fr| !runtime_capture(fr.0)).unwrap_or(0);
    let mut end = frames[start..]
        .iter()
        .position(|fr| fr.0.starts_with("numafiber::runtime::cancel::run_main") || fr.0.starts_with("corosensei::"))
        .map_or(frames.len(), |i| start + i);
    let unwind_frame = |s: &str| s.starts_with("std::panic") || s.starts_with("<core::panic::unwind_safe::");
    while end > start + 1 && unwind_frame(frames[end - 1].0) {
        end -= 1;
    }
    for (k, (sym, rest)) in frames[start..end].iter().enumerate() {
        writeln!(f, "{indent}{k:>4}: {sym}")?;
        for l in rest {
            writeln!(f, "{indent}{l}")?;
        }
    }
    if end < frames.len() {
        writeln!(f, "{indent}     (the fiber's start in the runtime)")?;
    }
    Ok(())
}
