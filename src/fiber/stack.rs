//! Fiber stacks: guarded stacks pooled per worker, or (opt-in) unguarded
//! stacks carved from large slabs.
//!
//! A fiber owns no stack until it first runs; the worker that first resumes
//! it takes one from its pool (or maps a new one), and the worker on which
//! it finishes takes it back.
//!
//! * **Guarded** (default): corosensei `DefaultStack`s, an `mmap` with a
//!   `PROT_NONE` guard page below the usable range. Each costs two memory
//!   mappings, so `vm.max_map_count` (65,530 by default) bounds the number
//!   of live fibers to about 30,000; spawning past the bound is a typed
//!   error (`SpawnErrorKind::TooManyFibers`).
//! * **Unguarded slabs** (`Builder::unguarded_stacks`, unsafe): stacks are
//!   carved from 1 MiB-and-up slabs (`MAP_NORESERVE`, one mapping for many
//!   stacks), so a million fibers fit. There is no guard page: a *canary*
//!   word at the bottom of each stack is checked every time the fiber
//!   switches out, and a damaged canary aborts with a stack-overflow report.
//!   An overflow can still scribble over a neighbour before the check runs,
//!   which is why the switch is `unsafe`.

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::Mutex;

/// Guarded stacks mapped and not yet unmapped, in the whole process.
static LIVE_GUARDED: AtomicUsize = AtomicUsize::new(0);
/// Bytes of slab mappings not yet unmapped, in the whole process.
static LIVE_SLAB_BYTES: AtomicUsize = AtomicUsize::new(0);

/// Fiber stack memory currently mapped by every runtime of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StackUsage {
    /// Guarded stacks (one `mmap` each) in use or pooled.
    pub guarded_stacks: usize,
    /// Bytes of unguarded slabs.
    pub slab_bytes: usize,
}

/// How much fiber stack memory is mapped right now, process-wide. Zero
/// once every runtime has been dropped: shutdown frees every stack.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| fiber::await_fiber(fiber::spawn(|| ())));
/// drop(rt);
/// // (other runtimes of this process may still hold stacks)
/// let _u = fiber::stack_usage();
/// ```
pub fn stack_usage() -> StackUsage {
    StackUsage { guarded_stacks: LIVE_GUARDED.load(Relaxed), slab_bytes: LIVE_SLAB_BYTES.load(Relaxed) }
}

use corosensei::stack::valgrind::ValgrindStackRegistration;
use corosensei::stack::{DefaultStack, Stack, StackPointer};

/// Smallest stack a fiber may ask for. A panic that prints a backtrace
/// (`RUST_BACKTRACE=1`) runs the symboliser on the fiber's stack and needs
/// more than 16 KiB (measured: a 16 KiB fiber overflows, 32 KiB does not).
pub const MIN_STACK_SIZE: usize = 32 * 1024;

/// Smallest stack in unguarded slab mode (corosensei's own minimum). Fibers
/// that may panic with `RUST_BACKTRACE` set need [`MIN_STACK_SIZE`]; a fiber
/// that only parks on a channel or a timer fits in a few KiB. Slab stack
/// sizes are rounded up to 1 KiB, not to pages, so that small stacks share
/// pages: a parked fiber touches the page of its top frames and the page of
/// its canary, and neighbours share those.
pub const MIN_SLAB_STACK_SIZE: usize = 4 * 1024;

/// Default stack size of a fiber.
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

/// How many free stacks of one size a worker keeps.
const MAX_POOLED: usize = 1024;

/// Written at the lowest word of every slab stack.
const CANARY: u64 = 0x6e75_6d61_6669_6265; // "numafibe"

/// Stacks per slab (at least; a slab is at least 1 MiB).
const SLAB_STACKS: usize = 64;

/// How fibers get their stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum StackMode {
    #[default]
    Guarded,
    Slab,
}

impl StackMode {
    pub(crate) fn min_stack_size(self) -> usize {
        match self {
            StackMode::Guarded => MIN_STACK_SIZE,
            StackMode::Slab => MIN_SLAB_STACK_SIZE,
        }
    }
}

/// A stack carved from a slab (no guard page; canary at the bottom).
pub(crate) struct SlabStack {
    lo: usize,
    size: usize,
    _valgrind: ValgrindStackRegistration,
}

impl SlabStack {
    fn new(lo: usize, size: usize) -> SlabStack {
        let s = SlabStack { lo, size, _valgrind: ValgrindStackRegistration::new(lo as *mut u8, size) };
        s.arm();
        s
    }
    fn arm(&self) {
        // SAFETY: `lo` is the start of `size` bytes of our RW slab that no
        // coroutine uses right now (fresh or returned to the pool).
        unsafe { (self.lo as *mut u64).write_volatile(CANARY) };
    }
}

/// The canary of the slab stack starting at `lo` is intact.
#[inline]
pub(crate) fn canary_intact(lo: usize) -> bool {
    // SAFETY: `lo` is the start of a slab stack of a live slab (the caller
    // just resumed the fiber that owns it).
    lo == 0 || unsafe { (lo as *const u64).read_volatile() == CANARY }
}

