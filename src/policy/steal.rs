//! Victim order: pure functions from a snapshot (node estimators, distances,
//! node membership) to the order in which an idle worker tries victims.
//!
//! A steal round works node by node: first a *node order* is decided
//! ([`numa_node_order`], [`load_node_order`], [`hybrid_node_order`]), then
//! each node's workers are appended with [`push_node_victims`]. The worker
//! loop tries the victims in that order and stops at the first success
//! (thesis Alg. 4.3-4.5: "as soon as one steal attempt was successful, we
//! return").
//!
//! # Tie-breaks (the thesis leaves them to `std::unordered_map` order)
//!
//! * Remote nodes that compare equal keep their order in the thief's
//!   *distance list* ([`nodes_by_distance`]: nearer first, then lower id).
//! * The thief's own node wins every tie it is part of.
//! * Inside a node, workers are taken in index order starting at a rotation
//!   chosen by the caller (the [`Scheduler`](super::Scheduler) draws it at
//!   random per node and round, so that the thieves of one node do not all
//!   hammer the same first victim; the thesis always starts at the first
//!   worker of the node). The thief itself is skipped.

/// The other nodes sorted nearest first (ties: lower id first): the
/// thief's per-node distance list, computed once per node.
///
/// ```
/// use numafiber::policy::steal::nodes_by_distance;
/// assert_eq!(nodes_by_distance(&[20, 10, 30, 20], 1), vec![0, 3, 2]);
/// ```
pub fn nodes_by_distance(distances_from_own: &[u32], own: usize) -> Vec<usize> {
    let mut v: Vec<usize> = (0..distances_from_own.len()).filter(|&n| n != own).collect();
    v.sort_by_key(|&n| (distances_from_own[n], n));
    v
}

/// NUMA-aware order (Alg. 4.3): own node, then the remote nodes by
/// increasing distance. `remote_by_distance` is the thief's distance list.
///
/// ```
/// use numafiber::policy::steal::numa_node_order;
/// let mut out = Vec::new();
/// numa_node_order(2, &[3, 0, 1], &mut out);
/// assert_eq!(out, vec![2, 3, 0, 1]);
/// ```
pub fn numa_node_order(own: usize, remote_by_distance: &[usize], out: &mut Vec<usize>) {
    out.clear();
    out.push(own);
    out.extend_from_slice(remote_by_distance);
}

/// Load-aware order (Alg. 4.4, SWAS): nodes by *descending* estimator
/// ([`node_estimator`](super::status::node_estimator)); on ties the own node
/// first, then the distance list order.
///
/// ```
/// use numafiber::policy::steal::load_node_order;
/// let mut out = Vec::new();
/// // node 2 looks busiest; nodes 0 (own) and 1 tie at 0.5.
/// load_node_order(&[0.5, 0.5, 0.9], 0, &[1, 2], &mut out);
/// assert_eq!(out, vec![2, 0, 1]);
/// ```
pub fn load_node_order(estimators: &[f64], own: usize, remote_by_distance: &[usize], out: &mut Vec<usize>) {
    numa_node_order(own, remote_by_distance, out);
    // Stable: equal estimators keep own-first, then distance order.
    out.sort_by(|&a, &b| estimators[b].total_cmp(&estimators[a]));
}

/// NLLASS scheduling score of a remote node (Alg. 4.5):
/// `(1 - estimator) * distance`. Lower is better; a node whose workers all
/// look busy scores 0.
///
/// ```
/// use numafiber::policy::steal::hybrid_score;
/// assert_eq!(hybrid_score(0.25, 20), 15.0);
/// assert_eq!(hybrid_score(1.0, 30), 0.0);
/// ```
pub fn hybrid_score(estimator: f64, distance: u32) -> f64 {
    (1.0 - estimator) * f64::from(distance)
}

/// NLLASS scores of every node as seen from `own`: `out[own] = 0`, the
/// others [`hybrid_score`]. `out` is cleared first.
pub fn hybrid_scores(estimators: &[f64], distances_from_own: &[u32], own: usize, out: &mut Vec<f64>) {
    out.clear();
    out.extend(estimators.iter().zip(distances_from_own).enumerate().map(|(n, (&e, &d))| {
        if n == own {
            0.0
        } else {
            hybrid_score(e, d)
        }
    }));
}

