//! Fiber stacks: guarded, lazily committed, carved from large slabs and
//! pooled per worker.
//!
//! A fiber owns no stack until it first runs; the worker that first resumes
//! it takes one from its pool, and the worker on which it finishes puts it
//! back into its own pool.
//!
//! * **Guarded slab stacks** (default, Linux 6.13 and newer): stacks are
//!   carved from large `MAP_NORESERVE` slabs, one mapping for thousands of
//!   stacks, each with a guard page below it made with
//!   `madvise(MADV_GUARD_INSTALL)`, which marks pages inside a mapping
//!   without a mapping (VMA) of their own. So `/proc/self/maps` grows with
//!   the number of slabs, not of fibers, and `vm.max_map_count` bounds
//!   nothing. Slabs of a worker are bound to its NUMA node (hwloc).
//! * **Fallback** (older kernels, or `NUMAFIBER_NO_GUARD_INSTALL=1`): one
//!   mapping per stack with an `mprotect`ed guard page, two memory mappings
//!   each, so the process can afford a *budget* of them (`budget`). A worker
//!   at the budget runs fibers that have a stack and keeps new ones waiting
//!   (the worker's `starved` queue) until a stack is freed.
//! * **Unguarded slabs** (`Builder::unguarded_stacks`, unsafe, deprecated):
//!   no guard page, a canary word at the bottom of each stack checked at
//!   every switch.
//!
//! Memory is committed lazily: a page of a stack costs memory only once its
//! fiber touched it. Guarded stack sizes are rounded up to a power of two
//! (at least [`MIN_STACK_SIZE`]): address space is cheap, and it keeps the
//! number of size classes, and so of slabs, small. When a stack goes back to
//! a pool it stays *warm* (its pages kept) for reuse, up to `WARM_POOL`
//! stacks per size class; when the worker goes idle, the warm ones give
//! back what they dirtied below their top `WARM_TOP` bytes, so one deep
//! burst does not pin memory for ever (`mincore` first tells which did:
//! a `madvise(MADV_DONTNEED)` costs a TLB shootdown, an inter-processor
//! interrupt to every other CPU running the process, `mincore` does not).
//!
//! **Stacks flow between workers**: a fiber started on one worker and
//! finished on another moves its stack from the first pool to the second.
//! A pool above `WARM_POOL` warm stacks of a class hands its oldest
//! `SPILL_BATCH` warm ones to the runtime's *spill* (in `Stacks`: one
//! mutex, stacks kept per NUMA node and class), and a pool without a free
//! stack of a class takes a batch back from there before it carves a new
//! one. Without the spill, a steady flow (fork-join on two workers) made
//! every `put` on one side give a stack's pages back and every `get` on the
//! other carve a new one with a guard `madvise`: two TLB shootdowns per
//! fiber. The spill keeps at most `WARM_POOL` warm stacks per node and
//! class; beyond that, the stacks handed to it are given back to the kernel
//! whole and kept cold, `WARM_POOL` at a time or when a worker goes idle,
//! sorted by address so that neighbours in a slab go in one
//! `madvise(MADV_DONTNEED)` (guard markers survive it). Fallback stacks (own mappings,
//! with a budget) do not spill: above `WARM_POOL` the oldest warm one is
//! given back whole, as before.

pub(crate) mod budget;
pub(crate) mod os;
pub(crate) mod side;

use std::io;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Mutex;

use corosensei::stack::valgrind::ValgrindStackRegistration;
use corosensei::stack::{Stack, StackPointer};

pub(crate) use os::GuardKind;

/// Bytes of slab mappings (guarded and unguarded) not yet unmapped, in the
/// whole process.
static LIVE_SLAB_BYTES: AtomicUsize = AtomicUsize::new(0);
/// Slab mappings not yet unmapped, in the whole process.
static LIVE_SLABS: AtomicUsize = AtomicUsize::new(0);

