//! Scheduler-level tests: the pure functions wired to topology, atomics and
//! per-thief state, driven without threads.

use super::status::NodeView;
use super::status::WorkerStatus::{self, Busy, DontKnow, Idle};
use super::*;

/// The whole victim walk of one pass.
fn victims(s: &Scheduler, thief: usize, st: &mut ThiefState) -> Vec<usize> {
    s.victims(thief, st).collect()
}

/// What `st`'s thief believes about worker `w`: its view of `w`'s node if
/// remote (uniform there unless set up otherwise), else the shared board.
fn view_of(s: &Scheduler, st: &ThiefState, w: usize) -> WorkerStatus {
    match st.node_view(s.worker_node(w)) {
        Some(v) => v.status().expect("a uniform view"),
        None => s.status(w),
    }
}

/// `nodes` nodes of `per` workers each; worker `w` on node `w / per`.
fn layout(nodes: usize, per: usize) -> Vec<usize> {
    (0..nodes * per).map(|w| w / per).collect()
}

fn sched(policy: Policy, nodes: usize, per: usize) -> Scheduler {
    Scheduler::new(policy, PolicyOptions::default(), layout(nodes, per), &Topology::uniform(nodes, per))
}

/// 4 nodes in a ring, like the numa-vm: 10 local, 20 to neighbours, 30 across.
fn ring4(per: usize) -> Topology {
    Topology::uniform(4, per)
        .with_distances(vec![vec![10, 20, 30, 20], vec![20, 10, 20, 30], vec![30, 20, 10, 20], vec![20, 30, 20, 10]])
        .unwrap()
}

/// The node of each victim, in order.
fn victim_nodes(s: &Scheduler, victims: &[usize]) -> Vec<usize> {
    victims.iter().map(|&v| s.worker_node(v)).collect()
}

/// Collapse consecutive equal entries: the node order of a victim list.
fn node_runs(nodes: &[usize]) -> Vec<usize> {
    let mut v = nodes.to_vec();
    v.dedup();
    v
}

#[test]
fn policy_names_round_trip_and_aliases() {
    for p in Policy::ALL {
        assert_eq!(p.name().parse::<Policy>(), Ok(p));
        assert_eq!(p.to_string(), p.name());
    }
    assert_eq!("rr".parse(), Ok(Policy::RoundRobin));
    assert_eq!(" NLLASS ".parse(), Ok(Policy::HybridSteal));
    assert_eq!("Round-Robin".parse(), Ok(Policy::RoundRobin));
    let mut names: Vec<&str> = Policy::ALL.iter().map(|p| p.name()).collect();
    names.dedup();
    assert_eq!(names.len(), 6);
}

#[test]
fn policy_parse_error_lists_valid_names() {
    let e = "work-first".parse::<Policy>().unwrap_err();
    let msg = e.to_string();
    assert!(msg.contains("`work-first`"), "{msg}");
    for p in Policy::ALL {
        assert!(msg.contains(p.name()), "{msg} lacks {}", p.name());
    }
    assert!(msg.contains("rr") && msg.contains("nllass"), "{msg}");
    assert!("".parse::<Policy>().is_err());
}

#[test]
fn policy_capabilities() {
    assert_eq!(Policy::ALL.iter().filter(|p| p.steals()).count(), 5);
    assert!(!Policy::RoundRobin.steals());
    let bitmap: Vec<Policy> = Policy::ALL.into_iter().filter(|p| p.uses_status_bitmap()).collect();
    assert_eq!(bitmap, vec![Policy::LoadSteal, Policy::HybridSteal, Policy::Nlh]);
    assert!(!Policy::RandomSteal.uses_distances() && Policy::NumaSteal.uses_distances());
}

#[test]
fn steal_chunk_limits() {
    let half: Vec<usize> = (0..6).map(|l| StealChunk::Half.limit(l)).collect();
    assert_eq!(half, vec![0, 1, 1, 2, 2, 3]);
    assert_eq!(StealChunk::Fixed(4).limit(10), 4);
    assert_eq!(StealChunk::Fixed(4).limit(3), 3);
    assert_eq!(StealChunk::Fixed(0).limit(3), 0);
    assert_eq!(StealChunk::Fixed(1).limit(0), 0);
    assert_eq!(StealChunk::Half.limit(usize::MAX), usize::MAX / 2 + 1);
    assert_eq!(StealChunk::default(), StealChunk::Half);
}

#[test]
fn options_default_is_the_thesis() {
    let d = PolicyOptions::default();
    assert!(!d.decrement_workload && !d.spawner_node_from_cpu && !d.work_first);
    let s = sched(Policy::Nlh, 2, 1);
    assert_eq!(s.options(), PolicyOptions::thesis());
    assert_eq!(s.policy(), Policy::Nlh);
}

