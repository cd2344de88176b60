//! Stress tests that count every fiber.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use numafiber::{fiber, Policy, Runtime, Topology};

fn rt(policy: Policy) -> Runtime {
    Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).policy(policy).build().expect("runtime")
}

/// One million fibers, each yielding a pseudo-random number of times, spread
/// over both workers; every result is seen exactly once.
#[test]
fn million_fibers_with_random_yields_each_result_once() {
    const N: usize = 1_000_000;
    let rt = Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .stack_size(numafiber::fiber::MIN_STACK_SIZE)
        .build()
        .unwrap();
    let seen: Arc<Vec<AtomicU64>> = Arc::new((0..N.div_ceil(64)).map(|_| AtomicU64::new(0)).collect());
    let s2 = seen.clone();
    let (sum, dupes) = rt.block_on(move || {
        // Spawn in batches so at most ~10k fibers (and stacks) are alive.
        let mut sum = 0u64;
        let mut dupes = 0usize;
        for batch in 0..(N / 10_000) {
            let hs: Vec<_> = (0..10_000)
                .map(|j| {
                    let i = batch * 10_000 + j;
                    fiber::spawn(move || {
                        let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 61;
                        while x > 0 {
                            fiber::yield_now();
                            x -= 1;
                        }
                        i
                    })
                })
                .collect();
            for h in hs {
                let i = fiber::await_fiber(h);
                let bit = 1u64 << (i % 64);
                if s2[i / 64].fetch_or(bit, Ordering::Relaxed) & bit != 0 {
                    dupes += 1;
                }
                sum += i as u64;
            }
        }
        (sum, dupes)
    });
    assert_eq!(dupes, 0);
    assert_eq!(sum, (N as u64 - 1) * N as u64 / 2);
    let missing: usize = seen.iter().map(|w| w.load(Ordering::Relaxed).count_zeros() as usize).sum();
    assert_eq!(missing, 0);
    let s = rt.stats();
    assert_eq!(s.spawned, N as u64 + 1);
    assert_eq!(s.completed, N as u64 + 1);
    assert!(s.workers.iter().all(|w| w.executed > 0), "both workers ran fibers: {:?}", s.workers);
}

/// Plain threads spawn into a runtime whose workers keep going idle and
/// parking; nothing is ever left unrun.
#[test]
fn stampede_spawns_from_threads_never_lost() {
    for policy in [Policy::RoundRobin, Policy::RandomSteal] {
        let rt = Arc::new(rt(policy));
        let ran = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let rt = rt.clone();
                let ran = ran.clone();
                std::thread::spawn(move || {
                    for i in 0..2_000 {
                        let ran = ran.clone();
                        let h = rt.spawn(move || {
                            ran.fetch_add(1, Ordering::SeqCst);
                            i
                        });
                        // Let the workers drain and park again now and then.
                        if (i + t) % 97 == 0 {
                            std::thread::sleep(Duration::from_micros(200));
                        }
                        assert_eq!(h.join().unwrap(), i);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(ran.load(Ordering::SeqCst), 8_000, "{policy:?}");
    }
}

/// Fire-and-forget spawns from threads with no join: the workers must
/// still wake for each of them.
#[test]
fn detached_spawns_from_threads_all_run() {
    let rt = rt(Policy::RandomSteal);
    let ran = Arc::new(AtomicUsize::new(0));
    for round in 0..50 {
        for _ in 0..100 {
            let ran = ran.clone();
            drop(rt.spawn(move || {
                ran.fetch_add(1, Ordering::SeqCst);
            }));
        }
        // wait for this round; the workers park in between rounds
        let want = (round + 1) * 100;
        let t0 = std::time::Instant::now();
        while ran.load(Ordering::SeqCst) < want {
            assert!(t0.elapsed() < Duration::from_secs(20), "lost wake-up: {} < {want}", ran.load(Ordering::SeqCst));
            std::thread::sleep(Duration::from_micros(100));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// A fiber that loops on yield_now cannot starve a sleeping fiber's wake-up
/// nor a fiber queued behind it on the same worker.
#[test]
fn no_starvation_by_yield_loop() {
    let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let st = stop.clone();
    let spinner = rt.spawn(move || {
        while !st.load(Ordering::SeqCst) {
            fiber::yield_now();
        }
    });
    let t0 = std::time::Instant::now();
    rt.block_on(|| fiber::sleep(Duration::from_millis(20)));
    assert!(t0.elapsed() < Duration::from_secs(5));
    assert_eq!(rt.block_on(|| 7), 7);
    stop.store(true, Ordering::SeqCst);
    spinner.join().unwrap();
}
