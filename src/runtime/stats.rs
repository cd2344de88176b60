//! [`Stats`]: what the runtime counted, per worker and per node.

use super::*;

/// Counters of one worker.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct WorkerStats {
    /// Worker index.
    pub worker: usize,
    /// NUMA node of the worker in the runtime's topology.
    pub node: usize,
    /// Real PU (OS index) the worker was mapped to.
    pub cpu: usize,
    /// Whether pinning to `cpu` succeeded.
    pub pinned: bool,
    /// Linux thread id of the worker.
    pub tid: i32,
    /// Fibers spawned from fibers running on this worker.
    pub spawned: u64,
    /// Fibers that finished on this worker.
    pub executed: u64,
    /// Times a fiber was resumed on this worker.
    pub resumes: u64,
    /// Successful steals from a worker of the same node.
    pub local_steals: u64,
    /// Successful steals from a worker of another node.
    pub remote_steals: u64,
    /// Steal attempts that found nothing.
    pub failed_steals: u64,
    /// Fibers moved here by steals.
    pub stolen_fibers: u64,
    /// Times a fiber parked on this worker.
    pub parks: u64,
    /// Times this worker, asleep for want of work, was woken by another
    /// thread that made work visible (each a futex wake or an interrupted
    /// `epoll_wait`, paid by the waker; a wake-up that finds nothing to
    /// do is wasted). Sleeps that ended by their own timeout (a due timer,
    /// a watching park) are not counted.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// rt.block_on(|| {
    ///     for i in 0..1000 {
    ///         assert_eq!(fiber::spawn(move || i).join().unwrap(), i);
    ///     }
    /// });
    /// // Spawn + join at once needs no second worker; a spawn wakes a
    /// // sleeping one (it may be wanted), and that one then searches for
    /// // a while instead of being woken again by every spawn.
    /// let woken: u64 = rt.stats().workers.iter().map(|w| w.woken).sum();
    /// println!("{woken} wake-ups for 1,000 spawns");
    /// ```
    pub woken: u64,
    /// Stacks this worker mapped (fresh `mmap`s, not pool hits).
    pub stacks_mapped: u64,
    /// Joins by a fiber on this worker that ran their own child at once
    /// because nobody had started it yet (the child was queued on another
    /// worker of the node, or on this one as the next fiber it would start
    /// while other workers may take work; see
    /// [`JoinHandle::join`](crate::fiber::JoinHandle::join)).
    /// A child that had not left this worker yet (its spawner had not given
    /// control back since the spawn: the held-child slot) is simply taken
    /// back. One that was already in the other worker's inbox leaves a
    /// surplus queue entry behind there, which that worker drops without
    /// running anything; [`stolen_fibers`](Self::stolen_fibers) counts such
    /// entries when a steal moves them.
    pub reclaimed: u64,
    /// Fibers spawned on this worker (by its fibers, or as the fiber of a
    /// stolen [`fiber::join`](crate::fiber::join) job) whose control block
    /// reused the memory of a finished fiber from this worker's pool
    /// instead of a new allocation. A worker keeps up to 256 finished
    /// fibers' blocks (about 350 bytes each) for that, so the memory of a
    /// fiber started on one worker and finished on another is not freed
    /// across threads (which contends on the allocator's locks).
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     for i in 0..10 {
    ///         assert_eq!(fiber::spawn(move || i).join().unwrap(), i);
    ///     }
    /// });
    /// // The first child's block came from the allocator; each later one
    /// // reuses the block of the child joined before it.
    /// assert_eq!(rt.stats().workers[0].tasks_reused, 9);
    /// ```
    pub tasks_reused: u64,
    /// Timers in this worker's heap (sleeps and timed waits), as last
    /// published by the worker. Includes stale ones (a timed wait that
    /// ended before its deadline) until the heap is next compacted, which
    /// keeps it within about twice the live timers (at least 64).
    pub pending_timers: usize,
}

/// Counters of one NUMA node.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeStats {
    /// Node index.
    pub node: usize,
    /// Workers on the node.
    pub workers: usize,
    /// Fibers finished on the node.
    pub executed: u64,
    /// Successful steals by this node's workers from the same node.
    pub local_steals: u64,
    /// Successful steals by this node's workers from other nodes.
    pub remote_steals: u64,
    /// Failed steal attempts by this node's workers.
    pub failed_steals: u64,
    /// Fibers placed on this node by the placement policy
    /// ([`Scheduler::placements`](crate::policy::Scheduler::placements):
    /// counted per spawner and summed, exact once spawning has stopped).
    pub placements: u64,
    /// The placement policy's workload count of the node
    /// ([`Scheduler::node_workload`](crate::policy::Scheduler::node_workload)).
    pub workload: i64,
}

