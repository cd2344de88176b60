//! Join state of one fiber: the result slot, the waiter, and the fiber's
//! main function that fills it.
//!
//! # The packet protocol (lock-free)
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
//! | `DETACHED` | owner | the owner left without the result (in-task packets only) |
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
//! does not wait); `DETACHED` is the owner's own bit, never set by a
//! handle that takes. `WOKEN` is a `fetch_or` (see `after_done`).
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
//! # The closure and the packet: in the task, or in one `Arc`
//!
//! A spawned fiber's closure and its packet form one [`MainPacket`]. When
//! it fits ([`fits_in_task`]: at most [`MAIN_IN_TASK_SIZE`] bytes,
//! aligned to at most [`MAIN_IN_TASK_ALIGN`]) it lives **in the task**
//! (below); otherwise in an `Arc` ([`new_main`]): the task's [`Entry`]
//! holds one reference, the `JoinHandle` ([`PacketRef`]) the other, and a
//! scope a third. Either way an entry dropped without running (the
//! shutdown drain, a coroutine dropped before its first resume) publishes
//! `JoinError::cancelled`, as the dropped `Box` of the fiber's main did.
//!
//! # In the task
//!
//! [`new_in_task`] writes the `MainPacket` into the task's [`MainSlot`]
//! (an inline buffer in the pooled `Task`, `fiber::task_pool`), so a spawn
//! allocates nothing, and the `JoinHandle` reaches the packet through the
//! `TaskRef` it holds anyway: no second reference count. The slot is
//! type-erased by an [`InTaskVt`] of four functions made for the spawn's
//! `F` and `T` (run, fail, cancel: the entry's; drop: the slot's). Who may
//! touch the slot, and when:
//!
//! * **Writing it**: the spawner, right after `TaskPool::alloc` returned
//!   the task and before it clones or queues it: nobody else can reach the
//!   task (a new allocation, or a pooled one, which is unique: the pool's
//!   invariant), and `write_over` has emptied the slot.
//! * **The closure cell**: the holder of the fiber's run permission
//!   (`fiber::task`), through the task's [`InTaskEntry`] (run, fail, or
//!   its drop, which cancels), exactly as for the `Arc` version.
//! * **The packet**: its owner (the `JoinHandle`) and its completer (the
//!   entry), by the protocol above; a scope through its
//!   [`CompletionRef`] (only the state word and the locked list). All of
//!   them hold a `TaskRef` (the handle, the worker running the fiber or
//!   the drain holding it, the scope's list), so the task, and the slot
//!   in it, outlives every access.
//! * **Dropping it** ([`MainSlot::reset`]): only with `&mut Task`, when
//!   the task is written over for a new fiber (`NewTask::write_over`) or
//!   freed (`Task`'s `main` field is declared after `body`, so an unrun
//!   entry or a suspended coroutine dropped with the task completes the
//!   packet first). By then nobody else holds a reference, so the closure
//!   was taken (run, fail or cancel) and the result was taken by the
//!   owner or dropped by whoever detaching left it to (below): the drop
//!   runs no user code and a recycled task never shows an old value.
//!
//! # Detaching
//!
//! With an `Arc` packet, a detached fiber's result died with the last
//! reference: on the fiber's stack if the handle went first, else in the
//! handle's drop. An in-task packet lives as long as its task, so the
//! handle's drop says it leaves: [`Packet::detach`] (after
//! `clear_waiter`), a `fetch_or(DETACHED)` unless the result was taken
//! (`TAKEN`, a plain load: a joined handle pays nothing more). That RMW
//! and the completer's `fetch_or(DONE)` are ordered on the one word:
//!
//! * `DETACHED` first: the completer's `fetch_or` returns it, the owner
//!   never touches the cell again, so `complete_unique` takes the result
//!   back and the fiber drops it on its stack (a panicking destructor is
//!   contained and reported, as before).
//! * `DONE` first: `detach` sees it and takes the result; the handle
//!   drops it after releasing its task reference, where the last `Arc`
//!   dropped it before (a destructor's panic reaches the handle's owner).
//!
//! `TAKEN` is not set by a detach, so a scope still sees an unjoined
//! panic. Only a [`Main`] completer (`complete_unique`) honours
//! `DETACHED`; latches (`Packet::complete`) never detach. The loom models
//! `detach_vs_complete`, `detach_vs_cancel`, `join_in_task_vs_complete`
//! and `scope_wait_vs_join_in_task` run this code.
//!
//! [`Main`]: MainPacket
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

