//! The join handle of a fiber, and waiting for children that may have to
//! be destroyed instead (shutdown drain, `block_on`'s deadlock path).

use std::marker::PhantomData;
use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::Duration;

use crate::runtime::task::packet::{self, Completion};
use crate::runtime::task::up::{
    self, clear_task_wait_reason, current_is_cancelling, park, reclaim, set_task_wait_reason_at, set_wait_reason,
    JoinError, Shared,
};
use crate::runtime::task::{self, TaskRef};

/// An owned permission to join a fiber (`std::thread::JoinHandle` shape).
///
/// Dropping it detaches the fiber: it keeps running.
pub struct JoinHandle<T> {
    pub(crate) packet: packet::PacketRef<T>,
    /// Dropped by `Drop` (into the worker's task pool when it is the last
    /// reference), never elsewhere.
    pub(crate) task: std::mem::ManuallyDrop<TaskRef>,
    /// The fiber's runtime, as an address only (no count: spawn stays
    /// free of it), for [`cancel`](JoinHandle::cancel), whose canceller
    /// may have to push the fiber to one of its queues (`cancel::request_at`).
    pub(crate) shared: *const Shared,
    pub(crate) _p: PhantomData<T>,
}

// SAFETY: `shared` is an address used only as `cancel::request_at`
// documents (looked up, or compared with this thread's worker's runtime);
// every other field is `Send`/`Sync` for `T: Send` as before.
unsafe impl<T: Send> Send for JoinHandle<T> {}
// SAFETY: as above; `&JoinHandle` offers `cancel`, `is_finished` and `id`,
// which are safe from any thread.
unsafe impl<T: Send> Sync for JoinHandle<T> {}

impl<T> Drop for JoinHandle<T> {
    fn drop(&mut self) {
        // A handle never leaves its waiter behind (`when_any` unwinding,
        // an abandoned `join_watching`): `runtime::task::packet`'s protocol.
        // SAFETY: the handle is its packet's one owner.
        unsafe { self.packet.clear_waiter() };
        // An in-task packet dies with the task, not with an `Arc` of its
        // own: leave it to the fiber (which then drops the result on its
        // stack), or take the result out if it is there (`packet` module
        // docs, "Detaching"). A joined handle (`TAKEN`) only loads.
        let detached = if self.packet.in_task() {
            // SAFETY: the one owner, waiter withdrawn just above, and the
            // packet is not used again (the field is only dropped: a plain
            // pointer).
            unsafe { self.packet.detach() }
        } else {
            None
        };
        // SAFETY: the field is taken only here, once, and not used after.
        let t = unsafe { std::mem::ManuallyDrop::take(&mut self.task) };
        // After a join this is usually the task's last reference.
        crate::runtime::task::pool::release(t);
        // Dropped here, as the handle's last `Arc` dropped it before: a
        // destructor's panic reaches the handle's owner.
        drop(detached);
    }
}

impl<T> std::fmt::Debug for JoinHandle<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinHandle").field("id", &self.task.id).field("finished", &self.is_finished()).finish()
    }
}

