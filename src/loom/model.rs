//! Public wrappers around the crate's protocol code, for the loom models in
//! `tests/loom.rs` (compiled only with `RUSTFLAGS="--cfg loom"`).
//!
//! Every method here forwards to the real implementation: the idle-worker
//! protocol (`runtime::worker::idle`), the fiber state machine (`runtime::task`), the
//! join packet and fiber main (`runtime::task::packet`) and the fork-join latch
//! (`runtime::task::job`). The wrappers only add what the runtime would provide
//! around them (thread handles, a fiber body that does nothing).
#![allow(missing_docs, clippy::new_without_default)]

use std::sync::{Arc, OnceLock};

use crate::runtime::error::JoinError;
use crate::runtime::task::job::{JobRef, OwnedJob, StackJob};
use crate::runtime::task::packet::{fits_in_task, new_in_task, new_main, Entry, FiberMain, Packet, PacketRef};
use crate::runtime::task::{Task, TaskRef};
use crate::runtime::worker::idle::{Idle, Sleeper, Sleepers};

// Cancellation against a grant (`runtime::cancel`): the model's calls.
mod cancel;
mod select_send;
pub use select_send::{SendArmModel, SendArmWaiter};
// `fiber::park`'s token against unparks (`runtime::unpark`).
mod unpark;

// ----- idle-worker protocol -----

struct ModelWorker {
    sleeper: Sleeper,
    /// Set by the worker itself before it first sleeps, like
    /// `WorkerShared::thread` (a std `OnceLock` there too).
    thread: OnceLock<::loom::thread::Thread>,
}

struct ModelWorkers(Box<[ModelWorker]>);

impl Sleepers for ModelWorkers {
    fn count(&self) -> usize {
        self.0.len()
    }
    fn sleeper(&self, i: usize) -> &Sleeper {
        &self.0[i].sleeper
    }
    fn unpark(&self, i: usize) {
        if let Some(th) = self.0[i].thread.get() {
            th.unpark();
        }
    }
}

/// `Shared`'s idle part: `runtime::worker::idle::Idle` plus one `Sleeper` and one
/// thread handle per worker. The queues are the caller's stand-ins.
pub struct IdleSet {
    idle: Idle,
    workers: ModelWorkers,
}

impl IdleSet {
    pub fn new(workers: usize) -> IdleSet {
        IdleSet {
            idle: Idle::new(),
            workers: ModelWorkers(
                (0..workers).map(|_| ModelWorker { sleeper: Sleeper::new(), thread: OnceLock::new() }).collect(),
            ),
        }
    }
    /// Record worker `i`'s thread handle. `worker_main` does this first
    /// thing, and `Builder::build` waits for every worker to have started,
    /// so it happens before anyone can wake the worker; the models call it
    /// from the spawning thread to get the same order.
    pub fn set_thread(&self, i: usize, t: ::loom::thread::Thread) {
        let _ = self.workers.0[i].thread.set(t);
    }
    /// `Worker::park_idle`: `Idle::sleep` with the worker's closures.
    pub fn sleep(&self, i: usize, has_work: impl FnOnce() -> bool, park: impl FnMut() -> bool) -> bool {
        self.idle.sleep(&self.workers.0[i].sleeper, has_work, park)
    }
    /// `Shared::notify_worker`.
    pub fn notify_worker(&self, target: usize, steals: bool) {
        self.idle.notify_worker(&self.workers, target, steals)
    }
    /// `Shared::notify_idle`.
    pub fn notify_idle(&self, steals: bool) {
        self.idle.notify_idle(&self.workers, steals)
    }
    /// `Idle::notify_unwatched` (a lone entry in the caller's wake slot).
    pub fn notify_unwatched(&self, steals: bool) {
        self.idle.notify_unwatched(&self.workers, steals)
    }
    /// `Shared::wake_all` (shutdown).
    pub fn wake_all(&self) {
        self.idle.wake_all(&self.workers)
    }
    pub fn begin_search(&self) {
        self.idle.begin_search();
    }
    pub fn end_search(&self) {
        self.idle.end_search()
    }
    pub fn num_sleeping(&self) -> usize {
        self.idle.num_sleeping()
    }
    pub fn is_sleeping(&self, i: usize) -> bool {
        self.workers.0[i].sleeper.is_sleeping()
    }
}

