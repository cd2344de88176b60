//! The reactor: readiness of non-blocking sockets (mio, epoll on Linux)
//! reaching the fibers parked on them.
//!
//! One reactor per runtime, created when the first socket is registered.
//! It has no thread of its own: whichever worker goes idle first becomes
//! the *driver* and sleeps in `epoll_wait` (with its next timer as the
//! timeout) instead of on its futex; the other idle workers sleep on their
//! futexes. A busy worker also polls without blocking every
//! [`BUSY_POLL_TICKS`] loop iterations while fibers wait on sockets. The
//! hand-off protocol (who drives, how a waker reaches a worker in
//! `epoll_wait`, why no readiness and no wake-up is lost) is in
//! `../README.md`, "The I/O driver"; its synchronisation is in [`driver`].
//!
//! Readiness per socket ([`ScheduledIo`]): a sequence number per direction
//! (an atomic word, changed only under the socket's small mutex) and the
//! fibers waiting for it (under that mutex). An I/O call reads
//! the sequence, tries the syscall, and on `WouldBlock` parks only if the
//! sequence has not moved (an event in between means "retry"), so an edge
//! of mio's edge-triggered readiness is never missed.

pub(crate) mod driver;

use std::io;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use mio::event::Source;
use mio::{Events, Interest, Poll, Registry, Token, Waker};

use crate::runtime::shared::Shared;
use crate::runtime::task::TaskRef;

use self::driver::{Gate, PollFlag};

/// A busy worker polls the reactor (without blocking) every this many loop
/// iterations while some fiber waits on a socket, so readiness is not
/// starved by workers that never go idle.
pub(crate) const BUSY_POLL_TICKS: u32 = 61;

const WAKER_TOKEN: Token = Token(0);
const EVENTS_CAPACITY: usize = 1024;

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A direction of readiness.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dir {
    Read,
    Write,
}

/// The waiters of one socket, per direction (under `ScheduledIo::waiters`).
#[derive(Default)]
struct Waiters {
    /// Fibers parked until the next event of the direction.
    of: [WaitList; 2],
}

/// Fibers parked on one direction of a socket, in arrival order. The
/// first is kept inline: a socket served by one fiber has at most one
/// waiter per direction, and a wait then touches no heap buffer of its own
/// (one cache line fewer per wait where thousands of sockets are open).
#[derive(Default)]
struct WaitList {
    first: Option<TaskRef>,
    rest: Vec<TaskRef>,
}

impl WaitList {
    fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    fn push(&mut self, t: TaskRef) {
        if self.first.is_none() {
            self.first = Some(t);
        } else {
            self.rest.push(t);
        }
    }

    /// Take `t` out if it is in the list; the others keep their order.
    fn remove(&mut self, t: &TaskRef) -> bool {
        if self.first.as_ref().is_some_and(|f| Arc::ptr_eq(f, t)) {
            self.first = if self.rest.is_empty() { None } else { Some(self.rest.remove(0)) };
            return true;
        }
        match self.rest.iter().position(|x| Arc::ptr_eq(x, t)) {
            Some(i) => {
                self.rest.remove(i);
                true
            }
            None => false,
        }
    }

    /// Move every waiter to the end of `out`, in arrival order.
    fn take_all(&mut self, out: &mut Vec<TaskRef>) {
        if let Some(f) = self.first.take() {
            out.push(f);
        }
        out.append(&mut self.rest);
    }
}

/// The readiness record of one registered socket.
///
/// Rule: `seq` and `waiting` change only under the `waiters` lock, so
/// `add_waiter` (which checks `seq` under it) and `ready` (which bumps it
/// and takes the waiters under it) are ordered; readers of `seq` alone
/// (an I/O call about to try its syscall) need no lock: they compare
/// what they read with the count `add_waiter` sees under the lock.
pub(crate) struct ScheduledIo {
    waiters: Mutex<Waiters>,
    /// Per direction: the count of its readiness events shifted left by
    /// one, plus `CLOSED` once an event of it carried the peer's close or
    /// an error (then a short transfer no longer means "drained": no later
    /// event repeats the close). The flag is sticky.
    seq: [AtomicU64; 2],
    /// Per direction: how many fibers are in `waiters` (read without the
    /// lock by `remove_waiter`: 0 means a waiter woken by an event is
    /// already out of the list).
    waiting: [AtomicUsize; 2],
}

