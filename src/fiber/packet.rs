//! Join state of one fiber: the result slot, the waiter, and the fiber's
//! main function that fills it.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::loom::sync::atomic::{AtomicBool, Ordering::*};
use crate::loom::sync::{Mutex, MutexGuard};
use crate::loom::thread::{self, Thread};

use crate::error::JoinError;
use crate::fiber::task::TaskRef;
use crate::runtime::shared::Shared;
use crate::worker::tls;

/// Someone blocked until an event: a parked fiber or a parked thread.
#[derive(Clone)]
pub(crate) enum Waiter {
    Fiber { task: TaskRef, shared: Arc<Shared> },
    Thread(Thread),
}

impl Waiter {
    /// The caller, as a waiter.
    pub(crate) fn current() -> Waiter {
        match crate::fiber::current_task_and_shared() {
            Some((task, shared)) => Waiter::Fiber { task, shared },
            None => Waiter::Thread(thread::current()),
        }
    }

    fn same(&self, o: &Waiter) -> bool {
        match (self, o) {
            (Waiter::Fiber { task: a, .. }, Waiter::Fiber { task: b, .. }) => Arc::ptr_eq(a, b),
            (Waiter::Thread(a), Waiter::Thread(b)) => a.id() == b.id(),
            _ => false,
        }
    }

    /// Wake the waiter (a token if it is not parked yet).
    pub(crate) fn wake(self) {
        match self {
            Waiter::Fiber { task, shared } => shared.wake(task),
            Waiter::Thread(t) => {
                crate::sync::deadlock::note_thread_wake();
                t.unpark()
            }
        }
    }
}

/// Block the caller (fiber or thread) until woken; may return spuriously.
#[inline] // the switch inlined into the waiting loop: see `fiber::yield_now`
pub(crate) fn park_caller() {
    let t = tls::current_task_ptr();
    if t.is_null() {
        // Counted for the deadlock proof: this thread wakes nobody now.
        let _blocked = crate::sync::deadlock::ThreadBlocked::enter();
        thread::park();
    } else {
        crate::fiber::park_task(t);
    }
}

/// Block the caller until woken or until `deadline`; may return early
/// (spuriously): callers loop on their condition and compare the time.
#[allow(dead_code)] // used by the sync primitives (issue 5)
pub(crate) fn park_caller_until(deadline: std::time::Instant) {
    let now = std::time::Instant::now();
    if now >= deadline {
        return;
    }
    let w = tls::worker_ptr();
    let t = tls::current_task_ptr();
    if t.is_null() || w.is_null() {
        std::thread::park_timeout(deadline - now);
        return;
    }
    if let Some((task, _)) = crate::fiber::current_task_and_shared() {
        // SAFETY: a non-null WORKER is this thread's live worker; the
        // reference is not kept across the park below.
        unsafe { (*w).add_timer(deadline, task) };
    }
    crate::fiber::park_current();
    // SAFETY: `t` is the running fiber's own task (non-null, checked
    // above), alive while its fiber runs, which it does again here.
    unsafe { (*t).timed_wait_over() };
}

pub(crate) struct PacketInner<T> {
    result: Option<Result<T, JoinError>>,
    waiters: Waiters,
    /// The result was taken by a join.
    taken: bool,
}

/// The waiters of one packet. Nearly always one joiner: it is stored
/// inline, so a join allocates nothing for it; more (scopes, `when_any`
/// plus a join) go to a `Vec`.
#[derive(Default)]
struct Waiters {
    first: Option<Waiter>,
    more: Vec<Waiter>,
}

impl Waiters {
    fn iter(&self) -> impl Iterator<Item = &Waiter> {
        self.first.iter().chain(self.more.iter())
    }

    fn push(&mut self, w: Waiter) {
        if self.first.is_none() {
            self.first = Some(w);
        } else {
            self.more.push(w);
        }
    }

    fn into_all(self) -> impl Iterator<Item = Waiter> {
        self.first.into_iter().chain(self.more)
    }
}

impl<T> PacketInner<T> {
    /// Register `w` unless the same waiter already is (a waiter that woke
    /// spuriously registers again).
    fn add_waiter(&mut self, w: Waiter) {
        if !self.waiters.iter().any(|x| x.same(&w)) {
            self.waiters.push(w);
        }
    }
}

/// Shared between a fiber's main function and its `JoinHandle`.
pub(crate) struct Packet<T> {
    done: AtomicBool,
    panicked: AtomicBool,
    inner: Mutex<PacketInner<T>>,
}

impl<T> Packet<T> {
    pub(crate) fn new() -> Arc<Packet<T>> {
        Arc::new(Packet {
            done: AtomicBool::new(false),
            panicked: AtomicBool::new(false),
            inner: Mutex::new(PacketInner { result: None, waiters: Waiters::default(), taken: false }),
        })
    }

