//! Basic behaviour of the runtime core.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::{fiber, Policy, Runtime, Topology};

fn rt(workers: usize, policy: Policy) -> Runtime {
    Runtime::builder().workers(workers).topology(Topology::uniform(2, 1)).policy(policy).build().expect("runtime")
}

#[test]
fn block_on_returns_value() {
    let rt = rt(2, Policy::RandomSteal);
    assert_eq!(rt.block_on(|| 40 + 2), 42);
}

#[test]
fn spawn_and_await_many() {
    for policy in [Policy::RoundRobin, Policy::RandomSteal] {
        let rt = rt(2, policy);
        let sum = rt.block_on(|| {
            let hs: Vec<_> = (0..1000u64).map(|i| fiber::spawn(move || i)).collect();
            hs.into_iter().map(fiber::await_fiber).sum::<u64>()
        });
        assert_eq!(sum, 999 * 1000 / 2, "{policy:?}");
        let s = rt.stats();
        assert_eq!(s.spawned, 1001);
        assert_eq!(s.completed, 1001);
    }
}

#[test]
fn yields_interleave() {
    let rt = rt(1, Policy::RoundRobin);
    let log = rt.block_on(|| {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..3)
            .map(|id| {
                let log = log.clone();
                fiber::spawn(move || {
                    for step in 0..3 {
                        log.lock().unwrap().push((id, step));
                        fiber::yield_now();
                    }
                })
            })
            .collect();
        fiber::when_all(hs);
        let v = log.lock().unwrap().clone();
        v
    });
    assert_eq!(log.len(), 9);
    // Round-robin interleaving: no fiber does two steps in a row while
    // others are runnable.
    for w in log.windows(2).take(6) {
        assert_ne!(w[0].0, w[1].0, "{log:?}");
    }
}

#[test]
fn panics_are_caught_and_runtime_stays_healthy() {
    let rt = rt(2, Policy::RandomSteal);
    let r = rt.spawn(|| -> u32 { panic!("fiber boom") }).join();
    let e = r.unwrap_err();
    assert!(e.is_panic());
    assert_eq!(e.panic_message(), Some("fiber boom"));
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(|| -> u32 { panic!("again") })));
    assert!(caught.is_err());
    assert_eq!(rt.block_on(|| 5), 5);
}

#[test]
fn sleep_parks_fiber_not_thread() {
    let rt = rt(1, Policy::RoundRobin);
    let t0 = Instant::now();
    let (slept, spun) = rt.block_on(|| {
        let counter = Arc::new(AtomicUsize::new(0));
        let c = counter.clone();
        let sleeper = fiber::spawn(|| fiber::sleep(Duration::from_millis(50)));
        let spinner = fiber::spawn(move || {
            // runs while the sleeper sleeps on the only worker
            for _ in 0..100 {
                c.fetch_add(1, Ordering::SeqCst);
                fiber::yield_now();
            }
        });
        fiber::await_fiber(spinner);
        let spun = counter.load(Ordering::SeqCst);
        fiber::await_fiber(sleeper);
        (Instant::now(), spun)
    });
    assert!(slept - t0 >= Duration::from_millis(50));
    assert_eq!(spun, 100);
}

#[test]
fn fork_join_fib() {
    fn fib(n: u64) -> u64 {
        if n < 2 {
            return n;
        }
        let (a, b) = fiber::join(|| fib(n - 1), || fib(n - 2));
        a + b
    }
    let rt = rt(2, Policy::RandomSteal);
    assert_eq!(rt.block_on(|| fib(22)), 17711);
}

#[test]
fn when_any_returns_first() {
    let rt = rt(2, Policy::RandomSteal);
    let (i, v) = rt.block_on(|| {
        fiber::when_any(vec![
            fiber::spawn(|| {
                fiber::sleep(Duration::from_millis(300));
                1
            }),
            fiber::spawn(|| 2),
        ])
    });
    assert_eq!((i, v), (1, 2));
}

