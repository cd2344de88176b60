//! Simulated workloads: a static program of fibers, each a list of
//! [`Op`]s, plus the program of the `main` thread that starts them.
//!
//! Every fiber is spawned exactly once (by `main` or by one other fiber),
//! which [`Workload::new`] checks; the simulator then checks that every
//! fiber also *completes* exactly once (conservation).
//!
//! The generators build the workloads of the simulator issue:
//!
//! * [`Workload::matrix`]: the thesis' benchmark (section 5.1), balanced or
//!   imbalanced, with thief fibers awaiting heavy fibers;
//! * [`Workload::fork_join`]: a fib-like fork-join tree;
//! * [`Workload::random_dag`]: a random task DAG, each task awaiting its
//!   predecessors and reading their output;
//! * [`Workload::skewed_producer`]: one producer fiber (so one node) spawns
//!   every consumer, and every consumer reads the producer's data.

use std::fmt;

/// Compute work of one [`Op::Compute`] step: a cost in nanoseconds when
/// run on the node its memory lives on, optionally slower on one node (the
/// thesis' imbalanced scenario multiplies 3x on node 0).
///
/// ```
/// use numafiber::sim::Work;
/// let w = Work::new(1_000).slower_on(0, 3.0);
/// assert_eq!(w.cost_on(0), 3_000.0);
/// assert_eq!(w.cost_on(1), 1_000.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Work {
    /// Cost in nanoseconds, all memory local.
    pub ns: u64,
    /// `(node, factor)`: the cost is multiplied by `factor` when the step
    /// starts on a worker of `node`.
    pub slow_node: Option<(usize, f64)>,
}

impl Work {
    /// Work of `ns` nanoseconds on every node.
    pub const fn new(ns: u64) -> Work {
        Work { ns, slow_node: None }
    }

    /// The same work, `factor` times as long when it starts on `node`.
    pub const fn slower_on(self, node: usize, factor: f64) -> Work {
        Work { ns: self.ns, slow_node: Some((node, factor)) }
    }

    /// Cost in nanoseconds on `node`, before the remote-memory penalty.
    pub fn cost_on(&self, node: usize) -> f64 {
        match self.slow_node {
            Some((n, f)) if n == node => self.ns as f64 * f,
            _ => self.ns as f64,
        }
    }
}

/// One step of a simulated fiber (or of the `main` thread).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Op {
    /// Run for a while (costed by the simulator's [`CostModel`](super::CostModel)).
    Compute(Work),
    /// Spawn fiber `id` (an index into [`Workload::fibers`]).
    Spawn(usize),
    /// Wait until fiber `id` has finished (`fiber::await_fiber`; `join` on
    /// the `main` thread).
    Await(usize),
}

/// A simulated fiber: its program, its memory and what it reads.
///
/// Its own memory (`footprint` bytes) is homed on the node where it first
/// runs; `inputs` are fibers whose memory it reads (homed where *they*
/// first ran). The memory-bound share of every compute step is charged by
/// the distance to each of these homes, weighted by their footprints.
///
/// ```
/// use numafiber::sim::{FiberSpec, Op, Work};
/// let f = FiberSpec::new(vec![Op::Compute(Work::new(10))]).footprint(4096).inputs(vec![0]);
/// assert_eq!(f.footprint, 4096);
/// ```
#[derive(Debug, Clone, PartialEq, Default)]
pub struct FiberSpec {
    /// The steps, run in order.
    pub ops: Vec<Op>,
    /// Bytes of memory homed on the node where the fiber first runs.
    pub footprint: u64,
    /// Fibers whose memory this one reads.
    pub inputs: Vec<usize>,
}

impl FiberSpec {
    /// A fiber with these steps, no memory and no inputs.
    pub fn new(ops: Vec<Op>) -> FiberSpec {
        FiberSpec { ops, footprint: 0, inputs: Vec::new() }
    }

    /// Set the footprint.
    pub fn footprint(mut self, bytes: u64) -> FiberSpec {
        self.footprint = bytes;
        self
    }

    /// Set the inputs.
    pub fn inputs(mut self, inputs: Vec<usize>) -> FiberSpec {
        self.inputs = inputs;
        self
    }
}

/// A workload that [`Workload::new`] rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkloadError {
    msg: String,
}

impl fmt::Display for WorkloadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid simulated workload: {}", self.msg)
    }
}

impl std::error::Error for WorkloadError {}

