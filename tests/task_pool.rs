//! Recycling of finished fibers' control blocks (`runtime::task::pool`):
//! reuse is counted (`WorkerStats::tasks_reused`), and with the pools in
//! play every fiber still runs exactly once, with its own id, name and
//! pinning, through reclaim, panics, detached handles and shutdown.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, Once};
use std::time::{Duration, Instant};

use numafiber::{fiber, Policy, Runtime, Topology};

mod common;
use common::occupy_worker1;

const PANIC_MSG: &str = "task_pool test: planned panic";

/// Keep the planned panics quiet; report every other one as usual.
fn quiet_planned_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<&str>() != Some(&PANIC_MSG) {
                default(info);
            }
        }));
    });
}

fn rt(workers: usize) -> Runtime {
    Runtime::builder().workers(workers).topology(Topology::uniform(1, workers)).build().expect("runtime")
}

fn reused(rt: &Runtime) -> u64 {
    rt.stats().workers.iter().map(|w| w.tasks_reused).sum()
}

/// On one worker, spawn then join: the joiner drops the child's last
/// reference, so every child after the first reuses its predecessor's
/// block, and each still has its own id and name.
#[test]
fn spawn_join_on_one_worker_reuses_every_block_after_the_first() {
    const N: usize = 1000;
    let rt = rt(1);
    let ids = rt.block_on(|| {
        let mut ids = Vec::with_capacity(N);
        for i in 0..N {
            let b = if i % 2 == 0 { fiber::Builder::new().name(format!("c{i}")) } else { fiber::Builder::new() };
            let h = b
                .spawn(move || {
                    let me = fiber::current().unwrap();
                    (me.id, me.name)
                })
                .unwrap();
            let hid = h.id();
            let (id, name) = h.join().unwrap();
            assert_eq!(id, hid, "child {i}: the handle's id is the running fiber's");
            assert_eq!(name, (i % 2 == 0).then(|| format!("c{i}")), "child {i}: a reused block keeps no old name");
            ids.push(id);
        }
        ids
    });
    assert_eq!(ids.iter().collect::<HashSet<_>>().len(), N, "fiber ids are never reused");
    let s = rt.stats();
    assert_eq!(s.workers[0].spawned, N as u64);
    assert_eq!(s.workers[0].tasks_reused, N as u64 - 1, "{s:?}");
}

/// What one child of `tree` does, by its index.
#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    Panics,
    Named,
    Pinned,
    Detached,
    Yields,
}

fn kind(i: usize) -> Kind {
    match i % 10 {
        0 => Kind::Panics,
        1 | 5 => Kind::Named,
        2 => Kind::Pinned,
        3 | 7 => Kind::Detached,
        4 => Kind::Yields,
        _ => Kind::Plain,
    }
}

/// `parents` fibers, each spawning and joining `children` children of
/// every kind; every child counts its runs in `runs[i]` and records its
/// id. Returns the sum of the joined results and the number of panics
/// seen by the joins.
fn tree(parents: usize, children: usize, runs: &Arc<Vec<AtomicU8>>, ids: &Arc<Mutex<Vec<u64>>>) -> (u64, usize) {
    let hs: Vec<_> = (0..parents)
        .map(|p| {
            let (runs, ids) = (runs.clone(), ids.clone());
            fiber::spawn(move || {
                let mut sum = 0u64;
                let mut panics = 0usize;
                let mut joins = Vec::new();
                for c in 0..children {
                    let i = p * children + c;
                    let (runs, ids) = (runs.clone(), ids.clone());
                    let body = move || {
                        runs[i].fetch_add(1, SeqCst);
                        let me = fiber::current().unwrap();
                        ids.lock().unwrap().push(me.id);
                        match kind(i) {
                            Kind::Panics => std::panic::panic_any(PANIC_MSG),
                            Kind::Named => assert_eq!(me.name, Some(format!("f{i}")), "fiber {i}'s name"),
                            Kind::Pinned => {
                                fiber::yield_now();
                                assert_eq!(fiber::current().unwrap().worker, me.worker, "pinned fiber {i} moved");
                            }
                            Kind::Yields => fiber::yield_now(),
                            Kind::Plain | Kind::Detached => {}
                        }
                        if kind(i) != Kind::Named {
                            assert_eq!(me.name, None, "fiber {i} has no name");
                        }
                        i as u64
                    };
                    let h = match kind(i) {
                        Kind::Named => fiber::Builder::new().name(format!("f{i}")).spawn(body).unwrap(),
                        Kind::Pinned => fiber::spawn_pinned(body),
                        _ => fiber::spawn(body),
                    };
                    if kind(i) == Kind::Detached {
                        drop(h); // runs anyway; its queue entry holds the last reference
                    } else {
                        joins.push((i, h));
                    }
                    // Join in small groups, as skynet does (reclaim
                    // happens when a child is still unstarted).
                    if joins.len() == 4 || c + 1 == children {
                        for (i, h) in joins.drain(..) {
                            let id = h.id();
                            match h.join() {
                                Ok(v) => {
                                    assert_eq!(v, i as u64);
                                    sum += v;
                                }
                                Err(e) => {
                                    assert!(e.is_panic() && kind(i) == Kind::Panics, "fiber {i} (id {id}): {e}");
                                    panics += 1;
                                }
                            }
                        }
                    }
                }
                (sum, panics)
            })
        })
        .collect();
    hs.into_iter().map(fiber::await_fiber).fold((0, 0), |(s, p), (s2, p2)| (s + s2, p + p2))
}