/// Fiber stack memory currently mapped by every runtime of the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct StackUsage {
    /// Fallback stacks (one mapping plus an `mprotect` guard each) in use
    /// or pooled. Always 0 where the kernel has `MADV_GUARD_INSTALL`.
    pub guarded_stacks: usize,
    /// Bytes of address space in slabs (guarded and unguarded); committed
    /// memory is only what fibers touched.
    pub slab_bytes: usize,
    /// Slab mappings.
    pub slabs: usize,
    /// Whether guarded stacks are carved from slabs with
    /// `MADV_GUARD_INSTALL` (`false`: the fallback, with a budget).
    pub guard_install: bool,
    /// Fallback stacks the process can afford (`vm.max_map_count` budget);
    /// it only applies when `guard_install` is `false`.
    pub fallback_budget: usize,
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
/// let u = fiber::stack_usage();
/// assert!(u.fallback_budget > 0);
/// ```
pub fn stack_usage() -> StackUsage {
    StackUsage {
        guarded_stacks: budget::mapped(),
        slab_bytes: LIVE_SLAB_BYTES.load(Relaxed),
        slabs: LIVE_SLABS.load(Relaxed),
        guard_install: os::guard_kind() == GuardKind::Install,
        fallback_budget: budget::limit(),
    }
}

/// Smallest stack a fiber may ask for. The runtime's own work on a fiber
/// stack fits in it: the panic hook (which prints a backtrace with
/// `RUST_BACKTRACE=1`) runs on a side stack of the worker, and the forced
/// unwind at shutdown needs a few KiB.
pub const MIN_STACK_SIZE: usize = 16 * 1024;

/// Smallest stack in unguarded slab mode (corosensei's own minimum). Slab
/// stack sizes are rounded up to 1 KiB, not to pages, so that small stacks
/// share pages.
pub const MIN_SLAB_STACK_SIZE: usize = 4 * 1024;

/// Default stack size of a fiber: 256 KiB of address space. Stacks are
/// committed lazily, so a fiber pays in memory only for the pages it
/// touches (one 4 KiB page for a fiber that parks right away); the size
/// only bounds how deep it may go before the guard page stops it. The cost
/// of a generous size is address space (256 GiB for a million fibers, of
/// 128 TiB) and page tables (about 512 bytes per fiber that touched its
/// stack).
pub const DEFAULT_STACK_SIZE: usize = 256 * 1024;

/// Largest stack a fiber may ask for (64 GiB).
pub const MAX_STACK_SIZE: usize = 1 << 36;

/// Free stacks per size class a worker keeps warm (pages kept).
const WARM_POOL: usize = 256;

/// Bytes at the top of a warm pooled stack that keep their pages when the
/// worker goes idle.
const WARM_TOP: usize = 32 * 1024;

/// Warm stacks moved between a worker's pool and the runtime's spill at
/// once (see the module docs).
const SPILL_BATCH: usize = WARM_POOL / 2;

/// At most this many stacks in the first slab of a size class (each next
/// slab doubles, up to `MAX_SLAB_BYTES`).
const FIRST_SLAB_STACKS: usize = 16;

/// The first slab of a size class holds at most this many bytes of stacks
/// (one stack at least): 4 default 256 KiB stacks. A slab that spans a
/// whole 2 MiB page-table page (x86-64 PMD) frees that page-table page
/// when it is unmapped, and then the kernel's TLB flush interrupts every
/// CPU that ran the process, idle ones included (lazy TLB): a runtime that
/// only ever used its first slab (a short-lived one) paid 19-20 µs for that
/// `munmap` in its shutdown in this VM, against 4 µs for a 1 MiB slab
/// (measured for start-up; BENCHMARKS.md, "Start-up, part 5").
const FIRST_SLAB_BYTES: usize = 1 << 20;

/// Stacks in slab number `k` (from 0) of a class with stacks of `usable`
/// bytes and `stride` bytes with the guard page.
fn slab_stacks(k: u32, usable: usize, stride: usize) -> usize {
    let first = FIRST_SLAB_STACKS.min((FIRST_SLAB_BYTES / usable).max(1));
    (first << k.min(24)).min((MAX_SLAB_BYTES / stride).max(1))
}

/// Largest slab (address space only: `MAP_NORESERVE`).
const MAX_SLAB_BYTES: usize = 4 << 30;

