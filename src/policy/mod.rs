//! Scheduling policies: where new fibers go (placement) and whom an idle
//! worker robs (victim order) — the schedulers of the thesis (§4.2-4.4).
//!
//! Most users only pick a [`Policy`] (and maybe a [`StealChunk`] and
//! [`PolicyOptions`]) on the runtime builder. The rest of this module is the
//! machinery the worker loop drives, public so that benchmarks and a
//! simulator can drive it too:
//!
//! * [`placement`], [`steal`], [`status`]: **pure functions** over a
//!   snapshot (workload counts, queue lengths, status bitmaps, estimators,
//!   distances) that return a decision. No atomics, no threads; unit-tested
//!   on hand-built snapshots.
//! * [`Scheduler`]: one per runtime; owns the shared state (round-robin
//!   counter, per-node workload counts) in atomics and applies the pure
//!   functions. Each worker owns one [`ThiefState`] (its rng, its private
//!   status bitmap and scratch buffers).
//!
//! # What the worker loop calls, and when
//!
//! ```text
//! build:   sched = Scheduler::new(policy, opts, worker_node, &topo)
//!          per worker w: st[w] = sched.new_thief_state(w, seed)
//! spawn:   w = sched.place(spawner, &probe)   // spawner: Some(worker) or None
//!          push the fiber to w (own deque if w == spawner, else w's inbox)
//!          (a fiber put on a worker without place(): sched.record_placement(w))
//! run:     sched.set_own_status(w, &mut st[w], true)   before running fibers
//! idle:    sched.set_own_status(w, &mut st[w], false)  before stealing
//!          if sched.steals() {
//!              sched.victims(w, &mut st[w], &mut victims)
//!              for v in victims {                      // in order
//!                  n = steal_batch_with_limit(v, chunk.limit(len(v)))
//!                  sched.record_steal(w, &mut st[w], v, n > 0)
//!                  if n > 0 { sched.fiber_moved(node(v), node(w), n); break }
//!              }
//!          }
//! wake:    a woken fiber pushed to a worker on another node than the one
//!          it was counted on: sched.fiber_moved(old_node, new_node, 1)
//! finish:  sched.fiber_left_node(node of the worker the fiber ended on)
//! stats:   sched.placements(n), sched.node_workload(n), sched.is_local(w, v),
//!          sched.has_distance_matrix()
//! ```
//!
//! A fiber is counted on one node from its placement to its end: `place`
//! (or `record_placement`) adds it, `fiber_moved` carries it along, and
//! `fiber_left_node` removes it where it ends. Counts are relaxed atomics;
//! racing spawners may read each other's counts late (as in the thesis),
//! and a decrementing count may dip below zero for a moment.
//!
//! `fiber_moved` and `fiber_left_node` are no-ops unless the policy is
//! [`Policy::Nlh`] with [`PolicyOptions::decrement_workload`]; they are cheap
//! to call unconditionally.

pub mod placement;
pub mod status;
pub mod steal;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};

use crate::topology::Topology;

use self::placement::SmallBuf;
use self::status::{StatusBitmap, WorkerStatus};

/// The scheduler of a runtime (see the table in the crate docs).
///
/// ```
/// use numafiber::Policy;
/// let p: Policy = "hybrid".parse().unwrap();
/// assert_eq!(p, Policy::HybridSteal);
/// assert_eq!(p.name(), "hybrid");
/// assert_eq!(Policy::default(), Policy::Nlh);
/// assert!(!Policy::RoundRobin.steals());
/// ```
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

impl Policy {
    /// Every policy, baseline first, in the order of the thesis.
    pub const ALL: [Policy; 6] = [
        Policy::RoundRobin,
        Policy::RandomSteal,
        Policy::NumaSteal,
        Policy::LoadSteal,
        Policy::HybridSteal,
        Policy::Nlh,
    ];

    /// Canonical short name, accepted by [`FromStr`]:
    /// `round-robin`, `random`, `numa`, `load`, `hybrid`, `nlh`.
    pub const fn name(self) -> &'static str {
        match self {
            Policy::RoundRobin => "round-robin",
            Policy::RandomSteal => "random",
            Policy::NumaSteal => "numa",
            Policy::LoadSteal => "load",
            Policy::HybridSteal => "hybrid",
            Policy::Nlh => "nlh",
        }
    }

    /// Whether idle workers steal at all (every policy but `RoundRobin`).
    pub const fn steals(self) -> bool {
        !matches!(self, Policy::RoundRobin)
    }

    /// Whether thieves keep SWAS status bitmaps (`LoadSteal`,
    /// `HybridSteal`, `Nlh`).
    pub const fn uses_status_bitmap(self) -> bool {
        matches!(self, Policy::LoadSteal | Policy::HybridSteal | Policy::Nlh)
    }

    /// Whether victim order depends on the node distance matrix
    /// (`NumaSteal`, `HybridSteal`, `Nlh`).
    pub const fn uses_distances(self) -> bool {
        matches!(self, Policy::NumaSteal | Policy::HybridSteal | Policy::Nlh)
    }
}

