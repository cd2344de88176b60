//! The hwlocality backend: turn an hwloc topology into a plain
//! [`Topology`], and pin threads through the *real* machine's topology.
//!
//! Facts this file relies on (see `DESIGN.md`, "Facts already measured"):
//!
//! 1. Binding through a synthetic or XML topology returns `Ok` and does
//!    nothing, so [`pin_current_thread`] always binds through the real
//!    topology, built once per process and cached in a `OnceLock`.
//! 2. `TopologyEditor::add_distances(Some(name), ..)` is a use-after-free in
//!    hwlocality 1.0.0-alpha.13; this module never adds distances to an
//!    hwloc topology (a [`Topology`] is plain data; `with_distances` edits
//!    that).
//! 3. hwlocality has `unreachable!`/`expect` paths for unexpected errno
//!    values; every build here runs under `catch_unwind` so bad input turns
//!    into a [`TopologyError`], never a panic escaping to the caller.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::sync::OnceLock;

use hwlocality::cpu::binding::CpuBindingFlags;
use hwlocality::cpu::cpuset::CpuSet;
use hwlocality::object::distance::DistancesKind;
use hwlocality::object::types::ObjectType;
use hwlocality::Topology as HwTopology;

use super::{check_matrix, NumaNode, Topology, TopologyError, TopologyErrorKind as K};

/// Build an hwloc topology, turning both its errors and a panic inside
/// hwlocality into an error text (bad input must never unwind out of us).
fn build_guarded(build: impl FnOnce() -> Result<HwTopology, String>) -> Result<HwTopology, String> {
    match catch_unwind(AssertUnwindSafe(build)) {
        Ok(r) => r,
        Err(_) => Err("hwloc failed unexpectedly".into()),
    }
}

/// The real machine's hwloc topology, or why it could not be built.
fn real_topology() -> Result<&'static HwTopology, String> {
    static REAL: OnceLock<Result<HwTopology, String>> = OnceLock::new();
    REAL.get_or_init(|| match catch_unwind(HwTopology::new) {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => Err(format!("hwloc failed to detect this machine: {e}")),
        Err(_) => Err("hwloc panicked while detecting this machine".to_string()),
    })
    .as_ref()
    .map_err(Clone::clone)
}

pub(super) fn detect() -> Result<Topology, TopologyError> {
    let hw = real_topology().map_err(|e| {
        TopologyError::new(
            K::Detection,
            format!(
                "{e}; check that /sys and /proc are mounted and readable, or describe the \
                 machine yourself with Topology::synthetic(..), Topology::from_xml_file(..) \
                 or Topology::uniform(..)"
            ),
        )
    })?;
    let (nodes, node_os, matrix) = extract(hw);
    let (matrix, description) = match matrix {
        Ok(m) => (m, "detected".to_string()),
        // A machine's own matrix we cannot use must not stop the program:
        // fall back to 10/20 and say why in the description.
        Err(why) => (
            None,
            format!("detected (hwloc distance matrix ignored: {why})"),
        ),
    };
    let t = Topology::from_parts(nodes, node_os, matrix, true, description);
    t.validate()?;
    Ok(t)
}

pub(super) fn synthetic(desc: &str) -> Result<Topology, TopologyError> {
    let invalid = |why: String| {
        TopologyError::new(
            K::InvalidSynthetic,
            format!(
                "hwloc synthetic description `{desc}` was rejected ({why}); write it as \
                 space-separated `type:count` levels from the top down, e.g. \
                 \"pack:2 numa:1 core:4 pu:1\" (see \
                 https://hwloc.readthedocs.io/en/stable/synthetic.html)"
            ),
        )
    };
    if desc.trim().is_empty() {
        return Err(invalid("it is empty".into()));
    }
    // hwloc would happily try to build billions of objects ("pack:70000
    // pu:70000" takes minutes and gigabytes): bound the PU count first.
    let pus = synthetic_pu_estimate(desc);
    if pus > MAX_SYNTHETIC_PUS {
        return Err(invalid(format!(
            "it describes about {pus} PUs, more than the {MAX_SYNTHETIC_PUS} numafiber accepts; \
             use smaller counts"
        )));
    }
    let hw = build_guarded(|| {
        HwTopology::builder().from_synthetic(desc).map_err(|e| e.to_string())?.build().map_err(|e| e.to_string())
    })
    .map_err(invalid)?;
    let (nodes, node_os, matrix) = extract(&hw);
    let t = Topology::from_parts(
        nodes,
        node_os,
        matrix.ok().flatten(),
        false,
        format!("synthetic:{desc}"),
    );
    t.validate()?;
    Ok(t)
}

