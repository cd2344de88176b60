//! Machine topology: NUMA nodes, their processing units (PUs) and the node
//! distance matrix, plus the mapping of workers onto real PUs.
//!
//! A [`Topology`] is plain owned data (`Clone + Send + Sync`); hwloc (through
//! `hwlocality`) is only used to *build* one ([`Topology::detect`],
//! [`Topology::synthetic`], [`Topology::from_xml_file`]) and to pin threads
//! ([`pin_current_thread`]), always through the topology of the *real*
//! machine, cached once per process.
//!
//! Where a topology does not describe this machine (synthetic, XML from
//! elsewhere, [`Topology::uniform`]), [`Topology::plan_workers`] maps its
//! logical PUs onto the real PUs round-robin, so such a topology still runs.
//!
//! Distances use the hwloc/ACPI SLIT scale: 10 means local. When the source
//! has no distance matrix (a one-node machine, a synthetic string, a plain
//! `uniform`), 10 local / 20 remote is used and
//! [`Topology::has_distance_matrix`] is `false`.
//!
//! Multi-node behaviour (detection, kernel distances, pinning) is tested on
//! a real NUMA kernel by `scripts/numa-vm-test.sh`, which runs
//! `tests/numa_vm.rs` in a 4-node QEMU VM; on a one-node machine those tests
//! print `skipped: not in numa-vm`.
//!
//! ```
//! use numafiber::Topology;
//!
//! let topo = Topology::uniform(2, 2)
//!     .with_distances(vec![vec![10, 21], vec![21, 10]])
//!     .unwrap();
//! assert_eq!(topo.num_pus(), 4);
//! assert_eq!(topo.nodes()[1].cpus, vec![2, 3]);
//! assert_eq!(topo.distance(0, 1), 21);
//! assert_eq!(topo.nodes_by_distance(0), vec![1]);
//! ```

mod error;
mod hwloc;
mod xml_depth;

use std::fmt::Write as _;
use std::path::Path;

pub use error::{TopologyError, TopologyErrorKind};
pub(crate) use hwloc::bind_area_to_node;
pub use hwloc::{allowed_cpus, current_cpu, pin_current_thread, real_cpus};

use TopologyErrorKind as K;

/// Most PUs a [`Topology`] may have (uniform, synthetic, parsed).
pub const MAX_PUS: usize = 4096;
/// Most NUMA nodes a [`Topology`] may have (its distance matrix is
/// nodes x nodes).
pub const MAX_NODES: usize = 256;
/// Most children of one object in a synthetic description: hwloc's build
/// time grows with its square (one level of 4096 PUs takes a second).
pub const MAX_ARITY: usize = 256;

/// `0-3,5,7-8`: a CPU list the way `taskset -c` and `/proc` print it.
pub(crate) fn format_cpu_list(cpus: &[usize]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < cpus.len() {
        let mut j = i;
        while j + 1 < cpus.len() && cpus[j + 1] == cpus[j] + 1 {
            j += 1;
        }
        if !s.is_empty() {
            s.push(',');
        }
        if j > i {
            let _ = write!(s, "{}-{}", cpus[i], cpus[j]);
        } else {
            let _ = write!(s, "{}", cpus[i]);
        }
        i = j + 1;
    }
    s
}

/// Why `nodes x pus_per_node` is over the bounds, if it is.
fn uniform_too_large(nodes: usize, pus_per_node: usize) -> Option<String> {
    match nodes.checked_mul(pus_per_node) {
        _ if nodes > MAX_NODES => Some(format!(
            "has {nodes} NUMA nodes, more than the {MAX_NODES} numafiber accepts (its distance \
             matrix is nodes x nodes)"
        )),
        Some(p) if p <= MAX_PUS => None,
        Some(p) => Some(format!("has {p} PUs, more than the {MAX_PUS} numafiber accepts")),
        None => Some(format!(
            "has {nodes} x {pus_per_node} PUs, which overflows usize, far more than the {MAX_PUS} \
             numafiber accepts"
        )),
    }
}

