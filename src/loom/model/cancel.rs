//! The calls of the loom model `cancel_vs_grant` (`runtime::cancel`,
//! step 3): a cancellation request and a channel grant racing for one
//! parked fiber.

use super::{FiberState, HandoffCell, HandoffQueue, HandoffWaiter};

impl FiberState {
    /// `runtime::cancel::request`: set `CANCEL`, then the wake-up
    /// transition. `true`: the caller won `PARKED -> QUEUED` and pushes
    /// the fiber (the real code hands the push to `Shared::reschedule`).
    pub fn request_cancel(&self) -> bool {
        let mut push = false;
        crate::runtime::cancel::request(&self.0, |t| {
            push = true;
            // The parked task's reference to itself, handed over by the
            // transition: a real canceller pushes it; the model keeps the
            // count as it was.
            std::mem::forget(t);
        });
        push
    }
    /// What a cancellation point reads (`runtime::cancel::cancel_point`).
    pub fn cancel_requested(&self) -> bool {
        self.0.flags_load() & crate::runtime::task::CANCEL != 0
    }
}

// SAFETY: the models share a cell (in an `Arc`) between the receiver and
// whoever resumes it; every access follows `Handoff`'s protocol, which is
// what the models check (loom reports an unordered access to the cell).
unsafe impl Sync for HandoffCell {}
// SAFETY: as above; the cell holds a `u64`.
unsafe impl Send for HandoffCell {}

// SAFETY: a model's waiter is a thread's (`NodeKind::Thread`: an `Arc` of a
// flag and a thread handle, both `Send`); it is moved to whichever model
// thread resumes the waiting party.
unsafe impl Send for HandoffWaiter {}

impl HandoffQueue {
    /// `send` to a waiting *fiber*: the grant (fill the cell, signal), then,
    /// still under the lock, the wake-up transition a fiber entry's
    /// `Waker::signal` performs. Returns the value back when no receiver
    /// waits, and whether this sender won `PARKED -> QUEUED` (it then
    /// pushes the fiber).
    pub fn send_waking(&self, v: u64, fiber: &FiberState) -> (Option<u64>, bool) {
        let mut v = Some(v);
        let mut g = self.0.lock();
        let e = g.grant_first_where_then(
            |_| true,
            |h| {
                if let Some(v) = v.take() {
                    // SAFETY: under the lock, on the entry just popped,
                    // before its signal.
                    unsafe { h.put(v) }
                }
            },
        );
        let push = e.is_some() && fiber.transition_to_notified();
        drop(g);
        (v, push)
    }
}

impl<R: Send + 'static> super::ForkJob<R> {
    /// The owner of a stolen `join` job, cancelled (`runtime::spawn::join`):
    /// wait on the latch, passing the cancellation on to the job (through
    /// its `runner` lock) before the first park; a runner found there is
    /// cancelled as `JoinHandle::cancel` would (`cancel::request`). Then
    /// claim exclusive access, as `wait_and_release` does. Returns the
    /// result and whether the cancellation was passed on.
    pub fn wait_cancelling_and_release(&mut self) -> (Result<R, crate::runtime::error::JoinError>, bool) {
        let r = self.job.wait_or_cancel(
            || true,
            |runner| {
                crate::runtime::cancel::request(&runner, |t| {
                    // A parked runner's own reference (the model's runner
                    // never parks; kept as the real canceller's push would).
                    std::mem::forget(t)
                })
            },
        );
        self.job.assert_free();
        r
    }
}

impl super::ForkJobRef {
    /// The thief's `job_task` and `JobMain::run`: record the runner fiber
    /// (`JobRef::set_runner`, which sets its `CANCEL` when the owner
    /// cancelled the job already), then drop the closure unrun if the
    /// runner is cancelled, else run it. Returns whether it ran.
    ///
    /// # Safety
    /// As for `execute`.
    pub unsafe fn run_as(self, runner: &FiberState) -> bool {
        // SAFETY: the caller's contract.
        unsafe { self.0.set_runner(runner.0.clone()) };
        if runner.cancel_requested() {
            // SAFETY: the caller's contract.
            unsafe { self.0.cancel() };
            false
        } else {
            // SAFETY: the caller's contract.
            unsafe { self.0.execute() };
            true
        }
    }
}
