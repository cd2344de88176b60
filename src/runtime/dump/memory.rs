//! Where a fiber's stack lives: resident bytes (`mincore(2)`) and the NUMA
//! node of its top page (`move_pages(2)` with no target nodes, which only
//! asks). Both are syscalls that read page tables and never fault in user
//! space: a stack unmapped or reused meanwhile gives `ENOMEM` / `-EFAULT`
//! or another fiber's figures, never undefined behaviour.

use super::FiberDump;
use crate::runtime::task::stack::StackMode;

/// Pages asked about per `move_pages` call.
const BATCH: usize = 4096;

/// Most pages one `mincore` call covers (its result buffer: 256 KiB).
const RUN_PAGES: usize = 1 << 18;

/// Stacks from which a dump asks about pages on two threads.
const PARALLEL: usize = 1 << 16;

/// Fill `stack_touched` and `stack_node` of `fibers[i]` from `stacks[i]`
/// (the stack's low end, 0 for none, and its requested size).
///
/// Stacks carved from one slab lie next to each other (a guard page
/// apart), so neighbouring stacks are asked about in one `mincore` call
/// over their whole run: a syscall per run of up to `RUN_PAGES` pages, not
/// per fiber (a run that is not mapped throughout falls back to a call
/// per stack). On a machine with one NUMA node every resident page is on
/// it, so the node of a resident top page is known without asking;
/// otherwise the top pages are asked about `BATCH` at a time.
pub(super) fn fill(fibers: &mut [FiberDump], stacks: &[(usize, usize)], mode: StackMode) {
    let page = crate::runtime::task::stack::os::page_size();
    // (first page, page count, fiber index), by address.
    let mut order: Vec<(usize, u32, u32)> = Vec::with_capacity(stacks.len());
    for (i, &(lo, size)) in stacks.iter().enumerate() {
        if lo == 0 {
            continue;
        }
        // A guarded stack's recorded low end is its guard page's.
        let lo = if mode == StackMode::Guarded { lo + page } else { lo };
        let Some(len) = crate::runtime::task::stack::usable_len(size, mode) else { continue };
        // Unguarded slab stacks need not start on a page.
        let top = lo + len;
        let first = lo / page;
        let Ok(pages) = u32::try_from(top.div_ceil(page) - first) else { continue };
        order.push((first, pages, i as u32));
    }
    // Stacks are mostly handed out in address order, so this input is
    // nearly sorted.
    order.sort_unstable();
    let single_node = only_node_zero();
    // Above `PARALLEL` stacks, a scoped thread asks about the upper half
    // (the page-table walks are most of a large dump's time).
    let (low, high) = order.split_at(if order.len() >= PARALLEL { order.len() / 2 } else { order.len() });
    let (low_found, high_found) = std::thread::scope(|s| {
        let h = match high.is_empty() {
            true => None,
            false => {
                std::thread::Builder::new().name("numafiber-dump".into()).spawn_scoped(s, || touched(high, page)).ok()
            }
        };
        let low_found = touched(low, page);
        // A helper that could not start or failed: its half asked here.
        let high_found = match h {
            Some(h) => h.join().unwrap_or_else(|_| touched(high, page)),
            None => touched(high, page),
        };
        (low_found, high_found)
    });
    // Resident top pages whose node is to be asked: (fiber, address).
    let mut tops: Vec<(u32, usize)> = Vec::new();
    for (i, pages, top) in low_found.into_iter().chain(high_found) {
        let f = &mut fibers[i as usize];
        f.stack_touched = Some(pages as usize * page);
        if let Some(top) = top {
            if single_node {
                f.stack_node = Some(0);
            } else {
                tops.push((i, top));
            }
        }
    }
    let mut addrs: Vec<*mut libc::c_void> = Vec::with_capacity(BATCH.min(tops.len()));
    let mut status: Vec<libc::c_int> = Vec::with_capacity(BATCH.min(tops.len()));
    for chunk in tops.chunks(BATCH) {
        addrs.clear();
        addrs.extend(chunk.iter().map(|&(_, a)| a as *mut libc::c_void));
        status.clear();
        status.resize(chunk.len(), 0);
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
                fibers[i as usize].stack_node = Some(s as usize);
            }
        }
    }
}

/// Resident pages of the stacks `order` (sorted by address, as in `fill`):
/// (fiber index, resident pages, address of the top page if it is
/// resident). A stack that is not mapped is left out.
fn touched(order: &[(usize, u32, u32)], page: usize) -> Vec<(u32, u32, Option<usize>)> {
    let mut out = Vec::with_capacity(order.len());
    let mut vec: Vec<u8> = Vec::new();
    let mut one: Vec<u8> = Vec::new();
    let mut k = 0;
    while k < order.len() {
        // The run: stacks whose pages follow within a guard page.
        let start = order[k].0;
        let mut end = start + order[k].1 as usize;
        let mut j = k + 1;
        while j < order.len() && order[j].0 <= end + 1 && order[j].0 + order[j].1 as usize - start <= RUN_PAGES {
            end = end.max(order[j].0 + order[j].1 as usize);
            j += 1;
        }
        let whole = resident(start, end - start, page, &mut vec);
        for &(first, pages, i) in &order[k..j] {
            let n = pages as usize;
            let v = if whole {
                &vec[first - start..first - start + n]
            } else if resident(first, n, page, &mut one) {
                &one[..]
            } else {
                continue;
            };
            let count = v.iter().map(|b| u32::from(b & 1)).sum::<u32>();
            out.push((i, count, (v[n - 1] & 1 != 0).then(|| (first + n - 1) * page)));
        }
        k = j;
    }
    out
}

/// The machine has one NUMA node, node 0 (`/sys/devices/system/node/online`
/// reads `0`): every resident page is on it. Read at each dump (nodes may
/// come online).
fn only_node_zero() -> bool {
    std::fs::read_to_string("/sys/devices/system/node/online").is_ok_and(|s| s.trim() == "0")
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::task::stack::os;

    /// Stacks of 8 pages a page apart, stack `i` touched in its top `i % 9`
    /// pages: `touched` counts each, finds the resident tops, and gives the
    /// same answer over two halves as over the whole (the parallel split).
    #[test]
    fn touched_counts_each_stack_of_a_run() {
        let page = os::page_size();
        let (n, pages) = (40usize, 8usize);
        let len = n * (pages + 1) * page;
        let base = os::map(len).expect("map");
        let mut order = Vec::new();
        for i in 0..n {
            let first = base / page + i * (pages + 1) + 1;
            for p in 0..i % 9 {
                let a = (first + pages - 1 - p) * page;
                // SAFETY: `a` is a page of our fresh read-write mapping.
                unsafe { (a as *mut u8).write_volatile(1) };
            }
            order.push((first, pages as u32, i as u32));
        }
        let whole = touched(&order, page);
        assert_eq!(whole.len(), n);
        for &(i, count, top) in &whole {
            let want = i as usize % 9;
            assert_eq!(count as usize, want, "stack {i}");
            assert_eq!(top.is_some(), want > 0, "stack {i}");
        }
        let (lo, hi) = order.split_at(n / 2 + 1);
        let mut split = touched(lo, page);
        split.extend(touched(hi, page));
        assert_eq!(split, whole);
        os::unmap(base, len);
    }
}
