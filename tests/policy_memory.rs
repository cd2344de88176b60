//! Per-worker policy memory does not grow with the number of workers,
//! measured on the real heap: a counting global
//! allocator (per thread, so parallel tests do not disturb it) sees what a
//! worker's policy state and its steal passes allocate.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use numafiber::policy::{PolicyOptions, Scheduler};
use numafiber::{Policy, Topology};

struct Counting;

thread_local! {
    /// Live heap bytes allocated by this thread (allocations minus frees).
    static LIVE: Cell<isize> = const { Cell::new(0) };
    /// Allocation calls made by this thread.
    static CALLS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards every call to `System` unchanged; the counters are
// thread-local `Cell`s without destructors (usable at any time, and they
// allocate nothing).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.with(|c| c.set(c.get() + l.size() as isize));
        CALLS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `alloc` is passed on.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.with(|c| c.set(c.get() - l.size() as isize));
        // SAFETY: the caller's contract for `dealloc` is passed on.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.with(|c| c.set(c.get() + new as isize - l.size() as isize));
        CALLS.with(|c| c.set(c.get() + 1));
        // SAFETY: the caller's contract for `realloc` is passed on.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.with(|c| c.get())
}

fn calls() -> u64 {
    CALLS.with(|c| c.get())
}

/// `n` workers spread evenly over `nodes` nodes.
fn scheduler(policy: Policy, nodes: usize, n: usize) -> Scheduler {
    let worker_node = (0..n).map(|w| w * nodes / n).collect();
    Scheduler::new(policy, PolicyOptions::default(), worker_node, &Topology::uniform(nodes, n / nodes))
}

/// Heap bytes a worker's policy state holds after `passes` failed steal
/// passes (every victim tried, every attempt recorded), and the allocation
/// calls made during those passes.
fn per_worker_heap(s: &Scheduler, thief: usize, passes: usize) -> (isize, u64) {
    let before = live();
    let mut st = s.new_thief_state(thief, 7);
    let calls_before = calls();
    let mut tried = 0usize;
    for _ in 0..passes {
        s.set_own_status(thief, &st, false);
        let mut victims = s.victims(thief, &mut st);
        while let Some(v) = victims.next() {
            tried += 1;
            victims.record_steal(v, false);
        }
        s.set_own_status(thief, &st, true);
    }
    let pass_calls = calls() - calls_before;
    let held = live() - before;
    assert_eq!(held, st.heap_bytes() as isize, "heap_bytes() accounts for what the state holds");
    let per_pass = if s.steals() { s.num_workers() - 1 } else { 0 };
    assert_eq!(tried, passes * per_pass, "every other worker tried once per pass");
    drop(st);
    (held, pass_calls)
}

/// 2, 64 and 1024 workers on one node and on 4 nodes, every policy: the
/// same bytes per worker whatever the worker count, and no allocation in a
/// steal pass. Before this rule a Nlh thief held 64 B at 4 workers and
/// 8,472 B at 1,024 (a victim list of 8 B per worker, a status bitmap of
/// 2 bits per worker).
#[test]
fn per_worker_policy_heap_is_independent_of_the_worker_count() {
    for policy in Policy::ALL {
        for nodes in [1usize, 4] {
            let sizes: &[usize] = if nodes == 1 { &[2, 64, 1024] } else { &[4, 64, 1024] };
            let mut seen = Vec::new();
            for &n in sizes {
                let s = scheduler(policy, nodes, n);
                // A thief on the first and on the last node.
                for thief in [0, n - 1] {
                    let (bytes, pass_calls) = per_worker_heap(&s, thief, 3);
                    assert_eq!(pass_calls, 0, "{policy}, {n} workers on {nodes} nodes: a steal pass allocated");
                    seen.push((n, bytes));
                }
            }
            println!("{policy:>11} on {nodes} node(s): (workers, heap bytes per worker) {seen:?}");
            assert!(seen.iter().all(|&(_, b)| b == seen[0].1), "{policy} on {nodes} nodes grows with n: {seen:?}");
            assert!(seen[0].1 <= 48 * nodes as isize, "{policy} on {nodes} nodes: {seen:?}");
        }
    }
}
