//! Dynamic task graphs discovered through keys (NABBIT Fig. 7-8).

use std::collections::hash_map::{Entry, RandomState};
use std::collections::HashMap;
use std::fmt;
use std::hash::{BuildHasher, Hash};
use std::ops::Deref;
use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use super::{catch, current_workers, new_latch, on_runtime, open_latch, wait_latch, GraphError, GraphErrorKind, Latch};
use crate::fiber;

/// A task graph whose nodes are named by keys and discovered at run time.
///
/// [`init`](Self::init) declares the keys a key depends on;
/// [`compute`](Self::compute) produces a key's output from its
/// predecessors' outputs. A [`DynamicExecutor`] calls each exactly once
/// per key.
///
/// ```
/// use numafiber::graph::{DynamicExecutor, DynamicGraph};
/// use numafiber::Runtime;
/// /// fib(k) depends on fib(k-1) and fib(k-2).
/// struct Fib;
/// impl DynamicGraph for Fib {
///     type Key = u32;
///     type Output = u64;
///     fn init(&self, k: &u32, deps: &mut Vec<u32>) {
///         if *k >= 2 { deps.extend([k - 1, k - 2]); }
///     }
///     fn compute(&self, k: &u32, preds: &[(u32, &u64)]) -> u64 {
///         if *k < 2 { *k as u64 } else { preds.iter().map(|(_, v)| **v).sum() }
///     }
/// }
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let ex = DynamicExecutor::new(Fib);
/// assert_eq!(*ex.execute_on(&rt, 90).unwrap(), 2880067194370816120);
/// assert_eq!(ex.len(), 91); // one node per key
/// ```
pub trait DynamicGraph: Send + Sync + 'static {
    /// Names a node.
    type Key: Hash + Eq + Clone + Send + Sync + 'static;
    /// What a node computes.
    type Output: Send + Sync + 'static;
    /// Push the keys `key` depends on onto `deps` (duplicates are ignored).
    fn init(&self, key: &Self::Key, deps: &mut Vec<Self::Key>);
    /// Compute `key` from its predecessors' outputs, in the order `init`
    /// declared them.
    fn compute(&self, key: &Self::Key, preds: &[(Self::Key, &Self::Output)]) -> Self::Output;
}

/// Where a key is in its life (monotone: Unvisited → Visited → Computed →
/// Completed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// No node exists for the key.
    Unvisited,
    /// The node exists (it was inserted; its `init` runs or ran).
    Visited,
    /// Its compute finished (or failed); successors are being notified.
    Computed,
    /// Every successor that registered has been notified.
    Completed,
}

const VISITED: u8 = 1;
const COMPUTED: u8 = 2;
const COMPLETED: u8 = 3;

enum Notify<K, V> {
    Node(Arc<DNode<K, V>>),
    Waiter(Latch),
}

/// A shared node.
type NodeRef<K, V> = Arc<DNode<K, V>>;

struct DNode<K, V> {
    key: K,
    status: AtomicU8,
    /// Starts at 1 (held by `init`), +1 per declared predecessor.
    join: AtomicUsize,
    preds: OnceLock<Box<[NodeRef<K, V>]>>,
    output: OnceLock<V>,
    /// This node's compute or init panicked, or a predecessor failed.
    failure: OnceLock<Arc<(String, String)>>,
    /// The notification array, under the node's lock.
    notify: Mutex<Vec<Notify<K, V>>>,
}

impl<K, V> DNode<K, V> {
    fn new(key: K) -> DNode<K, V> {
        DNode {
            key,
            status: AtomicU8::new(VISITED),
            join: AtomicUsize::new(1),
            preds: OnceLock::new(),
            output: OnceLock::new(),
            failure: OnceLock::new(),
            notify: Mutex::new(Vec::new()),
        }
    }
    fn lock(&self) -> MutexGuard<'_, Vec<Notify<K, V>>> {
        self.notify.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn status(&self) -> Status {
        match self.status.load(Acquire) {
            VISITED => Status::Visited,
            COMPUTED => Status::Computed,
            _ => Status::Completed,
        }
    }
}