fn tree_counts_every_fiber(workers: usize) {
    quiet_planned_panics();
    const PARENTS: usize = 40;
    const CHILDREN: usize = 50;
    const N: usize = PARENTS * CHILDREN;
    const ROUNDS: usize = 3;
    let rt = rt(workers);
    for round in 0..ROUNDS {
        let runs: Arc<Vec<AtomicU8>> = Arc::new((0..N).map(|_| AtomicU8::new(0)).collect());
        let ids = Arc::new(Mutex::new(Vec::with_capacity(N)));
        let (r, i) = (runs.clone(), ids.clone());
        let (sum, panics) = rt.block_on(move || {
            let out = tree(PARENTS, CHILDREN, &r, &i);
            // The detached children may still run: wait for them (a lost
            // one fails here instead of hanging).
            let t0 = Instant::now();
            while r.iter().any(|x| x.load(SeqCst) == 0) && t0.elapsed() < Duration::from_secs(60) {
                fiber::yield_now();
            }
            out
        });
        for (i, x) in runs.iter().enumerate() {
            assert_eq!(x.load(SeqCst), 1, "round {round}: fiber {i} ran {} times", x.load(SeqCst));
        }
        let want_sum: u64 =
            (0..N).filter(|&i| !matches!(kind(i), Kind::Panics | Kind::Detached)).map(|i| i as u64).sum();
        assert_eq!(sum, want_sum, "round {round}");
        assert_eq!(panics, (0..N).filter(|&i| kind(i) == Kind::Panics).count(), "round {round}");
        let ids = ids.lock().unwrap();
        assert_eq!(ids.iter().collect::<HashSet<_>>().len(), N, "round {round}: ids are unique");
    }
    let s = rt.stats();
    let spawned: u64 = s.workers.iter().map(|w| w.spawned).sum();
    // Children are spawned by fibers on workers (the parents by block_on's
    // root fiber too); reuse can never exceed that.
    assert_eq!(spawned, (ROUNDS * (N + PARENTS)) as u64, "{s:?}");
    let r = reused(&rt);
    assert!(r > 0 && r <= spawned, "tasks_reused {r} of {spawned} spawns: {s:?}");
}

#[test]
fn tree_with_every_kind_of_fiber_counts_each_once_on_one_worker() {
    tree_counts_every_fiber(1);
}

#[test]
fn tree_with_every_kind_of_fiber_counts_each_once_on_two_workers() {
    tree_counts_every_fiber(2);
}

