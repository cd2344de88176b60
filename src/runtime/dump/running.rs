//! Reading another worker's running fiber without a cost on its switch
//! path (the dump and the stall monitor both need it).
//!
//! # The protocol (an asymmetric hazard pointer)
//!
//! A worker writes the fiber it resumes into its thread's `CURRENT` cell
//! and clears it when the fiber gives control back (two plain stores it
//! makes anyway, `worker::tls`). The cell's address is published once in
//! [`WorkerInsight::current_slot`] when the worker starts, and withdrawn
//! (under [`Insight::inspect`](super::Insight)) before the thread exits
//! ([`retire`]), so an inspector that holds `inspect` may read the cell.
//!
//! Reading the pointer is not enough: the fiber may finish and its task be
//! recycled or freed right after. So an inspector *protects* it:
//!
//! 1. read `p = CURRENT`; null: nothing runs;
//! 2. store `hazard = p`;
//! 3. `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`: every thread of the
//!    process executes a full memory barrier before it returns;
//! 4. read `CURRENT` again: if it is still `p`, take a strong reference
//!    (`Arc::increment_strong_count`), else give up;
//! 5. store `hazard = null` (release).
//!
//! A worker gives a task it ran away (the task parks and belongs to its
//! waker, goes to a queue other threads see, or finishes and is recycled)
//! only after clearing `CURRENT` and then seeing `hazard != task`
//! ([`WorkerInsight::wait_unprotected`], an acquire load and a compare on
//! those paths only; the private yield fast path keeps the task and does
//! not look). Why step 4's reference is safe to take:
//!
//! * if the barrier of step 3 ran on the worker after its store clearing
//!   `CURRENT`, that store is visible to step 4, which then does not see
//!   `p` (or sees `p` again because the worker resumed the same task,
//!   which it then holds);
//! * if it ran before that store, then the inspector's `hazard = p`
//!   (before its own barrier) is visible to the worker's later load, so
//!   the worker waits until step 5, and the task is alive meanwhile (the
//!   worker holds it). The release of step 5 pairs with the worker's
//!   acquire, so the increment of step 4 comes before the worker's
//!   release of its reference.
//!
//! The worker side is a compiler fence, one load and a compare; all of the
//! cost is the inspector's syscall. Without `membarrier` (kernels before
//! 4.14, or seccomp) [`protect`] returns `None`: the dump then shows a
//! running worker without naming its fiber, and the stall report names no
//! fiber.

use std::sync::atomic::{compiler_fence, AtomicPtr, AtomicU64, Ordering::*};
use std::sync::{Arc, OnceLock};

use crate::runtime::shared::Shared;
use crate::runtime::task::{Task, TaskRef};
use crate::runtime::worker::WorkerShared;

/// Per worker (in `WorkerShared::insight`).
#[derive(Debug, Default)]
pub(crate) struct WorkerInsight {
    /// Address of the worker thread's `CURRENT` cell while it runs its
    /// loop; null before and after.
    pub(crate) current_slot: AtomicPtr<AtomicPtr<Task>>,
    /// The task an inspector is protecting (protocol above).
    pub(crate) hazard: AtomicPtr<Task>,
    /// Coarse time (`Insight::clock_ms`) at which the monitor found this
    /// worker's fiber running past the threshold; 0 when not held.
    pub(crate) held_since_ms: AtomicU64,
    /// Coarse time at which the monitor first saw the current slice (the
    /// worker's switch counter and running fiber as they are now).
    pub(crate) slice_start_ms: AtomicU64,
}

impl WorkerInsight {
    /// Worker side: wait while an inspector protects `t` (protocol above).
    /// Called after `CURRENT` was cleared, before the worker gives `t`
    /// away.
    #[inline(always)]
    pub(crate) fn wait_unprotected(&self, t: *const Task) {
        compiler_fence(SeqCst);
        if std::ptr::eq(self.hazard.load(Acquire), t) {
            self.wait_slow(t);
        }
    }

    #[cold]
    #[inline(never)]
    fn wait_slow(&self, t: *const Task) {
        while std::ptr::eq(self.hazard.load(Acquire), t) {
            std::hint::spin_loop();
        }
    }

    /// The worker starts its loop: publish its `CURRENT` cell.
    pub(crate) fn publish(&self, slot: *const AtomicPtr<Task>) {
        self.current_slot.store(slot as *mut _, Release);
    }
}

/// The worker leaves its loop: withdraw its `CURRENT` cell under the
/// inspect lock, so no inspector reads it after the thread exits.
pub(crate) fn retire(shared: &Shared, w: &WorkerShared) {
    let _g = shared.insight.inspect.lock().unwrap_or_else(|e| e.into_inner());
    w.insight.current_slot.store(std::ptr::null_mut(), Release);
}

/// The fiber running on worker `w`, protected (protocol above), or `None`
/// if none runs or it cannot be read safely. The caller holds
/// `Insight::inspect` (serializing inspectors, so one hazard per worker
/// suffices, and keeping the `CURRENT` cell's thread alive).
pub(crate) fn protect(w: &WorkerShared) -> Option<TaskRef> {
    let slot = w.insight.current_slot.load(Acquire);
    if slot.is_null() {
        return None;
    }
    // SAFETY: a published slot is the worker thread's `CURRENT` cell, which
    // lives until the thread exits; it is withdrawn under the inspect lock
    // (`retire`) before that, and our caller holds that lock.
    let slot = unsafe { &*slot };
    let p = slot.load(Relaxed);
    if p.is_null() || !barrier_available() {
        return None;
    }
    w.insight.hazard.store(p, SeqCst);
    let ok = barrier();
    let t = if ok && slot.load(SeqCst) == p {
        // SAFETY: by the protocol above `p` is the worker's running task,
        // an `Arc<Task>` pointer (`CURRENT` is set from `&*task` of one)
        // that stays alive until we clear the hazard below.
        unsafe {
            Arc::increment_strong_count(p as *const Task);
            Some(Arc::from_raw(p as *const Task))
        }
    } else {
        None
    };
    w.insight.hazard.store(std::ptr::null_mut(), Release);
    t
}

const MEMBARRIER_CMD_QUERY: libc::c_int = 0;
const MEMBARRIER_CMD_PRIVATE_EXPEDITED: libc::c_int = 1 << 3;
const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: libc::c_int = 1 << 4;

fn membarrier(cmd: libc::c_int) -> libc::c_long {
    // SAFETY: membarrier takes no pointers; an unknown command is EINVAL.
    unsafe { libc::syscall(libc::SYS_membarrier, cmd, 0 as libc::c_uint, 0 as libc::c_int) }
}

/// `membarrier` private expedited is available and registered.
pub(crate) fn barrier_available() -> bool {
    static OK: OnceLock<bool> = OnceLock::new();
    *OK.get_or_init(|| {
        let cmds = membarrier(MEMBARRIER_CMD_QUERY);
        cmds >= 0
            && cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED as libc::c_long != 0
            && membarrier(MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED) == 0
    })
}

/// Step 3: a full barrier on every thread of the process.
fn barrier() -> bool {
    membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) == 0
}