/// A complete simulated program: the `main` thread's steps and the fibers.
///
/// ```
/// use numafiber::sim::{FiberSpec, Op, Work, Workload};
/// let child = FiberSpec::new(vec![Op::Compute(Work::new(1_000))]);
/// let w = Workload::new("one", vec![Op::Spawn(0), Op::Await(0)], vec![child]).unwrap();
/// assert_eq!(w.fibers().len(), 1);
/// // A fiber spawned twice is rejected.
/// let twice = Workload::new("bad", vec![Op::Spawn(0), Op::Spawn(0)], vec![FiberSpec::default()]);
/// assert!(twice.is_err());
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    name: String,
    main: Vec<Op>,
    fibers: Vec<FiberSpec>,
}

impl Workload {
    /// Check and wrap a program: every fiber is spawned exactly once, by
    /// `main` or by a fiber that is itself spawned (so the spawn relation
    /// is a tree rooted at `main`); every `Spawn`, `Await` and input names
    /// an existing fiber.
    ///
    /// # Errors
    /// A [`WorkloadError`] naming the first offending fiber.
    pub fn new(name: impl Into<String>, main: Vec<Op>, fibers: Vec<FiberSpec>) -> Result<Workload, WorkloadError> {
        let n = fibers.len();
        let err = |msg: String| Err(WorkloadError { msg });
        let mut spawner: Vec<Option<Option<usize>>> = vec![None; n];
        let check = |id: usize, what: &str, by: &str| {
            if id >= n {
                Err(WorkloadError { msg: format!("{by} {what} fiber {id}, but there are only {n} fibers") })
            } else {
                Ok(())
            }
        };
        let mut programs: Vec<(Option<usize>, &[Op])> = vec![(None, &main)];
        programs.extend(fibers.iter().enumerate().map(|(i, f)| (Some(i), f.ops.as_slice())));
        for (who, ops) in programs {
            let by = who.map_or("main".to_string(), |i| format!("fiber {i}"));
            for op in ops {
                match *op {
                    Op::Spawn(c) => {
                        check(c, "spawns", &by)?;
                        if spawner[c].is_some() {
                            return err(format!("fiber {c} is spawned twice (again by {by})"));
                        }
                        spawner[c] = Some(who);
                    }
                    Op::Await(c) => check(c, "awaits", &by)?,
                    Op::Compute(w) => {
                        if let Some((_, f)) = w.slow_node {
                            if !(f.is_finite() && f >= 0.0) {
                                return err(format!("{by} has a slow-node factor {f}"));
                            }
                        }
                    }
                }
            }
        }
        for (i, f) in fibers.iter().enumerate() {
            for &inp in &f.inputs {
                check(inp, "reads", &format!("fiber {i}"))?;
            }
        }
        // Reachability from main: walk up the spawner chain.
        for i in 0..n {
            let mut cur = i;
            let mut steps = 0;
            loop {
                match spawner[cur] {
                    None => return err(format!("fiber {i} is never spawned (its chain stops at fiber {cur})")),
                    Some(None) => break,
                    Some(Some(p)) => cur = p,
                }
                steps += 1;
                if steps > n {
                    return err(format!("fiber {i} is in a spawn cycle"));
                }
            }
        }
        Ok(Workload { name: name.into(), main, fibers })
    }

    /// A short name for tables.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The `main` thread's steps.
    pub fn main(&self) -> &[Op] {
        &self.main
    }

    /// The fibers, indexed by id.
    pub fn fibers(&self) -> &[FiberSpec] {
        &self.fibers
    }

