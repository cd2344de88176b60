//! Reclaim: a fiber that joins its own child which nobody has started yet
//! runs it at once on its own worker (`JoinHandle::join`, protocol in
//! `src/runtime/task/mod.rs`, "Reclaim"): a child queued on another worker
//! of the node, or one queued on its own worker as the next one that
//! worker would start. `WorkerStats::reclaimed` counts both.
//!
//! The deterministic tests keep worker 1 busy in a pinned fiber that spins
//! without suspending, so that nothing can start a child placed in its
//! inbox; worker 0 runs the parent. NLH places on the shortest queue of
//! the node, ties to the spawner: one local child on worker 0 first makes
//! worker 1 the shortest.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::policy::PolicyOptions;
use numafiber::{fiber, Policy, Runtime, Topology};

mod common;
use common::occupy_worker1;

fn rt(opts: PolicyOptions) -> Runtime {
    Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::Nlh)
        .policy_options(opts)
        .build()
        .expect("runtime")
}

/// Run `f` in a fiber on worker 0 while worker 1 spins in a pinned fiber
/// (so nothing placed there starts, and nothing is stolen from worker 0),
/// then release worker 1 and return `f`'s result.
fn on_worker0<R: Send + 'static>(rt: &Runtime, f: impl FnOnce() -> R + Send + 'static) -> R {
    let release = Arc::new(AtomicBool::new(false));
    let spinner = occupy_worker1(rt, &release);
    let r = fiber::Builder::new().worker(0).spawn_on(rt, f).unwrap().join().unwrap();
    release.store(true, SeqCst);
    spinner.join().unwrap();
    r
}

/// What a child reports: its worker and its fiber id.
fn whoami() -> (usize, u64) {
    let f = fiber::current().expect("in a fiber");
    (f.worker, f.id)
}

#[test]
fn join_runs_the_unstarted_child_on_the_parents_worker() {
    let rt = rt(PolicyOptions::default());
    let release = Arc::new(AtomicBool::new(false));
    let spinner = occupy_worker1(&rt, &release);
    let parent = fiber::Builder::new()
        .worker(0)
        .spawn_on(&rt, || {
            // The order in which the two children start.
            let order = Arc::new(AtomicU32::new(0));
            let o = order.clone();
            let local = fiber::Builder::new().local(true).spawn(move || (whoami().0, o.fetch_add(1, SeqCst))).unwrap();
            let o = order.clone();
            let child = fiber::Builder::new()
                .name("reclaimed")
                .spawn(move || (whoami(), fiber::current().unwrap().name, o.fetch_add(1, SeqCst)))
                .unwrap();
            let id = child.id();
            let ((worker, seen_id), name, child_seq) = fiber::await_fiber(child);
            let (lw, local_seq) = fiber::await_fiber(local);
            (id, worker, seen_id, name, lw, (child_seq, local_seq))
        })
        .unwrap();
    let (id, worker, seen_id, name, local_worker, order) = parent.join().unwrap();
    release.store(true, SeqCst);
    spinner.join().unwrap();
    assert_eq!(worker, 0, "the child ran where its parent joined it");
    assert_eq!(seen_id, id, "the same fiber ran: fiber::current().id is the handle's id");
    assert_eq!(name.as_deref(), Some("reclaimed"));
    assert_eq!(local_worker, 0);
    // Run at once by the join: before the local child queued earlier in
    // the worker's wake slot (which a waiting parent would have let run
    // first, before its idle worker took the child back from worker 1).
    assert_eq!(order, (0, 1));
    // Both joins ran their child: the local one was still the next one
    // worker 0 would start (its wake slot).
    let s = rt.stats();
    assert_eq!((s.workers[0].reclaimed, s.workers[1].reclaimed), (2, 0), "{s:?}");
    assert_eq!(s.workers[0].parks, 0, "{s:?}");
}