impl fmt::Display for Policy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A policy name that [`Policy::from_str`] does not know.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsePolicyError {
    input: String,
}

impl fmt::Display for ParsePolicyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown scheduling policy `{}`; valid names: round-robin (or rr), random, numa, load, \
             hybrid (or nllass), nlh",
            self.input
        )
    }
}

impl std::error::Error for ParsePolicyError {}

impl FromStr for Policy {
    type Err = ParsePolicyError;

    /// Parse a policy name, ignoring ASCII case and surrounding whitespace.
    ///
    /// ```
    /// use numafiber::Policy;
    /// assert_eq!("RR".parse::<Policy>(), Ok(Policy::RoundRobin));
    /// let err = "fifo".parse::<Policy>().unwrap_err();
    /// assert!(err.to_string().contains("round-robin"));
    /// ```
    fn from_str(s: &str) -> Result<Policy, ParsePolicyError> {
        let t = s.trim().to_ascii_lowercase();
        Ok(match t.as_str() {
            "round-robin" | "rr" => Policy::RoundRobin,
            "random" => Policy::RandomSteal,
            "numa" => Policy::NumaSteal,
            "load" => Policy::LoadSteal,
            "hybrid" | "nllass" => Policy::HybridSteal,
            "nlh" => Policy::Nlh,
            _ => return Err(ParsePolicyError { input: s.to_owned() }),
        })
    }
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
    /// How many fibers to take from a victim with `victim_len` queued:
    /// `Half` takes `(len + 1) / 2` (what crossbeam-deque's
    /// `steal_batch_with_limit(dest, usize::MAX)` takes), `Fixed(n)` takes
    /// `min(n, len)`.
    ///
    /// ```
    /// use numafiber::StealChunk;
    /// assert_eq!(StealChunk::Half.limit(5), 3);
    /// assert_eq!(StealChunk::Fixed(4).limit(2), 2);
    /// ```
    pub fn limit(&self, victim_len: usize) -> usize {
        match *self {
            StealChunk::Half => victim_len.div_ceil(2),
            StealChunk::Fixed(n) => n.min(victim_len),
        }
    }
}

/// Switches for the improvements beyond the thesis. Each one is measured
/// against the thesis' own variant, so [`Default`] is the thesis behaviour
/// (all `false`): `Policy::Nlh` with default options *is* Alg. 4.6, and a
/// switch flips to `true` by default only once the benchmark shows it wins.
/// [`PolicyOptions::improved`] turns all three on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct PolicyOptions {
    /// NLH workload counts fall when a fiber finishes or is stolen away to
    /// another node ([`Scheduler::fiber_left_node`],
    /// [`Scheduler::fiber_moved`]). Thesis: counts only grow, so they drift
    /// into placement counters.
    pub decrement_workload: bool,
    /// A spawner that is not a worker uses the node of the CPU it runs on
    /// (`sched_getcpu`). Thesis: node 0.
    pub spawner_node_from_cpu: bool,
    /// Work-first spawning: run the child at once and leave the parent
    /// stealable (Cilk). Thesis and default: help-first. Read by the
    /// runtime; placement does not depend on it.
    pub work_first: bool,
}

impl PolicyOptions {
    /// The thesis' behaviour (same as `default()`).
    pub const fn thesis() -> PolicyOptions {
        PolicyOptions { decrement_workload: false, spawner_node_from_cpu: false, work_first: false }
    }

    /// Every improvement on.
    ///
    /// ```
    /// use numafiber::policy::PolicyOptions;
    /// assert!(PolicyOptions::improved().decrement_workload);
    /// assert_eq!(PolicyOptions::default(), PolicyOptions::thesis());
    /// ```
    pub const fn improved() -> PolicyOptions {
        PolicyOptions { decrement_workload: true, spawner_node_from_cpu: true, work_first: true }
    }
}

