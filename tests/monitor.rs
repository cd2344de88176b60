//! The stall monitor: what it reports and what it only counts. A slice
//! past the threshold is a stall only when something waited on it (fibers
//! queued behind it that an idle worker could not take, an overdue timer,
//! unpolled sockets); compute that nothing waited on is said once, at
//! shutdown. A hook that panics does not end the monitor.

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use common::within;
use numafiber::runtime::{StallCause, StallReport};
use numafiber::{fiber, Runtime, Topology};

type Reports = Arc<StdMutex<Vec<StallReport>>>;

/// A runtime of `workers` workers on one node whose stall hook records
/// every report; `threshold` `None`: the default threshold.
fn recording_rt(workers: usize, threshold: Option<Duration>) -> (Runtime, Reports) {
    let reports: Reports = Arc::new(StdMutex::new(Vec::new()));
    let r = reports.clone();
    let mut b = Runtime::builder().workers(workers).topology(Topology::uniform(1, workers));
    if let Some(t) = threshold {
        b = b.stall_threshold(Some(t));
    }
    let rt = b.on_stall(move |rep| r.lock().unwrap().push(rep.clone())).build().unwrap();
    (rt, reports)
}

/// A fork-join tree of 8 leaves and 6 spawned fibers, each leaf computing
/// 100 ms without yielding: long slices that nothing waits on.
fn compute() -> u32 {
    fn tree(depth: u32) -> u32 {
        if depth == 0 {
            spin(Duration::from_millis(100));
            return 1;
        }
        let (a, b) = fiber::join(|| tree(depth - 1), || tree(depth - 1));
        a + b
    }
    let spawned: Vec<_> = (0..6).map(|_| fiber::spawn(|| tree(0))).collect();
    tree(3) + spawned.into_iter().map(|h| h.join().unwrap()).sum::<u32>()
}

const CHILD_ENV: &str = "NUMAFIBER_MONITOR_TEST_CHILD";

/// With the default hook (stderr), compute that nothing waits on leaves
/// stderr clean, summary included; the count is in `Stats`. Runs the
/// compute in a child process and reads its stderr.
#[test]
fn the_default_hook_keeps_stderr_clean_on_compute() {
    if std::env::var_os(CHILD_ENV).is_some() {
        let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().unwrap();
        assert_eq!(rt.block_on(compute), 14);
        let deadline = Instant::now() + Duration::from_secs(60);
        while rt.stats().long_slices == 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        println!("LONG_SLICES {}", rt.stats().long_slices);
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_default_hook_keeps_stderr_clean_on_compute", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the child failed: {stdout}\n{stderr}");
    let noise: Vec<&str> = stderr.lines().filter(|l| l.contains("numafiber")).collect();
    assert!(noise.is_empty(), "the default hook printed on compute: {noise:#?}");
    let counted = stdout.lines().find_map(|l| l.split("LONG_SLICES ").nth(1)).expect("the child's count");
    assert_ne!(counted.trim(), "0", "Stats::long_slices did not count the long slices");
}

/// Spin (never yield) for `d`.
fn spin(d: Duration) {
    let t = Instant::now();
    while t.elapsed() < d {
        std::hint::spin_loop();
    }
}