/// A reclaimed child reclaims its own child in turn: both parents wait on
/// their worker (innermost resumed first) and nothing is lost (inside
/// `block_on`, a lost fiber is a deadlock report rather than a hang).
#[test]
fn nested_reclaims_resume_every_parent() {
    let rt = rt(PolicyOptions::default());
    let release = Arc::new(AtomicBool::new(false));
    let spinner = occupy_worker1(&rt, &release);
    let (outer, inner) = rt.block_on(|| {
        let parent = fiber::Builder::new()
            .worker(0)
            .spawn(|| {
                let local = fiber::Builder::new().local(true).spawn(|| ()).unwrap();
                let child = fiber::spawn(|| {
                    let local2 = fiber::Builder::new().local(true).spawn(|| ()).unwrap();
                    let grandchild = fiber::spawn(whoami);
                    let g = fiber::await_fiber(grandchild);
                    fiber::await_fiber(local2);
                    (whoami().0, g.0)
                });
                let r = fiber::await_fiber(child);
                fiber::await_fiber(local);
                r
            })
            .unwrap();
        fiber::await_fiber(parent)
    });
    release.store(true, SeqCst);
    spinner.join().unwrap();
    assert_eq!((outer, inner), (0, 0));
    // The child and the grandchild from worker 1's inbox, and the two
    // local children from worker 0's wake slot.
    assert_eq!(rt.stats().workers[0].reclaimed, 4);
}

#[test]
fn scope_end_runs_unstarted_children_too() {
    let rt = rt(PolicyOptions::default());
    let ran_on = on_worker0(&rt, || {
        let mut ran_on = [usize::MAX; 2];
        let local = fiber::Builder::new().local(true).spawn(|| ()).unwrap();
        fiber::scope(|s| {
            let (a, _) = ran_on.split_at_mut(1);
            s.spawn(move || a[0] = whoami().0);
        });
        fiber::await_fiber(local);
        ran_on[1] = whoami().0;
        ran_on
    });
    assert_eq!(ran_on, [0, 0]);
    // The scope's child, and then the local child (still in the wake slot).
    assert_eq!(rt.stats().workers[0].reclaimed, 2);
}

/// Only the spawner reclaims: a fiber joining a handle it was given waits
/// as before, and a plain thread never runs a fiber.
#[test]
fn other_joiners_wait_for_the_child() {
    let rt = rt(PolicyOptions::default());
    let release = Arc::new(AtomicBool::new(false));
    let spinner = occupy_worker1(&rt, &release);
    let r = release.clone();
    let out = fiber::Builder::new()
        .worker(0)
        .spawn_on(&rt, move || {
            let local = fiber::Builder::new().local(true).spawn(|| ()).unwrap();
            let child = fiber::spawn(whoami);
            let id = child.id();
            // Another fiber joins it; this one lets worker 1 go once that
            // joiner waits.
            let joiner = fiber::Builder::new().local(true).spawn(move || fiber::await_fiber(child)).unwrap();
            fiber::await_fiber(local);
            fiber::yield_now();
            r.store(true, SeqCst);
            (id, fiber::await_fiber(joiner))
        })
        .unwrap()
        .join()
        .unwrap();
    spinner.join().unwrap();
    let (id, (_, seen)) = out;
    assert_eq!(seen, id);
    // Only the spawner's own join of `local` ran its child.
    assert_eq!(rt.stats().workers.iter().map(|w| w.reclaimed).sum::<u64>(), 1);

    // A plain thread joining a fiber it spawned.
    let release = Arc::new(AtomicBool::new(false));
    let spinner = occupy_worker1(&rt, &release);
    let h = rt.spawn(whoami);
    release.store(true, SeqCst);
    h.join().unwrap();
    spinner.join().unwrap();
    // Still only that one.
    assert_eq!(rt.stats().workers.iter().map(|w| w.reclaimed).sum::<u64>(), 1);
}