/// Distance of a node to itself when no matrix is known (hwloc/SLIT scale).
pub const LOCAL_DISTANCE: u32 = 10;
/// Distance between two different nodes when no matrix is known.
pub const REMOTE_DISTANCE: u32 = 20;

/// One NUMA node of a [`Topology`].
///
/// ```
/// use numafiber::Topology;
///
/// let topo = Topology::uniform(2, 3);
/// let n = &topo.nodes()[1];
/// assert_eq!((n.id, n.cpus.clone()), (1, vec![3, 4, 5]));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    /// Logical index of the node, `0..topology.nodes().len()`; rows and
    /// columns of the distance matrix use it.
    pub id: usize,
    /// OS indexes of the processing units of this node, ascending, as the
    /// topology describes them (for a topology that is not this machine they
    /// are not real CPUs; see [`Topology::plan_workers`]).
    pub cpus: Vec<usize>,
}

/// Where one worker of a runtime runs; produced by [`Topology::plan_workers`].
///
/// ```
/// use numafiber::topology::WorkerSlot;
/// use numafiber::Topology;
///
/// let plan: Vec<WorkerSlot> = Topology::uniform(2, 1).plan_workers(2, true).unwrap();
/// assert_eq!((plan[1].logical_pu, plan[1].node), (1, 1));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSlot {
    /// Logical PU index in the topology: PUs numbered node by node (node 0's
    /// PUs first, then node 1's, ...).
    pub logical_pu: usize,
    /// NUMA node of that PU in the topology.
    pub node: usize,
    /// Real OS PU index this worker is pinned to (a round-robin stand-in
    /// when the topology is not this machine's).
    pub cpu: usize,
}

/// A machine shape: NUMA nodes, their PUs and the node distance matrix.
///
/// Plain owned data: cheap to clone, `Send + Sync`, no hwloc handle inside.
///
/// ```
/// use numafiber::Topology;
///
/// let topo = Topology::uniform(4, 1);
/// assert_eq!(topo.num_nodes(), 4);
/// assert_eq!(topo.distance(0, 3), 20);
/// assert!(!topo.has_distance_matrix());
/// assert_eq!(topo.description(), "uniform:4x1");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Topology {
    nodes: Vec<NumaNode>,
    /// OS index of each node when the source gave one (hwloc), else `None`.
    node_os: Vec<Option<usize>>,
    distances: Vec<Vec<u32>>,
    has_matrix: bool,
    this_machine: bool,
    description: String,
    /// Set by `uniform` for a request over the bounds (then `nodes` is
    /// empty): what `validate` reports.
    too_large: Option<String>,
}

/// The 10 local / 20 remote matrix for `n` nodes.
fn default_matrix(n: usize) -> Vec<Vec<u32>> {
    (0..n).map(|a| (0..n).map(|b| if a == b { LOCAL_DISTANCE } else { REMOTE_DISTANCE }).collect()).collect()
}

