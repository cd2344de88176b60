//! Yield round trip: two fibers ping-ponging through `fiber::yield_now` on
//! ONE worker, against a raw corosensei resume+suspend and against `may`.
//!
//! One criterion "iteration" is one `yield_now` (one suspend of the running
//! fiber back to its scheduler plus one resume of the other fiber), which is
//! the same amount of context switching as one raw corosensei
//! `resume` + `suspend` round trip (two stack switches). With two fibers
//! ping-ponging, A -> B -> A costs two iterations.
//!
//! The timed region is inside the fiber (after the partner is spawned), so
//! `block_on`'s thread hand-off is not counted.
//!
//! Policy: `Policy::RandomSteal` (the other thesis policies are stubs with
//! the same behaviour for now); with one worker nothing is ever stolen.
//!
//! Run: `cargo bench -p numafiber-peers --bench switch`

#![allow(clippy::unit_arg)] // black_box(()) on purpose: keep the switch from being optimised out
use std::hint::black_box;
use std::time::{Duration, Instant};

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, Yielder};
use criterion::{criterion_group, criterion_main, Criterion};
use numafiber::{fiber, Policy, Runtime, Topology};

fn numafiber_ping_pong(c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    let rt = Runtime::builder()
        .workers(1)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .build()
        .expect("runtime");
    c.bench_function("numafiber_yield_now", |b| {
        b.iter_custom(|iters| {
            rt.block_on(move || {
                // `iters` yields in all: the partner does half, we do the rest.
                let theirs = iters / 2;
                let mine = iters - theirs;
                let partner = fiber::spawn(move || {
                    for _ in 0..theirs {
                        fiber::yield_now();
                    }
                });
                let t0 = Instant::now();
                for _ in 0..mine {
                    fiber::yield_now();
                }
                let e = t0.elapsed();
                fiber::await_fiber(partner);
                e
            })
        })
    });
}

fn corosensei_raw(c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    let mut coro: Coroutine<(), (), (), DefaultStack> =
        Coroutine::with_stack(DefaultStack::new(64 * 1024).unwrap(), |y: &Yielder<(), ()>, ()| loop {
            y.suspend(black_box(()));
        });
    c.bench_function("corosensei_resume_suspend", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            for _ in 0..iters {
                black_box(coro.resume(black_box(())));
            }
            t0.elapsed()
        })
    });
    // The coroutine never returns: force_unwind on drop.
    drop(coro);
}

fn may_ping_pong(c: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>) {
    c.bench_function("may_yield_now", |b| {
        b.iter_custom(|iters| {
            may::go!(move || {
                let theirs = iters / 2;
                let mine = iters - theirs;
                let partner = may::go!(move || {
                    for _ in 0..theirs {
                        may::coroutine::yield_now();
                    }
                });
                let t0 = Instant::now();
                for _ in 0..mine {
                    may::coroutine::yield_now();
                }
                let e = t0.elapsed();
                partner.join().unwrap();
                e
            })
            .join()
            .unwrap()
        })
    });
}

fn switch(c: &mut Criterion) {
    may::config().set_workers(1);
    let mut g = c.benchmark_group("yield_round_trip");
    corosensei_raw(&mut g);
    numafiber_ping_pong(&mut g);
    may_ping_pong(&mut g);
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(30)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));
    targets = switch
}
criterion_main!(benches);
