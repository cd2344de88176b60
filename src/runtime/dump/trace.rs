//! Backtraces of parked fibers, captured at the park point while the user
//! has turned them on ([`Runtime::set_park_backtraces`](crate::Runtime::set_park_backtraces)).
//!
//! Rules:
//! * Off (the default), a park pays one relaxed load of a process-wide
//!   count (runtimes with capture on) and a branch: nothing else.
//! * On, every wait of a fiber of that runtime captures
//!   `std::backtrace::Backtrace::force_capture()` (tens of microseconds:
//!   a diagnosis setting) when it records its wait reason, into its task.
//! * A task holds at most one trace, behind one pointer (an
//!   `Arc::into_raw`, null for none). The fiber swaps a new one in; a dump
//!   swaps it out, clones the `Arc` and puts it back unless the fiber has
//!   put a newer one meanwhile: each pointer has exactly one owner at every
//!   instant, so no trace is freed while read.
//! * A dump shows a fiber's trace only if it was taken at the wait the
//!   fiber is in now (same site and object), and only while capture is on.

use std::backtrace::Backtrace;
use std::panic::Location;
use std::ptr;
use std::sync::atomic::Ordering::*;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize};
use std::sync::Arc;

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

/// The trace slot of a task (module rules).
pub(crate) struct TraceSlot(AtomicPtr<ParkBacktrace>);

impl TraceSlot {
    pub(crate) const fn new() -> TraceSlot {
        TraceSlot(AtomicPtr::new(ptr::null_mut()))
    }

    /// Put `t` in, dropping the trace it replaces.
    fn put(&self, t: Arc<ParkBacktrace>) {
        let old = self.0.swap(Arc::into_raw(t).cast_mut(), AcqRel);
        if !old.is_null() {
            // SAFETY: a non-null pointer in the slot is an `Arc::into_raw`
            // whose count the slot owned; the swap gave it to us.
            drop(unsafe { Arc::from_raw(old) });
        }
    }

    /// A clone of the trace in the slot, left in place (module rules).
    pub(crate) fn peek(&self) -> Option<Arc<ParkBacktrace>> {
        let p = self.0.swap(ptr::null_mut(), AcqRel);
        if p.is_null() {
            return None;
        }
        // SAFETY: as in `put`: the swap made us the owner of this count.
        let mine = unsafe { Arc::from_raw(p) };
        let copy = mine.clone();
        let back = Arc::into_raw(mine).cast_mut();
        if self.0.compare_exchange(ptr::null_mut(), back, AcqRel, Relaxed).is_err() {
            // SAFETY: the CAS failed, so `back` is still ours alone.
            drop(unsafe { Arc::from_raw(back) });
        }
        Some(copy)
    }
}

impl Drop for TraceSlot {
    fn drop(&mut self) {
        let p = *self.0.get_mut();
        if !p.is_null() {
            // SAFETY: the slot owns the count of its non-null pointer.
            drop(unsafe { Arc::from_raw(p) });
        }
    }
}

/// Per runtime: capture is on (in `Insight`).
pub(crate) struct TraceSwitch(AtomicBool);

impl TraceSwitch {
    pub(crate) const fn new() -> TraceSwitch {
        TraceSwitch(AtomicBool::new(false))
    }

    pub(crate) fn is_on(&self) -> bool {
        self.0.load(Relaxed)
    }

    /// Turn capture on or off; keeps the process-wide count.
    pub(crate) fn set(&self, on: bool) {
        match (self.0.swap(on, Relaxed), on) {
            (false, true) => {
                ANY_ON.fetch_add(1, Relaxed);
            }
            (true, false) => {
                ANY_ON.fetch_sub(1, Relaxed);
            }
            _ => {}
        }
    }
}

impl Drop for TraceSwitch {
    fn drop(&mut self) {
        self.set(false);
    }
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
    let shared = crate::runtime::context::current_shared_ptr();
    // SAFETY: a non-null pointer is the running worker's `Shared`, alive
    // while this fiber runs on it.
    if shared.is_null() || !unsafe { &*shared }.insight.traces.is_on() {
        return;
    }
    t.park_trace.put(Arc::new(ParkBacktrace { site, obj, trace: Backtrace::force_capture() }));
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
    let runtime_capture = |s: &str| s.starts_with("numafiber::runtime::dump::trace::") || s.starts_with("numafiber::runtime::context::");
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
