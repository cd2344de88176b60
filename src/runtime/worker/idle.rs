//! The idle-worker protocol: which workers sleep, and the two halves of the
//! wake-up handshake (the protocol itself is described at the top of
//! `queues.rs` and in `../README.md`, "Parking and why no wake-up is lost").
//!
//! This is the whole of the protocol's synchronisation, kept apart from the
//! queues (crossbeam-deque) and the thread handles so that the loom models
//! in `tests/loom.rs` run exactly this code: the worker calls
//! [`Idle::sleep`] with a closure that re-checks its queues, and wakers call
//! [`Idle::notify_worker`] / [`Idle::notify_idle`] after pushing work.

use crate::loom::sync::atomic::{fence, AtomicBool, AtomicUsize, Ordering::*};

/// One worker's sleeping flag: `true` from its announcement until it is
/// claimed by a waker or withdraws itself.
#[derive(Debug)]
pub(crate) struct Sleeper {
    sleeping: AtomicBool,
    /// Set by the waker that claimed this worker for a spawned fiber in a
    /// slot ([`Idle::notify_spawned`]), read and cleared by the worker's
    /// next search. A hint, not part of the handshake.
    for_spawn: AtomicBool,
}

impl Sleeper {
    pub(crate) fn new() -> Sleeper {
        Sleeper { sleeping: AtomicBool::new(false), for_spawn: AtomicBool::new(false) }
    }

    /// Owner only: whether the waker that last claimed us did so for a
    /// spawned fiber in a slot, clearing the mark.
    #[inline]
    pub(crate) fn take_spawn_wake(&self) -> bool {
        let set = self.for_spawn.load(Relaxed);
        if set {
            self.for_spawn.store(false, Relaxed);
        }
        set
    }

    /// Announced and neither claimed nor withdrawn (deadlock detector).
    pub(crate) fn is_sleeping(&self) -> bool {
        self.sleeping.load(SeqCst)
    }
}

/// The workers a waker may claim: their flags and how to unpark them.
pub(crate) trait Sleepers {
    fn count(&self) -> usize;
    fn sleeper(&self, i: usize) -> &Sleeper;
    /// Unpark worker `i`'s thread (a token if it is not parked yet).
    fn unpark(&self, i: usize);
}

/// Runtime-wide idle counters, on lines of their own (128 bytes: two lines,
/// for adjacent-line prefetchers). Every search and every busy/idle
/// transition writes them, while the fields beside them in `Shared` (the
/// shutdown flag, the worker table, the scheduler) are read by every worker
/// on every pick: sharing a line with those would make each write cost the
/// other workers a miss.
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Idle {
    /// Workers announced asleep and not claimed or withdrawn. Only the
    /// claimer (or the withdrawing worker) decrements, so it is exact.
    num_sleeping: AtomicUsize,
    /// Workers scanning victims right now (stealing policies).
    num_searching: AtomicUsize,
    /// Round-robin start for waking an idle worker.
    wake_rr: AtomicUsize,
    /// Workers running fibers (between finding work and their next
    /// search; only `WorkerLocal::set_busy`'s transitions change it): a
    /// parking worker watches while this is non-zero
    /// (`WorkerLocal::watch_deadline`). A hint, not part of the handshake.
    num_busy: AtomicUsize,
    /// Workers in a *watching* park (a park with a watch deadline,
    /// `WorkerLocal::watch_deadline`). A lone fiber woken into a wake slot
    /// wakes a sleeper only while this is zero (`notify_unwatched`). A
    /// hint, not part of the handshake.
    num_watching: AtomicUsize,
}

impl Idle {
    pub(crate) fn new() -> Idle {
        Idle {
            num_sleeping: AtomicUsize::new(0),
            num_searching: AtomicUsize::new(0),
            wake_rr: AtomicUsize::new(0),
            num_busy: AtomicUsize::new(0),
            num_watching: AtomicUsize::new(0),
        }
    }

    /// A worker starts (`true`) or ends a watching park.
    #[inline]
    pub(crate) fn set_watching(&self, watching: bool) {
        count(&self.num_watching, watching);
    }

    /// Waker side: a lone fiber was made runnable into the caller's wake
    /// slot. Nobody need run it but the caller, yet if the caller's fiber
    /// computes on, an idle worker must eventually look: wake one sleeper
    /// unless some worker searches or watches already (then it will look).
    /// No fence, as in `notify_idle`: a stale read only costs parallelism.
    #[inline]
    pub(crate) fn notify_unwatched<S: Sleepers + ?Sized>(&self, ws: &S, steals: bool) {
        if steals && self.num_sleeping.load(Relaxed) != 0 && self.num_watching.load(Relaxed) == 0 {
            self.notify_idle_after_fence(ws, false);
        }
    }

    /// A worker started (`true`) or stopped running fibers.
    #[inline]
    pub(crate) fn set_busy(&self, busy: bool) {
        count(&self.num_busy, busy);
    }

    /// Workers running fibers now (a relaxed hint).
    #[inline]
    pub(crate) fn num_busy(&self) -> usize {
        self.num_busy.load(Relaxed)
    }

    /// Workers asleep now (deadlock detector).
    pub(crate) fn num_sleeping(&self) -> usize {
        self.num_sleeping.load(SeqCst)
    }

    /// Some worker is asleep or searching (a relaxed hint).
    #[inline]
    pub(crate) fn any_idle(&self) -> bool {
        self.num_sleeping.load(Relaxed) != 0 || self.num_searching.load(Relaxed) != 0
    }

