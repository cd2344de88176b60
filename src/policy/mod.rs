//! Scheduling policies: where new fibers go (placement) and whom an idle
//! worker robs (victim order) — the schedulers of the thesis (§4.2-4.4).
//!
//! Most users only pick a [`Policy`] (and maybe a [`StealChunk`] and
//! [`PolicyOptions`]) on the runtime builder. The rest of this module is the
//! machinery the worker loop drives, public so that benchmarks and a
//! simulator can drive it too:
//!
//! * [`placement`], [`steal`]: **pure functions** over a snapshot
//!   (workload counts, queue lengths, estimators, distances) that return a
//!   decision. No atomics, no threads; unit-tested on hand-built snapshots.
//! * [`status`]: the SWAS status codes and estimator, and the two kinds of
//!   status view the stealing policies keep (a thief's own view of each
//!   other node, and a board per node shared by that node's workers; the
//!   module docs give the rules and why they keep the thesis' decisions).
//! * [`Scheduler`]: one per runtime; owns the shared state (round-robin
//!   counter, per-node workload counts, the per-node status boards) in
//!   atomics and applies the pure functions. Each worker owns one
//!   [`ThiefState`] (its rng, its views of the other nodes and scratch
//!   buffers), whose size depends on the number of nodes, never on the
//!   number of workers ([`ThiefState::heap_bytes`]).
//!
//! # What the worker loop calls, and when
//!
//! ```text
//! build:   sched = Scheduler::new(policy, opts, worker_node, &topo)
//!          per worker w: st[w] = sched.new_thief_state(w, seed)
//! spawn:   w = sched.place(spawner, &probe)   // spawner: Some(worker) or None
//!          push the fiber to w (own deque if w == spawner, else w's inbox)
//!          (a fiber put on a worker without place(): sched.record_placement(w))
//! run:     sched.set_own_status(w, &st[w], true)    before running fibers
//! idle:    sched.set_own_status(w, &st[w], false)   before stealing
//!          if sched.steals() {
//!              let mut victims = sched.victims(w, &mut st[w]);  // lazy, in order
//!              while let Some(v) = victims.next() {
//!                  n = steal_batch_with_limit(v, chunk.limit(len(v)))
//!                  victims.record_steal(v, n > 0)  // = sched.record_steal(w, &mut st[w], v, n > 0)
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
//! A steal pass allocates nothing: [`Scheduler::victims`] decides the node
//! order and one random start per node up front (O(nodes), in the thief's
//! scratch buffers) and [`Victims`] then walks the nodes' worker lists.
//!
//! A fiber is counted on one node from its placement to its end: `place`
//! (or `record_placement`) adds it, `fiber_moved` carries it along, and
//! `fiber_left_node` removes it where it ends. Counts are relaxed atomics;
//! racing spawners may read each other's counts late (as in the thesis),
//! and a decrementing count may dip below zero for a moment.
//!
//! Only what a decision reads is shared by all spawners: the workload of
//! each node when two or more nodes have workers. Placement statistics
//! ([`Scheduler::placements`]), and the single node's workload when only
//! one node has workers (the node choice is then fixed), are counted per
//! spawner, each spawner on a cache line of its own, and summed when read
//! (no contended read-modify-write per spawn). NLH reads a queue
//! length only where it can change the answer (see
//! [`Scheduler::place_nlh`]); the runtime's probe is cheap and approximate
//! (`runtime::worker::shared::PublishedLen` gives its staleness bound).
//!
//! `fiber_moved` and `fiber_left_node` are no-ops unless the policy is
//! [`Policy::Nlh`] with [`PolicyOptions::decrement_workload`]; they are cheap
//! to call unconditionally.

pub mod placement;
pub mod status;
pub mod steal;

use std::fmt;
use std::str::FromStr;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

use crate::topology::Topology;

use self::placement::SmallBuf;
use self::status::{NodeView, StatusBoard, WorkerStatus};

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
    /// Round-robin placement, busiest node first by SWAS status views (Alg. 4.4).
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

    /// Whether thieves keep SWAS status views, the thesis' 2-bit status
    /// bitmaps (`LoadSteal`, `HybridSteal`, `Nlh`; see [`status`]).
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

/// Per-thief private state: rng, the thief's views of the other nodes
/// (SWAS, [`status`] rule 1) and scratch buffers for the victim order.
/// Owned by one worker; passed to the [`Scheduler`] calls.
///
/// Its size depends on the number of nodes only (a few words per node),
/// not on the number of workers: see [`ThiefState::heap_bytes`].
///
/// ```
/// use numafiber::policy::{PolicyOptions, Scheduler};
/// use numafiber::{Policy, Topology};
/// let bytes = |workers_per_node| {
///     let topo = Topology::uniform(4, workers_per_node);
///     let s = Scheduler::new(Policy::Nlh, PolicyOptions::default(), topo.plan_workers(4 * workers_per_node, false)
///         .unwrap().iter().map(|slot| slot.node).collect(), &topo);
///     s.new_thief_state(0, 1).heap_bytes()
/// };
/// assert_eq!(bytes(1), bytes(256)); // 4 workers or 1024: the same
/// ```
#[derive(Debug, Clone)]
pub struct ThiefState {
    worker: usize,
    node: usize,
    rng: u64,
    /// `views[n]`: this thief's view of node `n` (bitmap policies; empty
    /// otherwise). The entry of the thief's own node is not used: its own
    /// node is read from the shared board.
    views: Vec<NodeView>,
    estimators: Vec<f64>,
    scores: Vec<f64>,
    /// Node order of the last `victims` call.
    order: Vec<usize>,
    /// `starts[i]`: rotation of the workers of node `order[i]`.
    starts: Vec<usize>,
}