/// With `decrement_workload` the NLH node workload returns to zero once
/// everything finished: the reclaim's second entry is counted in and out.
#[test]
fn workload_counts_return_to_zero() {
    let rt = rt(PolicyOptions { decrement_workload: true, ..PolicyOptions::default() });
    on_worker0(&rt, || {
        let local = fiber::Builder::new().local(true).spawn(|| ()).unwrap();
        fiber::await_fiber(fiber::spawn(|| ()));
        fiber::await_fiber(local);
    });
    // The remote child, and the local one.
    assert_eq!(rt.stats().workers[0].reclaimed, 2);
    // The surplus entry is dropped when worker 1 gets to its inbox.
    let t0 = Instant::now();
    while rt.stats().nodes[0].workload != 0 && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(rt.stats().nodes[0].workload, 0, "{:?}", rt.stats().nodes);
}

/// A join loop over children queued on the parent's own worker, with a
/// second worker that could steal them (kept busy here): each join finds
/// its child the next one the worker would start and runs it right away,
/// in spawn order, and the parent never parks.
#[test]
fn a_join_loop_runs_its_local_children_without_parking() {
    let rt = rt(PolicyOptions::default());
    let order = on_worker0(&rt, || {
        let seq = Arc::new(AtomicU32::new(0));
        let hs: Vec<_> = (0..10u32)
            .map(|i| {
                let seq = seq.clone();
                fiber::Builder::new().local(true).spawn(move || (i, seq.fetch_add(1, SeqCst), whoami().0)).unwrap()
            })
            .collect();
        hs.into_iter().map(fiber::await_fiber).collect::<Vec<_>>()
    });
    assert_eq!(order, (0..10u32).map(|i| (i, i, 0)).collect::<Vec<_>>());
    let s = rt.stats();
    assert_eq!(s.workers[0].reclaimed, 10, "{s:?}");
    assert_eq!(s.workers[0].parks, 0, "{s:?}");
}

/// A join loop that keeps finding its child next does not hold up the
/// other fibers waiting on its worker. Its take-backs count as wake-slot
/// picks: a fiber woken earlier into the ready queue (a rendezvous
/// receiver, which parks at once) runs after `SLOT_STREAK_MAX` (3) of
/// them; one in the yield queue (a buffered channel's receiver yields a
/// few times before it parks) runs at the next fairness pass, at most 61
/// picks later, two per iteration here. Before the bound, both ran after
/// the whole loop.
#[test]
fn a_join_loop_does_not_hold_up_waiting_fibers() {
    const LOOPS: u64 = 1000;
    for (cap, bound) in [(0, 3), (1, 31)] {
        let rt = rt(PolicyOptions::default());
        let seen = on_worker0(&rt, move || {
            let iter = Arc::new(AtomicU64::new(0));
            let (tx, rx) = numafiber::sync::channel::bounded::<()>(cap);
            let it = iter.clone();
            let receiver = fiber::Builder::new()
                .local(true)
                .spawn(move || {
                    rx.recv().unwrap();
                    it.load(SeqCst)
                })
                .unwrap();
            // The receiver runs (from the wake slot) and waits.
            fiber::yield_now();
            // A child takes the wake slot before the receiver is woken.
            let mut child = Some(fiber::Builder::new().local(true).spawn(|| ()).unwrap());
            tx.send(()).unwrap();
            for i in 0..LOOPS {
                fiber::await_fiber(child.take().unwrap());
                iter.store(i + 1, SeqCst);
                child = Some(fiber::Builder::new().local(true).spawn(|| ()).unwrap());
            }
            fiber::await_fiber(child.take().unwrap());
            fiber::await_fiber(receiver)
        });
        assert!(seen <= bound, "capacity {cap}: the waiting fiber ran only after {seen} of {LOOPS} iterations");
        let s = rt.stats();
        assert!(s.workers[0].reclaimed >= LOOPS * 9 / 10, "capacity {cap}: {s:?}");
    }
}

