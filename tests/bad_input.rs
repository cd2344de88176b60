//! Bad input to the runtime gets a typed error that says how to fix it.

use numafiber::{fiber, BuildErrorKind, Runtime, SpawnErrorKind, Topology, TopologyErrorKind};

#[test]
fn zero_workers() {
    let e = Runtime::builder().workers(0).topology(Topology::uniform(1, 2)).build().unwrap_err();
    assert_eq!(e.kind(), &BuildErrorKind::ZeroWorkers);
    assert!(e.to_string().contains("at least one worker"), "{e}");
}

#[test]
fn more_workers_than_pus_with_strict_pinning() {
    let e = Runtime::builder().workers(5).topology(Topology::uniform(2, 2)).strict_pinning(true).build().unwrap_err();
    assert_eq!(e.kind(), &BuildErrorKind::TooManyWorkers { workers: 5, pus: 4 });
    assert!(e.to_string().contains("strict_pinning(false)"), "{e}");
    // without strict pinning the same request runs, workers sharing PUs
    let rt = Runtime::builder().workers(5).topology(Topology::uniform(2, 2)).build().unwrap();
    assert_eq!(rt.block_on(|| 1), 1);
}

#[test]
fn stack_below_minimum() {
    let e = Runtime::builder().stack_size(1024).topology(Topology::uniform(1, 1)).build().unwrap_err();
    assert!(matches!(e.kind(), BuildErrorKind::StackTooSmall { requested: 1024, .. }));
    assert!(e.to_string().contains("stack_size"), "{e}");
    let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
    let e = rt.block_on(|| fiber::Builder::new().stack_size(100).spawn(|| ()).unwrap_err());
    assert!(matches!(e.kind(), SpawnErrorKind::StackTooSmall { requested: 100, .. }));
}

#[test]
fn invalid_topologies_are_build_errors() {
    let e = Runtime::builder().topology(Topology::uniform(0, 2)).build().unwrap_err();
    assert!(matches!(e.kind(), BuildErrorKind::Topology(t) if t.kind() == TopologyErrorKind::NoNodes), "{e}");
    let t = Topology::synthetic("pack:2 bogus:7").unwrap_err();
    assert_eq!(t.kind(), TopologyErrorKind::InvalidSynthetic);
    let t = Topology::from_xml_file("/nonexistent/topo.xml").unwrap_err();
    assert_eq!(t.kind(), TopologyErrorKind::XmlFileUnreadable);
    let t = Topology::uniform(2, 1).with_distances(vec![vec![10, 20]]).unwrap_err();
    assert_eq!(t.kind(), TopologyErrorKind::DistanceShape);
    let t = Topology::uniform(2, 1).with_distances(vec![vec![10, 0], vec![0, 10]]).unwrap_err();
    assert_eq!(t.kind(), TopologyErrorKind::ZeroDistance);
}

#[test]
fn spawn_outside_a_runtime() {
    let e = fiber::Builder::new().spawn(|| 1).unwrap_err();
    assert_eq!(e.kind(), &SpawnErrorKind::NoRuntime);
    assert!(e.to_string().contains("Runtime::spawn"), "{e}");
    let p = std::panic::catch_unwind(|| fiber::spawn(|| 1)).unwrap_err();
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(msg.contains("outside a numafiber runtime"), "{msg}");
}

#[test]
fn no_such_worker_or_node() {
    let rt = Runtime::builder().workers(2).topology(Topology::uniform(2, 1)).build().unwrap();
    let e = fiber::Builder::new().worker(7).spawn_on(&rt, || ()).unwrap_err();
    assert_eq!(e.kind(), &SpawnErrorKind::NoSuchWorker { worker: 7, workers: 2 });
    let e = fiber::Builder::new().node(3).spawn_on(&rt, || ()).unwrap_err();
    assert!(matches!(e.kind(), SpawnErrorKind::NoSuchNode { node: 3, .. }), "{e}");
    // Pinned too, so an idle worker of node 0 cannot steal it before it runs.
    let on1 = fiber::Builder::new().node(1).pinned(true).spawn_on(&rt, || fiber::current().unwrap().node).unwrap();
    assert_eq!(on1.join().unwrap(), 1);
}

#[test]
fn block_on_inside_a_fiber_panics_with_advice() {
    let rt = std::sync::Arc::new(Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap());
    let rt2 = rt.clone();
    let e = rt.spawn(move || rt2.block_on(|| 1)).join().unwrap_err();
    assert!(e.panic_message().unwrap().contains("await_fiber"), "{e}");
}

/// `indexes=` lists in a synthetic description are checked before hwloc
/// sees them: an index out of range made hwloc allocate and walk a bitmap
/// of 2^32 bits (42 s) and then report 3 PUs for a description of 4.
#[test]
fn synthetic_indexes_out_of_range_count_or_repeated_are_typed_errors() {
    for (desc, says) in [
        ("pack:2 pu:2(indexes=4294967295,0,1,2)", "OS index 4294967295 in `indexes=` is out of range"),
        ("pack:2 pu:2(indexes=0,1,2,99999999999999999999999)", "out of range"),
        ("pack:2 pu:2(indexes=0,1,2)", "lists 3 OS indexes but the level has 4 objects"),
        ("pack:2 pu:2(indexes=0,1,2,3,4)", "lists 5 OS indexes but the level has 4 objects"),
        ("pack:2 pu:2(indexes=0,1,1,2)", "OS index 1 appears twice"),
        ("pack:2 pu:2(indexes=0,1,-2,3)", "neither a comma-separated list"),
        ("pack:2 pu:2(indexes=)", "neither a comma-separated list"),
        ("pack:2 [numa(indexes=0,5000)] pu:2", "OS index 5000 in `indexes=` is out of range"),
    ] {
        let e = Topology::synthetic(desc).unwrap_err();
        assert_eq!(e.kind(), TopologyErrorKind::InvalidSynthetic, "{desc}: {e}");
        assert!(e.to_string().contains(says), "{desc}: {e}");
    }
    // Valid lists and interleavings still build, with every PU.
    for (desc, pus, nodes) in [
        ("pack:2 pu:2(indexes=0,2,1,3)", 4, 1),
        ("pack:2 core:2 pu:2(indexes=core:pu)", 8, 1),
        ("pack:2 [numa(indexes=1,0)] pu:2", 4, 2),
        ("pack:2 numa:1(indexes=1,0) pu:2(indexes=3,2,1,0)", 4, 2),
    ] {
        let t = Topology::synthetic(desc).unwrap_or_else(|e| panic!("{desc}: {e}"));
        assert_eq!((t.num_pus(), t.num_nodes()), (pus, nodes), "{desc}");
    }
}
