//! The yield fast path (`worker::WorkerLocal::next_after_yield`): a worker
//! whose only runnable fibers are yielders switches between them without a
//! pass through its loop. What the loop did between two fibers must still
//! happen: statistics, shutdown, reactor readiness, fibers arriving in the
//! inbox. (Timers and fairness against a woken fiber:
//! `stress::no_starvation_by_yield_loop`.)

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::{fiber, Policy, Runtime, Topology};

fn one_worker() -> Runtime {
    Runtime::builder().workers(1).topology(Topology::uniform(1, 2)).policy(Policy::RandomSteal).build().unwrap()
}

/// Two fibers ping-pong through `yield_now` on one worker: every resume is
/// counted (each fiber is resumed once to start and once per yield), and
/// nothing parks.
#[test]
fn stats_count_every_resume_of_a_yield_ping_pong() {
    const N: u64 = 10_000;
    let rt = one_worker();
    let before = rt.stats();
    let hs: Vec<_> = (0..2)
        .map(|_| {
            rt.spawn(move || {
                for _ in 0..N {
                    fiber::yield_now();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    let resumes = |s: &numafiber::Stats| s.workers.iter().map(|w| w.resumes).sum::<u64>();
    let parks = |s: &numafiber::Stats| s.workers.iter().map(|w| w.parks).sum::<u64>();
    // The worker counts a fiber's last resume after the fiber has returned,
    // that is after the join above may already have seen its result: wait
    // for the count to settle (it must then be exact, neither short nor over).
    let t0 = Instant::now();
    let mut after = rt.stats();
    while resumes(&after) - resumes(&before) < 2 * (N + 1) && t0.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(1));
        after = rt.stats();
    }
    assert_eq!(resumes(&after) - resumes(&before), 2 * (N + 1), "{after:?}");
    assert_eq!(parks(&after) - parks(&before), 0, "{after:?}");
    assert_eq!(after.spawned - before.spawned, 2);
    assert_eq!(after.completed - before.completed, 2);
}

/// Fibers that do nothing but yield (no timer armed, nothing else queued)
/// do not keep a worker from seeing the shutdown: it returns, and every
/// fiber is destroyed once.
#[test]
fn shutdown_stops_a_worker_that_only_switches_yielders() {
    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
        }
    }
    let rt = one_worker();
    let drops = Arc::new(AtomicUsize::new(0));
    let started = Arc::new(AtomicUsize::new(0));
    for _ in 0..3 {
        let d = Counted(drops.clone());
        let s = started.clone();
        drop(rt.spawn(move || {
            let _d = d;
            s.fetch_add(1, SeqCst);
            loop {
                fiber::yield_now();
            }
        }));
    }
    let t0 = Instant::now();
    while started.load(SeqCst) < 3 {
        assert!(t0.elapsed() < Duration::from_secs(60), "the yielders did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    rt.shutdown();
    assert_eq!(drops.load(SeqCst), 3, "every yielder destroyed once");
}

/// A fiber waits on a socket while two others only yield, on one worker
/// that therefore never goes idle: the busy poll of the reactor must still
/// run between yields, or the reader never wakes.
#[test]
fn a_socket_becomes_ready_while_fibers_only_yield() {
    let rt = one_worker();
    let listener = rt.block_on(|| numafiber::net::TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    let got = Arc::new(AtomicBool::new(false));
    let reader = {
        let got = got.clone();
        rt.spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = [0u8; 5];
            s.read_exact(&mut buf).unwrap();
            got.store(true, SeqCst);
            buf
        })
    };
    let yielders: Vec<_> = (0..2)
        .map(|_| {
            let got = got.clone();
            rt.spawn(move || {
                // Bounded so that a failure shows as an assertion, not a hang.
                let t0 = Instant::now();
                while !got.load(SeqCst) && t0.elapsed() < Duration::from_secs(60) {
                    fiber::yield_now();
                }
                got.load(SeqCst)
            })
        })
        .collect();
    // Let the yielders get going first, then connect and write.
    std::thread::sleep(Duration::from_millis(20));
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"hello").unwrap();
    assert_eq!(&reader.join().unwrap(), b"hello");
    for y in yielders {
        assert!(y.join().unwrap(), "the reader woke while the worker only switched yielders");
    }
}

/// Fibers placed on the worker from another thread (its inbox) run while
/// two fibers keep yielding to each other.
#[test]
fn inbox_fibers_run_between_yielders() {
    let rt = one_worker();
    let stop = Arc::new(AtomicBool::new(false));
    let yielders: Vec<_> = (0..2)
        .map(|_| {
            let stop = stop.clone();
            rt.spawn(move || {
                let t0 = Instant::now();
                while !stop.load(SeqCst) && t0.elapsed() < Duration::from_secs(60) {
                    fiber::yield_now();
                }
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(10));
    let ran = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..100)
        .map(|_| {
            let ran = ran.clone();
            rt.spawn(move || ran.fetch_add(1, SeqCst))
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    assert_eq!(ran.load(SeqCst), 100);
    stop.store(true, SeqCst);
    for y in yielders {
        y.join().unwrap();
    }
}
