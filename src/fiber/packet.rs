//! Join state of one fiber: the result slot, the waiter, and the fiber's
//! main function that fills it.
//!
//! # The packet protocol (lock-free; issue 15)
//!
//! A [`Packet`] is shared by a fiber's [`Main`] (the *completer*, which
//! publishes the result once) and its `JoinHandle` (the *owner*, which
//! takes it once). It is one atomic state word, the result in a cell, one
//! inline waiter slot for the owner, and a locked list for the rare other
//! waiters (a scope waiting for a child whose handle is elsewhere):
//!
//! | bit | set by | meaning |
//! | --- | --- | --- |
//! | `DONE` | completer | the result cell is written and published |
//! | `PANICKED` | completer, with `DONE` | the result is a panic |
//! | `CLAIMED` | completer | a completer owns the result cell (general [`Packet::complete`] only) |
//! | `WAITING` | owner | the inline slot holds the owner's waiter |
//! | `WOKEN` | completer | the completer is done with the inline waiter |
//! | `TAKEN` | owner | the result was taken |
//! | `MORE` | other waiters | the locked list may hold waiters |
//!
//! Ownership of the two cells (what makes the `UnsafeCell` accesses sound):
//!
//! * **The result cell** belongs to the completer until it sets `DONE`
//!   (an `AcqRel` read-modify-write, so the write is published), then to the
//!   owner, who takes it after an `Acquire` load that saw `DONE`. There is
//!   one completer: [`Main`] completes exactly once (its `run`, `fail` or
//!   `drop`, all consuming it), and the general [`Packet::complete`] used by
//!   graph latches first claims `CLAIMED`; a second claimant drops its value.
//! * **The inline waiter slot** belongs to the owner while `WAITING` is
//!   clear. The owner writes its waiter, then sets `WAITING` with a CAS
//!   (`Release`) that fails if `DONE` was set meanwhile (the owner then
//!   takes its waiter back and the result with it: it never parks). While
//!   `WAITING` is set and `DONE` is not, the slot is only read (the owner
//!   may compare it with itself after a spurious wake-up; a completer may
//!   read it). The owner leaves early only by a CAS that clears `WAITING`
//!   and fails if `DONE` is set (`clear_waiter`, used by `when_any` for the
//!   losers and by `JoinHandle`'s drop). The completer's `fetch_or(DONE)`
//!   returns the previous word: if it had `WAITING`, the registration can no
//!   longer change, the completer reads the slot and wakes the waiter, and
//!   then stores `WOKEN` (`Release`). An owner that sees `DONE | WAITING`
//!   without `WOKEN` (woken spuriously, or resumed on another worker before
//!   the completer's last store) waits for `WOKEN` before it touches the
//!   slot or returns.
//!
//! That last rule is what lets the inline waiter hold *plain pointers* to the
//! waiting fiber's task and runtime (no reference counts per join): the
//! completer dereferences them only between its `fetch_or(DONE)` and its
//! `WOKEN` store, and in that window the owner is still inside its wait, so
//! its task is alive (a parked task holds a reference to itself,
//! `fiber::task` step 5; a running one is held by its worker) and so is its
//! runtime (a runtime's `Shared` outlives its fibers: the shutdown drain
//! destroys a parked owner by unwinding it, and the unwinding owner waits
//! for `WOKEN` too, through `JoinHandle`'s drop or [`Packet::wait`]'s guard).
//! The completer wakes a parked fiber by winning `PARKED -> QUEUED` and
//! pushing the task's reference to itself, as a wait-queue grant does.
//!
//! The owner's `TAKEN` is a plain store of the word it read (one locked
//! instruction less). It may overwrite a concurrent change of another bit,
//! which is harmless: after `DONE` nobody clears or sets `WAITING`, `WOKEN`
//! (the owner read it, or `WAITING` was clear) or `DONE`; a second general
//! completer's `CLAIMED` is already in the stored word; and a `MORE` set
//! after `DONE` is ignored (its setter saw `DONE` in its own `fetch_or` and
//! does not wait). `WOKEN` is a `fetch_or` (see `after_done`).
//!
//! **Other waiters** (`Completion::register_current`: scopes) hold counted
//! references (`Waiter`) in a `Mutex<Vec<_>>`. A waiter pushes itself under
//! the lock and then `fetch_or(MORE)`; the completer's `fetch_or(DONE)`
//! and that `fetch_or(MORE)` are ordered on the one word, so either the
//! completer sees `MORE` (it then takes the list under the lock and wakes
//! everyone) or the waiter sees `DONE` (it removes itself and does not
//! park). Never neither.
//!
//! Per spawn + join on one worker (the joiner registers before the child
//! runs) the packet costs three locked instructions: the owner's CAS and
//! the completer's two `fetch_or`s (`DONE`, `WOKEN`), where the mutex
//! version took six for three lock acquisitions, plus six reference counts
//! for two counted `Waiter`s and the wake (`BENCHMARKS.md`, "Spawn + join:
//! the lock-free packet").
//!
//! # One allocation per spawned fiber for closure and packet
//!
//! A spawned fiber's closure and its packet share one `Arc`
//! ([`MainPacket`], made by [`new_main`]): the task's [`Entry`] holds one
//! reference, the `JoinHandle` ([`PacketRef`]) the other, and a scope a
//! third. An entry dropped without running (the shutdown drain, a
//! coroutine dropped before its first resume) publishes
//! `JoinError::cancelled`, as the dropped `Box` of the fiber's main did.
//!
//! The loom models `join_vs_complete`, `join_vs_cancel`,
//! `join_register_vs_clear`, `join_watching_vs_complete`,
//! `scope_wait_vs_join` and `latch_double_open` (`tests/loom.rs`) run this
//! code with thread waiters. They check the cells' ownership hand-offs and
//! that no waiter is lost; the lifetime argument for a fiber waiter's plain
//! pointers (the `WOKEN` wait) is the one above, which loom cannot see
//! (its waiters are threads).

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::loom::cell::UnsafeCell;
use crate::loom::sync::atomic::{AtomicUsize, Ordering::*};
use crate::loom::sync::{Mutex, MutexGuard};
use crate::loom::thread::{self, Thread};

