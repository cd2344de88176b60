//! A deterministic discrete-event simulator of the runtime's scheduling,
//! for machines we do not have (2-64 NUMA nodes, hundreds of workers).
//!
//! It runs the **same policy code** as the runtime: every placement,
//! victim order and SWAS status update is a call on a
//! [`Scheduler`] (and so on the pure functions of
//! [`policy::placement`](crate::policy::placement),
//! [`policy::steal`](crate::policy::steal) and
//! [`policy::status`](crate::policy::status)), made in the order the
//! policy module's docs prescribe for the worker loop. Only the *machine*
//! is simulated: time, queues, parking, memory distance.
//!
//! # The model
//!
//! * **Workers**: one per PU of a [`Topology`] (or `workers`, laid out by
//!   [`Topology::plan_workers`] as the runtime does). Each has a deque
//!   (owner pops the newest, thieves take the oldest), an inbox for pushes
//!   from other threads, a work-first `run_next` slot, and the worker
//!   loop's order: `run_next`, deque, inbox (every 61st tick the inbox
//!   first), then a steal round, then park. Parking and wake-ups follow
//!   `runtime/worker/queues.rs`: a push to another worker's inbox wakes it if it
//!   sleeps, else (stealing policies) some sleeper unless a worker is
//!   searching; a push to one's own deque wakes a sleeper only if nobody is
//!   searching. A worker re-checks for visible work before it parks.
//! * **Fibers**: programs of [`Op`]s (compute, spawn, await). A fiber's
//!   memory is homed on the node where it first runs; inputs are homed
//!   where their fibers first ran. A compute step of cost `c` on node `r`
//!   takes `c * ((1 - s) + s * d̄/10)` where `s` is
//!   [`CostModel::memory_share`] and `d̄` the footprint-weighted mean
//!   distance from `r` to those homes (10 = local).
//! * **Steals**: the victims come from [`Scheduler::victims`]; an attempt
//!   on victim `v` costs [`CostModel::steal_probe_ns`] x distance/10 when
//!   it finds nothing, and [`CostModel::steal_ns`] plus
//!   [`CostModel::steal_per_fiber_ns`] per fiber moved, x distance/10, when
//!   it takes [`StealChunk::limit`] fibers (steal-half by default) from the
//!   victim's deque, else from its inbox. A round takes effect when it
//!   starts; the thief runs the first stolen fiber when the round's time
//!   has passed (the rest wait in its deque, stealable).
//! * **Randomness**: the thieves' rngs are the policy's own
//!   ([`Scheduler::new_thief_state`]) seeded from [`SimConfig::seed`]; the
//!   cost jitter uses a splitmix64 stream from the same seed. Events at
//!   equal times run in the order they were scheduled. The same seed gives
//!   the same [`SimResult`], bit for bit.
//!
//! What is not modelled: yields, timers, pinned fibers, stack pools, cache
//! effects beyond the memory share, contention on the deques themselves.
//!
//! # Example
//!
//! ```
//! use numafiber::sim::{distances, simulate, MatrixParams, SimConfig, Workload};
//! use numafiber::{Policy, Topology};
//!
//! // 2 nodes x 4 PUs, EPYC-like distances; the thesis' imbalanced workload.
//! let topo = Topology::uniform(2, 4).with_distances(distances::epyc_like(2)).unwrap();
//! // A queue long enough for stealing to matter (with 12 us wake-ups, 24
//! // singles on 8 workers finish behind the heavy fibers under any policy).
//! let p = MatrixParams { mults: 96, heavy_mults: 20, imbalanced: true, ..MatrixParams::for_size(100) };
//! let wl = Workload::matrix(&p);
//! let rr = simulate(&topo, &SimConfig::new(Policy::RoundRobin), &wl).unwrap();
//! let hybrid = simulate(&topo, &SimConfig::new(Policy::HybridSteal), &wl).unwrap();
//! assert_eq!(rr.completed, wl.fibers().len() as u64);
//! assert_eq!(rr.local_steals + rr.remote_steals, 0); // round-robin never steals
//! assert!(hybrid.local_steals + hybrid.remote_steals > 0);
//! assert!(hybrid.makespan_ns < rr.makespan_ns);
//! ```

