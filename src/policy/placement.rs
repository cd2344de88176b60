//! Placement of new fibers: pure functions from a snapshot (per-node
//! workload counts, per-worker queue lengths) to a worker.
//!
//! * Round-robin (Alg. 4.2): [`round_robin`].
//! * NLH (Alg. 4.6): [`nlh_choose_node`] picks the node, then
//!   [`nlh_choose_worker`] the worker on it.
//!
//! # The median rule (Alg. 4.6), as implemented
//!
//! Let `local` be the spawner's node and `others` the workloads of every
//! *other* node that has workers.
//!
//! 1. If `others` is empty (a single node), place locally.
//! 2. Otherwise, if `workload[local] < median(others)` (strictly), place
//!    locally. The median of an even count is the mean of the two middle
//!    values (compared exactly, as `2 * local < a + b`).
//! 3. Otherwise place on the least-loaded node; ties go to the local node
//!    if it is among the least loaded, else to the lowest node index.
//!
//! A spawner whose node has no workers (possible when a runtime uses fewer
//! workers than the topology has nodes) has no local node: step 3 applies.

/// Round-robin placement (Alg. 4.2): the `counter`-th fiber goes to worker
/// `counter % workers`.
///
/// ```
/// use numafiber::policy::placement::round_robin;
/// assert_eq!((0..5).map(|c| round_robin(c, 3)).collect::<Vec<_>>(), vec![0, 1, 2, 0, 1]);
/// ```
///
/// # Panics
/// If `workers == 0`.
pub fn round_robin(counter: usize, workers: usize) -> usize {
    counter % workers
}

/// Twice the median of `values` (an integer even for an even count), or
/// `None` when `values` is empty.
///
/// ```
/// use numafiber::policy::placement::median_x2;
/// assert_eq!(median_x2(&[5, 1, 3]), Some(6));    // median 3
/// assert_eq!(median_x2(&[4, 1, 3, 9]), Some(7)); // median (3 + 4) / 2 = 3.5
/// assert_eq!(median_x2(&[]), None);
/// ```
pub fn median_x2(values: &[i64]) -> Option<i64> {
    if values.is_empty() {
        return None;
    }
    let mut buf = SmallBuf::new();
    let v = buf.fill(values.iter().copied(), values.len());
    v.sort_unstable();
    let n = v.len();
    Some(if n % 2 == 1 { 2 * v[n / 2] } else { v[n / 2 - 1] + v[n / 2] })
}

/// Twice the median of every workload but `workloads[skip]`.
fn median_x2_of_others(workloads: &[i64], skip: usize) -> Option<i64> {
    let mut buf = SmallBuf::new();
    let others = buf.fill(
        workloads.iter().enumerate().filter(|&(i, _)| i != skip).map(|(_, &w)| w),
        workloads.len().saturating_sub(1),
    );
    median_x2(others)
}

/// The least-loaded entry of `workloads`; ties go to `prefer` when it is
/// among the least loaded, else to the lowest index.
///
/// ```
/// use numafiber::policy::placement::least_loaded;
/// assert_eq!(least_loaded(&[3, 1, 1], None), 1);
/// assert_eq!(least_loaded(&[3, 1, 1], Some(2)), 2);
/// assert_eq!(least_loaded(&[3, 1, 1], Some(0)), 1);
/// ```
///
/// # Panics
/// If `workloads` is empty.
pub fn least_loaded(workloads: &[i64], prefer: Option<usize>) -> usize {
    let min = *workloads.iter().min().expect("least_loaded of no nodes");
    match prefer {
        Some(p) if workloads.get(p) == Some(&min) => p,
        _ => workloads.iter().position(|&w| w == min).expect("min is present"),
    }
}

/// NLH node choice (Alg. 4.6, rules in the module docs). `workloads[i]` is
/// the workload count of candidate node `i` (nodes that have workers);
/// `local` is the spawner's candidate index, `None` when its node has no
/// workers.
///
/// ```
/// use numafiber::policy::placement::nlh_choose_node;
/// // Local node 0 (workload 2) is below the median (3) of 1, 3, 9: stay.
/// assert_eq!(nlh_choose_node(&[2, 1, 3, 9], Some(0)), 0);
/// // Local node 0 (workload 3) is not below 3: go to the least loaded.
/// assert_eq!(nlh_choose_node(&[3, 1, 3, 9], Some(0)), 1);
/// ```
///
/// # Panics
/// If `workloads` is empty.
pub fn nlh_choose_node(workloads: &[i64], local: Option<usize>) -> usize {
    assert!(!workloads.is_empty(), "nlh_choose_node of no nodes");
    let Some(local) = local.filter(|&l| l < workloads.len()) else {
        return least_loaded(workloads, None);
    };
    match median_x2_of_others(workloads, local) {
        None => local,
        Some(m2) if 2 * workloads[local] < m2 => local,
        Some(_) => least_loaded(workloads, Some(local)),
    }
}