/// A snapshot of a runtime's counters.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stats {
    /// Fibers spawned (from fibers and from other threads).
    pub spawned: u64,
    /// Fibers finished.
    pub completed: u64,
    /// Successful same-node steals.
    pub local_steals: u64,
    /// Successful cross-node steals.
    pub remote_steals: u64,
    /// Steal attempts that found nothing.
    pub failed_steals: u64,
    /// Per worker.
    pub workers: Vec<WorkerStats>,
    /// Per node of the topology.
    pub nodes: Vec<NodeStats>,
    /// The policy.
    pub policy: Policy,
    /// The topology's description.
    pub topology: String,
    /// The topology is not this machine: its logical PUs were mapped onto
    /// the real PUs round-robin and pinning is best effort.
    pub mapped_onto_real_pus: bool,
    /// The topology had no distance matrix: 10 local / 20 remote is used.
    pub default_distances: bool,
    /// Socket system calls made by this runtime's fibers (`numafiber::net`)
    /// that returned `WouldBlock`: the wasted ones. A socket known to be
    /// drained (a call said `WouldBlock` and no readiness event came since)
    /// is not tried again before the fiber waits, so this stays at or
    /// below one per wait.
    pub io_would_block: u64,
    /// Fiber slices that ran longer than the stall threshold without being
    /// a stall (nothing waited on them that another worker did not take):
    /// normal in fork-join and task-graph code, so not printed; a
    /// `Builder::on_stall` hook gets the count once, at shutdown, as
    /// `StallCause::LongSlices`. 0 when the stall monitor is off.
    pub long_slices: u64,
}

impl Stats {
    pub(super) fn collect(shared: &Shared) -> Stats {
        // Every worker's thread id and pinning result, once it started
        // (`build` does not wait for that unless pinning is strict).
        // (In a forked child the workers are the parent's: do not wait.)
        while shared.started.load(Acquire) < shared.workers.len() && !shared.in_forked_child() {
            std::thread::yield_now();
        }
        let workers: Vec<WorkerStats> = shared
            .workers
            .iter()
            .map(|w| {
                let c = &w.counters;
                WorkerStats {
                    worker: w.index,
                    node: w.slot.node,
                    cpu: w.slot.cpu,
                    pinned: w.pinned_ok.load(Relaxed),
                    tid: w.tid.load(Relaxed),
                    spawned: c.spawned.load(Relaxed),
                    executed: c.completed.load(Relaxed),
                    resumes: c.resumes.load(Relaxed),
                    local_steals: c.local_steals.load(Relaxed),
                    remote_steals: c.remote_steals.load(Relaxed),
                    failed_steals: c.failed_steals.load(Relaxed),
                    stolen_fibers: c.stolen_fibers.load(Relaxed),
                    parks: c.parks.load(Relaxed),
                    woken: c.woken.load(Relaxed),
                    stacks_mapped: c.stacks_mapped.load(Relaxed),
                    reclaimed: c.reclaimed.load(Relaxed),
                    tasks_reused: c.tasks_reused.load(Relaxed),
                    pending_timers: w.timers.len(),
                }
            })
            .collect();
        let nodes = (0..shared.topology.nodes().len())
            .map(|n| {
                let ws = workers.iter().filter(|w| w.node == n);
                let mut s = NodeStats {
                    node: n,
                    workers: 0,
                    executed: 0,
                    local_steals: 0,
                    remote_steals: 0,
                    failed_steals: 0,
                    placements: shared.sched.placements(n),
                    workload: shared.sched.node_workload(n),
                };
                for w in ws {
                    s.workers += 1;
                    s.executed += w.executed;
                    s.local_steals += w.local_steals;
                    s.remote_steals += w.remote_steals;
                    s.failed_steals += w.failed_steals;
                }
                s
            })
            .collect();
        Stats {
            spawned: workers.iter().map(|w| w.spawned).sum::<u64>() + shared.foreign_spawned.load(Relaxed),
            completed: workers.iter().map(|w| w.executed).sum(),
            local_steals: workers.iter().map(|w| w.local_steals).sum(),
            remote_steals: workers.iter().map(|w| w.remote_steals).sum(),
            failed_steals: workers.iter().map(|w| w.failed_steals).sum(),
            workers,
            nodes,
            policy: shared.sched.policy(),
            topology: shared.topology.description().to_string(),
            mapped_onto_real_pus: !shared.topology.is_this_machine(),
            default_distances: !shared.topology.has_distance_matrix(),
            io_would_block: shared.reactor.get().map_or(0, |r| r.would_block()),
            long_slices: shared.insight.monitor.long_slices(),
        }
    }

    /// Remote steals over all successful steals (0 when none).
    pub fn remote_steal_ratio(&self) -> f64 {
        let all = self.local_steals + self.remote_steals;
        if all == 0 {
            0.0
        } else {
            self.remote_steals as f64 / all as f64
        }
    }
}