/// Check a distance matrix for `n` nodes: shape, no zeros, diagonal is the
/// row minimum, symmetric. `source` names where it came from, for messages.
pub(crate) fn check_matrix(m: &[Vec<u32>], n: usize, source: &str) -> Result<(), TopologyError> {
    if m.len() != n {
        return Err(TopologyError::new(
            K::DistanceShape,
            format!(
                "{source}: distance matrix has {} rows but the topology has {n} NUMA nodes; \
                 give a {n}x{n} matrix (one row per node, row i = distances from node i)",
                m.len()
            ),
        ));
    }
    if let Some((i, row)) = m.iter().enumerate().find(|(_, r)| r.len() != n) {
        return Err(TopologyError::new(
            K::DistanceShape,
            format!(
                "{source}: row {i} of the distance matrix has {} entries but the topology has \
                 {n} NUMA nodes; give a {n}x{n} matrix",
                row.len()
            ),
        ));
    }
    let zeros: Vec<(usize, usize)> = pairs(n).filter(|&(i, j)| m[i][j] == 0).collect();
    if !zeros.is_empty() {
        return Err(TopologyError::new(
            K::ZeroDistance,
            format!(
                "{source}: distance matrix has zero entries at {}; distances are on the \
                 hwloc/SLIT scale where 10 means local: use 10 on the diagonal and larger \
                 values (e.g. 20) between different nodes",
                list_pairs(&zeros)
            ),
        ));
    }
    for (i, row) in m.iter().enumerate() {
        if let Some(j) = (0..n).find(|&j| row[j] < row[i]) {
            return Err(TopologyError::new(
                K::DiagonalNotMinimum,
                format!(
                    "{source}: node {i} is farther from itself ({}) than from node {j} ({}); \
                     the diagonal must be the smallest value of its row (use 10 on the \
                     diagonal, the hwloc/SLIT local distance)",
                    row[i], row[j]
                ),
            ));
        }
    }
    let asym: Vec<(usize, usize)> = pairs(n).filter(|&(i, j)| i < j && m[i][j] != m[j][i]).collect();
    if !asym.is_empty() {
        let detail: Vec<String> =
            asym.iter().take(8).map(|&(i, j)| format!("[{i}][{j}]={} vs [{j}][{i}]={}", m[i][j], m[j][i])).collect();
        let more = if asym.len() > 8 { format!(" and {} more", asym.len() - 8) } else { String::new() };
        return Err(TopologyError::new(
            K::AsymmetricDistances,
            format!(
                "{source}: distance matrix is not symmetric: {}{more}; make entry [i][j] equal \
                 to [j][i] (numafiber needs one distance per pair of nodes)",
                detail.join(", ")
            ),
        ));
    }
    Ok(())
}

fn pairs(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n).flat_map(move |i| (0..n).map(move |j| (i, j)))
}

fn list_pairs(p: &[(usize, usize)]) -> String {
    let mut s = String::new();
    for (k, (i, j)) in p.iter().take(8).enumerate() {
        if k > 0 {
            s.push_str(", ");
        }
        let _ = write!(s, "[{i}][{j}]");
    }
    if p.len() > 8 {
        let _ = write!(s, " and {} more", p.len() - 8);
    }
    s
}

impl Topology {
    /// Assemble a topology from parts (used by the hwloc backend).
    pub(crate) fn from_parts(
        nodes: Vec<NumaNode>,
        node_os: Vec<Option<usize>>,
        matrix: Option<Vec<Vec<u32>>>,
        this_machine: bool,
        description: String,
    ) -> Topology {
        let n = nodes.len();
        let has_matrix = matrix.is_some();
        Topology {
            nodes,
            node_os,
            distances: matrix.unwrap_or_else(|| default_matrix(n)),
            has_matrix,
            this_machine,
            description,
            too_large: None,
        }
    }

    /// Detect the machine this program runs on with hwloc.
    ///
    /// Only the PUs the process may run on are listed (its CPU affinity,
    /// see [`allowed_cpus`]; under `taskset -c 0` the topology has one PU),
    /// and nodes left without PUs are dropped; the
    /// [`description`](Self::description) then says so.
    ///
    /// Nodes are hwloc's NUMA nodes that have at least one PU (memory-only
    /// nodes are left out), in hwloc logical order; PUs not covered by any
    /// node go to node 0. The distance matrix is hwloc's NUMA latency matrix
    /// when the machine reports one (Linux: `/sys/devices/system/node/node*/distance`
    /// on multi-node machines); otherwise, or if the reported matrix is
    /// unusable (the reason is appended to [`description`](Self::description)),
    /// 10 local / 20 remote.
    ///
    /// The result has [`is_this_machine`](Self::is_this_machine) `== true`.
    ///
    /// hwloc reads the machine once per process; the result for the
    /// current CPU affinity is kept too, so a repeated call (every default
    /// [`Runtime`](crate::Runtime) build calls it) costs one
    /// `sched_getaffinity` and a copy. A process whose affinity changed
    /// gets the topology of its new affinity.
    ///
    /// # Errors
    ///
    /// [`TopologyErrorKind::Detection`] when hwloc cannot read the machine.
    ///
    /// ```
    /// let topo = numafiber::Topology::detect().unwrap();
    /// assert!(topo.is_this_machine());
    /// assert!(topo.num_pus() >= 1);
    /// ```
    pub fn detect() -> Result<Topology, TopologyError> {
        hwloc::detect()
    }