/// Hybrid (NLLASS) order (Alg. 4.5): the own node always first (score 0),
/// then remote nodes by *ascending* [`hybrid_score`]; ties keep the
/// distance list order. `scores` is scratch space (cleared, then holds the
/// scores of [`hybrid_scores`]).
///
/// ```
/// use numafiber::policy::steal::hybrid_node_order;
/// // Thesis Table 4.1: estimators 1/3 busy on node 1, 2/3 on node 2,
/// // distances 2 and 3 from node 0.
/// let (mut out, mut scores) = (Vec::new(), Vec::new());
/// hybrid_node_order(&[0.0, 1.0 / 3.0, 2.0 / 3.0], &[0, 2, 3], 0, &[1, 2], &mut scores, &mut out);
/// assert_eq!(out, vec![0, 2, 1]);
/// ```
pub fn hybrid_node_order(
    estimators: &[f64],
    distances_from_own: &[u32],
    own: usize,
    remote_by_distance: &[usize],
    scores: &mut Vec<f64>,
    out: &mut Vec<usize>,
) {
    hybrid_scores(estimators, distances_from_own, own, scores);
    out.clear();
    out.extend_from_slice(remote_by_distance);
    out.sort_by(|&a, &b| scores[a].total_cmp(&scores[b]));
    out.insert(0, own);
}

/// Append the workers of one node to `out`, in index order starting at
/// position `start % workers.len()`, skipping `thief`.
///
/// ```
/// use numafiber::policy::steal::push_node_victims;
/// let mut out = vec![9];
/// push_node_victims(&[4, 5, 6, 7], 2, 5, &mut out);
/// assert_eq!(out, vec![9, 6, 7, 4]);
/// ```
pub fn push_node_victims(workers: &[usize], start: usize, thief: usize, out: &mut Vec<usize>) {
    let n = workers.len();
    if n == 0 {
        return;
    }
    let start = start % n;
    out.extend(workers[start..].iter().chain(&workers[..start]).copied().filter(|&w| w != thief));
}