impl<T> JoinHandle<T> {
    /// Wait for the fiber and take its result; `Err` carries its panic.
    /// Inside a fiber this suspends the fiber; on a plain thread it blocks
    /// the thread.
    ///
    /// **A fiber joining its own child that nobody has started yet runs it
    /// now** (Cilk's `sync`, a lazy task's `co_await`): when placement sent
    /// the child to another worker of the caller's NUMA node and that
    /// worker has not got to it, the child starts at once on the caller's
    /// worker, before anything else queued there, and the caller continues
    /// on the same worker right after the child finishes or first suspends
    /// (if it suspended, the caller then waits for it as usual). It is the same
    /// fiber: its id, name, stack size and result are the ones of the
    /// handle, and [`WorkerStats::reclaimed`](crate::runtime::WorkerStats::reclaimed)
    /// counts these joins. Without it a recursive tree of `spawn` + `join`
    /// (skynet) unfolds breadth-first on two workers: each parent waits for
    /// a child in the other worker's inbox while its own worker starts more
    /// subtrees (13,000-27,000 live stacks instead of about 7).
    ///
    /// The same goes for a child queued on the caller's own worker (by
    /// placement, [`Builder::local`](crate::fiber::Builder::local) or
    /// [`Builder::node`](crate::fiber::Builder::node)) while other workers
    /// may take work, but only if it is the next fiber that worker would
    /// start anyway: then it runs now, and the caller right after it,
    /// instead of the caller parking until the child's end wakes it (a join
    /// loop over children spawned in order runs each in turn without
    /// parking). A child with other work queued above it is waited for.
    ///
    /// Nothing changes for children that are pinned or placed with
    /// [`Builder::worker`](crate::fiber::Builder::worker), placed on
    /// another worker with [`Builder::node`](crate::fiber::Builder::node)
    /// or on another node (the thesis' node choice stands), placed on
    /// another worker under a policy that does not steal
    /// ([`Policy::RoundRobin`](crate::policy::Policy::RoundRobin)), or
    /// already started; nor for a joiner other than the spawning fiber (a
    /// fiber handed the handle, a plain thread): those wait, and the child
    /// runs where it was placed or is stolen as before. The same holds for
    /// the implicit joins at the end of a [`scope`](crate::fiber::scope).
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let err = rt.block_on(|| fiber::spawn(|| -> u8 { panic!("boom") }).join().unwrap_err());
    /// assert_eq!(err.panic_message(), Some("boom"));
    /// ```
    #[track_caller]
    pub fn join(self) -> Result<T, JoinError> {
        // SAFETY (both waits): a `JoinHandle` is its packet's one owner
        // (not `Clone`; `join` consumes it).
        if self.packet.is_done() {
            return unsafe { self.packet.wait() };
        }
        reclaim(&self.task);
        // One TLS read for both reasons: our own task is the same on
        // whichever worker the wait resumes.
        // SAFETY: a non-null CURRENT is the running fiber's task, alive
        // while that fiber runs (`context::current_task`).
        let me = unsafe { up::current_task_ptr().as_ref() };
        if let Some(t) = me {
            set_task_wait_reason_at(t, task::wait_kind::JOIN, self.task.id, std::panic::Location::caller());
        }
        let r = unsafe { self.packet.wait() };
        if let Some(t) = me {
            clear_task_wait_reason(t);
        }
        r
    }

