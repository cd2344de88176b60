//! Topology: bad input gives typed errors that say how to fix it (never a
//! panic), and the good paths behave as documented.

use std::path::PathBuf;

use numafiber::topology::{current_cpu, pin_current_thread, real_cpus, TopologyErrorKind as K};
use numafiber::{Topology, TopologyError};

/// Assert `r` failed with `kind` and its message mentions every `needles`.
#[track_caller]
fn assert_err<T: std::fmt::Debug>(r: Result<T, TopologyError>, kind: K, needles: &[&str]) -> TopologyError {
    let e = r.expect_err("expected an error");
    assert_eq!(e.kind(), kind, "wrong kind for: {e}");
    let msg = e.to_string();
    for n in needles {
        assert!(msg.contains(n), "message {msg:?} does not mention {n:?}");
    }
    e
}

fn temp_path(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("numafiber-topo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

// ---------------------------------------------------------------- bad input

#[test]
fn malformed_synthetic_is_a_typed_error() {
    for bad in ["pack:2 numa:1 core:banana", "this is not hwloc", "pu:0", "", "   "] {
        assert_err(Topology::synthetic(bad), K::InvalidSynthetic, &["synthetic", "pack:2 numa:1 core:4 pu:1"]);
    }
}

#[test]
fn huge_synthetic_is_refused_quickly() {
    let t0 = std::time::Instant::now();
    assert_err(Topology::synthetic("pack:70000 pu:70000"), K::TooLarge, &["4900000000 PUs", "smaller counts"]);
    assert!(t0.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn synthetic_with_nul_is_a_typed_error() {
    assert_err(Topology::synthetic("pu:2\0"), K::InvalidSynthetic, &["e.g."]);
}

#[test]
fn missing_xml_file_is_a_typed_error() {
    let e = assert_err(
        Topology::from_xml_file("/definitely/not/here/topo.xml"),
        K::XmlFileUnreadable,
        &["/definitely/not/here/topo.xml", "lstopo"],
    );
    assert!(e.to_string().contains("No such file"), "{e}");
}

#[test]
fn xml_path_that_is_a_directory_is_a_typed_error() {
    assert_err(Topology::from_xml_file(std::env::temp_dir()), K::XmlFileUnreadable, &["directory"]);
}

#[test]
fn invalid_xml_is_a_typed_error() {
    let p = temp_path("garbage.xml");
    std::fs::write(&p, "<?xml version=\"1.0\"?>\n<topology><object type=\"Banana\"").unwrap();
    assert_err(Topology::from_xml_file(&p), K::InvalidXml, &["hwloc XML export", "lstopo"]);
    let p = temp_path("empty.xml");
    std::fs::write(&p, "").unwrap();
    assert_err(Topology::from_xml_file(&p), K::InvalidXml, &["lstopo"]);
}

/// An XML topology nesting its objects 200,000 deep: each object valid on
/// its own (a `Misc` below a complete `Machine`), so hwloc's own XML
/// parser (no libhwloc-plugins) recursed through all of them on the
/// caller's stack and the process died of a stack overflow. It is an
/// `InvalidXml` error that names the depth, whichever parser hwloc uses.
#[test]
fn deeply_nested_xml_is_a_typed_error() {
    let depth = 200_000;
    let mut xml = String::from(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<!DOCTYPE topology SYSTEM \"hwloc2.dtd\">\n\
         <topology version=\"2.0\">\n<object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" \
         complete_cpuset=\"0x1\" allowed_cpuset=\"0x1\" nodeset=\"0x1\" complete_nodeset=\"0x1\" \
         allowed_nodeset=\"0x1\" gp_index=\"1\">\n",
    );
    for _ in 0..depth {
        xml.push_str("<object type=\"Misc\" gp_index=\"2\">");
    }
    for _ in 0..=depth {
        xml.push_str("</object>");
    }
    xml.push_str("</topology>\n");
    let p = temp_path("deep.xml");
    std::fs::write(&p, xml).unwrap();
    assert_err(Topology::from_xml_file(&p), K::InvalidXml, &["more than 256 deep", "line 5", "lstopo"]);
}

/// The same file where hwloc reads XML with its own parser: hwloc without
/// its plugins (as on a system without libhwloc-plugins; CI's step "hwloc
/// without its plugins"), in a child process since the plugins are chosen
/// when hwloc first loads.
#[test]
fn deeply_nested_xml_is_a_typed_error_without_hwloc_plugins() {
    const BLACKLIST: &str = "hwloc_gl,hwloc_opencl,hwloc_pci,hwloc_xml_libxml";
    if std::env::var("HWLOC_PLUGINS_BLACKLIST").as_deref() == Ok(BLACKLIST) {
        return; // the child, or CI's step: the test above covers it
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "deeply_nested_xml_is_a_typed_error", "--test-threads=1"])
        .env("HWLOC_PLUGINS_BLACKLIST", BLACKLIST)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "without hwloc's plugins the deep XML test failed ({}):\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn wrong_shape_matrix_is_rejected() {
    assert_err(
        Topology::uniform(2, 1).with_distances(vec![vec![10, 20]]),
        K::DistanceShape,
        &["1 rows", "2 NUMA nodes", "2x2"],
    );
    assert_err(
        Topology::uniform(2, 1).with_distances(vec![vec![10, 20], vec![20]]),
        K::DistanceShape,
        &["row 1", "2x2"],
    );
    assert_err(Topology::uniform(2, 1).with_distances(vec![]), K::DistanceShape, &["2x2"]);
}

#[test]
fn zero_in_matrix_is_rejected() {
    assert_err(
        Topology::uniform(2, 1).with_distances(vec![vec![0, 20], vec![20, 0]]),
        K::ZeroDistance,
        &["[0][0]", "[1][1]", "10 on the diagonal"],
    );
    assert_err(
        Topology::uniform(2, 1).with_distances(vec![vec![10, 0], vec![0, 10]]),
        K::ZeroDistance,
        &["[0][1]", "[1][0]"],
    );
}

#[test]
fn diagonal_must_be_row_minimum() {
    assert_err(
        Topology::uniform(2, 1).with_distances(vec![vec![10, 20], vec![20, 30]]),
        K::DiagonalNotMinimum,
        &["node 1", "smallest", "10 on the"],
    );
}

#[test]
fn asymmetric_matrix_names_the_entries() {
    let e = assert_err(
        Topology::uniform(3, 1).with_distances(vec![vec![10, 20, 30], vec![20, 10, 20], vec![31, 20, 10]]),
        K::AsymmetricDistances,
        &["[0][2]=30 vs [2][0]=31", "equal"],
    );
    assert!(!e.to_string().contains("[0][1]"), "{e}");
}

#[test]
fn zero_nodes_or_pus_is_invalid_not_a_panic() {
    assert_err(Topology::try_uniform(0, 4), K::NoNodes, &["at least 1 node"]);
    assert_err(Topology::try_uniform(2, 0), K::NoPus, &["at least 1 PU"]);
    let t = Topology::uniform(0, 0);
    assert_eq!(t.num_nodes(), 0);
    assert_err(t.validate(), K::NoNodes, &["uniform:0x0"]);
    assert_err(t.plan_workers(1, false), K::NoNodes, &[]);
    assert_err(Topology::uniform(0, 1).with_distances(vec![]), K::NoNodes, &[]);
    assert!(t.nodes_by_distance(0).is_empty());
}

#[test]
fn bad_specs_are_typed_errors() {
    for bad in ["", "auto", "uniform:2", "uniform:ax2", "uniform:2xb", "numa:4", "xml:"] {
        assert_err(Topology::parse(bad), K::InvalidSpec, &["uniform:NxP", "detect"]);
    }
    assert_err(Topology::parse("uniform:0x2"), K::NoNodes, &[]);
    assert_err(Topology::parse("synthetic:nope"), K::InvalidSynthetic, &[]);
    assert_err(Topology::parse("xml:/no/such.xml"), K::XmlFileUnreadable, &[]);
}

#[test]
fn zero_workers_is_rejected() {
    assert_err(Topology::uniform(2, 2).plan_workers(0, false), K::ZeroWorkers, &["at least 1 worker", ".workers()"]);
    assert_err(Topology::uniform(2, 2).plan_workers(0, true), K::ZeroWorkers, &[]);
}

#[test]
fn strict_plan_rejects_more_workers_than_pus() {
    assert_err(
        Topology::uniform(2, 2).plan_workers(5, true),
        K::TooManyWorkers,
        &["5 workers", "only 4 processing units", "at most 4", "strict pinning off"],
    );
}

#[test]
fn errors_are_std_errors_clone_eq() {
    let e = Topology::try_uniform(0, 1).unwrap_err();
    let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(e.clone());
    assert_eq!(boxed.to_string(), e.to_string());
    assert_eq!(e, e.clone());
}

// ---------------------------------------------------------------- behaviour

#[test]
fn uniform_layout_and_default_distances() {
    let t = Topology::uniform(3, 2);
    assert_eq!(t.num_nodes(), 3);
    assert_eq!(t.num_pus(), 6);
    let cpus: Vec<Vec<usize>> = t.nodes().iter().map(|n| n.cpus.clone()).collect();
    assert_eq!(cpus, vec![vec![0, 1], vec![2, 3], vec![4, 5]]);
    assert!(t.nodes().iter().enumerate().all(|(i, n)| n.id == i));
    assert_eq!(t.distances(), &[vec![10, 20, 20], vec![20, 10, 20], vec![20, 20, 10]]);
    assert!(!t.has_distance_matrix());
    assert!(!t.is_this_machine());
    assert_eq!(t.description(), "uniform:3x2");
    t.validate().unwrap();
}

#[test]
fn with_distances_replaces_matrix() {
    let m = vec![vec![10, 21, 31], vec![21, 10, 21], vec![31, 21, 10]];
    let t = Topology::uniform(3, 1).with_distances(m.clone()).unwrap();
    assert!(t.has_distance_matrix());
    assert_eq!(t.distances(), m.as_slice());
    assert_eq!(t.distance(0, 2), 31);
    assert_eq!(t.distance(2, 1), 21);
    t.validate().unwrap();
}

#[test]
#[should_panic(expected = "index out of bounds")]
fn distance_out_of_range_panics_like_indexing() {
    let _ = Topology::uniform(2, 1).distance(0, 2);
}

#[test]
fn nodes_by_distance_orders_nearest_first_ties_by_id() {
    let t = Topology::uniform(4, 1)
        .with_distances(vec![vec![10, 30, 20, 20], vec![30, 10, 20, 20], vec![20, 20, 10, 30], vec![20, 20, 30, 10]])
        .unwrap();
    assert_eq!(t.nodes_by_distance(0), vec![2, 3, 1]);
    assert_eq!(t.nodes_by_distance(1), vec![2, 3, 0]);
    assert_eq!(t.nodes_by_distance(2), vec![0, 1, 3]);
    assert_eq!(t.nodes_by_distance(3), vec![0, 1, 2]);
    // All ties: plain id order, self excluded.
    assert_eq!(Topology::uniform(4, 1).nodes_by_distance(2), vec![0, 1, 3]);
    assert!(Topology::uniform(1, 4).nodes_by_distance(0).is_empty());
}

#[test]
fn synthetic_two_packages_two_nodes() {
    let t = Topology::synthetic("pack:2 numa:1 core:2 pu:1").unwrap();
    assert_eq!(t.num_nodes(), 2);
    assert_eq!(t.num_pus(), 4);
    assert_eq!(t.nodes()[0].cpus, vec![0, 1]);
    assert_eq!(t.nodes()[1].cpus, vec![2, 3]);
    assert!(!t.has_distance_matrix());
    assert_eq!(t.distances(), &[vec![10, 20], vec![20, 10]]);
    assert!(!t.is_this_machine());
    assert_eq!(t.description(), "synthetic:pack:2 numa:1 core:2 pu:1");
    assert_eq!(t.node_os_index(1), Some(1));
    // Synthetic strings carry no distances: add them afterwards.
    let t = t.with_distances(vec![vec![10, 32], vec![32, 10]]).unwrap();
    assert_eq!(t.distance(1, 0), 32);
}

#[test]
fn synthetic_without_numa_level_has_one_node() {
    let t = Topology::synthetic("core:3 pu:2").unwrap();
    assert_eq!(t.num_nodes(), 1);
    assert_eq!(t.nodes()[0].cpus, (0..6).collect::<Vec<_>>());
}

#[test]
fn parse_accepts_every_form() {
    assert_eq!(Topology::parse("uniform:2x3").unwrap(), Topology::uniform(2, 3));
    assert_eq!(Topology::parse(" uniform:2X3 ").unwrap().num_pus(), 6);
    assert_eq!(Topology::parse("synthetic:pack:2 numa:1 core:2 pu:1").unwrap().num_nodes(), 2);
    assert!(Topology::parse("detect").unwrap().is_this_machine());
    let p = write_xml_with_distances("parse.xml");
    let t = Topology::parse(&format!("xml:{}", p.display())).unwrap();
    assert_eq!(t.num_nodes(), 2);
}

/// An hwloc XML of "pack:2 numa:1 core:2 pu:1" carrying a 2x2 NUMA latency
/// matrix [[10, 21], [21, 10]], produced with hwlocality itself (distances
/// added *without a name*, see DESIGN.md).
fn write_xml_with_distances(name: &str) -> PathBuf {
    use hwlocality::object::distance::{AddDistancesFlags, DistancesKind};
    use hwlocality::object::types::ObjectType;
    use hwlocality::topology::export::xml::XMLExportFlags;
    let mut hw = hwlocality::Topology::builder().from_synthetic("pack:2 numa:1 core:2 pu:1").unwrap().build().unwrap();
    hw.edit(|e| {
        e.add_distances(
            None,
            DistancesKind::FROM_USER | DistancesKind::MEANS_LATENCY,
            AddDistancesFlags::empty(),
            |t| (t.objects_with_type(ObjectType::NUMANode).map(Some).collect(), vec![10, 21, 21, 10]),
        )
        .unwrap()
    });
    let xml = hw.export_xml(XMLExportFlags::empty()).unwrap();
    assert!(xml.as_str().contains("distances2"), "export lacks <distances2>");
    let p = temp_path(name);
    std::fs::write(&p, xml.as_str()).unwrap();
    p
}

#[test]
fn xml_round_trip_keeps_nodes_and_distance_matrix() {
    let p = write_xml_with_distances("roundtrip.xml");
    let t = Topology::from_xml_file(&p).unwrap();
    assert_eq!(t.num_nodes(), 2);
    assert_eq!(t.nodes()[0].cpus, vec![0, 1]);
    assert_eq!(t.nodes()[1].cpus, vec![2, 3]);
    assert!(t.has_distance_matrix());
    assert_eq!(t.distances(), &[vec![10, 21], vec![21, 10]]);
    assert!(!t.is_this_machine());
    assert_eq!(t.description(), format!("xml:{}", p.display()));
}

#[test]
fn xml_without_distances_uses_default() {
    use hwlocality::topology::export::xml::XMLExportFlags;
    let hw = hwlocality::Topology::builder().from_synthetic("pack:3 numa:1 pu:1").unwrap().build().unwrap();
    let p = temp_path("nodist.xml");
    std::fs::write(&p, hw.export_xml(XMLExportFlags::empty()).unwrap().as_str()).unwrap();
    let t = Topology::from_xml_file(&p).unwrap();
    assert_eq!(t.num_nodes(), 3);
    assert!(!t.has_distance_matrix());
    assert_eq!(t.distance(0, 2), 20);
}

#[test]
fn xml_with_asymmetric_matrix_is_rejected() {
    let p = write_xml_with_distances("asym-src.xml");
    let xml = std::fs::read_to_string(&p).unwrap();
    // The exported values are "10 21 21 10"; make [1][0] = 22.
    assert!(xml.contains("10 21 21 10"), "unexpected export format:\n{xml}");
    let p = temp_path("asym.xml");
    std::fs::write(&p, xml.replace("10 21 21 10", "10 21 22 10")).unwrap();
    assert_err(Topology::from_xml_file(&p), K::InvalidXml, &["[0][1]=21 vs [1][0]=22", "<distances2>"]);
}

#[test]
fn detect_sees_this_machine() {
    let t = Topology::detect().unwrap();
    assert!(t.is_this_machine());
    assert!(t.description().starts_with("detected"), "{}", t.description());
    t.validate().unwrap();
    let mut all: Vec<usize> = t.nodes().iter().flat_map(|n| n.cpus.iter().copied()).collect();
    all.sort_unstable();
    assert_eq!(all, real_cpus(), "detected PUs must be exactly real_cpus()");
    if t.num_nodes() == 1 {
        // hwloc reports no matrix for a single node: the 10/20 default is used.
        assert!(!t.has_distance_matrix());
        assert_eq!(t.distances(), &[vec![10]]);
    }
    if !t.has_distance_matrix() {
        let n = t.num_nodes();
        for a in 0..n {
            for b in 0..n {
                assert_eq!(t.distance(a, b), if a == b { 10 } else { 20 });
            }
        }
    }
}

#[test]
fn plan_strict_maps_logical_pus_node_by_node() {
    let t = Topology::uniform(2, 2);
    let plan = t.plan_workers(4, true).unwrap();
    let real = real_cpus();
    for (i, s) in plan.iter().enumerate() {
        assert_eq!(s.logical_pu, i);
        assert_eq!(s.node, i / 2);
        assert_eq!(s.cpu, real[i % real.len()], "round-robin onto real PUs");
    }
    // Fewer workers than PUs: the first logical PUs, node 0 first.
    let plan = t.plan_workers(3, true).unwrap();
    assert_eq!(plan.iter().map(|s| s.node).collect::<Vec<_>>(), vec![0, 0, 1]);
}

#[test]
fn plan_non_strict_wraps_around_logical_pus() {
    let t = Topology::uniform(2, 1);
    let plan = t.plan_workers(5, false).unwrap();
    let lp: Vec<usize> = plan.iter().map(|s| s.logical_pu).collect();
    assert_eq!(lp, vec![0, 1, 0, 1, 0]);
    let nodes: Vec<usize> = plan.iter().map(|s| s.node).collect();
    assert_eq!(nodes, vec![0, 1, 0, 1, 0]);
    let real = real_cpus();
    assert!(plan.iter().all(|s| s.cpu == real[s.logical_pu % real.len()]));
}

#[test]
fn plan_on_this_machine_uses_real_os_indexes() {
    let t = Topology::detect().unwrap();
    let n = t.num_pus();
    let plan = t.plan_workers(n, true).unwrap();
    let expect: Vec<(usize, usize)> =
        t.nodes().iter().flat_map(|nd| nd.cpus.iter().map(move |&c| (nd.id, c))).collect();
    for (i, s) in plan.iter().enumerate() {
        assert_eq!(s.logical_pu, i);
        assert_eq!((s.node, s.cpu), expect[i]);
    }
    assert_err(t.plan_workers(n + 1, true), K::TooManyWorkers, &[&format!("only {n} processing units")]);
    assert_eq!(t.plan_workers(n + 1, false).unwrap()[n].cpu, expect[0].1);
}

#[test]
fn pinning_moves_the_thread_to_that_cpu() {
    for cpu in real_cpus() {
        std::thread::spawn(move || {
            pin_current_thread(cpu).unwrap_or_else(|e| panic!("pin to {cpu}: {e}"));
            // After the binding syscall returns, the scheduler runs us only on `cpu`.
            std::thread::yield_now();
            assert_eq!(current_cpu(), Some(cpu));
        })
        .join()
        .unwrap();
    }
}

#[test]
fn pinning_to_a_missing_cpu_says_so() {
    let bogus = real_cpus().last().unwrap() + 1000;
    let err = std::thread::spawn(move || pin_current_thread(bogus)).join().unwrap().unwrap_err();
    assert!(err.contains(&bogus.to_string()) && err.contains("real_cpus"), "{err}");
    // Beyond hwloc's bitmap range (c_int::MAX): still an error, not a panic.
    let err = std::thread::spawn(|| pin_current_thread(usize::MAX)).join().unwrap().unwrap_err();
    assert!(err.contains("not a PU of this machine"), "{err}");
}