// ----- fiber state machine -----

struct NopMain;
impl FiberMain for NopMain {
    fn run(self: Box<Self>) {}
    fn fail(self: Box<Self>, _e: JoinError) {}
}

/// A real `Task` (no coroutine is ever created); only its `state` and the
/// transitions are exercised.
#[derive(Clone)]
pub struct FiberState(TaskRef);

impl FiberState {
    /// A freshly spawned task: `QUEUED`.
    pub fn new() -> FiberState {
        FiberState(Task::new(1, None, 0, None, Box::new(NopMain)))
    }
    pub fn transition_to_running(&self) -> bool {
        self.0.transition_to_running()
    }
    pub fn transition_to_queued_after_yield(&self) {
        self.0.transition_to_queued_after_yield()
    }
    pub fn transition_to_parked(&self) -> bool {
        self.0.transition_to_parked()
    }
    pub fn transition_to_notified(&self) -> bool {
        self.0.transition_to_notified()
    }
    pub fn transition_to_cancelled(&self) -> bool {
        self.0.transition_to_cancelled()
    }
    pub fn transition_to_done(&self) {
        self.0.transition_to_done()
    }
    pub fn take_token(&self) -> bool {
        self.0.take_token()
    }
    pub fn is_parked(&self) -> bool {
        self.0.is_parked()
    }
    /// What a reclaiming parent reads before it queues a second entry
    /// (`runtime::spawn::reclaim`).
    pub fn is_fresh(&self) -> bool {
        self.0.is_fresh()
    }
    /// What the fairness pass reads before it drops an inbox entry unrun.
    pub fn is_surplus(&self) -> bool {
        self.0.is_surplus()
    }
    /// What `Shared::reschedule` reads after winning `PARKED -> QUEUED`.
    pub fn last_worker(&self) -> usize {
        self.0.last_worker()
    }
}

// ----- join packet -----

/// A fiber's join state: `runtime::task::packet::Packet`, either inside a spawned
/// fiber's `MainPacket` ([`JoinPacket::fiber`]) or on its own, as a graph
/// latch ([`JoinPacket::new`]).
pub struct JoinPacket<T>(Arc<Kind<T>>);

enum Kind<T> {
    Latch(Arc<Packet<T>>),
    Fiber(PacketRef<T>),
    /// In the task (`runtime::task::packet`, "In the task"): the handle's
    /// `TaskRef` keeps the packet alive; dropped like a `JoinHandle`.
    InTask(PacketRef<T>, TaskRef),
}

impl<T> Drop for Kind<T> {
    fn drop(&mut self) {
        if let Kind::InTask(r, task) = self {
            // `JoinHandle`'s drop: withdraw the waiter, detach, and drop a
            // result that was there after the task reference.
            // SAFETY: the models call the owner operations from one thread;
            // the packet is not used afterwards.
            let detached = unsafe {
                r.clear_waiter();
                r.detach()
            };
            let _ = task;
            drop(detached);
        }
    }
}

impl<T> Clone for JoinPacket<T> {
    fn clone(&self) -> Self {
        JoinPacket(self.0.clone())
    }
}