use crate::runtime::error::JoinError;
use crate::runtime::task::Task;
use crate::runtime::shared::Shared;
use crate::runtime::context;
use crate::runtime::cancel::Cancelled;
use crate::runtime::park::Waiter;
use crate::runtime::task::locals::end_of_fiber;

/// Lifecycle bits of `Packet::state` (module docs).
const DONE: usize = 1;
const PANICKED: usize = 2;
const CLAIMED: usize = 4;
const WAITING: usize = 8;
const WOKEN: usize = 16;
const TAKEN: usize = 32;
const MORE: usize = 64;
const DETACHED: usize = 128;

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
        let (w, task) = context::worker_and_task();
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
                crate::runtime::deadlock::note_thread_wake();
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
    ///
    /// Returns the result back when the owner detached first
    /// ([`Packet::detach`]: a spawn whose packet lives in its task): the
    /// completer then drops it (on the fiber's stack). `None` otherwise.
    #[inline]
    #[must_use = "a detached result must be dropped by the caller"]
    pub(crate) unsafe fn complete_unique(&self, r: Result<T, JoinError>) -> Option<Result<T, JoinError>> {
        let p = if matches!(&r, Err(e) if e.is_panic()) { PANICKED } else { 0 };
        // SAFETY: before `DONE` the result cell is the completer's, and we
        // are the only one (caller).
        self.result.with_mut(|c| unsafe { *c = Some(r) });
        let prev = self.state.fetch_or(DONE | CLAIMED | p, AcqRel);
        debug_assert_eq!(prev & (DONE | CLAIMED), 0, "a packet completes once");
        // SAFETY: we just set `DONE` and `prev` is the word before.
        unsafe { self.after_done(prev) };
        if prev & DETACHED == 0 {
            return None;
        }
        // SAFETY: the owner's `fetch_or(DETACHED)` came before our
        // `fetch_or(DONE)` on the one word, so it saw no `DONE` and left
        // for good: it never touches the result cell again (module docs,
        // "Detaching"). The cell is ours again.
        self.result.with_mut(|c| unsafe { (*c).take() })
    }

    /// Owner, leaving without taking the result (a `JoinHandle` dropped
    /// unjoined, whose packet lives in its task): after this call the
    /// owner never touches the packet again. Returns the result when the
    /// packet was done already: the caller drops it. Otherwise the
    /// completer will (`complete_unique` returns it there). A packet whose
    /// result was taken is left alone. `TAKEN` is not set, so a scope
    /// still sees an unjoined panic (`Completion::unjoined_panic`).
    ///
    /// # Safety
    /// The caller is the packet's owner, has withdrawn its inline waiter
    /// (`clear_waiter`) and does not use the packet afterwards. The
    /// packet's completer is a [`Main`] (`complete_unique`), never the
    /// general [`Packet::complete`], which ignores `DETACHED`.
    #[inline]
    pub(crate) unsafe fn detach(&self) -> Option<Result<T, JoinError>> {
        if self.state.load(Acquire) & TAKEN != 0 {
            // Joined (the owner's own store: no race).
            return None;
        }
        let prev = self.state.fetch_or(DETACHED, AcqRel);
        if prev & DONE == 0 {
            return None;
        }
        // Done before we detached: the result is the owner's (the AcqRel
        // RMW read the completer's `DONE` RMW). The waiter was withdrawn,
        // so `settled` returns at once unless the completer still wakes
        // a waiter registered before (`clear_waiter` waited for that).
        self.settled();
        // SAFETY: `DONE`, settled, and we are the owner.
        self.result.with_mut(|c| unsafe { (*c).take() })
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
                    crate::runtime::park();
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
        crate::runtime::yield_now();
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
        self.register_more(Waiter::current())
    }
    fn unjoined_panic(&self) -> bool {
        let s = self.state.load(Acquire);
        s & PANICKED != 0 && s & TAKEN == 0
    }
}