use crate::error::JoinError;
use crate::fiber::task::{Task, TaskRef};
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

/// Lifecycle bits of `Packet::state` (module docs).
const DONE: usize = 1;
const PANICKED: usize = 2;
const CLAIMED: usize = 4;
const WAITING: usize = 8;
const WOKEN: usize = 16;
const TAKEN: usize = 32;
const MORE: usize = 64;

/// The owner's waiter in the inline slot: plain pointers for a fiber (valid
/// while the owner waits, module docs), a thread handle for a thread.
enum Inline {
    Fiber { task: *const Task, shared: *const Shared },
    Thread(Thread),
}

impl Inline {
    /// The caller, as the owner's waiter.
    #[inline]
    fn current() -> Inline {
        let (w, task) = tls::worker_and_task();
        if w.is_null() || task.is_null() {
            return Inline::Thread(thread::current());
        }
        // SAFETY: a non-null WORKER points to this thread's live worker.
        let shared = unsafe { Arc::as_ptr(&(*w).shared) };
        Inline::Fiber { task, shared }
    }

    fn same(&self, o: &Inline) -> bool {
        match (self, o) {
            (Inline::Fiber { task: a, .. }, Inline::Fiber { task: b, .. }) => std::ptr::eq(*a, *b),
            (Inline::Thread(a), Inline::Thread(b)) => a.id() == b.id(),
            _ => false,
        }
    }

    /// Wake the waiter (a token if it is not parked yet).
    ///
    /// # Safety
    /// For `Fiber`: the owner is inside its wait (the completer is between
    /// its `fetch_or(DONE)` and its `WOKEN` store), so the task and the
    /// runtime the pointers name are alive (module docs).
    unsafe fn wake(&self) {
        match self {
            Inline::Fiber { task, shared } => {
                // SAFETY: alive (caller).
                if unsafe { (**task).transition_to_notified() } {
                    // We won `PARKED -> QUEUED`: the parked task's
                    // reference to itself is ours to push (`fiber::task`,
                    // step 5), so no count changes.
                    // SAFETY: `task` is the pointer of a live `Arc<Task>`
                    // and that reference exists (we won the CAS).
                    let t = unsafe { Arc::from_raw(*task) };
                    // SAFETY: `shared` is `Arc::as_ptr` of the owner's live
                    // runtime (caller); `ManuallyDrop` keeps its count.
                    let s = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(*shared) });
                    s.reschedule(t);
                }
            }
            Inline::Thread(t) => {
                crate::sync::deadlock::note_thread_wake();
                t.unpark();
            }
        }
    }
}

