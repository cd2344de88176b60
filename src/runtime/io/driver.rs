//! The driver hand-off: which idle worker sleeps in `epoll_wait`, and how a
//! waker reaches it. The protocol is in `../README.md`, "The I/O driver"; this
//! is its whole synchronisation, on the loom facade, so that the models in
//! `tests/loom.rs` run this code (with a stand-in for `mio::Poll`).

use crate::loom::sync::atomic::{fence, AtomicBool, AtomicU8, Ordering::*};
use crate::runtime::worker::idle::Sleeper;

/// Who may poll the reactor: at most one worker at a time (the *driver*).
///
/// One word, so that "the role is taken" and "someone wanted it" are
/// ordered by read-modify-writes on the same location: a failed entry sets
/// `CONTENDED` while `DRIVING` is set, and the holder's `leave` swaps the
/// word, so it sees every contention recorded against it.
#[derive(Debug)]
pub(crate) struct Gate {
    state: AtomicU8,
}

const DRIVING: u8 = 1;
const CONTENDED: u8 = 2;

impl Gate {
    pub(crate) fn new() -> Gate {
        Gate { state: AtomicU8::new(0) }
    }

    /// Try to become the driver; on failure record the contention (the
    /// holder then hands off when it leaves).
    pub(crate) fn try_enter(&self) -> bool {
        let mut s = self.state.load(Relaxed);
        loop {
            let (new, enter) = if s & DRIVING == 0 { (s | DRIVING, true) } else { (s | CONTENDED, false) };
            if new == s {
                return false; // contention already recorded
            }
            match self.state.compare_exchange(s, new, AcqRel, Relaxed) {
                Ok(_) => return enter,
                Err(x) => s = x,
            }
        }
    }

    /// Some worker holds the role now (a hint: the stall monitor's check).
    pub(crate) fn is_taken(&self) -> bool {
        self.state.load(Relaxed) & DRIVING != 0
    }

    /// Give the role back. Returns whether some worker failed to enter
    /// meanwhile (then the caller must hand off: wake a sleeper).
    pub(crate) fn leave(&self) -> bool {
        self.state.swap(0, AcqRel) & CONTENDED != 0
    }
}

/// One worker's "I am in `epoll_wait`" flag, read by whoever unparks it.
#[derive(Debug)]
pub(crate) struct PollFlag {
    polling: AtomicBool,
}

impl PollFlag {
    pub(crate) fn new() -> PollFlag {
        PollFlag { polling: AtomicBool::new(false) }
    }

    /// The driver is about to block in the poll. Set the flag, then check
    /// that nobody claimed the worker meanwhile (a claimer clears
    /// `sleeping` *before* it reads this flag): if one did, do not block.
    /// With a `SeqCst` fence on each side (here, and in `in_poll` after
    /// the claim) either the claimer's read comes after our store (it sees
    /// `polling` and wakes the poll), or its claim comes before our check
    /// (we see it and do not poll).
    pub(crate) fn begin_poll(&self, me: &Sleeper) -> bool {
        self.polling.store(true, SeqCst);
        fence(SeqCst);
        if !me.is_sleeping() {
            self.polling.store(false, SeqCst);
            return false;
        }
        true
    }

    /// The poll returned.
    pub(crate) fn end_poll(&self) {
        self.polling.store(false, SeqCst);
    }

    /// Unpark side, after the claim: whether the worker must be woken
    /// through the reactor's waker (as well as its thread's park token).
    pub(crate) fn in_poll(&self) -> bool {
        fence(SeqCst);
        self.polling.load(SeqCst)
    }
}

/// What the park step needs from its surroundings: the poll itself, the
/// futex, the hand-off. The runtime implements it with mio and the worker's
/// thread (`runtime::io::park_worker`); the loom models with stand-ins.
pub(crate) trait Backend {
    /// Block in the poll up to the worker's next timer; how many fibers it
    /// made ready.
    fn poll(&self) -> usize;
    /// Poll without blocking (busy worker); whether it made fibers ready.
    fn poll_now(&self) -> bool;
    /// Park the thread on its futex up to the worker's next timer.
    fn park_thread(&self);
    /// The wait must end regardless (timer due, shutdown).
    fn must_leave(&self) -> bool;
    /// Claim and wake one sleeping worker other than the caller.
    fn hand_off(&self);
}

/// The park step of an idle worker (`Idle::sleep`'s `park`): drive the
/// reactor if `use_reactor` and the gate is free, else sleep on the futex.
/// Returns whether to go on waiting, as `Idle::sleep` expects. See
/// `runtime/README.md`, "The I/O driver", for why neither a wake-up nor
/// readiness is lost.
pub(crate) fn park_step(gate: &Gate, flag: &PollFlag, me: &Sleeper, use_reactor: bool, b: &impl Backend) -> bool {
    if use_reactor && gate.try_enter() {
        let polled = flag.begin_poll(me);
        let mut ready = 0;
        if polled {
            ready = b.poll();
            flag.end_poll();
        }
        let contended = gate.leave();
        let must_leave = b.must_leave();
        // Leaving with one fiber made ready: we run it ourselves and
        // drive again when we are idle, so nobody is woken (a futex wake
        // and a second core per event otherwise). Leaving with more, or
        // claimed, or told to: someone else must take the reactor over;
        // and a worker that found the gate taken while nothing was ready
        // is asleep on its futex waiting for exactly that. No readiness
        // is lost either way: events stay queued in the epoll instance
        // until the next poll, by us when idle, by a busy worker's
        // periodic poll, or by a sleeper the stall monitor wakes
        // (`runtime/README.md`, "Cheap wake-ups").
        if ready > 1 || must_leave || !me.is_sleeping() || (contended && ready == 0) {
            b.hand_off();
        }
        return polled && ready == 0 && !must_leave;
    }
    b.park_thread();
    true
}

/// A busy worker's periodic poll: only if nobody drives; hand off if
/// someone found the gate taken meanwhile. Whether fibers became ready.
pub(crate) fn poll_busy(gate: &Gate, b: &impl Backend) -> bool {
    if !gate.try_enter() {
        return false;
    }
    let ready = b.poll_now();
    if gate.leave() {
        b.hand_off();
    }
    ready
}