/// Fallback stacks of one size class a worker keeps in its pool.
const FALLBACK_POOL: usize = 256;

/// Written at the lowest word of every unguarded slab stack.
const CANARY: u64 = 0x6e75_6d61_6669_6265; // "numafibe"

/// Stacks per unguarded slab (at least; a slab is at least 1 MiB).
const SLAB_STACKS: usize = 64;

/// How fibers get their stacks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum StackMode {
    /// Guard page below every stack (slabs with guard markers, or the
    /// fallback).
    #[default]
    Guarded,
    /// Unguarded slab stacks with canaries (`unguarded_stacks`).
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

/// A stack size outside the accepted range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SizeError {
    TooSmall { minimum: usize },
    TooLarge { maximum: usize },
}

/// Check a requested stack size against the mode's range.
pub(crate) fn check_size(size: usize, mode: StackMode) -> Result<(), SizeError> {
    let minimum = mode.min_stack_size();
    if size < minimum {
        Err(SizeError::TooSmall { minimum })
    } else if size > MAX_STACK_SIZE {
        Err(SizeError::TooLarge { maximum: MAX_STACK_SIZE })
    } else {
        Ok(())
    }
}

/// Size class of a guarded stack: (class index, usable bytes, a power of
/// two of at least `MIN_STACK_SIZE`). `None` above `MAX_STACK_SIZE`.
#[inline]
fn class_of(size: usize) -> Option<(usize, usize)> {
    if size > MAX_STACK_SIZE {
        return None;
    }
    let usable = size.max(MIN_STACK_SIZE).checked_next_power_of_two()?.max(os::page_size());
    let idx = (usable.trailing_zeros() - MIN_STACK_SIZE.trailing_zeros()) as usize;
    Some((idx, usable))
}

/// The bytes a stack for a fiber of `size` bytes spans above its lowest
/// usable address (`Task::stack_lo`), as `get` carves it (dumps).
pub(crate) fn usable_len(size: usize, mode: StackMode) -> Option<usize> {
    match mode {
        StackMode::Guarded => class_of(size).map(|(_, usable)| usable),
        StackMode::Slab => size.checked_next_multiple_of(1024),
    }
}

/// Where a stack's memory comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Carved from a guarded slab (guard marker below): never unmapped on
    /// its own; the runtime's `Slabs` unmap the whole slab.
    Carved,
    /// Its own mapping, guard page `mprotect`ed (fallback): unmapped on
    /// drop, giving its budget slot back.
    Owned,
    /// Carved from an unguarded slab (canary at `lo`).
    Unguarded,
}

/// A fiber's stack.
pub(crate) struct FiberStack {
    /// Lowest usable byte; a guarded stack's guard page is just below.
    lo: usize,
    /// One past the highest byte (the stack grows down from here).
    top: usize,
    origin: Origin,
    /// Size class (guarded stacks).
    class: u32,
    /// May hold dirty pages below its warm top (returned since the last
    /// trim).
    dirty: bool,
    _valgrind: ValgrindStackRegistration,
}

impl FiberStack {
    fn new(lo: usize, top: usize, origin: Origin, class: u32) -> FiberStack {
        let s = FiberStack {
            lo,
            top,
            origin,
            class,
            dirty: false,
            _valgrind: ValgrindStackRegistration::new(lo as *mut u8, top - lo),
        };
        if origin == Origin::Unguarded {
            s.arm();
        }
        s
    }

    fn arm(&self) {
        // SAFETY: `lo` is the start of an unguarded slab stack of ours that
        // no coroutine uses right now (fresh or returned to the pool).
        unsafe { (self.lo as *mut u64).write_volatile(CANARY) };
    }

    fn usable(&self) -> usize {
        self.top - self.lo
    }

    /// Give back every page of the stack.
    fn trim_whole(&mut self) {
        os::discard(self.lo, self.usable());
        self.dirty = false;
        if self.origin == Origin::Unguarded {
            self.arm();
        }
    }

