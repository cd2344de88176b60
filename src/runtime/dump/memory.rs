//! Where a fiber's stack lives: resident bytes (`mincore(2)`) and the NUMA
//! node of its top page (`move_pages(2)` with no target nodes, which only
//! asks). Both are syscalls that read page tables and never fault in user
//! space: a stack unmapped or reused meanwhile gives `ENOMEM` / `-EFAULT`
//! or another fiber's figures, never undefined behaviour.

use std::sync::atomic::Ordering::Relaxed;

use super::FiberDump;
use crate::runtime::task::TaskRef;

/// Pages asked about per `move_pages` call.
const BATCH: usize = 4096;

/// Most pages one `mincore` call covers (its result buffer: 256 KiB).
const RUN_PAGES: usize = 1 << 18;

/// Fill `stack_touched` and `stack_node` of `fibers[i]` from `tasks[i]`.
///
/// Stacks carved from one slab lie next to each other (a guard page
/// apart), so neighbouring stacks are asked about in one `mincore` call
/// over their whole run: a syscall per run of up to `RUN_PAGES` pages, not
/// per fiber (a run that is not mapped throughout falls back to a call
/// per stack).
pub(super) fn fill(fibers: &mut [FiberDump], tasks: &[TaskRef], mode: crate::runtime::task::stack::StackMode) {
    let page = crate::runtime::task::stack::os::page_size();
    // (first page, page count, fiber index), by address.
    let mut stacks: Vec<(usize, usize, usize)> = Vec::new();
    for (i, t) in tasks.iter().enumerate() {
        let lo = t.stack_lo.load(Relaxed);
        if lo == 0 {
            continue;
        }
        // A guarded stack's recorded low end is its guard page's.
        let lo = if mode == crate::runtime::task::stack::StackMode::Guarded { lo + page } else { lo };
        let Some(len) = crate::runtime::task::stack::usable_len(t.stack_size, mode) else { continue };
        // Unguarded slab stacks need not start on a page.
        let top = lo + len;
        let first = lo / page;
        stacks.push((first, top.div_ceil(page) - first, i));
    }
    stacks.sort_unstable();
    let mut vec: Vec<u8> = Vec::new();
    let mut tops: Vec<(usize, usize)> = Vec::new();
    let mut k = 0;
    while k < stacks.len() {
        // The run: stacks whose pages follow within a guard page.
        let start = stacks[k].0;
        let mut end = start + stacks[k].1;
        let mut j = k + 1;
        while j < stacks.len() && stacks[j].0 <= end + 1 && stacks[j].0 + stacks[j].1 - start <= RUN_PAGES {
            end = end.max(stacks[j].0 + stacks[j].1);
            j += 1;
        }
        let whole = resident(start, end - start, page, &mut vec);
        for &(first, pages, i) in &stacks[k..j] {
            let n = match whole {
                true => vec[first - start..first - start + pages].iter().filter(|b| **b & 1 != 0).count(),
                false => {
                    let mut one = Vec::new();
                    if !resident(first, pages, page, &mut one) {
                        continue;
                    }
                    one.iter().filter(|b| **b & 1 != 0).count()
                }
            };
            fibers[i].stack_touched = Some(n * page);
            if n != 0 {
                tops.push((i, (first + pages - 1) * page));
            }
        }
        k = j;
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

/// `mincore` over `pages` pages from page number `first` into `vec`;
/// `false` if the range is not mapped throughout.
fn resident(first: usize, pages: usize, page: usize, vec: &mut Vec<u8>) -> bool {
    vec.clear();
    vec.resize(pages, 0);
    // SAFETY: `mincore` writes `pages` bytes into `vec`, which has them;
    // it only reads page tables for the range (an unmapped range is an
    // error return, not a fault).
    unsafe { libc::mincore((first * page) as *mut libc::c_void, pages * page, vec.as_mut_ptr()) == 0 }
}
