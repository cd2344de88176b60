//! loom models of numafiber's wake-up protocols.
//!
//! Run with `scripts/loom.sh`, i.e.
//! `RUSTFLAGS="--cfg loom" CARGO_TARGET_DIR=target/loom cargo test --release --test loom -- --nocapture`.
//!
//! Under `cfg(loom)` the crate's protocol code is built on loom's types (the
//! facade in `src/loom.rs`), and `numafiber::__loom` exposes thin wrappers
//! around it. What runs is the real code:
//!
//! * `runtime::worker::idle::Idle` (`sleep`, `withdraw`, `notify_worker`,
//!   `notify_idle`, `claim`, `wake_all`, the search counter): the whole
//!   sleeper/waker handshake of `Worker::park_idle` and `Shared::notify_*`;
//! * `runtime::task::Task`'s state machine (`transition_to_*`, `take_token`);
//! * `fiber::park`'s token (`runtime::unpark`: `unpark_token`,
//!   `enter_park`, `leave_park`) against unparks (`loom/unpark.rs`);
//! * `runtime::task::packet::{Packet, Main}`, the lock-free join packet
//!   (`complete_unique` through `Main`, the latches' `complete`, `wait`,
//!   `try_take_or_register`, `register_owner`/`clear_waiter`, the slow
//!   path of scopes through the real `runtime::task::join::wait_child`, the
//!   cancel-on-drop of an unrun fiber), with loom's atomics, cells (every
//!   access to the result and waiter cells is race-checked), `Mutex` and
//!   `thread::park/unpark`;
//! * `runtime::task::job::{StackJob, Latch}` (`JobRef::execute/cancel`,
//!   `Latch::set/wait`);
//! * a `select`'s one-shot token (`sync::select::{Token, TokenRef}`)
//!   claimed by senders on two channels against the select's abort, on
//!   the real queue `Inner`, lock and hand-off cells; a select parked on a
//!   send arm against the channel's close (`loom/select_send.rs`);
//! * the channel's hand-off into a waiting receiver's cell
//!   (`sync::queue::{Inner, Handoff, Node, Waker}`: push, grant with
//!   `grant_first_where_then`, signal, remove), with a loom `Mutex` in
//!   place of `WaitQueue`'s std lock and the receive loop re-stated.
//!
//! Stand-ins, because crossbeam-deque and corosensei are not loom-aware:
//!
//! * every queue (a worker's Chase-Lev deque, its `Injector` inbox) is a
//!   counter of queued items: push is a `Release` increment (both crossbeam
//!   queues publish an element with a release store), pop a CAS decrement,
//!   `is_empty` an `Acquire` load (crossbeam's `SeqCst` loads, which loom
//!   would treat as `AcqRel` anyway). A `Mutex<VecDeque>` would be the
//!   wrong stand-in: its lock orders the sleeper's re-check against the
//!   push and hides exactly the store-buffering race the fences exist for;
//! * the worker loop (`WorkerLocal::run`: own queues, steal, park) is
//!   re-stated in a few lines around those counters, and "running" an item
//!   just counts it;
//! * a fiber's suspension (`fiber::park_current` + the `Suspend::Park` arm
//!   of `run_task`) is re-stated as its two real calls, `take_token` and
//!   `transition_to_parked`, and the fiber body the run permission guards
//!   is a `loom::cell::UnsafeCell`, so loom reports two holders as a race.
#![cfg(loom)]
// The stand-in fiber bodies are loom cells shared on purpose, so that loom
// reports two threads touching them without a happens-before edge.
#![allow(clippy::arc_with_non_send_sync)]

use std::sync::atomic::{AtomicUsize as StdAtomicUsize, Ordering as StdOrdering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use loom::thread;

use numafiber::__loom::{
    FiberBody, FiberState, ForkJob, HandoffCell, HandoffQueue, IdleSet, JoinPacket, SelectModel, SelectWaiter,
    SlotModel, SpinLockModel,
};

/// Run `f` under loom with at most `bound` preemptions; print how many
/// interleavings loom explored and how long it took.
fn check(name: &str, bound: Option<usize>, f: impl Fn() + Sync + Send + 'static) {
    let iterations = Arc::new(StdAtomicUsize::new(0));
    let it = iterations.clone();
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = bound;
    }
    let t0 = Instant::now();
    b.check(move || {
        it.fetch_add(1, StdOrdering::Relaxed);
        f();
    });
    let n = iterations.load(StdOrdering::Relaxed);
    eprintln!(
        "loom model {name}: {n} interleavings explored in {:.2?} (preemption bound {})",
        t0.elapsed(),
        b.preemption_bound.map_or("none".to_string(), |p| p.to_string())
    );
}

// ---------------------------------------------------------------------
// Queue and worker stand-ins for the idle-protocol models
// ---------------------------------------------------------------------

/// A queue of indistinguishable items (see the module docs).
struct Queue(AtomicUsize);

impl Queue {
    fn new() -> Queue {
        Queue(AtomicUsize::new(0))
    }
    fn push(&self) {
        self.0.fetch_add(1, Release);
    }
    fn pop(&self) -> bool {
        let mut n = self.0.load(Acquire);
        loop {
            if n == 0 {
                return false;
            }
            match self.0.compare_exchange(n, n - 1, AcqRel, Acquire) {
                Ok(_) => return true,
                Err(a) => n = a,
            }
        }
    }
    fn is_empty(&self) -> bool {
        self.0.load(Acquire) == 0
    }
}

/// A fiber in a wake slot: its body is a loom cell, so two holders of
/// the run permission touching it without a happens-before edge are a race
/// loom reports.
struct SlotItem {
    body: UnsafeCell<usize>,
}
// SAFETY: the body is only touched by the holder of the item's run
// permission (the model checks exactly that).
unsafe impl Sync for SlotItem {}
// SAFETY: as above.
unsafe impl Send for SlotItem {}

impl SlotItem {
    /// Whoever runs the item writes its body.
    fn run(&self) {
        self.body.with_mut(|b| {
            // SAFETY: we hold the run permission (took the slot entry).
            unsafe { *b += 1 }
        });
    }
}

struct WorkerQueues {
    /// The wake slot (`runtime::worker::wake_slot`): owner first, thieves any time.
    slot: SlotModel<SlotItem>,
    /// The owner's deque (stealable).
    deque: Queue,
    /// The `Injector` inbox (stealable).
    inbox: Queue,
}

/// What `Shared` holds for these models.
struct Rt {
    idle: IdleSet,
    queues: Vec<WorkerQueues>,
    steals: bool,
    /// The model uses wake slots (`push_slot`); the other models leave
    /// them out so their state space stays what it was.
    slots: bool,
    /// The runtime's I/O ready queue (`Shared::io_ready`), which every
    /// worker pops; only its models look at it (`io`), so the others'
    /// state space stays what it was.
    io_ready: Queue,
    io: bool,
    shutdown: AtomicBool,
    /// Items run so far, and how many the model expects.
    done: AtomicUsize,
    total: usize,
    /// The model's main thread, unparked when the last item has run.
    main: OnceLock<thread::Thread>,
}