    /// Give back the pages below the warm top, if the fiber touched any
    /// (`os::any_resident`: no TLB shootdown for a stack that stayed
    /// shallow).
    fn trim_below_warm_top(&mut self) {
        if self.dirty {
            let len = self.usable().saturating_sub(WARM_TOP);
            if os::any_resident(self.lo, len) {
                os::discard(self.lo, len);
            }
            self.dirty = false;
        }
    }
}

/// The canary of the unguarded slab stack starting at `lo` is intact.
#[inline]
pub(crate) fn canary_intact(lo: usize) -> bool {
    // SAFETY: `lo` is the start of a slab stack of a live slab (the caller
    // just resumed the fiber that owns it).
    lo == 0 || unsafe { (lo as *const u64).read_volatile() == CANARY }
}

// SAFETY: every stack is a live, page-aligned (so 16-byte aligned) range of
// our mappings of at least MIN_STACK_SIZE (guarded) or MIN_SLAB_STACK_SIZE
// bytes (unguarded). Guarded stacks (carved and owned) have a guard page
// right below `lo` (a MADV_GUARD_INSTALL marker or a PROT_NONE page), which
// `limit` includes, as the trait asks. Unguarded ones have none: that is
// the documented contract of the `unsafe` opt-in `Builder::unguarded_stacks`,
// whose caller promises fibers stay within their stacks; the canary check
// makes an overflow abort at the next switch instead of going unnoticed.
unsafe impl Stack for FiberStack {
    #[inline]
    fn base(&self) -> StackPointer {
        StackPointer::new(self.top).expect("non-null")
    }
    #[inline]
    fn limit(&self) -> StackPointer {
        let lo = match self.origin {
            Origin::Carved | Origin::Owned => self.lo - os::page_size(),
            Origin::Unguarded => self.lo,
        };
        StackPointer::new(lo).expect("non-null")
    }
}

impl Drop for FiberStack {
    fn drop(&mut self) {
        if self.origin == Origin::Owned {
            let page = os::page_size();
            os::unmap(self.lo - page, self.usable() + page);
            budget::release();
        }
    }
}

/// Why a stack could not be had.
#[derive(Debug)]
pub(crate) enum StackError {
    /// Fallback path: the process's mapping budget is used up; the fiber
    /// has to wait for a stack to be freed.
    AtBudget,
    /// The OS refused the memory (or the size cannot be mapped).
    Os(io::Error),
}

/// The runtime's slabs, unmapped when the runtime is dropped (after the
/// shutdown drain destroyed every coroutine that could use them).
#[derive(Default)]
pub(crate) struct Slabs {
    maps: Mutex<Vec<(usize, usize)>>,
}

impl Slabs {
    /// Map a slab of `len` bytes, bound to NUMA node `node` (OS index).
    fn map(&self, len: usize, node: Option<usize>) -> io::Result<usize> {
        let p = os::map(len)?;
        os::no_huge_pages(p, len);
        if let Some(n) = node {
            // SAFETY: our fresh mapping, not used by anyone yet. A failed
            // binding only costs locality.
            let _ = unsafe { crate::topology::bind_area_to_node(p, len, n) };
        }
        self.maps.lock().unwrap_or_else(|e| e.into_inner()).push((p, len));
        LIVE_SLAB_BYTES.fetch_add(len, Relaxed);
        LIVE_SLABS.fetch_add(1, Relaxed);
        Ok(p)
    }
}

impl Drop for Slabs {
    fn drop(&mut self) {
        for &(p, len) in self.maps.get_mut().unwrap_or_else(|e| e.into_inner()).iter() {
            os::unmap(p, len);
            LIVE_SLAB_BYTES.fetch_sub(len, Relaxed);
            LIVE_SLABS.fetch_sub(1, Relaxed);
        }
    }
}

/// Per-runtime stack settings, shared by its workers.
pub(crate) struct Stacks {
    pub(crate) mode: StackMode,
    pub(crate) guard: GuardKind,
    /// Carved stacks handed over by pools with too many (module docs).
    /// Before `slabs`: dropped first (a carved stack's drop touches no
    /// memory anyway).
    spill: Mutex<Vec<Spilled>>,
    /// Some `Spilled::surplus` is not empty (a hint for `trim_spill`).
    surplus_pending: std::sync::atomic::AtomicBool,
    pub(crate) slabs: Slabs,
    /// Fibers waiting for a fallback stack, per worker.
    starved: Box<[AtomicUsize]>,
    /// Sum of `starved`.
    starved_total: AtomicUsize,
}

