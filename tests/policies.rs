//! The thesis' schedulers applied by the runtime, shown in `Stats`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::policy::{PolicyOptions, Scheduler};
use numafiber::{fiber, Policy, Runtime, Topology};

fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

fn rt(topo: Topology, policy: Policy) -> Runtime {
    Runtime::builder().topology(topo).policy(policy).build().unwrap()
}

/// `n` busy fibers started on `worker`'s own deque (stealable).
fn load_worker(rt: &Runtime, worker: usize, n: usize, each: Duration) -> fiber::JoinHandle<()> {
    fiber::Builder::new()
        .worker(worker)
        .spawn_on(rt, move || {
            let hs: Vec<_> =
                (0..n).map(|_| fiber::Builder::new().local(true).spawn(move || spin(each)).unwrap()).collect();
            fiber::when_all(hs);
        })
        .unwrap()
}

#[test]
fn round_robin_never_steals() {
    let rt = rt(Topology::uniform(2, 1), Policy::RoundRobin);
    load_worker(&rt, 0, 40, Duration::from_micros(500)).join().unwrap();
    let s = rt.stats();
    assert_eq!((s.local_steals, s.remote_steals), (0, 0), "{s:?}");
    assert_eq!(s.failed_steals, 0, "RoundRobin does not even try");
    assert_eq!(s.workers[1].executed, 0, "worker 1 got nothing to run: {:?}", s.workers);
}

#[test]
fn stealing_policies_take_work_from_a_loaded_worker() {
    for policy in [Policy::RandomSteal, Policy::NumaSteal, Policy::LoadSteal, Policy::HybridSteal, Policy::Nlh] {
        let rt = rt(Topology::uniform(2, 1), policy);
        load_worker(&rt, 0, 40, Duration::from_micros(500)).join().unwrap();
        let s = rt.stats();
        assert!(s.remote_steals > 0, "{policy:?}: {s:?}");
        assert!(s.workers[1].executed > 0, "{policy:?}: worker 1 ran stolen fibers: {:?}", s.workers);
        assert_eq!(s.nodes[1].remote_steals, s.workers[1].remote_steals);
    }
}

#[test]
fn numa_steal_takes_local_work_before_remote() {
    // Two nodes of two workers; work on one worker of each node. The idle
    // worker of each node should rob its neighbour before the other node;
    // remote steals only happen once a node's own queues ran dry (the
    // tail). RandomSteal on the same setup picks a remote victim two times
    // out of three.
    let ratio = |policy| {
        let rt = rt(Topology::uniform(2, 2), policy);
        let a = load_worker(&rt, 0, 200, Duration::from_micros(200));
        let b = load_worker(&rt, 2, 200, Duration::from_micros(200));
        a.join().unwrap();
        b.join().unwrap();
        let s = rt.stats();
        eprintln!("{policy:?}: local {} remote {} failed {}", s.local_steals, s.remote_steals, s.failed_steals);
        assert_eq!(
            s.local_steals + s.remote_steals,
            s.nodes.iter().map(|n| n.local_steals + n.remote_steals).sum::<u64>()
        );
        (s.local_steals, s.remote_steals)
    };
    // Three runs each, summed: single runs on two shared cores are noisy.
    let sum = |p| (0..3).map(|_| ratio(p)).fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    let (nl, nr) = sum(Policy::NumaSteal);
    let (rl, rr) = sum(Policy::RandomSteal);
    let numa = nl as f64 / (nl + nr).max(1) as f64;
    let random = rl as f64 / (rl + rr).max(1) as f64;
    eprintln!("local share of steals: NumaSteal {numa:.2}, RandomSteal {random:.2}");
    assert!(nl > nr, "NumaSteal: local steals must dominate ({nl} local, {nr} remote)");
    assert!(numa > random, "NumaSteal must steal locally more often than RandomSteal ({numa:.2} vs {random:.2})");
}

#[test]
fn nlh_keeps_spawns_local_until_the_local_node_reaches_the_median() {
    let rt = Arc::new(rt(Topology::uniform(4, 1), Policy::Nlh));
    // Preload nodes 1..3 with three placements each (fibers pinned there).
    for w in 1..4 {
        for _ in 0..3 {
            fiber::Builder::new().worker(w).spawn_on(&rt, || ()).unwrap().join().unwrap();
        }
    }
    let rt2 = rt.clone();
    // A spawner on node 0 (itself one placement there): workloads [1,3,3,3].
    let seq = fiber::Builder::new()
        .worker(0)
        .spawn_on(&rt, move || {
            let mut seq = Vec::new();
            let mut hs = Vec::new();
            for _ in 0..6 {
                let before: Vec<u64> = rt2.stats().nodes.iter().map(|n| n.placements).collect();
                hs.push(fiber::spawn(|| ()));
                let after: Vec<u64> = rt2.stats().nodes.iter().map(|n| n.placements).collect();
                let grew: Vec<usize> = (0..4).filter(|&n| after[n] == before[n] + 1).collect();
                assert_eq!(grew.len(), 1, "{before:?} -> {after:?}");
                seq.push(grew[0]);
            }
            fiber::when_all(hs);
            seq
        })
        .unwrap()
        .join()
        .unwrap();
    // Below the median (3) -> local; at the median, the least-loaded nodes
    // tie and the local one wins; above it -> the least-loaded node.
    assert_eq!(seq, vec![0, 0, 0, 1, 2, 3]);
    // The same sequence from the pure policy, fed the same history.
    let topo = Topology::uniform(4, 1);
    let sched = Scheduler::new(Policy::Nlh, PolicyOptions::default(), vec![0, 1, 2, 3], &topo);
    for w in [1, 1, 1, 2, 2, 2, 3, 3, 3, 0] {
        sched.record_placement(w);
    }
    let replay: Vec<usize> = (0..6).map(|_| sched.place(Some(0), &[0usize; 4])).collect();
    assert_eq!(replay, seq);
    let s = rt.stats();
    assert_eq!(s.nodes.iter().map(|n| n.workload).collect::<Vec<_>>(), vec![4, 4, 4, 4]);
}