impl<T: Send + 'static> JoinPacket<T> {
    /// A latch: opened with [`JoinPacket::complete`].
    pub fn new() -> JoinPacket<T> {
        JoinPacket(Arc::new(Kind::Latch(Packet::new())))
    }
    /// A spawned fiber's packet and its main function around `f`
    /// (`runtime::task::packet::new_main`, as `spawn` makes them): run the body
    /// with [`FiberBody::run`], or drop it unrun (shutdown: the joiner
    /// gets `JoinError::cancelled`).
    pub fn fiber(f: impl FnOnce() -> T + Send + 'static) -> (JoinPacket<T>, FiberBody) {
        // SAFETY: `f` is `'static`: nothing it borrows can go away.
        let (entry, r) = unsafe { new_main(f) };
        (JoinPacket(Arc::new(Kind::Fiber(r))), FiberBody(Body::Entry(entry)))
    }
    /// A spawned fiber whose closure and packet live in its task
    /// (`runtime::task::packet::new_in_task`, as `spawn` makes them when they
    /// fit): the body runs or drops the task's entry, and dropping the
    /// last clone of the handle detaches (`JoinHandle`'s drop).
    ///
    /// # Panics
    /// If `F` and `T` do not fit the task (they do, with loom's 1 KiB slot,
    /// for the models' small closures).
    pub fn fiber_in_task<F: FnOnce() -> T + Send + 'static>(f: F) -> (JoinPacket<T>, FiberBody) {
        assert!(fits_in_task::<F, T>(), "the model's closure must fit the task");
        let task = Task::new(3, None, 0, None, Box::new(NopMain));
        // SAFETY: a new task nobody else can reach (the spawner's run
        // permission); `f` is `'static`; it fits; the `PacketRef` is kept
        // beside a `TaskRef` of `task`.
        let r = unsafe {
            let body = task.body();
            drop(body.entry.take());
            let (entry, r) = new_in_task(&task.main, f);
            body.entry = Some(entry);
            r
        };
        (JoinPacket(Arc::new(Kind::InTask(r, task.clone()))), FiberBody(Body::InTask(task)))
    }
    fn p(&self) -> &Packet<T> {
        match &*self.0 {
            Kind::Latch(p) => p,
            Kind::Fiber(r) | Kind::InTask(r, _) => r,
        }
    }
    /// `JoinHandle::join` from a plain thread: blocks (loom park).
    pub fn wait(&self) -> Result<T, JoinError> {
        // SAFETY: the models call the owner operations from one thread.
        unsafe { self.p().wait() }
    }
    pub fn is_done(&self) -> bool {
        self.p().is_done()
    }
    /// `when_any`'s owner side for one handle: register the caller as the
    /// inline waiter unless done (returns done).
    pub fn register_owner(&self) -> bool {
        // SAFETY: the models call the owner operations from one thread.
        unsafe { self.p().register_owner() }
    }
    /// `when_any` for a loser (and `JoinHandle`'s drop): withdraw the
    /// inline waiter, or wait until the completer is done with it.
    pub fn clear_waiter(&self) {
        // SAFETY: as in `register_owner`.
        unsafe { self.p().clear_waiter() }
    }
    /// `join_watching`'s step: take the result or register.
    pub fn try_take_or_register(&self) -> Option<Result<T, JoinError>> {
        // SAFETY: as in `register_owner`.
        unsafe { self.p().try_take_or_register() }
    }
    /// The owner takes a done packet's result.
    pub fn try_take(&self) -> Option<Result<T, JoinError>> {
        // SAFETY: as in `register_owner`.
        unsafe { self.p().try_take() }
    }
    /// A latch opened by one of several parties (`Packet::complete`).
    ///
    /// # Panics
    /// On a fiber's packet (its one completer is its body).
    pub fn complete(&self, v: T) {
        match &*self.0 {
            Kind::Latch(p) => p.complete(Ok(v)),
            Kind::Fiber(_) | Kind::InTask(..) => panic!("a fiber's packet has one completer, its body"),
        }
    }
    /// A scope's wait for a child whose handle is elsewhere: the real
    /// `runtime::task::join::wait_child` on the scope's view of the packet
    /// (`PacketRef::completion`: slow path, `register_current`).
    pub fn wait_as_scope(&self) {
        let task = Task::new(2, None, 0, None, Box::new(NopMain));
        match &*self.0 {
            Kind::Latch(p) => crate::runtime::wait_child(&task, &**p),
            // SAFETY: used while `r` lives (an `Arc` packet), or while its
            // task does (`self` holds a `TaskRef`).
            Kind::Fiber(r) | Kind::InTask(r, _) => crate::runtime::wait_child(&task, &*unsafe { r.completion() }),
        }
    }
    /// The child panicked and its panic was not taken (`scope`'s check).
    pub fn unjoined_panic(&self) -> bool {
        crate::runtime::task::packet::Completion::unjoined_panic(self.p())
    }
}