/// Shared between a fiber's main function and its `JoinHandle` (module
/// docs).
pub(crate) struct Packet<T> {
    state: AtomicUsize,
    result: UnsafeCell<Option<Result<T, JoinError>>>,
    waiter: UnsafeCell<Option<Inline>>,
    more: Mutex<Vec<Waiter>>,
}

// SAFETY: the cells are accessed only as the module docs' ownership rules
// allow: at any instant one thread owns the result cell, and the inline
// slot is either owned by one thread or only read. The value moves from
// the completer's thread to the owner's, so `T: Send` is required (as for
// `Mutex<T>`); the raw pointers in `Inline` are dereferenced only while
// their targets are alive (module docs), and `Task` and `Shared` are
// `Sync`.
unsafe impl<T: Send> Send for Packet<T> {}
// SAFETY: see `Send`: shared access never gives two threads the value.
unsafe impl<T: Send> Sync for Packet<T> {}

impl<T> Packet<T> {
    /// A packet of its own (graph latches, models).
    pub(crate) fn new() -> Arc<Packet<T>> {
        Arc::new(Packet::empty())
    }

    fn empty() -> Packet<T> {
        Packet {
            state: AtomicUsize::new(0),
            result: UnsafeCell::new(None),
            waiter: UnsafeCell::new(None),
            more: Mutex::new(Vec::new()),
        }
    }

