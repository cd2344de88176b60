//! The runtime's own work that does not fit on a small fiber stack runs on
//! a side stack of the thread.
//!
//! The biggest such work is the panic hook: std's default hook resolves and
//! prints a backtrace with `RUST_BACKTRACE=1`, which needs far more than
//! 16 KiB. [`install_panic_hook`] (once per process, when the first runtime
//! is built) wraps the hook that was installed before it (std's default, or
//! the program's own) so that, when a *fiber* panics, the previous hook runs
//! on a per-thread side stack (256 KiB, lazily committed, with a guard
//! page) through corosensei's `on_stack`. The backtrace still shows the
//! fiber's frames: corosensei links the two stacks for unwinders. A hook a
//! program sets after building its first runtime replaces this one and
//! runs on the fiber's stack.
//!
//! The other runtime work on a fiber stack (the `catch_unwind` around the
//! fiber, completing its join packet, the forced unwind at shutdown) needs a
//! few KiB and stays where it is; `tests/stacks.rs` runs it on 16 KiB stacks.

use std::cell::RefCell;
use std::sync::Once;

use corosensei::stack::valgrind::ValgrindStackRegistration;
use corosensei::stack::{Stack, StackPointer};

use super::os;
use crate::runtime::task::up;

const SIDE_STACK_SIZE: usize = 256 * 1024;

/// A lazily committed stack with a guard page below it.
struct SideStack {
    base: usize,
    len: usize,
    /// Tells valgrind this range is a stack, so the switch onto it is not
    /// taken for stray writes below the thread's stack pointer.
    _valgrind: ValgrindStackRegistration,
}

impl SideStack {
    fn new() -> Option<SideStack> {
        let page = os::page_size();
        let len = SIDE_STACK_SIZE + page;
        let base = os::map(len).ok()?;
        // One thread-owned stack: an mprotect guard (one extra mapping) is
        // fine here, on every kernel.
        if os::install_guard(base, os::GuardKind::Mprotect).is_err() {
            os::unmap(base, len);
            return None;
        }
        Some(SideStack { base, len, _valgrind: ValgrindStackRegistration::new(base as *mut u8, len) })
    }
}

impl Drop for SideStack {
    fn drop(&mut self) {
        os::unmap(self.base, self.len);
    }
}

// SAFETY: a live mapping of `len` bytes, page aligned (so 16-byte aligned),
// with a PROT_NONE guard page at `base`, which `limit` includes.
unsafe impl Stack for SideStack {
    fn base(&self) -> StackPointer {
        StackPointer::new(self.base + self.len).expect("non-null")
    }
    fn limit(&self) -> StackPointer {
        StackPointer::new(self.base).expect("non-null")
    }
}

thread_local! {
    /// This thread's side stack, made on first use, unmapped when the
    /// thread exits.
    static SIDE: RefCell<Option<SideStack>> = const { RefCell::new(None) };
}

/// Run `f` on this thread's side stack when the caller is a fiber;
/// directly otherwise, or when the side stack is busy (a nested use)
/// or cannot be made.
pub(crate) fn off_fiber_stack<R>(f: impl FnOnce() -> R) -> R {
    if up::current_task_ptr().is_null() {
        return f();
    }
    let mut f = Some(f);
    let r = SIDE.try_with(|a| {
        let Ok(mut slot) = a.try_borrow_mut() else { return None };
        if slot.is_none() {
            *slot = SideStack::new();
        }
        let s = slot.as_mut()?;
        let f = f.take().expect("taken once");
        Some(corosensei::on_stack(s, f))
    });
    match r {
        Ok(Some(r)) => r,
        _ => (f.take().expect("not run yet"))(),
    }
}

/// Wrap the current panic hook so that it runs off the fiber stack (module
/// docs). Idempotent.
pub(crate) fn install_panic_hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        if std::thread::panicking() {
            return; // take_hook would panic; the hook stays as it is
        }
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| off_fiber_stack(|| prev(info))));
    });
}