impl<T> Packet<T> {
    /// An async waiter (`JoinFuture::poll`): register `w` in the list of
    /// other waiters unless done; returns done. A later poll with another
    /// waker adds that one too; the earlier one is woken spuriously, which
    /// wakers allow.
    pub(crate) fn register_async(&self, w: &std::task::Waker) -> bool {
        if self.is_done() {
            return true;
        }
        self.register_more(Waiter::Async(w.clone()))
    }

    /// Push `w` to the list of other waiters (module docs); returns done
    /// (then `w` is not left behind).
    fn register_more(&self, w: Waiter) -> bool {
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
}

/// What a `Task` runs: a boxed [`FiberMain`] (fork-join runners, tests),
/// a spawned fiber's [`MainPacket`] shared with its `JoinHandle` through an
/// `Arc` ([`FiberEntry`]), or one that lives in the task itself
/// ([`InTaskEntry`], module docs "In the task").
pub(crate) enum Entry {
    Boxed(Box<dyn FiberMain>),
    Fiber(FiberEntry),
    InTask(InTaskEntry),
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
            Entry::InTask(e) => e.run(),
        }
    }

    /// The fiber cannot run (no stack): publish `e` instead.
    pub(crate) fn fail(self, e: JoinError) {
        match self {
            Entry::Boxed(m) => m.fail(e),
            Entry::Fiber(f) => f.into_inner().fail(e),
            Entry::InTask(m) => m.fail(e),
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

/// A spawned fiber's closure and its join packet, either in one `Arc`
/// (the task's entry holds one reference, the `JoinHandle` the other) or
/// in its task's [`MainSlot`] (module docs, "In the task").
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
    fn new(f: F) -> MainPacket<F, T> {
        MainPacket { packet: Packet::empty(), f: std::cell::UnsafeCell::new(Some(f)) }
    }

    /// Complete as cancelled unless done, then drop the closure if it is
    /// still there.
    fn cancel_now(&self) {
        if !self.packet.is_done() {
            // SAFETY: a `MainPacket`'s packet has one completer, this
            // fiber (`new_main`, `new_in_task`), and it has not completed
            // (not done). A detached `JoinError::cancelled` handed back
            // runs no user code when dropped here.
            drop(unsafe { self.packet.complete_unique(Err(JoinError::cancelled())) });
        }
        // SAFETY: the run permission (type docs): ours.
        drop(unsafe { (*self.f.get()).take() });
    }
}

impl<F, T> MainPacket<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    /// Run the closure and publish its result. Returns the result when
    /// the owner detached first (in-task packets only): the caller drops
    /// it with [`drop_on_fiber`].
    fn run_here(&self) -> Option<Result<T, JoinError>> {
        // SAFETY: the run permission (type docs).
        let f = unsafe { (*self.f.get()).take() }.expect("fiber main runs once");
        let task = context::current_task();
        let r = if task.is_some_and(|t| t.flags_load() & crate::runtime::task::CANCEL != 0) {
            // Cancelled before it first ran: the closure never runs
            // (`cancel` module docs, step 4).
            catch_unwind(AssertUnwindSafe(move || drop(f))).and(Err(Box::new(Cancelled) as Box<dyn std::any::Any + Send>))
        } else {
            catch_unwind(AssertUnwindSafe(f))
        };
        let r = match task {
            // The fiber's locals go before its result is published
            // (`locals`, rule 3); a destructor's panic is the fiber's panic
            // unless it already failed. A fiber the drain destroys has them
            // dropped by the drain.
            Some(t) if !t.is_cancelling() => match (r, end_of_fiber(t)) {
                (Ok(v), Err(p)) => {
                    drop_on_fiber(v);
                    Err(p)
                }
                (r, Err(p)) => {
                    drop_on_fiber(p);
                    r
                }
                (r, Ok(())) => r,
            },
            _ => r,
        };
        if r.is_ok() || !crate::runtime::context::current_is_cancelling() {
            // Count before publishing, so a joiner that reads the stats
            // right after its join sees this fiber as completed.
            crate::runtime::context::note_completed();
        }
        let r = match r {
            Ok(v) => Ok(v),
            Err(p) => {
                if crate::runtime::context::current_is_cancelling() {
                    // A forced unwind from the shutdown drain: let it reach
                    // the coroutine root, reporting the cancellation first.
                    self.cancel_now();
                    std::panic::resume_unwind(p);
                }
                if p.is::<Cancelled>() {
                    drop_on_fiber(p);
                    Err(JoinError::cancelled_by_handle())
                } else {
                    Err(JoinError::panicked(p))
                }
            }
        };
        // SAFETY: this fiber is its packet's one completer (`new_main`),
        // completing once: not done yet (only `cancel`, never called on a
        // started fiber, and `fail`, only for unstarted ones, complete too).
        unsafe { self.packet.complete_unique(r) }
    }

    /// The fiber cannot run: publish `e` and drop the closure.
    fn fail_here(&self, e: JoinError) {
        // SAFETY: as in `run_here`; an unstarted fiber, not completed. A
        // detached `JoinError` handed back runs no user code when dropped.
        drop(unsafe { self.packet.complete_unique(Err(e)) });
        // SAFETY: the run permission (type docs).
        drop(unsafe { (*self.f.get()).take() });
    }
}