    fn lock_more(&self) -> MutexGuard<'_, Vec<Waiter>> {
        // Never held across user code, so never poisoned; recover anyway.
        self.more.lock().unwrap_or_else(|e| e.into_inner())
    }

    #[inline]
    pub(crate) fn is_done(&self) -> bool {
        self.state.load(Acquire) & DONE != 0
    }

    /// Publish `r` from the packet's one completer (a [`Main`]).
    ///
    /// # Safety
    /// No other completion of this packet ever happens: neither another
    /// `complete_unique` nor [`Packet::complete`].
    #[inline]
    pub(crate) unsafe fn complete_unique(&self, r: Result<T, JoinError>) {
        let p = if matches!(&r, Err(e) if e.is_panic()) { PANICKED } else { 0 };
        // SAFETY: before `DONE` the result cell is the completer's, and we
        // are the only one (caller).
        self.result.with_mut(|c| unsafe { *c = Some(r) });
        let prev = self.state.fetch_or(DONE | CLAIMED | p, AcqRel);
        debug_assert_eq!(prev & (DONE | CLAIMED), 0, "a packet completes once");
        // SAFETY: we just set `DONE` and `prev` is the word before.
        unsafe { self.after_done(prev) };
    }

    /// Publish `r` unless the packet was completed already (then `r` is
    /// dropped): for latches that several parties may open.
    pub(crate) fn complete(&self, r: Result<T, JoinError>) {
        if self.state.load(Acquire) & CLAIMED != 0 {
            return;
        }
        if self.state.fetch_or(CLAIMED, AcqRel) & CLAIMED != 0 {
            return;
        }
        let p = if matches!(&r, Err(e) if e.is_panic()) { PANICKED } else { 0 };
        // SAFETY: we won `CLAIMED`: the result cell is ours until `DONE`.
        self.result.with_mut(|c| unsafe { *c = Some(r) });
        let prev = self.state.fetch_or(DONE | p, AcqRel);
        // SAFETY: we just set `DONE` and `prev` is the word before.
        unsafe { self.after_done(prev) };
    }

    /// The completer's wake-ups after its `fetch_or(DONE)` returned `prev`.
    ///
    /// # Safety
    /// The caller is the completer that set `DONE`.
    unsafe fn after_done(&self, prev: usize) {
        if prev & WAITING != 0 {
            // The registration is fixed now (the owner's CASes fail on
            // `DONE`), and the owner waits for `WOKEN` before it touches
            // the slot: a shared read is race-free.
            self.waiter.with(|w| {
                // SAFETY: `WAITING` was set, so the owner wrote the slot
                // before its Release CAS, which our AcqRel RMW read.
                if let Some(w) = unsafe { &*w } {
                    // SAFETY: we are before our `WOKEN` store.
                    unsafe { w.wake() };
                }
            });
            // A read-modify-write, not a plain store of `now | WOKEN`: a
            // scope's `MORE` or a second latch opener's `CLAIMED` may land
            // in between, and the loom models do not terminate with the
            // plain store (the owner's spin on `WOKEN` then reads a stale
            // word forever in loom's model), so this stays an RMW.
            self.state.fetch_or(WOKEN, Release);
        }
        if prev & MORE != 0 {
            // Counted waiters: safe to wake after `WOKEN`. The completer
            // keeps the packet alive (it holds an `Arc`).
            let ws = std::mem::take(&mut *self.lock_more());
            for w in ws {
                w.wake();
            }
        }
    }

    /// Owner: wait until the completer is done with our inline waiter.
    /// Returns the state word then. Only spins in a window of a few
    /// instructions of a running completer (module docs).
    #[inline]
    fn settled(&self) -> usize {
        let mut s = self.state.load(Acquire);
        let mut spins = 0u32;
        while s & (DONE | WAITING | WOKEN) == DONE | WAITING {
            spins += 1;
            backoff(spins);
            s = self.state.load(Acquire);
        }
        s
    }

    /// Owner: take the result of a packet seen `DONE`.
    ///
    /// # Safety
    /// The caller is the packet's owner (one `JoinHandle`, or a latch's one
    /// waiter), saw `DONE`, and has not taken the result before.
    unsafe fn take_done(&self) -> Result<T, JoinError> {
        let s = self.settled();
        // SAFETY: `DONE` and settled: both cells are the owner's now.
        self.waiter.with_mut(|w| unsafe { *w = None });
        // SAFETY: as above; the completer published the cell with `DONE`.
        let r = self.result.with_mut(|c| unsafe { (*c).take() });
        // Plain store: module docs.
        self.state.store(s | TAKEN, Release);
        r.expect("a done packet holds its result until the owner takes it")
    }

    /// Owner: put `w` in the inline slot. `false` when the packet is done
    /// already (nothing registered; the caller takes the result).
    ///
    /// # Safety
    /// The caller is the packet's owner (see `take_done`).
    unsafe fn register(&self, w: Inline) -> bool {
        let mut s = self.state.load(Acquire);
        let mut w = Some(w);
        loop {
            if s & DONE != 0 {
                return false;
            }
            if s & WAITING != 0 {
                // SAFETY: a shared read, which the docs allow while
                // `WAITING` is set (our earlier registration: a spurious
                // wake-up, another round of `when_any`).
                let same = self.waiter.with(|x| unsafe { &*x }.as_ref().zip(w.as_ref()).is_some_and(|(a, b)| a.same(b)));
                if same {
                    return true;
                }
                // Another waiter (a handle that changed hands after an
                // abandoned wait): take the slot back first.
                match self.state.compare_exchange(s, s & !WAITING, Acquire, Acquire) {
                    Ok(_) => s &= !WAITING,
                    Err(a) => {
                        s = a;
                        continue;
                    }
                }
            }
            // SAFETY: `WAITING` is clear and `DONE` is not set: the slot is
            // the owner's alone.
            self.waiter.with_mut(|x| unsafe { *x = w.take() });
            match self.state.compare_exchange(s, s | WAITING, Release, Acquire) {
                Ok(_) => return true,
                Err(a) => {
                    // Not published: still ours (for another try, or to drop
                    // if `DONE` came meanwhile).
                    // SAFETY: as above, `WAITING` was never set.
                    w = self.waiter.with_mut(|x| unsafe { (*x).take() });
                    s = a;
                }
            }
        }
    }

    /// Owner: withdraw the inline waiter, if any; when the completer has
    /// it already, wait until it is done with it. Afterwards nobody reads
    /// the waiter, so the waiting fiber may go (`when_any` for the losers,
    /// `JoinHandle`'s drop, an unwinding `wait`).
    ///
    /// # Safety
    /// The caller is the packet's owner (see `take_done`).
    #[inline]
    pub(crate) unsafe fn clear_waiter(&self) {
        let s = self.state.load(Acquire);
        if s & WAITING == 0 || s & TAKEN != 0 {
            return;
        }
        // SAFETY: forwarded (caller).
        unsafe { self.clear_waiter_slow(s) }
    }

    /// `clear_waiter` with a waiter registered at `s`.
    ///
    /// # Safety
    /// As `clear_waiter`.
    #[cold]
    unsafe fn clear_waiter_slow(&self, mut s: usize) {
        loop {
            if s & WAITING == 0 || s & TAKEN != 0 {
                return;
            }
            if s & DONE != 0 {
                self.settled();
                // SAFETY: done and settled: the slot is the owner's.
                self.waiter.with_mut(|x| unsafe { *x = None });
                return;
            }
            match self.state.compare_exchange(s, s & !WAITING, Acquire, Acquire) {
                Ok(_) => {
                    // SAFETY: we cleared `WAITING` before any `DONE`: no
                    // completer read this registration, the slot is ours.
                    self.waiter.with_mut(|x| unsafe { *x = None });
                    return;
                }
                Err(a) => s = a,
            }
        }
    }

    /// Owner: the result if the packet is done.
    ///
    /// # Safety
    /// The caller is the packet's owner and has not taken the result.
    pub(crate) unsafe fn try_take(&self) -> Option<Result<T, JoinError>> {
        // SAFETY: forwarded (caller), `DONE` seen.
        self.is_done().then(|| unsafe { self.take_done() })
    }

    /// Owner: take the result if it is there; otherwise register the caller
    /// as the inline waiter (a spurious wake-up re-registers nothing).
    ///
    /// # Safety
    /// The caller is the packet's owner and has not taken the result.
    pub(crate) unsafe fn try_take_or_register(&self) -> Option<Result<T, JoinError>> {
        // SAFETY: forwarded (caller).
        if self.is_done() || !unsafe { self.register(Inline::current()) } {
            // SAFETY: forwarded (caller), `DONE` seen.
            return Some(unsafe { self.take_done() });
        }
        None
    }

    /// Owner: register the caller as the inline waiter unless done;
    /// returns done (`when_any`).
    ///
    /// # Safety
    /// The caller is the packet's owner.
    pub(crate) unsafe fn register_owner(&self) -> bool {
        // SAFETY: forwarded (caller).
        self.is_done() || !unsafe { self.register(Inline::current()) }
    }

    /// Owner: block until the result is there and take it.
    ///
    /// # Safety
    /// The caller is the packet's owner (one `JoinHandle`, or a latch's one
    /// waiter) and has not taken the result.
    pub(crate) unsafe fn wait(&self) -> Result<T, JoinError> {
        if !self.is_done() {
            /// Withdraws the waiter if the wait unwinds (a fiber destroyed
            /// while it joins): the completer must not wake it later.
            struct Leave<'a, T>(&'a Packet<T>);
            impl<T> Drop for Leave<'_, T> {
                fn drop(&mut self) {
                    // SAFETY: the owner's wait, unwinding.
                    unsafe { self.0.clear_waiter() };
                }
            }
            // SAFETY: forwarded (caller).
            if unsafe { self.register(Inline::current()) } {
                let leave = Leave(self);
                loop {
                    park_caller();
                    if self.is_done() {
                        break;
                    }
                    // A spurious wake-up: the registration is still there.
                }
                std::mem::forget(leave);
            }
        }
        // SAFETY: forwarded (caller); `DONE` seen.
        unsafe { self.take_done() }
    }
}

