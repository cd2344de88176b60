//! The policy simulator: determinism, conservation, the policy calls come
//! from the shared `Scheduler` (replayed call by call), scale.

use std::time::Instant;

#[path = "../examples/thesis_bench/bench.rs"]
#[allow(dead_code)]
mod bench;
#[path = "../examples/simulate/cli.rs"]
#[allow(dead_code)]
mod cli;

use numafiber::policy::{Scheduler, ThiefState};
use numafiber::sim::{
    distances, simulate, CostModel, Decision, FiberSpec, MatrixParams, Op, SimConfig, SimResult, Work, Workload,
};
use numafiber::{Policy, PolicyOptions, Topology};

/// The variants of thesis_bench: the six policies and the three switches.
fn variants() -> Vec<(&'static str, Policy, PolicyOptions)> {
    let t = PolicyOptions::default();
    let mut v: Vec<_> = Policy::ALL.iter().map(|&p| (p.name(), p, t)).collect();
    v.push(("nlh+decrement", Policy::Nlh, PolicyOptions { decrement_workload: true, ..t }));
    v.push(("nlh+cpu-node", Policy::Nlh, PolicyOptions { spawner_node_from_cpu: true, ..t }));
    v.push(("nlh+work-first", Policy::Nlh, PolicyOptions { work_first: true, ..t }));
    v
}

fn epyc(nodes: usize, pus: usize) -> Topology {
    Topology::uniform(nodes, pus).with_distances(distances::epyc_like(nodes)).unwrap()
}

fn small_matrix(imbalanced: bool) -> Workload {
    Workload::matrix(&MatrixParams {
        mults: 24,
        thieves: 2,
        heavy_mults: 20,
        imbalanced,
        ..MatrixParams::for_size(100)
    })
}

fn workloads() -> Vec<Workload> {
    vec![
        small_matrix(false),
        small_matrix(true),
        Workload::fork_join(11, 2_000, 200, 512),
        Workload::random_dag(120, 3, 1_000..20_000, 1 << 16, 5),
        Workload::skewed_producer(80, 500, 30_000, 1 << 20),
    ]
}

fn assert_conserved(r: &SimResult, wl: &Workload, what: &str) {
    let n = wl.fibers().len();
    assert_eq!(r.spawned, n as u64, "{what}: spawned");
    assert_eq!(r.completed, n as u64, "{what}: completed");
    assert_eq!(r.completions.len(), n, "{what}");
    if let Some(i) = r.completions.iter().position(|&c| c != 1) {
        panic!("{what}: fiber {i} completed {} times", r.completions[i]);
    }
    assert_eq!(r.executed_per_node.iter().sum::<u64>(), n as u64, "{what}: executed per node");
}

#[test]
fn same_seed_gives_identical_results() {
    let topo = epyc(4, 4);
    for wl in workloads() {
        for (name, p, o) in variants() {
            let cfg = SimConfig::new(p).options(o).seed(42);
            let a = simulate(&topo, &cfg, &wl).unwrap();
            let b = simulate(&topo, &cfg, &wl).unwrap();
            assert_eq!(a, b, "{name} on {}", wl.name());
        }
    }
    // A different seed changes the jittered costs (and so the makespan).
    let wl = small_matrix(true);
    let a = simulate(&topo, &SimConfig::new(Policy::Nlh).seed(1), &wl).unwrap();
    let b = simulate(&topo, &SimConfig::new(Policy::Nlh).seed(2), &wl).unwrap();
    assert_ne!(a.makespan_ns, b.makespan_ns);
}

#[test]
fn every_fiber_completes_exactly_once() {
    for topo in [Topology::uniform(1, 1), Topology::uniform(2, 1), epyc(4, 4), epyc(8, 2)] {
        for wl in workloads() {
            for (name, p, o) in variants() {
                for chunk in [numafiber::StealChunk::Half, numafiber::StealChunk::Fixed(1)] {
                    let cfg = SimConfig { chunk, ..SimConfig::new(p).options(o).seed(3) };
                    let r = simulate(&topo, &cfg, &wl).unwrap();
                    assert_conserved(&r, &wl, &format!("{name} {chunk:?} on {} / {}", wl.name(), topo.description()));
                }
            }
        }
    }
}

