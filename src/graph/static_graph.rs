//! Static task graphs with join counters (NABBIT Fig. 2).

use std::fmt;
use std::ops::Index;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};

use super::{catch, current_workers, new_latch, on_runtime, open_latch, wait_latch, GraphError, GraphErrorKind, Latch};
use crate::fiber;

/// Identifies a node of a [`StaticGraph`]; also indexes its results.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct NodeId(u32);

impl NodeId {
    /// Position of the node in the graph, and of its result in the `Vec`
    /// returned by `execute`.
    ///
    /// ```
    /// let mut g = numafiber::graph::StaticGraph::<()>::new();
    /// assert_eq!(g.add_node(|_| ()).index(), 0);
    /// assert_eq!(g.add_node(|_| ()).index(), 1);
    /// ```
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl<T> Index<NodeId> for Vec<T> {
    type Output = T;
    fn index(&self, id: NodeId) -> &T {
        &self[id.index()]
    }
}

enum Slots<'a, T> {
    Shared(&'a [OnceLock<T>]),
    Plain(&'a [Option<T>]),
}

/// What a compute gets: its node id and its predecessors' outputs, in the
/// order the dependencies were added.
pub struct Inputs<'a, T> {
    node: NodeId,
    preds: &'a [u32],
    slots: Slots<'a, T>,
}

impl<'a, T> Inputs<'a, T> {
    /// The node being computed.
    pub fn node(&self) -> NodeId {
        self.node
    }
    /// Number of predecessors.
    pub fn len(&self) -> usize {
        self.preds.len()
    }
    /// Whether the node has no predecessors.
    pub fn is_empty(&self) -> bool {
        self.preds.is_empty()
    }
    fn slot(&self, p: u32) -> &'a T {
        let r = match self.slots {
            Slots::Shared(s) => s[p as usize].get(),
            Slots::Plain(s) => s[p as usize].as_ref(),
        };
        r.expect("a predecessor's output is set before its successor runs")
    }
    /// The `i`-th predecessor and its output.
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn get(&self, i: usize) -> (NodeId, &'a T) {
        let p = self.preds[i];
        (NodeId(p), self.slot(p))
    }
    /// Predecessors with their outputs.
    pub fn iter(&self) -> impl Iterator<Item = (NodeId, &'a T)> + '_ {
        self.preds.iter().map(move |&p| (NodeId(p), self.slot(p)))
    }
    /// Just the predecessors' outputs.
    ///
    /// ```
    /// use numafiber::graph::StaticGraph;
    /// let mut g = StaticGraph::new();
    /// let a = g.add_node(|_| 2);
    /// let b = g.add_node(|inp| inp.values().sum::<i32>() + 1);
    /// g.add_dep(b, a).unwrap();
    /// assert_eq!(g.execute_serial().unwrap()[b], 3);
    /// ```
    pub fn values(&self) -> impl Iterator<Item = &'a T> + '_ {
        self.preds.iter().map(move |&p| self.slot(p))
    }
}

type ComputeFn<T> = Arc<dyn Fn(&Inputs<'_, T>) -> T + Send + Sync>;

/// The graph in execution form: adjacency in CSR arrays, checked acyclic.
struct Frozen<T> {
    computes: Box<[ComputeFn<T>]>,
    pred_off: Box<[u32]>,
    pred_idx: Box<[u32]>,
    succ_off: Box<[u32]>,
    succ_idx: Box<[u32]>,
    indeg: Box<[u32]>,
    sources: Box<[u32]>,
}

impl<T> Frozen<T> {
    fn preds(&self, a: usize) -> &[u32] {
        &self.pred_idx[self.pred_off[a] as usize..self.pred_off[a + 1] as usize]
    }
    fn succs(&self, a: usize) -> &[u32] {
        &self.succ_idx[self.succ_off[a] as usize..self.succ_off[a + 1] as usize]
    }
}

/// A task graph whose nodes and edges are all known before it runs.
///
/// Nodes are added with [`add_node`](Self::add_node) (a compute closure)
/// and [`add_dep`](Self::add_dep); [`execute`](Self::execute) runs every
/// compute exactly once, each after all of its predecessors, in parallel
/// on the runtime's workers, and returns the outputs indexed by
/// [`NodeId`]. A graph can be executed any number of times.
///
/// ```
/// use numafiber::{graph::StaticGraph, fiber, Runtime, Policy};
/// let rt = Runtime::builder().workers(2).policy(Policy::RandomSteal).build().unwrap();
/// // A diamond: a -> (b, c) -> d.
/// let mut g = StaticGraph::new();
/// let a = g.add_node(|_| 1u64);
/// let b = g.add_node(|inp| inp.get(0).1 + 1);
/// let c = g.add_node(|inp| {
///     // computes may fork-join themselves
///     let (x, y) = fiber::join(|| inp.get(0).1 * 2, || 0);
///     x + y
/// });
/// let d = g.add_node(|inp| inp.values().sum::<u64>());
/// for (n, on) in [(b, a), (c, a), (d, b), (d, c)] {
///     g.add_dep(n, on).unwrap();
/// }
/// let out = rt.block_on(move || g.execute()).unwrap();
/// assert_eq!(out[d], 4);
/// ```
pub struct StaticGraph<T> {
    computes: Vec<ComputeFn<T>>,
    preds: Vec<Vec<u32>>,
    frozen: OnceLock<Result<Arc<Frozen<T>>, GraphError>>,
}

impl<T> fmt::Debug for StaticGraph<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StaticGraph").field("nodes", &self.computes.len()).field("edges", &self.edge_count()).finish()
    }
}