/// The owner's pause while a completer finishes with its waiter.
#[inline]
fn backoff(spins: u32) {
    #[cfg(loom)]
    {
        let _ = spins;
        crate::loom::thread::yield_now();
    }
    #[cfg(not(loom))]
    if spins < 64 {
        std::hint::spin_loop();
    } else {
        crate::fiber::yield_now();
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
    /// The slow path for waiters other than the owner (module docs).
    fn register_current(&self) -> bool {
        if self.is_done() {
            return true;
        }
        let w = Waiter::current();
        let mut g = self.lock_more();
        let pushed = !g.iter().any(|x| x.same(&w));
        if pushed {
            g.push(w);
        }
        if self.state.fetch_or(MORE, AcqRel) & DONE != 0 {
            // The completer did not see our `MORE`: do not wait (and do
            // not leave the waiter behind for a later spurious wake-up).
            if pushed {
                g.pop();
            }
            return true;
        }
        false
    }
    fn unjoined_panic(&self) -> bool {
        let s = self.state.load(Acquire);
        s & PANICKED != 0 && s & TAKEN == 0
    }
}

/// What a `Task` runs: a boxed [`FiberMain`] (fork-join runners, tests), or
/// a spawned fiber's [`MainPacket`], shared with its `JoinHandle`.
pub(crate) enum Entry {
    Boxed(Box<dyn FiberMain>),
    Fiber(FiberEntry),
}

impl<M: FiberMain + 'static> From<Box<M>> for Entry {
    fn from(m: Box<M>) -> Entry {
        Entry::Boxed(m)
    }
}