const CLOSED: u64 = 1;

impl ScheduledIo {
    fn new() -> ScheduledIo {
        ScheduledIo {
            waiters: Mutex::new(Waiters::default()),
            seq: [AtomicU64::new(0), AtomicU64::new(0)],
            waiting: [AtomicUsize::new(0), AtomicUsize::new(0)],
        }
    }

    /// The direction's event count (read before trying the syscall), and
    /// whether an event of it carried a close or an error so far.
    #[inline]
    pub(crate) fn seq(&self, d: Dir) -> (u64, bool) {
        let v = self.seq[d as usize].load(Acquire);
        (v >> 1, v & CLOSED != 0)
    }

    /// Register `task` as waiting for the next event of `d` unless one came
    /// since `seen` (then return `false`: retry the syscall).
    pub(crate) fn add_waiter(&self, reactor: &Reactor, d: Dir, seen: u64, task: &TaskRef) -> bool {
        let mut w = lock(&self.waiters);
        if self.seq[d as usize].load(Relaxed) >> 1 != seen {
            return false;
        }
        w.of[d as usize].push(task.clone());
        self.waiting[d as usize].store(w.of[d as usize].len(), Relaxed);
        // The fiber runs on the worker it last ran on: that worker's share.
        reactor.count_waiting(task.last_worker(), 1);
        true
    }

    /// Take `task` out of the waiters of `d` if it is still there (woken by
    /// a timer, or being unwound). A waiter woken by an event was taken out
    /// by `ready` before its wake-up, which happens before this call: with
    /// nobody in the list there is nothing to look for.
    pub(crate) fn remove_waiter(&self, reactor: &Reactor, d: Dir, task: &TaskRef) {
        if self.waiting[d as usize].load(Acquire) == 0 {
            return;
        }
        let mut s = lock(&self.waiters);
        let w = &mut s.of[d as usize];
        if w.remove(task) {
            self.waiting[d as usize].store(w.len(), Relaxed);
            reactor.count_waiting(task.last_worker(), -1);
        }
    }

    /// An event for this socket, polled by worker `me`: bump the ready
    /// directions' `seq` and move their waiters to `out`.
    fn ready(&self, reactor: &Reactor, me: usize, ev: &mio::event::Event, out: &mut Vec<TaskRef>) {
        let read = ev.is_readable() || ev.is_read_closed() || ev.is_error();
        let write = ev.is_writable() || ev.is_write_closed() || ev.is_error();
        let closed = [ev.is_read_closed() || ev.is_error(), ev.is_write_closed() || ev.is_error()];
        let mut s = lock(&self.waiters);
        for (d, on) in [(Dir::Read, read), (Dir::Write, write)] {
            if on {
                let i = d as usize;
                let v = self.seq[i].load(Relaxed);
                self.seq[i].store((v + 2) | if closed[i] { CLOSED } else { 0 }, Release);
                let n = s.of[i].len();
                if n != 0 {
                    s.of[i].take_all(out);
                    self.waiting[i].store(0, Release);
                    reactor.count_waiting(me, -(n as i64));
                }
            }
        }
    }
}

/// The registered sockets by token: a slab, so an event finds its socket
/// by index. A token is the slot's index + 1 (0 is the waker's) in the low
/// half of the word and the slot's generation in the high half: an event
/// for a socket deregistered since (its slot reused) finds another
/// generation and is dropped.
#[derive(Default)]
struct Sources {
    slots: Vec<SourceSlot>,
    free: Vec<usize>,
}

struct SourceSlot {
    generation: usize,
    io: Option<Arc<ScheduledIo>>,
}

const GEN_SHIFT: u32 = usize::BITS / 2;
const INDEX_MASK: usize = (1 << GEN_SHIFT) - 1;

