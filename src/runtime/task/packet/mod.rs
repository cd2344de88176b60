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
//! `runtime::task` step 5; a running one is held by its worker) and so is its
//! runtime (a runtime's `Shared` outlives its fibers: the shutdown drain
//! destroys a parked owner by unwinding it, and the unwinding owner waits
//! for `WOKEN` too, through `JoinHandle`'s drop or [`Packet::wait`]'s guard).
//! The completer wakes a parked fiber by winning `PARKED -> QUEUED` and
//! pushing the task's reference to itself, as a wait-queue grant does: the
//! inline waiter is the runtime's fiber-or-thread waiter held without a
//! lock (`runtime::wait::Direct`), whose `wake` takes this rule as its
//! contract.
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
//! (an inline buffer in the pooled `Task`, `runtime::task::pool`), so a spawn
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
//!   (`runtime::task`), through the task's [`InTaskEntry`] (run, fail, or
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
//! [`Main`]: main_packet::MainPacket
//! [`MainPacket`]: main_packet::MainPacket
//! [`MAIN_IN_TASK_SIZE`]: in_task::MAIN_IN_TASK_SIZE
//! [`MAIN_IN_TASK_ALIGN`]: in_task::MAIN_IN_TASK_ALIGN
//! [`InTaskVt`]: in_task::InTaskVt
//!
//! The loom models `join_vs_complete`, `join_vs_cancel`,
//! `join_register_vs_clear`, `join_watching_vs_complete`,
//! `scope_wait_vs_join` and `latch_double_open` (`tests/loom.rs`) run this
//! code with thread waiters. They check the cells' ownership hand-offs and
//! that no waiter is lost; the lifetime argument for a fiber waiter's plain
//! pointers (the `WOKEN` wait) is the one above, which loom cannot see
//! (its waiters are threads).

mod in_task;
mod main_packet;
mod refs;
mod state;

pub(crate) use in_task::{fits_in_task, new_in_task, MainSlot};
pub(crate) use main_packet::{drop_on_fiber, new_main};
pub(crate) use refs::{CompletionRef, PacketRef};
pub(crate) use state::{Completion, Packet};

use crate::runtime::task::up::JoinError;
use in_task::InTaskEntry;
use main_packet::FiberEntry;

/// What a `Task` runs: a boxed [`FiberMain`] (fork-join runners, tests),
/// a spawned fiber's [`MainPacket`](main_packet::MainPacket) shared with its `JoinHandle` through an
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