impl<T> Default for StaticGraph<T> {
    fn default() -> Self {
        StaticGraph::new()
    }
}

impl<T> StaticGraph<T> {
    /// An empty graph.
    pub fn new() -> StaticGraph<T> {
        StaticGraph { computes: Vec::new(), preds: Vec::new(), frozen: OnceLock::new() }
    }

    /// Add a node whose compute gets its predecessors' outputs and returns
    /// the node's output.
    ///
    /// # Panics
    /// If the graph already has `u32::MAX` nodes.
    pub fn add_node<F>(&mut self, compute: F) -> NodeId
    where
        F: Fn(&Inputs<'_, T>) -> T + Send + Sync + 'static,
    {
        let id = u32::try_from(self.computes.len()).ok().filter(|&i| i < u32::MAX).expect("too many graph nodes");
        self.computes.push(Arc::new(compute));
        self.preds.push(Vec::new());
        self.frozen = OnceLock::new();
        NodeId(id)
    }

    /// Make `node` depend on `depends_on`: `node`'s compute runs after
    /// `depends_on`'s and sees its output. Adding the same edge twice has
    /// no further effect.
    ///
    /// ```
    /// use numafiber::graph::{GraphErrorKind, StaticGraph};
    /// let mut g = StaticGraph::<()>::new();
    /// let a = g.add_node(|_| ());
    /// let mut other = StaticGraph::<()>::new();
    /// other.add_node(|_| ());
    /// let ghost = other.add_node(|_| ());
    /// assert!(matches!(g.add_dep(a, ghost).unwrap_err().kind(), GraphErrorKind::UnknownNode { .. }));
    /// ```
    pub fn add_dep(&mut self, node: NodeId, depends_on: NodeId) -> Result<(), GraphError> {
        let n = self.computes.len();
        for x in [node, depends_on] {
            if x.index() >= n {
                return Err(GraphError::new(GraphErrorKind::UnknownNode { node: x, nodes: n }));
            }
        }
        if node == depends_on {
            return Err(GraphError::new(GraphErrorKind::SelfDependency { node }));
        }
        let p = &mut self.preds[node.index()];
        if !p.contains(&depends_on.0) {
            p.push(depends_on.0);
            self.frozen = OnceLock::new();
        }
        Ok(())
    }

    /// Number of nodes.
    pub fn node_count(&self) -> usize {
        self.computes.len()
    }

    /// Number of (distinct) edges.
    pub fn edge_count(&self) -> usize {
        self.preds.iter().map(Vec::len).sum()
    }

    /// Check the graph for cycles without running it (execute does this
    /// too, once per shape of the graph).
    ///
    /// ```
    /// use numafiber::graph::{GraphErrorKind, StaticGraph};
    /// let mut g = StaticGraph::<()>::new();
    /// let a = g.add_node(|_| ());
    /// let b = g.add_node(|_| ());
    /// g.add_dep(a, b).unwrap();
    /// g.add_dep(b, a).unwrap();
    /// let e = g.validate().unwrap_err();
    /// assert!(matches!(e.kind(), GraphErrorKind::Cycle { cycle } if cycle.len() == 2));
    /// ```
    pub fn validate(&self) -> Result<(), GraphError> {
        self.frozen().map(|_| ())
    }

    fn frozen(&self) -> Result<Arc<Frozen<T>>, GraphError> {
        self.frozen.get_or_init(|| self.freeze()).clone()
    }

    fn freeze(&self) -> Result<Arc<Frozen<T>>, GraphError> {
        let n = self.computes.len();
        let mut pred_off = Vec::with_capacity(n + 1);
        let mut pred_idx = Vec::with_capacity(self.edge_count());
        pred_off.push(0u32);
        let mut outdeg = vec![0u32; n];
        for p in &self.preds {
            pred_idx.extend_from_slice(p);
            pred_off.push(pred_idx.len() as u32);
            for &x in p {
                outdeg[x as usize] += 1;
            }
        }
        let mut succ_off = Vec::with_capacity(n + 1);
        succ_off.push(0u32);
        for d in &outdeg {
            succ_off.push(succ_off.last().unwrap() + d);
        }
        let mut fill: Vec<u32> = succ_off[..n].to_vec();
        let mut succ_idx = vec![0u32; pred_idx.len()];
        for (a, p) in self.preds.iter().enumerate() {
            for &x in p {
                succ_idx[fill[x as usize] as usize] = a as u32;
                fill[x as usize] += 1;
            }
        }
        let indeg: Vec<u32> = self.preds.iter().map(|p| p.len() as u32).collect();
        // Kahn's algorithm: everything not reached lies on or behind a cycle.
        let mut left = indeg.clone();
        let mut stack: Vec<u32> = (0..n as u32).filter(|&a| indeg[a as usize] == 0).collect();
        let sources = stack.clone();
        let mut seen = 0usize;
        while let Some(a) = stack.pop() {
            seen += 1;
            let a = a as usize;
            for &s in &succ_idx[succ_off[a] as usize..succ_off[a + 1] as usize] {
                left[s as usize] -= 1;
                if left[s as usize] == 0 {
                    stack.push(s);
                }
            }
        }
        if seen < n {
            return Err(GraphError::new(GraphErrorKind::Cycle { cycle: find_cycle(&self.preds, &left) }));
        }
        Ok(Arc::new(Frozen {
            computes: self.computes.clone().into_boxed_slice(),
            pred_off: pred_off.into(),
            pred_idx: pred_idx.into(),
            succ_off: succ_off.into(),
            succ_idx: succ_idx.into(),
            indeg: indeg.into(),
            // Reversed so that the chain's LIFO stack starts with node 0.
            sources: sources.into_iter().rev().collect(),
        }))
    }
}

/// One cycle among the nodes Kahn's algorithm could not reach (`left > 0`):
/// each such node has a predecessor that is also unreached, so walking
/// predecessors must repeat a node.
fn find_cycle(preds: &[Vec<u32>], left: &[u32]) -> Vec<NodeId> {
    let start = left.iter().position(|&l| l > 0).expect("a cycle leaves a node unreached");
    let mut pos = vec![usize::MAX; preds.len()];
    let mut path = Vec::new();
    let mut a = start;
    while pos[a] == usize::MAX {
        pos[a] = path.len();
        path.push(NodeId(a as u32));
        a = preds[a]
            .iter()
            .map(|&p| p as usize)
            .find(|&p| left[p] > 0)
            .expect("an unreached node has an unreached predecessor");
    }
    path.split_off(pos[a])
}

impl<T: Send + Sync + 'static> StaticGraph<T> {
    /// Execute the graph from inside a fiber: every compute runs exactly
    /// once, after all its predecessors; returns the outputs indexed by
    /// [`NodeId`] (`out[id]` or `out[id.index()]`).
    ///
    /// The calling fiber computes too; other ready nodes are spawned as
    /// fibers that idle workers steal. Use a stealing policy
    /// ([`Policy::RandomSteal`](crate::Policy::RandomSteal) or
    /// [`Policy::Nlh`](crate::Policy::Nlh)) for parallelism; with round
    /// robin the spawned chains are placed but never rebalanced.
    ///
    /// # Errors
    /// [`GraphErrorKind::Cycle`] before anything runs;
    /// [`GraphErrorKind::NoRuntime`] outside a fiber;
    /// [`GraphErrorKind::ComputePanicked`] if a compute panicked (every
    /// node not depending on it still ran).
    pub fn execute(&self) -> Result<Vec<T>, GraphError> {
        let g = self.frozen()?;
        let workers = current_workers().ok_or_else(|| GraphError::new(GraphErrorKind::NoRuntime))?;
        run_parallel(g, workers)
    }