    /// Build a topology from an hwloc synthetic description, such as
    /// `"pack:2 numa:1 core:4 pu:1"` (2 packages, each with one NUMA node of
    /// 4 single-PU cores). See
    /// <https://hwloc.readthedocs.io/en/stable/synthetic.html>.
    ///
    /// Synthetic strings cannot carry distances: the result uses 10 local /
    /// 20 remote; add a matrix with [`with_distances`](Self::with_distances).
    ///
    /// # Errors
    ///
    /// [`TopologyErrorKind::InvalidSynthetic`] if the string is not one of
    /// hwloc's forms (`type:count`, a bare `count`, `[numa]` memory
    /// children, `(attribute)` groups) or hwloc rejects it,
    /// [`TopologyErrorKind::TooLarge`] if it describes more than
    /// [`MAX_PUS`] PUs or [`MAX_NODES`] nodes, or gives one object more than
    /// [`MAX_ARITY`] children (checked before hwloc runs, so even a huge
    /// request fails at once), [`TopologyErrorKind::NoPus`] if it describes
    /// no PU.
    ///
    /// ```
    /// let topo = numafiber::Topology::synthetic("pack:2 numa:1 core:2 pu:1").unwrap();
    /// assert_eq!(topo.num_nodes(), 2);
    /// assert_eq!(topo.nodes()[1].cpus, vec![2, 3]);
    /// ```
    pub fn synthetic(desc: &str) -> Result<Topology, TopologyError> {
        hwloc::synthetic(desc)
    }

    /// Load an hwloc XML topology (as written by `lstopo file.xml` or
    /// `hwloc_topology_export_xml`). A NUMA distance matrix in a
    /// `<distances2>` element is used when present and valid for all nodes.
    ///
    /// The result is not [`is_this_machine`](Self::is_this_machine), even if
    /// the file was exported here: workers are mapped onto real PUs
    /// round-robin.
    ///
    /// # Errors
    ///
    /// [`TopologyErrorKind::XmlFileUnreadable`] (missing/unreadable file, a
    /// directory, or not a regular file: a FIFO or device is refused
    /// without reading from it),
    /// [`TopologyErrorKind::InvalidXml`] (hwloc cannot load it, or its
    /// elements nest more than 256 deep: a machine's topology nests about a
    /// dozen deep, and hwloc's own XML parser would recurse through every
    /// level on the stack; the file is refused before hwloc reads it), or a
    /// distance-matrix kind if its `<distances2>` matrix is malformed.
    ///
    /// ```
    /// let err = numafiber::Topology::from_xml_file("/no/such/topo.xml").unwrap_err();
    /// assert_eq!(err.kind(), numafiber::topology::TopologyErrorKind::XmlFileUnreadable);
    /// ```
    pub fn from_xml_file(path: impl AsRef<Path>) -> Result<Topology, TopologyError> {
        hwloc::from_xml_file(path.as_ref())
    }

