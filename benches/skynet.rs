//! Skynet: a 10-ary tree of 1,111,111 fibers (1,000,000 leaves); every
//! inner fiber spawns its 10 children and sums their results, leaves return
//! their index. Expected sum: 499,999,500,000.
//!
//! numafiber: 2 workers, `Policy::RandomSteal` (the other thesis policies are
//! stubs with the same behaviour for now), 16 KiB fiber stacks
//! (`Runtime::builder().stack_size(16 * 1024)`), children spawned with
//! `fiber::spawn` and collected with `fiber::await_fiber`.
//! may: 2 workers, 16 KiB stacks (`set_stack_size(2048)` words), `go!` +
//! `join`.
//!
//! Peak RSS: before the criterion runs, each runtime runs skynet once after
//! resetting the kernel's high-water mark (`echo 5 > /proc/self/clear_refs`)
//! and the bench prints `VmHWM` (peak) and the `VmRSS` before the run to
//! stderr.
//!
//! Run: `cargo bench --bench skynet`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion};
use numafiber::{fiber, Policy, Runtime, Topology};

const LEAVES: u64 = 1_000_000;
const EXPECTED: u64 = LEAVES * (LEAVES - 1) / 2;
const STACK: usize = 16 * 1024;

fn skynet_fiber(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let sub = size / 10;
    let hs: Vec<_> = (0..10).map(|i| fiber::spawn(move || skynet_fiber(num + i * sub, sub))).collect();
    hs.into_iter().map(fiber::await_fiber).sum()
}

fn skynet_may(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let sub = size / 10;
    let hs: Vec<_> = (0..10).map(|i| may::go!(move || skynet_may(num + i * sub, sub))).collect();
    hs.into_iter().map(|h| h.join().unwrap()).sum()
}

fn status_kib(key: &str) -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    s.lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Run `f` once with the peak-RSS counter reset, print time and memory.
fn report_rss(name: &str, f: impl FnOnce() -> u64) {
    let before = status_kib("VmRSS:");
    let reset = std::fs::write("/proc/self/clear_refs", "5").is_ok();
    let t0 = Instant::now();
    let r = f();
    let t = t0.elapsed();
    assert_eq!(r, EXPECTED);
    let hwm = status_kib("VmHWM:");
    let after = status_kib("VmRSS:");
    eprintln!(
        "skynet-rss {name}: one run {:.1} ms; VmRSS before {before} KiB, VmHWM during run {hwm} KiB \
         (peak delta {} KiB{}), VmRSS after {after} KiB",
        t.as_secs_f64() * 1e3,
        hwm.saturating_sub(before),
        if reset { "" } else { ", HWM NOT reset: clear_refs failed" },
    );
}

fn skynet(c: &mut Criterion) {
    may::config().set_workers(2).set_stack_size(STACK / std::mem::size_of::<usize>());
    let rt = Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .stack_size(STACK)
        .build()
        .expect("runtime");

    // numafiber first (may's runtime has not started yet, so its threads and
    // pools are not in the numbers).
    report_rss("numafiber", || rt.block_on(|| skynet_fiber(0, LEAVES)));
    report_rss("may", || may::go!(|| skynet_may(0, LEAVES)).join().unwrap());

    let mut g = c.benchmark_group("skynet_1M");
    g.bench_function("numafiber", |b| b.iter(|| black_box(rt.block_on(|| skynet_fiber(0, black_box(LEAVES))))));
    g.bench_function("may", |b| {
        b.iter(|| black_box(may::go!(|| skynet_may(0, black_box(LEAVES))).join().unwrap()))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(15));
    targets = skynet
}
criterion_main!(benches);
