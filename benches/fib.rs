//! Fork-join fib(30): `fiber::join` vs `rayon::join` (a 2-thread
//! `ThreadPool`) vs may (fork via `go!`, join via `JoinHandle::join`).
//!
//! Headline: NO sequential cutoff (every call with n >= 2 forks; 1,346,268
//! joins for fib(30)). Second variant: sequential below n < 16 (fib(30)
//! then forks 1,596 times, each leaf task a sequential fib(14) or fib(15)).
//!
//! numafiber: 2 workers, `Policy::RandomSteal` (the other thesis policies
//! are stubs with the same behaviour for now). may: 2 workers, default
//! stacks; only in the cutoff variant, because without a cutoff may runs
//! out of memory mappings (see `fib`). All use the machine's 2 cores.
//!
//! Run: `cargo bench -p numafiber-peers --bench fib`

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use numafiber::{fiber, Policy, Runtime, Topology};

const N: u64 = 30;
const FIB_N: u64 = 832_040;
const CUTOFF: u64 = 16;

fn fib_seq(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_seq(n - 1) + fib_seq(n - 2)
    }
}

fn fib_fiber(n: u64, cutoff: u64) -> u64 {
    if n < 2 {
        return n;
    }
    if n < cutoff {
        return fib_seq(n);
    }
    let (a, b) = fiber::join(|| fib_fiber(n - 1, cutoff), || fib_fiber(n - 2, cutoff));
    a + b
}

fn fib_rayon(n: u64, cutoff: u64) -> u64 {
    if n < 2 {
        return n;
    }
    if n < cutoff {
        return fib_seq(n);
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1, cutoff), || fib_rayon(n - 2, cutoff));
    a + b
}

fn fib_may(n: u64, cutoff: u64) -> u64 {
    if n < 2 {
        return n;
    }
    if n < cutoff {
        return fib_seq(n);
    }
    let h = may::go!(move || fib_may(n - 2, cutoff));
    let a = fib_may(n - 1, cutoff);
    a + h.join().unwrap()
}

fn fib(c: &mut Criterion) {
    may::config().set_workers(2);
    let rt = Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .build()
        .expect("runtime");
    let rt1 = Runtime::builder()
        .workers(1)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .build()
        .expect("runtime");
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    assert_eq!(rt.block_on(|| fib_fiber(N, 0)), FIB_N);
    assert_eq!(pool.install(|| fib_rayon(N, 0)), FIB_N);
    // may without a cutoff is not benchmarked: fib(30) keeps tens of
    // thousands of coroutines alive at once, each stack is an mmap plus a
    // guard page, and the process hits vm.max_map_count (65,530 here):
    // generator-0.8.12 panics "failed to alloc sys stack" (measured).
    assert_eq!(may::go!(|| fib_may(N, CUTOFF)).join().unwrap(), FIB_N);

    for (name, cutoff) in [("fib30_no_cutoff", 0), ("fib30_cutoff16", CUTOFF)] {
        let mut g = c.benchmark_group(name);
        g.bench_function("numafiber", |b| b.iter(|| black_box(rt.block_on(move || fib_fiber(black_box(N), cutoff)))));
        if cutoff == 0 {
            // The second worker must help: the same on one worker.
            g.bench_function("numafiber_1w", |b| {
                b.iter(|| black_box(rt1.block_on(move || fib_fiber(black_box(N), cutoff))))
            });
        }
        g.bench_function("rayon", |b| b.iter(|| black_box(pool.install(|| fib_rayon(black_box(N), cutoff)))));
        if cutoff > 0 {
            g.bench_function("may", |b| {
                b.iter(|| black_box(may::go!(move || fib_may(black_box(N), cutoff)).join().unwrap()))
            });
        }
        g.bench_function("sequential", |b| b.iter(|| black_box(fib_seq(black_box(N)))));
        g.finish();
    }
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(6));
    targets = fib
}
criterion_main!(benches);
