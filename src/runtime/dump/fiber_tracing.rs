//! The `tracing` feature: a span per fiber, entered while the fiber runs,
//! and events where it suspends and resumes. Compiled only with the
//! feature; the runtime's paths call these hooks under
//! `#[cfg(feature = "tracing")]`, so without it nothing is paid.
//!
//! Rules:
//! * The span (`numafiber.fiber`, target `numafiber::fiber`, level TRACE;
//!   fields `fiber.id`, `fiber.name`, `worker`, `node`, `spawn.file`,
//!   `spawn.line`, `spawn.column`) is created when a spawned fiber starts
//!   running (`cancel::run_main`) and kept among its fiber-locals, under a
//!   key of the runtime's own (no task field: the task's size is bounded).
//! * It is entered on the thread that runs the fiber and exited before the
//!   fiber suspends (`park::suspend_task`), then entered again when the
//!   fiber resumes, on whatever thread that is: a subscriber's per-thread
//!   span stack always matches what runs on that thread.
//! * Events (TRACE, target `numafiber::fiber`, inside the span): `park`
//!   (with the wait kind and the user's wait site) when the fiber suspends
//!   to wait, `yield` when it suspends runnable, `resume` (with the worker,
//!   and `migrated` when it moved) when it runs again after either. The
//!   waker's side (`wake`, in the waker's span) and steals (`steal`,
//!   target `numafiber::steal`) have their hooks here for `Shared::wake`
//!   and the worker loop.
//! * Only the fiber itself touches its span (fiber-locals, rule 5).

use tracing::Span;

use crate::runtime::context;
use crate::runtime::task::locals::LocalMap;
use crate::runtime::task::{Suspend, Task};

/// The key of a fiber's span among its fiber-locals (an address no
/// `FiberLocal` static has).
static SPAN_KEY: u8 = 0;

fn key() -> usize {
    &SPAN_KEY as *const u8 as usize
}

/// The fiber's span, if it has one.
fn span_of(t: &Task) -> Option<&Span> {
    // SAFETY: only the running fiber touches its own locals (`task::locals`,
    // rule 5), and it is the caller; no `&mut` to them is alive.
    let map: Option<&LocalMap> = unsafe { (*t.locals.get()).as_deref() };
    let p = map?.get(key())?;
    // SAFETY: a value of the fiber's map, alive until the fiber removes it
    // (`fiber_end`) or ends; read here by the fiber itself.
    unsafe { &*p }.downcast_ref::<Span>()
}

fn where_now() -> (Option<usize>, Option<usize>) {
    match context::worker() {
        Some(w) => (Some(w.index), Some(w.shared.node_of(w.index))),
        None => (None, None),
    }
}

/// A spawned fiber starts running on this thread: make its span and enter
/// it.
pub(crate) fn fiber_start(t: &Task) {
    let (worker, node) = where_now();
    let site = t.spawn_site;
    let span = tracing::trace_span!(
        target: "numafiber::fiber",
        "numafiber.fiber",
        fiber.id = t.id,
        fiber.name = t.name.as_deref(),
        worker,
        node,
        spawn.file = site.map(|l| l.file()),
        spawn.line = site.map(|l| l.line()),
        spawn.column = site.map(|l| l.column()),
    );
    if span.is_disabled() {
        return;
    }
    span.with_subscriber(|(id, d)| d.enter(id));
    // SAFETY: the fiber's own locals, at its start (`task::locals`, rule
    // 5); no other borrow of them is alive.
    let slot = unsafe { &mut *t.locals.get() };
    slot.get_or_insert_with(Default::default).push(key(), Box::new(span));
}

/// The fiber ends (its closure returned or unwound): exit and drop its span.
pub(crate) fn fiber_end(t: &Task) {
    // SAFETY: the fiber's own locals, after its closure (`task::locals`,
    // rule 5); no other borrow of them is alive.
    let slot = unsafe { &mut *t.locals.get() };
    let Some(span) = slot.as_mut().and_then(|m| m.remove(key())) else { return };
    if let Some(span) = span.downcast_ref::<Span>() {
        span.with_subscriber(|(id, d)| d.exit(id));
    }
}

/// The fiber is about to suspend for `reason`: the event, then exit the span.
#[inline]
pub(crate) fn before_suspend(t: &Task, reason: &Suspend) {
    let Some(span) = span_of(t) else { return };
    match reason {
        Suspend::Park => {
            let kind = crate::runtime::dump::WaitKind::from_raw(t.wait_kind.load(std::sync::atomic::Ordering::Relaxed));
            let site = t.wait_site();
            tracing::trace!(
                target: "numafiber::fiber",
                wait = kind.map(|k| k.as_str()),
                wait.file = site.map(|l| l.file()),
                wait.line = site.map(|l| l.line()),
                "park"
            );
        }
        _ => tracing::trace!(target: "numafiber::fiber", "yield"),
    }
    span.with_subscriber(|(id, d)| d.exit(id));
}

/// The fiber runs again (maybe on another thread): enter its span, then
/// the event.
#[inline]
pub(crate) fn after_resume(t: &Task, was_on: Option<usize>) {
    let Some(span) = span_of(t) else { return };
    span.with_subscriber(|(id, d)| d.enter(id));
    let (worker, _) = where_now();
    tracing::trace!(target: "numafiber::fiber", worker, migrated = worker != was_on, "resume");
}

/// The worker the calling thread is (for `after_resume`'s `migrated`).
#[inline]
pub(crate) fn current_worker() -> Option<usize> {
    context::worker().map(|w| w.index)
}

/// A steal: worker `thief` took `count` fibers from worker `victim`
/// (`remote`: of another node). For the worker loop's successful steal
/// (`WorkerLocal::steal_pass`); not called from there yet.
#[allow(dead_code)]
pub(crate) fn steal(thief: usize, victim: usize, count: usize, remote: bool) {
    tracing::trace!(target: "numafiber::steal", thief, victim, count, remote, "steal");
}

/// A wake: the caller (a fiber, inside its span, or a thread) made the
/// parked fiber `t` runnable. For `Shared::wake` once it won the
/// transition; not called from there yet.
#[allow(dead_code)]
pub(crate) fn wake(t: &Task) {
    tracing::trace!(target: "numafiber::fiber", woken = t.id, "wake");
}
