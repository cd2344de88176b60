//! The runtime's per-thread state, read only through `#[inline(never)]`
//! accessors.
//!
//! A fiber may suspend on one worker thread and resume on another. Inside a
//! function that spans a suspension, an inlined `thread_local!` access may
//! keep the address computed on the *old* thread (the compiler assumes a
//! function never changes threads; measured in release builds on these
//! machines). Every read below therefore goes through a function that is
//! never inlined, so each call computes the address on the thread that runs
//! it. Callers must not keep a reference obtained here across a suspension
//! point: call the accessor again after `suspend` returns.

use std::cell::Cell;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering::Relaxed};
use std::sync::Arc;

use crate::runtime::shared::Shared;
use crate::runtime::task::{Task, TaskRef};
use crate::runtime::worker::Counters;
use crate::runtime::worker::WorkerLocal;

thread_local! {
    static WORKER: Cell<*const WorkerLocal> = const { Cell::new(ptr::null()) };
    /// Atomic only so that an inspector on another thread may read it
    /// (`runtime::dump::running`): every access here is a relaxed load or
    /// store, the same plain moves a `Cell` compiles to (no swap: that
    /// would be a locked instruction).
    static CURRENT: AtomicPtr<Task> = const { AtomicPtr::new(ptr::null_mut()) };
}

/// The worker running on this thread, or null on other threads.
#[inline(never)]
pub(crate) fn worker_ptr() -> *const WorkerLocal {
    WORKER.with(|w| w.get())
}

/// This thread's worker, or `None` off a worker thread: the one way to
/// reach the `WorkerLocal` from outside the worker loop.
///
/// Rule for callers: use the reference only until the calling fiber next
/// suspends (park, yield, spawn with work-first, join), then call again;
/// after a suspension the fiber may run on another worker.
#[inline]
pub(crate) fn worker<'a>() -> Option<&'a WorkerLocal> {
    let w = worker_ptr();
    // SAFETY: WORKER is set only by `worker_main` to the `WorkerLocal` that
    // lives on that worker thread's stack for as long as its loop runs, and
    // reset to null before that value is dropped; it is read only by this
    // thread (a thread-local), and a fiber that resumes on another thread
    // reads that thread's cell (the accessor is not inlined). So a
    // non-null pointer names a live `WorkerLocal` for as long as the
    // calling code does not suspend, which the rule above makes it the
    // caller's duty to respect.
    unsafe { w.as_ref() }
}

#[inline(never)]
pub(crate) fn set_worker(p: *const WorkerLocal) {
    WORKER.with(|w| w.set(p))
}

/// The fiber running on this thread, or null.
#[inline(never)]
pub(crate) fn current_task_ptr() -> *const Task {
    CURRENT.with(|c| c.load(Relaxed))
}

/// Sets the current fiber and returns the previous one.
#[inline(never)]
pub(crate) fn replace_current_task(p: *const Task) -> *const Task {
    CURRENT.with(|c| {
        let prev = c.load(Relaxed);
        c.store(p as *mut Task, Relaxed);
        prev
    })
}

/// This thread's worker and running fiber, in one call (`fiber::join`).
#[inline(never)]
pub(crate) fn worker_and_task() -> (*const WorkerLocal, *const Task) {
    (WORKER.with(|w| w.get()), CURRENT.with(|c| c.load(Relaxed)))
}

/// The address of this thread's `CURRENT` cell. Only for code that never
/// runs on a fiber stack and so never changes threads: the worker loop
/// caches it once (`WorkerLocal::run`) and writes the running fiber through
/// it around every resume, without a call per write. The address is valid
/// for as long as the thread lives.
#[inline(never)]
pub(crate) fn current_task_slot() -> *const AtomicPtr<Task> {
    CURRENT.with(|c| c as *const AtomicPtr<Task>)
}

// ---------------------------------------------------------------------------
// The running fiber and its runtime.

/// The running fiber, if any.
pub(crate) fn current_task() -> Option<&'static Task> {
    let p = current_task_ptr();
    // SAFETY: a non-null CURRENT points to the task the worker (or the
    // shutdown drain) is running on this thread, and it holds a `TaskRef`
    // for at least as long as the fiber runs. The `'static` is never
    // exposed beyond one non-suspending use.
    (!p.is_null()).then(|| unsafe { &*p })
}