    fn lock(&self) -> MutexGuard<'_, PacketInner<T>> {
        // The lock is never held across user code, so it is never poisoned;
        // recover anyway rather than panic.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn is_done(&self) -> bool {
        self.done.load(Acquire)
    }

    pub(crate) fn complete(&self, r: Result<T, JoinError>) {
        let mut g = self.lock();
        if g.result.is_some() || g.taken {
            return;
        }
        if matches!(&r, Err(e) if e.is_panic()) {
            self.panicked.store(true, Release);
        }
        g.result = Some(r);
        self.done.store(true, Release);
        let ws = std::mem::take(&mut g.waiters);
        drop(g);
        for w in ws.into_all() {
            w.wake();
        }
    }

    /// Take the result if it is there; otherwise register `waiter`.
    pub(crate) fn try_take_or_register(&self, waiter: &mut Option<Waiter>) -> Option<Result<T, JoinError>> {
        let mut g = self.lock();
        if let Some(r) = g.result.take() {
            g.taken = true;
            return Some(r);
        }
        if let Some(w) = waiter.take() {
            g.add_waiter(w);
        }
        None
    }

    /// Remove a registered waiter (used by `when_any` for the losers).
    pub(crate) fn clear_waiter(&self) {
        let ws = std::mem::take(&mut self.lock().waiters);
        drop(ws);
    }

    /// Block until the result is there and take it.
    pub(crate) fn wait(&self) -> Result<T, JoinError> {
        if self.is_done() {
            if let Some(r) = self.try_take_or_register(&mut None) {
                return r;
            }
        }
        loop {
            let mut w = Some(Waiter::current());
            if let Some(r) = self.try_take_or_register(&mut w) {
                return r;
            }
            park_caller();
        }
    }
}

/// Type-erased view of a packet, for scopes.
pub(crate) trait Completion {
    fn is_done(&self) -> bool;
    /// Register the caller as waiter unless done; returns done.
    fn register_current(&self) -> bool;
    /// The fiber panicked and nobody took the panic.
    fn unjoined_panic(&self) -> bool;
}

impl<T> Completion for Packet<T> {
    fn is_done(&self) -> bool {
        Packet::is_done(self)
    }
    fn register_current(&self) -> bool {
        let mut g = self.lock();
        if g.result.is_some() || g.taken {
            return true;
        }
        g.add_waiter(Waiter::current());
        false
    }
    fn unjoined_panic(&self) -> bool {
        self.panicked.load(Acquire) && !self.lock().taken
    }
}

/// The body of a fiber, type-erased.
pub(crate) trait FiberMain: Send {
    /// Run the user function and publish its result.
    fn run(self: Box<Self>);
    /// The fiber cannot run (no stack): publish `e` instead.
    fn fail(self: Box<Self>, e: JoinError);
}

/// Runs `f` and publishes its result into `packet`. If it is dropped
/// without running (shutdown), or unwound by a forced unwind, the packet
/// gets `JoinError::cancelled` instead, so no joiner waits forever.
pub(crate) struct Main<F, T> {
    pub(crate) f: Option<F>,
    pub(crate) packet: Arc<Packet<T>>,
}

impl<F, T> FiberMain for Main<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(mut self: Box<Self>) {
        let f = self.f.take().expect("fiber main runs once");
        let r = catch_unwind(AssertUnwindSafe(f));
        if r.is_ok() || !crate::fiber::current_is_cancelling() {
            // Count before publishing, so a joiner that reads the stats
            // right after its join sees this fiber as completed.
            crate::fiber::note_completed();
        }
        let r = match r {
            Ok(v) => Ok(v),
            Err(p) => {
                if crate::fiber::current_is_cancelling() {
                    // A forced unwind from the shutdown drain: let it reach
                    // the coroutine root. Our Drop reports the cancellation.
                    std::panic::resume_unwind(p);
                }
                Err(JoinError::panicked(p))
            }
        };
        self.packet.complete(r);
        // A detached fiber's packet dies with us: its value (or panic
        // payload) is dropped here, on the fiber's stack. A destructor that
        // panics there must not escape the fiber (it would reach the worker
        // loop and abort the process): contain and report it.
        let id = crate::fiber::current_id();
        if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(self))) {
            report_contained_drop_panic(id, "a detached fiber's result", &*p);
            // That panic's payload may panic when dropped as well: then
            // leak it rather than loop.
            if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(p))) {
                std::mem::forget(again);
            }
        }
    }
    fn fail(self: Box<Self>, e: JoinError) {
        self.packet.complete(Err(e));
    }
}

impl<F, T> Drop for Main<F, T> {
    fn drop(&mut self) {
        if !self.packet.is_done() {
            self.packet.complete(Err(JoinError::cancelled()));
        }
    }
}

/// Say on stderr that a destructor's panic was contained (the fiber's
/// result had no joiner to receive it).
pub(crate) fn report_contained_drop_panic(id: Option<u64>, what: &str, p: &(dyn std::any::Any + Send)) {
    let msg = p
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string payload>");
    let who = id.map_or_else(|| "a fiber".to_string(), |i| format!("fiber {i}"));
    eprintln!("numafiber: the destructor of {what} of {who} panicked ({msg}); contained, the runtime goes on");
}