    /// [`execute`](Self::execute) from a plain thread: runs the graph on
    /// `rt` and blocks until it is done. Inside a fiber it is the same as
    /// `execute`.
    ///
    /// ```
    /// use numafiber::{graph::StaticGraph, Runtime};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let mut g = StaticGraph::new();
    /// let ids: Vec<_> = (0..10u64).map(|i| g.add_node(move |inp| i + inp.values().sum::<u64>())).collect();
    /// for w in ids.windows(2) { g.add_dep(w[1], w[0]).unwrap(); }
    /// assert_eq!(g.execute_on(&rt).unwrap()[ids[9]], 45);
    /// ```
    pub fn execute_on(&self, rt: &crate::Runtime) -> Result<Vec<T>, GraphError> {
        let g = self.frozen()?;
        on_runtime(rt, move || {
            let workers = current_workers().unwrap_or(1);
            run_parallel(g, workers)
        })
    }

    /// The serial version: the same traversal on the calling thread with
    /// plain counters (no atomics, no fibers). The baseline of the paper's
    /// Fig. 10, and a reference for checking results. Works outside a
    /// runtime.
    ///
    /// # Errors
    /// As [`execute`](Self::execute), except `NoRuntime`.
    pub fn execute_serial(&self) -> Result<Vec<T>, GraphError> {
        let g = self.frozen()?;
        let n = g.computes.len();
        let mut join: Vec<u32> = g.indeg.to_vec();
        let mut results: Vec<Option<T>> = Vec::with_capacity(n);
        results.resize_with(n, || None);
        let mut stack: Vec<u32> = g.sources.to_vec();
        while let Some(a) = stack.pop() {
            let a = a as usize;
            let v = {
                let inputs = Inputs { node: NodeId(a as u32), preds: g.preds(a), slots: Slots::Plain(&results) };
                catch(|| (g.computes[a])(&inputs)).map_err(|message| {
                    GraphError::new(GraphErrorKind::ComputePanicked { node: a.to_string(), message })
                })?
            };
            results[a] = Some(v);
            for &s in g.succs(a).iter().rev() {
                join[s as usize] -= 1;
                if join[s as usize] == 0 {
                    stack.push(s);
                }
            }
        }
        Ok(results.into_iter().map(|r| r.expect("acyclic: every node ran")).collect())
    }
}