/// A fiber's type-erased main function (its task entry), or the task
/// whose entry it is (in-task packets: the entry points into the task).
pub struct FiberBody(Body);

enum Body {
    Entry(Entry),
    InTask(TaskRef),
    Done,
}

impl FiberBody {
    /// Run the fiber (the worker, holding the task).
    pub fn run(mut self) {
        match std::mem::replace(&mut self.0, Body::Done) {
            Body::Done => {}
            Body::Entry(e) => e.run(),
            Body::InTask(task) => {
                // SAFETY: this body is the task's run permission (one
                // `FiberBody` per task, consumed here).
                let entry = unsafe { task.body() }.entry.take().expect("an unrun fiber has its entry");
                entry.run();
                drop(task);
            }
        }
    }
}

impl Drop for FiberBody {
    fn drop(&mut self) {
        if let Body::InTask(task) = &self.0 {
            // Dropped unrun (the drain): drop the entry, which publishes
            // `JoinError::cancelled`. After `run` the entry is gone.
            // SAFETY: as in `run`: the permission is ours.
            let entry = unsafe { task.body() }.entry.take();
            drop(entry);
        }
    }
}

// ----- fork-join latch -----

type JobFn<R> = Box<dyn FnOnce() -> R + Send>;

/// A `runtime::task::job::StackJob` (boxed so its address is stable, as the real
/// one is in `join`'s frame).
pub struct ForkJob<R: Send + 'static> {
    job: Box<StackJob<JobFn<R>, R>>,
}

/// The job's queue entry (`JobRef`), to hand to a "thief" thread.
pub struct ForkJobRef(JobRef);

impl<R: Send + 'static> ForkJob<R> {
    pub fn new(f: impl FnOnce() -> R + Send + 'static) -> ForkJob<R> {
        let f: JobFn<R> = Box::new(f);
        ForkJob { job: Box::new(StackJob::new(f)) }
    }
    pub fn job_ref(&self) -> ForkJobRef {
        ForkJobRef(self.job.as_job_ref())
    }
    pub fn is_done(&self) -> bool {
        self.job.is_done()
    }
    /// The owner's side of a stolen `join`: wait on the latch, take the
    /// result, then (the point where `join` returns and its frame, with the
    /// job, is gone) claim exclusive access to everything the executor
    /// touches. The box itself is kept until the model ends so that a
    /// buggy late access is reported by loom rather than being a real
    /// use-after-free.
    pub fn wait_and_release(&mut self) -> Result<R, JoinError> {
        let r = self.job.wait();
        self.job.assert_free();
        r
    }
}

impl ForkJobRef {
    /// The thief: run the job and set its latch (`JobMain::run`).
    ///
    /// # Safety
    /// The `ForkJob` is alive (it is, until `wait_and_release` returned).
    pub unsafe fn execute(self) {
        // SAFETY: the caller's contract.
        unsafe { self.0.execute() }
    }
    /// The shutdown drain: drop the closure and set the latch.
    ///
    /// # Safety
    /// As for `execute`.
    pub unsafe fn cancel(self) {
        // SAFETY: the caller's contract.
        unsafe { self.0.cancel() }
    }
}

// ----- reactor driver hand-off (runtime/io/driver.rs) -----

use crate::runtime::io::driver::{self, Backend, Gate, PollFlag};

/// `mio::Poll` stand-in: an event queue with a waker, blocking on a loom
/// condvar. `io` is a socket's queued readiness; `waker` the eventfd.
struct FakeEpoll {
    state: ::loom::sync::Mutex<(bool, bool)>,
    cv: ::loom::sync::Condvar,
}