impl Stacks {
    pub(crate) fn new(mode: StackMode, workers: usize) -> Stacks {
        Stacks {
            mode,
            guard: os::guard_kind(),
            spill: Mutex::new(Vec::new()),
            surplus_pending: std::sync::atomic::AtomicBool::new(false),
            slabs: Slabs::default(),
            starved: (0..workers).map(|_| AtomicUsize::new(0)).collect(),
            starved_total: AtomicUsize::new(0),
        }
    }

    /// This runtime uses the fallback's budget.
    #[inline]
    pub(crate) fn budgeted(&self) -> bool {
        self.mode == StackMode::Guarded && self.guard == GuardKind::Mprotect
    }

    /// Worker `w` keeps `delta` more (or fewer) fibers waiting for a stack.
    pub(crate) fn add_starved(&self, w: usize, delta: isize) {
        if delta >= 0 {
            self.starved[w].fetch_add(delta as usize, SeqCst);
            self.starved_total.fetch_add(delta as usize, SeqCst);
        } else {
            self.starved[w].fetch_sub(delta.unsigned_abs(), SeqCst);
            self.starved_total.fetch_sub(delta.unsigned_abs(), SeqCst);
        }
    }

    /// Fibers of this runtime waiting for a stack.
    pub(crate) fn starved(&self) -> usize {
        self.starved_total.load(SeqCst)
    }

    /// Workers with fibers waiting for a stack.
    pub(crate) fn starved_workers(&self) -> impl Iterator<Item = usize> + '_ {
        self.starved.iter().enumerate().filter(|(_, n)| n.load(SeqCst) != 0).map(|(i, _)| i)
    }

    /// The deadlock report's note when fibers wait for a fallback stack.
    pub(crate) fn starvation_note(&self) -> Option<String> {
        let n = self.starved();
        (n != 0).then(|| {
            format!(
                "{n} fibers cannot start: every stack of the fallback stack budget ({} stacks, from \
                 vm.max_map_count = {}) belongs to a fiber that waits. The fallback is in use because \
                 {}. Fix: run on Linux 6.13 or newer, raise vm.max_map_count (sysctl -w \
                 vm.max_map_count=N), or keep fewer fibers alive at once",
                budget::limit(),
                os::max_map_count(),
                if os::guard_install_disabled() {
                    "NUMAFIBER_NO_GUARD_INSTALL is set"
                } else {
                    "this kernel lacks MADV_GUARD_INSTALL (Linux 6.13+)"
                }
            )
        })
    }
}

/// The spill's carved stacks of one NUMA node (as the pools name it) and
/// size class.
struct Spilled {
    node: Option<usize>,
    class: u32,
    /// Pages kept (trimmed below their warm top), at most `WARM_POOL`.
    warm: Vec<FiberStack>,
    /// Beyond `warm`'s cap, not given back yet: `trim_surplus` gives them
    /// back together once there are `WARM_POOL` of them, or when a worker
    /// goes idle.
    surplus: Vec<FiberStack>,
    /// Given back to the kernel whole.
    cold: Vec<FiberStack>,
}

impl Spilled {
    /// Give the surplus stacks' pages back and keep them cold. Stacks that
    /// are neighbours in their slab (sorted by address, one guard page
    /// apart) go in one `madvise(MADV_DONTNEED)` over the run, guard pages
    /// included: guard markers survive `MADV_DONTNEED` (they are PTE
    /// markers, not pages), so one TLB shootdown covers the whole run.
    fn trim_surplus(&mut self) {
        if self.surplus.is_empty() {
            return;
        }
        let page = os::page_size();
        self.surplus.sort_unstable_by_key(|s| s.lo);
        let mut run: Option<(usize, usize)> = None;
        for s in &mut self.surplus {
            s.dirty = false;
            run = match run {
                Some((lo, top)) if s.lo == top + page => Some((lo, s.top)),
                Some((lo, top)) => {
                    os::discard(lo, top - lo);
                    Some((s.lo, s.top))
                }
                None => Some((s.lo, s.top)),
            };
        }
        if let Some((lo, top)) = run {
            os::discard(lo, top - lo);
        }
        self.cold.append(&mut self.surplus);
    }
}