/// State of one parallel execution.
struct Exec<T> {
    g: Arc<Frozen<T>>,
    join: Box<[AtomicU32]>,
    results: Box<[OnceLock<T>]>,
    /// First panic: (node, message).
    panic: Mutex<Option<(usize, String)>>,
    /// Split a chain's stack while fewer chains than this are alive.
    target_chains: usize,
}

/// Counts live chains; the last one to finish opens the latch.
struct Tracker {
    pending: AtomicUsize,
    latch: Latch,
}

/// A live chain. Dropping it (after its work, or unrun during a shutdown)
/// first releases the execution state, then counts the chain as finished,
/// so when the latch opens nobody but the caller holds the state.
struct Chain<T> {
    exec: Option<Arc<Exec<T>>>,
    track: Arc<Tracker>,
}

impl<T> Drop for Chain<T> {
    fn drop(&mut self) {
        drop(self.exec.take());
        if self.track.pending.fetch_sub(1, AcqRel) == 1 {
            open_latch(&self.track.latch);
        }
    }
}

fn run_parallel<T: Send + Sync + 'static>(g: Arc<Frozen<T>>, workers: usize) -> Result<Vec<T>, GraphError> {
    let n = g.computes.len();
    let join: Box<[AtomicU32]> = g.indeg.iter().map(|&d| AtomicU32::new(d)).collect();
    let results: Box<[OnceLock<T>]> = (0..n).map(|_| OnceLock::new()).collect();
    let sources = g.sources.to_vec();
    let exec = Arc::new(Exec { g, join, results, panic: Mutex::new(None), target_chains: 2 * workers.max(1) });
    let track = Arc::new(Tracker { pending: AtomicUsize::new(1), latch: new_latch() });
    run_chain(Chain { exec: Some(exec.clone()), track: track.clone() }, sources);
    wait_latch(&track.latch);
    let mut exec = exec;
    let exec = loop {
        match Arc::try_unwrap(exec) {
            Ok(e) => break e,
            // Only during a shutdown drain can a chain still hold it.
            Err(e) => {
                exec = e;
                fiber::yield_now();
            }
        }
    };
    if let Some((node, message)) = exec.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
        return Err(GraphError::new(GraphErrorKind::ComputePanicked { node: node.to_string(), message }));
    }
    let out: Option<Vec<T>> = exec.results.into_vec().into_iter().map(OnceLock::into_inner).collect();
    out.ok_or_else(|| GraphError::new(GraphErrorKind::ShuttingDown))
}

