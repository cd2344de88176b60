//! Scheduling policies: where new fibers go (placement) and whom an idle
//! worker robs (victim order).
//!
//! OWNED BY THE POLICY HELPER: this is the minimal seam the runtime core
//! compiles against (RoundRobin and RandomSteal only). The full thesis
//! policies replace the bodies, keeping these signatures.

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::topology::Topology;

/// The scheduler of a runtime (see the table in the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Policy {
    /// Round-robin placement, no stealing (thesis Alg. 4.2; the baseline).
    RoundRobin,
    /// Round-robin placement, classic random victim, steal-half.
    RandomSteal,
    /// Round-robin placement, own node first, then nodes by distance (Alg. 4.3).
    NumaSteal,
    /// Round-robin placement, busiest node first by status bitmaps (Alg. 4.4).
    LoadSteal,
    /// Round-robin placement, NLLASS load x distance score (Alg. 4.5).
    HybridSteal,
    /// NLH placement (Alg. 4.6) over `HybridSteal` stealing.
    #[default]
    Nlh,
}

/// How much a thief takes from a victim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum StealChunk {
    /// Half of the victim's queue, rounded up (steal-half).
    #[default]
    Half,
    /// At most this many fibers.
    Fixed(usize),
}

impl StealChunk {
    /// How many fibers to take from a victim holding `victim_len`.
    pub fn limit(&self, victim_len: usize) -> usize {
        match *self {
            StealChunk::Half => victim_len.div_ceil(2),
            StealChunk::Fixed(n) => n.min(victim_len),
        }
    }
}

/// Switches that go beyond the thesis (stub; the policy module defines them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PolicyOptions {
    /// NLH workload counts fall when fibers finish.
    pub decrement_workload: bool,
    /// Non-worker spawners use the node of their current CPU.
    pub spawner_node_from_cpu: bool,
    /// Work-first spawning.
    pub work_first: bool,
}

/// Read-only view of the runtime's load that placement may consult.
pub(crate) trait LoadProbe {
    /// Approximate number of queued fibers of worker `w`.
    fn queue_len(&self, w: usize) -> usize;
}

/// Per-thief private state (rng, SWAS status bitmap...).
#[derive(Debug)]
pub(crate) struct ThiefState {
    rng: u64,
}

/// Policy decisions for one runtime.
#[derive(Debug)]
pub(crate) struct Scheduler {
    policy: Policy,
    worker_node: Vec<usize>,
    rr: AtomicUsize,
}

impl Scheduler {
    pub(crate) fn new(policy: Policy, _opts: PolicyOptions, worker_node: Vec<usize>, _topo: &Topology) -> Scheduler {
        Scheduler { policy, worker_node, rr: AtomicUsize::new(0) }
    }
    pub(crate) fn policy(&self) -> Policy {
        self.policy
    }
    /// Whether idle workers steal at all.
    pub(crate) fn steals(&self) -> bool {
        self.policy != Policy::RoundRobin
    }
    pub(crate) fn new_thief_state(&self, worker: usize, seed: u64) -> ThiefState {
        ThiefState { rng: seed ^ (worker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1 }
    }
    /// Choose the worker for a new fiber. `spawner` is the spawning worker,
    /// if the spawner is a worker of this runtime.
    pub(crate) fn place(&self, spawner: Option<usize>, _probe: &dyn LoadProbe) -> usize {
        let _ = spawner;
        self.rr.fetch_add(1, Ordering::Relaxed) % self.worker_node.len()
    }
    /// Fill `out` with the victims to try, in order.
    pub(crate) fn victims(&self, thief: usize, st: &mut ThiefState, out: &mut Vec<usize>) {
        out.clear();
        let n = self.worker_node.len();
        if n <= 1 || !self.steals() {
            return;
        }
        let start = (xorshift(&mut st.rng) % n as u64) as usize;
        out.extend((0..n).map(|i| (start + i) % n).filter(|&w| w != thief));
    }
    /// Tell the policy how an attempt on `victim` went.
    pub(crate) fn record_steal(&self, _thief: usize, _st: &mut ThiefState, _victim: usize, _success: bool) {}
    /// A worker's own status: busy while it runs fibers, idle before stealing.
    pub(crate) fn set_own_status(&self, _worker: usize, _st: &mut ThiefState, _busy: bool) {}
    /// A fiber placed by `place` finished (or was stolen away from `node`).
    pub(crate) fn fiber_left_node(&self, _node: usize) {}
    /// Placements charged to `node`.
    pub(crate) fn placements(&self, _node: usize) -> u64 {
        0
    }
    /// The workload count of `node`.
    pub(crate) fn node_workload(&self, _node: usize) -> i64 {
        0
    }
}

fn xorshift(s: &mut u64) -> u64 {
    let mut x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    x
}