/// Reclaim with warm pools: a parent on worker 0 joins children placed on
/// the busy worker 1, runs them itself, and their surplus entries stay in
/// worker 1's inbox until it is released (then dropped, into a pool).
/// Every child runs exactly once, on worker 0, with its own id.
#[test]
fn reclaimed_children_with_warm_pools_run_once() {
    const ROUNDS: usize = 50;
    let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).policy(Policy::Nlh).build().unwrap();
    // Warm both pools.
    rt.block_on(|| {
        for _ in 0..100 {
            fiber::spawn(|| ()).join().unwrap();
        }
    });
    let release = Arc::new(AtomicBool::new(false));
    let spinner = occupy_worker1(&rt, &release);
    let runs = Arc::new(AtomicUsize::new(0));
    let r = runs.clone();
    let out = fiber::Builder::new()
        .worker(0)
        .spawn_on(&rt, move || {
            let mut out = Vec::new();
            for _ in 0..ROUNDS {
                // One local child first makes worker 1 the shortest queue
                // for the next (tests/reclaim.rs).
                let local = fiber::Builder::new().local(true).spawn(|| ()).unwrap();
                let r = r.clone();
                let child = fiber::spawn(move || {
                    r.fetch_add(1, SeqCst);
                    let me = fiber::current().unwrap();
                    (me.worker, me.id)
                });
                let id = child.id();
                out.push((id, fiber::await_fiber(child)));
                fiber::await_fiber(local);
            }
            out
        })
        .unwrap()
        .join()
        .unwrap();
    release.store(true, SeqCst);
    spinner.join().unwrap();
    assert_eq!(runs.load(SeqCst), ROUNDS);
    for (id, (worker, seen)) in &out {
        assert_eq!(id, seen, "the handle's fiber ran");
        assert_eq!(*worker, 0, "fiber {id}: the joiner ran it");
    }
    assert_eq!(out.iter().map(|(id, _)| id).collect::<HashSet<_>>().len(), ROUNDS);
    let s = rt.stats();
    assert!(s.workers[0].reclaimed >= 1, "{s:?}");
    // The pools still work after the surplus entries were dropped.
    let n = rt.block_on(|| (0..100u64).map(|i| fiber::spawn(move || i).join().unwrap()).sum::<u64>());
    assert_eq!(n, 4950);
}

/// Counts its drops.
struct Guard(Arc<AtomicUsize>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Shutdown with warm pools, fibers parked forever and fibers never
/// started: each fiber either ran or was cancelled (its handle says so),
/// and each closure's captures are dropped exactly once.
#[test]
fn shutdown_with_warm_pools_cancels_each_unfinished_fiber_once() {
    const PARKED: usize = 100;
    const QUEUED: usize = 200;
    let rt = rt(2);
    rt.block_on(|| {
        for _ in 0..500 {
            fiber::spawn(|| ()).join().unwrap();
        }
    });
    assert!(reused(&rt) > 0);
    let dropped = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    let mut parked = Vec::new();
    for _ in 0..PARKED {
        let (g, s) = (Guard(dropped.clone()), started.clone());
        parked.push(rt.spawn(move || {
            let _g = g;
            s.fetch_add(1, SeqCst);
            fiber::sleep(Duration::from_secs(3600));
        }));
    }
    let t0 = Instant::now();
    while started.load(SeqCst) < PARKED && t0.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(started.load(SeqCst), PARKED);
    // Both workers busy in spinners while fibers queue up behind them;
    // released right before the shutdown, so some of them may run first.
    let release = Arc::new(AtomicBool::new(false));
    let mut spinners = Vec::new();
    for w in 0..2 {
        let r = release.clone();
        let go = Arc::new(AtomicBool::new(false));
        let g2 = go.clone();
        spinners.push(
            fiber::Builder::new()
                .worker(w)
                .spawn_on(&rt, move || {
                    g2.store(true, SeqCst);
                    let t0 = Instant::now();
                    while !r.load(SeqCst) && t0.elapsed() < Duration::from_secs(120) {
                        std::hint::spin_loop();
                    }
                })
                .unwrap(),
        );
        while !go.load(SeqCst) {
            std::thread::yield_now();
        }
    }
    let ran = Arc::new(AtomicUsize::new(0));
    let queued: Vec<_> = (0..QUEUED)
        .map(|_| {
            let (g, r) = (Guard(dropped.clone()), ran.clone());
            rt.spawn(move || {
                let _g = g;
                r.fetch_add(1, SeqCst);
            })
        })
        .collect();
    release.store(true, SeqCst);
    drop(rt);
    assert_eq!(dropped.load(SeqCst), PARKED + QUEUED, "every closure's captures dropped once");
    for h in parked {
        assert!(h.join().unwrap_err().is_cancelled());
    }
    let mut cancelled = 0;
    for h in queued {
        match h.join() {
            Ok(()) => {}
            Err(e) => {
                assert!(e.is_cancelled(), "{e}");
                cancelled += 1;
            }
        }
    }
    assert_eq!(ran.load(SeqCst) + cancelled, QUEUED, "each queued fiber ran or was cancelled, once");
    for s in spinners {
        s.join().unwrap();
    }
}