/// Read-only view of the runtime's load that placement may consult.
///
/// ```
/// use numafiber::policy::LoadProbe;
/// let queues: &[usize] = &[3, 0, 2];
/// assert_eq!(queues.queue_len(2), 2);
/// ```
pub trait LoadProbe {
    /// Approximate number of queued fibers of worker `w`.
    fn queue_len(&self, w: usize) -> usize;
}

/// A slice of queue lengths, indexed by worker (tests, simulators).
impl LoadProbe for [usize] {
    fn queue_len(&self, w: usize) -> usize {
        self[w]
    }
}

/// A vector of queue lengths, indexed by worker; unlike `[usize]` it
/// coerces to `&dyn LoadProbe`.
impl LoadProbe for Vec<usize> {
    fn queue_len(&self, w: usize) -> usize {
        self[w]
    }
}

/// An array of queue lengths, indexed by worker.
impl<const N: usize> LoadProbe for [usize; N] {
    fn queue_len(&self, w: usize) -> usize {
        self[w]
    }
}

/// Per-thief private state: rng, SWAS status bitmap, scratch buffers.
/// Owned by one worker; passed `&mut` to the [`Scheduler`] calls.
#[derive(Debug, Clone)]
pub struct ThiefState {
    worker: usize,
    rng: u64,
    /// This thief's view of every worker (only for bitmap policies; empty
    /// otherwise).
    bitmap: StatusBitmap,
    estimators: Vec<f64>,
    scores: Vec<f64>,
    order: Vec<usize>,
}

impl ThiefState {
    /// The worker this state belongs to.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// This thief's status view (empty for policies without bitmaps).
    pub fn bitmap(&self) -> &StatusBitmap {
        &self.bitmap
    }

    /// Mutable status view, to set up scenarios (tests, simulators).
    pub fn bitmap_mut(&mut self) -> &mut StatusBitmap {
        &mut self.bitmap
    }

    /// The node estimators computed by the last [`Scheduler::victims`] of a
    /// bitmap policy, indexed by node.
    pub fn estimators(&self) -> &[f64] {
        &self.estimators
    }

    fn next_u64(&mut self) -> u64 {
        // xorshift64
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }
}

/// Per-node shared counters, one cache line each.
#[derive(Debug, Default)]
#[repr(align(128))]
struct NodeCounters {
    /// NLH workload count (Alg. 4.6 `workload[node]`).
    workload: AtomicI64,
    /// Fibers placed on this node by NLH `place`/`record_placement`.
    placements: AtomicU64,
}

/// Node distance used for nodes the topology does not describe.
const FALLBACK_LOCAL: u32 = 10;
const FALLBACK_REMOTE: u32 = 20;

/// Policy decisions for one runtime: placement, victim order and the SWAS
/// bookkeeping. Shared by all workers (`&self` methods are thread-safe);
/// the per-worker part lives in [`ThiefState`].
///
/// ```
/// use numafiber::policy::{PolicyOptions, Scheduler};
/// use numafiber::{Policy, Topology};
///
/// // 2 nodes x 2 workers: workers 0, 1 on node 0; 2, 3 on node 1.
/// let topo = Topology::uniform(2, 2);
/// let s = Scheduler::new(Policy::NumaSteal, PolicyOptions::default(), vec![0, 0, 1, 1], &topo);
/// let mut st = s.new_thief_state(0, 42);
/// let mut v = Vec::new();
/// s.victims(0, &mut st, &mut v);
/// assert_eq!(v[0], 1);                    // own node first
/// assert_eq!(v.len(), 3);                 // then node 1's two workers
/// assert!(v[1..].iter().all(|&w| s.worker_node(w) == 1));
///
/// let queues = [0usize; 4]; // queue length per worker
/// assert_eq!(s.place(None, &queues), 0); // round-robin placement
/// assert_eq!(s.place(None, &queues), 1);
/// ```
#[derive(Debug)]
pub struct Scheduler {
    policy: Policy,
    opts: PolicyOptions,
    worker_node: Vec<usize>,
    /// `node_workers[n]`: the workers on node `n`, ascending.
    node_workers: Vec<Vec<usize>>,
    /// Nodes that have at least one worker, ascending (NLH candidates).
    worker_nodes: Vec<usize>,
    /// `candidate_of[n]`: index of node `n` in `worker_nodes`.
    candidate_of: Vec<Option<usize>>,
    /// `distances[a][b]`, square over all nodes.
    distances: Vec<Vec<u32>>,
    /// `remote_by_distance[n]`: other nodes nearest first (computed once).
    remote_by_distance: Vec<Vec<usize>>,
    has_distance_matrix: bool,
    /// OS cpu index -> node.
    cpu_node: Vec<Option<usize>>,
    rr: AtomicUsize,
    nodes: Vec<NodeCounters>,
}