    /// `nodes` NUMA nodes of `pus_per_node` PUs each, PUs numbered
    /// `0..nodes * pus_per_node` node by node, distances 10 local / 20 remote.
    ///
    /// Infallible so it can be used inline; with `nodes == 0` or
    /// `pus_per_node == 0`, or over the bounds (more than [`MAX_NODES`]
    /// nodes or [`MAX_PUS`] PUs; then it has no nodes and allocates
    /// nothing), the result is invalid and [`validate`](Self::validate)
    /// (and every runtime builder) rejects it. Use
    /// [`try_uniform`](Self::try_uniform) to get the error right away.
    ///
    /// ```
    /// use numafiber::{Topology, TopologyErrorKind};
    /// let topo = Topology::uniform(2, 2);
    /// assert_eq!(topo.nodes()[0].cpus, vec![0, 1]);
    /// assert_eq!(topo.distance(1, 0), 20);
    /// assert!(Topology::uniform(0, 2).validate().is_err());
    /// assert_eq!(Topology::uniform(100_000, 1).validate().unwrap_err().kind(), TopologyErrorKind::TooLarge);
    /// ```
    #[must_use]
    pub fn uniform(nodes: usize, pus_per_node: usize) -> Topology {
        if let Some(why) = uniform_too_large(nodes, pus_per_node) {
            let mut t =
                Topology::from_parts(Vec::new(), Vec::new(), None, false, format!("uniform:{nodes}x{pus_per_node}"));
            t.too_large = Some(why);
            return t;
        }
        let nodes_v: Vec<NumaNode> = (0..nodes)
            .map(|n| NumaNode { id: n, cpus: (n * pus_per_node..(n + 1) * pus_per_node).collect() })
            .collect();
        Topology::from_parts(nodes_v, vec![None; nodes], None, false, format!("uniform:{nodes}x{pus_per_node}"))
    }

    /// Like [`uniform`](Self::uniform), but rejects zero nodes or zero PUs,
    /// and sizes over the bounds.
    ///
    /// # Errors
    ///
    /// [`TopologyErrorKind::NoNodes`] / [`TopologyErrorKind::NoPus`] /
    /// [`TopologyErrorKind::TooLarge`].
    ///
    /// ```
    /// assert!(numafiber::Topology::try_uniform(2, 4).is_ok());
    /// assert!(numafiber::Topology::try_uniform(2, 0).is_err());
    /// ```
    pub fn try_uniform(nodes: usize, pus_per_node: usize) -> Result<Topology, TopologyError> {
        let t = Topology::uniform(nodes, pus_per_node);
        t.validate()?;
        Ok(t)
    }

    /// Replace the distance matrix (`m[a][b]` = distance from node `a` to
    /// node `b`, hwloc/SLIT scale, 10 = local). Afterwards
    /// [`has_distance_matrix`](Self::has_distance_matrix) is `true`.
    ///
    /// # Errors
    ///
    /// The topology itself must be valid ([`validate`](Self::validate)), and
    /// the matrix must be `num_nodes x num_nodes`
    /// ([`DistanceShape`](TopologyErrorKind::DistanceShape)), have no zero
    /// ([`ZeroDistance`](TopologyErrorKind::ZeroDistance)), have each
    /// diagonal entry the smallest of its row
    /// ([`DiagonalNotMinimum`](TopologyErrorKind::DiagonalNotMinimum)) and be
    /// symmetric ([`AsymmetricDistances`](TopologyErrorKind::AsymmetricDistances);
    /// the message lists the offending entries).
    ///
    /// ```
    /// use numafiber::Topology;
    ///
    /// let t = Topology::uniform(3, 1)
    ///     .with_distances(vec![vec![10, 20, 30], vec![20, 10, 20], vec![30, 20, 10]])
    ///     .unwrap();
    /// assert_eq!(t.nodes_by_distance(0), vec![1, 2]);
    /// assert!(Topology::uniform(2, 1).with_distances(vec![vec![10, 20], vec![30, 10]]).is_err());
    /// ```
    pub fn with_distances(mut self, m: Vec<Vec<u32>>) -> Result<Topology, TopologyError> {
        self.validate()?;
        check_matrix(&m, self.nodes.len(), "with_distances")?;
        self.distances = m;
        self.has_matrix = true;
        Ok(self)
    }