impl Rt {
    fn new(workers: usize, steals: bool, total: usize) -> Arc<Rt> {
        Rt::build(workers, steals, total, false)
    }

    /// The same, with wake slots in the worker loop (`runtime::worker::wake_slot`).
    fn with_slots(workers: usize, steals: bool, total: usize) -> Arc<Rt> {
        Rt::build(workers, steals, total, true)
    }

    /// The same, with the runtime's I/O ready queue.
    fn with_io_queue(workers: usize, total: usize) -> Arc<Rt> {
        let mut rt = Rt::build(workers, true, total, false);
        Arc::get_mut(&mut rt).expect("not shared yet").io = true;
        rt
    }

    fn build(workers: usize, steals: bool, total: usize, slots: bool) -> Arc<Rt> {
        Arc::new(Rt {
            idle: IdleSet::new(workers),
            queues: (0..workers)
                .map(|_| WorkerQueues { slot: SlotModel::new(), deque: Queue::new(), inbox: Queue::new() })
                .collect(),
            steals,
            slots,
            io_ready: Queue::new(),
            io: false,
            shutdown: AtomicBool::new(false),
            done: AtomicUsize::new(0),
            total,
            main: OnceLock::new(),
        })
    }

    /// `Shared::submit` / `reschedule` from a thread that is not worker
    /// `target`: push to its inbox, then `notify_worker`.
    fn push_remote(&self, target: usize) {
        self.queues[target].inbox.push();
        self.idle.notify_worker(target, self.steals);
    }

    /// `Shared::submit` on worker `me` itself: own deque, `notify_idle`
    /// (no fence).
    fn push_local(&self, me: usize) {
        self.queues[me].deque.push();
        self.idle.notify_idle(self.steals);
    }

    /// `Shared::push_local` on worker `me`: the new fiber goes to the wake
    /// slot if it is empty (the slot keeps its first entry), else to the
    /// owner's FIFO ready queue (a Chase-Lev queue like the deque: the
    /// deque stand-in stands for both; it is run by whoever pops it) and
    /// only then `notify_idle` (no fence). A lone slot entry wakes a
    /// sleeper only if nobody watches.
    fn push_slot(&self, me: usize) {
        let q = &self.queues[me];
        if q.slot.is_occupied() {
            q.deque.push();
            self.idle.notify_idle(self.steals);
            return;
        }
        let item = Arc::new(SlotItem { body: UnsafeCell::new(0) });
        // The spawner initialises the body before publishing it.
        item.body.with_mut(|b| {
            // SAFETY: not published yet: ours alone.
            unsafe { *b = 0 }
        });
        // Only the owner puts: a slot seen empty is still empty here.
        let prev = q.slot.put(item);
        assert!(prev.is_none(), "the owner's slot filled up between its check and its put");
        self.idle.notify_unwatched(self.steals);
    }

    /// `Shared::push_spawned` on worker `me` for `n` children, then the
    /// fiber gives control back (`WorkerLocal::flush_spawned`): the first
    /// child goes to an empty slot (and wakes a sleeper with
    /// `notify_idle`), each other one onto the spawn batch, a stealable
    /// Chase-Lev queue (the deque stand-in stands for it), then
    /// `notify_idle` (no fence), as a push onto the deque. The flush moves
    /// the batch between two of the owner's stealable queues and wakes
    /// nobody: nothing to model.
    fn push_spawned_then_give_back(&self, me: usize, n: usize) {
        let q = &self.queues[me];
        for _ in 0..n {
            if q.slot.is_occupied() {
                q.deque.push();
                self.idle.notify_idle(self.steals);
                continue;
            }
            let item = Arc::new(SlotItem { body: UnsafeCell::new(0) });
            assert!(q.slot.put(item).is_none(), "the owner's slot filled up between its check and its put");
            self.idle.notify_idle(self.steals);
        }
    }

    /// `Shared::wake_io_batch` after a busy worker's poll made `n` fibers
    /// ready: each onto the runtime's I/O queue (an `Injector`), then one
    /// `notify_unwatched` for a lone fiber, else `notify_idle` (no fence).
    fn push_io_batch(&self, n: usize) {
        for _ in 0..n {
            self.io_ready.push();
        }
        if n == 1 {
            self.idle.notify_unwatched(self.steals);
        } else {
            self.idle.notify_idle(self.steals);
        }
    }

    /// Any worker: the oldest fiber of the I/O queue.
    fn take_io(&self) -> bool {
        self.io && self.io_ready.pop()
    }

    /// Owner: the wake slot first.
    fn take_slot(&self, me: usize) -> bool {
        if !self.slots {
            return false;
        }
        match self.queues[me].slot.take() {
            Some(it) => {
                it.run();
                true
            }
            None => false,
        }
    }

    fn run_item(&self) {
        if self.done.fetch_add(1, AcqRel) + 1 == self.total {
            self.main.get().expect("main registered").unpark();
        }
    }

    /// `WorkerLocal::has_visible_work` over the stand-in queues.
    fn has_visible_work(&self, me: usize) -> bool {
        let q = &self.queues[me];
        if (self.slots && q.slot.is_occupied())
            || !q.deque.is_empty()
            || !q.inbox.is_empty()
            || (self.io && !self.io_ready.is_empty())
        {
            return true;
        }
        self.steals
            && self.queues.iter().enumerate().any(|(i, q)| i != me && (!q.deque.is_empty() || !q.inbox.is_empty()))
    }

    /// `WorkerLocal::steal`: count ourselves searching, try every victim.
    fn steal(&self, me: usize) -> bool {
        if !self.steals || self.queues.len() < 2 {
            return false;
        }
        self.idle.begin_search();
        let got = self.take_io()
            || self.queues.iter().enumerate().any(|(i, q)| {
                i != me
                    && (q.deque.pop() || q.inbox.pop() || (self.slots && q.slot.steal().map(|it| it.run()).is_some()))
            });
        self.idle.end_search();
        got
    }

    /// `WorkerLocal::run` with `park_idle`'s closures.
    fn worker_loop(&self, me: usize) {
        loop {
            if self.shutdown.load(Acquire) {
                break;
            }
            let q = &self.queues[me];
            if self.take_slot(me) || q.deque.pop() || self.take_io() || q.inbox.pop() || self.steal(me) {
                self.run_item();
                continue;
            }
            self.idle.sleep(
                me,
                || self.has_visible_work(me) || self.shutdown.load(SeqCst),
                || {
                    if self.shutdown.load(SeqCst) {
                        return false;
                    }
                    thread::park();
                    true
                },
            );
        }
    }

    /// The model's main thread: wait until every item ran, then shut down
    /// like `Runtime::drop` (flag, `wake_all`) and join the workers.
    fn finish(&self, workers: Vec<thread::JoinHandle<()>>) {
        while self.done.load(Acquire) < self.total {
            thread::park();
        }
        self.shutdown.store(true, SeqCst);
        self.idle.wake_all();
        for w in workers {
            w.join().unwrap();
        }
        assert_eq!(self.done.load(Acquire), self.total, "an item ran twice");
        assert_eq!(self.idle.num_sleeping(), 0, "num_sleeping is not exact");
        for i in 0..self.queues.len() {
            assert!(!self.idle.is_sleeping(i), "worker {i} still flagged asleep");
        }
    }
}

