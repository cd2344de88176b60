//! Misuse of the public API, as a table: each case gets a typed error (or,
//! where the API is a panicking one by design, a panic) whose message says
//! what was wrong and how to fix it. Never an abort, never a hang.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use numafiber::graph::{GraphErrorKind, StaticGraph};
use numafiber::{fiber, sync, BuildErrorKind, Runtime, SpawnErrorKind, Topology, TopologyErrorKind};

/// What a case produced: the error's kind (Debug) and its message.
type Outcome = (String, String);
/// A case: its name, what it runs, the kind and message text it must give.
type Case = (&'static str, Box<dyn Fn() -> Outcome>, &'static str, &'static str);

fn rt1() -> Runtime {
    Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap()
}

fn panic_text(f: impl FnOnce()) -> Outcome {
    let p = catch_unwind(AssertUnwindSafe(f)).expect_err("expected a panic");
    let m = p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()));
    ("panic".into(), m.unwrap_or_default())
}

#[test]
fn misuse_table() {
    let cases: Vec<Case> = vec![
        (
            "zero workers",
            Box::new(|| {
                let e = Runtime::builder().workers(0).topology(Topology::uniform(1, 1)).build().unwrap_err();
                assert_eq!(e.kind(), &BuildErrorKind::ZeroWorkers);
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "ZeroWorkers",
            "at least one worker",
        ),
        (
            "more workers than PUs with strict pinning",
            Box::new(|| {
                let e = Runtime::builder().workers(3).topology(Topology::uniform(1, 2)).strict_pinning(true).build().unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "TooManyWorkers",
            "strict_pinning(false)",
        ),
        (
            "runtime stack below the minimum",
            Box::new(|| {
                let e = Runtime::builder().stack_size(4096).topology(Topology::uniform(1, 1)).build().unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "StackTooSmall",
            "stack_size(n) with n >= 16384",
        ),
        (
            "fiber stack below the minimum",
            Box::new(|| {
                let rt = rt1();
                let e = fiber::Builder::new().stack_size(100).spawn_on(&rt, || ()).unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "StackTooSmall",
            "n >= 16384",
        ),
        (
            "malformed topology spec",
            Box::new(|| {
                let e = Topology::parse("mesh:3").unwrap_err();
                assert_eq!(e.kind(), TopologyErrorKind::InvalidSpec);
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "InvalidSpec",
            "uniform:",
        ),
        (
            "malformed synthetic topology",
            Box::new(|| {
                let e = Topology::synthetic("pack:two pu:1").unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "InvalidSynthetic",
            "synthetic",
        ),
        (
            "missing XML file",
            Box::new(|| {
                let e = Topology::from_xml_file("/nonexistent/numafiber.xml").unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "XmlFileUnreadable",
            "/nonexistent/numafiber.xml",
        ),
        (
            "asymmetric distance matrix",
            Box::new(|| {
                let e = Topology::uniform(2, 1).with_distances(vec![vec![10, 20], vec![30, 10]]).unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "AsymmetricDistances",
            "symmetric",
        ),
        (
            "zero in the distance matrix",
            Box::new(|| {
                let e = Topology::uniform(2, 1).with_distances(vec![vec![10, 0], vec![0, 10]]).unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "ZeroDistance",
            "0",
        ),
        (
            "distance matrix of the wrong shape",
            Box::new(|| {
                let e = Topology::uniform(3, 1).with_distances(vec![vec![10, 20], vec![20, 10]]).unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "DistanceShape",
            "3",
        ),
        (
            "zero-node topology given to a runtime",
            Box::new(|| {
                let e = Runtime::builder().topology(Topology::uniform(0, 4)).build().unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "Topology",
            "invalid topology",
        ),
        (
            "fiber::Builder::spawn outside a runtime",
            Box::new(|| {
                let e = fiber::Builder::new().spawn(|| ()).unwrap_err();
                assert_eq!(e.kind(), &SpawnErrorKind::NoRuntime);
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "NoRuntime",
            "Runtime::spawn",
        ),
        (
            "fiber::spawn outside a runtime (panicking API, like tokio::spawn)",
            Box::new(|| panic_text(|| drop(fiber::spawn(|| ())))),
            "panic",
            "outside a numafiber runtime",
        ),
        (
            "block_on from inside a fiber (panicking API)",
            Box::new(|| {
                let rt = Arc::new(rt1());
                let rt2 = rt.clone();
                let e = rt.spawn(move || rt2.block_on(|| 1)).join().unwrap_err();
                ("panic".into(), e.panic_message().unwrap_or_default().to_string())
            }),
            "panic",
            "use fiber::spawn + fiber::await_fiber",
        ),
        (
            "a worker the runtime does not have",
            Box::new(|| {
                let rt = rt1();
                let e = fiber::Builder::new().worker(5).spawn_on(&rt, || ()).unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "NoSuchWorker",
            "pick a worker below 1",
        ),
        (
            "a node the runtime does not have",
            Box::new(|| {
                let rt = rt1();
                let e = fiber::Builder::new().node(2).spawn_on(&rt, || ()).unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "NoSuchNode",
            "pick a node below 1",
        ),
        (
            "a StaticGraph cycle",
            Box::new(|| {
                let mut g = StaticGraph::<u32>::new();
                let a = g.add_node(|_| 1);
                let b = g.add_node(|_| 2);
                g.add_dep(a, b).unwrap();
                g.add_dep(b, a).unwrap();
                let e = g.execute_on(&rt1()).unwrap_err();
                assert!(matches!(e.kind(), GraphErrorKind::Cycle { .. }));
                ("Cycle".into(), e.to_string())
            }),
            "Cycle",
            "cycle",
        ),
        (
            "a StaticGraph self-dependency",
            Box::new(|| {
                let mut g = StaticGraph::<u32>::new();
                let a = g.add_node(|_| 1);
                let e = g.add_dep(a, a).unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "SelfDependency",
            "itself",
        ),
        (
            "send on a channel whose receivers are gone",
            Box::new(|| {
                let (tx, rx) = sync::channel::bounded::<u8>(1);
                drop(rx);
                let e = tx.send(7).unwrap_err();
                assert_eq!(e.0, 7, "the value comes back");
                ("SendError".into(), e.to_string())
            }),
            "SendError",
            "receivers are all dropped",
        ),
        (
            "WaitGroup::done below zero (panicking API)",
            Box::new(|| panic_text(|| sync::WaitGroup::new().done())),
            "panic",
            "WaitGroup",
        ),
    ];
    assert!(cases.len() >= 12);
    let mut failures = Vec::new();
    for (name, case, want_kind, want_msg) in &cases {
        let (kind, msg) = case();
        if !kind.contains(want_kind) || !msg.contains(want_msg) {
            failures.push(format!("{name}: got kind {kind:?}, message {msg:?}; want {want_kind:?} / {want_msg:?}"));
        }
    }
    assert!(failures.is_empty(), "{} of {} cases wrong:\n{}", failures.len(), cases.len(), failures.join("\n"));
}