impl ThiefState {
    /// The worker this state belongs to.
    pub fn worker(&self) -> usize {
        self.worker
    }

    /// This thief's view of the workers of `node`, another node than its
    /// own ([`status`] rule 1). `None` for its own node (see
    /// [`Scheduler::status`]), for a node out of range, and for policies
    /// without status views.
    ///
    /// ```
    /// use numafiber::policy::{status::{NodeView, WorkerStatus}, PolicyOptions, Scheduler};
    /// use numafiber::{Policy, Topology};
    /// let s = Scheduler::new(Policy::LoadSteal, PolicyOptions::default(), vec![0, 0, 1, 1], &Topology::uniform(2, 2));
    /// let mut st = s.new_thief_state(0, 1);
    /// assert_eq!(st.node_view(1), Some(NodeView::uniform(2, WorkerStatus::DontKnow)));
    /// s.record_steal(0, &mut st, 3, true); // a remote success: all of node 1 busy
    /// assert_eq!(st.node_view(1).unwrap().status(), Some(WorkerStatus::Busy));
    /// assert_eq!(st.node_view(0), None);
    /// ```
    pub fn node_view(&self, node: usize) -> Option<NodeView> {
        if node == self.node {
            return None;
        }
        self.views.get(node).copied()
    }

    /// The node estimators computed by the last [`Scheduler::victims`] of a
    /// bitmap policy, indexed by node.
    pub fn estimators(&self) -> &[f64] {
        &self.estimators
    }

    /// Heap bytes this state holds (the capacity of its buffers): a few
    /// words per node of the scheduler, the same for any number of workers.
    /// Victim passes do not grow it (the buffers are sized for every node
    /// when the state is made).
    pub fn heap_bytes(&self) -> usize {
        use std::mem::size_of;
        self.views.capacity() * size_of::<NodeView>()
            + (self.estimators.capacity() + self.scores.capacity()) * size_of::<f64>()
            + (self.order.capacity() + self.starts.capacity()) * size_of::<usize>()
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

/// The victims of one steal pass, in order (from [`Scheduler::victims`]).
/// A lazy walk over the node order the policy chose, each node's workers
/// from a random start, the thief skipped; it allocates nothing.
///
/// [`Victims::record_steal`] reports an attempt while walking (the same as
/// [`Scheduler::record_steal`], which cannot be called while the walk
/// borrows the thief's state).
///
/// ```
/// use numafiber::policy::{PolicyOptions, Scheduler};
/// use numafiber::{Policy, Topology};
/// let s = Scheduler::new(Policy::HybridSteal, PolicyOptions::default(), vec![0, 0, 1, 1], &Topology::uniform(2, 2));
/// let mut st = s.new_thief_state(0, 42);
/// let mut victims = s.victims(0, &mut st);
/// assert_eq!(victims.remaining().collect::<Vec<_>>().len(), 3);
/// let first = victims.next().unwrap();
/// assert_eq!(first, 1); // the node mate first
/// victims.record_steal(first, false);
/// assert_eq!(victims.count(), 2); // then node 1's workers
/// assert_eq!(s.status(1), numafiber::policy::status::WorkerStatus::Idle);
/// ```
#[derive(Debug)]
pub struct Victims<'a> {
    order: VictimOrder<'a>,
    sched: &'a Scheduler,
    views: &'a mut [NodeView],
}

impl<'a> Victims<'a> {
    /// Report how the attempt on `victim` went (see
    /// [`Scheduler::record_steal`]).
    ///
    /// # Panics
    /// If `victim` is not a worker of the scheduler.
    #[inline]
    pub fn record_steal(&mut self, victim: usize, success: bool) {
        self.sched.record_into(self.order.thief, self.views, victim, success);
    }

    /// The victims not walked yet, without advancing (for traces).
    pub fn remaining(&self) -> VictimOrder<'a> {
        self.order.clone()
    }
}

impl Iterator for Victims<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        self.order.next()
    }
}

/// The victim order itself: an iterator over worker indices that can be
/// cloned ([`Victims::remaining`]).
#[derive(Debug, Clone)]
pub struct VictimOrder<'a> {
    node_workers: &'a [Vec<usize>],
    thief: usize,
    walk: Walk<'a>,
}

#[derive(Debug, Clone)]
enum Walk<'a> {
    /// Workers `next, next + 1, ...` (mod `n`), `left` of them still to go.
    Random { n: usize, next: usize, left: usize },
    /// The workers of the current node, `cur`, from index `j` (wrapping to
    /// 0), `left` of them still to go; then node `order[pos]` from
    /// `starts[pos]`, and so on.
    Nodes { order: &'a [usize], starts: &'a [usize], pos: usize, cur: &'a [usize], j: usize, left: usize },
}

impl Iterator for VictimOrder<'_> {
    type Item = usize;

    #[inline]
    fn next(&mut self) -> Option<usize> {
        let thief = self.thief;
        match &mut self.walk {
            Walk::Random { n, next, left } => {
                while *left > 0 {
                    let w = *next;
                    *left -= 1;
                    *next = if w + 1 == *n { 0 } else { w + 1 };
                    if w != thief {
                        return Some(w);
                    }
                }
                None
            }
            Walk::Nodes { order, starts, pos, cur, j, left } => loop {
                while *left > 0 {
                    let w = cur[*j];
                    *left -= 1;
                    *j = if *j + 1 == cur.len() { 0 } else { *j + 1 };
                    if w != thief {
                        return Some(w);
                    }
                }
                let (&node, &start) = (order.get(*pos)?, starts.get(*pos)?);
                *pos += 1;
                *cur = &self.node_workers[node];
                *j = start;
                *left = cur.len();
            },
        }
    }
}

mod scheduler;

pub use scheduler::Scheduler;

#[cfg(test)]
mod tests;