/// Start workers `first..`; like `Builder::build`, their thread handles are
/// known before anyone may wake them.
fn spawn_workers(rt: &Arc<Rt>, first: usize) -> Vec<thread::JoinHandle<()>> {
    (first..rt.queues.len())
        .map(|i| {
            let rt2 = rt.clone();
            let h = thread::spawn(move || rt2.worker_loop(i));
            rt.idle.set_thread(i, h.thread().clone());
            h
        })
        .collect()
}

/// Run one model of a fiber on worker 0: workers `1..` start in their loop,
/// worker 0 first runs `fiber0` (the body of its running fiber, which makes
/// fibers runnable), then its loop; the main thread waits until every
/// fiber ran (`Rt::finish`).
fn run_with_fiber_on_worker0(rt: Arc<Rt>, fiber0: impl FnOnce(&Rt) + Send + 'static) {
    let _ = rt.main.set(thread::current());
    let mut workers = spawn_workers(&rt, 1);
    let rt0 = rt.clone();
    let h0 = thread::spawn(move || {
        fiber0(&rt0);
        // The fiber returned: back to the worker loop.
        rt0.worker_loop(0);
    });
    rt.idle.set_thread(0, h0.thread().clone());
    workers.insert(0, h0);
    rt.finish(workers);
}

// ---------------------------------------------------------------------
// Model 1: worker park/unpark against a concurrent spawn
// ---------------------------------------------------------------------

/// Worker 0 runs a fiber that spawns two children: one onto its own deque
/// (`notify_idle`, no fence) and one placed onto worker 1
/// (`notify_worker(1)`), while worker 1 runs out of work and goes through
/// the sleep protocol; stealing on, so worker 1 may also steal the first
/// child. Every child must run (a lost wake-up is a loom deadlock: all
/// threads parked), nothing runs twice, and `num_sleeping` ends at 0.
#[test]
fn park_vs_spawn() {
    check("park_vs_spawn (2 workers, stealing)", Some(3), || {
        run_with_fiber_on_worker0(Rt::new(2, true, 2), |rt| {
            // The running fiber's body: two spawns.
            rt.push_local(0);
            rt.push_remote(1);
        });
    });
}

/// The same without stealing (`RoundRobin`): each worker must run its own
/// child; worker 1 must be woken for the placed one.
#[test]
fn park_vs_spawn_no_steal() {
    check("park_vs_spawn_no_steal (2 workers)", Some(3), || {
        run_with_fiber_on_worker0(Rt::new(2, false, 2), |rt| {
            rt.push_local(0);
            rt.push_remote(1);
        });
    });
}

// ---------------------------------------------------------------------
// Model 2b: the wake slot
// ---------------------------------------------------------------------

/// Worker 0's fiber makes two fibers runnable on worker 0
/// (`Shared::push_local`): the first goes to the wake slot and wakes
/// nobody, the second finds the slot occupied, goes to the ready queue
/// and calls `notify_idle` (no fence). Worker 1 runs out of work, searches (and may take the slot
/// entry itself: the model drops the grace period, so thieves may steal at
/// any moment) and sleeps. Both fibers must run exactly once (each slot
/// entry's body is a loom cell: two runners, or a runner without a
/// happens-before edge from the spawner, are reported), no wake-up is lost
/// (worker 0 runs its slot itself when its fiber returns), and
/// `num_sleeping` ends at 0.
#[test]
fn wake_slot_put_take_steal() {
    check("wake_slot_put_take_steal (2 workers, stealing)", Some(3), || {
        run_with_fiber_on_worker0(Rt::with_slots(2, true, 2), |rt| {
            rt.push_slot(0);
            rt.push_slot(0);
        });
    });
}

/// A spawner on worker 0 spawns two children (the first into the wake
/// slot, the second into the stealable spawn batch) and gives control back
/// while worker 1 searches and sleeps: both run once, no wake-up is lost.
/// (A third child adds nothing the second does not: each batch push is a
/// Chase-Lev push and an unfenced `notify_idle`, as a deque push; it only
/// multiplies the schedules beyond what CI can explore.)
#[test]
fn spawn_batch_flush() {
    check("spawn_batch_flush (2 workers, stealing)", Some(3), || {
        run_with_fiber_on_worker0(Rt::with_slots(2, true, 2), |rt| {
            rt.push_spawned_then_give_back(0, 2);
        });
    });
}

/// A lone slot entry (no displacement, so no wake-up at all) while worker 1
/// sleeps: worker 0 must run it itself; worker 1 may steal it; either way
/// it runs once and nothing hangs.
#[test]
fn wake_slot_lone_entry() {
    check("wake_slot_lone_entry (2 workers, stealing)", Some(3), || {
        run_with_fiber_on_worker0(Rt::with_slots(2, true, 1), |rt| {
            rt.push_slot(0);
        });
    });
}

// ---------------------------------------------------------------------
// Model 2c: the I/O ready queue of a busy worker's poll
// ---------------------------------------------------------------------

/// Worker 0's busy poll makes two fibers ready: both onto the runtime's
/// I/O queue, then `notify_idle` (no fence), while worker 1 runs out of
/// work, searches (taking from the I/O queue first) and sleeps. Both run
/// exactly once, no wake-up is lost (worker 0 serves the queue itself
/// when its fiber returns), and `num_sleeping` ends at 0.
#[test]
fn io_queue_busy_poll() {
    check("io_queue_busy_poll (2 workers, stealing)", Some(3), || {
        run_with_fiber_on_worker0(Rt::with_io_queue(2, 2), |rt| {
            rt.push_io_batch(2);
        });
    });
}

/// One fiber made ready: `notify_unwatched` wakes a sleeper only if nobody
/// searches or watches; the fiber runs once either way.
#[test]
fn io_queue_lone_fiber() {
    check("io_queue_lone_fiber (2 workers, stealing)", Some(3), || {
        run_with_fiber_on_worker0(Rt::with_io_queue(2, 1), |rt| {
            rt.push_io_batch(1);
        });
    });
}

// ---------------------------------------------------------------------
// Model 3: the remote inbox
// ---------------------------------------------------------------------

/// A thread that is not a worker pushes into worker 0's inbox and calls
/// `notify_worker(0)` while the worker runs its sleep protocol (announce,
/// fence, re-check, park). The item must run. This is the store-buffering
/// shape the two `SeqCst` fences exist for: without the waker's fence loom
/// finds the lost wake-up (a deadlock).
#[test]
fn remote_inbox() {
    check("remote_inbox (1 worker, foreign pusher)", None, || {
        let rt = Rt::new(1, false, 1);
        let _ = rt.main.set(thread::current());
        let workers = spawn_workers(&rt, 0);
        rt.push_remote(0);
        rt.finish(workers);
    });
}