    /// `join` for `Runtime::block_on`: wake every `every` and call `check`
    /// with the joined task (the deadlock detector). When `check` returns a
    /// report, destroy the fiber, then panic with it. On every unwinding
    /// path the fiber is destroyed or awaited first (its closure may borrow
    /// from `block_on`'s caller).
    pub(crate) fn join_watching(
        self,
        shared: &Arc<Shared>,
        every: Duration,
        mut check: impl FnMut(&TaskRef) -> Option<String>,
    ) -> Result<T, JoinError> {
        struct Guard<'h, T> {
            h: &'h JoinHandle<T>,
            shared: &'h Arc<Shared>,
        }
        impl<T> Drop for Guard<'_, T> {
            fn drop(&mut self) {
                destroy_until_done(self.shared, &self.h.task, &*self.h.packet);
            }
        }
        let _root = up::BlockOnRoot::register(&self.task);
        let guard = Guard { h: &self, shared };
        loop {
            // SAFETY: the handle (consumed) is the packet's owner.
            if let Some(r) = unsafe { self.packet.try_take_or_register() } {
                std::mem::forget(guard);
                return r;
            }
            std::thread::park_timeout(every);
            if !self.packet.is_done() {
                if let Some(report) = check(&self.task) {
                    drop(guard); // destroys the root before we unwind
                    panic!("{report}");
                }
            }
        }
    }

    /// Whether the fiber has finished (its result is ready).
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.spawn(|| 1);
    /// while !h.is_finished() { std::thread::yield_now(); }
    /// assert_eq!(h.join().unwrap(), 1);
    /// ```
    pub fn is_finished(&self) -> bool {
        self.packet.is_done()
    }

    /// The fiber's id (as in [`FiberInfo::id`](crate::fiber::FiberInfo::id)).
    pub fn id(&self) -> u64 {
        self.task.id
    }

    /// Cancel the fiber (tokio's `abort`, may's `cancel`, Boost's
    /// `interrupt`): it is woken at its current suspension point, or stops
    /// at its next one, and unwinds from there, running its destructors
    /// once; its [`join`](crate::fiber::join)(JoinHandle::join) then returns an error with
    /// [`is_cancelled()`](JoinError::is_cancelled). Returns at once (it does
    /// not wait for the unwind); call it from any fiber or thread, as often
    /// as you like.
    ///
    /// * **Cancellation points**: every wait of this crate (a `sync` lock,
    ///   condition variable, semaphore, barrier, event, channel send or
    ///   receive, a join, [`sleep`](crate::fiber::sleep), [`park`](crate::fiber::park), socket `accept`, `read`,
    ///   `write`, `connect`, [`block_on_future`](crate::fiber::block_on_future), [`spawn_blocking`](crate::fiber::spawn_blocking)'s
    ///   wait) and [`yield_now`](crate::fiber::yield_now). A fiber that computes without suspending
    ///   is cancelled when it next suspends; it can poll
    ///   [`is_cancelled`](crate::fiber::is_cancelled). A fiber cancelled before it first ran never runs
    ///   its closure. Cancelling a finished fiber does nothing (its result
    ///   stays).
    /// * **The unwind** carries the payload [`Cancelled`](crate::fiber::Cancelled); the panic hook
    ///   does not run (nothing is printed). A `catch_unwind` inside the
    ///   fiber sees it and should re-raise it; a fiber that swallows it runs
    ///   on (and unwinds again at its next cancellation point).
    /// * **A lock held** is released by its guard's destructor during the
    ///   unwind, as for a panic (no poisoning); the next waiter gets it.
    /// * **A grant racing the cancellation** (a fiber handed the lock, a
    ///   permit, a notification or a channel value in the same instant as it
    ///   is cancelled) is passed on: the lock to the next waiter, the permit
    ///   back, the notification to the next waiter, the value back to the
    ///   front of the channel, so nothing is lost and nobody waits for it.
    /// * **A value in flight**: a `send` that is cancelled while it waits
    ///   drops the value it was sending (it was not delivered); one that was
    ///   taken by a receiver in that instant was delivered.
    /// * **Shielding**: [`shield`](crate::fiber::shield) / [`ShieldGuard`](crate::fiber::ShieldGuard) defer cancellation over
    ///   a section. A [`scope`](crate::fiber::scope) whose fiber is cancelled cancels its
    ///   children and waits for them (they borrow its frame) before it
    ///   unwinds; a stolen [`join`](crate::fiber::join) closure is cancelled and waited
    ///   for the same way (one not stolen runs on the fiber itself, and
    ///   unwinds at its own cancellation points). Inside a shield neither
    ///   passes the cancellation on.
    /// * **A caught cancellation** (a `catch_unwind` that swallows the
    ///   unwind, or a shielded wait that the request woke) leaves the
    ///   request standing: the fiber's next cancellation point unwinds,
    ///   with no second `cancel()`.
    /// * **During the unwind** the fiber cannot park (Rust counts panics
    ///   per thread, and the worker runs other fibers): a destructor that
    ///   must wait for a lock held by another fiber waits on the thread, as
    ///   during any panic (`sync` module docs).
    ///
    /// ```
    /// use numafiber::{fiber, sync, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let (_tx, rx) = sync::channel::bounded::<u32>(1);
    ///     let h = fiber::spawn(move || rx.recv()); // parks: nobody sends
    ///     fiber::yield_now();
    ///     h.cancel();
    ///     let e = h.join().unwrap_err();
    ///     assert!(e.is_cancelled() && !e.is_panic());
    /// });
    /// ```
    pub fn cancel(&self) {
        up::cancel_request_at(&self.task, self.shared);
    }

    /// An async waiter (`fiber::future::JoinFuture::poll`): register `w`
    /// unless the fiber is done; returns done (`Packet::register_async`).
    pub(crate) fn register_async(&self, w: &std::task::Waker) -> bool {
        self.packet.register_async(w)
    }

    /// Take the result of a finished fiber (`fiber::future::JoinFuture`).
    ///
    /// # Panics
    /// If the fiber has not finished (`is_finished`): the caller saw it
    /// done first.
    pub(crate) fn take_done(self) -> Result<T, JoinError> {
        assert!(self.packet.is_done(), "take_done on an unfinished fiber");
        // SAFETY: the handle (consumed) is its packet's one owner, and the
        // packet is done (checked above).
        unsafe { self.packet.wait() }
    }
}

