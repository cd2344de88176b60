//! NABBIT task graphs: correctness, exactly-once, edge order, errors,
//! nested parallelism, and the two paper workloads against serial.

#[path = "../examples/graph_common/dag.rs"]
mod dag;
#[path = "../examples/graph_common/sw.rs"]
mod sw;

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Barrier};

use numafiber::graph::{execute_serial, DynamicExecutor, DynamicGraph, GraphErrorKind, StaticGraph, Status};
use numafiber::{fiber, Policy, Runtime};

fn rt(policy: Policy) -> Runtime {
    Runtime::builder().workers(2).policy(policy).build().unwrap()
}

/// Per-key counters and timestamps: init/compute calls, start and end of
/// each compute on a global clock.
struct Probe {
    inits: Vec<AtomicUsize>,
    computes: Vec<AtomicUsize>,
    start: Vec<AtomicUsize>,
    end: Vec<AtomicUsize>,
    clock: AtomicUsize,
}

impl Probe {
    fn new(n: usize) -> Arc<Probe> {
        let z = || (0..n).map(|_| AtomicUsize::new(0)).collect::<Vec<_>>();
        Arc::new(Probe { inits: z(), computes: z(), start: z(), end: z(), clock: AtomicUsize::new(1) })
    }
    fn compute(&self, k: usize, f: impl FnOnce() -> u64) -> u64 {
        self.computes[k].fetch_add(1, SeqCst);
        self.start[k].store(self.clock.fetch_add(1, SeqCst), SeqCst);
        if k % 7 == 0 {
            fiber::yield_now(); // let other workers interleave
        }
        let v = f();
        self.end[k].store(self.clock.fetch_add(1, SeqCst), SeqCst);
        v
    }
    /// Every existing node computed once, every edge respected.
    fn check(&self, d: &dag::Dag, with_init: bool) {
        for (k, deps) in d.deps.iter().enumerate() {
            match deps {
                None => assert_eq!(self.computes[k].load(SeqCst), 0, "key {k} is not in the graph"),
                Some(deps) => {
                    assert_eq!(self.computes[k].load(SeqCst), 1, "compute of key {k}");
                    if with_init {
                        assert_eq!(self.inits[k].load(SeqCst), 1, "init of key {k}");
                    }
                    for &x in deps {
                        assert!(
                            self.end[x as usize].load(SeqCst) < self.start[k].load(SeqCst),
                            "key {k} started before its predecessor {x} finished"
                        );
                    }
                }
            }
        }
    }
}

fn static_probe_graph(d: &dag::Dag, probe: &Arc<Probe>) -> (StaticGraph<u64>, Vec<Option<numafiber::graph::NodeId>>) {
    let mut g = StaticGraph::new();
    let mut ids = vec![None; d.u + 1];
    for (k, deps) in d.deps.iter().enumerate() {
        if deps.is_some() {
            let p = probe.clone();
            ids[k] = Some(
                g.add_node(move |inp| p.compute(k, || dag::node_value(k as u64, 3, false, inp.values().copied()))),
            );
        }
    }
    for (k, deps) in d.deps.iter().enumerate() {
        for &x in deps.iter().flatten() {
            g.add_dep(ids[k].unwrap(), ids[x as usize].unwrap()).unwrap();
        }
    }
    (g, ids)
}

#[test]
fn static_random_dags_exactly_once_in_edge_order() {
    for policy in [Policy::RandomSteal, Policy::Nlh] {
        let rt = rt(policy);
        for seed in 0..20 {
            let d = dag::Dag::generate(6, 400, seed);
            let probe = Probe::new(d.u + 1);
            let (g, ids) = static_probe_graph(&d, &probe);
            let out = g.execute_on(&rt).unwrap();
            probe.check(&d, false);
            let (gs, _) = dag::build_static(&d, 3, false);
            assert_eq!(out, gs.execute_serial().unwrap(), "seed {seed}");
            assert_eq!(
                out[ids[0].unwrap()],
                *execute_serial(&dag::DagGraph { deps: Arc::new(d.deps.clone()), w: 3, par: false }, 0).unwrap().sink()
            );
        }
    }
}

/// A random DAG as a dynamic graph with probes.
struct ProbeDag {
    deps: Arc<Vec<Option<Vec<u32>>>>,
    probe: Arc<Probe>,
}