/// Classic random victim order (Blumofe-Leiserson baseline): every worker
/// but the thief, rotated to begin at `start % workers`. With `start` drawn
/// uniformly per round, the first victim is uniform over the other workers
/// (the thief's slot is skipped, so the worker after it is twice as likely
/// as the others to come first).
///
/// ```
/// use numafiber::policy::steal::random_victims;
/// let mut out = Vec::new();
/// random_victims(4, 1, 3, &mut out);
/// assert_eq!(out, vec![3, 0, 2]);
/// ```
pub fn random_victims(workers: usize, thief: usize, start: usize, out: &mut Vec<usize>) {
    out.clear();
    if workers == 0 {
        return;
    }
    let start = start % workers;
    out.extend((0..workers).map(|i| (start + i) % workers).filter(|&w| w != thief));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_list_sorts_by_distance_then_id_and_excludes_own() {
        // 4 nodes, distances 10/20/30 like the numa-vm.
        let row = [30, 20, 10, 20];
        assert_eq!(nodes_by_distance(&row, 2), vec![1, 3, 0]);
        assert_eq!(nodes_by_distance(&[10], 0), Vec::<usize>::new());
    }

    #[test]
    fn numa_order_is_own_then_distance_list() {
        let mut out = vec![7, 7];
        numa_node_order(1, &nodes_by_distance(&[20, 10, 30, 21], 1), &mut out);
        assert_eq!(out, vec![1, 0, 3, 2]);
    }

    #[test]
    fn load_order_descending_estimator() {
        let mut out = Vec::new();
        load_node_order(&[0.0, 0.25, 1.0, 0.5], 0, &[1, 2, 3], &mut out);
        assert_eq!(out, vec![2, 3, 1, 0]);
    }

    #[test]
    fn load_order_ties_own_first_then_distance_list() {
        let mut out = Vec::new();
        // All DONTKNOW at start: every estimator 0.5; own node 2 first,
        // then the distance list as given (3 nearer than 0 nearer than 1).
        load_node_order(&[0.5; 4], 2, &[3, 0, 1], &mut out);
        assert_eq!(out, vec![2, 3, 0, 1]);
        // Remotes 1 and 3 tie at 0.75, above own (0.5) and 0 (0.5): 3
        // before 1 (distance list), then own before 0.
        load_node_order(&[0.5, 0.75, 0.5, 0.75], 2, &[3, 0, 1], &mut out);
        assert_eq!(out, vec![3, 1, 2, 0]);
        // Own ties with the top remote: own first.
        load_node_order(&[1.0, 0.0, 1.0], 2, &[0, 1], &mut out);
        assert_eq!(out, vec![2, 0, 1]);
    }

    /// Thesis Table 4.1: 3 nodes x 3 workers; thief worker 3 on node 0.
    /// Node 0: IDLE IDLE IDLE (distance 0); node 1: BUSY IDLE IDLE
    /// (distance 2); node 2: BUSY BUSY IDLE (distance 3).
    #[test]
    fn table_4_1_scores_and_victim_node() {
        use super::super::status::{node_estimator, WorkerStatus::*};
        let node_workers = [vec![0, 1, 2], vec![3, 4, 5], vec![6, 7, 8]];
        let states = [Idle, Idle, Idle, Busy, Idle, Idle, Busy, Busy, Idle];
        let est: Vec<f64> = node_workers.iter().map(|ws| node_estimator(ws.iter().map(|&w| states[w]))).collect();
        // The thesis prints 1 - estimator truncated to two decimals.
        let trunc2 = |x: f64| (x * 100.0).floor() / 100.0;
        assert_eq!(trunc2(1.0 - est[1]), 0.66);
        assert_eq!(trunc2(1.0 - est[2]), 0.33);
        // ... and multiplies the truncated values: 1.32 and 0.99.
        assert!((trunc2(1.0 - est[1]) * 2.0 - 1.32).abs() < 1e-12);
        assert!((trunc2(1.0 - est[2]) * 3.0 - 0.99).abs() < 1e-12);
        // Exact scores: 4/3 and 1.
        let distances = [0, 2, 3];
        let mut scores = Vec::new();
        hybrid_scores(&est, &distances, 0, &mut scores);
        assert_eq!(scores[0], 0.0);
        assert!((scores[1] - 4.0 / 3.0).abs() < 1e-12);
        assert!((scores[2] - 1.0).abs() < 1e-12);
        // Victim node: 2 (after the own node, which always comes first).
        let mut order = Vec::new();
        hybrid_node_order(&est, &distances, 0, &nodes_by_distance(&distances, 0), &mut scores, &mut order);
        assert_eq!(order, vec![0, 2, 1]);
        // Worker 3 of the thesis is our worker 2 (0-based): it tries its
        // node mates, then workers 1 and 2 of node 2 (our 6, 7, 8), then node 1.
        let mut victims = Vec::new();
        for &n in &order {
            push_node_victims(&node_workers[n], 0, 2, &mut victims);
        }
        assert_eq!(victims, vec![0, 1, 6, 7, 8, 3, 4, 5]);
    }

    #[test]
    fn hybrid_own_first_even_when_a_remote_scores_zero() {
        let mut out = Vec::new();
        let mut scores = Vec::new();
        // Node 2 fully busy (estimator 1) scores 0 like the own node 1.
        hybrid_node_order(&[0.5, 0.0, 1.0], &[20, 10, 20], 1, &[0, 2], &mut scores, &mut out);
        assert_eq!(out, vec![1, 2, 0]);
        assert_eq!(scores, vec![10.0, 0.0, 0.0]);
    }

    #[test]
    fn hybrid_ties_keep_distance_list_order() {
        let mut out = Vec::new();
        let mut scores = Vec::new();
        // Node 1: (1 - 0.5) * 20 = 10; node 2: (1 - 0.75) * 40 = 10.
        hybrid_node_order(&[0.0, 0.5, 0.75], &[10, 20, 40], 0, &[1, 2], &mut scores, &mut out);
        assert_eq!(out, vec![0, 1, 2]);
        // Same scores, distance list says 2 first (e.g. equal distances).
        hybrid_node_order(&[0.0, 0.5, 0.5], &[10, 20, 20], 0, &[2, 1], &mut scores, &mut out);
        assert_eq!(out, vec![0, 2, 1]);
    }

    #[test]
    fn hybrid_far_busy_node_beats_near_idle_node() {
        let mut out = Vec::new();
        let mut scores = Vec::new();
        // Node 1 near (20) but idle: 20; node 3 far (30) but busy: 3.
        hybrid_node_order(&[0.0, 0.0, 0.5, 0.9], &[10, 20, 20, 30], 0, &[1, 2, 3], &mut scores, &mut out);
        assert_eq!(out, vec![0, 3, 2, 1]);
    }

    #[test]
    fn node_victims_rotate_and_skip_thief() {
        let mut out = Vec::new();
        push_node_victims(&[3, 4, 5], 0, 4, &mut out);
        assert_eq!(out, vec![3, 5]);
        out.clear();
        push_node_victims(&[3, 4, 5], 7, 9, &mut out); // 7 % 3 == 1
        assert_eq!(out, vec![4, 5, 3]);
        push_node_victims(&[], 3, 0, &mut out);
        assert_eq!(out, vec![4, 5, 3]);
    }

    #[test]
    fn random_victims_cover_everyone_but_thief() {
        let mut out = Vec::new();
        for start in 0..10 {
            random_victims(5, 2, start, &mut out);
            assert_eq!(out.len(), 4);
            let mut s = out.clone();
            s.sort_unstable();
            assert_eq!(s, vec![0, 1, 3, 4]);
            if start % 5 != 2 {
                assert_eq!(out[0], start % 5);
            } else {
                assert_eq!(out[0], 3);
            }
        }
        random_victims(1, 0, 0, &mut out);
        assert!(out.is_empty());
        random_victims(0, 0, 0, &mut out);
        assert!(out.is_empty());
    }
}