/// Two pushes from two foreign threads into one worker's inbox racing with
/// its sleep: two claims race too, only one may win and count.
#[test]
fn remote_inbox_two_pushers() {
    check("remote_inbox_two_pushers (1 worker, 2 foreign pushers)", Some(3), || {
        let rt = Rt::new(1, false, 2);
        let _ = rt.main.set(thread::current());
        let workers = spawn_workers(&rt, 0);
        let rt2 = rt.clone();
        let mut workers = workers;
        // Joined in `finish`, after the wait: loom does not support an
        // `unpark` of a thread blocked in `JoinHandle::join`.
        workers.push(thread::spawn(move || rt2.push_remote(0)));
        rt.push_remote(0);
        rt.finish(workers);
    });
}

/// A foreign thread wakes a parked fiber (`Shared::wake`: the real
/// `transition_to_notified`, then the inbox of its last worker and
/// `notify_worker`) while that worker goes to sleep; with stealing and a
/// second worker, which may also take it. Whoever pops it must win
/// `transition_to_running`.
#[test]
fn remote_wake_of_parked_fiber() {
    check("remote_wake_of_parked_fiber (2 workers, stealing)", Some(3), || {
        let fiber = FiberState::new();
        assert!(fiber.transition_to_running());
        assert!(fiber.transition_to_parked());
        let rt = Rt::new(2, true, 1);
        let _ = rt.main.set(thread::current());
        let workers = spawn_workers(&rt, 0);
        if fiber.transition_to_notified() {
            rt.push_remote(0);
        }
        rt.finish(workers);
        assert!(fiber.transition_to_running(), "the woken fiber is QUEUED");
    });
}

// ---------------------------------------------------------------------
// Model 2: JoinHandle completion against a concurrent join; the fiber
// park token
// ---------------------------------------------------------------------

/// A fiber (here a loom thread running the real `Main::run`) completes its
/// packet while a thread joins it (`Packet::wait`: fast path, register a
/// `Waiter::Thread`, park, re-check). The joiner gets the value.
#[test]
fn join_vs_complete() {
    check("join_vs_complete", None, || {
        let (p, body) = JoinPacket::fiber(|| 7u32);
        let t = thread::spawn(move || body.run());
        assert_eq!(p.wait().unwrap(), 7);
        assert!(p.is_done());
        t.join().unwrap();
    });
}

/// The fiber is dropped unrun (shutdown drain): `Main`'s drop publishes
/// `JoinError::cancelled`, and the joiner must get it, not hang.
#[test]
fn join_vs_cancel() {
    check("join_vs_cancel", None, || {
        let (p, body) = JoinPacket::fiber(|| 7u32);
        let t = thread::spawn(move || drop(body));
        let e = p.wait().unwrap_err();
        assert!(e.is_cancelled(), "{e}");
        t.join().unwrap();
    });
}

/// `when_any`'s loser path and `JoinHandle`'s drop against completion:
/// the owner registers its inline waiter, then withdraws it
/// (`clear_waiter`) while the fiber completes. Either the withdrawal wins
/// (the completer never reads the slot) or the completer does and the
/// owner waits for `WOKEN`; loom reports a race on the slot cell if the
/// owner's write after the withdrawal could meet the completer's read.
/// The result is there afterwards either way.
#[test]
fn join_register_vs_clear() {
    check("join_register_vs_clear", None, || {
        let (p, body) = JoinPacket::fiber(|| 7u32);
        let t = thread::spawn(move || body.run());
        let done_early = p.register_owner();
        p.clear_waiter();
        t.join().unwrap();
        assert!(p.is_done());
        assert_eq!(p.try_take().expect("done").unwrap(), 7, "registered after done: {done_early}");
    });
}

/// `block_on`'s root join (`join_watching`): `try_take_or_register` in a
/// loop with a park in between, against the fiber completing.
#[test]
fn join_watching_vs_complete() {
    check("join_watching_vs_complete", None, || {
        let (p, body) = JoinPacket::fiber(|| 5u32);
        let t = thread::spawn(move || body.run());
        let v = loop {
            if let Some(r) = p.try_take_or_register() {
                break r.unwrap();
            }
            thread::park();
        };
        assert_eq!(v, 5);
        t.join().unwrap();
    });
}

/// Three parties on one packet: the fiber completes it, its owner joins
/// (inline waiter, `Packet::wait`) and a scope waits for it through the
/// locked slow path (the real `runtime::task::join::wait_child`:
/// `Completion::register_current` and park). Both waiters return, the
/// owner with the value, and the panic check sees it taken.
#[test]
fn scope_wait_vs_join() {
    check("scope_wait_vs_join", Some(3), || {
        let (p, body) = JoinPacket::fiber(|| 9u32);
        scope_wait_vs_join_on(p, body);
    });
}

/// The parties of `scope_wait_vs_join` (and of its in-task twin) on the
/// packet `p` of the fiber `body` (which returns 9).
fn scope_wait_vs_join_on(p: JoinPacket<u32>, body: FiberBody) {
    let scope = p.clone();
    let t = thread::spawn(move || body.run());
    let s = thread::spawn(move || {
        scope.wait_as_scope();
        assert!(scope.is_done());
    });
    assert_eq!(p.wait().unwrap(), 9);
    s.join().unwrap();
    t.join().unwrap();
    assert!(!p.unjoined_panic());
}

/// A graph latch opened by two parties at once (`Packet::complete`, the
/// `CLAIMED` bit) while its one waiter waits: exactly one value lands and
/// the waiter gets it.
#[test]
fn latch_double_open() {
    check("latch_double_open", None, || {
        let p = JoinPacket::new();
        let (a, b) = (p.clone(), p.clone());
        let t1 = thread::spawn(move || a.complete(1u32));
        let t2 = thread::spawn(move || b.complete(2u32));
        let v = p.wait().unwrap();
        assert!(v == 1 || v == 2, "{v}");
        t1.join().unwrap();
        t2.join().unwrap();
    });
}

/// The run permission at a park: the fiber checks its token
/// (`park_current`: `take_token`), suspends, and its worker CASes
/// `RUNNING -> PARKED` (`transition_to_parked`); a waker calls
/// `transition_to_notified` concurrently. Exactly one of: the fiber goes on
/// (it consumed the token), the worker requeues it (token arrived during
/// the suspension), the waker requeues it. Never two, never none. The
/// waker, now holding the permission, reads the body: loom
/// checks the permission handoff orders the worker's writes before it.
#[test]
fn park_token() {
    check("park_token (fiber park vs wake)", None, || {
        let fiber = FiberState::new();
        assert!(fiber.transition_to_running());
        let body = Arc::new(UnsafeCell::new(0u32));
        let requeued = Arc::new(AtomicUsize::new(0));

        let waker = {
            let (fiber, body, requeued) = (fiber.clone(), body.clone(), requeued.clone());
            thread::spawn(move || {
                if fiber.transition_to_notified() {
                    body.with(|p| unsafe { assert_eq!(*p, 1) });
                    requeued.fetch_add(1, Relaxed);
                }
            })
        };

        // The fiber, running on its worker, writes its body, then parks.
        body.with_mut(|p| unsafe { *p = 1 });
        let went_on = fiber.take_token();
        if !went_on && !fiber.transition_to_parked() {
            requeued.fetch_add(1, Relaxed); // `run_task` pushes it back
        }
        waker.join().unwrap();
        let requeued = requeued.load(Relaxed);
        assert_eq!(went_on as usize + requeued, 1, "went_on={went_on} requeued={requeued}");
        if requeued == 1 {
            // Popped by a worker: it must get the permission.
            assert!(fiber.transition_to_running());
            body.with_mut(|p| unsafe { *p = 2 });
        } else {
            assert!(!fiber.is_parked());
        }
    });
}