impl<K, V> Drop for DNode<K, V> {
    /// Free predecessor chains iteratively: the default recursive drop of
    /// `preds` would overflow the stack on a graph with a long path.
    fn drop(&mut self) {
        let mut work: Vec<Arc<DNode<K, V>>> = Vec::new();
        let take = |n: &mut DNode<K, V>, work: &mut Vec<Arc<DNode<K, V>>>| {
            work.extend(n.preds.take().into_iter().flat_map(|p| p.into_vec()));
            let notify = std::mem::take(n.notify.get_mut().unwrap_or_else(|e| e.into_inner()));
            work.extend(notify.into_iter().filter_map(|x| match x {
                Notify::Node(x) => Some(x),
                Notify::Waiter(_) => None,
            }));
        };
        take(self, &mut work);
        while let Some(n) = work.pop() {
            if let Some(mut n) = Arc::into_inner(n) {
                take(&mut n, &mut work);
            }
        }
    }
}

/// A computed node's output, kept alive by the executor's node.
pub struct Computed<K, V> {
    node: Arc<DNode<K, V>>,
}

impl<K, V> Computed<K, V> {
    /// The node's key.
    pub fn key(&self) -> &K {
        &self.node.key
    }
}

impl<K, V> Deref for Computed<K, V> {
    type Target = V;
    fn deref(&self) -> &V {
        self.node.output.get().expect("Computed is only built for nodes with an output")
    }
}

const SHARDS: usize = 64;

struct Inner<G: DynamicGraph> {
    graph: G,
    hasher: RandomState,
    shards: Box<[Shard<G>]>,
    /// Live chains plus `execute` calls that are starting one.
    active: AtomicUsize,
    target_chains: AtomicUsize,
    /// Sinks that `execute` calls wait for, checked when `active` hits 0.
    waiting: Mutex<Vec<(Node<G>, Latch)>>,
}

/// One lock-protected part of the key → node map.
type Shard<G> = Mutex<HashMap<<G as DynamicGraph>::Key, Node<G>>>;

type Node<G> = Arc<DNode<<G as DynamicGraph>::Key, <G as DynamicGraph>::Output>>;

impl<G: DynamicGraph> Inner<G> {
    fn shard(&self, key: &G::Key) -> MutexGuard<'_, HashMap<G::Key, Node<G>>> {
        let h = self.hasher.hash_one(key) as usize;
        self.shards[h % SHARDS].lock().unwrap_or_else(|e| e.into_inner())
    }

    /// INSERTTASKIFABSENT + GETTASK: the key's node, and whether this call
    /// created it (status Unvisited → Visited).
    fn insert(&self, key: G::Key) -> (Node<G>, bool) {
        let mut s = self.shard(&key);
        match s.entry(key) {
            Entry::Occupied(o) => (o.get().clone(), false),
            Entry::Vacant(v) => {
                let n = Arc::new(DNode::new(v.key().clone()));
                v.insert(n.clone());
                (n, true)
            }
        }
    }

    fn lookup(&self, key: &G::Key) -> Option<Node<G>> {
        self.shard(key).get(key).cloned()
    }

    fn release_active(&self) {
        if self.active.fetch_sub(1, AcqRel) == 1 {
            let w = self.waiting.lock().unwrap_or_else(|e| e.into_inner());
            if self.active.load(Acquire) == 0 {
                // Nothing runs and nothing can start for existing nodes:
                // sinks still not computed wait on a cycle.
                for (s, l) in w.iter() {
                    if s.status.load(Acquire) < COMPUTED {
                        open_latch(l);
                    }
                }
            }
        }
    }
}

impl<G: DynamicGraph> Drop for Inner<G> {
    fn drop(&mut self) {
        // Notification arrays of nodes stuck on a cycle point back at
        // their successors: break those reference cycles.
        for s in self.shards.iter() {
            for n in s.lock().unwrap_or_else(|e| e.into_inner()).values() {
                n.lock().clear();
            }
        }
    }
}