/// Drop what a finished fiber's result leaves to the fiber (a detached
/// fiber's value or panic payload, the last reference of its
/// `MainPacket`), here on the fiber's stack. A destructor that panics here
/// must not escape the fiber (it would reach the worker loop and abort the
/// process): contain and report it.
fn drop_on_fiber<X>(x: X) {
    let id = crate::runtime::context::current_id();
    if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(x))) {
        report_contained_drop_panic(id, "a detached fiber's result", &*p);
        // That panic's payload may panic when dropped as well: then
        // leak it rather than loop.
        if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(p))) {
            std::mem::forget(again);
        }
    }
}

impl<F, T> SharedMain for MainPacket<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(self: Arc<Self>) {
        let detached = self.run_here();
        // A detached fiber's packet dies with us: its value (or panic
        // payload) is dropped here, on the fiber's stack. (`detached` is
        // `None`: nobody calls `detach` on an `Arc` packet.)
        drop_on_fiber((detached, self));
    }
    fn fail(self: Arc<Self>, e: JoinError) {
        self.fail_here(e);
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

/// The `JoinHandle`'s share of a fiber's packet: a pointer to it (for
/// direct calls) and, for an `Arc` [`MainPacket`], the counted owner. An
/// in-task packet has no owner here: the handle's `TaskRef` keeps the task,
/// and with it the packet, alive.
pub(crate) struct PacketRef<T> {
    packet: std::ptr::NonNull<Packet<T>>,
    owner: Option<Arc<dyn Completion + Send + Sync>>,
}

// SAFETY: a `PacketRef` is an `Arc` of a `Send + Sync` allocation (for
// `T: Send`) plus a pointer into it, or a pointer into a task (`Sync`)
// that its holder keeps alive; `Packet<T>` is `Send + Sync` for `T: Send`.
unsafe impl<T: Send> Send for PacketRef<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send> Sync for PacketRef<T> {}

impl<T> std::ops::Deref for PacketRef<T> {
    type Target = Packet<T>;
    #[inline]
    fn deref(&self) -> &Packet<T> {
        // SAFETY: points into the allocation `owner` keeps alive, or into
        // the task the holder keeps alive (`new_in_task`'s contract).
        unsafe { self.packet.as_ref() }
    }
}

impl<T> PacketRef<T> {
    /// Whether the packet lives in its task (owner side: `detach` on drop).
    #[inline]
    pub(crate) fn in_task(&self) -> bool {
        self.owner.is_none()
    }

    /// The packet as a scope sees it (type-erased).
    ///
    /// # Safety
    /// For an in-task packet the result points into the task: the caller
    /// uses it only while it holds a `TaskRef` of the handle's task (a
    /// scope keeps one beside it).
    pub(crate) unsafe fn completion<'a>(&'a self) -> CompletionRef
    where
        T: Send + 'a,
    {
        match &self.owner {
            Some(o) => CompletionRef::Shared(o.clone()),
            None => {
                let p: std::ptr::NonNull<dyn Completion + Send + Sync + 'a> = self.packet;
                // SAFETY: lifetime erasure only; the caller uses the
                // pointer while the task is alive, and the packet's `T`
                // values are gone or taken by then only through the owner
                // and completer, never through this view (it reads the
                // state word).
                CompletionRef::InTask(unsafe {
                    std::mem::transmute::<
                        std::ptr::NonNull<dyn Completion + Send + Sync + 'a>,
                        std::ptr::NonNull<dyn Completion + Send + Sync + 'static>,
                    >(p)
                })
            }
        }
    }
}

