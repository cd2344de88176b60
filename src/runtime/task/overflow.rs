//! Clear reports of fiber stack overflows.
//!
//! A fiber that runs into the guard page below its stack gets `SIGSEGV`.
//! Without help the process dies with a bare "Segmentation fault". We
//! install (once, when the first runtime is built) a `SIGSEGV`/`SIGBUS`
//! handler that runs on an alternate signal stack (one per worker thread,
//! made in `install_altstack`; when the worker exits it is kept for the
//! next worker, or freed), looks at the faulting address and the fiber
//! running on this thread
//! (`context::current_task_ptr`), and, if the address is in that fiber's guard
//! page, prints a message in the spirit of Rust's own
//! "thread 'x' has overflowed its stack", naming the fiber, its stack size
//! and how to ask for a larger one, then aborts. Any other fault goes to the
//! handler that was installed before ours (Rust's own, which reports
//! overflows of thread stacks), or to the default action.
//!
//! Which fiber's guard was hit does not need a lookup: a fiber overflows
//! while it runs, so it is the thread's current fiber, and its
//! `Task::stack_lo` is the bottom of its guard page, whether the guard is a
//! `MADV_GUARD_INSTALL` marker inside a slab or an `mprotect`ed page.
//!
//! Everything the handler does is async-signal-safe: a few loads, `write(2)`
//! on a stack buffer, `sigaction`, `abort`.

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Once;

use crate::runtime::task::up;

static INSTALL: Once = Once::new();
/// The previous `sigaction`s for SIGSEGV and SIGBUS (boxed, leaked).
static PREV_SEGV: AtomicUsize = AtomicUsize::new(0);
static PREV_BUS: AtomicUsize = AtomicUsize::new(0);
static PAGE: AtomicUsize = AtomicUsize::new(4096);

const ALTSTACK_SIZE: usize = 64 * 1024;

/// Install the process-wide handler (idempotent).
pub(crate) fn install_handler() {
    INSTALL.call_once(|| {
        // SAFETY: sysconf has no preconditions.
        let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if page > 0 {
            PAGE.store(page as usize, Relaxed);
        }
        for (sig, slot) in [(libc::SIGSEGV, &PREV_SEGV), (libc::SIGBUS, &PREV_BUS)] {
            // SAFETY: zeroed sigaction is a valid starting value; we fill
            // in the handler, flags and an empty mask before installing it,
            // and keep the previous action alive forever (leaked box).
            unsafe {
                let mut new: libc::sigaction = std::mem::zeroed();
                new.sa_sigaction = handler as *const () as usize;
                new.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
                libc::sigemptyset(&mut new.sa_mask);
                let prev = Box::into_raw(Box::new(std::mem::zeroed::<libc::sigaction>()));
                if libc::sigaction(sig, &new, prev) == 0 {
                    slot.store(prev as usize, Release);
                } else {
                    drop(Box::from_raw(prev));
                }
            }
        }
    });
}

/// The alternate signal stack of a worker thread, made by
/// [`install_altstack`]; dropping it (when the worker exits, after its last
/// fiber ran) disables it and keeps the mapping for the next worker
/// ([`SPARE`]), or unmaps it.
pub(crate) struct AltStack {
    map: usize,
}

/// Altstacks of exited workers, for the next workers (of this or a later
/// runtime): a worker's start and exit then cost no `mmap`/`munmap` (each
/// `munmap` in a multi-threaded process is a TLB shootdown, which
/// start-up paid). At most [`MAX_SPARE`] are kept; they are mostly untouched
/// pages (the handler runs only on a fault), so they cost address space,
/// not memory. Taken with `try_lock` only: a contended or poisoned list
/// (or one a `fork` left locked) means a fresh `mmap`, never a wait.
static SPARE: std::sync::Mutex<Vec<usize>> = std::sync::Mutex::new(Vec::new());
const MAX_SPARE: usize = 64;

impl Drop for AltStack {
    fn drop(&mut self) {
        // SAFETY: disabling the calling thread's altstack is always allowed
        // (we are not on it: this runs in the worker loop, not in a
        // handler).
        unsafe {
            let off = libc::stack_t { ss_sp: std::ptr::null_mut(), ss_flags: libc::SS_DISABLE, ss_size: 0 };
            libc::sigaltstack(&off, std::ptr::null_mut());
        }
        if let Ok(mut spare) = SPARE.try_lock() {
            if spare.len() < MAX_SPARE && spare.try_reserve(1).is_ok() {
                spare.push(self.map);
                return;
            }
        }
        // SAFETY: the mapping is ours, and no thread uses it as its
        // altstack any more (disabled above).
        unsafe { libc::munmap(self.map as *mut libc::c_void, ALTSTACK_SIZE) };
    }
}