/// Executes a [`DynamicGraph`]: one node per key, created on first use and
/// kept (with its output) for later `execute` calls and [`get`](Self::get).
/// Cloning is cheap and shares the nodes, so several fibers or threads can
/// execute overlapping graphs concurrently; each key's `init` and
/// `compute` still run exactly once.
///
/// ```
/// use std::sync::atomic::{AtomicUsize, Ordering};
/// use numafiber::graph::{DynamicExecutor, DynamicGraph, Status};
/// use numafiber::{fiber, Policy, Runtime};
/// /// Key k depends on k/2 and k/3 (down to 0); counts its computes.
/// struct Tree(AtomicUsize);
/// impl DynamicGraph for Tree {
///     type Key = u64;
///     type Output = u64;
///     fn init(&self, k: &u64, deps: &mut Vec<u64>) {
///         if *k > 0 { deps.extend([k / 2, k / 3]); }
///     }
///     fn compute(&self, k: &u64, preds: &[(u64, &u64)]) -> u64 {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         k + preds.iter().map(|(_, v)| **v).sum::<u64>()
///     }
/// }
/// let rt = Runtime::builder().workers(2).policy(Policy::RandomSteal).build().unwrap();
/// let ex = DynamicExecutor::new(Tree(AtomicUsize::new(0)));
/// let ex2 = ex.clone();
/// // Four concurrent executions over overlapping key sets.
/// let outs = rt.block_on(move || {
///     let hs: Vec<_> = [1000u64, 999, 500, 1000]
///         .into_iter()
///         .map(|k| { let ex = ex2.clone(); fiber::spawn(move || *ex.execute(k).unwrap()) })
///         .collect();
///     fiber::when_all(hs)
/// });
/// assert_eq!(outs[0], outs[3]);
/// assert_eq!(ex.graph().0.load(Ordering::Relaxed), ex.len()); // one compute per key
/// // Computed at least: the notifier that released us marks it Completed
/// // once it has released every other waiter, which may be a moment later.
/// assert!(ex.status(&1000) >= Status::Computed);
/// assert_eq!(ex.status(&5000), Status::Unvisited); // never needed
/// ```
pub struct DynamicExecutor<G: DynamicGraph> {
    inner: Arc<Inner<G>>,
}

impl<G: DynamicGraph> Clone for DynamicExecutor<G> {
    fn clone(&self) -> Self {
        DynamicExecutor { inner: self.inner.clone() }
    }
}

impl<G: DynamicGraph> fmt::Debug for DynamicExecutor<G> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynamicExecutor").field("nodes", &self.len()).finish()
    }
}

enum Job<K, V> {
    Init(Arc<DNode<K, V>>),
    Compute(Arc<DNode<K, V>>),
}

/// Holds one unit of `Inner::active` while a chain lives.
struct Active<G: DynamicGraph>(Arc<Inner<G>>);

impl<G: DynamicGraph> Drop for Active<G> {
    fn drop(&mut self) {
        self.0.release_active();
    }
}

impl<G: DynamicGraph> DynamicExecutor<G> {
    /// An executor with no nodes yet.
    pub fn new(graph: G) -> DynamicExecutor<G> {
        DynamicExecutor {
            inner: Arc::new(Inner {
                graph,
                hasher: RandomState::new(),
                shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
                active: AtomicUsize::new(0),
                target_chains: AtomicUsize::new(2),
                waiting: Mutex::new(Vec::new()),
            }),
        }
    }

    /// The graph.
    pub fn graph(&self) -> &G {
        &self.inner.graph
    }