impl Stacks {
    /// Take `batch` carved stacks of `class` (warm ones first) from pool
    /// `node`'s pool into the spill.
    fn spill(&self, node: Option<usize>, class: u32, batch: impl Iterator<Item = FiberStack>) {
        let mut sp = self.spill.lock().unwrap_or_else(|e| e.into_inner());
        let i = match sp.iter().position(|e| e.node == node && e.class == class) {
            Some(i) => i,
            None => {
                sp.push(Spilled { node, class, warm: Vec::new(), surplus: Vec::new(), cold: Vec::new() });
                sp.len() - 1
            }
        };
        let e = &mut sp[i];
        for mut s in batch {
            if e.warm.len() < WARM_POOL {
                s.trim_below_warm_top();
                e.warm.push(s);
            } else {
                e.surplus.push(s);
            }
        }
        if e.surplus.len() >= WARM_POOL {
            e.trim_surplus();
        }
        let pending = sp.iter().any(|e| !e.surplus.is_empty());
        self.surplus_pending.store(pending, Relaxed);
    }

    /// A worker goes idle: give back the spill's surplus (see `Spilled`).
    pub(crate) fn trim_spill(&self) {
        if !self.surplus_pending.load(Relaxed) {
            return;
        }
        let mut sp = self.spill.lock().unwrap_or_else(|e| e.into_inner());
        for e in sp.iter_mut() {
            e.trim_surplus();
        }
        self.surplus_pending.store(false, Relaxed);
    }

    /// Move up to `SPILL_BATCH` spilled stacks of `class` for `node` into
    /// `c`: warm ones first, then the surplus (warm too, but possibly dirty
    /// below the warm top: the pool's idle trim checks them), then cold
    /// ones (below the warm ones in `c.free`). Returns whether any came.
    fn unspill(&self, node: Option<usize>, class: u32, c: &mut Class) -> bool {
        let mut sp = self.spill.lock().unwrap_or_else(|e| e.into_inner());
        let Some(e) = sp.iter_mut().find(|e| e.node == node && e.class == class) else { return false };
        let nw = e.warm.len().min(SPILL_BATCH);
        let ns = e.surplus.len().min(SPILL_BATCH - nw);
        let nc = e.cold.len().min(SPILL_BATCH - nw - ns);
        if nw + ns + nc == 0 {
            return false;
        }
        let at = c.free.len() - c.warm;
        let cold = e.cold.len() - nc;
        c.free.splice(at..at, e.cold.drain(cold..));
        let surplus = e.surplus.len() - ns;
        c.free.extend(e.surplus.drain(surplus..).map(|mut s| {
            s.dirty = true;
            s
        }));
        let warm = e.warm.len() - nw;
        c.free.extend(e.warm.drain(warm..));
        c.warm += nw + ns;
        true
    }

    /// Stacks in the spill: (warm, cold) (tests).
    #[cfg(test)]
    fn spilled(&self) -> (usize, usize) {
        let sp = self.spill.lock().unwrap_or_else(|e| e.into_inner());
        sp.iter().fold((0, 0), |(w, c), e| (w + e.warm.len() + e.surplus.len(), c + e.cold.len()))
    }
}

/// A guarded size class of one worker's pool.
#[derive(Default)]
struct Class {
    /// Free stacks; the last `warm` ones kept their pages.
    free: Vec<FiberStack>,
    warm: usize,
    /// The slab being carved: next unused byte and its end.
    carve_next: usize,
    carve_end: usize,
    /// Slabs made for this class (the next one is twice as large).
    slabs: u32,
}