#[test]
fn round_robin_places_in_turn_and_never_steals() {
    let s = sched(Policy::RoundRobin, 2, 2);
    assert!(!s.steals());
    let q: &Vec<usize> = &vec![9, 0, 9, 0]; // queue lengths are ignored
    let got: Vec<usize> = (0..6).map(|_| s.place(Some(3), q)).collect();
    assert_eq!(got, vec![0, 1, 2, 3, 0, 1]);
    let mut st = s.new_thief_state(1, 7);
    let v = victims(&s, 1, &mut st);
    assert!(v.is_empty());
    // Placements derived from the counter: node 0 got 0, 1, 0, 1; node 1 got 2, 3.
    assert_eq!((s.placements(0), s.placements(1)), (4, 2));
    assert_eq!(s.node_workload(0), 0);
    assert_eq!((st.node_view(1), s.status(0)), (None, DontKnow));
}

#[test]
fn round_robin_placement_counts_match_a_replay() {
    // Uneven layout: node 0 has workers 0 and 2, node 1 has 1.
    let s = Scheduler::new(Policy::NumaSteal, PolicyOptions::default(), vec![0, 1, 0], &Topology::uniform(2, 2));
    let q: &Vec<usize> = &vec![0; 3];
    let mut per_node = [0u64; 2];
    for i in 0..11 {
        let w = s.place(None, q);
        per_node[s.worker_node(w)] += 1;
        assert_eq!(s.placements(0) + s.placements(1), i + 1);
        assert_eq!([s.placements(0), s.placements(1)], per_node);
    }
}

#[test]
fn random_steal_tries_everyone_else_from_varying_starts() {
    let s = sched(Policy::RandomSteal, 2, 3);
    let mut st = s.new_thief_state(4, 1);
    let mut firsts = std::collections::BTreeSet::new();
    for _ in 0..200 {
        let v = victims(&s, 4, &mut st);
        let mut sorted = v.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![0, 1, 2, 3, 5]);
        firsts.insert(v[0]);
    }
    assert_eq!(firsts.len(), 5, "every other worker comes first sometimes: {firsts:?}");
}

#[test]
fn single_worker_has_no_victims() {
    for p in Policy::ALL {
        let s = sched(p, 1, 1);
        let mut st = s.new_thief_state(0, 3);
        let v = victims(&s, 0, &mut st);
        assert!(v.is_empty(), "{p}");
        assert_eq!(s.place(Some(0), &vec![0usize]), 0, "{p}");
    }
}

#[test]
fn distance_lists_follow_the_matrix() {
    let s = Scheduler::new(Policy::NumaSteal, PolicyOptions::default(), layout(4, 1), &ring4(1));
    assert!(s.has_distance_matrix());
    assert_eq!(s.remote_by_distance(0), &[1, 3, 2]);
    assert_eq!(s.remote_by_distance(1), &[0, 2, 3]);
    assert_eq!(s.remote_by_distance(3), &[0, 2, 1]);
    assert_eq!(s.distance(0, 2), 30);
    let u = sched(Policy::NumaSteal, 3, 1);
    assert!(!u.has_distance_matrix());
    assert_eq!(u.remote_by_distance(1), &[0, 2]);
}

#[test]
fn numa_steal_own_node_then_by_distance() {
    let s = Scheduler::new(Policy::NumaSteal, PolicyOptions::default(), layout(4, 2), &ring4(2));
    let mut st = s.new_thief_state(2, 9); // worker 2 on node 1
    let v = victims(&s, 2, &mut st);
    assert_eq!(v.len(), 7);
    assert!(!v.contains(&2));
    assert_eq!(v[0], 3); // the node mate
    assert_eq!(victim_nodes(&s, &v), vec![1, 0, 0, 2, 2, 3, 3]);
}