/// A fiber's stack.
pub(crate) enum FiberStack {
    Guarded(DefaultStack),
    Slab(SlabStack),
}

// SAFETY: both variants describe a live, 16-byte aligned memory range of at
// least MIN_STACK_SIZE (guarded) or MIN_SLAB_STACK_SIZE bytes (slab; sizes
// are rounded to pages). The guarded variant has its guard page as the
// trait asks. The slab variant has none: that is the documented contract of
// the `unsafe` opt-in `Builder::unguarded_stacks`, whose caller promises
// fibers stay within their stacks; the canary check makes an overflow abort
// at the next switch instead of going unnoticed.
unsafe impl Stack for FiberStack {
    #[inline]
    fn base(&self) -> StackPointer {
        match self {
            FiberStack::Guarded(s) => s.base(),
            FiberStack::Slab(s) => StackPointer::new(s.lo + s.size).expect("non-null"),
        }
    }
    #[inline]
    fn limit(&self) -> StackPointer {
        match self {
            FiberStack::Guarded(s) => s.limit(),
            FiberStack::Slab(s) => StackPointer::new(s.lo).expect("non-null"),
        }
    }
}


impl Drop for FiberStack {
    fn drop(&mut self) {
        if let FiberStack::Guarded(_) = self {
            // The DefaultStack field unmaps itself right after this.
            LIVE_GUARDED.fetch_sub(1, Relaxed);
        }
    }
}

/// The runtime's slabs, unmapped when the runtime is dropped (after the
/// shutdown drain destroyed every coroutine that could use them).
#[derive(Default)]
pub(crate) struct Slabs {
    maps: Mutex<Vec<(usize, usize)>>,
}

impl Slabs {
    fn map(&self, len: usize) -> io::Result<usize> {
        // SAFETY: anonymous private mapping, no address hint.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        self.maps.lock().unwrap_or_else(|e| e.into_inner()).push((p as usize, len));
        LIVE_SLAB_BYTES.fetch_add(len, Relaxed);
        Ok(p as usize)
    }
}

impl Drop for Slabs {
    fn drop(&mut self) {
        for &(p, len) in self.maps.get_mut().unwrap_or_else(|e| e.into_inner()).iter() {
            // SAFETY: our own mapping; no stack in it is in use any more.
            unsafe { libc::munmap(p as *mut libc::c_void, len) };
            LIVE_SLAB_BYTES.fetch_sub(len, Relaxed);
        }
    }
}

fn page_size() -> usize {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

#[derive(Default)]
pub(crate) struct StackPool {
    classes: Vec<(usize, Vec<FiberStack>)>,
    /// Stacks mapped by this pool (guarded: one `mmap` each; slab: carved).
    pub(crate) mapped: u64,
    /// Stacks unmapped by this pool (pool overflow and its own drop).
    pub(crate) unmapped: u64,
}

impl StackPool {
    pub(crate) fn get(&mut self, size: usize, mode: StackMode, slabs: &Slabs) -> io::Result<FiberStack> {
        if let Some((_, v)) = self.classes.iter_mut().find(|(s, _)| *s == size) {
            if let Some(s) = v.pop() {
                return Ok(s);
            }
        }
        match mode {
            StackMode::Guarded => {
                let s = DefaultStack::new(size)?;
                LIVE_GUARDED.fetch_add(1, Relaxed);
                self.mapped += 1;
                Ok(FiberStack::Guarded(s))
            }
            StackMode::Slab => {
                let size_r = size.div_ceil(1024) * 1024;
                let n = SLAB_STACKS.max((1 << 20) / size_r);
                let len = (n * size_r).div_ceil(page_size()) * page_size();
                let base = slabs.map(len)?;
                self.mapped += n as u64;
                let idx = self.class(size);
                let v = &mut self.classes[idx].1;
                for i in 1..n {
                    v.push(FiberStack::Slab(SlabStack::new(base + i * size_r, size_r)));
                }
                Ok(FiberStack::Slab(SlabStack::new(base, size_r)))
            }
        }
    }

    fn class(&mut self, size: usize) -> usize {
        match self.classes.iter().position(|(s, _)| *s == size) {
            Some(i) => i,
            None => {
                self.classes.push((size, Vec::new()));
                self.classes.len() - 1
            }
        }
    }

    pub(crate) fn put(&mut self, size: usize, stack: FiberStack) {
        let idx = self.class(size);
        let v = &mut self.classes[idx].1;
        match &stack {
            FiberStack::Slab(s) => {
                // Slab stacks are never unmapped one by one: keep them all.
                s.arm();
                v.push(stack);
            }
            FiberStack::Guarded(_) => {
                if v.len() < MAX_POOLED {
                    v.push(stack);
                } else {
                    drop(stack);
                    self.unmapped += 1;
                }
            }
        }
    }

    pub(crate) fn pooled(&self) -> usize {
        self.classes.iter().map(|(_, v)| v.len()).sum()
    }
}

impl Drop for StackPool {
    fn drop(&mut self) {
        self.unmapped += self.pooled() as u64;
    }
}