/// Two wakers race with the park: still exactly one requeue.
#[test]
fn park_token_two_wakers() {
    check("park_token_two_wakers", Some(3), || {
        let fiber = FiberState::new();
        assert!(fiber.transition_to_running());
        let requeued = Arc::new(AtomicUsize::new(0));
        let wakers: Vec<_> = (0..2)
            .map(|_| {
                let (fiber, requeued) = (fiber.clone(), requeued.clone());
                thread::spawn(move || {
                    if fiber.transition_to_notified() {
                        requeued.fetch_add(1, Relaxed);
                    }
                })
            })
            .collect();
        let went_on = fiber.take_token();
        if !went_on && !fiber.transition_to_parked() {
            requeued.fetch_add(1, Relaxed);
        }
        for w in wakers {
            w.join().unwrap();
        }
        let requeued = requeued.load(Relaxed);
        assert_eq!(went_on as usize + requeued, 1, "went_on={went_on} requeued={requeued}");
    });
}

/// Shutdown drain against a late wake-up of a parked fiber (shutdown
/// argument, step 4 in `runtime/mod.rs`). The drain destroys the fiber if
/// its CAS `PARKED|QUEUED -> DONE` wins (`transition_to_cancelled`); a
/// foreign waker that won `PARKED -> QUEUED` first looks up the fiber's last
/// worker (`Shared::reschedule`) and pushes it; the entry is popped later
/// and must then see `DONE`. At least one side wins; the drain's
/// destruction of the body (a loom cell) must not race with anything the
/// waker does.
#[test]
fn cancel_vs_wake() {
    check("cancel_vs_wake", None, || {
        let fiber = FiberState::new();
        assert!(fiber.transition_to_running());
        let body = Arc::new(UnsafeCell::new(0u32));
        body.with_mut(|p| unsafe { *p = 1 });
        assert!(fiber.transition_to_parked());
        let (f2, b2) = (fiber.clone(), body.clone());
        let waker = thread::spawn(move || {
            if f2.transition_to_notified() {
                // `reschedule`: where to push it.
                let _last = f2.last_worker();
                if WAKER_READS_BODY {
                    b2.with(|p| unsafe { assert_ne!(*p, 0) });
                }
                true
            } else {
                false
            }
        });
        let cancelled = fiber.transition_to_cancelled();
        if cancelled {
            body.with_mut(|p| unsafe { *p = 0 }); // `destroy`: coroutine and closure dropped
        }
        let woken = waker.join().unwrap();
        assert!(cancelled || woken, "nobody took the parked fiber");
        if woken {
            // The queue entry is popped (by a worker or the drain).
            assert_eq!(fiber.transition_to_running(), !cancelled);
        }
    });
}

/// Before the fix, `reschedule` read `last_worker` out of the task's body
/// after winning `PARKED -> QUEUED`, which races with the drain destroying
/// the body (loom: "Causality violation"). Set to `true` to see it.
const WAKER_READS_BODY: bool = false;

// ---------------------------------------------------------------------
// Reclaim: a parent runs its unstarted child (`runtime::task`, "Reclaim")
// ---------------------------------------------------------------------

/// A worker pops one queue entry of `fiber` (`run_task`): if its CAS wins,
/// it runs the body (a loom cell: the run count) and parks the fiber; a
/// token that arrived meanwhile makes it requeue, and it pops its own new
/// entry again. Returns how many times it ran the fiber.
fn pop_entry(fiber: &FiberState, body: &UnsafeCell<u32>) -> u32 {
    let mut ran = 0;
    loop {
        if !fiber.transition_to_running() {
            return ran; // surplus (or cancelled): dropped unrun
        }
        ran += 1;
        body.with_mut(|p| unsafe { *p += 1 });
        if fiber.transition_to_parked() {
            return ran;
        }
    }
}

/// A fresh child with its spawn entry in another worker's inbox (popped
/// by that worker), the parent's reclaim (`is_fresh`, then a second entry
/// in its own `run_next`, popped by its worker) and the shutdown drain
/// (`transition_to_cancelled`, then destroying the body) all at once. The
/// first run happens exactly once, or the drain destroys the unrun body,
/// never both; the closure (the cell) is never touched by two at once.
#[test]
fn reclaim_vs_pop_vs_cancel() {
    check("reclaim_vs_pop_vs_cancel", None, || {
        let fiber = FiberState::new();
        assert!(fiber.is_fresh());
        let body = Arc::new(UnsafeCell::new(0u32));
        let popper = {
            let (f, b) = (fiber.clone(), body.clone());
            thread::spawn(move || {
                let won = f.transition_to_running();
                if won {
                    b.with_mut(|p| unsafe { *p += 1 }); // takes the closure, runs it
                    f.transition_to_done();
                }
                won
            })
        };
        let reclaimer = {
            let (f, b) = (fiber.clone(), body.clone());
            thread::spawn(move || {
                // The parent's check; its duplicate entry is popped by its
                // own worker right after the hand-off.
                if !f.is_fresh() {
                    return (false, false);
                }
                let won = f.transition_to_running();
                if won {
                    b.with_mut(|p| unsafe { *p += 1 });
                    f.transition_to_done();
                }
                (true, won)
            })
        };
        let cancelled = fiber.transition_to_cancelled();
        if cancelled {
            body.with_mut(|p| unsafe { assert_eq!(*p, 0, "destroyed a fiber that ran") });
        }
        let popped = popper.join().unwrap();
        let (duplicated, reclaimed) = reclaimer.join().unwrap();
        assert_eq!(popped as u32 + reclaimed as u32 + cancelled as u32, 1, "one permission, one holder");
        assert!(duplicated || !reclaimed);
        assert!(!fiber.is_fresh(), "a task that ran or was cancelled is not fresh");
        assert!(fiber.is_surplus(), "every remaining entry is surplus");
        body.with(|p| unsafe { assert_eq!(*p, u32::from(!cancelled)) });
    });
}

/// After the reclaim the child runs, parks and is woken while its other
/// entry is still queued: the spawn entry (original), the reclaim's
/// duplicate and the waker's new entry race. The stale entry may win the
/// CAS of a later `QUEUED` episode (then the waker's entry is the surplus
/// one): the run count shows each run had the permission alone (loom
/// reports two holders as a race on the cell), the fiber runs once per
/// episode (1 or 2 times: the wake-up is a second episode unless it came
/// as a token), and it ends parked with no entry left that could run it.
#[test]
fn reclaim_surplus_entry_after_requeue() {
    check("reclaim_surplus_entry_after_requeue", None, || {
        let fiber = FiberState::new();
        let body = Arc::new(UnsafeCell::new(0u32));
        let original = {
            let (f, b) = (fiber.clone(), body.clone());
            thread::spawn(move || pop_entry(&f, &b))
        };
        let waker = {
            let (f, b) = (fiber.clone(), body.clone());
            thread::spawn(move || if f.transition_to_notified() { pop_entry(&f, &b) } else { 0 })
        };
        let dup = if fiber.is_fresh() { pop_entry(&fiber, &body) } else { 0 };
        let runs = dup + original.join().unwrap() + waker.join().unwrap();
        assert!((1..=2).contains(&runs), "runs={runs}");
        body.with(|p| unsafe { assert_eq!(*p, runs) });
        assert!(fiber.is_parked(), "the last run parked, no token left");
        assert!(fiber.is_surplus());
    });
}