/// Wait (on this thread) until `cond` holds; panics after 20 s.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t = Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(20), "{what}: not within 20 s");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// From outside the runtime: a hog named `name` pinned to worker 1 that
/// spins until `release` (or 20 s), and, once it runs, a fiber pinned to
/// worker 1 behind it. Returns both handles.
fn hog_with_pinned_fiber_behind(
    rt: &Runtime,
    name: &str,
    release: &Arc<AtomicBool>,
) -> (fiber::JoinHandle<()>, fiber::JoinHandle<()>) {
    let started = Arc::new(AtomicBool::new(false));
    let (s, r) = (started.clone(), release.clone());
    let hog = fiber::Builder::new()
        .name(name)
        .worker(1)
        .spawn_on(rt, move || {
            s.store(true, SeqCst);
            let t = Instant::now();
            while !r.load(SeqCst) && t.elapsed() < Duration::from_secs(20) {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    wait_for("the hog starts", || started.load(SeqCst));
    let behind = fiber::Builder::new().name("behind").worker(1).spawn_on(rt, || ()).unwrap();
    (hog, behind)
}

/// Compute that nothing waits on (fork-join leaves and spawned fibers of
/// 100 ms each on 2 workers, twice the default threshold) is no stall: with
/// the default monitor the hook hears nothing while it runs, and once at
/// shutdown, the long-slice count.
#[test]
fn compute_nobody_waits_on_is_said_once_at_shutdown() {
    let (rt, reports) = recording_rt(2, None);
    let leaves = within(120, "the compute", {
        let h = rt.handle();
        move || h.spawn(compute).join().unwrap()
    });
    assert_eq!(leaves, 14);
    let during = reports.lock().unwrap().clone();
    assert!(during.is_empty(), "compute reported as stalls: {during:#?}");
    // The monitor counts a slice when it sees it end, at its next sample.
    wait_for("a long slice counted in Stats", || rt.stats().long_slices >= 1);
    let counted = rt.stats().long_slices;
    drop(rt);
    let reports = reports.lock().unwrap();
    assert_eq!(reports.len(), 1, "not said once: {reports:#?}");
    let r = &reports[0];
    match r.cause() {
        StallCause::LongSlices { count } => {
            assert!((1..=14).contains(&count), "{r:?}");
            assert!(count >= counted, "the summary's count {count} is below Stats::long_slices {counted}");
        }
        c => panic!("not the long-slice summary: {c:?}"),
    }
    assert!(r.running_for() >= Duration::from_millis(50), "{r:?}");
    let text = r.to_string();
    assert!(text.contains("no fiber waited on them"), "{text}");
}

/// With the default monitor, a fiber pinned to a worker that a hog holds,
/// while the other worker idles, is starved: the hog is reported while it
/// runs, once, with the cause.
#[test]
fn a_fiber_starved_behind_a_hog_is_reported() {
    let (rt, reports) = recording_rt(2, None);
    let release = Arc::new(AtomicBool::new(false));
    let (hog, behind) = hog_with_pinned_fiber_behind(&rt, "hog", &release);
    let hog_id = hog.id();
    wait_for("the stall report", || !reports.lock().unwrap().is_empty());
    // A few more samples: still one report for the one incident.
    std::thread::sleep(Duration::from_millis(150));
    release.store(true, SeqCst);
    hog.join().unwrap();
    behind.join().unwrap();
    let got = reports.lock().unwrap().clone();
    assert_eq!(got.len(), 1, "{got:#?}");
    let r = &got[0];
    assert_eq!(r.fiber_id(), Some(hog_id));
    assert_eq!(r.name(), Some("hog"));
    assert_eq!(r.worker(), 1);
    assert!(matches!(r.cause(), StallCause::Starved { fibers } if fibers >= 1), "{r:?}");
    assert!(r.cause().is_stall());
    let text = r.to_string();
    assert!(
        text.starts_with("numafiber: stall: ") && text.contains("\"hog\"") && text.contains("queued on that worker"),
        "{text}"
    );
}

/// On one worker a sleeping fiber's timer behind a hog is overdue: a
/// missed deadline is a stall.
#[test]
fn an_overdue_timer_behind_a_hog_is_reported() {
    let (rt, reports) = recording_rt(1, Some(Duration::from_millis(20)));
    let got = within(60, "the hog", move || {
        rt.block_on(|| {
            let sleeper = fiber::spawn(|| fiber::sleep(Duration::from_millis(5)));
            fiber::yield_now(); // the sleeper parks on its timer
            spin(Duration::from_millis(300));
            sleeper.join().unwrap();
        });
        drop(rt);
        reports.lock().unwrap().clone()
    });
    let stalls: Vec<_> = got.iter().filter(|r| r.cause().is_stall()).collect();
    assert_eq!(stalls.len(), 1, "{got:#?}");
    assert!(matches!(stalls[0].cause(), StallCause::TimerOverdue(d) if d >= Duration::from_millis(20)), "{got:#?}");
}

/// A hook that panics on its first call: the monitor carries on. A later
/// stall is still reported to the hook, and the fibers behind a hog
/// (queued on its worker's slots, which only the monitor moves) still run.
#[test]
fn a_panicking_hook_does_not_end_the_monitor() {
    let calls = Arc::new(AtomicUsize::new(0));
    let reports: Reports = Arc::new(StdMutex::new(Vec::new()));
    let (c, r) = (calls.clone(), reports.clone());
    let rt = Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .stall_threshold(Some(Duration::from_millis(20)))
        .on_stall(move |rep| {
            if c.fetch_add(1, SeqCst) == 0 {
                panic!("the stall hook fails");
            }
            r.lock().unwrap().push(rep.clone());
        })
        .build()
        .unwrap();
    // First stall: the hook panics.
    let release = Arc::new(AtomicBool::new(false));
    let (hog, behind) = hog_with_pinned_fiber_behind(&rt, "first", &release);
    wait_for("the first report", || calls.load(SeqCst) >= 1);
    release.store(true, SeqCst);
    hog.join().unwrap();
    behind.join().unwrap();
    // Second hog: a fiber pinned behind it (a stall to report); then, once
    // that report came (or 10 s passed), it queues a ping-pong pair on its
    // own worker and spins on: the pair must keep running on the other
    // worker.
    let done = Arc::new(AtomicBool::new(false));
    let pongs = Arc::new(AtomicUsize::new(0));
    let release = Arc::new(AtomicBool::new(false));
    let go = Arc::new(AtomicBool::new(false));
    let (d, p, rel, g) = (done.clone(), pongs.clone(), release.clone(), go.clone());
    let hog = fiber::Builder::new()
        .name("second")
        .worker(1)
        .spawn_on(&rt, move || {
            let behind = fiber::Builder::new().worker(1).spawn(|| ()).unwrap();
            let t = Instant::now();
            while !g.load(SeqCst) && t.elapsed() < Duration::from_secs(20) {
                std::hint::spin_loop();
            }
            let (ping_tx, ping_rx) = numafiber::sync::channel::bounded::<u32>(1);
            let (pong_tx, pong_rx) = numafiber::sync::channel::bounded::<u32>(1);
            let local = || fiber::Builder::new().local(true);
            let pinger = local()
                .spawn(move || {
                    while !d.load(SeqCst) {
                        ping_tx.send(1).unwrap();
                        pong_rx.recv().unwrap();
                        p.fetch_add(1, SeqCst);
                    }
                })
                .unwrap();
            let ponger = local()
                .spawn(move || {
                    while let Ok(v) = ping_rx.recv() {
                        if pong_tx.send(v).is_err() {
                            break;
                        }
                    }
                })
                .unwrap();
            let t = Instant::now();
            while !rel.load(SeqCst) && t.elapsed() < Duration::from_secs(20) {
                std::hint::spin_loop();
            }
            (pinger, ponger, behind)
        })
        .unwrap();
    let second = hog.id();
    let t = Instant::now();
    while reports.lock().unwrap().is_empty() && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    go.store(true, SeqCst);
    let t = Instant::now();
    while pongs.load(SeqCst) < 50 && t.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(5));
    }
    let p = pongs.load(SeqCst);
    release.store(true, SeqCst);
    let (pinger, ponger, behind) = hog.join().unwrap();
    done.store(true, SeqCst);
    pinger.join().unwrap();
    ponger.join().unwrap();
    behind.join().unwrap();
    let got = reports.lock().unwrap().clone();
    assert!(
        got.iter().any(|r| r.fiber_id() == Some(second) && r.cause().is_stall()),
        "the stall after the hook's panic was not reported: {got:#?}"
    );
    assert!(p >= 50, "the ping-pong pair behind the second hog made {p} round trips: no rescue");
}