impl FakeEpoll {
    /// `epoll_wait` without timeout: block until an event; whether it was
    /// the socket (consumed) rather than only the waker.
    fn wait(&self) -> bool {
        let mut g = self.state.lock().unwrap();
        while !g.0 && !g.1 {
            g = self.cv.wait(g).unwrap();
        }
        let io = g.0;
        *g = (false, false);
        io
    }
    fn try_take(&self) -> bool {
        let mut g = self.state.lock().unwrap();
        let io = g.0;
        *g = (false, false);
        io
    }
    fn post(&self, io: bool) {
        let mut g = self.state.lock().unwrap();
        if io {
            g.0 = true;
        } else {
            g.1 = true;
        }
        self.cv.notify_all();
    }
}

/// A thread's park token (`thread::park`/`unpark` semantics) on a loom
/// condvar: loom's own `unpark` may also release a thread blocked in a
/// condvar wait, which would mix the futex token with the fake epoll.
struct Futex {
    token: ::loom::sync::Mutex<bool>,
    cv: ::loom::sync::Condvar,
}

impl Futex {
    fn park(&self) {
        let mut g = self.token.lock().unwrap();
        while !*g {
            g = self.cv.wait(g).unwrap();
        }
        *g = false;
    }
    fn unpark(&self) {
        *self.token.lock().unwrap() = true;
        self.cv.notify_all();
    }
}

struct ReactorWorker {
    sleeper: Sleeper,
    flag: PollFlag,
    futex: Futex,
}

struct ReactorWorkers {
    ws: Box<[ReactorWorker]>,
    epoll: FakeEpoll,
}

impl Sleepers for ReactorWorkers {
    fn count(&self) -> usize {
        self.ws.len()
    }
    fn sleeper(&self, i: usize) -> &Sleeper {
        &self.ws[i].sleeper
    }
    /// `[WorkerShared]::unpark`: the futex token, then the reactor's
    /// waker if the worker is in the poll (`runtime::io::unpark_poller`).
    fn unpark(&self, i: usize) {
        self.ws[i].futex.unpark();
        if self.ws[i].flag.in_poll() {
            self.epoll.post(false);
        }
    }
}

/// The idle protocol, the driver gate and per-worker poll flags of one
/// runtime, around a stand-in epoll (`runtime::io::park_worker` with loom
/// types). The real `Idle::sleep`, `driver::park_step`, `driver::poll_busy`,
/// `Gate`, `PollFlag` run unchanged.
pub struct ReactorSet {
    idle: Idle,
    gate: Gate,
    workers: ReactorWorkers,
    shutdown: crate::loom::sync::atomic::AtomicBool,
}

struct ModelBackend<'a> {
    set: &'a ReactorSet,
    me: usize,
}

impl Backend for ModelBackend<'_> {
    fn poll(&self) -> usize {
        usize::from(self.set.workers.epoll.wait())
    }
    fn poll_now(&self) -> bool {
        self.set.workers.epoll.try_take()
    }
    fn park_thread(&self) {
        self.set.workers.ws[self.me].futex.park();
    }
    fn must_leave(&self) -> bool {
        self.set.shutdown.load(crate::loom::sync::atomic::Ordering::SeqCst)
    }
    fn hand_off(&self) {
        let n = self.set.workers.ws.len();
        for k in 1..n {
            let t = (self.me + k) % n;
            if self.set.workers.ws[t].sleeper.is_sleeping() && self.set.idle.claim(&self.set.workers, t) {
                return;
            }
        }
    }
}