/// A new strong reference to the running task.
pub(crate) fn current_task_ref() -> Option<TaskRef> {
    let p = current_task_ptr();
    if p.is_null() {
        return None;
    }
    // SAFETY: CURRENT was set from `&*task` of a live `Arc<Task>` (so it is
    // the `Arc`'s pointer) that the runner keeps alive meanwhile.
    unsafe {
        Arc::increment_strong_count(p);
        Some(Arc::from_raw(p))
    }
}

/// The runtime of the calling worker thread.
pub(crate) fn current_shared() -> Option<Arc<Shared>> {
    let w = worker_ptr();
    // SAFETY: a non-null WORKER points to this thread's live worker.
    (!w.is_null()).then(|| unsafe { (*w).shared.clone() })
}

/// The running fiber's runtime, as a pointer (no count); null off a
/// worker. The `Arc` behind it lives while this thread's worker runs.
#[inline]
pub(crate) fn current_shared_ptr() -> *const Shared {
    let w = worker_ptr();
    // SAFETY: a non-null WORKER points to this thread's live worker.
    if w.is_null() {
        std::ptr::null()
    } else {
        unsafe { Arc::as_ptr(&(*w).shared) }
    }
}

pub(crate) fn current_task_and_shared() -> Option<(TaskRef, Arc<Shared>)> {
    let t = current_task_ref()?;
    let s = current_shared()?;
    Some((t, s))
}

/// Count one finished fiber on the worker running this thread.
pub(crate) fn note_completed() {
    let w = worker_ptr();
    if !w.is_null() {
        // SAFETY: this thread's live worker.
        let w = unsafe { &*w };
        Counters::bump(&w.shared.workers[w.index].counters.completed, 1);
    }
}

/// Id of the running fiber, if any.
pub(crate) fn current_id() -> Option<u64> {
    current_task().map(|t| t.id)
}

/// The running fiber is being destroyed by the shutdown drain.
pub(crate) fn current_is_cancelling() -> bool {
    current_task().is_some_and(|t| t.is_cancelling())
}

/// The running fiber cannot suspend now (being destroyed, or unwinding):
/// a wait loop must not spin on `park` then. `false` on plain threads.
pub(crate) fn current_cannot_suspend() -> bool {
    current_task().is_some_and(cannot_suspend)
}

/// Record what the running fiber is about to wait on (deadlock report,
/// dumps) and the user call that waits (the caller's location, passed
/// down by `#[track_caller]` from the public waiting function); no-op on
/// plain threads. Clear with `task::wait_kind::NONE`.
#[track_caller]
pub(crate) fn set_wait_reason(kind: u8, obj: u64) {
    set_wait_reason_at(kind, obj, std::panic::Location::caller());
}

/// `set_wait_reason` with the waiting call's location given.
pub(crate) fn set_wait_reason_at(kind: u8, obj: u64, site: &'static std::panic::Location<'static>) {
    if let Some(t) = current_task() {
        set_task_wait_reason_at(t, kind, obj, site);
    }
}

/// `set_wait_reason` for a caller that knows its own task `t`.
#[track_caller]
#[inline]
pub(crate) fn set_task_wait_reason(t: &Task, kind: u8, obj: u64) {
    set_task_wait_reason_at(t, kind, obj, std::panic::Location::caller());
}

/// `set_wait_reason_at` for a caller that knows its own task `t`.
#[inline]
pub(crate) fn set_task_wait_reason_at(t: &Task, kind: u8, obj: u64, site: &'static std::panic::Location<'static>) {
    crate::runtime::dump::trace::at_wait(t, kind, obj, site);
    t.set_wait_site(site);
    t.wait_obj.store(obj, Relaxed);
    t.wait_kind.store(kind, Relaxed);
}

/// The wait of `t` (the caller's own task) is over: clear its reason
/// (the site stays: it is read only while a reason is set).
#[inline]
pub(crate) fn clear_task_wait_reason(t: &Task) {
    t.wait_obj.store(0, Relaxed);
    t.wait_kind.store(crate::runtime::task::wait_kind::NONE, Relaxed);
}

/// The running fiber may not suspend: it is being destroyed, or it is
/// unwinding a panic (the panic count is per thread, so another fiber
/// resumed on this thread would see it).
#[inline]
pub(crate) fn cannot_suspend(t: &Task) -> bool {
    t.is_cancelling() || std::thread::panicking()
}
