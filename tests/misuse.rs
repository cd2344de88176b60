//! Misuse of the public API, as a table: each case gets a typed error (or,
//! where the API is a panicking one by design, a panic) whose message says
//! what was wrong and how to fix it. Never an abort, never a hang.
//!
//! Cases that used to abort the process or hang run in a child
//! process under a timeout, one `#[test]` each, named for what it probes:
//! the test re-executes this binary with `NUMAFIBER_MISUSE_CHILD=<test>`,
//! the child runs the scenario and prints `CHILD-OK`, and the parent
//! checks the exit status, the output and that it ended in time.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

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
    if in_some_child() {
        return;
    }
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
                let e = Runtime::builder()
                    .workers(3)
                    .topology(Topology::uniform(1, 2))
                    .strict_pinning(true)
                    .build()
                    .unwrap_err();
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
        // ---- bad input that used to abort or hang ----
        (
            "workers(100_000): over the worker limit (item 9)",
            Box::new(|| {
                let e = Runtime::builder().workers(100_000).topology(Topology::uniform(1, 2)).build().unwrap_err();
                assert_eq!(e.kind(), &BuildErrorKind::WorkerLimit { workers: 100_000, limit: 1024 });
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "WorkerLimit",
            "at most 1024",
        ),
        (
            "a thread name with a NUL byte (item 16)",
            Box::new(|| {
                let e =
                    Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).name("a\0b").build().unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "InvalidName",
            "NUL byte",
        ),
        (
            "uniform:100000x1, a 40 GB distance matrix (item 10)",
            Box::new(|| {
                let e = Topology::parse("uniform:100000x1").unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "TooLarge",
            "more than the 256",
        ),
        (
            "uniform N x P overflowing usize (item 10)",
            Box::new(|| {
                let e = Topology::parse(&format!("uniform:2x{}", usize::MAX)).unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "TooLarge",
            "overflows usize",
        ),
        (
            "Topology::uniform over the PU bound, validated by a builder (item 10)",
            Box::new(|| {
                let e = Runtime::builder().topology(Topology::uniform(2, 1 << 20)).build().unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "TooLarge",
            "more than the 4096",
        ),
        (
            "count-only synthetic string \"1000 1000 1000\" (item 11)",
            Box::new(|| {
                let e = Topology::synthetic("1000 1000 1000").unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "TooLarge",
            "1000000000 PUs",
        ),
        (
            "synthetic pu:16384 inside the old 65,536 bound (item 11)",
            Box::new(|| {
                let e = Topology::synthetic("pu:16384").unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "TooLarge",
            "16384 PUs",
        ),
        (
            "synthetic level of 4096 children (item 11)",
            Box::new(|| {
                let e = Topology::synthetic("pu:4096").unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "TooLarge",
            "4096 children",
        ),
        (
            "synthetic with bracketed NUMA children over the node bound (item 11)",
            Box::new(|| {
                let e = Topology::synthetic("pack:512 [numa] pu:1").unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "TooLarge",
            "512 NUMA nodes",
        ),
        (
            "synthetic form numafiber cannot size (item 11)",
            Box::new(|| {
                let e = Topology::synthetic("pack:2 core:lots pu:1").unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "InvalidSynthetic",
            "no object count",
        ),
        (
            "WaitGroup::add wrapping the count (item 14)",
            Box::new(|| {
                let wg = sync::WaitGroup::new();
                wg.add(2);
                let out = panic_text(|| wg.add(usize::MAX));
                assert_eq!(wg.count(), 2, "left unchanged");
                out
            }),
            "panic",
            "would overflow usize",
        ),
        (
            "Semaphore::add_permits wrapping the count (item 13)",
            Box::new(|| {
                let s = sync::Semaphore::new(5);
                let out = panic_text(|| s.add_permits(usize::MAX - 4));
                assert_eq!(s.available_permits(), 5, "left unchanged");
                out
            }),
            "panic",
            "would exceed usize::MAX",
        ),
        (
            "worker(w).node(n) with w not on n (docs item)",
            Box::new(|| {
                let rt = Runtime::builder().workers(2).topology(Topology::uniform(2, 1)).build().unwrap();
                let e = fiber::Builder::new().worker(1).node(0).spawn_on(&rt, || ()).unwrap_err();
                assert_eq!(e.kind(), &SpawnErrorKind::WorkerNotOnNode { worker: 1, node: 0, worker_node: 1 });
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "WorkerNotOnNode",
            "give only one of them",
        ),
        (
            "a closure larger than the fiber's stack (docs item)",
            Box::new(|| {
                let rt = rt1();
                let big = [7u8; 256 << 10];
                let e = fiber::Builder::new().stack_size(64 << 10).spawn_on(&rt, move || big[1]).unwrap_err();
                (format!("{:?}", e.kind()), e.to_string())
            }),
            "ClosureTooLarge",
            "box large captures",
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

// ---------------------------------------------------------------------------
// Child-process cases: scenarios that used to abort or hang.

const CHILD_ENV: &str = "NUMAFIBER_MISUSE_CHILD";

/// In the child run for `test`: true (run the scenario, then print CHILD-OK).
fn is_child(test: &str) -> bool {
    std::env::var(CHILD_ENV).is_ok_and(|v| v == test)
}

/// Whether this process is a child run for any test (then the other tests
/// of the table do nothing).
fn in_some_child() -> bool {
    std::env::var_os(CHILD_ENV).is_some()
}

/// Re-run this test binary for `test` alone, with `prepare` applied to the
/// command; kill it after `limit`. Returns its output and whether it timed out.
fn run_child(test: &str, limit: Duration, prepare: impl FnOnce(&mut Command)) -> (Output, bool) {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, test)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    prepare(&mut cmd);
    let mut child = cmd.spawn().unwrap();
    let t0 = Instant::now();
    let mut timed_out = false;
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if t0.elapsed() > limit {
            timed_out = true;
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    (child.wait_with_output().unwrap(), timed_out)
}

/// Run `test` in a child and require a clean exit with CHILD-OK in time.
fn expect_child_ok(test: &str, limit: Duration, prepare: impl FnOnce(&mut Command)) -> String {
    let (out, timed_out) = run_child(test, limit, prepare);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!timed_out, "{test}: child still running after {limit:?} (hang); stdout: {stdout}\nstderr: {stderr}");
    assert!(
        out.status.success() && stdout.contains("CHILD-OK"),
        "{test}: child ended with {:?}\nstdout: {stdout}\nstderr: {stderr}",
        out.status
    );
    stderr.into_owned()
}

fn child_done() {
    println!("CHILD-OK");
}

const LIMIT: Duration = Duration::from_secs(60);

/// Its destructor panics.
struct Bomb(&'static str);
impl Drop for Bomb {
    fn drop(&mut self) {
        panic!("{}", self.0);
    }
}

/// Wait (generously) until `cond` holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(30), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Item 3: the value of a fiber whose handle was dropped is dropped on the
/// fiber's stack; a panicking destructor there used to abort the process.
#[test]
fn panicking_drop_of_a_detached_fibers_result_is_contained() {
    let me = "panicking_drop_of_a_detached_fibers_result_is_contained";
    if is_child(me) {
        let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
        let go = Arc::new(AtomicBool::new(false));
        let g = go.clone();
        let h = rt.spawn(move || {
            while !g.load(SeqCst) {
                fiber::yield_now();
            }
            Bomb("result destructor panics")
        });
        drop(h); // detached before it finishes
        go.store(true, SeqCst);
        wait_for("the detached fiber", || rt.stats().completed >= 1);
        // One worker: this fiber runs after the detached one's drop.
        assert_eq!(rt.block_on(|| 6 * 7), 42, "the runtime keeps running");
        assert_eq!(rt.spawn(|| 1).join().unwrap(), 1);
        drop(rt);
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    let stderr = expect_child_ok(me, LIMIT, |_| {});
    assert!(stderr.contains("result destructor panics") && stderr.contains("contained"), "{stderr}");
}

/// Item 3: the same for a detached fiber's panic payload.
#[test]
fn panicking_drop_of_a_detached_fibers_panic_payload_is_contained() {
    let me = "panicking_drop_of_a_detached_fibers_panic_payload_is_contained";
    if is_child(me) {
        let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
        let go = Arc::new(AtomicBool::new(false));
        let g = go.clone();
        let h = rt.spawn(move || {
            while !g.load(SeqCst) {
                fiber::yield_now();
            }
            std::panic::panic_any(Bomb("payload destructor panics"));
        });
        drop(h);
        go.store(true, SeqCst);
        wait_for("the detached fiber", || rt.stats().completed >= 1);
        assert_eq!(rt.block_on(|| 6 * 7), 42, "the runtime keeps running");
        drop(rt);
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    let stderr = expect_child_ok(me, LIMIT, |_| {});
    assert!(stderr.contains("payload destructor panics") && stderr.contains("contained"), "{stderr}");
}

/// Counts its drops.
struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// Item 4: the last `Arc<Runtime>` dropped inside one of its own fibers
/// used to panic (EDEADLK joining itself) and skip the drain.
#[test]
fn last_runtime_dropped_inside_its_own_fiber_shuts_down_completely() {
    let me = "last_runtime_dropped_inside_its_own_fiber_shuts_down_completely";
    if is_child(me) {
        // Warm up first: hwloc loads its plugins' libraries on first use.
        drop(Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().unwrap());
        // Stack mappings of the process: slabs (guarded slab stacks, the
        // default) or one per stack (the fallback path).
        let mappings = || {
            let u = fiber::stack_usage();
            u.slabs + u.guarded_stacks
        };
        let before = mappings();
        let rt = Arc::new(Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().unwrap());
        let dropped = Arc::new(AtomicUsize::new(0));
        let never = Arc::new(sync::Event::new());
        let parked = Arc::new(AtomicUsize::new(0));
        for _ in 0..100 {
            let (c, never, parked) = (Counted(dropped.clone()), never.clone(), parked.clone());
            drop(rt.spawn(move || {
                let _c = c;
                parked.fetch_add(1, SeqCst);
                never.wait();
            }));
        }
        wait_for("100 parked fibers", || {
            parked.load(SeqCst) == 100 && rt.stats().workers.iter().map(|w| w.parks).sum::<u64>() >= 100
        });
        let with_fibers = mappings();
        assert!(with_fibers > before, "100 started fibers have stacks mapped: {before} -> {with_fibers}");
        let go = Arc::new(AtomicBool::new(false));
        let (g, last) = (go.clone(), rt.clone());
        let h = rt.spawn(move || {
            while !g.load(SeqCst) {
                fiber::yield_now();
            }
            drop(last); // the last Arc<Runtime>
            "returned after the drop"
        });
        drop(rt);
        go.store(true, SeqCst);
        assert_eq!(h.join().unwrap(), "returned after the drop");
        wait_for("the destructors of the 100 parked fibers", || dropped.load(SeqCst) == 100);
        let t0 = Instant::now();
        while mappings() > before && t0.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(10));
        }
        if mappings() > before {
            let _ = std::fs::copy("/proc/self/maps", "/tmp/reliab/maps-after.txt");
            panic!("stacks stay mapped: {before} before, {with_fibers} with fibers, {} after", mappings());
        }
        println!("mappings: {before} before, {with_fibers} with 100 parked fibers, {} after", mappings());
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    expect_child_ok(me, LIMIT, |_| {});
}

fn set_affinity(pid: libc::pid_t, cpus: &[usize]) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is an empty set; CPU_SET writes inside it;
    // sched_setaffinity reads exactly size_of::<cpu_set_t>() bytes.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for &c in cpus {
            libc::CPU_SET(c, &mut set);
        }
        if libc::sched_setaffinity(pid, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Item 8: under `taskset -c <one cpu>` the default runtime used to start a
/// worker per machine PU and run one on a CPU outside the affinity.
#[test]
fn workers_follow_the_process_cpu_affinity() {
    let me = "workers_follow_the_process_cpu_affinity";
    if is_child(me) {
        let want: usize = std::env::var("NUMAFIBER_ONLY_CPU").unwrap().parse().unwrap();
        assert_eq!(numafiber::topology::allowed_cpus(), vec![want]);
        assert_eq!(numafiber::topology::real_cpus(), vec![want]);
        let t = Topology::detect().unwrap();
        assert_eq!(t.num_pus(), 1, "{t:?}");
        assert!(t.description().contains("restricted to the 1 of"), "{}", t.description());
        let rt = Runtime::new().unwrap();
        assert_eq!(rt.workers(), 1, "one worker per allowed PU");
        let cpus = rt.block_on(|| {
            let hs: Vec<_> = (0..20).map(|_| fiber::spawn(numafiber::topology::current_cpu)).collect();
            fiber::when_all(hs)
        });
        assert!(cpus.iter().all(|&c| c == Some(want)), "fibers ran on {cpus:?}, allowed only {want}");
        let s = rt.stats();
        assert_eq!((s.workers[0].cpu, s.workers[0].pinned), (want, true));
        // Strict pinning of more workers than allowed PUs: a typed error.
        let e = Runtime::builder().workers(2).strict_pinning(true).build().unwrap_err();
        assert_eq!(e.kind(), &BuildErrorKind::TooManyWorkers { workers: 2, pus: 1 });
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    let cpus = numafiber::topology::allowed_cpus();
    if cpus.len() < 2 {
        println!("skipped: needs 2 allowed CPUs, have {cpus:?}");
        return;
    }
    let only = *cpus.last().unwrap();
    expect_child_ok(me, LIMIT, |cmd| {
        cmd.env("NUMAFIBER_ONLY_CPU", only.to_string());
        // What `taskset -c <only>` does before exec.
        // SAFETY: the closure only calls sched_setaffinity (async-signal-safe).
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || set_affinity(0, &[only]));
        }
    });
}

/// Item 8: a topology detected before the affinity narrowed, used with
/// strict pinning, plans a worker outside it: a typed error.
#[test]
fn strict_pinning_outside_the_cpu_affinity_is_a_typed_error() {
    let me = "strict_pinning_outside_the_cpu_affinity_is_a_typed_error";
    if is_child(me) {
        let wide = Topology::detect().unwrap();
        let cpus: Vec<usize> = wide.nodes().iter().flat_map(|n| n.cpus.clone()).collect();
        // SAFETY: getpid has no preconditions.
        set_affinity(unsafe { libc::getpid() }, &cpus[..1]).unwrap();
        assert_eq!(numafiber::topology::allowed_cpus(), vec![cpus[0]]);
        // `detect` caches its result per affinity mask: the narrowed
        // affinity gets a narrowed topology, the wide one the wide again.
        let narrow = Topology::detect().unwrap();
        assert_eq!(narrow.num_pus(), 1, "{narrow:?}");
        assert!(narrow.description().contains("restricted to the 1 of"), "{}", narrow.description());
        // SAFETY: getpid has no preconditions.
        set_affinity(unsafe { libc::getpid() }, &cpus).unwrap();
        assert_eq!(Topology::detect().unwrap(), wide);
        // SAFETY: as above.
        set_affinity(unsafe { libc::getpid() }, &cpus[..1]).unwrap();
        assert_eq!(Topology::detect().unwrap(), narrow);
        let e = Runtime::builder().topology(wide.clone()).workers(2).strict_pinning(true).build().unwrap_err();
        assert!(
            matches!(e.kind(), BuildErrorKind::CpuNotAllowed { worker: 1, cpu, allowed } if *cpu == cpus[1] && allowed == &vec![cpus[0]]),
            "{e:?}"
        );
        assert!(e.to_string().contains("outside the CPU affinity"), "{e}");
        // Without strict pinning it is best effort and runs.
        let rt = Runtime::builder().topology(wide).workers(2).build().unwrap();
        assert_eq!(rt.block_on(|| 3), 3);
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    if numafiber::topology::allowed_cpus().len() < 2 {
        println!("skipped: needs 2 allowed CPUs");
        return;
    }
    expect_child_ok(me, LIMIT, |_| {});
}

/// A topology that is not this machine is mapped onto the CPUs the process
/// may use; under an affinity of one CPU strict pinning used to pin both
/// workers of a 2-PU topology to that CPU and report success.
#[test]
fn strict_pinning_that_cannot_give_each_worker_its_own_pu_is_a_typed_error() {
    let me = "strict_pinning_that_cannot_give_each_worker_its_own_pu_is_a_typed_error";
    if is_child(me) {
        let only: usize = std::env::var("NUMAFIBER_ONLY_CPU").unwrap().parse().unwrap();
        assert_eq!(numafiber::topology::allowed_cpus(), vec![only]);
        let e = Runtime::builder().topology(Topology::uniform(1, 2)).strict_pinning(true).build().unwrap_err();
        assert!(
            matches!(e.kind(), BuildErrorKind::SharedPu { worker: 1, shares_with: 0, cpu, cpus } if *cpu == only && cpus == &vec![only]),
            "{e:?}"
        );
        assert!(e.to_string().contains("could not give each worker its own processing unit"), "{e}");
        assert!(e.to_string().contains("strict_pinning(false)"), "{e}");
        // One worker has a CPU of its own: strict pinning holds.
        let rt = Runtime::builder().topology(Topology::uniform(1, 2)).workers(1).strict_pinning(true).build().unwrap();
        assert_eq!(rt.stats().workers[0].cpu, only);
        drop(rt);
        // Without strict pinning both workers share the CPU and run.
        let rt = Runtime::builder().topology(Topology::uniform(1, 2)).build().unwrap();
        assert_eq!(rt.block_on(|| 4), 4);
        assert!(rt.stats().workers.iter().all(|w| w.cpu == only));
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    let cpus = numafiber::topology::allowed_cpus();
    let only = cpus[0];
    expect_child_ok(me, LIMIT, |cmd| {
        cmd.env("NUMAFIBER_ONLY_CPU", only.to_string());
        // SAFETY: the closure only calls sched_setaffinity (async-signal-safe).
        unsafe {
            std::os::unix::process::CommandExt::pre_exec(cmd, move || set_affinity(0, &[only]));
        }
    });
}

/// Item 11: a count-only synthetic string used to slip past the size guard
/// and run for ever inside hwloc.
#[test]
fn count_only_synthetic_string_is_refused_before_hwloc() {
    let me = "count_only_synthetic_string_is_refused_before_hwloc";
    if is_child(me) {
        for desc in ["1000 1000 1000", "pu:16384", "pack:64 core:64 pu:64", "2 2 2 pu:100000"] {
            let e = Topology::synthetic(desc).unwrap_err();
            assert_eq!(e.kind(), TopologyErrorKind::TooLarge, "{desc}: {e}");
        }
        // The largest accepted shapes still build.
        for (desc, pus) in [("numa:256 pu:16", 4096), ("pack:16 core:256 pu:1", 4096), ("2 2 2", 8)] {
            assert_eq!(Topology::synthetic(desc).unwrap().num_pus(), pus, "{desc}");
        }
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    expect_child_ok(me, LIMIT, |_| {});
}

/// Item 13: `add_permits(usize::MAX)` used to loop usize::MAX times.
#[test]
fn semaphore_add_permits_max_returns_and_wakes_waiters() {
    let me = "semaphore_add_permits_max_returns_and_wakes_waiters";
    if is_child(me) {
        let s = sync::Semaphore::new(0);
        s.add_permits(usize::MAX);
        assert_eq!(s.available_permits(), usize::MAX);
        let p = catch_unwind(AssertUnwindSafe(|| s.add_permits(1))).unwrap_err();
        assert!(p.downcast_ref::<String>().unwrap().contains("would exceed usize::MAX"));
        assert_eq!(s.available_permits(), usize::MAX, "unchanged by the refused call");
        // With a waiter: it gets one permit, the rest stay free.
        let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
        let sem = Arc::new(sync::Semaphore::new(0));
        let s2 = sem.clone();
        let h = rt.spawn(move || s2.acquire().forget());
        wait_for("the waiter to park", || rt.stats().workers[0].parks >= 1);
        sem.add_permits(usize::MAX);
        h.join().unwrap();
        assert_eq!(sem.available_permits(), usize::MAX - 1);
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    expect_child_ok(me, LIMIT, |_| {});
}

/// Item 14: `WaitGroup::add` used to wrap the count to 0, releasing waiters.
#[test]
fn waitgroup_add_overflow_panics_and_keeps_the_count() {
    let wg = sync::WaitGroup::new();
    wg.add(1);
    let p = catch_unwind(AssertUnwindSafe(|| wg.add(usize::MAX))).unwrap_err();
    assert!(p.downcast_ref::<String>().unwrap().contains("would overflow usize"));
    assert_eq!(wg.count(), 1);
    wg.done();
    wg.wait();
}

/// Spawns from its destructor and records what the spawn said.
struct SpawnOnDrop(Arc<std::sync::Mutex<Option<String>>>);
impl Drop for SpawnOnDrop {
    fn drop(&mut self) {
        let r = fiber::Builder::new().spawn(|| ());
        let mut seen = match r {
            Ok(_) => "spawned".to_string(),
            Err(e) => format!("{:?}", e.kind()),
        };
        // `fiber::spawn` has no `Result`: a fiber cancelled at once.
        let ran = Arc::new(AtomicBool::new(false));
        let r = ran.clone();
        let h = fiber::spawn(move || r.store(true, SeqCst));
        if h.join().is_ok_and(|()| true) || ran.load(SeqCst) {
            seen.push_str(", fiber::spawn ran");
        }
        *self.0.lock().unwrap() = Some(seen);
    }
}

/// Item 15: a spawn from a destructor run by the shutdown drain used to say
/// `NoRuntime` ("called outside a numafiber runtime").
#[test]
fn spawn_from_a_destructor_during_shutdown_says_shutting_down() {
    if in_some_child() {
        return;
    }
    let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(None));
    let never = Arc::new(sync::Event::new());
    let (d, n) = (SpawnOnDrop(seen.clone()), never.clone());
    let h = rt.spawn(move || {
        let _d = d;
        n.wait();
    });
    wait_for("the fiber to park", || rt.stats().workers[0].parks >= 1);
    rt.shutdown();
    assert!(h.join().unwrap_err().is_cancelled());
    assert_eq!(seen.lock().unwrap().as_deref(), Some("ShuttingDown"));
}

/// What a fiber that keeps spawning while its runtime shuts down saw.
#[derive(Debug, PartialEq, Eq)]
enum SpawnSaw {
    /// `fiber::spawn` and its kin gave fibers cancelled at once (closures
    /// dropped unrun, joins cancelled), `try_spawn` its typed error.
    CancelledFibers,
    /// A spawn panicked (with this message).
    Panic(String),
    /// Something else went wrong.
    Wrong(String),
}

/// A spawn without a `Result` (`fiber::spawn` and its kin).
type SpawnFn<'a> = &'a dyn Fn(Box<dyn FnOnce() + Send>) -> fiber::JoinHandle<()>;

/// The spinner of `spawn_during_shutdown_gives_cancelled_fibers`: spawn
/// in a loop, never giving control back, until a spawn finds the runtime
/// shutting down; then check every spawn without a `Result` there.
fn spawn_until_shutdown(spinning: &AtomicBool) -> SpawnSaw {
    spinning.store(true, SeqCst);
    let t0 = Instant::now();
    // A spawn of a closure that records whether it ran and when it is
    // dropped; `Some` once the new fiber is finished without having run.
    let probe = |spawn: SpawnFn<'_>| -> Result<Option<fiber::JoinHandle<()>>, String> {
        let ran = Arc::new(AtomicBool::new(false));
        let drops = Arc::new(AtomicUsize::new(0));
        let (r, d) = (ran.clone(), DropCount(drops.clone()));
        let h = catch_unwind(AssertUnwindSafe(|| {
            spawn(Box::new(move || {
                let _d = d;
                r.store(true, SeqCst);
            }))
        }))
        .map_err(|p| {
            p.downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        })?;
        if !h.is_finished() || ran.load(SeqCst) {
            return Ok(None); // a fiber like any other (it may have run already)
        }
        if drops.load(SeqCst) != 1 {
            return Err(format!("the unrun closure was dropped {} times", drops.load(SeqCst)));
        }
        Ok(Some(h))
    };
    while t0.elapsed() < Duration::from_secs(60) {
        let h = match probe(&|f| fiber::spawn(f)) {
            Err(m) => return SpawnSaw::Panic(m),
            Ok(None) => continue,
            Ok(Some(h)) => h,
        };
        // The runtime shuts down (and stays so): every spawn without a
        // `Result` gives a cancelled fiber, `try_spawn` the typed error.
        let handle = numafiber::runtime::Handle::current();
        let kin: [SpawnFn<'_>; 3] = [&|f| fiber::spawn_pinned(f), &|f| handle.spawn(f), &|f| fiber::spawn(f)];
        let mut hs = vec![h];
        for spawn in kin {
            match probe(spawn) {
                Err(m) => return SpawnSaw::Panic(m),
                Ok(None) => return SpawnSaw::Wrong("a spawn during shutdown made a live fiber".into()),
                Ok(Some(h)) => hs.push(h),
            }
        }
        if hs.into_iter().any(|h| !h.join().is_err_and(|e| e.is_cancelled())) {
            return SpawnSaw::Wrong("a join did not report the fiber cancelled".into());
        }
        return match handle.try_spawn(|| ()) {
            Err(e) if matches!(e.kind(), SpawnErrorKind::ShuttingDown) => SpawnSaw::CancelledFibers,
            Err(e) => SpawnSaw::Wrong(format!("try_spawn: {e}")),
            Ok(_) => SpawnSaw::Wrong("try_spawn accepted a fiber during shutdown".into()),
        };
    }
    SpawnSaw::Wrong("the runtime never shut down".into())
}

/// Counts its drops.
struct DropCount(Arc<AtomicUsize>);
impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// `fiber::spawn` in a fiber still finishing its slice after `block_on`
/// returned and the runtime was dropped used to panic ("the runtime is
/// shutting down and accepts no new fibers"). The fiber here spawns in a
/// loop without giving control back, so every round reaches the shutdown
/// while it spawns: each spawn without a `Result` (`fiber::spawn`,
/// `spawn_pinned`, `Handle::spawn`) then gives a fiber cancelled at once,
/// its closure dropped unrun, and `try_spawn` the typed error.
#[test]
fn spawn_during_shutdown_gives_cancelled_fibers() {
    if in_some_child() {
        return;
    }
    const ROUNDS: usize = 20;
    for round in 0..ROUNDS {
        let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().unwrap();
        let spinning = Arc::new(AtomicBool::new(false));
        let (tx, rx) = std::sync::mpsc::channel();
        let s = spinning.clone();
        rt.block_on(move || {
            let s2 = s.clone();
            // On the other worker, detached: it outlives `block_on`, which
            // returns once it spins (this fiber spins meanwhile, keeping
            // its own worker, so nothing here waits for a queue).
            let other = 1 - fiber::current().unwrap().worker;
            let spinner = fiber::Builder::new().worker(other).spawn(move || {
                let _ = tx.send(spawn_until_shutdown(&s2));
            });
            drop(spinner.unwrap());
            while !s.load(SeqCst) {
                std::hint::spin_loop();
            }
        });
        drop(rt); // the spinner is still in its slice: it sees the shutdown
        let saw = rx.recv_timeout(Duration::from_secs(90)).expect("the spinner reports");
        assert_eq!(saw, SpawnSaw::CancelledFibers, "round {round}");
    }
}

/// Item 16: `name("a\0b")` used to panic inside std's thread builder.
#[test]
fn nul_in_the_thread_name_is_a_build_error() {
    if in_some_child() {
        return;
    }
    let r = catch_unwind(|| Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).name("a\0b").build());
    let e = r.expect("no panic").unwrap_err();
    assert_eq!(e.kind(), &BuildErrorKind::InvalidName("a\0b".into()));
}

/// Item 17: `from_xml_file` on a FIFO used to block for ever in open/read.
#[test]
fn xml_topology_from_a_fifo_is_refused() {
    let me = "xml_topology_from_a_fifo_is_refused";
    if is_child(me) {
        let dir = std::env::temp_dir().join(format!("numafiber-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("topo.xml");
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "{}", std::io::Error::last_os_error());
        let e = Topology::from_xml_file(&fifo).unwrap_err();
        let _ = std::fs::remove_dir_all(&dir);
        assert_eq!(e.kind(), TopologyErrorKind::XmlFileUnreadable);
        assert!(e.to_string().contains("not a regular file"), "{e}");
        let e = Topology::parse("xml:/dev/zero").unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    expect_child_ok(me, LIMIT, |_| {});
}

/// Docs item: a runtime used in a `fork()`ed child used to hang in
/// `block_on` and panic on drop; now spawn is a typed error, block_on
/// panics at once, drop leaks quietly, and the parent's runtime goes on.
#[test]
fn forked_child_refuses_the_parents_runtime() {
    let me = "forked_child_refuses_the_parents_runtime";
    if is_child(me) {
        let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().unwrap();
        assert_eq!(rt.block_on(|| 1), 1);
        // SAFETY: the child only uses the allocator (glibc resets its locks
        // in the child), the runtime's refusal paths and _exit.
        let pid = unsafe { libc::fork() };
        assert!(pid >= 0, "fork failed");
        if pid == 0 {
            let spawn_ok = matches!(
                fiber::Builder::new().spawn_on(&rt, || ()).map_err(|e| e.kind().clone()),
                Err(SpawnErrorKind::ForkedChild)
            );
            let blocked = catch_unwind(AssertUnwindSafe(|| rt.block_on(|| 2)));
            let block_ok = blocked.is_err_and(|p| p.downcast_ref::<String>().is_some_and(|m| m.contains("fork()")));
            drop(rt);
            // SAFETY: ends the child without running the parent's atexit handlers.
            unsafe { libc::_exit(if spawn_ok && block_ok { 0 } else { 1 }) };
        }
        let t0 = Instant::now();
        let mut status = 0;
        loop {
            // SAFETY: waits for our own child.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            if r == pid {
                break;
            }
            if t0.elapsed() > Duration::from_secs(30) {
                // SAFETY: kills our own child.
                unsafe { libc::kill(pid, libc::SIGKILL) };
                panic!("forked child hung");
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0, "forked child status {status:#x}");
        assert_eq!(rt.block_on(|| 3), 3, "the parent's runtime is unaffected");
        drop(rt);
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    expect_child_ok(me, LIMIT, |_| {});
}

/// Sleeps in its destructor.
struct SleepOnDrop(Duration);
impl Drop for SleepOnDrop {
    fn drop(&mut self) {
        fiber::sleep(self.0);
    }
}

/// Docs item: a `fiber::sleep` in a destructor during shutdown used to
/// delay the shutdown by the whole sleep (here 10 minutes: the child would
/// be killed by the timeout).
#[test]
fn sleep_in_a_destructor_does_not_delay_shutdown() {
    let me = "sleep_in_a_destructor_does_not_delay_shutdown";
    if is_child(me) {
        let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
        let never = Arc::new(sync::Event::new());
        for _ in 0..3 {
            let (d, n) = (SleepOnDrop(Duration::from_secs(600)), never.clone());
            drop(rt.spawn(move || {
                let _d = d;
                n.wait();
            }));
        }
        // An unstarted fiber's closure is dropped by the drain too.
        let d = SleepOnDrop(Duration::from_secs(600));
        wait_for("the fibers to park", || rt.stats().workers[0].parks >= 3);
        drop(rt.spawn(move || {
            let _d = d;
            fiber::sleep(Duration::from_secs(600));
        }));
        drop(rt);
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    expect_child_ok(me, LIMIT, |_| {});
}

/// Docs item: a closure larger than the stack used to overflow it when the
/// fiber started (SIGSEGV / overflow abort); now a typed error, and the
/// largest accepted closure runs on the smallest stack.
#[test]
fn closure_larger_than_the_stack_is_a_typed_error() {
    let me = "closure_larger_than_the_stack_is_a_typed_error";
    if is_child(me) {
        let rt = rt1();
        let big = [3u8; 128 << 10];
        let e = fiber::Builder::new().stack_size(64 << 10).spawn_on(&rt, move || big[5]).unwrap_err();
        assert!(matches!(e.kind(), SpawnErrorKind::ClosureTooLarge { stack_size: 65536, limit: 16384, .. }), "{e:?}");
        // Exactly at the limit on the minimum stack: runs.
        let min = fiber::MIN_STACK_SIZE;
        let edge = [9u8; fiber::MIN_STACK_SIZE / 4 - 1];
        let h = fiber::Builder::new().stack_size(min).spawn_on(&rt, move || edge[edge.len() - 1]).unwrap();
        assert_eq!(h.join().unwrap(), 9);
        child_done();
        return;
    }
    if in_some_child() {
        return;
    }
    expect_child_ok(me, LIMIT, |_| {});
}