pub mod workload;

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;

use crate::policy::{LoadProbe, Policy, PolicyOptions, Scheduler, StealChunk, ThiefState};
use crate::topology::Topology;

pub use self::workload::{FiberSpec, MatrixParams, Op, Work, Workload, WorkloadError, NS_PER_MAC};

/// Costs of the simulated machine, in nanoseconds (distances on the
/// SLIT scale, 10 = local).
///
/// ```
/// use numafiber::sim::CostModel;
/// let c = CostModel { memory_share: 0.0, ..CostModel::default() };
/// assert_eq!(c.memory_share, 0.0); // no remote-memory penalty at all
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Share of a compute step that is memory-bound, `0.0..=1.0`; that
    /// share takes `distance/10` times as long.
    pub memory_share: f64,
    /// Resuming a fiber (switch plus queue pop).
    pub switch_ns: u64,
    /// Spawning a fiber (allocation and push), charged to the spawner.
    /// The defaults of this and [`CostModel::wake_ns`] are the real
    /// runtime's, measured by `thesis_bench` (it prints its calibration and
    /// uses it for its own simulated-vs-real table).
    pub spawn_ns: u64,
    /// Extra for pushing to another worker's inbox, x distance/10.
    pub remote_push_ns: u64,
    /// A steal attempt that finds nothing, x distance/10.
    pub steal_probe_ns: u64,
    /// A successful steal, x distance/10.
    pub steal_ns: u64,
    /// Per fiber moved by a steal, x distance/10.
    pub steal_per_fiber_ns: u64,
    /// Waking a parked worker thread (futex wake to running).
    pub wake_ns: u64,
    /// Relative noise on compute costs, uniform in `±jitter` (seeded).
    pub jitter: f64,
}

impl Default for CostModel {
    fn default() -> CostModel {
        CostModel {
            memory_share: 0.3,
            switch_ns: 100,
            // Measured on the real runtime by `thesis_bench`'s calibration
            // (2-core machine, uniform:2x1): spawn 214-724 ns
            // (median of three runs 274 ns), wake-up of a parked worker
            // 10.9-11.9 us. Until then the defaults were 200 ns and 5 us.
            spawn_ns: 270,
            remote_push_ns: 200,
            steal_probe_ns: 50,
            steal_ns: 400,
            steal_per_fiber_ns: 30,
            wake_ns: 12_000,
            jitter: 0.05,
        }
    }
}

/// What to simulate: a policy with its switches, the steal chunk, the
/// worker count, the seed and the machine's costs.
///
/// ```
/// use numafiber::sim::SimConfig;
/// use numafiber::{Policy, PolicyOptions};
/// let c = SimConfig::new(Policy::Nlh).options(PolicyOptions::improved()).seed(7).workers(4);
/// assert_eq!(c.seed, 7);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct SimConfig {
    /// The scheduling policy.
    pub policy: Policy,
    /// The beyond-the-thesis switches.
    pub options: PolicyOptions,
    /// How much a thief takes.
    pub chunk: StealChunk,
    /// Number of workers; `None`: one per PU of the topology.
    pub workers: Option<usize>,
    /// Seed of every random choice.
    pub seed: u64,
    /// Machine costs.
    pub cost: CostModel,
    /// OS cpu (a PU of the topology) the `main` thread runs on, for
    /// [`PolicyOptions::spawner_node_from_cpu`]; `None`: the first PU of
    /// the last node (so that the switch makes a difference: with the
    /// thesis rule an external spawner always counts as node 0).
    pub main_cpu: Option<usize>,
    /// Record every policy call in [`SimResult::trace`] (tests; memory
    /// grows with the run).
    pub trace: bool,
}

impl SimConfig {
    /// Defaults for `policy`: thesis options, steal-half, one worker per
    /// PU, seed 1, [`CostModel::default`].
    pub fn new(policy: Policy) -> SimConfig {
        SimConfig {
            policy,
            options: PolicyOptions::default(),
            chunk: StealChunk::Half,
            workers: None,
            seed: 1,
            cost: CostModel::default(),
            main_cpu: None,
            trace: false,
        }
    }