/// A child queue entry for the held-child slot model: the fiber's state
/// machine and its body (a loom cell: two runners are a race).
struct Child {
    fiber: FiberState,
    body: UnsafeCell<u32>,
}

impl Child {
    fn new() -> Child {
        Child { fiber: FiberState::new(), body: UnsafeCell::new(0) }
    }
    /// Whoever took this entry pops it (`run_task`): run it if the CAS out
    /// of `QUEUED` wins. Returns the runs (0 or 1).
    fn pop(&self) -> u32 {
        if !self.fiber.transition_to_running() {
            return 0;
        }
        self.body.with_mut(|p| unsafe { *p += 1 });
        self.fiber.transition_to_done();
        1
    }
}

/// The held-child slot (`runtime/README.md`, "The held-child slot"), on the
/// real `WakeSlot`: the spawner's worker holds child `a`, then child `b`
/// displaces it (`a` goes on to its placed worker, whose pop is modeled
/// here), then the spawner joins `b` and takes it back with `take_if`
/// (reclaim), and finally gives control back (`release_held`: a steal
/// by the owner). A thief steals from the slot at any moment, twice (the
/// model drops the grace period). Each child runs exactly once with the
/// run permission (loom reports two holders as a race on its cell) and the
/// slot ends empty. A join that takes its child back out of its own
/// worker's wake slot (`runtime/README.md`, "Run order", 5) is the same
/// sequence on the same type: the owner's `put` into an empty slot, its
/// `take_if`, a thief's `steal`.
#[test]
fn held_child_reclaim_vs_steal() {
    check("held_child_reclaim_vs_steal", Some(3), || {
        let slot = Arc::new(SlotModel::<Child>::new());
        let (a, b) = (Arc::new(Child::new()), Arc::new(Child::new()));
        let thief = {
            let s = slot.clone();
            thread::spawn(move || {
                let mut ran = 0;
                for _ in 0..2 {
                    if let Some(c) = s.steal() {
                        ran += c.pop();
                    }
                }
                ran
            })
        };
        let mut ran = 0;
        assert!(slot.put(a.clone()).is_none(), "only the owner puts, into an empty slot");
        if let Some(prev) = slot.put(b.clone()) {
            assert!(Arc::ptr_eq(&prev, &a));
            ran += prev.pop();
        }
        if let Some(c) = slot.take_if(&b) {
            assert!(Arc::ptr_eq(&c, &b));
            ran += c.pop();
        }
        if let Some(c) = slot.steal() {
            ran += c.pop();
        }
        ran += thief.join().unwrap();
        assert_eq!(ran, 2, "each child runs once");
        assert!(!slot.is_occupied());
        a.body.with(|p| unsafe { assert_eq!(*p, 1) });
        b.body.with(|p| unsafe { assert_eq!(*p, 1) });
    });
}

/// A fiber yields (`transition_to_queued_after_yield`) while a waker sets
/// its token: the token survives the requeue and the next park returns at
/// once.
#[test]
fn yield_keeps_token() {
    check("yield_keeps_token", None, || {
        let fiber = FiberState::new();
        assert!(fiber.transition_to_running());
        let f2 = fiber.clone();
        let waker = thread::spawn(move || f2.transition_to_notified());
        fiber.transition_to_queued_after_yield();
        assert!(fiber.transition_to_running());
        let waker_requeued = waker.join().unwrap();
        assert!(!waker_requeued, "a running or queued fiber is never requeued by a waker");
        assert!(fiber.take_token(), "the wake-up token was lost across a yield");
    });
}

// ---------------------------------------------------------------------
// Model 4: the fork-join latch
// ---------------------------------------------------------------------

/// `fiber::join` with a stolen job: a thief executes the job
/// (`JobRef::execute`: run the closure, write the result, `Latch::set`)
/// while the owner waits on the latch (`Latch::wait`: register a waiter,
/// CAS `PENDING -> SLEEPING`, park) and then frees the job. The setter's
/// last access must be its final store: `wait_and_release` claims
/// exclusive access to the latch, the waiter slot and the result right
/// after the owner observes the final state, so loom reports any executor
/// access not ordered before that point.
///
/// Limit, checked by hand: moving the setter's waiter access, or adding an
/// extra atomic load, *after* its final `WOKEN` store is not reported.
/// loom does not schedule between a store and a following cell access, and
/// its DPOR does not treat `with_mut` as conflicting with a load, so the
/// owner never runs in that window. This model checks the result and
/// waiter hand-off and that no wake-up is lost; "the final store is the
/// setter's last access" still rests on reading `Latch::set`.
#[test]
fn latch_set_vs_wait() {
    check("latch_set_vs_wait", None, || {
        // A stale wake-up token (a fiber's `NOTIFIED` bit left from an
        // earlier wake; parks may return spuriously): the owner's first
        // park returns at once, so it can look at the latch at any time.
        thread::current().unpark();
        let mut job = ForkJob::new(|| 5u32);
        let r = job.job_ref();
        // SAFETY: `job` outlives the thief (joined below).
        let thief = thread::spawn(move || unsafe { r.execute() });
        assert_eq!(job.wait_and_release().unwrap(), 5);
        thief.join().unwrap();
    });
}

/// The shutdown drain cancels the stolen job instead: the owner gets
/// `JoinError::cancelled` and the same release guarantee holds.
#[test]
fn latch_cancel_vs_wait() {
    check("latch_cancel_vs_wait", None, || {
        // A stale wake-up token (a fiber's `NOTIFIED` bit left from an
        // earlier wake; parks may return spuriously): the owner's first
        // park returns at once, so it can look at the latch at any time.
        thread::current().unpark();
        let mut job = ForkJob::new(|| 5u32);
        let r = job.job_ref();
        // SAFETY: as above.
        let drain = thread::spawn(move || unsafe { r.cancel() });
        assert!(job.wait_and_release().unwrap_err().is_cancelled());
        drain.join().unwrap();
    });
}

// ---------------------------------------------------------------------
// Reactor: the driver hand-off (src/runtime/README.md, "The I/O driver")
// ---------------------------------------------------------------------

use numafiber::__loom::ReactorSet;

