//! The owner's inline waiter ([`Inline`]): the caller of a join, fiber or
//! thread, kept in the packet's inline slot and woken by the completer.
//! Who may read and wake it, and why its plain pointers stay valid: the
//! `packet` module docs.

use std::sync::Arc;

use crate::loom::thread::{self, Thread};
use crate::runtime::context;
use crate::runtime::shared::Shared;
use crate::runtime::task::Task;

/// The owner's waiter in the inline slot: plain pointers for a fiber (valid
/// while the owner waits, module docs), a thread handle for a thread.
pub(super) enum Inline {
    Fiber { task: *const Task, shared: *const Shared },
    Thread(Thread),
}

impl Inline {
    /// The caller, as the owner's waiter.
    #[inline]
    pub(super) fn current() -> Inline {
        let (w, task) = context::worker_and_task();
        if w.is_null() || task.is_null() {
            return Inline::Thread(thread::current());
        }
        // SAFETY: a non-null WORKER points to this thread's live worker.
        let shared = unsafe { Arc::as_ptr(&(*w).shared) };
        Inline::Fiber { task, shared }
    }

    pub(super) fn same(&self, o: &Inline) -> bool {
        match (self, o) {
            (Inline::Fiber { task: a, .. }, Inline::Fiber { task: b, .. }) => std::ptr::eq(*a, *b),
            (Inline::Thread(a), Inline::Thread(b)) => a.id() == b.id(),
            _ => false,
        }
    }

    /// Wake the waiter (a token if it is not parked yet).
    ///
    /// # Safety
    /// For `Fiber`: the owner is inside its wait (the completer is between
    /// its `fetch_or(DONE)` and its `WOKEN` store), so the task and the
    /// runtime the pointers name are alive (module docs).
    pub(super) unsafe fn wake(&self) {
        match self {
            Inline::Fiber { task, shared } => {
                // SAFETY: alive (caller).
                if unsafe { (**task).transition_to_notified() } {
                    // We won `PARKED -> QUEUED`: the parked task's
                    // reference to itself is ours to push (`fiber::task`,
                    // step 5), so no count changes.
                    // SAFETY: `task` is the pointer of a live `Arc<Task>`
                    // and that reference exists (we won the CAS).
                    let t = unsafe { Arc::from_raw(*task) };
                    // SAFETY: `shared` is `Arc::as_ptr` of the owner's live
                    // runtime (caller); `ManuallyDrop` keeps its count.
                    let s = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(*shared) });
                    s.reschedule(t);
                }
            }
            Inline::Thread(t) => {
                crate::runtime::deadlock::note_thread_wake();
                t.unpark();
            }
        }
    }
}