/// Largest synthetic topology [`synthetic`] builds, in PUs.
const MAX_SYNTHETIC_PUS: u64 = 1 << 16;

/// Product of the level counts of a synthetic description ("pack:2 core:4
/// pu:2" -> 16), saturating; tokens without a leading count are ignored
/// (hwloc validates the syntax itself).
fn synthetic_pu_estimate(desc: &str) -> u64 {
    desc.split_whitespace()
        .filter_map(|tok| {
            let (_, rest) = tok.split_once(':')?;
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            Some(digits.parse::<u64>().unwrap_or(u64::MAX))
        })
        .fold(1u64, u64::saturating_mul)
}

pub(super) fn from_xml_file(path: &Path) -> Result<Topology, TopologyError> {
    let shown = path.display();
    if let Err(e) = std::fs::File::open(path) {
        return Err(TopologyError::new(
            K::XmlFileUnreadable,
            format!(
                "cannot read hwloc XML file `{shown}`: {e}; check the path, or create the file \
                 with `lstopo {shown}` (package hwloc) on the machine it should describe"
            ),
        ));
    }
    if path.is_dir() {
        return Err(TopologyError::new(
            K::XmlFileUnreadable,
            format!(
                "`{shown}` is a directory, not an hwloc XML file; give the path of the .xml file"
            ),
        ));
    }
    let invalid = |why: String| {
        TopologyError::new(
            K::InvalidXml,
            format!(
                "hwloc could not load `{shown}` as a topology ({why}); the file must be an hwloc \
                 XML export, e.g. written by `lstopo {shown}` or `lstopo-no-graphics --of xml`"
            ),
        )
    };
    let hw = build_guarded(|| {
        HwTopology::builder().from_xml_file(path).map_err(|e| e.to_string())?.build().map_err(|e| e.to_string())
    })
    .map_err(invalid)?;
    let (nodes, node_os, matrix) = extract(&hw);
    let matrix = matrix.map_err(|why| {
        TopologyError::new(
            K::InvalidXml,
            format!(
                "the NUMA distance matrix in `{shown}` cannot be used: {why}; fix or remove its \
                 <distances2> element (a missing matrix means 10 local / 20 remote)"
            ),
        )
    })?;
    let t = Topology::from_parts(nodes, node_os, matrix, false, format!("xml:{shown}"));
    t.validate()?;
    Ok(t)
}