#[test]
fn numa_steal_rotates_within_a_node() {
    let s = sched(Policy::NumaSteal, 2, 3);
    let mut st = s.new_thief_state(0, 5);
    let mut local_firsts = std::collections::BTreeSet::new();
    let mut remote_firsts = std::collections::BTreeSet::new();
    for _ in 0..100 {
        let v = victims(&s, 0, &mut st);
        assert_eq!(victim_nodes(&s, &v), vec![0, 0, 1, 1, 1]);
        local_firsts.insert(v[0]);
        remote_firsts.insert(v[2]);
    }
    assert_eq!(local_firsts.into_iter().collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(remote_firsts.into_iter().collect::<Vec<_>>(), vec![3, 4, 5]);
}

#[test]
fn load_steal_starts_dontknow_and_local_first() {
    let s = Scheduler::new(Policy::LoadSteal, PolicyOptions::default(), layout(4, 2), &ring4(2));
    let mut st = s.new_thief_state(0, 1);
    assert!((0..8).all(|w| view_of(&s, &st, w) == DontKnow));
    assert!((1..4).all(|n| st.node_view(n) == Some(NodeView::uniform(2, DontKnow))));
    let v = victims(&s, 0, &mut st);
    // All estimators 0.5: own node first, then the distance list 1, 3, 2.
    assert_eq!(st.estimators(), &[0.5; 4]);
    assert_eq!(node_runs(&victim_nodes(&s, &v)), vec![0, 1, 3, 2]);
}

/// The thesis sets a worker's own entry to IDLE before it steals and says
/// the first attempts are always local. The own entry is left out of the
/// own node's estimator, so an IDLE (or BUSY) thief still tries its node
/// first while it knows nothing about its node mates. (Counting it in made
/// the own node 0.25 < 0.5 and sent the thief remote first.)
#[test]
fn load_steal_own_status_does_not_push_the_thief_remote() {
    let s = sched(Policy::LoadSteal, 2, 2);
    let mut st = s.new_thief_state(0, 1);
    s.set_own_status(0, &st, false);
    assert_eq!(s.status(0), Idle);
    let mut v = victims(&s, 0, &mut st);
    // Own node: only worker 1 counts (DONTKNOW, 0.5) = node 1's 0.5: tie,
    // own node first.
    assert_eq!(st.estimators(), &[0.5, 0.5]);
    assert_eq!(victim_nodes(&s, &v), vec![0, 1, 1]);
    s.set_own_status(0, &st, true);
    assert_eq!(s.status(0), Busy);
    v = victims(&s, 0, &mut st);
    assert_eq!(st.estimators(), &[0.5, 0.5]);
    assert_eq!(victim_nodes(&s, &v), vec![0, 1, 1]);
    // What the thief learnt about its node mate still counts: worker 1
    // proved idle, so node 1 (DONTKNOW) goes first.
    s.record_steal(0, &mut st, 1, false);
    v = victims(&s, 0, &mut st);
    assert_eq!(st.estimators(), &[0.0, 0.5]);
    assert_eq!(victim_nodes(&s, &v), vec![1, 1, 0]);
}

/// A node whose only worker is the thief has nothing to steal.
#[test]
fn load_steal_thief_alone_on_its_node_estimates_zero() {
    let s = sched(Policy::LoadSteal, 2, 1);
    let mut st = s.new_thief_state(1, 1);
    s.set_own_status(1, &st, false);
    let v = victims(&s, 1, &mut st);
    assert_eq!(st.estimators(), &[0.5, 0.0]);
    assert_eq!(v, vec![0]);
}

#[test]
fn swas_local_attempt_updates_only_the_victim() {
    for p in [Policy::LoadSteal, Policy::HybridSteal, Policy::Nlh] {
        let s = sched(p, 2, 3);
        let mut st = s.new_thief_state(0, 1);
        s.record_steal(0, &mut st, 1, false);
        s.record_steal(0, &mut st, 2, true);
        let got: Vec<WorkerStatus> = (0..6).map(|w| view_of(&s, &st, w)).collect();
        assert_eq!(got, vec![DontKnow, Idle, Busy, DontKnow, DontKnow, DontKnow], "{p}");
    }
}

#[test]
fn swas_remote_attempt_updates_the_whole_node() {
    for p in [Policy::LoadSteal, Policy::HybridSteal, Policy::Nlh] {
        let s = sched(p, 3, 2);
        let mut st = s.new_thief_state(0, 1);
        s.record_steal(0, &mut st, 3, false); // node 1
        let got: Vec<WorkerStatus> = (0..6).map(|w| view_of(&s, &st, w)).collect();
        assert_eq!(got, vec![DontKnow, DontKnow, Idle, Idle, DontKnow, DontKnow], "{p}");
        s.record_steal(0, &mut st, 4, true); // node 2
        s.record_steal(0, &mut st, 2, true); // node 1 again, now success
        let got: Vec<WorkerStatus> = (0..6).map(|w| view_of(&s, &st, w)).collect();
        assert_eq!(got, vec![DontKnow, DontKnow, Busy, Busy, Busy, Busy], "{p}");
    }
}

#[test]
fn non_bitmap_policies_ignore_status_updates() {
    for p in [Policy::RoundRobin, Policy::RandomSteal, Policy::NumaSteal] {
        let s = sched(p, 2, 2);
        let mut st = s.new_thief_state(0, 1);
        s.record_steal(0, &mut st, 3, true);
        s.set_own_status(0, &st, true);
        assert!((0..4).all(|w| view_of(&s, &st, w) == DontKnow), "{p}");
        assert_eq!(st.node_view(1), None, "{p}");
    }
}

#[test]
fn load_steal_goes_to_the_node_that_proved_busy() {
    let s = Scheduler::new(Policy::LoadSteal, PolicyOptions::default(), layout(4, 2), &ring4(2));
    let mut st = s.new_thief_state(0, 1);
    s.set_own_status(0, &st, false);
    s.record_steal(0, &mut st, 1, false); // own node: 0 idle, 1 idle -> 0.0
    s.record_steal(0, &mut st, 2, false); // node 1 idle -> 0.0
    s.record_steal(0, &mut st, 5, true); // node 2 busy -> 1.0
                                         // node 3 stays DONTKNOW -> 0.5
    let v = victims(&s, 0, &mut st);
    assert_eq!(st.estimators(), &[0.0, 0.0, 1.0, 0.5]);
    // Descending: 2, 3, then the tie at 0.0: own node 0 before node 1.
    assert_eq!(victim_nodes(&s, &v), vec![2, 2, 3, 3, 0, 1, 1]);
}

/// Thesis Table 4.1 through the Scheduler: 3 nodes x 3 workers, thief is
/// the thesis' "Worker 3 on node 0" (our worker 2). Distances 2 and 3 from
/// node 0 become SLIT 20 and 30; the order only scales.
#[test]
fn hybrid_reproduces_table_4_1() {
    let topo =
        Topology::uniform(3, 3).with_distances(vec![vec![10, 20, 30], vec![20, 10, 20], vec![30, 20, 10]]).unwrap();
    for p in [Policy::HybridSteal, Policy::Nlh] {
        let s = Scheduler::new(p, PolicyOptions::default(), layout(3, 3), &topo);
        let mut st = s.new_thief_state(2, 11);
        // Node 0 (the thief's, on the shared board): IDLE IDLE IDLE; node 1:
        // BUSY IDLE IDLE; node 2: BUSY BUSY IDLE (mixed remote views, which
        // no sequence of steals produces: set up directly).
        for w in 0..3 {
            s.set_status(w, Idle);
        }
        s.set_node_view(&mut st, 1, NodeView { busy: 1, idle: 2, dont_know: 0 });
        s.set_node_view(&mut st, 2, NodeView { busy: 2, idle: 1, dont_know: 0 });
        let v = victims(&s, 2, &mut st);
        let est = st.estimators().to_vec();
        assert_eq!(est[0], 0.0);
        assert!(((1.0 - est[1]) - 2.0 / 3.0).abs() < 1e-12); // thesis: 0.66
        assert!(((1.0 - est[2]) - 1.0 / 3.0).abs() < 1e-12); // thesis: 0.33
        let scores: Vec<f64> = (1..3).map(|n| steal::hybrid_score(est[n], s.distance(0, n))).collect();
        assert!((scores[0] - 13.0 - 1.0 / 3.0).abs() < 1e-9); // thesis: 1.32 (x10)
        assert!((scores[1] - 10.0).abs() < 1e-9); // thesis: 0.99 (x10)
                                                  // Own node first, then node 2 (the lower score), then node 1;
                                                  // nearest-first NumaSteal would have tried node 1 before node 2.
        assert_eq!(victim_nodes(&s, &v), vec![0, 0, 2, 2, 2, 1, 1, 1], "{p}");
        assert!(!v.contains(&2));
    }
}

#[test]
fn hybrid_busy_remote_ties_with_own_node_but_own_goes_first() {
    let s = sched(Policy::HybridSteal, 2, 2);
    let mut st = s.new_thief_state(0, 1);
    s.record_steal(0, &mut st, 2, true); // node 1 all BUSY: score 0
    let v = victims(&s, 0, &mut st);
    assert_eq!(victim_nodes(&s, &v), vec![0, 1, 1]);
}

fn nlh(nodes: usize, per: usize, opts: PolicyOptions) -> Scheduler {
    Scheduler::new(Policy::Nlh, opts, layout(nodes, per), &Topology::uniform(nodes, per))
}

#[test]
fn nlh_keeps_spawns_local_until_the_median() {
    // 4 nodes x 1 worker; nodes 1..3 pre-loaded with 2, 4 and 6 fibers.
    let s = nlh(4, 1, PolicyOptions::default());
    let q: &Vec<usize> = &vec![0; 4];
    for (w, times) in [(1, 2), (2, 4), (3, 6)] {
        for _ in 0..times {
            s.record_placement(w);
        }
    }
    // Node 0 (0) < median of 2, 4, 6 (4): spawns from worker 0 stay local
    // for workloads 0, 1, 2, 3; at 4 the least-loaded node (1, at 2) wins.
    let got: Vec<usize> = (0..6).map(|_| s.place(Some(0), q)).collect();
    assert_eq!(got, vec![0, 0, 0, 0, 1, 1]);
    assert_eq!((0..4).map(|n| s.node_workload(n)).collect::<Vec<_>>(), vec![4, 4, 4, 6]);
    assert_eq!((0..4).map(|n| s.placements(n)).collect::<Vec<_>>(), vec![4, 4, 4, 6]);
}

#[test]
fn nlh_two_nodes_alternate_from_an_external_spawner() {
    let s = nlh(2, 1, PolicyOptions::default());
    let q: &Vec<usize> = &vec![0; 2];
    let got: Vec<usize> = (0..6).map(|_| s.place(None, q)).collect();
    // Thesis: an external spawner counts as node 0.
    assert_eq!(got, vec![0, 1, 0, 1, 0, 1]);
}

#[test]
fn nlh_picks_the_shortest_queue_on_the_node() {
    let s = nlh(2, 3, PolicyOptions::default());
    let q: &Vec<usize> = &vec![4, 1, 1, 0, 0, 0];
    // Spawner 0, workloads [0, 0]: 0 is not below the median 0, the least
    // loaded nodes tie and the local one wins; its shortest queues are
    // workers 1 and 2 (spawner 0 is not among them): lowest index.
    assert_eq!(s.place(Some(0), q), 1);
    // Spawner 2, workloads [1, 0]: node 1 is least loaded; the spawner is
    // not there and all queues are empty: lowest index.
    assert_eq!(s.place(Some(2), q), 3);
    // Spawner 4, workloads [1, 1]: tie, local node 1 wins; the spawner is
    // among the shortest queues and takes it.
    assert_eq!(s.place(Some(4), q), 4);
    // Spawner 2, workloads [1, 2]: local node 0 is below the median 2;
    // workers 1 and 2 tie on queue length and the spawner takes it.
    assert_eq!(s.place(Some(2), q), 2);
}

#[test]
fn nlh_thesis_counts_only_grow() {
    let s = nlh(2, 1, PolicyOptions::default());
    let q: &Vec<usize> = &vec![0; 2];
    s.place(Some(0), q);
    s.fiber_left_node(0);
    s.fiber_moved(0, 1, 1);
    assert_eq!((s.node_workload(0), s.node_workload(1)), (1, 0));
}

#[test]
fn nlh_decrementing_counts_follow_fibers() {
    let opts = PolicyOptions { decrement_workload: true, ..PolicyOptions::default() };
    let s = nlh(2, 1, opts);
    let q: &Vec<usize> = &vec![0; 2];
    for _ in 0..4 {
        s.place(Some(0), q);
    }
    // Alternating 0, 1, 0, 1.
    assert_eq!((s.node_workload(0), s.node_workload(1)), (2, 2));
    s.fiber_moved(1, 0, 2); // node 0 stole both of node 1's fibers
    assert_eq!((s.node_workload(0), s.node_workload(1)), (4, 0));
    s.fiber_moved(0, 0, 3); // within a node: nothing moves
    assert_eq!(s.node_workload(0), 4);
    s.fiber_left_node(0);
    s.fiber_left_node(0);
    assert_eq!(s.node_workload(0), 2);
    // Placements never fall.
    assert_eq!((s.placements(0), s.placements(1)), (2, 2));
    // Node 1 now far below: the next spawn from node 0 goes there.
    assert_eq!(s.place(Some(0), q), 1);
}

#[test]
fn decrement_is_a_no_op_for_round_robin_policies() {
    let opts = PolicyOptions { decrement_workload: true, ..PolicyOptions::default() };
    let s = Scheduler::new(Policy::HybridSteal, opts, layout(2, 1), &Topology::uniform(2, 1));
    s.fiber_left_node(0);
    s.fiber_moved(0, 1, 5);
    s.record_placement(1);
    assert_eq!((s.node_workload(0), s.node_workload(1)), (0, 0));
}

#[test]
fn record_placement_counts_for_nlh() {
    let s = nlh(2, 2, PolicyOptions::default());
    s.record_placement(3);
    assert_eq!((s.node_workload(1), s.placements(1)), (1, 1));
    // Node 1 is now loaded: an external spawn (node 0) stays on node 0.
    assert_eq!(s.worker_node(s.place(None, &vec![0usize; 4])), 0);
}

#[test]
fn nlh_external_spawner_node_from_cpu() {
    // Every cpu maps to node 1: with the switch, node 1 is local.
    let opts = PolicyOptions { spawner_node_from_cpu: true, ..PolicyOptions::default() };
    let s = nlh(2, 1, opts).with_cpu_node_map(vec![Some(1); 4096]);
    assert_eq!(s.spawner_node(None), 1);
    assert_eq!(s.spawner_node(Some(0)), 0);
    assert_eq!(s.place(None, &vec![0usize; 2]), 1);
    // Without the switch: node 0, as in the thesis.
    let t = nlh(2, 1, PolicyOptions::default()).with_cpu_node_map(vec![Some(1); 4096]);
    assert_eq!(t.spawner_node(None), 0);
    assert_eq!(t.place(None, &vec![0usize; 2]), 0);
    // Unknown cpu: node 0.
    let u = nlh(2, 1, opts).with_cpu_node_map(Vec::new());
    assert_eq!(u.spawner_node(None), 0);
}

#[test]
fn cpu_node_map_comes_from_the_topology() {
    let s = nlh(2, 3, PolicyOptions::default());
    let got: Vec<Option<usize>> = (0..7).map(|c| s.node_of_cpu(c)).collect();
    assert_eq!(got, vec![Some(0), Some(0), Some(0), Some(1), Some(1), Some(1), None]);
}

#[test]
fn nlh_never_places_on_a_node_without_workers() {
    // 4-node topology, workers only on nodes 0 and 2.
    let s = Scheduler::new(Policy::Nlh, PolicyOptions::default(), vec![0, 2], &ring4(1));
    let q: &Vec<usize> = &vec![0; 2];
    for _ in 0..20 {
        let w = s.place(None, q);
        assert!(w < 2);
    }
    assert_eq!((s.node_workload(0), s.node_workload(2)), (10, 10));
    assert_eq!(s.node_workload(1) + s.node_workload(3), 0);
    // A local node without workers: least loaded (ties: lowest index).
    assert_eq!(s.place_nlh(1, None, q), 0);
    assert_eq!(s.place_nlh(3, None, q), 1);
    // Victim lists skip the empty nodes.
    let mut st = s.new_thief_state(0, 1);
    let v = victims(&s, 0, &mut st);
    assert_eq!(v, vec![1]);
}

#[test]
fn thief_states_are_deterministic_per_seed() {
    let s = sched(Policy::RandomSteal, 1, 8);
    let rounds = |worker: usize, seed: u64| {
        let mut st = s.new_thief_state(worker, seed);
        (0..20).map(|_| victims(&s, worker, &mut st)[0]).collect::<Vec<usize>>()
    };
    assert_eq!(s.new_thief_state(3, 1).worker(), 3);
    assert_eq!(rounds(0, 1), rounds(0, 1));
    assert_ne!(rounds(0, 1), rounds(0, 2));
    // Same seed, different workers: different streams.
    assert_ne!(rounds(2, 1), rounds(3, 1));
}

#[test]
fn scheduler_is_shared_between_threads() {
    fn assert_sync<T: Send + Sync>() {}
    assert_sync::<Scheduler>();
    fn assert_send<T: Send>() {}
    assert_send::<ThiefState>();
}

/// The lazy walk, for every policy, uneven layouts and many rounds: each
/// other worker exactly once, never the thief; the node policies go node by
/// node (each node's workers in one run, rotated); `remaining()` is the walk.
#[test]
fn victim_walk_covers_every_other_worker_once_node_by_node() {
    let layouts: Vec<Vec<usize>> =
        vec![vec![0, 0, 0, 1, 1, 2, 2, 2, 2], vec![1, 0, 1, 0, 3], layout(4, 3), layout(1, 7)];
    for wn in layouts {
        let nodes = wn.iter().max().unwrap() + 1;
        let topo = Topology::uniform(nodes.max(4), 4);
        for p in Policy::ALL.into_iter().filter(|p| p.steals()) {
            let s = Scheduler::new(p, PolicyOptions::default(), wn.clone(), &topo);
            for thief in 0..wn.len() {
                let mut st = s.new_thief_state(thief, thief as u64 + 5);
                for round in 0..20 {
                    let before = st.clone();
                    let walk = s.victims(thief, &mut st);
                    let ahead: Vec<usize> = walk.remaining().collect();
                    let v: Vec<usize> = walk.collect();
                    assert_eq!(ahead, v, "{p} thief {thief} round {round}");
                    // The lazy walk is exactly the list the public reference
                    // functions of `steal` build from the same draws.
                    let mut reference = Vec::new();
                    if p == Policy::RandomSteal {
                        let start = (before.clone().next_u64() % wn.len() as u64) as usize;
                        steal::random_victims(wn.len(), thief, start, &mut reference);
                    } else {
                        assert_eq!(st.order.len(), st.starts.len());
                        for (&node, &start) in st.order.iter().zip(&st.starts) {
                            steal::push_node_victims(s.node_workers(node), start, thief, &mut reference);
                        }
                    }
                    assert_eq!(v, reference, "{p} thief {thief} round {round}: walk vs steal::*_victims");
                    let mut sorted = v.clone();
                    sorted.sort_unstable();
                    let others: Vec<usize> = (0..wn.len()).filter(|&w| w != thief).collect();
                    assert_eq!(sorted, others, "{p} thief {thief} round {round}: {v:?}");
                    if p == Policy::RandomSteal {
                        // A rotation of 0..n with the thief left out.
                        let n = wn.len();
                        let want: Vec<usize> = (0..n).map(|i| (v[0] + i) % n).filter(|&w| w != thief).collect();
                        assert_eq!(v, want, "{p}");
                        continue;
                    }
                    let runs = node_runs(&victim_nodes(&s, &v));
                    let mut dedup = runs.clone();
                    dedup.sort_unstable();
                    dedup.dedup();
                    assert_eq!(runs.len(), dedup.len(), "{p}: a node visited twice: {runs:?}");
                    if p != Policy::LoadSteal && s.node_workers(wn[thief]).len() > 1 {
                        assert_eq!(runs[0], wn[thief], "{p}: own node first");
                    }
                    for &node in &runs {
                        let got: Vec<usize> = v.iter().copied().filter(|&w| s.worker_node(w) == node).collect();
                        let ws = s.node_workers(node);
                        let r = ws.iter().position(|&w| w == got[0]).unwrap();
                        let want: Vec<usize> =
                            ws[r..].iter().chain(&ws[..r]).copied().filter(|&w| w != thief).collect();
                        assert_eq!(got, want, "{p} node {node}: a rotation of its workers");
                    }
                    // Some steal outcomes, for the next round's estimators.
                    let mut walk = s.victims(thief, &mut st);
                    if let Some(first) = walk.next() {
                        walk.record_steal(first, round % 3 == 0);
                    }
                }
            }
        }
    }
}

/// `Victims::record_steal` is `Scheduler::record_steal`.
#[test]
fn recording_through_the_walk_equals_recording_on_the_scheduler() {
    for p in [Policy::LoadSteal, Policy::HybridSteal, Policy::Nlh] {
        let a = sched(p, 3, 2);
        let b = sched(p, 3, 2);
        let (mut sa, mut sb) = (a.new_thief_state(1, 9), b.new_thief_state(1, 9));
        for round in 0..30 {
            let va: Vec<usize> = a.victims(1, &mut sa).collect();
            let mut walk = b.victims(1, &mut sb);
            let mut vb = Vec::new();
            while let Some(v) = walk.next() {
                vb.push(v);
                walk.record_steal(v, (v + round) % 4 == 0);
            }
            for &v in &va {
                a.record_steal(1, &mut sa, v, (v + round) % 4 == 0);
            }
            assert_eq!(va, vb, "{p} round {round}");
            assert_eq!(sa.estimators(), sb.estimators(), "{p} round {round}");
            for w in 0..6 {
                assert_eq!(view_of(&a, &sa, w), view_of(&b, &sb, w), "{p} worker {w}");
            }
        }
    }
}

/// Rule 2 of `status`: the workers of a node share their entries. What one
/// thief learnt about a node mate, and a worker's own status, change the
/// estimator of its node mates; remote views stay private.
#[test]
fn node_mates_share_their_status_board_remote_views_stay_private() {
    let s = sched(Policy::LoadSteal, 2, 3); // node 0: 0, 1, 2; node 1: 3, 4, 5
    let mut t0 = s.new_thief_state(0, 1);
    let mut t1 = s.new_thief_state(1, 2);
    s.record_steal(1, &mut t1, 2, false); // thief 1 found worker 2 idle
    s.set_own_status(1, &t1, false); // and is idle itself
    let _ = victims(&s, 0, &mut t0);
    // Thief 0 sees both: node 0 = (idle 1, idle 2) / 2 = 0.0 < node 1's 0.5.
    assert_eq!(t0.estimators(), &[0.0, 0.5]);
    assert_eq!(node_runs(&victim_nodes(&s, &victims(&s, 0, &mut t0))), vec![1, 0]);
    // Thief 1 learns node 1 is busy; thief 0's view of node 1 is unchanged.
    s.record_steal(1, &mut t1, 4, true);
    assert_eq!(t1.node_view(1).unwrap().status(), Some(Busy));
    assert_eq!(t0.node_view(1).unwrap().status(), Some(DontKnow));
    // Worker 2 gets work: its node mates see it busy.
    let t2 = s.new_thief_state(2, 3);
    s.set_own_status(2, &t2, true);
    let _ = victims(&s, 0, &mut t0);
    assert_eq!(t0.estimators(), &[0.5, 0.5]); // (idle 1 + busy 2) / 2
}

/// With one worker per node (the benchmarks' `uniform:2x1`) the board of a
/// thief's node holds only the thief, whose entry is never read: its own
/// status cannot change a decision, as with the thesis' private bitmaps.
#[test]
fn one_worker_per_node_the_board_never_changes_a_decision() {
    for p in [Policy::LoadSteal, Policy::HybridSteal, Policy::Nlh] {
        let s = sched(p, 3, 1);
        let mut st = s.new_thief_state(0, 4);
        let mut twin = s.new_thief_state(0, 4);
        for round in 0..20 {
            s.set_own_status(0, &st, round % 2 == 0); // only `st`'s thief flips its status
            let a = victims(&s, 0, &mut st);
            let b = victims(&s, 0, &mut twin);
            assert_eq!(a, b, "{p} round {round}");
            assert_eq!(st.estimators()[0], 0.0);
            let v = a[round % a.len()];
            s.record_steal(0, &mut st, v, round % 3 == 0);
            s.record_steal(0, &mut twin, v, round % 3 == 0);
        }
    }
}

#[test]
#[should_panic(expected = "own node")]
fn a_thiefs_own_node_has_no_private_view() {
    let s = sched(Policy::Nlh, 2, 2);
    let mut st = s.new_thief_state(0, 1);
    s.set_node_view(&mut st, 0, NodeView::uniform(2, Busy));
}

#[test]
#[should_panic(expected = "must describe its 2 workers")]
fn a_node_view_must_count_the_nodes_workers() {
    let s = sched(Policy::Nlh, 2, 2);
    let mut st = s.new_thief_state(0, 1);
    s.set_node_view(&mut st, 1, NodeView::uniform(3, Busy));
}

/// Per-worker policy memory depends on the nodes, not on the workers
/// (`tests/policy_memory.rs` measures the real heap).
#[test]
fn thief_state_bytes_do_not_grow_with_the_worker_count() {
    for p in Policy::ALL {
        for nodes in [1, 4] {
            let bytes: Vec<usize> = [4, 64, 1024]
                .into_iter()
                .map(|n| {
                    let s = Scheduler::new(
                        p,
                        PolicyOptions::default(),
                        layout(nodes, n / nodes),
                        &Topology::uniform(nodes, n / nodes),
                    );
                    let mut st = s.new_thief_state(0, 1);
                    for _ in 0..3 {
                        let mut walk = s.victims(0, &mut st);
                        while let Some(v) = walk.next() {
                            walk.record_steal(v, false);
                        }
                    }
                    st.heap_bytes()
                })
                .collect();
            assert!(bytes.windows(2).all(|w| w[0] == w[1]), "{p} on {nodes} nodes: {bytes:?}");
            assert!(bytes[0] <= nodes * 48, "{p} on {nodes} nodes: {} bytes", bytes[0]);
        }
    }
}

/// A probe that counts its calls (the skipped probes of `place_nlh`).
struct CountingProbe {
    lens: Vec<usize>,
    calls: std::cell::Cell<usize>,
}

impl LoadProbe for CountingProbe {
    fn queue_len(&self, w: usize) -> usize {
        self.calls.set(self.calls.get() + 1);
        self.lens[w]
    }
}

#[test]
fn place_nlh_is_the_pure_decision_for_any_snapshot() {
    // Random workloads (pre-placed fibers) and queue lengths on 1 to 4
    // nodes of 1 to 3 workers: the scheduler's answer is the pure
    // functions' answer, with and without a spawner on the chosen node.
    let mut rng = 0x2545_F491_4F6C_DD1Du64;
    let mut next = |m: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        (rng % m) as usize
    };
    for _ in 0..2000 {
        let (nodes, per) = (1 + next(4), 1 + next(3));
        let s = nlh(nodes, per, PolicyOptions::default());
        let workers = nodes * per;
        for _ in 0..next(6) {
            s.record_placement(next(workers as u64));
        }
        let lens: Vec<usize> = (0..workers).map(|_| next(3)).collect();
        let spawner = if next(4) == 0 { None } else { Some(next(workers as u64)) };
        let local_node = next(nodes as u64 + 1); // sometimes out of range
        let workloads: Vec<i64> = (0..nodes).map(|n| s.node_workload(n)).collect();
        let local = (local_node < nodes).then_some(local_node);
        let node = placement::nlh_choose_node(&workloads, local);
        let want = placement::nlh_choose_worker(s.node_workers(node), |w| lens[w], spawner);
        let probe = CountingProbe { lens: lens.clone(), calls: Default::default() };
        assert_eq!(s.place_nlh(local_node, spawner, &probe), want, "{nodes}x{per} lens {lens:?} spawner {spawner:?}");
        assert!(probe.calls.get() <= per);
        assert_eq!(s.node_workload(node), workloads[node] + 1);
        // And `place` from a worker: its node is the local one.
        if let Some(sp) = spawner {
            let workloads: Vec<i64> = (0..nodes).map(|n| s.node_workload(n)).collect();
            let node = placement::nlh_choose_node(&workloads, Some(s.worker_node(sp)));
            let want = placement::nlh_choose_worker(s.node_workers(node), |w| lens[w], spawner);
            assert_eq!(s.place(spawner, &lens), want);
        }
    }
}