impl DynamicGraph for ProbeDag {
    type Key = u32;
    type Output = u64;
    fn init(&self, k: &u32, deps: &mut Vec<u32>) {
        self.probe.inits[*k as usize].fetch_add(1, SeqCst);
        if *k % 5 == 0 {
            fiber::yield_now();
        }
        deps.extend(self.deps[*k as usize].iter().flatten());
    }
    fn compute(&self, k: &u32, preds: &[(u32, &u64)]) -> u64 {
        self.probe.compute(*k as usize, || dag::node_value(*k as u64, 3, false, preds.iter().map(|(_, v)| **v)))
    }
}

#[test]
fn dynamic_random_dags_exactly_once_in_edge_order() {
    let rt = rt(Policy::RandomSteal);
    for seed in 0..20 {
        let d = dag::Dag::generate(6, 400, 100 + seed);
        let probe = Probe::new(d.u + 1);
        let deps = Arc::new(d.deps.clone());
        let ex = DynamicExecutor::new(ProbeDag { deps: deps.clone(), probe: probe.clone() });
        let v = *ex.execute_on(&rt, 0).unwrap();
        probe.check(&d, true);
        assert_eq!(ex.len(), d.nodes());
        // At least Computed: the fiber that released the waiter marks the
        // sink Completed after it has notified every waiter (a moment later).
        assert!(ex.status(&0) >= Status::Computed, "{:?}", ex.status(&0));
        let serial = execute_serial(&dag::DagGraph { deps, w: 3, par: false }, 0).unwrap();
        assert_eq!(v, *serial.sink(), "seed {seed}");
        assert_eq!(serial.len(), d.nodes());
    }
}

#[test]
fn dynamic_concurrent_overlapping_executions_run_each_key_once() {
    let rt = Arc::new(rt(Policy::RandomSteal));
    for seed in 0..10 {
        let d = dag::Dag::generate(5, 600, 200 + seed);
        let probe = Probe::new(d.u + 1);
        let deps = Arc::new(d.deps.clone());
        let ex = DynamicExecutor::new(ProbeDag { deps: deps.clone(), probe: probe.clone() });
        // Sinks: 0 and some of its predecessors (overlapping subgraphs).
        let sinks: Vec<u32> = std::iter::once(0).chain(d.deps[0].clone().unwrap()).take(4).collect();
        let serial = execute_serial(&dag::DagGraph { deps, w: 3, par: false }, 0).unwrap();
        // Four fibers and two plain threads at once.
        let barrier = Arc::new(Barrier::new(2));
        let threads: Vec<_> = (0..2)
            .map(|t| {
                let (ex, rt, b, sink) = (ex.clone(), rt.clone(), barrier.clone(), sinks[t % sinks.len()]);
                std::thread::spawn(move || {
                    b.wait();
                    *ex.execute_on(&rt, sink).unwrap()
                })
            })
            .collect();
        let ex2 = ex.clone();
        let sinks2 = sinks.clone();
        let fiber_vals = rt.block_on(move || {
            let hs: Vec<_> = sinks2
                .iter()
                .map(|&s| {
                    let ex = ex2.clone();
                    fiber::spawn(move || (s, *ex.execute(s).unwrap()))
                })
                .collect();
            fiber::when_all(hs)
        });
        for t in threads {
            t.join().unwrap();
        }
        for (s, v) in fiber_vals {
            assert_eq!(Some(&v), serial.get(&s), "sink {s}");
        }
        probe.check(&d, true);
        // A later call reuses the nodes: no new init or compute.
        assert_eq!(*ex.execute_on(&rt, 0).unwrap(), *serial.sink());
        probe.check(&d, true);
    }
}

#[test]
fn static_errors_are_typed_and_found_before_running() {
    let ran = Arc::new(AtomicUsize::new(0));
    let mut g = StaticGraph::<()>::new();
    let ids: Vec<_> = (0..4)
        .map(|_| {
            let r = ran.clone();
            g.add_node(move |_| {
                r.fetch_add(1, SeqCst);
            })
        })
        .collect();
    let e = g.add_dep(ids[0], ids[0]).unwrap_err();
    assert_eq!(e.kind(), &GraphErrorKind::SelfDependency { node: ids[0] });
    assert!(e.to_string().contains("remove this add_dep"));
    let mut other = StaticGraph::<()>::new();
    let ghost = (0..9).map(|_| other.add_node(|_| ())).last().unwrap();
    assert!(matches!(g.add_dep(ids[0], ghost).unwrap_err().kind(), GraphErrorKind::UnknownNode { nodes: 4, .. }));
    // 0 -> 1 -> 2 -> 0 (and 3 depends on 2).
    g.add_dep(ids[1], ids[0]).unwrap();
    g.add_dep(ids[2], ids[1]).unwrap();
    g.add_dep(ids[0], ids[2]).unwrap();
    g.add_dep(ids[3], ids[2]).unwrap();
    let rt = rt(Policy::RandomSteal);
    let e = g.execute_on(&rt).unwrap_err();
    match e.kind() {
        GraphErrorKind::Cycle { cycle } => {
            let mut c: Vec<usize> = cycle.iter().map(|n| n.index()).collect();
            c.sort();
            assert_eq!(c, vec![0, 1, 2]);
        }
        k => panic!("expected a cycle, got {k:?}"),
    }
    assert!(g.execute_serial().is_err());
    assert_eq!(ran.load(SeqCst), 0, "nothing runs when the graph has a cycle");
    let _: &dyn std::error::Error = &e;
    // Outside a fiber, execute() says how to call it.
    let e = StaticGraph::<u8>::new().execute().unwrap_err();
    assert_eq!(e.kind(), &GraphErrorKind::NoRuntime);
    assert!(e.to_string().contains("execute_on"));
}