impl ReactorSet {
    pub fn new(workers: usize) -> ReactorSet {
        ReactorSet {
            idle: Idle::new(),
            gate: Gate::new(),
            workers: ReactorWorkers {
                ws: (0..workers)
                    .map(|_| ReactorWorker {
                        sleeper: Sleeper::new(),
                        flag: PollFlag::new(),
                        futex: Futex { token: ::loom::sync::Mutex::new(false), cv: ::loom::sync::Condvar::new() },
                    })
                    .collect(),
                epoll: FakeEpoll { state: ::loom::sync::Mutex::new((false, false)), cv: ::loom::sync::Condvar::new() },
            },
            shutdown: crate::loom::sync::atomic::AtomicBool::new(false),
        }
    }
    /// `Worker::park_idle` with the reactor: returns whether the poll made
    /// the fiber parked on the socket ready (the worker then runs it).
    pub fn park_idle(&self, i: usize, has_work: impl FnOnce() -> bool) -> bool {
        let ready = std::cell::Cell::new(false);
        let b = ModelBackend { set: self, me: i };
        let w = &self.workers.ws[i];
        self.idle.sleep(
            &w.sleeper,
            || has_work() || self.is_shutdown(),
            || {
                if self.is_shutdown() {
                    return false;
                }
                let polled_ready = std::cell::Cell::new(false);
                let go_on = driver::park_step(&self.gate, &w.flag, &w.sleeper, true, &RecordReady(&b, &polled_ready));
                if polled_ready.get() {
                    ready.set(true);
                }
                go_on
            },
        );
        ready.get()
    }
    /// `runtime::io::poll_busy`: whether it made the socket's fiber ready.
    pub fn poll_busy(&self, i: usize) -> bool {
        driver::poll_busy(&self.gate, &ModelBackend { set: self, me: i })
    }
    /// A peer makes the socket ready (the kernel queues the edge and wakes
    /// a poller, if any).
    pub fn socket_ready(&self) {
        self.workers.epoll.post(true);
    }
    /// `Shared::notify_worker`.
    pub fn notify_worker(&self, target: usize, steals: bool) {
        self.idle.notify_worker(&self.workers, target, steals)
    }
    /// Shutdown: flag, fence, then `wake_all` (`Runtime::shutdown_inner`).
    pub fn shutdown(&self) {
        self.shutdown.store(true, crate::loom::sync::atomic::Ordering::SeqCst);
        crate::loom::sync::atomic::fence(crate::loom::sync::atomic::Ordering::SeqCst);
        self.idle.wake_all(&self.workers);
    }
    pub fn is_shutdown(&self) -> bool {
        self.shutdown.load(crate::loom::sync::atomic::Ordering::SeqCst)
    }
    pub fn num_sleeping(&self) -> usize {
        self.idle.num_sleeping()
    }
}

/// Forwards to the backend and records whether `poll` made fibers ready.
struct RecordReady<'a, B>(&'a B, &'a std::cell::Cell<bool>);

impl<B: Backend> Backend for RecordReady<'_, B> {
    fn poll(&self) -> usize {
        let r = self.0.poll();
        if r > 0 {
            self.1.set(true);
        }
        r
    }
    fn poll_now(&self) -> bool {
        self.0.poll_now()
    }
    fn park_thread(&self) {
        self.0.park_thread()
    }
    fn must_leave(&self) -> bool {
        self.0.must_leave()
    }
    fn hand_off(&self) {
        self.0.hand_off()
    }
}

// ----- wake slot -----

/// `runtime::worker::wake_slot::WakeSlot`: the per-worker slot of the fiber made
/// runnable last (owner `put`/`take`, thief `steal`).
pub struct SlotModel<T>(crate::runtime::worker::wake_slot::WakeSlot<T>);

impl<T> SlotModel<T> {
    pub fn new() -> SlotModel<T> {
        SlotModel(crate::runtime::worker::wake_slot::WakeSlot::new(true))
    }
    /// Owner: put, returning the displaced entry.
    pub fn put(&self, t: Arc<T>) -> Option<Arc<T>> {
        self.0.put(t)
    }
    /// Owner: take.
    pub fn take(&self) -> Option<Arc<T>> {
        self.0.take()
    }
    /// Owner: take the entry if it is `t` (the held-child slot's reclaim).
    pub fn take_if(&self, t: &Arc<T>) -> Option<Arc<T>> {
        self.0.take_if(t)
    }
    /// Thief: take (the runtime waits for the grace period first; the model
    /// lets a thief try at any time, which includes every real schedule).
    pub fn steal(&self) -> Option<Arc<T>> {
        self.0.steal()
    }
    pub fn is_occupied(&self) -> bool {
        self.0.is_occupied()
    }
    pub fn generation(&self) -> usize {
        self.0.generation()
    }
}

// ----- hand-off into a waiting receiver's cell (sync::queue::Handoff) -----

use crate::sync::queue::{Handoff, HandoffPtr, Inner, Node};