/// A scope's view of a child's packet (`PacketRef::completion`).
pub(crate) enum CompletionRef {
    Shared(Arc<dyn Completion + Send + Sync>),
    /// Into the child's task; valid while a `TaskRef` of it is held.
    InTask(std::ptr::NonNull<dyn Completion + Send + Sync>),
}

// SAFETY: an `Arc` of a `Send + Sync` value, or a pointer to a `Sync`
// packet inside a task kept alive by its holder (`completion`'s contract).
unsafe impl Send for CompletionRef {}
// SAFETY: as for `Send`: only `&self` methods of a `Sync` value.
unsafe impl Sync for CompletionRef {}

impl std::ops::Deref for CompletionRef {
    type Target = dyn Completion + Send + Sync;
    #[inline]
    fn deref(&self) -> &Self::Target {
        match self {
            CompletionRef::Shared(a) => &**a,
            // SAFETY: the task is alive (`completion`'s contract).
            CompletionRef::InTask(p) => unsafe { p.as_ref() },
        }
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
    let m = Arc::new(MainPacket::new(f));
    let packet = std::ptr::NonNull::from(&m.packet);
    let owner: Arc<dyn Completion + Send + Sync + 'a> = m.clone();
    let main: Arc<dyn SharedMain + 'a> = m;
    // SAFETY: lifetime erasure only (caller's contract). After the fiber
    // is finished or destroyed the closure cell is empty, so a late drop
    // of the allocation runs no code of `F`.
    let owner: Arc<dyn Completion + Send + Sync> = unsafe { std::mem::transmute(owner) };
    // SAFETY: as above.
    let main: Arc<dyn SharedMain> = unsafe { std::mem::transmute(main) };
    (Entry::Fiber(FiberEntry(std::mem::ManuallyDrop::new(main))), PacketRef { packet, owner: Some(owner) })
}

// ----- in the task (module docs) -----

/// Bytes a [`MainSlot`] holds. A `Packet<()>` takes 88 bytes (state 8,
/// result 24, inline waiter 24, locked list 32), so closures capturing up
/// to 32 bytes whose result takes at most 24 (it shares the cell with the
/// `JoinError`) fit: skynet's children (16 and 8 bytes), an empty spawn
/// (unit test `in_task_sizes`). 128 is a compromise between the closures
/// it admits and the pooled task's size (352 bytes with it, about 220
/// without; BENCHMARKS.md, "Spawn without an allocation"). Under
/// `cfg(loom)` the loom types are larger: 1 KiB, so the models run this
/// path.
#[cfg(not(loom))]
pub(crate) const MAIN_IN_TASK_SIZE: usize = 128;
#[cfg(loom)]
pub(crate) const MAIN_IN_TASK_SIZE: usize = 1024;
/// Alignment of a [`MainSlot`]'s buffer (`MainBuf`'s `repr`).
pub(crate) const MAIN_IN_TASK_ALIGN: usize = 16;

#[repr(C, align(16))]
struct MainBuf(std::mem::MaybeUninit<[u8; MAIN_IN_TASK_SIZE]>);

/// Whether a spawn of `F` returning `T` keeps its closure and packet in
/// its task (size and alignment fit the [`MainSlot`]).
#[inline(always)]
pub(crate) const fn fits_in_task<F, T>() -> bool {
    std::mem::size_of::<MainPacket<F, T>>() <= MAIN_IN_TASK_SIZE
        && std::mem::align_of::<MainPacket<F, T>>() <= MAIN_IN_TASK_ALIGN
}

/// A task's room for its fiber's [`MainPacket`] (module docs, "In the
/// task"). `vt` is `Some` exactly while `buf` holds a live `MainPacket` of
/// the types `vt` was made for.
pub(crate) struct MainSlot {
    vt: std::cell::Cell<Option<&'static InTaskVt>>,
    buf: std::cell::UnsafeCell<MainBuf>,
}

impl MainSlot {
    pub(crate) fn empty() -> MainSlot {
        MainSlot { vt: std::cell::Cell::new(None), buf: std::cell::UnsafeCell::new(MainBuf(std::mem::MaybeUninit::uninit())) }
    }