    /// Number of nodes created so far (keys visited).
    pub fn len(&self) -> usize {
        self.inner.shards.iter().map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).len()).sum()
    }

    /// Whether no node was created yet.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where `key` is in its life.
    pub fn status(&self, key: &G::Key) -> Status {
        self.inner.lookup(key).map_or(Status::Unvisited, |n| n.status())
    }

    /// The output of `key`, if it has been computed.
    pub fn get(&self, key: &G::Key) -> Option<Computed<G::Key, G::Output>> {
        self.inner.lookup(key).filter(|n| n.output.get().is_some()).map(|node| Computed { node })
    }

    /// Discover the graph backwards from `sink` and compute it forwards,
    /// from inside a fiber (STARTEXECUTION). Keys computed by earlier or
    /// concurrent calls are reused, not recomputed; if another call is
    /// computing `sink` right now this one waits for it. On return the
    /// sink's [`status`](Self::status) is at least `Computed`; it becomes
    /// `Completed` once every other waiter has been released.
    ///
    /// # Errors
    /// [`GraphErrorKind::DynamicCycle`] if the keys reachable from `sink`
    /// form a cycle (detected when no work is left, never a hang);
    /// [`GraphErrorKind::ComputePanicked`] if an `init` or `compute` that
    /// `sink` depends on panicked; [`GraphErrorKind::NoRuntime`] outside
    /// a fiber.
    pub fn execute(&self, sink: G::Key) -> Result<Computed<G::Key, G::Output>, GraphError> {
        let workers = current_workers().ok_or_else(|| GraphError::new(GraphErrorKind::NoRuntime))?;
        let inner = &self.inner;
        inner.target_chains.store(2 * workers.max(1), Relaxed);
        inner.active.fetch_add(1, AcqRel);
        let active = Active(inner.clone());
        let (s, inserted) = inner.insert(sink);
        let latch = new_latch();
        let registered = {
            let mut g = s.lock();
            if s.status.load(Acquire) < COMPUTED {
                g.push(Notify::Waiter(latch.clone()));
                inner.waiting.lock().unwrap_or_else(|e| e.into_inner()).push((s.clone(), latch.clone()));
                true
            } else {
                false
            }
        };
        if inserted {
            run_chain(active, vec![Job::Init(s.clone())]);
        } else {
            drop(active);
        }
        if registered {
            wait_latch(&latch);
            inner.waiting.lock().unwrap_or_else(|e| e.into_inner()).retain(|(_, l)| !Arc::ptr_eq(l, &latch));
        }
        if s.output.get().is_some() {
            return Ok(Computed { node: s });
        }
        if let Some(f) = s.failure.get() {
            return Err(GraphError::new(GraphErrorKind::ComputePanicked { node: f.0.clone(), message: f.1.clone() }));
        }
        if s.status.load(Acquire) >= COMPUTED {
            return Err(GraphError::new(GraphErrorKind::ShuttingDown));
        }
        Err(GraphError::new(GraphErrorKind::DynamicCycle { stuck: count_stuck(&s) }))
    }

    /// [`execute`](Self::execute) from a plain thread, on `rt` (inside a
    /// fiber it is the same as `execute`).
    pub fn execute_on(&self, rt: &crate::Runtime, sink: G::Key) -> Result<Computed<G::Key, G::Output>, GraphError> {
        let me = self.clone();
        on_runtime(rt, move || me.execute(sink))
    }
}

/// Nodes reachable backwards from `s` that are not computed.
fn count_stuck<K, V>(s: &Arc<DNode<K, V>>) -> usize {
    let mut seen: Vec<*const DNode<K, V>> = Vec::new();
    let mut stack = vec![s.clone()];
    while let Some(n) = stack.pop() {
        if n.status.load(Acquire) >= COMPUTED || seen.contains(&Arc::as_ptr(&n)) {
            continue;
        }
        seen.push(Arc::as_ptr(&n));
        if let Some(p) = n.preds.get() {
            stack.extend(p.iter().cloned());
        }
    }
    seen.len()
}

fn run_chain<G: DynamicGraph>(active: Active<G>, mut stack: Vec<Job<G::Key, G::Output>>) {
    let inner = &*active.0;
    let mut deps = Vec::new();
    while let Some(job) = stack.pop() {
        match job {
            Job::Init(a) => init_node(inner, a, &mut deps, &mut stack),
            Job::Compute(a) => compute_node(inner, a, &mut stack),
        }
        if stack.len() > 1 && inner.active.load(Relaxed) < inner.target_chains.load(Relaxed) {
            let half = stack.len() / 2;
            let older: Vec<_> = stack.drain(..half).collect();
            inner.active.fetch_add(1, AcqRel);
            let child = Active(active.0.clone());
            // On failure (shutdown) the closure and its jobs are dropped;
            // `execute` then reports ShuttingDown or a cycle.
            let _ = fiber::Builder::new().spawn(move || run_chain(child, older));
        }
    }
}

