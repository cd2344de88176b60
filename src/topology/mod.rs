//! Machine topology over hwlocality: NUMA nodes, their PUs and the distance
//! matrix, plus the mapping of workers onto real processing units.
//!
//! OWNED BY THE TOPOLOGY HELPER: this file is an interface stub; the real
//! implementation replaces it. Signatures below are the contract the runtime
//! compiles against.

use std::fmt;
use std::path::Path;

/// One NUMA node of a [`Topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NumaNode {
    /// Logical index of the node, `0..topology.nodes().len()`.
    pub id: usize,
    /// OS indexes of the processing units of this node.
    pub cpus: Vec<usize>,
}

/// What went wrong while building a [`Topology`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyError {
    msg: String,
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}
impl std::error::Error for TopologyError {}

/// A machine shape: NUMA nodes, their PUs and the node distance matrix.
#[derive(Debug, Clone)]
pub struct Topology {
    nodes: Vec<NumaNode>,
    distances: Vec<Vec<u32>>,
    has_matrix: bool,
    this_machine: bool,
    description: String,
}

/// Where one worker of a runtime runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerSlot {
    /// Logical PU index in the topology (node by node order).
    pub logical_pu: usize,
    /// NUMA node of that PU in the topology.
    pub node: usize,
    /// Real OS PU index this worker is pinned to (best effort when the
    /// topology is not this machine's).
    pub cpu: usize,
}

impl Topology {
    /// Detect this machine with hwloc.
    pub fn detect() -> Result<Topology, TopologyError> {
        Ok(Topology::uniform(1, 2))
    }
    /// hwloc synthetic description.
    pub fn synthetic(desc: &str) -> Result<Topology, TopologyError> {
        let _ = desc;
        Ok(Topology::uniform(1, 2))
    }
    /// hwloc XML file.
    pub fn from_xml_file(path: impl AsRef<Path>) -> Result<Topology, TopologyError> {
        let _ = path;
        Ok(Topology::uniform(1, 2))
    }
    /// `nodes` nodes of `pus_per_node` PUs, distances 10 local / 20 remote.
    pub fn uniform(nodes: usize, pus_per_node: usize) -> Topology {
        let nodes_v = (0..nodes)
            .map(|n| NumaNode { id: n, cpus: (n * pus_per_node..(n + 1) * pus_per_node).collect() })
            .collect();
        let distances = (0..nodes)
            .map(|a| (0..nodes).map(|b| if a == b { 10 } else { 20 }).collect())
            .collect();
        Topology {
            nodes: nodes_v,
            distances,
            has_matrix: false,
            this_machine: false,
            description: format!("uniform:{nodes}x{pus_per_node}"),
        }
    }
    /// Check the topology is usable.
    pub fn validate(&self) -> Result<(), TopologyError> {
        Ok(())
    }
    /// Replace the distance matrix.
    pub fn with_distances(mut self, m: Vec<Vec<u32>>) -> Result<Topology, TopologyError> {
        self.distances = m;
        self.has_matrix = true;
        Ok(self)
    }
    /// The nodes.
    pub fn nodes(&self) -> &[NumaNode] {
        &self.nodes
    }
    /// Total PUs.
    pub fn num_pus(&self) -> usize {
        self.nodes.iter().map(|n| n.cpus.len()).sum()
    }
    /// Distance between nodes.
    pub fn distance(&self, a: usize, b: usize) -> u32 {
        self.distances[a][b]
    }
    /// Other nodes, nearest first.
    pub fn nodes_by_distance(&self, a: usize) -> Vec<usize> {
        let mut v: Vec<usize> = (0..self.nodes.len()).filter(|&b| b != a).collect();
        v.sort_by_key(|&b| (self.distances[a][b], b));
        v
    }
    /// Whether the matrix came from the source (false: 10/20 default).
    pub fn has_distance_matrix(&self) -> bool {
        self.has_matrix
    }
    /// Whether this topology describes the machine we run on.
    pub fn is_this_machine(&self) -> bool {
        self.this_machine
    }
    /// Short human description.
    pub fn description(&self) -> &str {
        &self.description
    }
    /// Map `workers` workers onto PUs node by node.
    pub fn plan_workers(&self, workers: usize, strict: bool) -> Result<Vec<WorkerSlot>, TopologyError> {
        let _ = strict;
        let pus: Vec<(usize, usize)> =
            self.nodes.iter().flat_map(|n| n.cpus.iter().map(move |&c| (c, n.id))).collect();
        Ok((0..workers)
            .map(|w| {
                let (_, node) = pus[w % pus.len()];
                WorkerSlot { logical_pu: w % pus.len(), node, cpu: w % 2 }
            })
            .collect())
    }
}

/// Pin the calling thread to real PU `cpu`.
pub(crate) fn pin_current_thread(cpu: usize) -> Result<(), String> {
    let _ = cpu;
    Ok(())
}

/// The CPU the calling thread runs on right now, if the OS says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions.
    let c = unsafe { libc::sched_getcpu() };
    (c >= 0).then_some(c as usize)
}