/// A wait queue of the channel's shape: the real `sync::queue::Inner`
/// (push, `grant_first_where_then`, `remove`), the real `Node`/`Waker`
/// signal flag (a loom atomic here) and the real `Handoff` cell, behind the
/// real `WaitQueue` lock (`sync::lock::SpinLock`, on loom's flag). Entries
/// carry a receiver's `HandoffPtr`, as `channel::Slot::Recv` does.
pub struct HandoffQueue(QueueLock<Inner<(), HandoffPtr<u64>>>);

/// `sync::lock::SpinLock` on loom's `AtomicBool`: the wait queue's lock.
type QueueLock<T> = crate::sync::lock::SpinLock<T, ::loom::sync::atomic::AtomicBool>;

/// The wait queue's internal lock (`sync::lock::SpinLock`) around a loom
/// cell: a model that two holders at once, or a holder that does not see
/// the previous holder's writes, is reported by loom.
pub struct SpinLockModel(QueueLock<::loom::cell::UnsafeCell<u64>>);

impl SpinLockModel {
    pub fn new() -> SpinLockModel {
        SpinLockModel(QueueLock::new_loom(::loom::cell::UnsafeCell::new(0)))
    }
    /// Increment the cell under the lock (a read and a write loom checks).
    pub fn increment(&self) {
        let g = self.0.lock();
        g.with_mut(|p| {
            // SAFETY: under the lock (what the model checks).
            unsafe { *p += 1 }
        });
    }
    /// The cell's value, read under the lock.
    pub fn get(&self) -> u64 {
        let g = self.0.lock();
        // SAFETY: under the lock.
        g.with(|p| unsafe { *p })
    }
}

/// A waiting receiver: its cell (on the waiter's stack, like
/// `Receiver::recv_until`'s) and its handle on its wait.
pub struct HandoffWaiter {
    id: u64,
    node: Node,
}

/// A receiver's cell; must stay where it is while its entry is queued.
pub struct HandoffCell(Handoff<u64>);

impl HandoffCell {
    pub fn new() -> HandoffCell {
        HandoffCell(Handoff::new())
    }
    /// The waiter reads its cell again once its wait ended (a second
    /// access loom checks against any late write of the granter).
    pub fn take_again(&self) -> Option<u64> {
        // SAFETY: the caller's wait ended (the model's contract).
        unsafe { self.0.take() }
    }
}

impl HandoffQueue {
    pub fn new() -> HandoffQueue {
        HandoffQueue(QueueLock::new_loom(Inner::new(())))
    }
    /// `recv_until`'s queueing step: push an entry pointing at `cell`.
    pub fn push(&self, cell: &HandoffCell) -> HandoffWaiter {
        let (id, node) = self.0.lock().push(cell.0.ptr());
        HandoffWaiter { id, node }
    }
    /// `Chan::offer` finding a waiting receiver (`hand_to_receiver`): move
    /// `v` into its cell, signal, unlock, wake. `Some(v)` back when no
    /// receiver waits.
    pub fn send(&self, v: u64) -> Option<u64> {
        let mut v = Some(v);
        let e = self.0.lock().grant_first_where_then(
            |_| true,
            |h| {
                if let Some(v) = v.take() {
                    // SAFETY: under the lock, on the entry just popped,
                    // before its signal.
                    unsafe { h.put(v) }
                }
            },
        );
        if let Some(e) = e {
            e.node.wake();
        }
        v
    }
    /// The receiver's side of `park_or_leave` + `recv_until`: look at the
    /// signal up to `looks` times (parking in between when `park`), then
    /// leave (a timeout): remove the entry under the lock; if it is gone it
    /// was granted. Returns the value from the cell, if granted.
    pub fn wait(&self, w: HandoffWaiter, cell: &HandoffCell, looks: usize, park: bool) -> Option<u64> {
        for _ in 0..looks {
            if w.node.is_signalled() {
                // SAFETY: granted (case 1 of `Handoff`'s docs).
                return unsafe { cell.0.take() };
            }
            if park {
                ::loom::thread::park();
            }
        }
        let removed = self.0.lock().remove(w.id).is_some();
        if removed {
            None // case 2: nobody wrote the cell, nobody will
        } else {
            // SAFETY: case 3: granted under the lock we just held.
            unsafe { cell.0.take() }
        }
    }
}

