//! Spawn + join of an empty fiber, from inside a fiber: spawn one, join it,
//! repeat (so at most one child exists at a time and its stack is reused
//! from the worker's pool). Peers: `may::go!` + join from inside a may
//! coroutine, and `std::thread::spawn` + join from a plain thread.
//!
//! Headline numbers use ONE worker for both numafiber and may
//! (`may::config().set_workers(1)`), so nothing crosses threads. A second
//! numafiber variant uses 2 workers: round-robin placement then sends every
//! other child to the other worker's inbox (cross-thread wake-ups); may's
//! worker count is process-global, so it has no 2-worker twin here.
//!
//! Policy: `Policy::RandomSteal` (the other thesis policies are stubs with
//! the same behaviour for now).
//!
//! Run: `cargo bench -p numafiber-peers --bench spawn_join`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use numafiber::{fiber, Policy, Runtime, Topology};

fn rt(workers: usize) -> Runtime {
    Runtime::builder()
        .workers(workers)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .build()
        .expect("runtime")
}

fn spawn_join(c: &mut Criterion) {
    may::config().set_workers(1);
    let mut g = c.benchmark_group("spawn_join");

    let rt1 = rt(1);
    g.bench_function("numafiber_1w", |b| {
        b.iter_custom(|iters| {
            rt1.block_on(move || {
                let t0 = Instant::now();
                for i in 0..iters {
                    let h = fiber::spawn(move || black_box(i));
                    black_box(h.join().unwrap());
                }
                t0.elapsed()
            })
        })
    });
    drop(rt1);

    let rt2 = rt(2);
    g.bench_function("numafiber_2w", |b| {
        b.iter_custom(|iters| {
            rt2.block_on(move || {
                let t0 = Instant::now();
                for i in 0..iters {
                    let h = fiber::spawn(move || black_box(i));
                    black_box(h.join().unwrap());
                }
                t0.elapsed()
            })
        })
    });
    drop(rt2);

    g.bench_function("may_1w", |b| {
        b.iter_custom(|iters| {
            may::go!(move || {
                let t0 = Instant::now();
                for i in 0..iters {
                    let h = may::go!(move || black_box(i));
                    black_box(h.join().unwrap());
                }
                t0.elapsed()
            })
            .join()
            .unwrap()
        })
    });

    g.bench_function("std_thread", |b| b.iter(|| black_box(std::thread::spawn(|| black_box(1u64)).join().unwrap())));
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = spawn_join
}
criterion_main!(benches);
