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

use super::xml_depth::{self, MAX_XML_DEPTH};
use super::{check_matrix, NumaNode, Topology, TopologyError, TopologyErrorKind as K};

/// Build an hwloc topology, turning both its errors and a panic inside
/// hwlocality into an error text (bad input must never unwind out of us).
fn build_guarded(build: impl FnOnce() -> Result<HwTopology, String>) -> Result<HwTopology, String> {
    match catch_unwind(AssertUnwindSafe(build)) {
        Ok(r) => r,
        Err(_) => Err("hwloc failed unexpectedly".into()),
    }
}

/// hwloc discovery components the runtime does not need. `x86` reads
/// `cpuid` on every PU (binding the calling thread to each in turn): it
/// adds CPU model and cache details the scheduler never reads, while PUs,
/// cores, packages, NUMA nodes and distances all come from the `linux`
/// component (sysfs). In a VM each `cpuid` traps to the hypervisor; the
/// component was 1.5-1.7 ms of a 4 ms first detection here. Other operating systems have no `linux` component; there the
/// plain build below is used if the restricted one fails.
const UNNEEDED_COMPONENTS: &[&str] = &["x86"];

/// A real-machine build restricted to what the runtime needs: no x86
/// `cpuid` pass, no CPU caches or I/O objects (none are read), no memory
/// attributes or CPU kinds (`NO_MEMATTRS | NO_CPUKINDS`: the per-node
/// `access*/initiators` and per-CPU `cpufreq`/`cpu_capacity` files, about
/// 15 of the ~300 system calls of a load on this 2-PU machine). Distances stay: the policies read them.
fn build_restricted() -> Result<HwTopology, String> {
    use hwlocality::object::types::ObjectType as T;
    use hwlocality::topology::builder::{BuildFlags, TypeFilter};
    let mut b = HwTopology::builder()
        .with_flags(BuildFlags::IGNORE_MEMORY_ATTRIBUTES | BuildFlags::IGNORE_CPU_KINDS)
        .map_err(|e| e.to_string())?;
    for c in UNNEEDED_COMPONENTS {
        b = b.without_component(c).map_err(|e| e.to_string())?;
    }
    b = b.with_cpu_cache_type_filter(TypeFilter::KeepNone).map_err(|e| e.to_string())?;
    b = b.with_io_type_filter(TypeFilter::KeepNone).map_err(|e| e.to_string())?;
    b = b.with_type_filter(T::Misc, TypeFilter::KeepNone).map_err(|e| e.to_string())?;
    b.build().map_err(|e| e.to_string())
}