/// A join whose child is queued on the parent's own worker but is not the
/// next one that worker would start waits for it: the children still
/// start in spawn order, and nothing runs twice.
#[test]
fn a_join_out_of_spawn_order_waits() {
    let rt = rt(PolicyOptions::default());
    let order = on_worker0(&rt, || {
        let seq = Arc::new(AtomicU32::new(0));
        let mut hs: Vec<_> = (0..3u32)
            .map(|i| {
                let seq = seq.clone();
                fiber::Builder::new().local(true).spawn(move || (i, seq.fetch_add(1, SeqCst))).unwrap()
            })
            .collect();
        let last = fiber::await_fiber(hs.pop().unwrap());
        let mut out: Vec<_> = hs.into_iter().map(fiber::await_fiber).collect();
        out.push(last);
        out
    });
    assert_eq!(order, vec![(0, 0), (1, 1), (2, 2)]);
    let s = rt.stats();
    assert_eq!(s.workers[0].reclaimed, 0, "{s:?}");
    assert_eq!(s.workers[0].parks, 1, "{s:?}");
}

/// A 10-ary tree (11,111 fibers) on 2 workers, 20 rounds: joins race the
/// other worker starting the same children, steals move surplus entries,
/// leaves yield or sleep so that started children park. Every fiber runs
/// exactly once (a counter per fiber) and every sum is right.
#[test]
fn every_fiber_runs_once_while_reclaims_race_steals() {
    const LEVELS: u32 = 4;
    const FIBERS: usize = 11_111; // 10 + 100 + 1000 + 10000 + the root's 1
    fn tree(idx: usize, level: u32, runs: Arc<Vec<AtomicU32>>) -> u64 {
        runs[idx].fetch_add(1, Relaxed);
        if level == LEVELS {
            match idx % 7 {
                0 => fiber::yield_now(),
                1 => fiber::sleep(Duration::from_micros(50)),
                _ => {}
            }
            return idx as u64;
        }
        let hs: Vec<_> = (0..10)
            .map(|i| {
                let r = runs.clone();
                fiber::spawn(move || tree(idx * 10 + 1 + i, level + 1, r))
            })
            .collect();
        idx as u64 + hs.into_iter().map(fiber::await_fiber).sum::<u64>()
    }
    for opts in [PolicyOptions::default(), PolicyOptions { decrement_workload: true, ..PolicyOptions::default() }] {
        for policy in [Policy::Nlh, Policy::RandomSteal] {
            let rt = Runtime::builder()
                .workers(2)
                .topology(Topology::uniform(1, 2))
                .policy(policy)
                .policy_options(opts)
                .build()
                .unwrap();
            let reclaimed = AtomicU64::new(0);
            for _ in 0..20 {
                let runs: Arc<Vec<AtomicU32>> = Arc::new((0..FIBERS).map(|_| AtomicU32::new(0)).collect());
                let before = rt.stats();
                let r = runs.clone();
                let sum = rt.block_on(move || tree(0, 0, r));
                assert_eq!(sum, (FIBERS as u64 - 1) * FIBERS as u64 / 2, "{policy:?}");
                let bad: Vec<usize> = (0..FIBERS).filter(|&i| runs[i].load(Relaxed) != 1).collect();
                assert!(
                    bad.is_empty(),
                    "{policy:?}: fibers that did not run exactly once: {:?}",
                    &bad[..bad.len().min(10)]
                );
                let after = rt.stats();
                assert_eq!(after.completed - before.completed, after.spawned - before.spawned, "{policy:?}");
                let rec = |s: &numafiber::Stats| s.workers.iter().map(|w| w.reclaimed).sum::<u64>();
                reclaimed.fetch_add(rec(&after) - rec(&before), Relaxed);
            }
            eprintln!("{policy:?} {opts:?}: {} reclaimed joins over 20 trees", reclaimed.load(Relaxed));
        }
    }
}