/// INITANDCOMPUTE + TRYINITCOMPUTE for every predecessor (iterative: new
/// predecessors become `Init` jobs instead of recursive calls).
fn init_node<G: DynamicGraph>(
    inner: &Inner<G>,
    a: Node<G>,
    deps: &mut Vec<G::Key>,
    stack: &mut Vec<Job<G::Key, G::Output>>,
) {
    deps.clear();
    if let Err(m) = catch(|| inner.graph.init(&a.key, deps)) {
        let _ = a.failure.set(Arc::new(("<init>".to_owned(), format!("init panicked: {m}"))));
        deps.clear();
    }
    let mut i = 0;
    while i < deps.len() {
        if deps[..i].contains(&deps[i]) {
            deps.swap_remove(i);
        } else {
            i += 1;
        }
    }
    a.join.fetch_add(deps.len(), AcqRel);
    let mut preds = Vec::with_capacity(deps.len());
    for k in deps.drain(..) {
        let (b, inserted) = inner.insert(k);
        if inserted {
            stack.push(Job::Init(b.clone()));
        }
        preds.push(b);
    }
    for b in &preds {
        let finished = {
            let mut g = b.lock();
            if b.status.load(Acquire) < COMPUTED {
                g.push(Notify::Node(a.clone()));
                false
            } else {
                true
            }
        };
        if finished {
            // Cannot reach 0: init still holds its unit.
            a.join.fetch_sub(1, AcqRel);
        }
    }
    let _ = a.preds.set(preds.into_boxed_slice());
    if a.join.fetch_sub(1, AcqRel) == 1 {
        stack.push(Job::Compute(a));
    }
}

/// COMPUTEANDNOTIFY: compute, mark COMPUTED, drain the notification array
/// under the node's lock until it stays empty, then mark COMPLETED.
fn compute_node<G: DynamicGraph>(inner: &Inner<G>, a: Node<G>, stack: &mut Vec<Job<G::Key, G::Output>>) {
    let preds = a.preds.get().expect("a node is computed after its init");
    let upstream = a.failure.get().cloned().or_else(|| preds.iter().find_map(|p| p.failure.get().cloned()));
    match upstream {
        Some(f) => {
            let _ = a.failure.set(f);
        }
        None => {
            let inputs: Vec<(G::Key, &G::Output)> = preds
                .iter()
                .map(|p| (p.key.clone(), p.output.get().expect("a computed predecessor without failure has an output")))
                .collect();
            match catch(|| inner.graph.compute(&a.key, &inputs)) {
                Ok(v) => {
                    let _ = a.output.set(v);
                }
                Err(m) => {
                    let _ = a.failure.set(Arc::new(("<dynamic node>".to_owned(), m)));
                }
            }
        }
    }
    a.status.store(COMPUTED, Release);
    loop {
        let batch = {
            let mut g = a.lock();
            if g.is_empty() {
                a.status.store(COMPLETED, Release);
                break;
            }
            std::mem::take(&mut *g)
        };
        for n in batch {
            match n {
                Notify::Node(x) => {
                    if x.join.fetch_sub(1, AcqRel) == 1 {
                        stack.push(Job::Compute(x));
                    }
                }
                Notify::Waiter(l) => open_latch(&l),
            }
        }
    }
}

/// Result of [`execute_serial`]: every node's output by key.
pub struct SerialRun<K, V> {
    index: HashMap<K, usize>,
    outputs: Vec<Option<V>>,
    sink: usize,
}

impl<K: Hash + Eq, V> SerialRun<K, V> {
    /// The sink's output.
    pub fn sink(&self) -> &V {
        self.outputs[self.sink].as_ref().expect("execute_serial returns only complete runs")
    }
    /// The output of `key`, if it was part of the graph.
    pub fn get(&self, key: &K) -> Option<&V> {
        self.index.get(key).and_then(|&i| self.outputs[i].as_ref())
    }
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.outputs.len()
    }
    /// Whether the graph was empty (never: it has the sink).
    pub fn is_empty(&self) -> bool {
        self.outputs.is_empty()
    }
}

impl<K, V> fmt::Debug for SerialRun<K, V> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SerialRun").field("nodes", &self.outputs.len()).finish()
    }
}