#[test]
fn place_nlh_skips_probes_that_cannot_change_the_answer() {
    // One worker on the node: no probe.
    let s = nlh(2, 1, PolicyOptions::default());
    let p = CountingProbe { lens: vec![5, 5], calls: Default::default() };
    assert_eq!(s.place(Some(1), &p), 1);
    assert_eq!(p.calls.get(), 0);
    // The spawner's queue is empty: only that one probe.
    let s = nlh(1, 4, PolicyOptions::default());
    let p = CountingProbe { lens: vec![1, 0, 0, 3], calls: Default::default() };
    assert_eq!(s.place(Some(2), &p), 2);
    assert_eq!(p.calls.get(), 1);
    // The spawner's queue is not empty: every worker, the spawner once.
    let p = CountingProbe { lens: vec![1, 0, 3, 0], calls: Default::default() };
    assert_eq!(s.place(Some(2), &p), 1);
    assert_eq!(p.calls.get(), 4);
}

#[test]
fn sharded_counters_add_up_across_threads() {
    // Spawners on their own threads (the runtime's owner path) and shared
    // callers (`place`, `record_placement`, foreign spawns) at once, on one
    // node (the workload is sharded too) and on two (it is not).
    for nodes in [1, 2] {
        let s = nlh(nodes, 2, PolicyOptions::default());
        let workers = 2 * nodes;
        let q = vec![0usize; workers];
        let per_thread = 5000u64;
        std::thread::scope(|sc| {
            for t in 0..workers {
                let (s, q) = (&s, &q);
                sc.spawn(move || {
                    for i in 0..per_thread {
                        match i % 4 {
                            0 | 1 => drop(s.place_on_spawner_thread(Some(t), q)),
                            2 => drop(s.place(None, q)),
                            _ => s.record_placement_on_spawner_thread(Some(t), (t + 1) % workers),
                        }
                    }
                });
            }
            sc.spawn(|| {
                for i in 0..per_thread {
                    s.record_placement(i as usize % workers);
                }
            });
        });
        let total = (workers as u64 + 1) * per_thread;
        let placed: u64 = (0..nodes).map(|n| s.placements(n)).sum();
        let load: i64 = (0..nodes).map(|n| s.node_workload(n)).sum();
        assert_eq!(placed, total, "{nodes} node(s)");
        assert_eq!(load, total as i64, "{nodes} node(s): thesis counts only grow");
        for n in 0..nodes {
            assert_eq!(s.node_workload(n), s.placements(n) as i64, "node {n}");
        }
    }
}

#[test]
fn single_node_counts_still_take_departures() {
    let opts = PolicyOptions { decrement_workload: true, ..PolicyOptions::default() };
    let s = nlh(1, 2, opts);
    let q = [1usize, 0];
    assert_eq!(s.place_on_spawner_thread(Some(0), &q), 1);
    assert_eq!(s.place(None, &q), 1);
    s.record_placement(0);
    assert_eq!((s.placements(0), s.node_workload(0)), (3, 3));
    s.fiber_left_node(0);
    s.fiber_left_node(0);
    s.fiber_entered_node(0);
    assert_eq!((s.placements(0), s.node_workload(0)), (3, 2));
}