#[test]
fn scope_borrows() {
    let rt = rt(2, Policy::RandomSteal);
    let total = rt.block_on(|| {
        let data: Vec<u64> = (1..=100).collect();
        let counter = AtomicUsize::new(0);
        fiber::scope(|s| {
            for chunk in data.chunks(10) {
                let counter = &counter;
                s.spawn(move || {
                    counter.fetch_add(chunk.iter().sum::<u64>() as usize, Ordering::SeqCst);
                });
            }
        });
        counter.load(Ordering::SeqCst)
    });
    assert_eq!(total, 5050);
}

#[test]
fn shutdown_cancels_suspended_fibers_and_runs_destructors() {
    struct D(Arc<AtomicUsize>);
    impl Drop for D {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let drops = Arc::new(AtomicUsize::new(0));
    let rt = rt(2, Policy::RandomSteal);
    let mut hs = Vec::new();
    for i in 0..100 {
        let d = D(drops.clone());
        hs.push(rt.spawn(move || {
            let _d = d;
            match i % 3 {
                0 => loop {
                    fiber::yield_now()
                },
                1 => fiber::sleep(Duration::from_secs(3600)),
                _ => {
                    let h = fiber::spawn(|| fiber::sleep(Duration::from_secs(3600)));
                    let _ = h.join();
                }
            }
        }));
    }
    std::thread::sleep(Duration::from_millis(50));
    rt.shutdown();
    assert_eq!(drops.load(Ordering::SeqCst), 100);
    for h in hs {
        assert!(h.join().unwrap_err().is_cancelled());
    }
}

#[test]
fn join_reraises_panics_after_both_sides_finish() {
    let rt = rt(2, Policy::RandomSteal);
    let other_ran = Arc::new(AtomicUsize::new(0));
    let o = other_ran.clone();
    let e = rt
        .spawn(move || {
            fiber::join(
                || panic!("left side"),
                move || {
                    fiber::sleep(Duration::from_millis(20));
                    o.fetch_add(1, Ordering::SeqCst);
                },
            )
        })
        .join()
        .unwrap_err();
    assert_eq!(e.panic_message(), Some("left side"));
    assert_eq!(other_ran.load(Ordering::SeqCst), 1, "b finished before the panic was re-raised");
    let e = rt.spawn(|| fiber::join(|| 1, || -> u32 { panic!("right side") })).join().unwrap_err();
    assert_eq!(e.panic_message(), Some("right side"));
}

#[test]
fn join_borrows_and_nests() {
    let rt = rt(2, Policy::RandomSteal);
    let v: Vec<u64> = (0..10_000).collect();
    fn sum(xs: &[u64]) -> u64 {
        if xs.len() <= 64 {
            return xs.iter().sum();
        }
        let (l, r) = xs.split_at(xs.len() / 2);
        let (a, b) = fiber::join(
            || sum(l),
            || {
                fiber::yield_now(); // suspend inside a possibly stolen job
                sum(r)
            },
        );
        a + b
    }
    let total = rt.block_on(move || sum(&v));
    assert_eq!(total, 10_000 * 9_999 / 2);
}

#[test]
fn shutdown_with_joins_in_flight_runs_every_destructor_once() {
    struct D(Arc<AtomicUsize>);
    impl Drop for D {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    for policy in [Policy::RoundRobin, Policy::RandomSteal] {
        let drops = Arc::new(AtomicUsize::new(0));
        let rt = rt(2, policy);
        for _ in 0..20 {
            let (d1, d2) = (D(drops.clone()), D(drops.clone()));
            drop(rt.spawn(move || {
                fiber::join(
                    move || {
                        let _d = d1;
                        fiber::sleep(Duration::from_secs(3600))
                    },
                    move || {
                        let _d = d2;
                        fiber::sleep(Duration::from_secs(3600))
                    },
                )
            }));
        }
        std::thread::sleep(Duration::from_millis(50));
        rt.shutdown();
        assert_eq!(drops.load(Ordering::SeqCst), 40, "{policy:?}");
    }
}