    /// Drop the `MainPacket` this slot holds, if any (a recycled task:
    /// `NewTask::write_over`; a task freed: `Drop`). Exclusive access
    /// (`&mut`): no entry, handle or scope of the old fiber is left (each
    /// held a `TaskRef`), so its closure was taken and its result taken or
    /// dropped: the drop frees no user value (module docs).
    #[inline]
    pub(crate) fn reset(&mut self) {
        if let Some(vt) = self.vt.take() {
            // SAFETY: `vt` is `Some`: `buf` holds a live `MainPacket` of
            // `vt`'s types, dropped once (`vt` is now `None`).
            unsafe { (vt.drop)(self.buf_ptr()) };
        }
    }

    fn buf_ptr(&self) -> std::ptr::NonNull<u8> {
        // SAFETY: `UnsafeCell::get` is never null.
        unsafe { std::ptr::NonNull::new_unchecked(self.buf.get().cast::<u8>()) }
    }
}

impl Drop for MainSlot {
    fn drop(&mut self) {
        self.reset();
    }
}

/// What an [`InTaskEntry`] and a [`MainSlot`] do with the `MainPacket<F,
/// T>` in the slot, for the `F` and `T` of its spawn.
pub(crate) struct InTaskVt {
    run: unsafe fn(std::ptr::NonNull<u8>),
    fail: unsafe fn(std::ptr::NonNull<u8>, JoinError),
    cancel: unsafe fn(std::ptr::NonNull<u8>),
    drop: unsafe fn(std::ptr::NonNull<u8>),
}

impl<F, T> MainPacket<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    const IN_TASK_VT: InTaskVt = InTaskVt {
        run: Self::run_in_task,
        fail: Self::fail_in_task,
        cancel: Self::cancel_in_task,
        drop: Self::drop_in_task,
    };

    /// # Safety (all four)
    /// `p` points to a live `MainPacket<F, T>` in a task the caller keeps
    /// alive; `run`, `fail`, `cancel`: the caller holds the run permission
    /// and calls one of them once (`InTaskEntry`); `drop`: the caller has
    /// exclusive access (`MainSlot::reset`).
    unsafe fn run_in_task(p: std::ptr::NonNull<u8>) {
        // SAFETY: the caller's contract.
        let m = unsafe { p.cast::<Self>().as_ref() };
        drop_on_fiber(m.run_here());
    }
    unsafe fn fail_in_task(p: std::ptr::NonNull<u8>, e: JoinError) {
        // SAFETY: the caller's contract.
        unsafe { p.cast::<Self>().as_ref() }.fail_here(e);
    }
    unsafe fn cancel_in_task(p: std::ptr::NonNull<u8>) {
        // SAFETY: the caller's contract.
        unsafe { p.cast::<Self>().as_ref() }.cancel_now();
    }
    unsafe fn drop_in_task(p: std::ptr::NonNull<u8>) {
        // SAFETY: the caller's contract: live, exclusive, dropped once.
        unsafe { std::ptr::drop_in_place(p.cast::<Self>().as_ptr()) };
    }
}

