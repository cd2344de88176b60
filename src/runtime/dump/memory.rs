//! Where a fiber's stack lives: resident bytes (`mincore(2)`) and the NUMA
//! node of its top page (`move_pages(2)` with no target nodes, which only
//! asks). Both are syscalls that read page tables and never fault in user
//! space: a stack unmapped or reused meanwhile gives `ENOMEM` / `-EFAULT`
//! or another fiber's figures, never undefined behaviour.

use std::sync::atomic::Ordering::Relaxed;

use super::FiberDump;
use crate::fiber::task::TaskRef;

/// Pages asked about per `move_pages` call.
const BATCH: usize = 4096;

/// Fill `stack_touched` and `stack_node` of `fibers[i]` from `tasks[i]`.
pub(super) fn fill(fibers: &mut [FiberDump], tasks: &[TaskRef], mode: crate::fiber::stack::StackMode) {
    let page = crate::fiber::stack::os::page_size();
    let mut vec: Vec<u8> = Vec::new();
    let mut tops: Vec<(usize, usize)> = Vec::new();
    for (i, (f, t)) in fibers.iter_mut().zip(tasks).enumerate() {
        let lo = t.stack_lo.load(Relaxed);
        if lo == 0 {
            continue;
        }
        // A guarded stack's recorded low end is its guard page's.
        let lo = if mode == crate::fiber::stack::StackMode::Guarded { lo + page } else { lo };
        let Some(len) = crate::fiber::stack::usable_len(t.stack_size, mode) else { continue };
        // Unguarded slab stacks need not start on a page.
        let top = lo + len;
        let lo = lo & !(page - 1);
        let len = (top - lo).div_ceil(page) * page;
        let pages = len / page;
        vec.clear();
        vec.resize(pages, 0);
        // SAFETY: `mincore` writes `pages` bytes into `vec`, which has
        // them; it only reads page tables for the range (an unmapped
        // range is an error return, not a fault).
        let r = unsafe { libc::mincore(lo as *mut libc::c_void, len, vec.as_mut_ptr()) };
        if r != 0 {
            continue;
        }
        let resident = vec.iter().filter(|b| **b & 1 != 0).count();
        f.stack_touched = Some(resident * page);
        if resident != 0 {
            tops.push((i, lo + len - page));
        }
    }
    for chunk in tops.chunks(BATCH) {
        let addrs: Vec<*mut libc::c_void> = chunk.iter().map(|&(_, a)| a as *mut libc::c_void).collect();
        let mut status = vec![0 as libc::c_int; chunk.len()];
        // SAFETY: `addrs` and `status` hold `chunk.len()` entries; a null
        // `nodes` array makes the call a query (no page moves), pid 0 is
        // this process.
        let r = unsafe {
            libc::syscall(
                libc::SYS_move_pages,
                0 as libc::c_long,
                chunk.len() as libc::c_ulong,
                addrs.as_ptr(),
                std::ptr::null::<libc::c_int>(),
                status.as_mut_ptr(),
                0 as libc::c_int,
            )
        };
        if r != 0 {
            return; // no NUMA support in this kernel: nodes stay unknown
        }
        for (&(i, _), &s) in chunk.iter().zip(&status) {
            if s >= 0 {
                fibers[i].stack_node = Some(s as usize);
            }
        }
    }
}