/// Replay the simulator's policy calls on a fresh `Scheduler` built the way
/// the simulator says it built its own: every answer must be the same, and
/// so must the scheduler's counters at the end.
fn replay(topo: &Topology, cfg: &SimConfig, r: &SimResult) -> usize {
    let sched = Scheduler::new(cfg.policy, cfg.options, r.worker_node.clone(), topo);
    let mut st: Vec<Option<ThiefState>> = vec![None; r.worker_node.len()];
    let trace = r.trace.as_ref().expect("trace requested");
    for (i, d) in trace.iter().enumerate() {
        match d {
            Decision::ThiefState { worker, seed } => st[*worker] = Some(sched.new_thief_state(*worker, *seed)),
            Decision::Place { spawner, queue_lens, chosen } => {
                assert_eq!(sched.place(*spawner, queue_lens), *chosen, "call {i}: {d:?}")
            }
            Decision::PlaceNlh { local_node, queue_lens, chosen } => {
                assert_eq!(sched.place_nlh(*local_node, None, queue_lens), *chosen, "call {i}: {d:?}")
            }
            Decision::RecordPlacement { worker } => sched.record_placement(*worker),
            Decision::SetOwnStatus { worker, busy } => {
                sched.set_own_status(*worker, st[*worker].as_ref().unwrap(), *busy)
            }
            Decision::Victims { thief, victims } => {
                let walk: Vec<usize> = sched.victims(*thief, st[*thief].as_mut().unwrap()).collect();
                assert_eq!(&walk, victims, "call {i}");
            }
            Decision::RecordSteal { thief, victim, success } => {
                sched.record_steal(*thief, st[*thief].as_mut().unwrap(), *victim, *success)
            }
            Decision::FiberMoved { from, to, count } => sched.fiber_moved(*from, *to, *count),
            Decision::FiberLeftNode { node } => sched.fiber_left_node(*node),
        }
    }
    for n in 0..sched.num_nodes() {
        assert_eq!(sched.placements(n), r.placements[n], "placements of node {n}");
        assert_eq!(sched.node_workload(n), r.node_workload[n], "workload of node {n}");
    }
    trace.len()
}

#[test]
fn policy_decisions_come_from_the_shared_scheduler() {
    let topo = epyc(4, 2);
    for wl in workloads() {
        for (name, p, o) in variants() {
            let cfg = SimConfig::new(p).options(o).seed(9).trace(true);
            let r = simulate(&topo, &cfg, &wl).unwrap();
            let calls = replay(&topo, &cfg, &r);
            let trace = r.trace.as_ref().unwrap();
            let places =
                trace.iter().filter(|d| matches!(d, Decision::Place { .. } | Decision::PlaceNlh { .. })).count();
            let recorded = trace.iter().filter(|d| matches!(d, Decision::RecordPlacement { .. })).count();
            // Every spawn went through the scheduler, once.
            assert_eq!(places + recorded, wl.fibers().len(), "{name} on {}", wl.name());
            if p.steals() {
                assert!(trace.iter().any(|d| matches!(d, Decision::Victims { .. })), "{name}: steals were decided");
            } else {
                assert!(!trace.iter().any(|d| matches!(d, Decision::Victims { .. })), "{name}");
            }
            assert!(calls > 0);
        }
    }
}