impl Sources {
    /// Store `io`; its token.
    fn insert(&mut self, io: Arc<ScheduledIo>) -> io::Result<usize> {
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                if self.slots.len() >= INDEX_MASK - 1 {
                    return Err(io::Error::other(format!(
                        "numafiber::net: {} sockets are registered with the runtime's reactor, its limit; \
                         close sockets before opening more",
                        self.slots.len()
                    )));
                }
                self.slots.push(SourceSlot { generation: 0, io: None });
                self.slots.len() - 1
            }
        };
        let slot = &mut self.slots[i];
        slot.io = Some(io);
        Ok((slot.generation << GEN_SHIFT) | (i + 1))
    }

    /// The socket of `token`, if it is still registered.
    #[inline]
    fn get(&self, token: usize) -> Option<&Arc<ScheduledIo>> {
        let slot = self.slots.get((token & INDEX_MASK).checked_sub(1)?)?;
        if slot.generation != token >> GEN_SHIFT {
            return None;
        }
        slot.io.as_ref()
    }

    /// Forget the socket of `token`; its slot is reused under the next
    /// generation (which wraps within the high half of the word: an event
    /// would have to outlive that many reuses of one slot to be misread,
    /// and a misread event only costs a retried syscall).
    fn remove(&mut self, token: usize) {
        let Some(i) = (token & INDEX_MASK).checked_sub(1) else { return };
        let Some(slot) = self.slots.get_mut(i) else { return };
        if slot.generation != token >> GEN_SHIFT || slot.io.take().is_none() {
            return;
        }
        slot.generation = (slot.generation + 1) & INDEX_MASK;
        self.free.push(i);
    }
}

struct PollState {
    poll: Poll,
    events: Events,
}

/// One runtime's reactor (see the module docs).
pub(crate) struct Reactor {
    gate: Gate,
    poll: Mutex<PollState>,
    /// A second handle on the epoll instance, for (de)registrations while
    /// the driver blocks in the poll.
    registry: Registry,
    waker: Waker,
    sources: Mutex<Sources>,
    /// Sockets registered now.
    registered: AtomicUsize,
    /// Per worker: its share of the count of fibers parked on readiness
    /// (deadlock detector, busy polling) and the polls it made (the stall
    /// monitor's check that somebody polls). See [`Share`].
    shares: Box<[Share]>,
    /// Socket calls of fibers that returned `WouldBlock` (`Stats::io_would_block`).
    would_block: AtomicU64,
}

/// One worker's part of the reactor's counts, alone on its cache lines.
///
/// Rule: only that worker's thread writes it (a plain load and store, no
/// locked instruction, no line shared with another writer); readers add
/// up the shares. A wait is counted on the worker that runs the waiting
/// fiber and its end on the worker that polled the event (or that runs the
/// fiber again, for a timeout), so one share may go below zero; the sum is
/// the exact count once the workers are quiet (the deadlock detector reads
/// it only when every worker sleeps), and a hint otherwise, which is all
/// the busy poll, the searchers and the stall monitor need. One global
/// counter cost a contended read-modify-write per request, its line moving
/// between the worker that parks a fiber and the one that polls its event.
#[repr(align(128))]
#[derive(Default)]
struct Share {
    /// Waits begun minus waits ended here, two's complement.
    waiting: AtomicU64,
    polls: AtomicU64,
}

impl Share {
    #[inline]
    fn add(c: &AtomicU64, by: i64) {
        c.store(c.load(Relaxed).wrapping_add(by as u64), Release);
    }
}

impl Reactor {
    fn new(workers: usize) -> io::Result<Reactor> {
        let poll = Poll::new()?;
        let registry = poll.registry().try_clone()?;
        let waker = Waker::new(poll.registry(), WAKER_TOKEN)?;
        Ok(Reactor {
            gate: Gate::new(),
            poll: Mutex::new(PollState { poll, events: Events::with_capacity(EVENTS_CAPACITY) }),
            registry,
            waker,
            sources: Mutex::new(Sources::default()),
            registered: AtomicUsize::new(0),
            shares: (0..workers.max(1)).map(|_| Share::default()).collect(),
            would_block: AtomicU64::new(0),
        })
    }

    /// Count `n` socket calls of a fiber that returned `WouldBlock`.
    #[inline]
    pub(crate) fn note_would_block(&self, n: u64) {
        if n != 0 {
            self.would_block.fetch_add(n, Relaxed);
        }
    }

    /// Polls made so far (any worker, blocking or not).
    pub(crate) fn polls(&self) -> u64 {
        self.shares.iter().fold(0u64, |a, s| a.wrapping_add(s.polls.load(Acquire)))
    }