/// One worker's loop with the reactor: run the queued item if any, else
/// park (driving the stand-in epoll when it gets the gate). Running the
/// socket's fiber or the pushed item counts in `ran`; after `total`, the
/// runner shuts the runtime down (so every thread ends unless a wake-up
/// or readiness was lost, which loom reports as a deadlock).
fn reactor_worker(set: &ReactorSet, me: usize, inbox: &AtomicUsize, ran: &AtomicUsize, total: usize) {
    loop {
        if set.is_shutdown() {
            return;
        }
        if inbox.load(SeqCst) > 0 && inbox.fetch_sub(1, SeqCst) > 0 {
            if ran.fetch_add(1, SeqCst) + 1 == total {
                set.shutdown();
            }
            continue;
        }
        if set.park_idle(me, || inbox.load(SeqCst) > 0) {
            // The fiber parked on the socket is ready: it runs here.
            if ran.fetch_add(1, SeqCst) + 1 == total {
                set.shutdown();
            }
        }
    }
}

/// A foreign thread pushes work to worker 0 and claims it while worker 0
/// becomes the driver and blocks in the poll; a peer makes a socket ready.
/// The claim must reach the worker in `epoll_wait` (through the waker) and
/// the readiness must be polled: both items run.
#[test]
fn reactor_claim_vs_poll() {
    check("reactor_claim_vs_poll (1 worker in epoll, foreign pusher, peer)", Some(3), || {
        let set = Arc::new(ReactorSet::new(1));
        let inbox = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let (s, i, r) = (set.clone(), inbox.clone(), ran.clone());
        let w = thread::spawn(move || reactor_worker(&s, 0, &i, &r, 2));
        let (s, i) = (set.clone(), inbox.clone());
        let pusher = thread::spawn(move || {
            i.fetch_add(1, SeqCst);
            s.notify_worker(0, false);
        });
        set.socket_ready();
        pusher.join().unwrap();
        w.join().unwrap();
        assert_eq!(ran.load(SeqCst), 2);
        assert_eq!(set.num_sleeping(), 0);
    });
}

/// Worker 1 is busy and does one periodic poll (holding the gate) while
/// worker 0 goes idle and may find the gate taken; then worker 1 stays
/// busy forever (its thread ends). A peer makes the socket ready at any
/// point. Someone must poll it: worker 1's poll, or worker 0 as the driver,
/// handed the role by worker 1's `leave` if it found the gate taken.
#[test]
fn reactor_busy_poll_vs_idle() {
    check("reactor_busy_poll_vs_idle (idle driver vs busy poller, peer)", Some(3), || {
        let set = Arc::new(ReactorSet::new(2));
        let inbox = Arc::new(AtomicUsize::new(0));
        let ran = Arc::new(AtomicUsize::new(0));
        let (s, i, r) = (set.clone(), inbox.clone(), ran.clone());
        let w0 = thread::spawn(move || reactor_worker(&s, 0, &i, &r, 1));
        let (s, r) = (set.clone(), ran.clone());
        let w1 = thread::spawn(move || {
            if s.poll_busy(1) && r.fetch_add(1, SeqCst) + 1 == 1 {
                s.shutdown();
            }
        });
        set.socket_ready();
        w1.join().unwrap();
        w0.join().unwrap();
        assert_eq!(ran.load(SeqCst), 1);
    });
}

/// Two idle workers, one socket in a ping-pong: the driver's poll makes
/// one fiber ready, so it leaves without handing the reactor to anybody
/// (the other worker may sleep on its futex, having found the gate taken),
/// runs the fiber, which makes the socket ready again (the peer's reply),
/// and the second readiness must still be polled: by the same worker once
/// it is idle again, or by the other one. Both rounds run.
#[test]
fn reactor_one_ready_no_hand_off() {
    check("reactor_one_ready_no_hand_off (2 idle workers, ping-pong socket)", Some(3), || {
        let set = Arc::new(ReactorSet::new(2));
        let ran = Arc::new(AtomicUsize::new(0));
        let worker = |me: usize| {
            let (s, r) = (set.clone(), ran.clone());
            thread::spawn(move || loop {
                if s.is_shutdown() {
                    return;
                }
                if s.park_idle(me, || false) {
                    // The fiber ran: its peer answers (ready again), and
                    // after the second round the runtime shuts down.
                    match r.fetch_add(1, SeqCst) + 1 {
                        1 => s.socket_ready(),
                        _ => s.shutdown(),
                    }
                }
            })
        };
        let (w0, w1) = (worker(0), worker(1));
        set.socket_ready();
        w0.join().unwrap();
        w1.join().unwrap();
        assert_eq!(ran.load(SeqCst), 2);
    });
}

// ---------------------------------------------------------------------
// Channel hand-off into a waiting receiver's cell
// ---------------------------------------------------------------------

/// A receiver queued with a pointer to its cell; a sender moves a value
/// into the cell and signals it under the lock, while the receiver looks
/// at its signal once and then leaves (a timeout), removing its entry
/// under the lock. Exactly one side ends up with the value (the receiver
/// through its signal or by finding its entry granted, or the sender
/// because nobody waited any more), and loom's cell checks that the
/// sender's write is ordered before every read of the receiver, including
/// one after the wait ended (no late write into a frame that is gone).
#[test]
fn handoff_grant_vs_leave() {
    check("handoff_grant_vs_leave", None, || {
        let q = Arc::new(HandoffQueue::new());
        let cell = HandoffCell::new();
        let w = q.push(&cell);
        let q2 = q.clone();
        let sender = thread::spawn(move || q2.send(7));
        let got = q.wait(w, &cell, 1, false);
        assert_eq!(cell.take_again(), None, "the wait ended: the cell is not written again");
        let back = sender.join().unwrap();
        assert_eq!(got.or(back), Some(7));
        assert!(got.is_some() != back.is_some(), "exactly one side has the value: {got:?} {back:?}");
    });
}

/// The same with a receiver that parks (`park_caller`) until signalled:
/// the sender's wake-up (`Waker::wake`, a thread unpark) comes after the
/// signal, so the receiver always gets the value and never hangs.
#[test]
fn handoff_grant_vs_park() {
    check("handoff_grant_vs_park", None, || {
        let q = Arc::new(HandoffQueue::new());
        let cell = HandoffCell::new();
        let w = q.push(&cell);
        let q2 = q.clone();
        let sender = thread::spawn(move || q2.send(7));
        let got = q.wait(w, &cell, 2, true);
        assert_eq!(sender.join().unwrap(), None, "a receiver waited: the value was handed over");
        assert_eq!(got, Some(7));
        assert_eq!(cell.take_again(), None);
    });
}