/// Nodes (with PUs), their OS indexes, and the NUMA latency matrix:
/// `Ok(None)` = the source has none; `Err(why)` = it has one we cannot use.
#[allow(clippy::type_complexity)]
fn extract(
    hw: &HwTopology,
) -> (
    Vec<NumaNode>,
    Vec<Option<usize>>,
    Result<Option<Vec<Vec<u32>>>, String>,
) {
    // hwloc NUMA nodes in logical order, with their cpusets.
    let hw_nodes: Vec<_> = hw.objects_with_type(ObjectType::NUMANode).collect();
    let mut pus: Vec<usize> = hw
        .objects_with_type(ObjectType::PU)
        .map(|pu| pu.os_index().unwrap_or_else(|| pu.logical_index()))
        .collect();
    pus.sort_unstable();
    pus.dedup();
    // PU -> index in hw_nodes of the first node covering it; uncovered -> node 0.
    let mut cpus_of: Vec<Vec<usize>> = vec![Vec::new(); hw_nodes.len().max(1)];
    for &p in &pus {
        let owner = hw_nodes
            .iter()
            .position(|n| n.cpuset().is_some_and(|cs| cs.is_set(p)))
            .unwrap_or(0);
        cpus_of[owner].push(p);
    }
    // Keep nodes that have PUs (memory-only nodes cannot host workers).
    let kept: Vec<usize> = (0..cpus_of.len())
        .filter(|&i| !cpus_of[i].is_empty())
        .collect();
    let nodes: Vec<NumaNode> = kept
        .iter()
        .enumerate()
        .map(|(id, &i)| NumaNode {
            id,
            cpus: cpus_of[i].clone(),
        })
        .collect();
    let node_os: Vec<Option<usize>> = kept
        .iter()
        .map(|&i| hw_nodes.get(i).and_then(|n| n.os_index()))
        .collect();

    let matrix = (|| {
        let all = hw
            .distances_with_type(None, ObjectType::NUMANode)
            .map_err(|e| format!("hwloc could not list distance matrices: {e}"))?;
        // Prefer latency matrices; a bandwidth matrix grows the wrong way.
        let Some(d) = all
            .iter()
            .find(|d| !d.kind().contains(DistancesKind::MEANS_BANDWIDTH))
        else {
            return Ok(None);
        };
        let n = nodes.len();
        // Column/row of each kept node in hwloc's matrix.
        let objs: Vec<_> = d.objects().collect();
        let mut idx = Vec::with_capacity(n);
        for &i in &kept {
            let Some(node) = hw_nodes.get(i) else {
                return Ok(None); // no NUMA objects at all: nothing to match
            };
            let pos = objs
                .iter()
                .position(|o| o.is_some_and(|o| std::ptr::eq(o, *node)))
                .ok_or_else(|| format!("it does not cover NUMA node L#{}", node.logical_index()))?;
            idx.push(pos);
        }
        let k = d.num_objects();
        let vals = d.distances();
        let mut m = vec![vec![0u32; n]; n];
        for (a, &ia) in idx.iter().enumerate() {
            for (b, &ib) in idx.iter().enumerate() {
                let v = vals[ia * k + ib];
                m[a][b] =
                    u32::try_from(v).map_err(|_| format!("distance {v} does not fit in u32"))?;
            }
        }
        check_matrix(&m, n, "hwloc distance matrix").map_err(|e| e.to_string())?;
        Ok(Some(m))
    })();
    (nodes, node_os, matrix)
}

/// Bind the calling thread to the real PU with OS index `cpu`, through the
/// real machine's hwloc topology (`CpuBindingFlags::THREAD`).
///
/// The runtime calls this for each worker with [`WorkerSlot::cpu`]; it is
/// public so tests and programs can pin their own threads the same way.
///
/// # Errors
///
/// A message saying what failed: hwloc could not detect the machine, `cpu`
/// is not one of [`real_cpus`], or the OS refused the binding.
///
/// ```
/// use numafiber::topology::{pin_current_thread, real_cpus};
///
/// let cpu = real_cpus()[0];
/// std::thread::spawn(move || {
///     pin_current_thread(cpu).unwrap();
///     assert!(pin_current_thread(usize::MAX / 2).is_err());
/// })
/// .join()
/// .unwrap();
/// ```
///
/// [`WorkerSlot::cpu`]: super::WorkerSlot::cpu
pub fn pin_current_thread(cpu: usize) -> Result<(), String> {
    let hw = real_topology().map_err(|e| format!("cannot pin thread to cpu {cpu}: {e}"))?;
    // Check against the plain list first: hwlocality panics on bitmap
    // indexes above c_int::MAX.
    if !real_cpu_list().contains(&cpu) {
        return Err(format!(
            "cannot pin thread to cpu {cpu}: it is not a PU of this machine (hwloc sees {}); \
             pick one of numafiber::topology::real_cpus()",
            hw.cpuset()
        ));
    }
    let mut set = CpuSet::new();
    set.set(cpu);
    catch_unwind(AssertUnwindSafe(|| {
        hw.bind_cpu(&set, CpuBindingFlags::THREAD)
    }))
    .map_err(|_| format!("cannot pin thread to cpu {cpu}: hwloc panicked in bind_cpu"))?
    .map_err(|e| format!("cannot pin thread to cpu {cpu}: hwloc bind_cpu(THREAD) failed: {e}"))
}