/// NLH worker choice on the chosen node (Alg. 4.6): the worker with the
/// shortest queue; ties go to the spawner if it is one of them (its queue
/// is hot in its cache and a local push needs no remote inbox), else to the
/// first of `workers` (lowest index: the runtime lists them ascending).
///
/// ```
/// use numafiber::policy::placement::nlh_choose_worker;
/// let q = [5usize, 2, 2, 7];
/// assert_eq!(nlh_choose_worker(&[0, 1, 2, 3], |w| q[w], None), 1);
/// assert_eq!(nlh_choose_worker(&[0, 1, 2, 3], |w| q[w], Some(2)), 2);
/// assert_eq!(nlh_choose_worker(&[0, 1, 2, 3], |w| q[w], Some(0)), 1);
/// ```
///
/// # Panics
/// If `workers` is empty.
#[inline]
pub fn nlh_choose_worker(workers: &[usize], queue_len: impl Fn(usize) -> usize, spawner: Option<usize>) -> usize {
    let mut best = *workers.first().expect("nlh_choose_worker on a node without workers");
    let mut best_len = queue_len(best);
    for &w in &workers[1..] {
        let len = queue_len(w);
        if len < best_len || (len == best_len && Some(w) == spawner) {
            best = w;
            best_len = len;
        }
    }
    best
}

/// Scratch space for the node workloads: on the stack for up to
/// `INLINE` values (every machine we know of), on the heap beyond.
pub(crate) struct SmallBuf {
    inline: [i64; SmallBuf::INLINE],
    heap: Vec<i64>,
}

impl SmallBuf {
    const INLINE: usize = 64;

    pub(crate) fn new() -> SmallBuf {
        SmallBuf { inline: [0; SmallBuf::INLINE], heap: Vec::new() }
    }