    /// Worker `w` (the calling thread's) begins (`by > 0`) or ends waits.
    #[inline]
    fn count_waiting(&self, w: usize, by: i64) {
        // Every caller runs on a worker of this reactor's runtime, so `w`
        // is in range (`Reactor::of` sized the shares by the workers).
        Share::add(&self.shares[w].waiting, by);
    }

    /// Some worker holds the driver's gate now (it polls, or is about to).
    pub(crate) fn is_driven(&self) -> bool {
        self.gate.is_taken()
    }

    /// Socket calls of fibers that returned `WouldBlock` so far.
    pub(crate) fn would_block(&self) -> u64 {
        self.would_block.load(Relaxed)
    }

    /// The runtime's reactor, created on first use.
    pub(crate) fn of(shared: &Shared) -> io::Result<&Arc<Reactor>> {
        if let Some(r) = shared.reactor.get() {
            return Ok(r);
        }
        let _g = lock(&shared.reactor_init);
        if let Some(r) = shared.reactor.get() {
            return Ok(r);
        }
        let r = Arc::new(Reactor::new(shared.workers.len())?);
        Ok(shared.reactor.get_or_init(|| r))
    }

    /// Register `src` for read and write readiness (edge-triggered, once
    /// for the socket's life).
    pub(crate) fn register(self: &Arc<Self>, src: &mut impl Source) -> io::Result<Registration> {
        let io = Arc::new(ScheduledIo::new());
        let token = lock(&self.sources).insert(io.clone())?;
        if let Err(e) = self.registry.register(src, Token(token), Interest::READABLE | Interest::WRITABLE) {
            lock(&self.sources).remove(token);
            return Err(e);
        }
        self.registered.fetch_add(1, SeqCst);
        Ok(Registration { reactor: self.clone(), io, token })
    }

    /// Sockets registered now.
    pub(crate) fn registered(&self) -> usize {
        self.registered.load(SeqCst)
    }

    /// Fibers parked on socket readiness now: exact while the workers are
    /// quiet, a hint otherwise ([`Share`]).
    pub(crate) fn waiting(&self) -> usize {
        let sum = self.shares.iter().fold(0u64, |a, s| a.wrapping_add(s.waiting.load(Acquire)));
        // Shares read one after another while fibers come and go can add
        // up below zero: nobody waits, as far as a hint can tell.
        usize::try_from(sum as i64).unwrap_or(0)
    }

    /// Poll once as worker `me` (which holds the gate) and collect the
    /// fibers whose sockets became ready.
    fn poll_once(&self, me: usize, timeout: Option<Duration>, out: &mut Vec<TaskRef>) {
        Share::add(&self.shares[me].polls, 1);
        let mut g = lock(&self.poll);
        let PollState { poll, events } = &mut *g;
        if let Err(e) = poll.poll(events, timeout) {
            if e.kind() != io::ErrorKind::Interrupted {
                // Nothing to recover: epoll_wait fails only on a bad fd or
                // bad arguments; the next idle round polls again.
                return;
            }
        }
        let start = out.len();
        let map = lock(&self.sources);
        for ev in events.iter() {
            if ev.token() == WAKER_TOKEN {
                continue;
            }
            if let Some(io) = map.get(ev.token().0) {
                io.ready(self, me, ev, out);
            }
        }
        // In the order the caller queues them (it drains `out` after its
        // polls); the last fiber of an earlier poll still in `out` is
        // linked to the first of this one.
        crate::runtime::task::Task::chain_prefetch(out[start.saturating_sub(1)..].iter().map(|t| &**t));
    }
}

/// A socket's registration; deregistered by [`Registration::deregister`]
/// from the socket's `Drop` (which owns the mio source).
pub(crate) struct Registration {
    pub(crate) reactor: Arc<Reactor>,
    pub(crate) io: Arc<ScheduledIo>,
    token: usize,
}

impl Registration {
    /// The readiness record's address (deadlock report).
    pub(crate) fn io_addr(&self) -> u64 {
        Arc::as_ptr(&self.io) as u64
    }

    /// Remove the socket from epoll and forget its readiness record.
    pub(crate) fn deregister(&self, src: &mut impl Source) {
        // Closing the fd would remove it from epoll too; deregistering
        // first keeps a dup'ed fd (after `into_raw_fd` games) from firing.
        let _ = self.reactor.registry.deregister(src);
        lock(&self.reactor.sources).remove(self.token);
        self.reactor.registered.fetch_sub(1, SeqCst);
    }
}