/// A fiber being destroyed waits for its `fiber::join` job (`probe`: its
/// runner fiber, whether it is done): destroy the runner if it is parked;
/// during the shutdown drain nothing else can run it, so give up there;
/// otherwise (`block_on`'s deadlock path, workers alive) wait for it.
pub(crate) fn settle_job(probe: &dyn Fn() -> (Option<TaskRef>, bool)) {
    loop {
        let (runner, done) = probe();
        if done {
            return;
        }
        let Some(shared) = current_shared_for_drain() else { return };
        if let Some(t) = runner {
            if up::destroy(&shared, &t) {
                continue;
            }
        }
        if shared.draining.load(Acquire) {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// Block until `packet` completes; during cancellation destroy the child
/// instead of waiting for it.
#[track_caller]
pub(crate) fn wait_child(task: &TaskRef, packet: &dyn Completion) {
    if packet.is_done() {
        return;
    }
    reclaim(task);
    set_wait_reason(task::wait_kind::JOIN, task.id);
    wait_child_inner(task, packet);
    set_wait_reason(task::wait_kind::NONE, 0);
}

/// `wait_child`, but return `false` as soon as the calling fiber has a
/// cancellation request, if `stop_on_cancel` (a scope then cancels its
/// children and waits again, with `stop_on_cancel` off: `cancel` module
/// docs, step 5). Call it shielded, or the park unwinds instead.
#[track_caller]
pub(crate) fn wait_child_or_cancel(task: &TaskRef, packet: &dyn Completion, stop_on_cancel: bool) -> bool {
    if packet.is_done() {
        return true;
    }
    reclaim(task);
    set_wait_reason(task::wait_kind::JOIN, task.id);
    let done = loop {
        if stop_on_cancel && up::cancel_requested() {
            break false;
        }
        if !wait_child_step(task, packet) || packet.is_done() {
            break true;
        }
    };
    set_wait_reason(task::wait_kind::NONE, 0);
    done
}

fn wait_child_inner(task: &TaskRef, packet: &dyn Completion) {
    while !packet.is_done() {
        if !wait_child_step(task, packet) {
            return;
        }
    }
}

/// One step of waiting for a child: a park (or a step of the drain's
/// destruction of it). `false`: give up (the drain cannot run it).
fn wait_child_step(task: &TaskRef, packet: &dyn Completion) -> bool {
    if current_is_cancelling() {
        let Some(shared) = current_shared_for_drain() else { return false };
        if up::destroy(&shared, task) || packet.is_done() {
            return true;
        }
        if shared.draining.load(Acquire) {
            // Running elsewhere cannot happen during the drain (no
            // worker is left); do not spin on it either.
            return false;
        }
        // `block_on`'s deadlock path destroys fibers while the workers
        // still run: the child is running or queued there. It borrows
        // from us, so wait for it to finish or park (then destroy it).
        std::thread::sleep(Duration::from_millis(1));
        return true;
    }
    if !packet.register_current() {
        park();
    }
    true
}

/// Make sure the fiber of `task` is finished or destroyed before the
/// caller goes on: destroy it when it is queued or parked, otherwise (it
/// runs on a worker) wait and retry. Used by `block_on` on its unwinding
/// paths, from a plain thread, while the workers run; destructors of the
/// destroyed fiber run on this thread (as in the shutdown drain).
pub(crate) fn destroy_until_done(shared: &Arc<Shared>, task: &TaskRef, packet: &dyn Completion) {
    if packet.is_done() {
        return;
    }
    let prev = DRAINING.with(|d| d.replace(Some(shared.clone())));
    while !packet.is_done() {
        if up::destroy(shared, task) {
            continue;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    DRAINING.with(|d| *d.borrow_mut() = prev);
}

/// During the drain there is no worker on this thread; the registry that a
/// destroyed child must leave is reached through the draining runtime,
/// which `destroy` only needs for bookkeeping.
pub(crate) fn current_shared_for_drain() -> Option<Arc<Shared>> {
    DRAINING.with(|d| d.borrow().clone())
}

thread_local! {
    /// The runtime this thread is draining, if any.
    pub(crate) static DRAINING: std::cell::RefCell<Option<Arc<Shared>>> = const { std::cell::RefCell::new(None) };
}