/// The real machine's hwloc topology, or why it could not be built: the
/// restricted build ([`build_restricted`]) if it finds at least one PU,
/// else hwloc's full default discovery.
fn real_topology() -> Result<&'static HwTopology, String> {
    static REAL: OnceLock<Result<HwTopology, String>> = OnceLock::new();
    REAL.get_or_init(|| {
        let restricted =
            build_guarded(build_restricted).ok().filter(|t| t.objects_with_type(ObjectType::PU).next().is_some());
        match restricted {
            Some(t) => Ok(t),
            None => match catch_unwind(HwTopology::new) {
                Ok(Ok(t)) => Ok(t),
                Ok(Err(e)) => Err(format!("hwloc failed to detect this machine: {e}")),
                Err(_) => Err("hwloc panicked while detecting this machine".to_string()),
            },
        }
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// The last topology [`detect`] returned and the CPU affinity it was
/// computed under. hwloc's topology is built once per process
/// ([`real_topology`]); turning it into a [`Topology`] for the current
/// affinity cost about 19,000 instructions per runtime build (the
/// extraction and a bit-by-bit affinity scan), which a repeated build
/// (300 runtimes in one process) paid every time. The
/// affinity is read again on every call (one `sched_getaffinity`), so a
/// process that changes it gets a fresh topology.
static DETECTED: std::sync::Mutex<Option<(Vec<usize>, Topology)>> = std::sync::Mutex::new(None);

pub(super) fn detect() -> Result<Topology, TopologyError> {
    let allowed = allowed_cpus();
    {
        let last = DETECTED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some((mask, t)) = last.as_ref() {
            if *mask == allowed {
                return Ok(t.clone());
            }
        }
    }
    let t = detect_uncached(&allowed)?;
    *DETECTED.lock().unwrap_or_else(|e| e.into_inner()) = Some((allowed, t.clone()));
    Ok(t)
}

/// [`detect`] without the cache, for the affinity `allowed`.
fn detect_uncached(allowed: &[usize]) -> Result<Topology, TopologyError> {
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
    let (mut nodes, mut node_os, matrix) = extract(hw);
    // Only the PUs the process may run on (taskset, sched_setaffinity,
    // cgroup cpusets): hwloc itself hides cgroup-disallowed PUs but not
    // the affinity mask. Nodes left without PUs go, with their matrix rows.
    let mut restricted = None;
    let total: usize = nodes.iter().map(|n| n.cpus.len()).sum();
    let keep: Vec<bool> = nodes.iter().map(|n| n.cpus.iter().any(|c| allowed.contains(c))).collect();
    if keep.iter().any(|&k| k) {
        for n in &mut nodes {
            n.cpus.retain(|c| allowed.contains(c));
        }
        let now: usize = nodes.iter().map(|n| n.cpus.len()).sum();
        if now < total {
            restricted = Some(now);
        }
        nodes = nodes.into_iter().zip(&keep).filter(|(_, &k)| k).map(|(n, _)| n).collect();
        node_os = node_os.into_iter().zip(&keep).filter(|(_, &k)| k).map(|(o, _)| o).collect();
        for (id, n) in nodes.iter_mut().enumerate() {
            n.id = id;
        }
    }
    // Rows and columns of the nodes kept (all of them if none was).
    let any_kept = keep.iter().any(|&k| k);
    let idx: Vec<usize> = (0..keep.len()).filter(|&i| keep[i] || !any_kept).collect();
    let matrix = matrix.map(|m| m.map(|m| idx.iter().map(|&a| idx.iter().map(|&b| m[a][b]).collect()).collect()));
    let base = match restricted {
        Some(n) => format!("detected, restricted to the {n} of {total} PUs the process CPU affinity allows"),
        None => "detected".to_string(),
    };
    let (matrix, description) = match matrix {
        Ok(m) => (m, base),
        // A machine's own matrix we cannot use must not stop the program:
        // fall back to 10/20 and say why in the description.
        Err(why) => (None, format!("{base} (hwloc distance matrix ignored: {why})")),
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
    // pu:70000" takes minutes and gigabytes, and one level of 4096 children
    // takes a second): size every accepted form first, hwloc only after.
    let size = synthetic_size(desc).map_err(invalid)?;
    if let Some(why) = size.too_large() {
        return Err(TopologyError::new(
            K::TooLarge,
            format!("hwloc synthetic description `{desc}` {why}; use smaller counts"),
        ));
    }
    let hw = build_guarded(|| {
        HwTopology::builder().from_synthetic(desc).map_err(|e| e.to_string())?.build().map_err(|e| e.to_string())
    })
    .map_err(invalid)?;
    let (nodes, node_os, matrix) = extract(&hw);
    let t = Topology::from_parts(nodes, node_os, matrix.ok().flatten(), false, format!("synthetic:{desc}"));
    t.validate()?;
    Ok(t)
}

/// What a synthetic description builds: PUs, NUMA nodes and the largest
/// number of children of one object (saturating counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct SyntheticSize {
    pub(super) pus: u64,
    pub(super) nodes: u64,
    pub(super) arity: u64,
}

impl SyntheticSize {
    /// Why it is over the bounds, if it is.
    fn too_large(&self) -> Option<String> {
        use super::{MAX_ARITY, MAX_NODES, MAX_PUS};
        if self.pus > MAX_PUS as u64 {
            Some(format!("describes {} PUs, more than the {MAX_PUS} numafiber accepts", self.pus))
        } else if self.nodes > MAX_NODES as u64 {
            Some(format!("describes {} NUMA nodes, more than the {MAX_NODES} numafiber accepts", self.nodes))
        } else if self.arity > MAX_ARITY as u64 {
            Some(format!(
                "gives one object {} children, more than the {MAX_ARITY} numafiber accepts per level \
                 (hwloc's build time grows with the square of it)",
                self.arity
            ))
        } else {
            None
        }
    }
}

/// Size a synthetic description without hwloc. Accepted tokens (hwloc's
/// forms): `type:count` and a bare `count` (a level: multiplies the object
/// count), `[type]` (a memory child attached to every object of the level
/// above: one NUMA node each); each may carry a `(attributes)` group, and a
/// description may start with one (the machine's). Anything else is
/// refused here, so no form reaches hwloc unsized.
pub(super) fn synthetic_size(desc: &str) -> Result<SyntheticSize, String> {
    let mut objs: u64 = 1;
    let mut size = SyntheticSize { pus: 1, nodes: 0, arity: 0 };
    let mut numa_levels = false;
    let mut count_only = false;
    // Objects of the level above the current one.
    let mut above: u64 = 1;
    for (tok, attrs) in split_synthetic(desc)? {
        if tok.is_empty() {
            check_indexes(&tok, &attrs, 1)?; // the machine's group
            continue;
        }
        if let Some(inner) = tok.strip_prefix('[') {
            let ty = inner.strip_suffix(']').ok_or_else(|| format!("`{tok}` lacks its closing `]`"))?;
            if !is_numa_type(ty) {
                return Err(format!("`{tok}`: only NUMA nodes can be attached in brackets"));
            }
            check_indexes(&tok, &attrs, objs)?;
            size.nodes = size.nodes.saturating_add(objs);
            numa_levels = true;
            continue;
        }
        let (ty, count) = match tok.split_once(':') {
            Some((ty, count)) => (Some(ty), count),
            None => (None, tok.as_str()),
        };
        if ty.is_some_and(|t| t.is_empty() || !t.chars().all(|c| c.is_ascii_alphanumeric())) {
            return Err(format!("`{tok}` has no valid object type before `:`"));
        }
        if count.is_empty() || !count.chars().all(|c| c.is_ascii_digit()) {
            return Err(format!("`{tok}` has no object count (a decimal number)"));
        }
        let n: u64 = count.parse().unwrap_or(u64::MAX);
        count_only |= ty.is_none();
        above = objs;
        objs = objs.saturating_mul(n);
        size.arity = size.arity.max(n);
        check_indexes(&tok, &attrs, objs)?;
        if ty.is_some_and(is_numa_type) {
            size.nodes = size.nodes.saturating_add(objs);
            numa_levels = true;
        }
    }
    size.pus = objs;
    if count_only {
        // hwloc guesses the levels of a bare count: at most one NUMA node
        // per object of the level above the PUs.
        size.nodes = size.nodes.max(above);
    } else if !numa_levels {
        // hwloc adds one NUMA node to the machine when none is described.
        size.nodes = 1;
    }
    Ok(size)
}

fn is_numa_type(t: &str) -> bool {
    let t = t.split('(').next().unwrap_or(t).to_ascii_lowercase();
    matches!(t.as_str(), "numa" | "numanode" | "node")
}

/// Whitespace-separated tokens, each with the text of its `(...)` attribute
/// group (the groups may contain spaces; empty when there is none). A
/// leading group is the machine's: it comes back as the token `""`.
fn split_synthetic(desc: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    let mut cur = String::new();
    let mut attrs = String::new();
    let mut depth = 0usize;
    let flush = |out: &mut Vec<(String, String)>, cur: &mut String, attrs: &mut String| {
        if !cur.is_empty() || !attrs.is_empty() {
            out.push((std::mem::take(cur), std::mem::take(attrs)));
        }
    };
    for c in desc.chars() {
        match c {
            '(' => {
                if depth > 0 {
                    attrs.push(c);
                }
                depth += 1;
            }
            ')' => {
                depth = depth.checked_sub(1).ok_or_else(|| "it has an unmatched `)`".to_string())?;
                if depth > 0 {
                    attrs.push(c);
                }
            }
            c if depth > 0 => attrs.push(c),
            c if c.is_whitespace() => flush(&mut out, &mut cur, &mut attrs),
            // (`[numa(attrs)]`: the group sits inside the token)
            c => cur.push(c),
        }
    }
    if depth > 0 {
        return Err("it has an unmatched `(`".into());
    }
    flush(&mut out, &mut cur, &mut attrs);
    if out.iter().all(|(tok, _)| tok.is_empty()) {
        return Err("it has no level".into());
    }
    Ok(out)
}

/// Check the `indexes=` attribute of a level of `objects` objects, if it has
/// one. hwloc takes either an explicit list of OS indexes, one per object of
/// the whole level (`pu:4(indexes=0,2,1,3)`), or a colon-separated list of
/// object types to interleave (`pu:4(indexes=core:pu)`). A list is checked
/// here because hwloc does not: a huge index makes it allocate and walk a
/// bitmap that large (minutes), a short list or a repeated index silently
/// drops objects. Every index must be below [`MAX_PUS`](super::MAX_PUS).
fn check_indexes(tok: &str, attrs: &str, objects: u64) -> Result<(), String> {
    use super::MAX_PUS;
    let shown = if tok.is_empty() { "the machine" } else { tok };
    for attr in attrs.split_whitespace() {
        let Some(list) = attr.strip_prefix("indexes=") else { continue };
        if !list.is_empty()
            && list.split(':').all(|t| !t.is_empty() && t.chars().all(|c| c.is_ascii_alphanumeric()))
            && list.chars().any(|c| c.is_ascii_alphabetic())
        {
            continue; // interleaving by object types: hwloc computes the indexes
        }
        let mut seen = std::collections::BTreeSet::new();
        let mut n: u64 = 0;
        for item in list.split(',') {
            if item.is_empty() || !item.chars().all(|c| c.is_ascii_digit()) {
                return Err(format!(
                    "`{shown}`: `indexes={list}` is neither a comma-separated list of OS indexes \
                     (decimal numbers) nor a colon-separated list of object types"
                ));
            }
            let i: u64 = item.parse().unwrap_or(u64::MAX);
            if i >= MAX_PUS as u64 {
                return Err(format!(
                    "`{shown}`: OS index {item} in `indexes=` is out of range (each must be below {MAX_PUS})"
                ));
            }
            if !seen.insert(i) {
                return Err(format!("`{shown}`: OS index {i} appears twice in `indexes=` (each must be unique)"));
            }
            n += 1;
        }
        if n != objects {
            return Err(format!(
                "`{shown}`: `indexes=` lists {n} OS indexes but the level has {objects} objects \
                 (one index per object of the whole level)"
            ));
        }
    }
    Ok(())
}

pub(super) fn from_xml_file(path: &Path) -> Result<Topology, TopologyError> {
    let shown = path.display();
    let unreadable = |why: String| {
        TopologyError::new(
            K::XmlFileUnreadable,
            format!(
                "cannot read hwloc XML file `{shown}`: {why}; check the path, or create the file \
                 with `lstopo {shown}` (package hwloc) on the machine it should describe"
            ),
        )
    };
    // Open without blocking (a FIFO would block the open, and hwloc's read,
    // for ever), then look at what was opened: only a regular file is read.
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| unreadable(e.to_string()))?;
    let meta = file.metadata().map_err(|e| unreadable(e.to_string()))?;
    if meta.is_dir() {
        return Err(TopologyError::new(
            K::XmlFileUnreadable,
            format!("`{shown}` is a directory, not an hwloc XML file; give the path of the .xml file"),
        ));
    }
    if !meta.is_file() {
        return Err(TopologyError::new(
            K::XmlFileUnreadable,
            format!(
                "`{shown}` is not a regular file (a FIFO, socket or device, which could block or \
                 never end); write the topology to a regular file first, e.g. `lstopo topo.xml`"
            ),
        ));
    }
    const MAX_XML: u64 = 64 << 20;
    if meta.len() > MAX_XML {
        return Err(unreadable(format!(
            "it has {} bytes, more than the {MAX_XML} an hwloc XML topology needs",
            meta.len()
        )));
    }
    let mut xml = String::new();
    {
        use std::io::Read;
        // `take`: the file may grow while we read.
        (&file).take(MAX_XML + 1).read_to_string(&mut xml).map_err(|e| unreadable(e.to_string()))?;
    }
    drop(file);
    let invalid = |why: String| {
        TopologyError::new(
            K::InvalidXml,
            format!(
                "hwloc could not load `{shown}` as a topology ({why}); the file must be an hwloc \
                 XML export, e.g. written by `lstopo {shown}` or `lstopo-no-graphics --of xml`"
            ),
        )
    };
    if xml.contains('\0') {
        return Err(invalid("the file contains a NUL byte".into()));
    }
    if let Some(line) = xml_depth::too_deep_at(&xml) {
        return Err(TopologyError::new(
            K::InvalidXml,
            format!(
                "`{shown}` nests its XML elements more than {MAX_XML_DEPTH} deep (line {line}), far \
                 deeper than a machine's topology (about a dozen levels), so it is no hwloc \
                 topology export; hwloc's own XML parser would recurse that deep on the stack. \
                 Write the file with `lstopo {shown}` or `lstopo-no-graphics --of xml`"
            ),
        ));
    }
    let hw = parse_xml(&xml).map_err(invalid)?;
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

/// Stack of the thread that parses an XML topology: hwloc's own XML
/// parser recurses once per nested element, a few hundred bytes each, and
/// [`MAX_XML_DEPTH`] levels take a small part of this, whatever stack the
/// caller runs on (a fiber's may be small).
const XML_PARSE_STACK: usize = 2 << 20;

/// Load `xml` with hwloc on a thread of its own ([`XML_PARSE_STACK`]); on
/// the calling thread if no thread can be started (the depth is checked
/// already, so that only risks a small fiber stack).
fn parse_xml(xml: &str) -> Result<HwTopology, String> {
    let parse = || {
        build_guarded(|| {
            HwTopology::builder().from_xml(xml).map_err(|e| e.to_string())?.build().map_err(|e| e.to_string())
        })
    };
    std::thread::scope(|s| {
        match std::thread::Builder::new()
            .name("numafiber-xml".into())
            .stack_size(XML_PARSE_STACK)
            .spawn_scoped(s, parse)
        {
            Ok(h) => h.join().unwrap_or_else(|_| Err("hwloc failed unexpectedly".into())),
            Err(_) => parse(),
        }
    })
}

/// Nodes (with PUs), their OS indexes, and the NUMA latency matrix:
/// `Ok(None)` = the source has none; `Err(why)` = it has one we cannot use.
#[allow(clippy::type_complexity)]
fn extract(hw: &HwTopology) -> (Vec<NumaNode>, Vec<Option<usize>>, Result<Option<Vec<Vec<u32>>>, String>) {
    // hwloc NUMA nodes in logical order, with their cpusets.
    let hw_nodes: Vec<_> = hw.objects_with_type(ObjectType::NUMANode).collect();
    let mut pus: Vec<usize> =
        hw.objects_with_type(ObjectType::PU).map(|pu| pu.os_index().unwrap_or_else(|| pu.logical_index())).collect();
    pus.sort_unstable();
    pus.dedup();
    // PU -> index in hw_nodes of the first node covering it; uncovered -> node 0.
    let mut cpus_of: Vec<Vec<usize>> = vec![Vec::new(); hw_nodes.len().max(1)];
    for &p in &pus {
        let owner = hw_nodes.iter().position(|n| n.cpuset().is_some_and(|cs| cs.is_set(p))).unwrap_or(0);
        cpus_of[owner].push(p);
    }
    // Keep nodes that have PUs (memory-only nodes cannot host workers).
    let kept: Vec<usize> = (0..cpus_of.len()).filter(|&i| !cpus_of[i].is_empty()).collect();
    let nodes: Vec<NumaNode> =
        kept.iter().enumerate().map(|(id, &i)| NumaNode { id, cpus: cpus_of[i].clone() }).collect();
    let node_os: Vec<Option<usize>> = kept.iter().map(|&i| hw_nodes.get(i).and_then(|n| n.os_index())).collect();

    let matrix = (|| {
        let all = hw
            .distances_with_type(None, ObjectType::NUMANode)
            .map_err(|e| format!("hwloc could not list distance matrices: {e}"))?;
        // Prefer latency matrices; a bandwidth matrix grows the wrong way.
        let Some(d) = all.iter().find(|d| !d.kind().contains(DistancesKind::MEANS_BANDWIDTH)) else {
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
                m[a][b] = u32::try_from(v).map_err(|_| format!("distance {v} does not fit in u32"))?;
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
    catch_unwind(AssertUnwindSafe(|| hw.bind_cpu(&set, CpuBindingFlags::THREAD)))
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
    let allowed = allowed_cpus();
    let v: Vec<usize> = real_cpu_list().iter().copied().filter(|c| allowed.contains(c)).collect();
    if v.is_empty() {
        real_cpu_list().to_vec()
    } else {
        v
    }
}

/// OS indexes of the CPUs the process may run on right now (its CPU
/// affinity: `taskset`, `sched_setaffinity`, cgroup cpusets), ascending.
/// Read from the main thread (`sched_getaffinity(getpid())`), so a thread
/// that pinned itself does not narrow it. If the OS does not say, every PU
/// of the machine. Never empty.
///
/// ```
/// let allowed = numafiber::topology::allowed_cpus();
/// assert!(!allowed.is_empty());
/// assert!(numafiber::topology::real_cpus().iter().all(|c| allowed.contains(c)));
/// ```
pub fn allowed_cpus() -> Vec<usize> {
    // A mask bigger than glibc's 1024-bit cpu_set_t when the kernel has
    // more CPUs: grow until sched_getaffinity stops saying EINVAL.
    let mut words = 16usize; // 1024 bits
    loop {
        let mut mask = vec![0u64; words];
        let bytes = words * 8;
        // SAFETY: `mask` is `bytes` long and writable; the kernel writes at
        // most `bytes` bytes; getpid has no preconditions.
        let r = unsafe { libc::sched_getaffinity(libc::getpid(), bytes, mask.as_mut_ptr().cast::<libc::cpu_set_t>()) };
        if r == 0 {
            // The set bits only (a bit-by-bit scan of the 1,024 bits was
            // 14,000 instructions per runtime build).
            let mut v: Vec<usize> = Vec::new();
            for (w, &bits) in mask.iter().enumerate() {
                let mut b = bits;
                while b != 0 {
                    v.push(w * 64 + b.trailing_zeros() as usize);
                    b &= b - 1;
                }
            }
            if !v.is_empty() {
                return v;
            }
            break;
        }
        let einval = std::io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL);
        if !einval || words >= 1 << 16 {
            break;
        }
        words *= 2;
    }
    real_cpu_list().to_vec()
}

/// The cached list behind [`real_cpus`].
fn real_cpu_list() -> &'static [usize] {
    static CPUS: OnceLock<Vec<usize>> = OnceLock::new();
    CPUS.get_or_init(|| {
        let mut v: Vec<usize> = match real_topology() {
            Ok(hw) => {
                hw.objects_with_type(ObjectType::PU).filter_map(hwlocality::object::TopologyObject::os_index).collect()
            }
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
/// first touched. Used for fiber stack slabs (`runtime::task::stack`).
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The restricted discovery (no x86 `cpuid` pass, no caches, no I/O,
    /// no memory attributes or CPU kinds) finds the same PUs, NUMA nodes, OS node numbers and distances as
    /// hwloc's full default discovery of this machine.
    #[test]
    fn restricted_discovery_keeps_what_the_scheduler_reads() {
        let restricted = real_topology().expect("restricted discovery");
        let full = build_guarded(|| HwTopology::new().map_err(|e| e.to_string())).expect("full discovery");
        let (rn, ro, rm) = extract(restricted);
        let (fn_, fo, fm) = extract(&full);
        assert_eq!(rn, fn_, "NUMA nodes and their PUs");
        assert_eq!(ro, fo, "OS node numbers");
        assert_eq!(rm, fm, "distance matrix");
        assert!(
            restricted.objects_with_type(ObjectType::Core).count() == full.objects_with_type(ObjectType::Core).count()
        );
    }
}