    /// Check that this topology can run workers: within the size bounds, at
    /// least one node, at least one PU, and a well-formed distance matrix.
    ///
    /// # Errors
    ///
    /// [`TopologyErrorKind::TooLarge`], [`TopologyErrorKind::NoNodes`],
    /// [`TopologyErrorKind::NoPus`], or a distance-matrix kind.
    ///
    /// ```
    /// use numafiber::topology::TopologyErrorKind;
    /// use numafiber::Topology;
    ///
    /// assert!(Topology::uniform(2, 2).validate().is_ok());
    /// let err = Topology::uniform(3, 0).validate().unwrap_err();
    /// assert_eq!(err.kind(), TopologyErrorKind::NoPus);
    /// ```
    pub fn validate(&self) -> Result<(), TopologyError> {
        if let Some(why) = &self.too_large {
            return Err(TopologyError::new(
                K::TooLarge,
                format!("topology `{}` {why}; use smaller counts", self.description),
            ));
        }
        if self.nodes.is_empty() {
            return Err(TopologyError::new(
                K::NoNodes,
                format!(
                    "topology `{}` has no NUMA node; use at least 1 node (e.g. \
                     Topology::uniform(1, 4)), or Topology::detect() for this machine",
                    self.description
                ),
            ));
        }
        if self.num_pus() == 0 {
            return Err(TopologyError::new(
                K::NoPus,
                format!(
                    "topology `{}` has no processing unit; give each node at least 1 PU \
                     (e.g. Topology::uniform({}, 1)), or use Topology::detect()",
                    self.description,
                    self.nodes.len()
                ),
            ));
        }
        check_matrix(&self.distances, self.nodes.len(), &self.description)
    }

    /// The NUMA nodes, indexed by [`NumaNode::id`].
    ///
    /// ```
    /// let topo = numafiber::Topology::uniform(2, 1);
    /// assert!(topo.nodes().iter().enumerate().all(|(i, n)| n.id == i));
    /// ```
    pub fn nodes(&self) -> &[NumaNode] {
        &self.nodes
    }

    /// Number of NUMA nodes.
    ///
    /// ```
    /// assert_eq!(numafiber::Topology::uniform(3, 2).num_nodes(), 3);
    /// ```
    pub fn num_nodes(&self) -> usize {
        self.nodes.len()
    }

    /// Total number of processing units over all nodes.
    ///
    /// ```
    /// assert_eq!(numafiber::Topology::uniform(3, 2).num_pus(), 6);
    /// ```
    pub fn num_pus(&self) -> usize {
        self.nodes.iter().map(|n| n.cpus.len()).sum()
    }

    /// The OS index of node `id` (the `N` of `/sys/devices/system/node/nodeN`)
    /// when the topology came from hwloc; `None` for [`uniform`](Self::uniform)
    /// topologies or an out-of-range `id`.
    ///
    /// ```
    /// assert_eq!(numafiber::Topology::uniform(2, 1).node_os_index(0), None);
    /// ```
    pub fn node_os_index(&self, id: usize) -> Option<usize> {
        self.node_os.get(id).copied().flatten()
    }