impl Entry {
    /// Run the fiber's function and publish its result.
    pub(crate) fn run(self) {
        match self {
            Entry::Boxed(m) => m.run(),
            Entry::Fiber(e) => e.into_inner().run(),
        }
    }

    /// The fiber cannot run (no stack): publish `e` instead.
    pub(crate) fn fail(self, e: JoinError) {
        match self {
            Entry::Boxed(m) => m.fail(e),
            Entry::Fiber(f) => f.into_inner().fail(e),
        }
    }
}

/// A spawned fiber's entry: its share of the [`MainPacket`]. Dropped
/// without running (shutdown drain, a coroutine dropped before its first
/// resume), it publishes `JoinError::cancelled`, like a dropped `Main`.
pub(crate) struct FiberEntry(std::mem::ManuallyDrop<Arc<dyn SharedMain>>);

impl FiberEntry {
    fn into_inner(self) -> Arc<dyn SharedMain> {
        let mut me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the `Arc` is taken exactly once.
        unsafe { std::mem::ManuallyDrop::take(&mut me.0) }
    }
}

impl Drop for FiberEntry {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and `self.0` is not used afterwards.
        let m = unsafe { std::mem::ManuallyDrop::take(&mut self.0) };
        m.cancel();
    }
}

/// The fiber side of a [`MainPacket`] (object-safe).
pub(crate) trait SharedMain: Send + Sync {
    fn run(self: Arc<Self>);
    fn fail(self: Arc<Self>, e: JoinError);
    /// Dropped unrun: publish `JoinError::cancelled` and drop the closure.
    fn cancel(&self);
}

/// A spawned fiber's closure and its join packet in one allocation (issue
/// 15): the task's entry holds one reference, the `JoinHandle` the other.
/// The closure cell is touched only by the holder of the fiber's run
/// permission (`fiber::task`): the worker that runs it, or the drain.
pub(crate) struct MainPacket<F, T> {
    packet: Packet<T>,
    f: std::cell::UnsafeCell<Option<F>>,
}

// SAFETY: `f` is used only under the fiber's run permission, which is
// unique at every instant and moves between threads with a
// happens-before edge (`fiber::task`); the packet is `Sync` for `T: Send`.
unsafe impl<F: Send, T: Send> Sync for MainPacket<F, T> {}

impl<F, T> MainPacket<F, T> {
    /// Complete as cancelled unless done, then drop the closure if it is
    /// still there.
    fn cancel_now(&self) {
        if !self.packet.is_done() {
            // SAFETY: a `MainPacket`'s packet has one completer, this
            // fiber (`new_main`), and it has not completed (not done).
            unsafe { self.packet.complete_unique(Err(JoinError::cancelled())) };
        }
        // SAFETY: the run permission (type docs): ours.
        drop(unsafe { (*self.f.get()).take() });
    }
}

