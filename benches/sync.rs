//! `numafiber::sync` against `std::sync`, `may` and `crossbeam-channel`.
//!
//! `cargo bench -p numafiber-peers --bench sync` (about a minute). Every runtime has 2 workers:
//! numafiber with `Policy::RandomSteal`, may with `set_workers(2)`.

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use numafiber::{fiber, sync, Policy, Runtime, Topology};

/// Lock/unlock pairs per contended iteration, split over `PARTIES` parties.
const CONTENDED_OPS: usize = 4000;
const PARTIES: usize = 4;
/// Round trips per ping-pong iteration.
const ROUNDS: usize = 1000;

fn runtime() -> Runtime {
    Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .build()
        .expect("runtime")
}

fn mutex_uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("mutex_uncontended");
    let m = std::sync::Mutex::new(0u64);
    g.bench_function("std", |b| b.iter(|| *black_box(&m).lock().unwrap() += 1));
    let m = may::sync::Mutex::new(0u64);
    g.bench_function("may", |b| b.iter(|| *black_box(&m).lock().unwrap() += 1));
    let m = sync::Mutex::new(0u64);
    g.bench_function("numafiber", |b| b.iter(|| *black_box(&m).lock() += 1));
    // The same, from inside a fiber (the path fibers take).
    let rt = runtime();
    g.bench_function("numafiber_in_fiber", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                let m = sync::Mutex::new(0u64);
                let t = std::time::Instant::now();
                for _ in 0..iters {
                    *black_box(&m).lock() += 1;
                }
                t.elapsed()
            })
        })
    });
    g.finish();
}

fn mutex_contended(c: &mut Criterion) {
    let mut g = c.benchmark_group("mutex_contended");
    let per = CONTENDED_OPS / PARTIES;
    g.bench_function(BenchmarkId::new("std_threads", PARTIES), |b| {
        b.iter(|| {
            let m = Arc::new(std::sync::Mutex::new(0u64));
            let ts: Vec<_> = (0..PARTIES)
                .map(|_| {
                    let m = m.clone();
                    std::thread::spawn(move || {
                        for _ in 0..per {
                            *m.lock().unwrap() += 1;
                        }
                    })
                })
                .collect();
            ts.into_iter().for_each(|t| t.join().unwrap());
        })
    });
    g.bench_function(BenchmarkId::new("may_coroutines", PARTIES), |b| {
        b.iter(|| {
            let m = Arc::new(may::sync::Mutex::new(0u64));
            let hs: Vec<_> = (0..PARTIES)
                .map(|_| {
                    let m = m.clone();
                    may::go!(move || {
                        for _ in 0..per {
                            *m.lock().unwrap() += 1;
                            may::coroutine::yield_now();
                        }
                    })
                })
                .collect();
            hs.into_iter().for_each(|h| h.join().unwrap());
        })
    });
    let rt = runtime();
    g.bench_function(BenchmarkId::new("numafiber_fibers", PARTIES), |b| {
        b.iter(|| {
            rt.block_on(move || {
                let m = Arc::new(sync::Mutex::new(0u64));
                let hs: Vec<_> = (0..PARTIES)
                    .map(|_| {
                        let m = m.clone();
                        fiber::spawn(move || {
                            for _ in 0..per {
                                *m.lock() += 1;
                                fiber::yield_now();
                            }
                        })
                    })
                    .collect();
                fiber::when_all(hs);
            })
        })
    });
    g.finish();
}