    /// Fill with `it` (which yields at most `len_hint` values if
    /// `len_hint <= INLINE`) and return the filled slice.
    pub(crate) fn fill(&mut self, it: impl Iterator<Item = i64>, len_hint: usize) -> &mut [i64] {
        if len_hint <= SmallBuf::INLINE {
            let mut n = 0;
            for (slot, v) in self.inline.iter_mut().zip(it) {
                *slot = v;
                n += 1;
            }
            &mut self.inline[..n]
        } else {
            self.heap.clear();
            self.heap.extend(it);
            &mut self.heap
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_robin_cycles() {
        let got: Vec<usize> = (0..7).map(|c| round_robin(c, 3)).collect();
        assert_eq!(got, vec![0, 1, 2, 0, 1, 2, 0]);
    }

    #[test]
    fn median_odd_even_and_large() {
        assert_eq!(median_x2(&[7]), Some(14));
        assert_eq!(median_x2(&[7, 1]), Some(8));
        assert_eq!(median_x2(&[9, 1, 5]), Some(10));
        assert_eq!(median_x2(&[9, 1, 5, 2]), Some(7));
        // Beyond the inline buffer.
        let big: Vec<i64> = (0..101).rev().collect();
        assert_eq!(median_x2(&big), Some(100));
        assert_eq!(median_x2_of_others(&[100, 1, 2, 3], 0), Some(4));
        assert_eq!(median_x2_of_others(&[100], 0), None);
    }

    #[test]
    fn median_rule_one_node_is_always_local() {
        assert_eq!(nlh_choose_node(&[0], Some(0)), 0);
        assert_eq!(nlh_choose_node(&[1_000_000], Some(0)), 0);
        // No local node at all: the only node.
        assert_eq!(nlh_choose_node(&[5], None), 0);
    }

    #[test]
    fn median_rule_two_nodes() {
        // Median of the others = the other node's workload.
        assert_eq!(nlh_choose_node(&[3, 4], Some(0)), 0); // below: local
        assert_eq!(nlh_choose_node(&[5, 4], Some(0)), 1); // above: least loaded
        assert_eq!(nlh_choose_node(&[4, 5], Some(1)), 0);
        // Equal is not below: least loaded, which ties, and the tie goes
        // to the local node.
        assert_eq!(nlh_choose_node(&[4, 4], Some(1)), 1);
        assert_eq!(nlh_choose_node(&[0, 0], Some(0)), 0);
    }

    #[test]
    fn median_rule_three_nodes_uses_mean_of_two_others() {
        // Others 4 and 8: median 6.
        assert_eq!(nlh_choose_node(&[5, 4, 8], Some(0)), 0);
        assert_eq!(nlh_choose_node(&[6, 4, 8], Some(0)), 1); // 6 !< 6
                                                             // Others 4 and 5: median 4.5; local 4 is below it and stays local
                                                             // although node 1 is just as loaded.
        assert_eq!(nlh_choose_node(&[4, 4, 5], Some(0)), 0);
        // Local 5 on node 2, others 4 and 6: median 5, not below: least
        // loaded is node 0.
        assert_eq!(nlh_choose_node(&[4, 6, 5], Some(2)), 0);
    }

    #[test]
    fn median_rule_four_nodes() {
        // Others 1, 3, 9: median 3.
        assert_eq!(nlh_choose_node(&[2, 1, 3, 9], Some(0)), 0);
        assert_eq!(nlh_choose_node(&[3, 1, 3, 9], Some(0)), 1);
        assert_eq!(nlh_choose_node(&[100, 7, 3, 9], Some(0)), 2);
        // Local node 3: others 2, 2, 8, median 2; local 2 not below; least
        // loaded ties 0, 1 and local 3: local wins.
        assert_eq!(nlh_choose_node(&[2, 2, 8, 2], Some(3)), 3);
        // Same, but local 3 at 3: nodes 0 and 1 tie, lowest index wins.
        assert_eq!(nlh_choose_node(&[2, 2, 8, 3], Some(3)), 0);
        // Spawner's node has no workers: least loaded.
        assert_eq!(nlh_choose_node(&[2, 2, 1, 3], None), 2);
        assert_eq!(nlh_choose_node(&[2, 2, 1, 3], Some(9)), 2);
    }

    #[test]
    fn median_rule_negative_counts() {
        // Decrementing counts may dip below zero transiently (a fiber ends
        // before its placement was counted): the rule still orders them.
        assert_eq!(nlh_choose_node(&[-2, -1, 0], Some(0)), 0);
        assert_eq!(nlh_choose_node(&[0, -1, -3], Some(0)), 2);
    }

    #[test]
    fn nlh_sequence_from_a_worker_keeps_local_until_above_median() {
        // Spawning 6 fibers in a row from node 0 of 3 nodes with counts that
        // only grow (thesis): the rule alternates local and least-loaded.
        let mut w = [0i64; 3];
        let mut got = Vec::new();
        for _ in 0..6 {
            let n = nlh_choose_node(&w, Some(0));
            w[n] += 1;
            got.push(n);
        }
        assert_eq!(got, vec![0, 1, 2, 0, 1, 2]);
        // With other nodes already loaded, local keeps every spawn until it
        // reaches the median of the others.
        let mut w = [0i64, 3, 5];
        let got: Vec<usize> = (0..5)
            .map(|_| {
                let n = nlh_choose_node(&w, Some(0));
                w[n] += 1;
                n
            })
            .collect();
        assert_eq!(got, vec![0, 0, 0, 0, 1]);
    }

    #[test]
    fn worker_choice_shortest_queue_and_ties() {
        let q = [3usize, 1, 4, 1, 5];
        let len = |w: usize| q[w];
        assert_eq!(nlh_choose_worker(&[0, 1, 2, 3, 4], len, None), 1);
        assert_eq!(nlh_choose_worker(&[0, 1, 2, 3, 4], len, Some(3)), 3);
        assert_eq!(nlh_choose_worker(&[0, 1, 2, 3, 4], len, Some(4)), 1);
        assert_eq!(nlh_choose_worker(&[2, 4], len, Some(0)), 2);
        assert_eq!(nlh_choose_worker(&[4], len, None), 4);
    }

    #[test]
    fn least_loaded_ties() {
        assert_eq!(least_loaded(&[2, 0, 0, 1], None), 1);
        assert_eq!(least_loaded(&[2, 0, 0, 1], Some(2)), 2);
        assert_eq!(least_loaded(&[2, 0, 0, 1], Some(3)), 1);
        assert_eq!(least_loaded(&[2, 0, 0, 1], Some(99)), 1);
    }
}
