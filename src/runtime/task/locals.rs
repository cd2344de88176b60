//! The engine's side of fiber-local storage: the map a fiber's task keeps
//! its values in (`Task::locals`), and dropping them when the fiber ends.
//! The keys and their accessors (`fiber_local!`, `FiberLocal`) are
//! `fiber::local`'s; that module states the rules this one follows
//! (numbered as there):
//!
//! 1. A fiber's map lives in its task, reached through the running task
//!    pointer ([`current_slot`]), so it moves with the fiber and a borrow
//!    of a value stays valid across a suspension (the boxes never move).
//! 3. Values are dropped on the fiber right after its closure returns or
//!    unwinds, before its result is published ([`end_of_fiber`], called by
//!    the fiber's entry), last inserted first, round after round while
//!    destructors create new ones; a fiber destroyed by the shutdown drain
//!    has them dropped by the drain ([`clear_slot`], `runtime::destroy`).
//! 5. Only the fiber itself touches its map (or whoever holds the run
//!    permission once it ended): no lock, no atomic.

use std::any::Any;
use std::cell::UnsafeCell;

use crate::runtime::task::up;
use crate::runtime::task::Task;

/// The values of one fiber (or one thread, outside fibers): `(key, value)`
/// in the order of first access. A key is the address of its `FiberLocal`
/// static, unique for the life of the program.
#[derive(Default)]
pub(crate) struct LocalMap {
    entries: Vec<(usize, Box<dyn Any>)>,
}

impl LocalMap {
    /// The value stored under `key`, if any.
    pub(crate) fn get(&self, key: usize) -> Option<*const dyn Any> {
        // Few keys per fiber: a linear search over a short vector beats a
        // hash map here.
        self.entries.iter().find(|(k, _)| *k == key).map(|(_, v)| &**v as *const dyn Any)
    }

    /// Store `value` under `key` (the caller checked it is not there).
    pub(crate) fn push(&mut self, key: usize, value: Box<dyn Any>) {
        self.entries.push((key, value));
    }

    /// Take the value stored under `key` out, if any (for the runtime's own
    /// keys: the `tracing` feature's span).
    #[cfg(feature = "tracing")]
    pub(crate) fn remove(&mut self, key: usize) -> Option<Box<dyn Any>> {
        let i = self.entries.iter().position(|(k, _)| *k == key)?;
        Some(self.entries.remove(i).1)
    }

    /// Drop every value, last inserted first (rule 3).
    fn clear(mut self) {
        while let Some(e) = self.entries.pop() {
            drop(e);
        }
    }
}

/// Where a fiber keeps its map: a cell in its task (`Task::locals`).
pub(crate) type LocalSlot = UnsafeCell<Option<Box<LocalMap>>>;

/// The running fiber's slot, or null on a plain thread: a raw pointer,
/// valid until the caller returns to code that may end the fiber (rule 5).
/// The accessor re-reads the running task, so it is right after any
/// suspension.
#[inline]
pub(crate) fn current_slot() -> *const LocalSlot {
    let t = up::current_task_ptr();
    if t.is_null() {
        return std::ptr::null();
    }
    // SAFETY: a non-null CURRENT is the running task, alive while its
    // fiber runs (`context::current_task`).
    unsafe { &(*t).locals as *const LocalSlot }
}

/// Drop the values of the fiber whose task owns `slot` (rule 3), round
/// after round while destructors create new ones.
///
/// # Safety
/// `slot` is the running fiber's own slot (or a slot no fiber runs on any
/// more, or a thread's own), and no borrow of one of its values is alive.
pub(crate) unsafe fn clear_slot(slot: &LocalSlot) {
    loop {
        // SAFETY: the caller's contract: nobody else touches the slot, and
        // the `&mut` ends before any user code (a destructor) runs.
        let Some(map) = (unsafe { (*slot.get()).take() }) else { return };
        map.clear();
    }
}

/// The running fiber ends (its closure returned or unwound): drop its
/// values before its result is published (rule 3). A destructor's panic
/// is returned, for the caller to treat as the fiber's own panic.
/// `t` is the running fiber's task.
#[inline]
pub(crate) fn end_of_fiber(t: &Task) -> Result<(), Box<dyn Any + Send>> {
    let slot = &t.locals;
    // SAFETY: the fiber's own slot; a plain read of a cell only the fiber
    // writes.
    if unsafe { (*slot.get()).is_none() } {
        return Ok(());
    }
    // SAFETY: the fiber's own slot, and the closure has returned, so no
    // `with` borrow is alive.
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| unsafe { clear_slot(slot) }))
}
