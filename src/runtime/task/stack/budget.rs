//! The fallback path's mapping budget (kernels without
//! `MADV_GUARD_INSTALL`): every fallback stack is its own mapping plus an
//! `mprotect`ed guard page, i.e. two entries of the process's
//! `vm.max_map_count`. The budget counts every fallback stack that is
//! mapped, in use or pooled, process-wide; a slot is taken only when a
//! mapping succeeded and given back when it is unmapped, so failed
//! allocations cost nothing.

use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::OnceLock;

use super::os;

/// Fallback stacks mapped now (in use or pooled), in the whole process.
static MAPPED: AtomicUsize = AtomicUsize::new(0);

/// Mappings kept free for everything else (heap, threads, libraries).
const MARGIN: usize = 2_048;

/// How many fallback stacks the process can afford: half of the mappings
/// left below `vm.max_map_count` when first asked, minus a margin.
pub(crate) fn limit() -> usize {
    static LIMIT: OnceLock<usize> = OnceLock::new();
    *LIMIT.get_or_init(|| {
        let free = os::max_map_count().saturating_sub(os::current_map_count());
        (free.saturating_sub(MARGIN) / 2).max(64)
    })
}

/// Fallback stacks mapped now.
pub(crate) fn mapped() -> usize {
    MAPPED.load(SeqCst)
}

/// Take a slot for one more fallback stack, if the budget has room.
pub(crate) fn try_acquire() -> bool {
    let limit = limit();
    let mut cur = MAPPED.load(Relaxed);
    loop {
        if cur >= limit {
            return false;
        }
        match MAPPED.compare_exchange_weak(cur, cur + 1, SeqCst, Relaxed) {
            Ok(_) => return true,
            Err(c) => cur = c,
        }
    }
}

/// Give a slot back (the stack was unmapped, or its mapping failed).
pub(crate) fn release() {
    MAPPED.fetch_sub(1, SeqCst);
}

/// The budget has room for one more stack (a starved worker's re-check).
pub(crate) fn has_room() -> bool {
    MAPPED.load(SeqCst) < limit()
}