impl Scheduler {
    /// Build the policy state for workers `0..worker_node.len()`, worker
    /// `w` on NUMA node `worker_node[w]` of `topo`. Distances and each
    /// node's distance list come from `topo` (10/20 for nodes it does not
    /// describe); the cpu -> node map from `topo.nodes()[n].cpus`
    /// (override with [`Scheduler::with_cpu_node_map`]).
    ///
    /// # Panics
    /// If `worker_node` is empty (the runtime rejects zero workers first).
    pub fn new(policy: Policy, opts: PolicyOptions, worker_node: Vec<usize>, topo: &Topology) -> Scheduler {
        assert!(!worker_node.is_empty(), "a scheduler needs at least one worker");
        let topo_nodes = topo.nodes().len();
        let num_nodes = topo_nodes.max(worker_node.iter().max().map_or(0, |&m| m + 1));
        let distances: Vec<Vec<u32>> = (0..num_nodes)
            .map(|a| {
                (0..num_nodes)
                    .map(|b| match (a < topo_nodes && b < topo_nodes, a == b) {
                        (true, _) => topo.distance(a, b),
                        (false, true) => FALLBACK_LOCAL,
                        (false, false) => FALLBACK_REMOTE,
                    })
                    .collect()
            })
            .collect();
        let remote_by_distance =
            (0..num_nodes).map(|n| steal::nodes_by_distance(&distances[n], n)).collect();
        let mut node_workers = vec![Vec::new(); num_nodes];
        for (w, &n) in worker_node.iter().enumerate() {
            node_workers[n].push(w);
        }
        let worker_nodes: Vec<usize> = (0..num_nodes).filter(|&n| !node_workers[n].is_empty()).collect();
        let mut candidate_of = vec![None; num_nodes];
        for (i, &n) in worker_nodes.iter().enumerate() {
            candidate_of[n] = Some(i);
        }
        let mut cpu_node = Vec::new();
        for node in topo.nodes() {
            for &cpu in &node.cpus {
                if cpu >= cpu_node.len() {
                    cpu_node.resize(cpu + 1, None);
                }
                cpu_node[cpu] = Some(node.id);
            }
        }
        Scheduler {
            policy,
            opts,
            worker_node,
            node_workers,
            worker_nodes,
            candidate_of,
            distances,
            remote_by_distance,
            has_distance_matrix: topo.has_distance_matrix(),
            cpu_node,
            rr: AtomicUsize::new(0),
            nodes: (0..num_nodes).map(|_| NodeCounters::default()).collect(),
        }
    }

    /// Replace the OS cpu -> node map used for spawners that are not
    /// workers (with [`PolicyOptions::spawner_node_from_cpu`]);
    /// `map[cpu]` is the node of `cpu`, `None` if unknown. Use it when the
    /// topology does not describe this machine.
    pub fn with_cpu_node_map(mut self, map: Vec<Option<usize>>) -> Scheduler {
        self.cpu_node = map;
        self
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The options.
    pub fn options(&self) -> PolicyOptions {
        self.opts
    }

    /// Whether idle workers steal at all.
    pub fn steals(&self) -> bool {
        self.policy.steals()
    }

    /// Number of workers.
    pub fn num_workers(&self) -> usize {
        self.worker_node.len()
    }

    /// Number of nodes (of the topology, or more if a worker names a node
    /// beyond it).
    pub fn num_nodes(&self) -> usize {
        self.node_workers.len()
    }

    /// Node of worker `w`.
    pub fn worker_node(&self, w: usize) -> usize {
        self.worker_node[w]
    }

    /// Workers of node `n`, ascending.
    pub fn node_workers(&self, n: usize) -> &[usize] {
        &self.node_workers[n]
    }

    /// Whether a steal by `thief` from `victim` is local (same node).
    pub fn is_local(&self, thief: usize, victim: usize) -> bool {
        self.worker_node[thief] == self.worker_node[victim]
    }

    /// Distance between nodes, as the scheduler uses it.
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        self.distances[a][b]
    }

    /// The other nodes nearest first, as seen from node `n` (computed once).
    pub fn remote_by_distance(&self, n: usize) -> &[usize] {
        &self.remote_by_distance[n]
    }