/// The runtime's `driver::Backend`: mio, the worker's thread, its timer.
struct RtBackend<'a> {
    shared: &'a Shared,
    reactor: Option<&'a Reactor>,
    me: usize,
    deadline: Option<Instant>,
    ready: std::cell::RefCell<&'a mut Vec<TaskRef>>,
}

impl RtBackend<'_> {
    fn timeout(&self) -> Option<Duration> {
        self.deadline.map(|d| d.saturating_duration_since(Instant::now()))
    }
}

impl driver::Backend for RtBackend<'_> {
    fn poll(&self) -> usize {
        let mut ready = self.ready.borrow_mut();
        let before = ready.len();
        if let Some(r) = self.reactor {
            r.poll_once(self.me, self.timeout(), &mut ready);
        }
        ready.len() - before
    }
    fn poll_now(&self) -> bool {
        let mut ready = self.ready.borrow_mut();
        let before = ready.len();
        if let Some(r) = self.reactor {
            r.poll_once(self.me, Some(Duration::ZERO), &mut ready);
        }
        ready.len() > before
    }
    fn park_thread(&self) {
        match self.timeout() {
            Some(t) => std::thread::park_timeout(t),
            None => std::thread::park(),
        }
    }
    fn must_leave(&self) -> bool {
        self.deadline.is_some_and(|d| Instant::now() >= d) || self.shared.is_shutting_down()
    }
    fn hand_off(&self) {
        hand_off(self.shared, self.me);
    }
}

/// Worker side: the parking step of an idle worker (`Idle::sleep`'s `park`
/// closure). Sleeps in the reactor if the runtime has sockets and nobody
/// else drives, else on the thread's futex; up to `deadline` (the worker's
/// next timer). Fibers made ready are appended to `ready` (the caller wakes
/// them once it has withdrawn from the sleepers). Returns whether to go on
/// waiting (`Idle::sleep`'s protocol).
pub(crate) fn park_worker(shared: &Shared, me: usize, deadline: Option<Instant>, ready: &mut Vec<TaskRef>) -> bool {
    if deadline.is_some_and(|d| d <= Instant::now()) {
        return false;
    }
    let w = &shared.workers[me];
    let reactor = shared.reactor.get().filter(|r| r.registered() > 0);
    if let Some(r) = reactor {
        let _ = w.reactor_waker.set(r.clone());
    }
    let b = RtBackend { shared, reactor: reactor.map(|r| &**r), me, deadline, ready: std::cell::RefCell::new(ready) };
    let gate = match reactor {
        Some(r) => &r.gate,
        None => return driver::park_step(&Gate::new(), &w.poll_flag, &w.sleeper, false, &b),
    };
    driver::park_step(gate, &w.poll_flag, &w.sleeper, true, &b)
}

/// Busy side: poll without blocking if fibers wait on sockets and nobody
/// drives; the fibers made ready go to the runtime's `io_ready` queue, in
/// the order the reactor reported them, for whichever worker is free first
/// (`Shared::wake_io_batch`; "Run order", rule 2, in `../README.md`).
pub(crate) fn poll_busy(shared: &Arc<Shared>, me: usize) {
    let Some(r) = shared.reactor.get() else { return };
    if r.waiting() == 0 {
        return;
    }
    let mut ready = Vec::new();
    let b = RtBackend { shared, reactor: Some(r), me, deadline: None, ready: std::cell::RefCell::new(&mut ready) };
    driver::poll_busy(&r.gate, &b);
    if !ready.is_empty() {
        shared.wake_io_batch(ready);
    }
}

/// The driver left: wake one sleeping worker other than `me`, so that
/// someone goes back to the reactor (it becomes the driver when it finds
/// no work).
fn hand_off(shared: &Shared, me: usize) {
    let n = shared.workers.len();
    for k in 1..n {
        let t = (me + k) % n;
        if shared.workers[t].sleeper.is_sleeping() && shared.idle.claim(&*shared.workers, t) {
            return;
        }
    }
}

