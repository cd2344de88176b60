//! Timers and the reactor as the worker loop sees them: arm and fire this
//! worker's timers, fire other workers' overdue ones, poll the reactor
//! between fibers.
//!
//! Rule: a worker fires its own timers between fibers, and another
//! worker's only when they are overdue by `timers::STEAL_GRACE`; the book's
//! "Timers any worker can fire" and "The I/O driver" (`../README.md`).

use std::time::Instant;

use crate::runtime::task::TaskRef;

use super::{timers, WorkerLocal};

impl WorkerLocal {
    /// Arm a timer that wakes `task` at `deadline` (`timers::WorkerTimers::add`).
    pub(crate) fn add_timer(&self, deadline: Instant, task: TaskRef) {
        self.me().timers.add(deadline, task);
    }

    #[inline]
    pub(super) fn fire_timers(&self) {
        if self.me().timers.any() {
            self.me().timers.fire_due(&self.shared, Instant::now(), false);
        }
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.me().timers.next_deadline()
    }

    /// Fire the timers of other workers that are overdue by
    /// `timers::STEAL_GRACE`: their owner runs a fiber that does not give
    /// control back ("Timers any worker can fire", `README.md`). The
    /// fibers woken come to this worker. Returns whether any was woken.
    pub(super) fn fire_others_timers(&self, now: Instant) -> bool {
        let shared = &self.shared;
        let mut woken = 0;
        for (i, w) in shared.workers.iter().enumerate() {
            if i != self.index && w.timers.overdue(now, timers::STEAL_GRACE) {
                woken += w.timers.fire_due(shared, now, true);
            }
        }
        woken != 0
    }

    /// Every `BUSY_POLL_TICKS` iterations, poll the reactor without
    /// blocking if fibers wait on sockets (a runtime whose workers never go
    /// idle must still see readiness).
    #[inline]
    pub(super) fn poll_reactor_if_due(&self) {
        let t = self.io_tick.get() + 1;
        if t < crate::runtime::io::BUSY_POLL_TICKS {
            self.io_tick.set(t);
            return;
        }
        self.io_tick.set(0);
        crate::runtime::io::poll_busy(&self.shared, self.index);
    }
}