struct Cyclic;
impl DynamicGraph for Cyclic {
    type Key = u32;
    type Output = ();
    /// 0 <- 1 <- 2 <- 3 <- 1 (a cycle behind the sink), 10 <- 10.
    fn init(&self, k: &u32, deps: &mut Vec<u32>) {
        match k {
            0 => deps.push(1),
            1 => deps.push(2),
            2 => deps.push(3),
            3 => deps.push(1),
            10 => deps.push(10),
            _ => {}
        }
    }
    fn compute(&self, _: &u32, _: &[(u32, &())]) {}
}

#[test]
fn dynamic_cycles_are_errors_not_hangs() {
    let rt = rt(Policy::RandomSteal);
    let ex = DynamicExecutor::new(Cyclic);
    let e = ex.execute_on(&rt, 0).unwrap_err();
    assert!(matches!(e.kind(), GraphErrorKind::DynamicCycle { stuck: 4 }), "{e}");
    // Asking again finds the same stuck nodes.
    assert!(matches!(ex.execute_on(&rt, 2).unwrap_err().kind(), GraphErrorKind::DynamicCycle { .. }));
    assert!(matches!(ex.execute_on(&rt, 10).unwrap_err().kind(), GraphErrorKind::DynamicCycle { stuck: 1 }));
    assert!(matches!(execute_serial(&Cyclic, 0).unwrap_err().kind(), GraphErrorKind::DynamicCycle { .. }));
    // Unrelated keys still work.
    assert!(ex.execute_on(&rt, 7).is_ok());
}

#[test]
fn panicking_compute_is_a_typed_error() {
    let rt = rt(Policy::RandomSteal);
    let mut g = StaticGraph::new();
    let a = g.add_node(|_| 1);
    let b = g.add_node(|_| -> i32 { panic!("bad block") });
    let c = g.add_node(|inp| inp.values().sum());
    g.add_dep(c, a).unwrap();
    g.add_dep(c, b).unwrap();
    let e = g.execute_on(&rt).unwrap_err();
    assert!(matches!(e.kind(), GraphErrorKind::ComputePanicked { message, .. } if message == "bad block"));

    struct Boom;
    impl DynamicGraph for Boom {
        type Key = u8;
        type Output = u8;
        fn init(&self, k: &u8, d: &mut Vec<u8>) {
            if *k < 3 {
                d.push(k + 1)
            }
        }
        fn compute(&self, k: &u8, _: &[(u8, &u8)]) -> u8 {
            assert!(*k != 2, "key two");
            *k
        }
    }
    let ex = DynamicExecutor::new(Boom);
    let e = ex.execute_on(&rt, 0).unwrap_err();
    assert!(matches!(e.kind(), GraphErrorKind::ComputePanicked { message, .. } if message == "key two"), "{e}");
    assert_eq!(*ex.execute_on(&rt, 3).unwrap(), 3);
}

