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

use crate::runtime::worker::WorkerLocal;
use crate::runtime::task::Task;

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