/// One worker's stacks.
#[derive(Default)]
pub(crate) struct StackPool {
    classes: Vec<Class>,
    unguarded: Vec<(usize, Vec<FiberStack>)>,
    /// NUMA node (OS index) new slabs and fallback stacks are bound to.
    node: Option<usize>,
    /// Some warm stack may have dirty pages below its warm top.
    needs_trim: bool,
    /// Stacks carved or mapped by this pool.
    pub(crate) mapped: u64,
}

impl StackPool {
    pub(crate) fn new(node: Option<usize>) -> StackPool {
        StackPool { node, ..StackPool::default() }
    }

    /// A stack of at least `size` bytes.
    #[inline]
    pub(crate) fn get(&mut self, size: usize, cfg: &Stacks) -> Result<FiberStack, StackError> {
        if cfg.mode == StackMode::Slab {
            return self.get_unguarded(size, &cfg.slabs);
        }
        let Some((idx, usable)) = class_of(size) else {
            return Err(StackError::Os(io::Error::new(io::ErrorKind::InvalidInput, "stack size too large")));
        };
        if idx >= self.classes.len() {
            self.classes.resize_with(idx + 1, Class::default);
        }
        let c = &mut self.classes[idx];
        if let Some(s) = c.free.pop() {
            c.warm = c.warm.saturating_sub(1);
            return Ok(s);
        }
        if cfg.guard == GuardKind::Install && cfg.unspill(self.node, idx as u32, c) {
            let s = c.free.pop().expect("unspill moved at least one");
            c.warm = c.warm.saturating_sub(1);
            return Ok(s);
        }
        match cfg.guard {
            GuardKind::Install => self.carve(idx, usable, &cfg.slabs),
            GuardKind::Mprotect => self.map_owned(idx, usable),
        }
    }

    /// Carve a stack of class `idx` from its slab (a new slab if needed).
    #[cold]
    fn carve(&mut self, idx: usize, usable: usize, slabs: &Slabs) -> Result<FiberStack, StackError> {
        let page = os::page_size();
        let stride = usable + page; // cannot overflow: usable <= MAX_STACK_SIZE
        let node = self.node;
        let c = &mut self.classes[idx];
        if c.carve_end - c.carve_next < stride {
            // Geometric growth, capped; halve on refusal (strict overcommit
            // or a small address-space limit) down to one stack.
            let mut n = slab_stacks(c.slabs, usable, stride);
            let (base, len) = loop {
                let len = n.checked_mul(stride).ok_or_else(|| {
                    StackError::Os(io::Error::new(io::ErrorKind::InvalidInput, "slab size overflows"))
                })?;
                match slabs.map(len, node) {
                    Ok(b) => break (b, len),
                    Err(e) if n == 1 => return Err(StackError::Os(e)),
                    Err(_) => n /= 2,
                }
            };
            c.slabs += 1;
            c.carve_next = base;
            c.carve_end = base + len;
        }
        let guard = c.carve_next;
        os::install_guard(guard, GuardKind::Install).map_err(StackError::Os)?;
        c.carve_next += stride;
        self.mapped += 1;
        Ok(FiberStack::new(guard + page, guard + stride, Origin::Carved, idx as u32))
    }

    /// Fallback: map a stack of its own, inside the budget.
    #[cold]
    fn map_owned(&mut self, idx: usize, usable: usize) -> Result<FiberStack, StackError> {
        if !budget::try_acquire() {
            // Make room with this pool's other free stacks first.
            self.release_free();
            if !budget::try_acquire() {
                return Err(StackError::AtBudget);
            }
        }
        let page = os::page_size();
        let len = usable + page;
        let base = match os::map(len) {
            Ok(b) => b,
            Err(e) => {
                budget::release();
                return Err(StackError::Os(e));
            }
        };
        if let Err(e) = os::install_guard(base, GuardKind::Mprotect) {
            os::unmap(base, len);
            budget::release();
            return Err(StackError::Os(e));
        }
        if let Some(n) = self.node {
            // SAFETY: our fresh mapping, not used by anyone yet.
            let _ = unsafe { crate::topology::bind_area_to_node(base + page, usable, n) };
        }
        self.mapped += 1;
        Ok(FiberStack::new(base + page, base + len, Origin::Owned, idx as u32))
    }