#[test]
fn nlh_counts_balance_through_the_shared_counters() {
    // With decrement_workload every fiber that was counted also left: the
    // scheduler's own workload counters end at zero on every node.
    let topo = epyc(4, 2);
    for wl in workloads() {
        let o = PolicyOptions { decrement_workload: true, ..PolicyOptions::default() };
        let r = simulate(&topo, &SimConfig::new(Policy::Nlh).options(o), &wl).unwrap();
        assert!(r.node_workload.iter().all(|&w| w == 0), "{}: {:?}", wl.name(), r.node_workload);
        assert_eq!(r.placements.iter().sum::<u64>(), wl.fibers().len() as u64);
        // Thesis counts only grow: they end equal to the placements.
        let r = simulate(&topo, &SimConfig::new(Policy::Nlh), &wl).unwrap();
        let placed: Vec<i64> = r.placements.iter().map(|&p| p as i64).collect();
        assert_eq!(r.node_workload, placed, "{}", wl.name());
    }
}

#[test]
fn round_robin_never_steals_and_one_node_steals_locally() {
    let wl = small_matrix(true);
    let r = simulate(&epyc(4, 2), &SimConfig::new(Policy::RoundRobin), &wl).unwrap();
    assert_eq!((r.local_steals, r.remote_steals, r.failed_steals), (0, 0, 0));
    for (name, p, o) in variants().into_iter().filter(|v| v.1.steals()) {
        let r = simulate(&Topology::uniform(1, 4), &SimConfig::new(p).options(o), &wl).unwrap();
        assert_eq!(r.remote_steals, 0, "{name}");
        assert!(r.local_steals > 0, "{name}: the imbalanced matrix workload provokes steals");
    }
}

#[test]
fn stealing_beats_round_robin_on_the_imbalanced_matrix() {
    let topo = epyc(2, 4);
    // A queue long enough that stealing has work to move: with the
    // measured 12 us wake-up (CostModel::default) 24 singles on 8 workers
    // finish behind the heavy fibers under every policy alike.
    let wl = Workload::matrix(&MatrixParams {
        mults: 96,
        thieves: 2,
        heavy_mults: 20,
        imbalanced: true,
        ..MatrixParams::for_size(100)
    });
    let rr = simulate(&topo, &SimConfig::new(Policy::RoundRobin), &wl).unwrap();
    for p in [Policy::RandomSteal, Policy::NumaSteal, Policy::LoadSteal, Policy::HybridSteal, Policy::Nlh] {
        let r = simulate(&topo, &SimConfig::new(p), &wl).unwrap();
        assert!(r.makespan_ns < rr.makespan_ns, "{p}: {} vs rr {}", r.makespan_ns, rr.makespan_ns);
    }
}

#[test]
fn remote_memory_costs_what_the_distance_says() {
    // One fiber reads data homed on node 0 but runs on node 1 (distance
    // 32): with the whole step memory-bound it takes 3.2x as long.
    let topo = epyc(8, 1);
    let reader = FiberSpec::new(vec![Op::Compute(Work::new(1_000_000))]).inputs(vec![0]);
    let owner = FiberSpec::new(vec![Op::Compute(Work::new(1))]).footprint(1 << 20);
    // main: spawn owner (RR -> worker 0), await; spawn reader (RR -> worker 1).
    let wl = Workload::new("remote", vec![Op::Spawn(0), Op::Await(0), Op::Spawn(1), Op::Await(1)], vec![owner, reader])
        .unwrap();
    let cost = |share: f64, topo: &Topology| {
        let c = CostModel { memory_share: share, jitter: 0.0, ..CostModel::default() };
        simulate(topo, &SimConfig::new(Policy::RoundRobin).cost(c), &wl).unwrap().remote_penalty_ns
    };
    assert_eq!(cost(0.0, &topo), 0);
    assert_eq!(cost(1.0, &topo), 200_000); // node 1 is 12 away from node 0: 1.2x
    let far = Topology::uniform(2, 1).with_distances(vec![vec![10, 32], vec![32, 10]]).unwrap();
    assert_eq!(cost(1.0, &far), 2_200_000);
    assert_eq!(cost(0.5, &far), 1_100_000);
}