impl<K, V> fmt::Debug for Computed<K, V>
where
    V: fmt::Debug,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("Computed").field(&**self).finish()
    }
}

struct SNode<K> {
    key: K,
    join: usize,
    preds: Vec<usize>,
    notify: Vec<usize>,
    computed: bool,
}

/// The serial version of a dynamic execution: the same two traversals
/// (discover backwards with `init`, compute forwards with join counters and
/// notification arrays) on the calling thread, with a plain `HashMap`, no
/// locks and no atomics. The baseline of the paper's Fig. 10. A panic of
/// `init` or `compute` propagates to the caller.
///
/// ```
/// use numafiber::graph::{execute_serial, DynamicGraph};
/// struct Sum;
/// impl DynamicGraph for Sum {
///     type Key = u32;
///     type Output = u32;
///     fn init(&self, k: &u32, deps: &mut Vec<u32>) { if *k > 0 { deps.push(k - 1) } }
///     fn compute(&self, k: &u32, p: &[(u32, &u32)]) -> u32 { k + p.iter().map(|(_, v)| **v).sum::<u32>() }
/// }
/// assert_eq!(*execute_serial(&Sum, 100).unwrap().sink(), 5050);
/// ```
///
/// # Errors
/// [`GraphErrorKind::DynamicCycle`] if `sink` depends on a cycle.
pub fn execute_serial<G: DynamicGraph>(graph: &G, sink: G::Key) -> Result<SerialRun<G::Key, G::Output>, GraphError> {
    let mut index: HashMap<G::Key, usize> = HashMap::new();
    let mut nodes: Vec<SNode<G::Key>> = Vec::new();
    let mut outputs: Vec<Option<G::Output>> = Vec::new();
    enum SJob {
        Init(usize),
        Compute(usize),
    }
    index.insert(sink.clone(), 0);
    nodes.push(SNode { key: sink, join: 1, preds: Vec::new(), notify: Vec::new(), computed: false });
    outputs.push(None);
    let mut stack = vec![SJob::Init(0)];
    let mut deps = Vec::new();
    while let Some(job) = stack.pop() {
        match job {
            SJob::Init(a) => {
                deps.clear();
                graph.init(&nodes[a].key, &mut deps);
                let mut preds = Vec::with_capacity(deps.len());
                for k in deps.drain(..) {
                    let b = match index.entry(k) {
                        Entry::Occupied(o) => *o.get(),
                        Entry::Vacant(v) => {
                            let b = nodes.len();
                            nodes.push(SNode {
                                key: v.key().clone(),
                                join: 1,
                                preds: Vec::new(),
                                notify: Vec::new(),
                                computed: false,
                            });
                            outputs.push(None);
                            v.insert(b);
                            stack.push(SJob::Init(b));
                            b
                        }
                    };
                    if !preds.contains(&b) {
                        preds.push(b);
                    }
                }
                for &b in &preds {
                    if !nodes[b].computed {
                        nodes[b].notify.push(a);
                        nodes[a].join += 1;
                    }
                }
                nodes[a].preds = preds;
                nodes[a].join -= 1;
                if nodes[a].join == 0 {
                    stack.push(SJob::Compute(a));
                }
            }
            SJob::Compute(a) => {
                let v = {
                    let inputs: Vec<(G::Key, &G::Output)> = nodes[a]
                        .preds
                        .iter()
                        .map(|&p| (nodes[p].key.clone(), outputs[p].as_ref().expect("predecessor computed")))
                        .collect();
                    graph.compute(&nodes[a].key, &inputs)
                };
                outputs[a] = Some(v);
                nodes[a].computed = true;
                for x in std::mem::take(&mut nodes[a].notify) {
                    nodes[x].join -= 1;
                    if nodes[x].join == 0 {
                        stack.push(SJob::Compute(x));
                    }
                }
            }
        }
    }
    if outputs[0].is_none() {
        let stuck = outputs.iter().filter(|o| o.is_none()).count();
        return Err(GraphError::new(GraphErrorKind::DynamicCycle { stuck }));
    }
    Ok(SerialRun { index, outputs, sink: 0 })
}