/// Give the calling (worker) thread an alternate signal stack large enough
/// for the handler, unless it already has one. The returned guard frees it
/// again; keep it until the thread runs no more fibers.
pub(crate) fn install_altstack() -> Option<AltStack> {
    // SAFETY: querying the current altstack with a null new stack is
    // always allowed; the out-pointer is a valid stack_t. The new stack is
    // a spare one (a mapping of ALTSTACK_SIZE bytes no thread uses: its
    // worker disabled it before handing it back) or a fresh mapping.
    unsafe {
        let mut cur: libc::stack_t = std::mem::zeroed();
        if libc::sigaltstack(std::ptr::null(), &mut cur) == 0
            && cur.ss_flags & libc::SS_DISABLE == 0
            && cur.ss_size >= ALTSTACK_SIZE
        {
            return None;
        }
        let spare = SPARE.try_lock().ok().and_then(|mut s| s.pop());
        let p = match spare {
            Some(p) => p as *mut libc::c_void,
            None => {
                let p = libc::mmap(
                    std::ptr::null_mut(),
                    ALTSTACK_SIZE,
                    libc::PROT_READ | libc::PROT_WRITE,
                    libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                    -1,
                    0,
                );
                if p == libc::MAP_FAILED {
                    return None; // no report on overflow, but no harm either
                }
                p
            }
        };
        let st = libc::stack_t { ss_sp: p, ss_flags: 0, ss_size: ALTSTACK_SIZE };
        if libc::sigaltstack(&st, std::ptr::null_mut()) != 0 {
            libc::munmap(p, ALTSTACK_SIZE);
            return None;
        }
        Some(AltStack { map: p as usize })
    }
}

extern "C" fn handler(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    // SAFETY: the kernel passes a valid siginfo for SA_SIGINFO handlers.
    let addr = unsafe { (*info).si_addr() } as usize;
    let t = up::current_task_ptr();
    if !t.is_null() {
        // SAFETY: CURRENT points to the task this thread is running; its
        // fields are plain loads (no locks, no allocation).
        let task = unsafe { &*t };
        let lo = task.stack_lo.load(Relaxed);
        let page = PAGE.load(Relaxed);
        if lo != 0 && addr >= lo.saturating_sub(page) && addr < lo + page {
            report(task);
            // SAFETY: abort is async-signal-safe.
            unsafe { libc::abort() };
        }
    }
    chain(sig, info, ctx);
}

/// Not ours: hand the signal to the previous handler, or restore the
/// default action and return so the faulting instruction re-faults.
fn chain(sig: libc::c_int, info: *mut libc::siginfo_t, ctx: *mut libc::c_void) {
    let slot = if sig == libc::SIGBUS { &PREV_BUS } else { &PREV_SEGV };
    let prev = slot.load(Acquire) as *const libc::sigaction;
    // SAFETY: `prev` is null or our leaked copy of the previous action.
    unsafe {
        if !prev.is_null() {
            let h = (*prev).sa_sigaction;
            if h != libc::SIG_DFL && h != libc::SIG_IGN {
                if (*prev).sa_flags & libc::SA_SIGINFO != 0 {
                    let f: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void) = std::mem::transmute(h);
                    f(sig, info, ctx);
                } else {
                    let f: extern "C" fn(libc::c_int) = std::mem::transmute(h);
                    f(sig);
                }
                return;
            }
        }
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        libc::sigaction(sig, &dfl, std::ptr::null_mut());
    }
}

/// A fixed buffer writer: no allocation in a signal handler.
struct Buf {
    b: [u8; 512],
    n: usize,
}

impl Buf {
    fn s(&mut self, s: &[u8]) {
        for &c in s {
            if self.n < self.b.len() {
                self.b[self.n] = c;
                self.n += 1;
            }
        }
    }
    fn u(&mut self, mut v: u64) {
        let mut d = [0u8; 20];
        let mut i = d.len();
        loop {
            i -= 1;
            d[i] = b'0' + (v % 10) as u8;
            v /= 10;
            if v == 0 {
                break;
            }
        }
        self.s(&d[i..]);
    }
}

/// A slab stack's canary was overwritten: the fiber overflowed its stack
/// (unguarded mode). Report like a guard-page hit, then abort.
pub(crate) fn report_canary(task: &crate::runtime::task::Task) -> ! {
    report(task);
    let msg = b"(detected by the stack canary of an unguarded slab stack: memory below the stack may be damaged)\n";
    // SAFETY: write(2) with a valid buffer.
    unsafe { libc::write(2, msg.as_ptr().cast(), msg.len()) };
    std::process::abort()
}

fn report(task: &crate::runtime::task::Task) {
    let mut b = Buf { b: [0; 512], n: 0 };
    b.s(b"\nfiber ");
    b.u(task.id);
    if let Some(name) = task.name.as_deref() {
        b.s(b" '");
        b.s(name.as_bytes());
        b.s(b"'");
    }
    b.s(b" has overflowed its stack (");
    b.u(task.stack_size as u64);
    b.s(b" bytes)\nask for a larger one: fiber::Builder::new().stack_size(n), or Runtime::builder().stack_size(n) for every fiber\nfatal runtime error: fiber stack overflow, aborting\n");
    // SAFETY: write(2) on stderr with a valid buffer is async-signal-safe.
    unsafe {
        libc::write(2, b.b.as_ptr().cast(), b.n);
    }
}