    /// Fallback: unmap every free stack of this pool (giving their budget
    /// slots back). Returns how many.
    pub(crate) fn release_free(&mut self) -> usize {
        let mut n = 0;
        for c in &mut self.classes {
            if c.free.first().is_some_and(|s| s.origin == Origin::Owned) {
                n += c.free.len();
                c.free.clear();
                c.warm = 0;
            }
        }
        n
    }

    fn get_unguarded(&mut self, size: usize, slabs: &Slabs) -> Result<FiberStack, StackError> {
        let os_err = |m: &str| StackError::Os(io::Error::new(io::ErrorKind::InvalidInput, m.to_string()));
        let size_r = size.checked_next_multiple_of(1024).ok_or_else(|| os_err("stack size too large"))?;
        if let Some((_, v)) = self.unguarded.iter_mut().find(|(s, _)| *s == size_r) {
            if let Some(s) = v.pop() {
                return Ok(s);
            }
        }
        let n = SLAB_STACKS.max((1 << 20) / size_r);
        let len = n
            .checked_mul(size_r)
            .and_then(|l| l.checked_next_multiple_of(os::page_size()))
            .ok_or_else(|| os_err("slab size overflows"))?;
        let base = slabs.map(len, self.node).map_err(StackError::Os)?;
        self.mapped += n as u64;
        let idx = match self.unguarded.iter().position(|(s, _)| *s == size_r) {
            Some(i) => i,
            None => {
                self.unguarded.push((size_r, Vec::new()));
                self.unguarded.len() - 1
            }
        };
        let v = &mut self.unguarded[idx].1;
        for i in 1..n {
            let lo = base + i * size_r;
            v.push(FiberStack::new(lo, lo + size_r, Origin::Unguarded, idx as u32));
        }
        Ok(FiberStack::new(base, base + size_r, Origin::Unguarded, idx as u32))
    }

    /// Take a stack back. Returns `true` when a fallback stack was unmapped
    /// (a budget slot was freed: wake starved workers).
    #[inline]
    pub(crate) fn put(&mut self, mut stack: FiberStack, cfg: &Stacks) -> bool {
        match stack.origin {
            Origin::Unguarded => {
                // Unguarded stacks are never unmapped one by one: keep them.
                // Possibly carved by another worker's pool: find the class
                // by size.
                stack.arm();
                let size = stack.usable();
                match self.unguarded.iter_mut().find(|(s, _)| *s == size) {
                    Some((_, v)) => v.push(stack),
                    None => self.unguarded.push((size, vec![stack])),
                }
                false
            }
            Origin::Owned | Origin::Carved => {
                let idx = stack.class as usize;
                if idx >= self.classes.len() {
                    // Carved by another worker's pool.
                    self.classes.resize_with(idx + 1, Class::default);
                }
                let c = &mut self.classes[idx];
                if stack.origin == Origin::Owned && (c.free.len() >= FALLBACK_POOL || cfg.starved() != 0) {
                    drop(stack);
                    return true;
                }
                if stack.usable() > WARM_TOP {
                    stack.dirty = true;
                    self.needs_trim = true;
                }
                let carved = stack.origin == Origin::Carved;
                c.free.push(stack);
                c.warm += 1;
                if c.warm > WARM_POOL {
                    let i = c.free.len() - c.warm;
                    if carved {
                        // Hand the oldest warm ones to the spill (module
                        // docs); every carved stack of this pool is
                        // `Carved`.
                        c.warm -= SPILL_BATCH;
                        cfg.spill(self.node, idx as u32, c.free.drain(i..i + SPILL_BATCH));
                    } else {
                        c.free[i].trim_whole();
                        c.warm -= 1;
                    }
                }
                false
            }
        }
    }

    /// The worker goes idle: warm stacks give back what they dirtied below
    /// their warm top.
    pub(crate) fn trim(&mut self) {
        if !self.needs_trim {
            return;
        }
        self.needs_trim = false;
        for c in &mut self.classes {
            let n = c.free.len();
            for s in &mut c.free[n - c.warm..] {
                s.trim_below_warm_top();
            }
        }
    }
}

#[cfg(test)]
mod tests;