/// Run ready nodes until the chain's stack is empty (Fig. 2's
/// COMPUTEANDNOTIFY, iterative).
fn run_chain<T: Send + Sync + 'static>(chain: Chain<T>, mut stack: Vec<u32>) {
    let exec = chain.exec.as_ref().expect("a running chain holds the execution");
    let g = &*exec.g;
    while let Some(a) = stack.pop() {
        let a = a as usize;
        let inputs = Inputs { node: NodeId(a as u32), preds: g.preds(a), slots: Slots::Shared(&exec.results) };
        match catch(|| (g.computes[a])(&inputs)) {
            Ok(v) => {
                let _ = exec.results[a].set(v);
            }
            Err(m) => {
                let mut p = exec.panic.lock().unwrap_or_else(|e| e.into_inner());
                p.get_or_insert((a, m));
                // Its successors never become ready.
                continue;
            }
        }
        // Reversed, so the chain continues with the first successor (in
        // add_node order) and a split hands the later ones to a new chain:
        // row-major graphs then run row after row, like their serial loop.
        for &s in g.succs(a).iter().rev() {
            // A sole predecessor always enables its successor: no atomic.
            // Otherwise AcqRel: the last decrement sees every
            // predecessor's output.
            if g.indeg[s as usize] == 1 || exec.join[s as usize].fetch_sub(1, AcqRel) == 1 {
                stack.push(s);
            }
        }
        if stack.len() > 1 && chain.track.pending.load(Relaxed) < exec.target_chains {
            let half = stack.len() / 2;
            let older: Vec<u32> = stack.drain(..half).collect();
            spawn_chain(exec, &chain.track, older);
        }
    }
}

fn spawn_chain<T: Send + Sync + 'static>(exec: &Arc<Exec<T>>, track: &Arc<Tracker>, stack: Vec<u32>) {
    track.pending.fetch_add(1, AcqRel);
    let chain = Chain { exec: Some(exec.clone()), track: track.clone() };
    // On failure (shutdown) the closure and its nodes are dropped; the
    // caller then finds results missing and reports ShuttingDown.
    let _ = fiber::Builder::new().spawn(move || run_chain(chain, stack));
}