/// The CPU (OS index) the calling thread runs on right now (`sched_getcpu`),
/// or `None` if the OS does not say.
///
/// ```
/// if let Some(cpu) = numafiber::topology::current_cpu() {
///     assert!(numafiber::topology::real_cpus().contains(&cpu));
/// }
/// ```
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu has no preconditions; it only reads the CPU number.
    let c = unsafe { libc::sched_getcpu() };
    usize::try_from(c).ok()
}

/// OS indexes of this machine's PUs (those this process may use), ascending.
///
/// From the real hwloc topology, cached for the process; if hwloc cannot
/// detect the machine, `0..std::thread::available_parallelism()`.
/// Never empty.
///
/// ```
/// let cpus = numafiber::topology::real_cpus();
/// assert!(!cpus.is_empty());
/// assert!(cpus.windows(2).all(|w| w[0] < w[1]));
/// ```
pub fn real_cpus() -> Vec<usize> {
    real_cpu_list().to_vec()
}

/// The cached list behind [`real_cpus`].
fn real_cpu_list() -> &'static [usize] {
    static CPUS: OnceLock<Vec<usize>> = OnceLock::new();
    CPUS.get_or_init(|| {
        let mut v: Vec<usize> = match real_topology() {
            Ok(hw) => hw
                .objects_with_type(ObjectType::PU)
                .filter_map(hwlocality::object::TopologyObject::os_index)
                .collect(),
            Err(_) => Vec::new(),
        };
        v.sort_unstable();
        v.dedup();
        if v.is_empty() {
            let n = std::thread::available_parallelism().map_or(1, |n| n.get());
            v = (0..n).collect();
        }
        v
    })
}

/// Bind the pages of `[addr, addr + len)` to NUMA node `os_node` (OS
/// index) through the real machine's hwloc topology (`hwloc_set_area_membind`,
/// policy `Bind`). Pages not touched yet are allocated on that node when
/// first touched. Used for fiber stack slabs (`fiber::stack`).
///
/// # Safety
/// `[addr, addr + len)` is a mapping of the caller that nobody reads or
/// writes during the call.
pub(crate) unsafe fn bind_area_to_node(addr: usize, len: usize, os_node: usize) -> Result<(), String> {
    use hwlocality::memory::binding::{MemoryBindingFlags, MemoryBindingPolicy};
    use hwlocality::memory::nodeset::NodeSet;
    let hw = real_topology()?;
    if os_node > i32::MAX as usize {
        return Err(format!("NUMA node {os_node} out of range"));
    }
    // SAFETY: the caller's mapping of `len` bytes, untouched during the
    // call; `MaybeUninit` bytes have no validity requirement, and hwloc only
    // uses the address range (mbind).
    let area: &[std::mem::MaybeUninit<u8>] = unsafe { std::slice::from_raw_parts(addr as *const _, len) };
    let mut set = NodeSet::new();
    set.set(os_node);
    catch_unwind(AssertUnwindSafe(|| {
        hw.bind_memory_area(area, &set, MemoryBindingPolicy::Bind, MemoryBindingFlags::empty())
    }))
    .map_err(|_| "hwloc panicked in bind_memory_area".to_string())?
    .map_err(|e| format!("hwloc_set_area_membind to node {os_node} failed: {e}"))
}