/// A select registered on two channels (`sync::select`, steps 2-4) while
/// a sender on each channel tries to hand it a value, and the select
/// leaves at once (a deadline): the real one-shot `Token` (CAS), the real
/// `TokenRef::claim` as the granting predicate, the real queue `Inner`,
/// lock and hand-off cells. Exactly one of three parties wins the round:
/// one sender (its value is in that arm's cell, the other sender keeps
/// its value and the select removes its stale entry) or the select's
/// abort (both senders keep their values, both entries are removed).
/// loom's cell checks order each sender's write before the select's read
/// (through the barrier lock) and find no write after the round ended.
#[test]
fn select_claim_vs_abort() {
    check("select_claim_vs_abort", None, || {
        let m = Arc::new(SelectModel::new());
        let mut w = SelectWaiter::new();
        m.register(&mut w);
        let (m1, m2) = (m.clone(), m.clone());
        let s1 = thread::spawn(move || m1.send(0, 10));
        let s2 = thread::spawn(move || m2.send(1, 20));
        let _ = w.selected(); // one look, then the deadline
        let (got, removed) = m.leave(&mut w);
        let back = [s1.join().unwrap(), s2.join().unwrap()];
        assert_eq!((m.cell_again(&w, 0), m.cell_again(&w, 1)), (None, None), "no write after the round");
        match got {
            Some((i, v)) => {
                assert_eq!(v, [10, 20][i]);
                assert_eq!(back[i], None, "the winner's value went to the select");
                assert_eq!(back[1 - i], Some([10, 20][1 - i]), "the loser kept its value");
                assert!(!removed[i] && removed[1 - i], "only the winner's entry was popped: {removed:?}");
            }
            None => {
                assert_eq!(back, [Some(10), Some(20)], "the abort won: nobody handed a value over");
                assert_eq!(removed, [true, true]);
            }
        }
    });
}

/// The same with a select that parks (`park_caller`) until its token is
/// claimed: a sender always wins (the select does not abort), its wake-up
/// (`Waker::wake`, a thread unpark) is never lost, and the select reads
/// exactly the winner's value.
#[test]
fn select_claim_vs_park() {
    check("select_claim_vs_park", Some(3), || {
        let m = Arc::new(SelectModel::new());
        let mut w = SelectWaiter::new();
        m.register(&mut w);
        let (m1, m2) = (m.clone(), m.clone());
        let s1 = thread::spawn(move || m1.send(0, 10));
        let s2 = thread::spawn(move || m2.send(1, 20));
        while w.selected().is_none() {
            thread::park();
        }
        let (got, removed) = m.leave(&mut w);
        let back = [s1.join().unwrap(), s2.join().unwrap()];
        let (i, v) = got.expect("a sender claimed the select");
        assert_eq!(v, [10, 20][i]);
        assert_eq!(back[i], None);
        assert_eq!(back[1 - i], Some([10, 20][1 - i]));
        assert!(!removed[i] && removed[1 - i]);
    });
}

/// The wait queue's internal lock (`sync::lock::SpinLock`, whose unlock is
/// a plain release store): a thread and the main thread increment a loom
/// cell under it, and read it under it at the end. Loom reports two
/// holders at once (a data race on the cell) or a holder that misses the
/// previous holder's write (a causality violation, or a short count); the
/// waiter's backoff yields to the model, so a spinning waiter lets the
/// holder run. (With a third thread loom explores the two waiters yielding
/// to each other forever, a schedule no OS keeps up, and gives up at its
/// branch limit; mutual exclusion is a two-party property.)
#[test]
fn queue_lock_mutual_exclusion() {
    check("queue_lock_mutual_exclusion", Some(3), || {
        let l = Arc::new(SpinLockModel::new());
        let ts: Vec<_> = (0..1)
            .map(|_| {
                let l = l.clone();
                thread::spawn(move || l.increment())
            })
            .collect();
        l.increment();
        for t in ts {
            t.join().unwrap();
        }
        assert_eq!(l.get(), 2);
    });
}

/// The owner's `take` right after its `put` races a thief's `steal` (the
/// model ignores the grace period): exactly one of them gets the entry.
#[test]
fn wake_slot_take_vs_steal() {
    check("wake_slot_take_vs_steal", None, || {
        let s = Arc::new(SlotModel::<u32>::new());
        let s2 = s.clone();
        let th = thread::spawn(move || s2.steal().is_some());
        assert!(s.put(Arc::new(5)).is_none());
        let mine = s.take().is_some();
        let stolen = th.join().unwrap();
        assert!(mine != stolen, "exactly one party takes the entry: owner {mine}, thief {stolen}");
    });
}

// ---------------------------------------------------------------------
// The packet in the task (`runtime::task::packet`, "In the task", "Detaching")
// ---------------------------------------------------------------------

/// A value whose drops are counted (loom atomics: ordered with the joins).
struct Counted(Arc<loom::sync::atomic::AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, loom::sync::atomic::Ordering::SeqCst);
    }
}

fn counter() -> Arc<loom::sync::atomic::AtomicUsize> {
    Arc::new(loom::sync::atomic::AtomicUsize::new(0))
}

/// The in-task packet joined while the fiber completes: as
/// `join_vs_complete`, through the task's slot.
#[test]
fn join_in_task_vs_complete() {
    check("join_in_task_vs_complete", None, || {
        let (p, body) = JoinPacket::fiber_in_task(|| 7u32);
        let t = thread::spawn(move || body.run());
        assert_eq!(p.wait().unwrap(), 7);
        t.join().unwrap();
    });
}

/// `JoinHandle`'s drop (detach) of an in-task packet against the fiber
/// completing: the `DETACHED` and `DONE` read-modify-writes on the one
/// word decide who drops the result (the fiber if the detach came first,
/// else the handle). Exactly once either way, and the closure's capture
/// once too; loom reports a race on the result cell if both could touch it.
#[test]
fn detach_vs_complete() {
    check("detach_vs_complete", None, || {
        let (captured, result) = (counter(), counter());
        let (c, r) = (Counted(captured.clone()), result.clone());
        let (p, body) = JoinPacket::fiber_in_task(move || {
            drop(c);
            Counted(r)
        });
        let t = thread::spawn(move || body.run());
        drop(p);
        t.join().unwrap();
        assert_eq!(captured.load(loom::sync::atomic::Ordering::SeqCst), 1);
        assert_eq!(result.load(loom::sync::atomic::Ordering::SeqCst), 1, "the result is dropped once");
    });
}

/// Detach against the shutdown drain dropping the unrun entry (it
/// publishes `JoinError::cancelled` and drops the closure, with its
/// capture, once).
#[test]
fn detach_vs_cancel() {
    check("detach_vs_cancel", None, || {
        let captured = counter();
        let c = Counted(captured.clone());
        let (p, body) = JoinPacket::fiber_in_task(move || {
            drop(c);
            0u8
        });
        let t = thread::spawn(move || drop(body));
        drop(p);
        t.join().unwrap();
        assert_eq!(captured.load(loom::sync::atomic::Ordering::SeqCst), 1);
    });
}

/// A scope's slow-path wait on an in-task packet (the view points into the
/// task) while the owner joins and the fiber completes.
#[test]
fn scope_wait_vs_join_in_task() {
    check("scope_wait_vs_join_in_task", Some(3), || {
        let (p, body) = JoinPacket::fiber_in_task(|| 9u32);
        scope_wait_vs_join_on(p, body);
    });
}

// Cancellation against a grant (`runtime::cancel`, step 3): `loom/cancel.rs`.
#[path = "loom/cancel.rs"]
mod cancel;

// A select parked on a send arm against a close (`sync::select`):
// `loom/select_send.rs`.
#[path = "loom/select_send.rs"]
mod select_send;
// `fiber::park`'s token against unparks (`runtime::unpark`): `loom/unpark.rs`.
#[path = "loom/unpark.rs"]
mod unpark;
