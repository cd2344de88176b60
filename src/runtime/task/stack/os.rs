//! The system calls behind fiber stacks: `mmap`, guard pages
//! (`MADV_GUARD_INSTALL` or `mprotect`), giving pages back
//! (`MADV_DONTNEED`), and the once-per-process detection of guard-page
//! support.

use std::io;
use std::sync::OnceLock;

/// `madvise` advice that turns pages into guard markers inside an existing
/// mapping, without a VMA of their own (Linux 6.13 and newer).
const MADV_GUARD_INSTALL: libc::c_int = 102;

/// Environment variable that makes the process behave as if the kernel
/// lacked `MADV_GUARD_INSTALL` (tests of the fallback path).
pub(crate) const NO_GUARD_INSTALL_ENV: &str = "NUMAFIBER_NO_GUARD_INSTALL";

/// How guard pages are made in this process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum GuardKind {
    /// `MADV_GUARD_INSTALL` inside large slabs: no mapping per stack.
    Install,
    /// The fallback: one mapping per stack, `mprotect`ed guard page (two
    /// memory mappings per stack, so a budget applies).
    Mprotect,
}

pub(crate) fn page_size() -> usize {
    static PAGE: OnceLock<usize> = OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf has no preconditions.
        let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        if p > 0 && (p as usize).is_power_of_two() {
            p as usize
        } else {
            4096
        }
    })
}

/// Detected once per process: does `madvise(MADV_GUARD_INSTALL)` work
/// here (and is it not disabled by `NUMAFIBER_NO_GUARD_INSTALL=1`)?
pub(crate) fn guard_kind() -> GuardKind {
    static KIND: OnceLock<GuardKind> = OnceLock::new();
    *KIND.get_or_init(|| {
        if guard_install_disabled() {
            return GuardKind::Mprotect;
        }
        let page = page_size();
        let Ok(p) = map(2 * page) else { return GuardKind::Mprotect };
        // SAFETY: our fresh two-page mapping; nobody else knows it.
        let ok = unsafe { libc::madvise(p as *mut libc::c_void, page, MADV_GUARD_INSTALL) } == 0;
        unmap(p, 2 * page);
        if ok {
            GuardKind::Install
        } else {
            GuardKind::Mprotect
        }
    })
}

/// `NUMAFIBER_NO_GUARD_INSTALL` is set (to anything but empty or `0`).
pub(crate) fn guard_install_disabled() -> bool {
    std::env::var_os(NO_GUARD_INSTALL_ENV).is_some_and(|v| !v.is_empty() && v != "0")
}

/// A fresh private anonymous read-write mapping, lazily committed
/// (`MAP_NORESERVE`: no swap reservation; pages cost memory when touched).
pub(crate) fn map(len: usize) -> io::Result<usize> {
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
        Err(io::Error::last_os_error())
    } else {
        Ok(p as usize)
    }
}

/// Unmap a mapping made by [`map`] (or part of one).
pub(crate) fn unmap(addr: usize, len: usize) {
    // SAFETY: the callers pass their own mapping, no longer in use.
    unsafe { libc::munmap(addr as *mut libc::c_void, len) };
}

/// Turn the page at `addr` into a guard: `MADV_GUARD_INSTALL` (no new VMA)
/// or `mprotect(PROT_NONE)` (splits the mapping).
pub(crate) fn install_guard(addr: usize, kind: GuardKind) -> io::Result<()> {
    let page = page_size();
    // SAFETY: `addr` is a page of a mapping of ours that no stack uses yet.
    let r = unsafe {
        match kind {
            GuardKind::Install => libc::madvise(addr as *mut libc::c_void, page, MADV_GUARD_INSTALL),
            GuardKind::Mprotect => libc::mprotect(addr as *mut libc::c_void, page, libc::PROT_NONE),
        }
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Give the pages of `[addr, addr + len)` back to the kernel: the next touch
/// maps a fresh zero page. Guard markers survive it.
pub(crate) fn discard(addr: usize, len: usize) {
    if len == 0 {
        return;
    }
    // SAFETY: a range of our stacks that no fiber uses right now (one
    // stack, or neighbouring stacks of a slab with the guard pages between
    // them, whose markers `MADV_DONTNEED` keeps).
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_DONTNEED) };
}

/// Whether any page of `[addr, addr + len)` (page-aligned `addr`) is
/// resident, by `mincore`: unlike `madvise(MADV_DONTNEED)` it flushes no
/// TLB entries, so checking first saves an inter-processor interrupt per
/// stack that never went deep. `true` when it cannot tell (then the caller
/// discards as before).
pub(crate) fn any_resident(addr: usize, len: usize) -> bool {
    if len == 0 {
        return false;
    }
    let page = page_size();
    let pages = len.div_ceil(page);
    // Up to 64 pages per call on the stack (256 KiB with 4 KiB pages).
    let mut vec = [0u8; 64];
    let mut done = 0;
    while done < pages {
        let n = (pages - done).min(vec.len());
        // SAFETY: `[addr + done * page, + n * page)` lies inside one of our
        // mappings (a stack of a slab), `addr` is page-aligned, and `vec`
        // has room for `n` entries.
        let r = unsafe { libc::mincore((addr + done * page) as *mut libc::c_void, n * page, vec.as_mut_ptr()) };
        if r != 0 {
            return true;
        }
        if vec[..n].iter().any(|&v| v & 1 != 0) {
            return true;
        }
        done += n;
    }
    false
}

/// Keep transparent huge pages out of a slab (with THP "always", one touch
/// would otherwise commit 2 MiB).
pub(crate) fn no_huge_pages(addr: usize, len: usize) {
    // SAFETY: our own fresh mapping; advice only.
    unsafe { libc::madvise(addr as *mut libc::c_void, len, libc::MADV_NOHUGEPAGE) };
}

/// `vm.max_map_count`, or the kernel default when it cannot be read.
pub(crate) fn max_map_count() -> usize {
    std::fs::read_to_string("/proc/sys/vm/max_map_count").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(65_530)
}

/// Memory mappings of this process right now (lines of `/proc/self/maps`).
pub(crate) fn current_map_count() -> usize {
    std::fs::read("/proc/self/maps").map(|b| b.iter().filter(|&&c| c == b'\n').count()).unwrap_or(0)
}