/// The unpark half for a worker that may be in `epoll_wait`: called by
/// `Sleepers::unpark` after the thread's own `unpark`.
pub(crate) fn unpark_poller(flag: &PollFlag, reactor: &OnceLock<Arc<Reactor>>) {
    if flag.in_poll() {
        if let Some(r) = reactor.get() {
            let _ = r.waker.wake();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::task::packet::NopMain;
    use crate::runtime::task::Task;

    fn task(id: u64) -> TaskRef {
        Task::new(id, None, crate::runtime::task::stack::DEFAULT_STACK_SIZE, None, Box::new(NopMain))
    }

    fn ids(out: &[TaskRef]) -> Vec<u64> {
        out.iter().map(|t| t.id).collect()
    }

    /// Waiters leave in arrival order, whichever one a timer took out
    /// before, the inline first one included.
    #[test]
    fn wait_list_keeps_arrival_order() {
        let t: Vec<TaskRef> = (1..=4).map(task).collect();
        let mut w = WaitList::default();
        for x in &t {
            w.push(x.clone());
        }
        assert_eq!(w.len(), 4);
        assert!(w.remove(&t[0]), "the inline first");
        assert!(w.remove(&t[2]));
        assert!(!w.remove(&t[2]), "already out");
        assert_eq!(w.len(), 2);
        let mut out = Vec::new();
        w.take_all(&mut out);
        assert_eq!(ids(&out), [2, 4]);
        assert_eq!(w.len(), 0);
        w.push(t[3].clone());
        w.push(t[0].clone());
        w.take_all(&mut out);
        assert_eq!(ids(&out), [2, 4, 4, 1]);
        assert!(!w.remove(&t[1]), "an empty list");
    }

    #[test]
    fn a_reused_slot_does_not_answer_to_its_old_token() {
        let mut s = Sources::default();
        let a = Arc::new(ScheduledIo::new());
        let b = Arc::new(ScheduledIo::new());
        let ta = s.insert(a.clone()).unwrap();
        assert_ne!(ta, WAKER_TOKEN.0);
        assert!(Arc::ptr_eq(s.get(ta).unwrap(), &a));
        s.remove(ta);
        assert!(s.get(ta).is_none());
        let tb = s.insert(b.clone()).unwrap();
        // Same slot, next generation: the old token finds nothing.
        assert_eq!(tb & INDEX_MASK, ta & INDEX_MASK);
        assert_ne!(tb, ta);
        assert!(s.get(ta).is_none());
        assert!(Arc::ptr_eq(s.get(tb).unwrap(), &b));
        // Removing by the stale token leaves the new socket registered.
        s.remove(ta);
        assert!(Arc::ptr_eq(s.get(tb).unwrap(), &b));
        assert!(s.get(0).is_none());
        assert!(s.get(usize::MAX).is_none());
    }

    /// A wait begun on one worker and ended on another: the shares go
    /// below zero, the sum does not.
    #[test]
    fn waits_are_counted_across_worker_shares() {
        let r = Reactor::new(3).unwrap();
        assert_eq!(r.waiting(), 0);
        r.count_waiting(0, 1);
        r.count_waiting(0, 1);
        r.count_waiting(2, 1);
        assert_eq!(r.waiting(), 3);
        // Worker 1 polls the events of two of them, worker 2 sees its own
        // fiber's wait end (a timeout).
        r.count_waiting(1, -2);
        assert_eq!(r.waiting(), 1);
        r.count_waiting(2, -1);
        assert_eq!(r.waiting(), 0);
        assert_eq!(r.shares[1].waiting.load(Relaxed) as i64, -2);
        // A sum read mid-update below zero is "nobody waits", not a wrap.
        r.count_waiting(1, -1);
        assert_eq!(r.waiting(), 0);
        r.count_waiting(0, 1);
        assert_eq!(r.waiting(), 0);
        r.count_waiting(0, 1);
        assert_eq!(r.waiting(), 1);
        // Polls add up over the workers too.
        Share::add(&r.shares[0].polls, 1);
        Share::add(&r.shares[2].polls, 2);
        assert_eq!(r.polls(), 3);
    }

    #[test]
    fn seq_keeps_the_closed_flag_and_counts_events() {
        let io = ScheduledIo::new();
        assert_eq!(io.seq(Dir::Read), (0, false));
        io.seq[Dir::Read as usize].store((3 << 1) | CLOSED, Relaxed);
        assert_eq!(io.seq(Dir::Read), (3, true));
        assert_eq!(io.seq(Dir::Write), (0, false));
    }
}