    /// The thesis' matrix benchmark (5.1), exactly the shape of
    /// `examples/thesis_bench`: `main` spawns two generation fibers and
    /// awaits them, then spawns `mults` multiplication fibers and
    /// `thieves` thief fibers alternately (from the `main` thread, so
    /// placement sees an external spawner), and awaits all. A
    /// multiplication costs `p.mult_ns` (3x when it starts on node 0 and
    /// the scenario is imbalanced) and reads both matrices; a thief spawns
    /// one heavy fiber of `heavy_mults` multiplications and awaits it.
    ///
    /// ```
    /// use numafiber::sim::{MatrixParams, Workload};
    /// let w = Workload::matrix(&MatrixParams { mults: 4, thieves: 2, ..MatrixParams::default() });
    /// assert_eq!(w.fibers().len(), 2 + 4 + 2 * 2); // as thesis_bench counts them
    /// ```
    pub fn matrix(p: &MatrixParams) -> Workload {
        let bytes = (p.size * p.size * 8) as u64;
        let mut fibers = vec![
            FiberSpec::new(vec![Op::Compute(Work::new(p.gen_ns))]).footprint(bytes),
            FiberSpec::new(vec![Op::Compute(Work::new(p.gen_ns))]).footprint(bytes),
        ];
        let mut main = vec![Op::Spawn(0), Op::Spawn(1), Op::Await(0), Op::Await(1)];
        let mut awaited = Vec::new();
        let mult = if p.imbalanced { Work::new(p.mult_ns).slower_on(0, 3.0) } else { Work::new(p.mult_ns) };
        for i in 0..p.mults.max(p.thieves) {
            if i < p.mults {
                let id = fibers.len();
                fibers.push(FiberSpec::new(vec![Op::Compute(mult)]).footprint(bytes).inputs(vec![0, 1]));
                main.push(Op::Spawn(id));
                awaited.push(id);
            }
            if i < p.thieves {
                let heavy = fibers.len();
                let ns = p.mult_ns.saturating_mul(p.heavy_mults as u64);
                fibers.push(FiberSpec::new(vec![Op::Compute(Work::new(ns))]).footprint(bytes).inputs(vec![0, 1]));
                let thief = fibers.len();
                fibers.push(FiberSpec::new(vec![Op::Spawn(heavy), Op::Await(heavy)]));
                main.push(Op::Spawn(thief));
                awaited.push(thief);
            }
        }
        main.extend(awaited.into_iter().map(Op::Await));
        let name = if p.imbalanced { "matrix/imbalanced" } else { "matrix/balanced" };
        Workload::new(name, main, fibers).expect("the matrix workload is well formed")
    }

    /// A fib-like fork-join tree: `fib(n)` spawns `fib(n-1)` and
    /// `fib(n-2)`, awaits both and computes `node_ns`; `fib(0)` and
    /// `fib(1)` compute `leaf_ns`. Each fiber reads its parent's frame
    /// (`frame_bytes`). `main` spawns the root and awaits it.
    ///
    /// ```
    /// use numafiber::sim::Workload;
    /// let w = Workload::fork_join(10, 1_000, 100, 256);
    /// assert_eq!(w.fibers().len(), 177); // fib-call tree of fib(10)
    /// ```
    pub fn fork_join(n: u32, leaf_ns: u64, node_ns: u64, frame_bytes: u64) -> Workload {
        fn build(n: u32, parent: Option<usize>, leaf: u64, node: u64, bytes: u64, out: &mut Vec<FiberSpec>) -> usize {
            let id = out.len();
            out.push(FiberSpec::default().footprint(bytes).inputs(parent.into_iter().collect()));
            let ops = if n < 2 {
                vec![Op::Compute(Work::new(leaf))]
            } else {
                let a = build(n - 1, Some(id), leaf, node, bytes, out);
                let b = build(n - 2, Some(id), leaf, node, bytes, out);
                vec![Op::Spawn(a), Op::Spawn(b), Op::Await(a), Op::Await(b), Op::Compute(Work::new(node))]
            };
            out[id].ops = ops;
            id
        }
        let mut fibers = Vec::new();
        let root = build(n, None, leaf_ns, node_ns, frame_bytes, &mut fibers);
        Workload::new(format!("fork_join/fib{n}"), vec![Op::Spawn(root), Op::Await(root)], fibers)
            .expect("the fork-join tree is well formed")
    }

    /// A random DAG of `tasks` tasks: task `i` depends on up to `max_deps`
    /// distinct earlier tasks (drawn with `seed`), awaits them, then
    /// computes a cost drawn uniformly from `cost_ns` and reads their
    /// outputs (`bytes` each). A driver fiber spawns every task in
    /// topological order and awaits them all; `main` spawns the driver.
    ///
    /// ```
    /// use numafiber::sim::Workload;
    /// let a = Workload::random_dag(50, 3, 1_000..5_000, 1 << 16, 7);
    /// assert_eq!(a.fibers().len(), 51); // the tasks and the driver
    /// assert_eq!(a, Workload::random_dag(50, 3, 1_000..5_000, 1 << 16, 7)); // seeded
    /// ```
    pub fn random_dag(tasks: usize, max_deps: usize, cost_ns: std::ops::Range<u64>, bytes: u64, seed: u64) -> Workload {
        let mut rng = super::SplitMix::new(seed);
        let span = cost_ns.end.saturating_sub(cost_ns.start).max(1);
        let mut fibers: Vec<FiberSpec> = Vec::with_capacity(tasks + 1);
        for i in 0..tasks {
            let k = if i == 0 { 0 } else { (rng.next() % (max_deps as u64 + 1)) as usize };
            let mut deps: Vec<usize> = Vec::new();
            for _ in 0..k.min(i) {
                let d = (rng.next() % i as u64) as usize;
                if !deps.contains(&d) {
                    deps.push(d);
                }
            }
            deps.sort_unstable();
            let cost = cost_ns.start + rng.next() % span;
            let mut ops: Vec<Op> = deps.iter().map(|&d| Op::Await(d)).collect();
            ops.push(Op::Compute(Work::new(cost)));
            fibers.push(FiberSpec::new(ops).footprint(bytes).inputs(deps));
        }
        let driver = tasks;
        let mut ops: Vec<Op> = (0..tasks).map(Op::Spawn).collect();
        ops.extend((0..tasks).map(Op::Await));
        fibers.push(FiberSpec::new(ops));
        Workload::new(format!("random_dag/{tasks}"), vec![Op::Spawn(driver), Op::Await(driver)], fibers)
            .expect("the random DAG is well formed")
    }

