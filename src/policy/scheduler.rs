//! The [`Scheduler`]: one runtime's policy decisions (placement, victim
//! order, SWAS bookkeeping) over per-node counters shared by its workers.

use super::*;

/// Per-node shared counters, one cache line each.
#[derive(Debug, Default)]
#[repr(align(128))]
struct NodeCounters {
    /// NLH workload count (Alg. 4.6 `workload[node]`): the part the node
    /// choice reads. With a single node that has workers, nobody reads it
    /// for a decision and placements count in the spawner's shard instead
    /// ([`CounterShards`]); departures and moves always count here.
    workload: AtomicI64,
}

/// Slots of one [`ShardLine`].
const SHARD_LINE_SLOTS: usize = 16;

/// One cache line (two, for adjacent-line prefetchers) of shard slots.
#[derive(Debug, Default)]
#[repr(align(128))]
struct ShardLine([AtomicI64; SHARD_LINE_SLOTS]);

/// Statistics-only placement counters, sharded by spawner so that the
/// spawn path writes a line of its own instead of one line every worker
/// writes (that was a contended `lock inc` per spawn).
///
/// Shard `w` (for `w < workers`) belongs to spawning worker `w`; the last
/// shard counts spawns from other threads and calls that name no spawner
/// ([`Scheduler::record_placement`]). Each shard starts on a line of its
/// own: slot 0 is the spawner's share of the single node's workload (used
/// only when a single node has workers, see [`NodeCounters::workload`]),
/// slot `1 + n` its placements on node `n`. A total is the sum over the
/// shards: exact once the spawners are quiet, and while they run a sum of
/// relaxed loads (each shard's count is exact, the sum is not a snapshot).
#[derive(Debug)]
struct CounterShards {
    lines_per_shard: usize,
    shards: usize,
    lines: Box<[ShardLine]>,
}

impl CounterShards {
    fn new(workers: usize, nodes: usize) -> CounterShards {
        let lines_per_shard = (1 + nodes).div_ceil(SHARD_LINE_SLOTS);
        let shards = workers + 1;
        let lines = (0..shards * lines_per_shard).map(|_| ShardLine::default()).collect();
        CounterShards { lines_per_shard, shards, lines }
    }

    /// The shard of `spawner` (a worker index, or the foreign shard).
    #[inline]
    fn shard_of(&self, spawner: Option<usize>) -> usize {
        match spawner {
            Some(w) if w + 1 < self.shards => w,
            _ => self.shards - 1,
        }
    }

    #[inline]
    fn slot(&self, shard: usize, i: usize) -> &AtomicI64 {
        &self.lines[shard * self.lines_per_shard + i / SHARD_LINE_SLOTS].0[i % SHARD_LINE_SLOTS]
    }