    /// Distance from node `a` to node `b` (hwloc/SLIT scale, 10 = local).
    ///
    /// # Panics
    ///
    /// Like slice indexing, if `a` or `b` is not below
    /// [`num_nodes`](Self::num_nodes).
    ///
    /// ```
    /// let topo = numafiber::Topology::uniform(2, 1);
    /// assert_eq!((topo.distance(0, 0), topo.distance(0, 1)), (10, 20));
    /// ```
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        self.distances[a][b]
    }

    /// The whole distance matrix, `num_nodes` rows of `num_nodes` entries.
    ///
    /// ```
    /// let topo = numafiber::Topology::uniform(2, 1);
    /// assert_eq!(topo.distances(), &[vec![10, 20], vec![20, 10]]);
    /// ```
    pub fn distances(&self) -> &[Vec<u32>] {
        &self.distances
    }

    /// The other nodes, nearest to `a` first, ties broken by node id; `a`
    /// itself is excluded. Empty if `a` is out of range.
    ///
    /// ```
    /// let topo = numafiber::Topology::uniform(4, 1)
    ///     .with_distances(vec![
    ///         vec![10, 30, 20, 20],
    ///         vec![30, 10, 20, 30],
    ///         vec![20, 20, 10, 30],
    ///         vec![20, 30, 30, 10],
    ///     ])
    ///     .unwrap();
    /// assert_eq!(topo.nodes_by_distance(0), vec![2, 3, 1]);
    /// ```
    pub fn nodes_by_distance(&self, a: usize) -> Vec<usize> {
        let Some(row) = self.distances.get(a) else {
            return Vec::new();
        };
        let mut v: Vec<usize> = (0..self.nodes.len()).filter(|&b| b != a).collect();
        v.sort_by_key(|&b| (row.get(b).copied().unwrap_or(u32::MAX), b));
        v
    }

    /// `true` if the distances came from the source (hwloc, XML,
    /// [`with_distances`](Self::with_distances)); `false` if the 10 local /
    /// 20 remote default is in use.
    ///
    /// ```
    /// let topo = numafiber::Topology::uniform(2, 1);
    /// assert!(!topo.has_distance_matrix());
    /// let topo = topo.with_distances(vec![vec![10, 12], vec![12, 10]]).unwrap();
    /// assert!(topo.has_distance_matrix());
    /// ```
    pub fn has_distance_matrix(&self) -> bool {
        self.has_matrix
    }

    /// `true` only for [`detect`](Self::detect)ed topologies: their PU
    /// numbers are real CPUs and workers are pinned to exactly them.
    ///
    /// ```
    /// assert!(!numafiber::Topology::uniform(1, 1).is_this_machine());
    /// ```
    pub fn is_this_machine(&self) -> bool {
        self.this_machine
    }

    /// Where the topology came from: `"detected"`, `"synthetic:<desc>"`,
    /// `"xml:<path>"` or `"uniform:<N>x<P>"`.
    ///
    /// ```
    /// assert_eq!(numafiber::Topology::uniform(2, 1).description(), "uniform:2x1");
    /// ```
    pub fn description(&self) -> &str {
        &self.description
    }

    /// Map `workers` workers onto PUs.
    ///
    /// Logical PUs are numbered node by node (node 0's PUs, then node 1's,
    /// ...); worker `i` gets logical PU `i` (or `i % num_pus` when there are
    /// more workers than PUs and `strict` is off). If the topology
    /// [`is_this_machine`](Self::is_this_machine), `cpu` is that PU's OS
    /// index; otherwise logical PU `l` is mapped onto
    /// `real_cpus()[l % real_cpus().len()]`.
    ///
    /// # Errors
    ///
    /// An invalid topology ([`validate`](Self::validate)),
    /// [`ZeroWorkers`](TopologyErrorKind::ZeroWorkers), or, with `strict`,
    /// [`TooManyWorkers`](TopologyErrorKind::TooManyWorkers) when
    /// `workers > num_pus`.
    ///
    /// ```
    /// let topo = numafiber::Topology::uniform(2, 2);
    /// let plan = topo.plan_workers(6, false).unwrap();
    /// let nodes: Vec<usize> = plan.iter().map(|s| s.node).collect();
    /// assert_eq!(nodes, vec![0, 0, 1, 1, 0, 0]);
    /// assert!(topo.plan_workers(6, true).is_err());
    /// ```
    pub fn plan_workers(&self, workers: usize, strict: bool) -> Result<Vec<WorkerSlot>, TopologyError> {
        self.validate()?;
        let pus = self.num_pus();
        if workers == 0 {
            return Err(TopologyError::new(
                K::ZeroWorkers,
                "asked for 0 workers; use at least 1 worker, or omit .workers() to get one \
                 worker per processing unit",
            ));
        }
        if strict && workers > pus {
            return Err(TopologyError::new(
                K::TooManyWorkers,
                format!(
                    "asked for {workers} workers with strict pinning, but topology `{}` has only \
                     {pus} processing units; lower workers to at most {pus}, or turn strict \
                     pinning off to let workers share PUs",
                    self.description
                ),
            ));
        }
        let logical: Vec<(usize, usize)> =
            self.nodes.iter().flat_map(|n| n.cpus.iter().map(move |&c| (n.id, c))).collect();
        let real = if self.this_machine { Vec::new() } else { real_cpus() };
        Ok((0..workers)
            .map(|w| {
                let l = w % pus;
                let (node, os_pu) = logical[l];
                let cpu = if self.this_machine || real.is_empty() { os_pu } else { real[l % real.len()] };
                WorkerSlot { logical_pu: l, node, cpu }
            })
            .collect())
    }

    /// Build a topology from a one-line spec, for command-line tools:
    ///
    /// - `detect` — [`Topology::detect`]
    /// - `uniform:NxP` — [`Topology::try_uniform`]`(N, P)`
    /// - `synthetic:DESC` — [`Topology::synthetic`]`(DESC)`
    /// - `xml:PATH` — [`Topology::from_xml_file`]`(PATH)`
    ///
    /// # Errors
    ///
    /// [`TopologyErrorKind::InvalidSpec`] for an unknown form, or the error
    /// of the constructor it calls.
    ///
    /// ```
    /// let topo = numafiber::Topology::parse("uniform:2x4").unwrap();
    /// assert_eq!(topo.num_pus(), 8);
    /// assert!(numafiber::Topology::parse("uniform:2").is_err());
    /// ```
    pub fn parse(spec: &str) -> Result<Topology, TopologyError> {
        let spec = spec.trim();
        let bad = |why: &str| {
            TopologyError::new(
                K::InvalidSpec,
                format!(
                    "topology spec `{spec}` {why}; use one of `detect`, `uniform:NxP` (e.g. \
                     uniform:2x4), `synthetic:DESC` (e.g. synthetic:pack:2 numa:1 core:4 pu:1) \
                     or `xml:PATH`"
                ),
            )
        };
        if spec == "detect" {
            return Topology::detect();
        }
        let Some((form, rest)) = spec.split_once(':') else {
            return Err(bad("is not understood"));
        };
        match form {
            "uniform" => {
                let (n, p) = rest.split_once(['x', 'X']).ok_or_else(|| bad("lacks the `x` in NxP"))?;
                let n: usize = n.trim().parse().map_err(|_| bad("has a node count that is not a number"))?;
                let p: usize = p.trim().parse().map_err(|_| bad("has a PU count that is not a number"))?;
                Topology::try_uniform(n, p)
            }
            "synthetic" => Topology::synthetic(rest),
            "xml" if !rest.is_empty() => Topology::from_xml_file(rest),
            "xml" => Err(bad("has no path")),
            _ => Err(bad("has an unknown kind")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_matrix_is_10_20() {
        assert_eq!(default_matrix(3), vec![vec![10, 20, 20], vec![20, 10, 20], vec![20, 20, 10]]);
        assert!(default_matrix(0).is_empty());
    }

    #[test]
    fn check_matrix_accepts_equal_offdiagonal() {
        assert!(check_matrix(&[vec![10, 10], vec![10, 10]], 2, "t").is_ok());
    }

    #[test]
    fn check_matrix_lists_asymmetric_entries() {
        let m = vec![vec![10, 20, 30], vec![21, 10, 20], vec![30, 22, 10]];
        let e = check_matrix(&m, 3, "t").unwrap_err();
        assert_eq!(e.kind(), K::AsymmetricDistances);
        let s = e.to_string();
        assert!(s.contains("[0][1]=20 vs [1][0]=21"), "{s}");
        assert!(s.contains("[1][2]=20 vs [2][1]=22"), "{s}");
        assert!(!s.contains("[0][2]"), "{s}");
    }

    #[test]
    fn nodes_by_distance_out_of_range_is_empty() {
        assert!(Topology::uniform(2, 1).nodes_by_distance(5).is_empty());
    }

    #[test]
    fn topology_is_send_sync_plain_data() {
        fn assert_traits<T: Send + Sync + Clone + std::fmt::Debug + 'static>() {}
        assert_traits::<Topology>();
        assert_traits::<TopologyError>();
    }
}