fn channel_ping_pong(c: &mut Criterion) {
    let mut g = c.benchmark_group("channel_ping_pong");
    let rt = runtime();
    g.bench_function(BenchmarkId::new("numafiber_fibers", ROUNDS), |b| {
        b.iter(|| {
            rt.block_on(|| {
                let (tx1, rx1) = sync::channel::unbounded::<u64>();
                let (tx2, rx2) = sync::channel::unbounded::<u64>();
                let pong = fiber::spawn(move || {
                    for v in rx1.iter() {
                        tx2.send(v + 1).unwrap();
                    }
                });
                let mut v = 0;
                for _ in 0..ROUNDS {
                    tx1.send(v).unwrap();
                    v = rx2.recv().unwrap();
                }
                drop(tx1);
                fiber::await_fiber(pong);
                black_box(v)
            })
        })
    });
    g.bench_function(BenchmarkId::new("numafiber_fibers_rendezvous", ROUNDS), |b| {
        b.iter(|| {
            rt.block_on(|| {
                let (tx1, rx1) = sync::channel::bounded::<u64>(0);
                let (tx2, rx2) = sync::channel::bounded::<u64>(0);
                let pong = fiber::spawn(move || {
                    for v in rx1.iter() {
                        tx2.send(v + 1).unwrap();
                    }
                });
                let mut v = 0;
                for _ in 0..ROUNDS {
                    tx1.send(v).unwrap();
                    v = rx2.recv().unwrap();
                }
                drop(tx1);
                fiber::await_fiber(pong);
                black_box(v)
            })
        })
    });
    g.bench_function(BenchmarkId::new("may_coroutines", ROUNDS), |b| {
        b.iter(|| {
            let h = may::go!(|| {
                let (tx1, rx1) = may::sync::mpsc::channel::<u64>();
                let (tx2, rx2) = may::sync::mpsc::channel::<u64>();
                let pong = may::go!(move || {
                    while let Ok(v) = rx1.recv() {
                        tx2.send(v + 1).unwrap();
                    }
                });
                let mut v = 0;
                for _ in 0..ROUNDS {
                    tx1.send(v).unwrap();
                    v = rx2.recv().unwrap();
                }
                drop(tx1);
                pong.join().unwrap();
                v
            });
            black_box(h.join().unwrap())
        })
    });
    g.bench_function(BenchmarkId::new("crossbeam_threads", ROUNDS), |b| {
        b.iter(|| {
            let (tx1, rx1) = crossbeam_channel::unbounded::<u64>();
            let (tx2, rx2) = crossbeam_channel::unbounded::<u64>();
            let pong = std::thread::spawn(move || {
                while let Ok(v) = rx1.recv() {
                    tx2.send(v + 1).unwrap();
                }
            });
            let mut v = 0;
            for _ in 0..ROUNDS {
                tx1.send(v).unwrap();
                v = rx2.recv().unwrap();
            }
            drop(tx1);
            pong.join().unwrap();
            black_box(v)
        })
    });
    g.finish();
}

/// Round trips per iteration of the `ping_pong` group.
const PP_ROUNDS: u64 = 1000;

/// Channel ping-pong at capacity 0 (rendezvous) and 1, on 1 and 2 workers:
/// the peer of `benches/{go/ping_pong,boost/ping_pong.cpp}` (same
/// shape: the timed fiber sends a counter, a partner sends it back plus
/// one). One criterion iteration is `PP_ROUNDS` round trips; the bench
/// script divides. `scripts/bench-peers.sh` runs this group beside Go and
/// Boost.Fiber.
fn ping_pong(c: &mut Criterion) {
    let mut g = c.benchmark_group("ping_pong");
    for workers in [1, 2] {
        let rt = Runtime::builder()
            .workers(workers)
            .topology(Topology::uniform(1, 2))
            .policy(Policy::RandomSteal)
            .build()
            .expect("runtime");
        for cap in [0, 1] {
            g.bench_function(format!("numafiber_cap{cap}_{workers}w"), |b| {
                b.iter_custom(|iters| {
                    rt.block_on(move || {
                        let (tx1, rx1) = sync::channel::bounded::<u64>(cap);
                        let (tx2, rx2) = sync::channel::bounded::<u64>(cap);
                        let pong = fiber::spawn(move || {
                            for v in rx1.iter() {
                                tx2.send(v + 1).unwrap();
                            }
                        });
                        let mut v = 0;
                        let t0 = std::time::Instant::now();
                        for _ in 0..iters * PP_ROUNDS {
                            tx1.send(v).unwrap();
                            v = rx2.recv().unwrap();
                        }
                        let e = t0.elapsed();
                        drop(tx1);
                        fiber::await_fiber(pong);
                        assert_eq!(v, iters * PP_ROUNDS);
                        e
                    })
                })
            });
        }
    }
    g.finish();
}

fn config() -> Criterion {
    may::config().set_workers(2);
    Criterion::default()
        .sample_size(20)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! {
    name = benches;
    config = config();
    targets = mutex_uncontended, mutex_contended, channel_ping_pong, ping_pong
}
criterion_main!(benches);