    /// Whether the distances came from a real matrix; `false` means the
    /// 10 local / 20 remote fallback (for `Stats`: the NUMA-aware orders
    /// then degenerate to "own node first, then by node index").
    pub fn has_distance_matrix(&self) -> bool {
        self.has_distance_matrix
    }

    /// Node of OS cpu `cpu`, if the cpu -> node map knows it.
    pub fn node_of_cpu(&self, cpu: usize) -> Option<usize> {
        self.cpu_node.get(cpu).copied().flatten()
    }

    /// The node a spawn counts as local to: the spawner's node; for a
    /// spawner that is not a worker, node 0 (thesis) or, with
    /// [`PolicyOptions::spawner_node_from_cpu`], the node of the CPU the
    /// calling thread runs on (node 0 if unknown).
    pub fn spawner_node(&self, spawner: Option<usize>) -> usize {
        match spawner {
            Some(w) => self.worker_node[w],
            None if self.opts.spawner_node_from_cpu => {
                crate::topology::current_cpu().and_then(|c| self.node_of_cpu(c)).unwrap_or(0)
            }
            None => 0,
        }
    }

    /// A fresh per-worker state: rng seeded from `seed` and `worker`; for
    /// bitmap policies a status view of every worker, all `DontKnow`.
    pub fn new_thief_state(&self, worker: usize, seed: u64) -> ThiefState {
        let bits = if self.policy.uses_status_bitmap() { self.num_workers() } else { 0 };
        let mix = (seed ^ (worker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
        ThiefState {
            worker,
            rng: mix,
            bitmap: StatusBitmap::new(bits),
            estimators: Vec::with_capacity(self.num_nodes()),
            scores: Vec::with_capacity(self.num_nodes()),
            order: Vec::with_capacity(self.num_nodes()),
        }
    }

    /// Choose the worker for a new fiber. `spawner` is the spawning worker,
    /// if the spawner is a worker of this runtime.
    ///
    /// Round-robin policies: one relaxed `fetch_add`. `Nlh`: Alg. 4.6 over
    /// a relaxed snapshot of the node workloads and the queue lengths of
    /// the chosen node's workers (O(nodes log nodes + workers on node));
    /// concurrent spawners may see each other's counts late, as in the
    /// thesis. The chosen node's workload and placement counts grow by one.
    pub fn place(&self, spawner: Option<usize>, probe: &dyn LoadProbe) -> usize {
        if self.policy != Policy::Nlh {
            return placement::round_robin(self.rr.fetch_add(1, Ordering::Relaxed), self.num_workers());
        }
        self.place_nlh(self.spawner_node(spawner), spawner, probe)
    }

    /// NLH placement with an explicit local node: the body of
    /// [`Scheduler::place`] for `Nlh` (public for simulators and tests).
    /// Counts go to the node counters; [`Scheduler::placements`] of a
    /// round-robin policy does not read them.
    pub fn place_nlh(&self, local_node: usize, spawner: Option<usize>, probe: &dyn LoadProbe) -> usize {
        let mut buf = SmallBuf::new();
        let workloads = buf.fill(
            self.worker_nodes.iter().map(|&n| self.nodes[n].workload.load(Ordering::Relaxed)),
            self.worker_nodes.len(),
        );
        let local = self.candidate_of.get(local_node).copied().flatten();
        let node = self.worker_nodes[placement::nlh_choose_node(workloads, local)];
        let w = placement::nlh_choose_worker(&self.node_workers[node], |w| probe.queue_len(w), spawner);
        self.count_placement(node);
        w
    }

    /// Count a fiber put on worker `w` without [`Scheduler::place`]
    /// (explicit node, pinned spawn), so that NLH workloads stay balanced
    /// with [`Scheduler::fiber_left_node`]. No-op for round-robin policies.
    pub fn record_placement(&self, w: usize) {
        if self.policy == Policy::Nlh {
            self.count_placement(self.worker_node[w]);
        }
    }

    fn count_placement(&self, node: usize) {
        let c = &self.nodes[node];
        c.workload.fetch_add(1, Ordering::Relaxed);
        c.placements.fetch_add(1, Ordering::Relaxed);
    }

    /// Fill `out` with the victims to try, in order (empty for
    /// `RoundRobin` or a single worker). Cheap: no allocation once the
    /// buffers have grown; O(workers) for the bitmap policies. The bitmap
    /// policies leave the thief's own entry out of its node's estimator
    /// ([`status::thief_node_estimators`]: the thesis' "first attempts are
    /// always local" holds also after the thief marked itself IDLE).
    pub fn victims(&self, thief: usize, st: &mut ThiefState, out: &mut Vec<usize>) {
        out.clear();
        let n = self.num_workers();
        if n <= 1 || !self.steals() {
            return;
        }
        let own = self.worker_node[thief];
        let remotes = &self.remote_by_distance[own];
        let mut order = std::mem::take(&mut st.order);
        match self.policy {
            Policy::RoundRobin => {}
            Policy::RandomSteal => {
                let start = (st.next_u64() % n as u64) as usize;
                steal::random_victims(n, thief, start, out);
            }
            Policy::NumaSteal => steal::numa_node_order(own, remotes, &mut order),
            Policy::LoadSteal => {
                status::thief_node_estimators(&st.bitmap, &self.node_workers, thief, &mut st.estimators);
                steal::load_node_order(&st.estimators, own, remotes, &mut order);
            }
            Policy::HybridSteal | Policy::Nlh => {
                status::thief_node_estimators(&st.bitmap, &self.node_workers, thief, &mut st.estimators);
                steal::hybrid_node_order(
                    &st.estimators,
                    &self.distances[own],
                    own,
                    remotes,
                    &mut st.scores,
                    &mut order,
                );
            }
        }
        if self.policy != Policy::RandomSteal {
            for &node in &order {
                let start = st.next_u64() as usize;
                steal::push_node_victims(&self.node_workers[node], start, thief, out);
            }
        }
        st.order = order;
    }

    /// Tell the policy how an attempt on `victim` went (SWAS update for the
    /// bitmap policies, no-op otherwise): a local victim's entry becomes
    /// BUSY on success, IDLE on failure; for a remote victim every worker
    /// of its node does.
    pub fn record_steal(&self, thief: usize, st: &mut ThiefState, victim: usize, success: bool) {
        if !self.policy.uses_status_bitmap() {
            return;
        }
        let s = if success { WorkerStatus::Busy } else { WorkerStatus::Idle };
        if self.is_local(thief, victim) {
            st.bitmap.set(victim, s);
        } else {
            st.bitmap.set_all(&self.node_workers[self.worker_node[victim]], s);
        }
    }

    /// A worker's own status in its own view: busy while it runs fibers,
    /// idle before it steals (no-op without bitmaps).
    pub fn set_own_status(&self, worker: usize, st: &mut ThiefState, busy: bool) {
        debug_assert_eq!(worker, st.worker, "a worker sets its own status in its own state");
        if self.policy.uses_status_bitmap() {
            st.bitmap.set(worker, if busy { WorkerStatus::Busy } else { WorkerStatus::Idle });
        }
    }

    /// A fiber counted on `node` finished there. Lowers the node's NLH
    /// workload with [`PolicyOptions::decrement_workload`]; no-op otherwise.
    pub fn fiber_left_node(&self, node: usize) {
        if self.tracks_departures() {
            self.nodes[node].workload.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// `count` fibers were stolen from a worker on `from_node` by a worker
    /// on `to_node`: with [`PolicyOptions::decrement_workload`] the NLH
    /// workload moves with them (no-op within a node or otherwise).
    pub fn fiber_moved(&self, from_node: usize, to_node: usize, count: usize) {
        if from_node != to_node && self.tracks_departures() {
            let c = count as i64;
            self.nodes[from_node].workload.fetch_sub(c, Ordering::Relaxed);
            self.nodes[to_node].workload.fetch_add(c, Ordering::Relaxed);
        }
    }

    fn tracks_departures(&self) -> bool {
        self.policy == Policy::Nlh && self.opts.decrement_workload
    }

    /// NLH workload count of `node` (0 for policies that keep none).
    pub fn node_workload(&self, node: usize) -> i64 {
        self.nodes[node].workload.load(Ordering::Relaxed)
    }

    /// Fibers placed on `node` so far. Round-robin policies derive it from
    /// the round-robin counter (no extra atomic on the spawn path).
    pub fn placements(&self, node: usize) -> u64 {
        if self.policy == Policy::Nlh {
            return self.nodes[node].placements.load(Ordering::Relaxed);
        }
        let placed = self.rr.load(Ordering::Relaxed);
        let n = self.num_workers();
        self.node_workers[node]
            .iter()
            // Worker w received counters w, w + n, w + 2n, ... below `placed`.
            .map(|&w| (placed / n + usize::from(w < placed % n)) as u64)
            .sum()
    }
}

#[cfg(test)]
mod tests;