impl<F, T> SharedMain for MainPacket<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(self: Arc<Self>) {
        // SAFETY: the run permission (type docs).
        let f = unsafe { (*self.f.get()).take() }.expect("fiber main runs once");
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
                    // the coroutine root, reporting the cancellation first.
                    self.cancel_now();
                    std::panic::resume_unwind(p);
                }
                Err(JoinError::panicked(p))
            }
        };
        // SAFETY: this fiber is its packet's one completer (`new_main`),
        // completing once: not done yet (only `cancel`, never called on a
        // started fiber, and `fail`, only for unstarted ones, complete too).
        unsafe { self.packet.complete_unique(r) };
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
    fn fail(self: Arc<Self>, e: JoinError) {
        // SAFETY: as in `run`; an unstarted fiber, not completed.
        unsafe { self.packet.complete_unique(Err(e)) };
        // SAFETY: the run permission (type docs).
        drop(unsafe { (*self.f.get()).take() });
    }
    fn cancel(&self) {
        self.cancel_now();
    }
}

impl<F: Send, T: Send> Completion for MainPacket<F, T> {
    fn is_done(&self) -> bool {
        self.packet.is_done()
    }
    fn register_current(&self) -> bool {
        self.packet.register_current()
    }
    fn unjoined_panic(&self) -> bool {
        self.packet.unjoined_panic()
    }
}

/// The `JoinHandle`'s share of a [`MainPacket`]: the packet (a pointer
/// into the shared allocation, for direct calls) and the counted owner.
pub(crate) struct PacketRef<T> {
    packet: std::ptr::NonNull<Packet<T>>,
    owner: Arc<dyn Completion + Send + Sync>,
}

// SAFETY: a `PacketRef` is an `Arc` of a `Send + Sync` allocation (for
// `T: Send`) plus a pointer into it.
unsafe impl<T: Send> Send for PacketRef<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send> Sync for PacketRef<T> {}

impl<T> std::ops::Deref for PacketRef<T> {
    type Target = Packet<T>;
    #[inline]
    fn deref(&self) -> &Packet<T> {
        // SAFETY: points into the allocation `owner` keeps alive.
        unsafe { self.packet.as_ref() }
    }
}

impl<T> PacketRef<T> {
    /// The packet as a scope sees it (a counted, type-erased reference).
    pub(crate) fn completion(&self) -> Arc<dyn Completion + Send + Sync> {
        self.owner.clone()
    }
}

/// A spawned fiber's entry and its handle's packet, in one allocation.
///
/// # Safety
/// As `fiber::spawn_unchecked`: the fiber finishes (or is destroyed) before
/// anything `f` borrows goes away (the lifetimes are erased here).
pub(crate) unsafe fn new_main<'a, F, T>(f: F) -> (Entry, PacketRef<T>)
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let m = Arc::new(MainPacket { packet: Packet::empty(), f: std::cell::UnsafeCell::new(Some(f)) });
    let packet = std::ptr::NonNull::from(&m.packet);
    let owner: Arc<dyn Completion + Send + Sync + 'a> = m.clone();
    let main: Arc<dyn SharedMain + 'a> = m;
    // SAFETY: lifetime erasure only (caller's contract). After the fiber
    // is finished or destroyed the closure cell is empty, so a late drop
    // of the allocation runs no code of `F`.
    let owner: Arc<dyn Completion + Send + Sync> = unsafe { std::mem::transmute(owner) };
    // SAFETY: as above.
    let main: Arc<dyn SharedMain> = unsafe { std::mem::transmute(main) };
    (Entry::Fiber(FiberEntry(std::mem::ManuallyDrop::new(main))), PacketRef { packet, owner })
}

/// The body of a fiber, type-erased.
pub(crate) trait FiberMain: Send {
    /// Run the user function and publish its result.
    fn run(self: Box<Self>);
    /// The fiber cannot run (no stack): publish `e` instead.
    fn fail(self: Box<Self>, e: JoinError);
}

/// A fiber body that does nothing (unit tests that need a `Task`).
#[cfg(test)]
pub(crate) struct NopMain;

#[cfg(test)]
impl FiberMain for NopMain {
    fn run(self: Box<Self>) {}
    fn fail(self: Box<Self>, _e: JoinError) {}
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