    /// Set the options.
    pub fn options(mut self, o: PolicyOptions) -> SimConfig {
        self.options = o;
        self
    }

    /// Set the seed.
    pub fn seed(mut self, s: u64) -> SimConfig {
        self.seed = s;
        self
    }

    /// Set the worker count.
    pub fn workers(mut self, w: usize) -> SimConfig {
        self.workers = Some(w);
        self
    }

    /// Set the cost model.
    pub fn cost(mut self, c: CostModel) -> SimConfig {
        self.cost = c;
        self
    }

    /// Record the policy calls.
    pub fn trace(mut self, on: bool) -> SimConfig {
        self.trace = on;
        self
    }
}

/// One call the simulator made on the [`Scheduler`], with its inputs and
/// (for calls that decide something) its answer. Replaying a trace on a
/// fresh scheduler built from [`SimResult::worker_node`] must give the
/// same answers (`tests/sim.rs` does).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// `new_thief_state(worker, seed)`.
    ThiefState {
        /// The worker.
        worker: usize,
        /// The seed passed.
        seed: u64,
    },
    /// `place(spawner, probe)` with these queue lengths; returned `chosen`.
    Place {
        /// The spawning worker, `None` for the `main` thread.
        spawner: Option<usize>,
        /// Queue length of every worker, as the probe reported them.
        queue_lens: Vec<usize>,
        /// The answer.
        chosen: usize,
    },
    /// `place_nlh(local_node, None, probe)`: an external spawn under
    /// `spawner_node_from_cpu`, with the node of [`SimConfig::main_cpu`].
    PlaceNlh {
        /// The node of the `main` thread's cpu.
        local_node: usize,
        /// Queue length of every worker.
        queue_lens: Vec<usize>,
        /// The answer.
        chosen: usize,
    },
    /// `record_placement(worker)` (work-first spawns).
    RecordPlacement {
        /// The worker.
        worker: usize,
    },
    /// `set_own_status(worker, .., busy)`.
    SetOwnStatus {
        /// The worker.
        worker: usize,
        /// Busy or idle.
        busy: bool,
    },
    /// `victims(thief, ..)`; returned this order.
    Victims {
        /// The thief.
        thief: usize,
        /// The answer.
        victims: Vec<usize>,
    },
    /// `record_steal(thief, .., victim, success)`.
    RecordSteal {
        /// The thief.
        thief: usize,
        /// The victim tried.
        victim: usize,
        /// Whether it gave anything.
        success: bool,
    },
    /// `fiber_moved(from, to, count)`.
    FiberMoved {
        /// Node the fibers were counted on.
        from: usize,
        /// Node they moved to.
        to: usize,
        /// How many.
        count: usize,
    },
    /// `fiber_left_node(node)`.
    FiberLeftNode {
        /// The node.
        node: usize,
    },
}

/// Per-worker results of a run.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SimWorkerStats {
    /// Worker index.
    pub worker: usize,
    /// Its NUMA node.
    pub node: usize,
    /// Fibers that finished on it.
    pub executed: u64,
    /// Successful steals from its own node.
    pub local_steals: u64,
    /// Successful steals from other nodes.
    pub remote_steals: u64,
    /// Victims tried that had nothing.
    pub failed_steals: u64,
    /// Nanoseconds spent computing (including remote-memory penalties).
    pub busy_ns: u64,
    /// Nanoseconds of nominal work it ran: [`Work::cost_on`] its node,
    /// without jitter or memory penalty. Divided by a multiplication's
    /// cost this is `thesis_bench`'s work units (1 or 3 a single
    /// multiplication, `heavy_mults` a heavy fiber).
    pub nominal_ns: u64,
}