// ----- select: claim vs abort (sync::select) -----

use crate::sync::select::{Token, TokenRef};

/// A select's entry in one channel's queue, as `channel::Slot::SelRecv`:
/// a pointer to the arm's cell and the select's token.
type SelEntry = (HandoffPtr<u64>, TokenRef);

/// Two channels' wait queues (the real `Inner` behind the real queue lock,
/// on loom's flag) with one select registered on both (`Round::wait`'s
/// registration), the real `Token` (one-shot CAS) and `TokenRef::claim`
/// as the granting predicate (`channel::claim_recv`).
pub struct SelectModel {
    queues: [QueueLock<Inner<(), SelEntry>>; 2],
}

/// The select's side: its token, its two arms' cells, its entry ids.
pub struct SelectWaiter {
    token: Token,
    cells: [Handoff<u64>; 2],
    ids: [Option<u64>; 2],
}

impl SelectWaiter {
    pub fn new() -> SelectWaiter {
        SelectWaiter { token: Token::new(), cells: [Handoff::new(), Handoff::new()], ids: [None, None] }
    }
    /// `Round::wait`'s loop: whether a granter claimed the token.
    pub fn selected(&self) -> Option<usize> {
        self.token.selected()
    }
}

impl SelectModel {
    pub fn new() -> SelectModel {
        SelectModel { queues: [QueueLock::new_loom(Inner::new(())), QueueLock::new_loom(Inner::new(()))] }
    }
    /// Step 2: reset the token, queue an entry on both channels.
    /// The waiter must not move until `leave` returned.
    pub fn register(&self, w: &mut SelectWaiter) {
        w.token.reset();
        for k in 0..2 {
            let (id, _node) = self.queues[k].lock().push((w.cells[k].ptr(), w.token.at(k)));
            w.ids[k] = Some(id);
        }
    }
    /// A sender on channel `k` (`Chan::offer` -> `hand_to_receiver`):
    /// claim the first entry whose select it wins, fill its cell, signal,
    /// unlock, wake. `Some(v)` back when no entry could be granted (the
    /// sender then buffers or waits; the model keeps the value).
    pub fn send(&self, k: usize, v: u64) -> Option<u64> {
        let mut v = Some(v);
        let e = self.queues[k].lock().grant_first_where_then(
            |e| e.1.claim(),
            |e| {
                if let Some(v) = v.take() {
                    // SAFETY: under the lock, on the entry just popped for
                    // granting, before its signal.
                    unsafe { e.0.put(v) }
                }
            },
        );
        if let Some(e) = e {
            e.node.wake();
        }
        v
    }
    /// Step 4 (`Round::leave` + `complete_granted`): abort the token,
    /// remove both entries (each under its lock), and if an arm won, take
    /// its channel's lock once more (the barrier) and read its cell.
    /// Returns the winning arm with its value, and for each channel
    /// whether the select's entry was still queued.
    pub fn leave(&self, w: &mut SelectWaiter) -> (Option<(usize, u64)>, [bool; 2]) {
        let won = w.token.abort();
        let mut removed = [false; 2];
        for k in 0..2 {
            if let Some(id) = w.ids[k].take() {
                removed[k] = self.queues[k].lock().remove(id).is_some();
            }
        }
        let got = won.map(|i| {
            drop(self.queues[i].lock());
            // SAFETY: arm `i` was granted; the barrier ordered the
            // granter's write (and its whole critical section) before.
            let v = unsafe { w.cells[i].take() };
            (i, v.expect("the granted arm's cell holds the value"))
        });
        (got, removed)
    }
    /// Read a cell again after the round ended (loom checks no late write).
    pub fn cell_again(&self, w: &SelectWaiter, k: usize) -> Option<u64> {
        // SAFETY: the round ended: no entry points at the cell any more.
        unsafe { w.cells[k].take() }
    }
}