/// A spawned fiber's entry whose `MainPacket` lives in its task's
/// [`MainSlot`]. Dropped without running, it publishes
/// `JoinError::cancelled`, like a [`FiberEntry`].
pub(crate) struct InTaskEntry {
    main: std::ptr::NonNull<u8>,
    vt: &'static InTaskVt,
}

// SAFETY: the entry is a claim on a `MainPacket` in its own task; it is
// used (run, failed or dropped) only by the holder of that task's run
// permission, which moves between threads with a happens-before edge
// (`fiber::task`), while the task is alive (the entry lives in the task's
// body, or in a local of the party holding the task). `F: Send` was
// required at spawn.
unsafe impl Send for InTaskEntry {}

impl InTaskEntry {
    fn run(self) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `main` is the live `MainPacket` of `vt`'s types in the
        // running fiber's task (alive: the worker holds it while the
        // coroutine runs); we hold the run permission; consumed once (`me`
        // is never dropped).
        unsafe { (me.vt.run)(me.main) }
    }
    fn fail(self, e: JoinError) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: as in `run` (the worker holds the task).
        unsafe { (me.vt.fail)(me.main, e) }
    }
}

impl Drop for InTaskEntry {
    fn drop(&mut self) {
        // SAFETY: as in `run`: the holder of the permission drops the
        // entry (the drain, or the task's own drop: `body` drops before
        // `main`, `Task`'s field order), once.
        unsafe { (self.vt.cancel)(self.main) }
    }
}

/// A spawned fiber's closure and packet in `task`'s [`MainSlot`]: the
/// entry to put in its body and the handle's packet.
///
/// # Safety
/// As [`new_main`] (borrows of `f` outlive the fiber), and: `task` was just
/// made (`TaskPool::alloc`) and is reachable by nobody else yet, its slot
/// is empty (`write_over` reset it), `fits_in_task::<F, T>()` holds, and
/// the returned `PacketRef` is used only while a `TaskRef` of `task` is
/// held (the `JoinHandle` keeps one).
#[inline]
pub(crate) unsafe fn new_in_task<'a, F, T>(slot: &MainSlot, f: F) -> (Entry, PacketRef<T>)
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    debug_assert!(fits_in_task::<F, T>() && slot.vt.get().is_none());
    let p = slot.buf_ptr();
    // SAFETY: the buffer is large and aligned enough (`fits_in_task`),
    // empty, and nobody else can reach the task (caller).
    unsafe { p.cast::<MainPacket<F, T>>().as_ptr().write(MainPacket::new(f)) };
    let vt: &'static InTaskVt = &MainPacket::<F, T>::IN_TASK_VT;
    slot.vt.set(Some(vt));
    // SAFETY: just written; a field pointer of a live value.
    let packet = unsafe { std::ptr::NonNull::from(&p.cast::<MainPacket<F, T>>().as_ref().packet) };
    (Entry::InTask(InTaskEntry { main: p, vt }), PacketRef { packet, owner: None })
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

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    /// Closures of a fn item's type, or capturing `N` words, returning `R`.
    type Words<const N: usize> = [u64; N];

    #[test]
    fn in_task_sizes() {
        assert_eq!(std::mem::size_of::<Packet<()>>(), 88, "update MAIN_IN_TASK_SIZE's docs");
        // Captures up to 32 bytes with a result of up to 24 fit ...
        assert!(fits_in_task::<fn(), ()>());
        assert!(fits_in_task::<Words<2>, u64>(), "skynet's children");
        assert!(fits_in_task::<Words<4>, u64>());
        assert!(fits_in_task::<Words<4>, Words<2>>());
        // ... more does not: the `Arc` path.
        assert!(!fits_in_task::<Words<5>, u64>());
        assert!(!fits_in_task::<Words<4>, Words<4>>());
        #[repr(align(32))]
        struct Aligned32(#[allow(dead_code)] u8);
        assert!(!fits_in_task::<Aligned32, ()>(), "over-aligned");
        assert!(std::mem::size_of::<Task>() + 16 <= 384, "task_pool's memory bound");
    }
}