    /// A worker starts scanning victims; returns how many others were
    /// searching already (at most half the workers spin).
    #[inline]
    pub(crate) fn begin_search(&self) -> usize {
        self.num_searching.fetch_add(1, SeqCst)
    }

    /// The worker is done scanning victims.
    #[inline]
    pub(crate) fn end_search(&self) {
        self.num_searching.fetch_sub(1, SeqCst);
    }

    /// Sleeper side. Announce `me` asleep, then (after a `SeqCst` fence)
    /// re-check for work with `has_work`; found: withdraw and return.
    /// Otherwise call `park` until it returns `false` (stop waiting: timer
    /// due, shutdown) or a waker has claimed `me`; unclaimed, withdraw.
    /// Returns whether a waker claimed `me` (`WorkerStats::woken`).
    pub(crate) fn sleep(&self, me: &Sleeper, has_work: impl FnOnce() -> bool, mut park: impl FnMut() -> bool) -> bool {
        me.sleeping.store(true, SeqCst);
        self.num_sleeping.fetch_add(1, SeqCst);
        fence(SeqCst);
        if has_work() {
            return !self.withdraw(me);
        }
        while park() {
            if !me.sleeping.load(SeqCst) {
                return true; // claimed and woken by someone who made work visible
            }
        }
        !self.withdraw(me)
    }

    /// Take back our own announcement unless a waker claimed it first;
    /// returns whether we took it back.
    pub(crate) fn withdraw(&self, me: &Sleeper) -> bool {
        if me.sleeping.compare_exchange(true, false, SeqCst, Relaxed).is_ok() {
            self.num_sleeping.fetch_sub(1, SeqCst);
            true
        } else {
            false
        }
    }

    /// Waker side: work was pushed where worker `target` will look (its
    /// inbox): make sure someone runs it.
    pub(crate) fn notify_worker<S: Sleepers + ?Sized>(&self, ws: &S, target: usize, steals: bool) {
        fence(SeqCst);
        if ws.sleeper(target).sleeping.load(Relaxed) && self.claim(ws, target) {
            return;
        }
        if steals {
            self.notify_idle_after_fence(ws, false);
        }
    }

    /// Waker side: work was pushed to the caller's own deque; wake an idle
    /// worker to steal it, unless one is already searching. No fence: the
    /// caller pops that work itself, so a stale read only costs parallelism
    /// (see `Shared::notify_idle`).
    #[inline]
    pub(crate) fn notify_idle<S: Sleepers + ?Sized>(&self, ws: &S, steals: bool) {
        if steals && self.num_sleeping.load(Relaxed) != 0 {
            self.notify_idle_after_fence(ws, false);
        }
    }

    /// Waker side: a spawned fiber went into the caller's wake slot or
    /// held-child slot, where a thief takes it only once it has sat there
    /// for the grace period. As [`Idle::notify_idle`], and the sleeper
    /// woken is marked ([`Sleeper::take_spawn_wake`]) so that its search
    /// lasts long enough to see the entry ripen: a search of one pass would
    /// always come too early, and each spawn would wake it again.
    #[inline]
    pub(crate) fn notify_spawned<S: Sleepers + ?Sized>(&self, ws: &S, steals: bool) {
        if steals && self.num_sleeping.load(Relaxed) != 0 {
            self.notify_idle_after_fence(ws, true);
        }
    }

    /// Wake one sleeper unless some worker searches; `for_spawn` marks the
    /// claim ([`Idle::notify_spawned`]).
    fn notify_idle_after_fence<S: Sleepers + ?Sized>(&self, ws: &S, for_spawn: bool) {
        if self.num_searching.load(Relaxed) != 0 || self.num_sleeping.load(Relaxed) == 0 {
            return;
        }
        let n = ws.count();
        let start = self.wake_rr.fetch_add(1, Relaxed);
        for i in 0..n {
            let t = (start + i) % n;
            if ws.sleeper(t).sleeping.load(Relaxed) && self.claim_marked(ws, t, for_spawn) {
                return;
            }
        }
    }

    /// Claim sleeping worker `t` and unpark it. Returns whether we did.
    pub(crate) fn claim<S: Sleepers + ?Sized>(&self, ws: &S, t: usize) -> bool {
        self.claim_marked(ws, t, false)
    }

    /// [`Idle::claim`], marking the claim as one for a spawned fiber (the
    /// mark is stored before the unpark, which the woken worker's search
    /// follows).
    fn claim_marked<S: Sleepers + ?Sized>(&self, ws: &S, t: usize, for_spawn: bool) -> bool {
        let sl = ws.sleeper(t);
        if sl.sleeping.compare_exchange(true, false, SeqCst, Relaxed).is_ok() {
            self.num_sleeping.fetch_sub(1, SeqCst);
            if for_spawn {
                sl.for_spawn.store(true, Relaxed);
            }
            ws.unpark(t);
            true
        } else {
            false
        }
    }

    /// Wake every worker (shutdown).
    pub(crate) fn wake_all<S: Sleepers + ?Sized>(&self, ws: &S) {
        for i in 0..ws.count() {
            self.claim(ws, i);
            ws.unpark(i);
        }
    }
}

/// One more (`up`) or one fewer in a relaxed hint counter.
#[inline]
fn count(c: &AtomicUsize, up: bool) {
    if up {
        c.fetch_add(1, Relaxed);
    } else {
        c.fetch_sub(1, Relaxed);
    }
}