#[test]
fn nested_parallelism_inside_computes() {
    let rt = rt(Policy::RandomSteal);
    let d = dag::Dag::generate(4, 200, 7);
    let (gp, ids) = dag::build_static(&d, 300, true);
    let (gs, _) = dag::build_static(&d, 300, false);
    let before = rt.stats().spawned;
    let par = gp.execute_on(&rt).unwrap();
    // fiber::join runs its second closure inline unless a thief takes it,
    // so nested joins create fibers only when stolen: check the graph ran
    // as fibers and the nested results are right.
    assert!(rt.stats().spawned > before, "the graph ran on fibers");
    assert_eq!(par, gs.execute_serial().unwrap());
    let deps = Arc::new(d.deps.clone());
    let ex = DynamicExecutor::new(dag::DagGraph { deps: deps.clone(), w: 300, par: true });
    assert_eq!(*ex.execute_on(&rt, 0).unwrap(), par[ids[0].unwrap()]);
    // spawn + scope inside a compute.
    let mut g = StaticGraph::new();
    let a = g.add_node(|_| fiber::await_fiber(fiber::spawn(|| 20u64)));
    let b = g.add_node(|inp| {
        let base = *inp.get(0).1;
        let mut parts = [0u64; 2];
        fiber::scope(|s| {
            let (l, r) = parts.split_at_mut(1);
            s.spawn(|| l[0] = base + 1);
            s.spawn(|| r[0] = base + 1);
        });
        parts.iter().sum()
    });
    g.add_dep(b, a).unwrap();
    assert_eq!(g.execute_on(&rt).unwrap()[b], 42);
}

#[test]
fn waiting_nodes_hold_no_fibers_and_long_chains_do_not_recurse() {
    let rt = rt(Policy::RandomSteal);
    // 20 000 nodes wait on one slow source: they are counters, not fibers.
    let mut g = StaticGraph::new();
    let src = g.add_node(|_| {
        fiber::sleep(std::time::Duration::from_millis(20));
        1u64
    });
    for _ in 0..20_000 {
        let x = g.add_node(|inp| inp.get(0).1 + 1);
        g.add_dep(x, src).unwrap();
    }
    let before = rt.stats().spawned;
    let out = g.execute_on(&rt).unwrap();
    assert!(out[1..].iter().all(|&v| v == 2));
    let spawned = rt.stats().spawned - before;
    assert!(spawned < 2_000, "{spawned} fibers for 20 001 nodes");
    // A chain of 300 000 nodes (static) and 100 000 keys (dynamic).
    let mut g = StaticGraph::new();
    let mut prev = g.add_node(|_| 0u64);
    for _ in 0..300_000 {
        let x = g.add_node(|inp| inp.get(0).1 + 1);
        g.add_dep(x, prev).unwrap();
        prev = x;
    }
    assert_eq!(g.execute_on(&rt).unwrap()[prev], 300_000);
    struct Chain;
    impl DynamicGraph for Chain {
        type Key = u32;
        type Output = u32;
        fn init(&self, k: &u32, d: &mut Vec<u32>) {
            if *k > 0 {
                d.push(k - 1)
            }
        }
        fn compute(&self, _: &u32, p: &[(u32, &u32)]) -> u32 {
            p.first().map_or(0, |(_, v)| **v + 1)
        }
    }
    assert_eq!(*DynamicExecutor::new(Chain).execute_on(&rt, 100_000).unwrap(), 100_000);
}

#[test]
fn smith_waterman_equals_serial_on_random_inputs() {
    let rt = rt(Policy::RandomSteal);
    for (n, seed) in [(1, 1), (17, 2), (40, 3), (64, 4)] {
        let p = Arc::new(sw::Problem::random(n, seed));
        let reference = sw::reference(&p);
        for b in [1, 4, 5, 16] {
            assert_eq!(sw::serial(&p, b).to_matrix(), reference, "serial n={n} b={b}");
            let p2 = p.clone();
            let results = rt.block_on(move || {
                vec![
                    ("static", sw::nabbit_static(&p2, b).to_matrix()),
                    ("dynamic", sw::nabbit_dynamic(&p2, b).to_matrix()),
                    ("wavefront", sw::wavefront(&p2, b).to_matrix()),
                    ("dc2", sw::divide_conquer(&p2, b, 2).to_matrix()),
                    ("dc5", sw::divide_conquer(&p2, b, 5).to_matrix()),
                ]
            });
            for (name, m) in results {
                assert_eq!(m, reference, "{name} n={n} b={b}");
            }
        }
    }
}

#[test]
fn static_graph_reruns_and_round_robin_still_correct() {
    let d = dag::Dag::generate(8, 2000, 99);
    let (g, _) = dag::build_static(&d, 10, false);
    let serial = g.execute_serial().unwrap();
    let rt = Runtime::builder().workers(2).policy(Policy::RoundRobin).build().unwrap();
    for _ in 0..3 {
        assert_eq!(g.execute_on(&rt).unwrap(), serial);
    }
    let empty = StaticGraph::<u8>::new();
    assert!(empty.execute_on(&rt).unwrap().is_empty());
}