    /// One producer spawns everything: a producer fiber computes
    /// `produce_ns` per item and spawns a consumer for it; each consumer
    /// computes `consume_ns` and reads the producer's data (`bytes`), so
    /// it runs best on the producer's node. The producer awaits every
    /// consumer; `main` spawns the producer (it lands on node 0 under
    /// every placement policy of an empty runtime) and awaits it.
    ///
    /// ```
    /// use numafiber::sim::Workload;
    /// let w = Workload::skewed_producer(100, 500, 20_000, 1 << 20);
    /// assert_eq!(w.fibers().len(), 101);
    /// ```
    pub fn skewed_producer(items: usize, produce_ns: u64, consume_ns: u64, bytes: u64) -> Workload {
        let producer = items;
        let mut fibers: Vec<FiberSpec> = (0..items)
            .map(|_| FiberSpec::new(vec![Op::Compute(Work::new(consume_ns))]).inputs(vec![producer]))
            .collect();
        let mut ops = Vec::with_capacity(3 * items);
        for i in 0..items {
            ops.push(Op::Compute(Work::new(produce_ns)));
            ops.push(Op::Spawn(i));
        }
        ops.extend((0..items).map(Op::Await));
        fibers.push(FiberSpec::new(ops).footprint(bytes));
        Workload::new(format!("producer/{items}"), vec![Op::Spawn(producer), Op::Await(producer)], fibers)
            .expect("the producer workload is well formed")
    }
}

/// Parameters of [`Workload::matrix`], named after `thesis_bench`'s flags.
///
/// ```
/// use numafiber::sim::MatrixParams;
/// let p = MatrixParams::for_size(200);
/// assert_eq!(p.size, 200);
/// assert!(p.mult_ns > 0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MatrixParams {
    /// Matrix size (for footprints and, via [`MatrixParams::for_size`], costs).
    pub size: usize,
    /// Single-multiplication fibers (`--mults`).
    pub mults: usize,
    /// Thief fibers (`--thieves`).
    pub thieves: usize,
    /// Multiplications of one heavy fiber (`--heavy-mults`).
    pub heavy_mults: usize,
    /// Node 0 multiplies 3x (`--imbalanced`).
    pub imbalanced: bool,
    /// Cost of one multiplication, ns.
    pub mult_ns: u64,
    /// Cost of generating one matrix, ns.
    pub gen_ns: u64,
}

/// Nanoseconds per multiply-add of `thesis_bench`'s kernel, measured on
/// this project's development machine (release build).
pub const NS_PER_MAC: f64 = 0.30;

impl MatrixParams {
    /// `thesis_bench`'s single-point defaults (32 mults, 2 thieves, 100 heavy mults,
    /// balanced) at matrix size `size`, with costs from [`NS_PER_MAC`]:
    /// one multiplication `size^3` multiply-adds, one generation `size^2`
    /// random numbers at about 3 ns each.
    pub fn for_size(size: usize) -> MatrixParams {
        let n = size as f64;
        MatrixParams {
            size,
            mults: 32,
            thieves: 2,
            heavy_mults: 100,
            imbalanced: false,
            mult_ns: (n * n * n * NS_PER_MAC).max(1.0) as u64,
            gen_ns: (n * n * 3.0).max(1.0) as u64,
        }
    }
}

impl Default for MatrixParams {
    /// [`MatrixParams::for_size`]`(500)`, the thesis' size.
    fn default() -> MatrixParams {
        MatrixParams::for_size(500)
    }
}