/// What a simulated run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct SimResult {
    /// Simulated time from the start to the end of the `main` thread's
    /// program (or the last fiber, if later), ns.
    pub makespan_ns: u64,
    /// Fibers spawned.
    pub spawned: u64,
    /// Fibers completed.
    pub completed: u64,
    /// `completions[i]`: how often fiber `i` completed (1 for every fiber
    /// of a finished run).
    pub completions: Vec<u32>,
    /// Successful steals from the thief's own node.
    pub local_steals: u64,
    /// Successful steals from other nodes.
    pub remote_steals: u64,
    /// Victims tried that had nothing.
    pub failed_steals: u64,
    /// Fibers moved by steals.
    pub stolen_fibers: u64,
    /// Nanoseconds of compute lost to remote memory, summed over workers.
    pub remote_penalty_ns: u64,
    /// Fibers per node of the worker they finished on.
    pub executed_per_node: Vec<u64>,
    /// `Scheduler::placements(n)` at the end, per node.
    pub placements: Vec<u64>,
    /// `Scheduler::node_workload(n)` at the end, per node.
    pub node_workload: Vec<i64>,
    /// Node of every worker, as handed to `Scheduler::new`.
    pub worker_node: Vec<usize>,
    /// Per-worker numbers.
    pub workers: Vec<SimWorkerStats>,
    /// Events processed.
    pub events: u64,
    /// The policy calls, if [`SimConfig::trace`] was on.
    pub trace: Option<Vec<Decision>>,
}

impl SimResult {
    /// Simulated makespan in seconds.
    pub fn makespan_s(&self) -> f64 {
        self.makespan_ns as f64 * 1e-9
    }

    /// Remote steals over all successful steals (0 without steals).
    ///
    /// ```
    /// # use numafiber::sim::{simulate, SimConfig, Workload};
    /// # use numafiber::{Policy, Topology};
    /// let r = simulate(&Topology::uniform(1, 2), &SimConfig::new(Policy::NumaSteal), &Workload::fork_join(8, 500, 50, 64)).unwrap();
    /// assert_eq!(r.remote_steal_ratio(), 0.0); // one node: every steal is local
    /// ```
    pub fn remote_steal_ratio(&self) -> f64 {
        let all = self.local_steals + self.remote_steals;
        if all == 0 {
            0.0
        } else {
            self.remote_steals as f64 / all as f64
        }
    }
}

/// Why a simulation could not run or finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimError {
    msg: String,
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "simulation failed: {}", self.msg)
    }
}

impl std::error::Error for SimError {}

/// Node distance matrices of machines we do not have, for
/// [`Topology::with_distances`].
pub mod distances {
    /// AMD EPYC-like (two sockets, NPS4): nodes in groups of four per
    /// socket; 10 local, 12 within a socket, 32 across sockets.
    ///
    /// ```
    /// let m = numafiber::sim::distances::epyc_like(8);
    /// assert_eq!((m[0][0], m[0][3], m[0][4]), (10, 12, 32));
    /// let topo = numafiber::Topology::uniform(8, 16).with_distances(m).unwrap();
    /// assert_eq!(topo.nodes_by_distance(0)[..3], [1, 2, 3]);
    /// ```
    pub fn epyc_like(nodes: usize) -> Vec<Vec<u32>> {
        grouped(nodes, 4, 12, 32)
    }

    /// Intel Xeon-like (one node per socket, up to four sockets fully
    /// connected, groups of four glued together): 10 local, 21 within a
    /// group, 31 across groups.
    ///
    /// ```
    /// let m = numafiber::sim::distances::xeon_like(8);
    /// assert_eq!((m[0][1], m[0][4]), (21, 31));
    /// ```
    pub fn xeon_like(nodes: usize) -> Vec<Vec<u32>> {
        grouped(nodes, 4, 21, 31)
    }

    fn grouped(nodes: usize, group: usize, near: u32, far: u32) -> Vec<Vec<u32>> {
        (0..nodes)
            .map(|a| {
                (0..nodes)
                    .map(|b| match (a == b, a / group == b / group) {
                        (true, _) => 10,
                        (false, true) => near,
                        (false, false) => far,
                    })
                    .collect()
            })
            .collect()
    }
}

/// Run `workload` on a simulated `topo` under `cfg`.
///
/// # Errors
/// A [`SimError`] if the topology cannot host the workers, or the program
/// deadlocks (a fiber awaits one that is never spawned before it).
pub fn simulate(topo: &Topology, cfg: &SimConfig, workload: &Workload) -> Result<SimResult, SimError> {
    let mut sim = Sim::new(topo, cfg, workload)?;
    sim.run()?;
    Ok(sim.finish())
}

mod engine;

use engine::Sim;
pub(crate) use engine::SplitMix;