    /// Add one to slot `i` of `shard`: a plain load and store when the
    /// caller is the shard's only writer (`owner`), else a `fetch_add`.
    #[inline]
    fn bump(&self, shard: usize, i: usize, owner: bool) {
        let c = self.slot(shard, i);
        if owner {
            c.store(c.load(Ordering::Relaxed).wrapping_add(1), Ordering::Relaxed);
        } else {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Slot `i` summed over every shard.
    fn sum(&self, i: usize) -> i64 {
        (0..self.shards).fold(0i64, |acc, s| acc.wrapping_add(self.slot(s, i).load(Ordering::Relaxed)))
    }
}

/// Node distance used for nodes the topology does not describe.
const FALLBACK_LOCAL: u32 = 10;
const FALLBACK_REMOTE: u32 = 20;

/// Policy decisions for one runtime: placement, victim order and the SWAS
/// bookkeeping. Shared by all workers (`&self` methods are thread-safe);
/// the per-worker part lives in [`ThiefState`].
///
/// Status views (bitmap policies, see [`status`] for the rules and why):
/// a thief's view of a *remote* node is its own ([`ThiefState::node_view`],
/// one per node); the entries of the workers of a node are a board shared
/// by that node's workers ([`Scheduler::status`]), written by their local
/// steal attempts and by [`Scheduler::set_own_status`]. Per-worker memory
/// is O(nodes); the boards are one byte per worker per runtime.
///
/// ```
/// use numafiber::policy::{PolicyOptions, Scheduler};
/// use numafiber::{Policy, Topology};
///
/// // 2 nodes x 2 workers: workers 0, 1 on node 0; 2, 3 on node 1.
/// let topo = Topology::uniform(2, 2);
/// let s = Scheduler::new(Policy::NumaSteal, PolicyOptions::default(), vec![0, 0, 1, 1], &topo);
/// let mut st = s.new_thief_state(0, 42);
/// let v: Vec<usize> = s.victims(0, &mut st).collect();
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
    /// Placement statistics (and the single node's workload) by spawner.
    shards: CounterShards,
    /// `slot_in_node[w]`: position of worker `w` in `node_workers[node]`.
    slot_in_node: Vec<usize>,
    /// `boards[n]`: the shared status entries of node `n`'s workers (bitmap
    /// policies; empty otherwise).
    boards: Vec<StatusBoard>,
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
        let remote_by_distance = (0..num_nodes).map(|n| steal::nodes_by_distance(&distances[n], n)).collect();
        let mut node_workers = vec![Vec::new(); num_nodes];
        let mut slot_in_node = Vec::with_capacity(worker_node.len());
        for (w, &n) in worker_node.iter().enumerate() {
            slot_in_node.push(node_workers[n].len());
            node_workers[n].push(w);
        }
        let boards = if policy.uses_status_bitmap() {
            node_workers.iter().map(|ws| StatusBoard::new(ws.len())).collect()
        } else {
            Vec::new()
        };
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
        let shards = CounterShards::new(worker_node.len(), num_nodes);
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
            shards,
            slot_in_node,
            boards,
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
    /// bitmap policies a view of every other node, all `DontKnow`. Its
    /// buffers are sized for every node at once, so victim passes never
    /// allocate.
    ///
    /// # Panics
    /// If `worker` is not a worker of the scheduler.
    pub fn new_thief_state(&self, worker: usize, seed: u64) -> ThiefState {
        let node = self.worker_node[worker];
        let nodes = self.num_nodes();
        let views = if self.policy.uses_status_bitmap() {
            self.node_workers
                .iter()
                .map(|ws| NodeView::uniform(u32::try_from(ws.len()).unwrap_or(u32::MAX), WorkerStatus::DontKnow))
                .collect()
        } else {
            Vec::new()
        };
        let mix = (seed ^ (worker as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1;
        ThiefState {
            worker,
            node,
            rng: mix,
            views,
            estimators: Vec::with_capacity(nodes),
            scores: Vec::with_capacity(nodes),
            order: Vec::with_capacity(nodes),
            starts: Vec::with_capacity(nodes),
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
    ///
    /// What NLH reads, and in what order (the decision is always the
    /// thesis' one for the values read; see [`Scheduler::place_nlh`]):
    /// with a single node that has workers, no workload at all (the node
    /// choice is fixed); on a node with one worker, no queue length; and
    /// when the spawner is a worker of the chosen node, its own queue
    /// first, and nothing more if that is empty (an empty queue is a
    /// shortest one, and ties go to the spawner).
    ///
    /// ```
    /// use numafiber::policy::{PolicyOptions, Scheduler};
    /// use numafiber::{Policy, Topology};
    /// let s = Scheduler::new(Policy::Nlh, PolicyOptions::default(), vec![0, 0], &Topology::uniform(1, 2));
    /// assert_eq!(s.place(Some(1), &[3usize, 2]), 1); // the shorter queue
    /// assert_eq!(s.place(Some(1), &[0usize, 2]), 0);
    /// assert_eq!(s.place(Some(1), &[0usize, 0]), 1); // a tie: the spawner
    /// assert_eq!((s.placements(0), s.node_workload(0)), (3, 3));
    /// ```
    pub fn place(&self, spawner: Option<usize>, probe: &dyn LoadProbe) -> usize {
        self.place_counted(spawner, probe, false)
    }

    /// [`Scheduler::place`] called on the thread of worker `spawner` (or
    /// with `spawner == None`): the placement statistics go to the
    /// spawner's shard with a plain load and store (no locked instruction).
    /// The runtime's spawn path; a caller on another thread than the
    /// spawner's could only lose counts of that shard, never memory.
    #[inline]
    pub(crate) fn place_on_spawner_thread<P: LoadProbe + ?Sized>(&self, spawner: Option<usize>, probe: &P) -> usize {
        self.place_counted(spawner, probe, true)
    }

    #[inline]
    fn place_counted<P: LoadProbe + ?Sized>(&self, spawner: Option<usize>, probe: &P, owner: bool) -> usize {
        if self.policy != Policy::Nlh {
            return placement::round_robin(self.rr.fetch_add(1, Ordering::Relaxed), self.num_workers());
        }
        let local = if self.worker_nodes.len() == 1 { 0 } else { self.spawner_node(spawner) };
        self.place_nlh_counted(local, spawner, probe, owner)
    }

    /// NLH placement with an explicit local node: the body of
    /// [`Scheduler::place`] for `Nlh` (public for simulators and tests).
    /// Counts go to the node counters; [`Scheduler::placements`] of a
    /// round-robin policy does not read them.
    ///
    /// The result is that of [`placement::nlh_choose_node`] over the node
    /// workloads and [`placement::nlh_choose_worker`] over `probe` for the
    /// chosen node's workers. To get it, it skips what cannot change it:
    /// the workloads when a single node has workers, the probe on a node
    /// with one worker, and the other workers when the spawner is on the
    /// chosen node and `probe.queue_len(spawner)` is 0 (then `spawner` is
    /// the answer). A probe whose answers do not change during the call
    /// therefore gives exactly the pure functions' decision.
    ///
    /// ```
    /// use numafiber::policy::{placement, PolicyOptions, Scheduler};
    /// use numafiber::{Policy, Topology};
    /// let s = Scheduler::new(Policy::Nlh, PolicyOptions::default(), vec![0, 0, 1, 1], &Topology::uniform(2, 2));
    /// let q = [2usize, 1, 0, 0];
    /// let w = s.place_nlh(0, Some(0), &q);
    /// assert_eq!(w, placement::nlh_choose_worker(&[0, 1], |w| q[w], Some(0)));
    /// assert_eq!(w, 1);
    /// assert_eq!(s.node_workload(0), 1);
    /// ```
    pub fn place_nlh(&self, local_node: usize, spawner: Option<usize>, probe: &dyn LoadProbe) -> usize {
        self.place_nlh_counted(local_node, spawner, probe, false)
    }

    #[inline]
    fn place_nlh_counted<P: LoadProbe + ?Sized>(
        &self,
        local_node: usize,
        spawner: Option<usize>,
        probe: &P,
        owner: bool,
    ) -> usize {
        let node = if let [only] = self.worker_nodes[..] {
            // `nlh_choose_node` of one candidate is that candidate, whatever
            // the workload and the local node.
            only
        } else {
            let mut buf = SmallBuf::new();
            let workloads = buf.fill(
                self.worker_nodes.iter().map(|&n| self.nodes[n].workload.load(Ordering::Relaxed)),
                self.worker_nodes.len(),
            );
            let local = self.candidate_of.get(local_node).copied().flatten();
            self.worker_nodes[placement::nlh_choose_node(workloads, local)]
        };
        let w = self.nlh_worker(node, spawner, probe);
        self.count_placement(node, spawner, owner);
        w
    }

    /// `nlh_choose_worker` on `node`, skipping probes that cannot change
    /// its answer (see [`Scheduler::place_nlh`]).
    #[inline]
    fn nlh_worker<P: LoadProbe + ?Sized>(&self, node: usize, spawner: Option<usize>, probe: &P) -> usize {
        let workers = &self.node_workers[node];
        if let [only] = workers[..] {
            return only;
        }
        match spawner.filter(|&s| self.worker_node.get(s) == Some(&node)) {
            Some(s) => {
                let own = probe.queue_len(s);
                if own == 0 {
                    return s;
                }
                placement::nlh_choose_worker(workers, |w| if w == s { own } else { probe.queue_len(w) }, spawner)
            }
            None => placement::nlh_choose_worker(workers, |w| probe.queue_len(w), spawner),
        }
    }

    /// Count a fiber put on worker `w` without [`Scheduler::place`]
    /// (explicit node, pinned spawn), so that NLH workloads stay balanced
    /// with [`Scheduler::fiber_left_node`]. No-op for round-robin policies.
    pub fn record_placement(&self, w: usize) {
        if self.policy == Policy::Nlh {
            self.count_placement(self.worker_node[w], None, false);
        }
    }

    /// [`Scheduler::record_placement`] by `spawner`, called on the
    /// spawner's thread (see [`Scheduler::place_on_spawner_thread`]).
    pub(crate) fn record_placement_on_spawner_thread(&self, spawner: Option<usize>, w: usize) {
        if self.policy == Policy::Nlh {
            self.count_placement(self.worker_node[w], spawner, true);
        }
    }

    /// One more fiber on `node`: its placement in the spawner's shard; its
    /// workload where the node choice reads it (the shared node counter),
    /// or, when a single node has workers and nobody reads it for a
    /// decision, in the spawner's shard too. `owner`: the caller runs on
    /// the spawner's thread (plain store instead of `fetch_add`; a foreign
    /// spawner's shard is always shared).
    #[inline]
    fn count_placement(&self, node: usize, spawner: Option<usize>, owner: bool) {
        let shard = self.shards.shard_of(spawner);
        let owner = owner && spawner.is_some() && shard + 1 < self.shards.shards;
        if self.worker_nodes.len() == 1 {
            self.shards.bump(shard, 0, owner);
        } else {
            self.nodes[node].workload.fetch_add(1, Ordering::Relaxed);
        }
        self.shards.bump(shard, 1 + node, owner);
    }

    /// The victims to try, in order (none for `RoundRobin` or a single
    /// worker): a lazy [`Victims`] walk. Deciding it costs O(nodes) (the
    /// node order, and one random start per node drawn up front from the
    /// thief's rng); the bitmap policies also read the thief's node board,
    /// O(workers of its node). Nothing is allocated.
    ///
    /// * `RandomSteal`: every other worker, from a random start, in index
    ///   order ([`steal::random_victims`]).
    /// * The node policies: the node order of [`steal::numa_node_order`],
    ///   [`steal::load_node_order`] or [`steal::hybrid_node_order`]; within
    ///   a node its workers from a random start ([`steal::push_node_victims`]).
    ///
    /// The bitmap policies leave the thief's own entry out of its node's
    /// estimator ([`StatusBoard::estimator_without`]: the thesis' "first
    /// attempts are always local" holds also after the thief marked itself
    /// IDLE).
    ///
    /// # Panics
    /// If `thief` is not a worker of the scheduler, or `st` was made by a
    /// scheduler with other nodes.
    pub fn victims<'a>(&'a self, thief: usize, st: &'a mut ThiefState) -> Victims<'a> {
        let n = self.num_workers();
        let own = self.worker_node[thief];
        st.order.clear();
        st.starts.clear();
        if n > 1 && self.policy == Policy::RandomSteal {
            let start = (st.next_u64() % n as u64) as usize;
            let walk = Walk::Random { n, next: start, left: n };
            return Victims {
                order: VictimOrder { node_workers: &self.node_workers, thief, walk },
                sched: self,
                views: &mut st.views,
            };
        }
        if n > 1 && self.steals() {
            let remotes = &self.remote_by_distance[own];
            let mut order = std::mem::take(&mut st.order);
            match self.policy {
                Policy::RoundRobin | Policy::RandomSteal => {}
                Policy::NumaSteal => steal::numa_node_order(own, remotes, &mut order),
                Policy::LoadSteal => {
                    self.thief_estimators(thief, st);
                    steal::load_node_order(&st.estimators, own, remotes, &mut order);
                }
                Policy::HybridSteal | Policy::Nlh => {
                    self.thief_estimators(thief, st);
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
            // One rotation per node, drawn in node order (also for nodes
            // without victims), whether or not the walk gets that far.
            for &node in &order {
                let r = st.next_u64() as usize;
                let len = self.node_workers[node].len();
                st.starts.push(if len == 0 { 0 } else { r % len });
            }
            st.order = order;
        }
        let ThiefState { views, order, starts, .. } = st;
        let walk = Walk::Nodes { order, starts, pos: 0, cur: &[], j: 0, left: 0 };
        Victims { order: VictimOrder { node_workers: &self.node_workers, thief, walk }, sched: self, views }
    }

    /// The estimator of every node as `thief` sees it, into `st.estimators`:
    /// its own node from the board without its own entry, the others from
    /// its views.
    fn thief_estimators(&self, thief: usize, st: &mut ThiefState) {
        let own = self.worker_node[thief];
        st.estimators.clear();
        for (n, view) in st.views.iter().enumerate() {
            st.estimators.push(if n == own {
                self.boards[n].estimator_without(self.slot_in_node[thief])
            } else {
                view.estimator()
            });
        }
    }

    /// Tell the policy how an attempt on `victim` went (SWAS update for the
    /// bitmap policies, no-op otherwise): a local victim's entry on the
    /// node's shared board becomes BUSY on success, IDLE on failure; for a
    /// remote victim the thief's view of its node says so of every worker
    /// there.
    ///
    /// # Panics
    /// If `thief` or `victim` is not a worker of the scheduler.
    pub fn record_steal(&self, thief: usize, st: &mut ThiefState, victim: usize, success: bool) {
        debug_assert_eq!(thief, st.worker, "a thief records its steals in its own state");
        self.record_into(thief, &mut st.views, victim, success);
    }

    #[inline]
    pub(super) fn record_into(&self, thief: usize, views: &mut [NodeView], victim: usize, success: bool) {
        if !self.policy.uses_status_bitmap() {
            return;
        }
        let s = if success { WorkerStatus::Busy } else { WorkerStatus::Idle };
        let node = self.worker_node[victim];
        if node == self.worker_node[thief] {
            self.boards[node].set(self.slot_in_node[victim], s);
        } else {
            views[node] = NodeView::uniform(u32::try_from(self.node_workers[node].len()).unwrap_or(u32::MAX), s);
        }
    }

    /// A worker's own status on its node's board: busy while it runs
    /// fibers, idle before it steals (no-op without bitmaps). Its node
    /// mates read it; the worker itself leaves it out of its estimator.
    pub fn set_own_status(&self, worker: usize, st: &ThiefState, busy: bool) {
        debug_assert_eq!(worker, st.worker, "a worker sets its own status in its own state");
        if self.policy.uses_status_bitmap() {
            let s = if busy { WorkerStatus::Busy } else { WorkerStatus::Idle };
            self.boards[self.worker_node[worker]].set(self.slot_in_node[worker], s);
        }
    }

    /// Worker `w`'s entry on its node's shared board: what its node mates
    /// believe about it (`DontKnow` for policies without status views).
    ///
    /// # Panics
    /// If `w` is not a worker of the scheduler.
    pub fn status(&self, w: usize) -> WorkerStatus {
        match self.boards.get(self.worker_node[w]) {
            Some(b) => b.get(self.slot_in_node[w]),
            None => WorkerStatus::DontKnow,
        }
    }

    /// Set worker `w`'s entry on its node's board (scenarios for tests and
    /// simulators; no-op for policies without status views).
    ///
    /// # Panics
    /// If `w` is not a worker of the scheduler.
    pub fn set_status(&self, w: usize, s: WorkerStatus) {
        if let Some(b) = self.boards.get(self.worker_node[w]) {
            b.set(self.slot_in_node[w], s);
        }
    }

    /// Set `st`'s view of `node`, another node than the thief's own
    /// (scenarios for tests and simulators, e.g. the mixed nodes of the
    /// thesis' Table 4.1; no-op for policies without status views).
    ///
    /// # Panics
    /// If `node` is the thief's own node or out of range, or `view` does
    /// not describe exactly the node's workers.
    pub fn set_node_view(&self, st: &mut ThiefState, node: usize, view: NodeView) {
        assert!(node < self.num_nodes(), "node {node} out of range ({} nodes)", self.num_nodes());
        assert_ne!(node, st.node, "a thief's own node is on the shared board: use set_status");
        let workers = self.node_workers[node].len() as u64;
        assert_eq!(view.workers(), workers, "the view of node {node} must describe its {workers} workers");
        if let Some(v) = st.views.get_mut(node) {
            *v = view;
        }
    }

    /// A fiber counted on `node` finished there. Lowers the node's NLH
    /// workload with [`PolicyOptions::decrement_workload`]; no-op otherwise.
    pub fn fiber_left_node(&self, node: usize) {
        if self.tracks_departures() {
            self.nodes[node].workload.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// A queue entry of a fiber joined `node` without a placement (a parent
    /// that reclaimed its unstarted child queued a second entry for it on
    /// its own worker, see [`JoinHandle::join`](crate::fiber::JoinHandle::join)):
    /// with [`PolicyOptions::decrement_workload`] the NLH workload counts it
    /// until one of the fiber's two entries is dropped unrun
    /// ([`fiber_left_node`](Self::fiber_left_node) then), so that the
    /// count still returns to zero; no-op otherwise. Placements do not
    /// change.
    ///
    /// ```
    /// use numafiber::policy::{Policy, PolicyOptions, Scheduler};
    /// use numafiber::Topology;
    /// let opts = PolicyOptions { decrement_workload: true, ..PolicyOptions::default() };
    /// // 1 node, 2 workers (the worker -> node layout).
    /// let s = Scheduler::new(Policy::Nlh, opts, vec![0, 0], &Topology::uniform(1, 2));
    /// s.fiber_entered_node(0);
    /// assert_eq!((s.node_workload(0), s.placements(0)), (1, 0));
    /// s.fiber_left_node(0);
    /// assert_eq!(s.node_workload(0), 0);
    /// ```
    pub fn fiber_entered_node(&self, node: usize) {
        if self.tracks_departures() {
            self.nodes[node].workload.fetch_add(1, Ordering::Relaxed);
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
    ///
    /// When a single node has workers, the placements' part of its count is
    /// kept per spawner (no decision reads it) and summed here: exact once
    /// spawning has stopped, a sum of relaxed loads while it goes on (each
    /// part is exact, the sum is not a snapshot). With several such nodes
    /// it is the node's shared counter, which NLH reads.
    ///
    /// ```
    /// use numafiber::policy::{PolicyOptions, Scheduler};
    /// use numafiber::{Policy, Topology};
    /// let s = Scheduler::new(Policy::Nlh, PolicyOptions::default(), vec![0, 0], &Topology::uniform(1, 2));
    /// s.place(Some(0), &[0usize, 0]);
    /// s.place(None, &[0usize, 0]);
    /// assert_eq!(s.node_workload(0), 2);
    /// ```
    pub fn node_workload(&self, node: usize) -> i64 {
        let shared = self.nodes[node].workload.load(Ordering::Relaxed);
        if self.worker_nodes == [node] {
            return shared.wrapping_add(self.shards.sum(0));
        }
        shared
    }

    /// Fibers placed on `node` so far. Round-robin policies derive it from
    /// the round-robin counter (no extra atomic on the spawn path). `Nlh`
    /// counts them per spawner and sums them here (the same count as one
    /// shared counter once spawning has stopped; while it goes on a sum of
    /// relaxed loads, as [`Scheduler::node_workload`]).
    ///
    /// ```
    /// use numafiber::policy::{PolicyOptions, Scheduler};
    /// use numafiber::{Policy, Topology};
    /// let s = Scheduler::new(Policy::Nlh, PolicyOptions::default(), vec![0, 1], &Topology::uniform(2, 1));
    /// let q = [0usize, 0];
    /// let placed: Vec<usize> = [Some(0), Some(1), None, Some(0)].into_iter().map(|sp| s.place(sp, &q)).collect();
    /// assert_eq!(placed, vec![0, 1, 0, 1]);
    /// assert_eq!((s.placements(0), s.placements(1)), (2, 2));
    /// ```
    pub fn placements(&self, node: usize) -> u64 {
        if self.policy == Policy::Nlh {
            return self.shards.sum(1 + node) as u64;
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