#[test]
fn sixty_four_nodes_run_in_seconds() {
    let topo = Topology::uniform(64, 4).with_distances(distances::xeon_like(64)).unwrap();
    let wls = [
        Workload::matrix(&MatrixParams {
            mults: 512,
            thieves: 16,
            heavy_mults: 20,
            imbalanced: true,
            ..MatrixParams::for_size(200)
        }),
        Workload::fork_join(14, 5_000, 500, 512),
    ];
    for wl in &wls {
        for p in [Policy::RandomSteal, Policy::Nlh] {
            let t0 = Instant::now();
            let r = simulate(&topo, &SimConfig::new(p), wl).unwrap();
            let took = t0.elapsed();
            println!(
                "64x4 {} {p}: {} fibers, {} events, simulated {:.4} s, wall {:.2?}, steals {}+{}",
                wl.name(),
                r.completed,
                r.events,
                r.makespan_s(),
                took,
                r.local_steals,
                r.remote_steals
            );
            assert_conserved(&r, wl, wl.name());
            assert!(r.remote_steals > 0, "256 workers on 64 nodes steal across nodes");
        }
    }
}

#[test]
fn bad_workloads_are_rejected_and_deadlocks_reported() {
    let e = Workload::new("x", vec![Op::Spawn(3)], vec![FiberSpec::default()]).unwrap_err();
    assert!(e.to_string().contains("fiber 3"), "{e}");
    let e = Workload::new("x", vec![], vec![FiberSpec::default()]).unwrap_err();
    assert!(e.to_string().contains("never spawned"), "{e}");
    // Fiber 0 awaits fiber 1, which only fiber 0 spawns, after the await.
    let f0 = FiberSpec::new(vec![Op::Await(1), Op::Spawn(1)]);
    let wl = Workload::new("dl", vec![Op::Spawn(0), Op::Await(0)], vec![f0, FiberSpec::default()]).unwrap();
    let e = simulate(&Topology::uniform(1, 2), &SimConfig::new(Policy::Nlh), &wl).unwrap_err();
    assert!(e.to_string().contains("deadlock"), "{e}");
    // Zero workers: the topology's error.
    let e = simulate(&Topology::uniform(1, 2), &SimConfig::new(Policy::Nlh).workers(0), &wl).unwrap_err();
    assert!(e.to_string().contains("0 workers"), "{e}");
}

#[test]
fn simulate_cli_writes_thesis_bench_csv_and_figures() {
    let dir = std::env::temp_dir().join(format!("numafiber-sim-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let args: Vec<String> =
        ["--quick", "--runs", "2", "--topology", "uniform:4x2", "--distances", "epyc", "--sweep", "queue", "--out"]
            .iter()
            .map(|s| s.to_string())
            .chain([dir.display().to_string()])
            .collect();
    cli::run_cli(&args).expect("simulate runs");
    let summary = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    let mut lines = summary.lines();
    assert_eq!(lines.next(), Some(bench::SUMMARY_HEADER));
    // 3 queue lengths x 2 scenarios x 9 variants.
    assert_eq!(lines.count(), 3 * 2 * 9);
    for f in ["fig5_1_queue_length_time.svg", "fig5_2_queue_length_throughput.svg", "fig5_3_queue_length_steals.svg"] {
        assert!(dir.join(f).exists(), "{f}");
    }
    // The same command twice: the same numbers (seeded).
    cli::run_cli(&args).unwrap();
    assert_eq!(std::fs::read_to_string(dir.join("summary.csv")).unwrap(), summary);
    let bad = |a: &[&str]| cli::run_cli(&a.iter().map(|s| s.to_string()).collect::<Vec<_>>()).is_err();
    assert!(bad(&["--distances", "moon"]));
    assert!(bad(&["--workload", "sort"]));
    assert!(bad(&["--memory-share", "2"]));
    let _ = std::fs::remove_dir_all(&dir);
}
