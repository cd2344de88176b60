//! Skynet: a 10-ary tree of 1,111,111 fibers (1,000,000 leaves); every
//! inner fiber spawns its 10 children and sums their results, leaves return
//! their index. Expected sum: 499,999,500,000.
//!
//! numafiber: 1 or 2 workers, `Policy::RandomSteal` (round-robin placement,
//! as the thesis' baselines) and, as `_wf`, the same with work-first
//! spawning (`PolicyOptions::work_first`: the child runs at once, the parent
//! stays stealable, so the tree unfolds depth-first like Cilk). 32 KiB fiber
//! stacks (the minimum before issue 11; `examples/skynet.rs` and
//! `scripts/bench-skynet.sh` run the default settings), children spawned with
//! `fiber::spawn` and collected with `fiber::await_fiber`.
//! may: 2 workers, 32 KiB stacks (`set_stack_size(4096)` words), `go!` +
//! `join`.
//!
//! Peak RSS: before the criterion runs, the bench re-executes itself once per
//! variant (`SKYNET_PROBE=<variant>`, `RUST_BACKTRACE=0`) and each child runs
//! skynet once and prints a `skynet-probe` line to stderr: one-run time,
//! `VmRSS` at start and `VmHWM` (peak RSS of that fresh process). A variant
//! whose probe fails (crash, exhausted `vm.max_map_count`) is reported as
//! FAILED and left out of the criterion group.
//!
//! Run: `cargo bench -p numafiber-peers --bench skynet`

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use numafiber::{fiber, Policy, PolicyOptions, Runtime, Topology};

const LEAVES: u64 = 1_000_000;
/// A smaller tree (111,111 fibers) on which peers that cannot do 1M run.
const SMALL: u64 = 100_000;
/// Small enough (11,111 coroutines) for may's stack-per-spawn to fit under
/// `vm.max_map_count`.
const TINY: u64 = 10_000;
const fn expected(leaves: u64) -> u64 {
    leaves * (leaves - 1) / 2
}
const STACK: usize = 32 * 1024;

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

fn numafiber_rt(workers: usize, work_first: bool) -> Runtime {
    Runtime::builder()
        .workers(workers)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .policy_options(PolicyOptions { work_first, ..PolicyOptions::default() })
        .stack_size(STACK)
        .build()
        .expect("runtime")
}

/// Child-process mode (`SKYNET_PROBE=<variant>`): build the runtime, run
/// skynet once, print one `skynet-probe` line with the time and the memory
/// high-water mark of this fresh process, exit.
fn probe_child(probe: &str) -> ! {
    let (variant, leaves) = probe.split_once('@').expect("variant@leaves");
    let leaves: u64 = leaves.parse().expect("leaves");
    let base = status_kib("VmRSS:");
    let t0 = Instant::now();
    let r = match variant {
        "numafiber_1w" => numafiber_rt(1, false).block_on(move || skynet_fiber(0, leaves)),
        "numafiber_2w" => numafiber_rt(2, false).block_on(move || skynet_fiber(0, leaves)),
        "numafiber_2w_wf" => numafiber_rt(2, true).block_on(move || skynet_fiber(0, leaves)),
        "may_1w" | "may_2w" => {
            let w = if variant == "may_1w" { 1 } else { 2 };
            may::config().set_workers(w).set_stack_size(STACK / std::mem::size_of::<usize>());
            may::go!(move || skynet_may(0, leaves)).join().unwrap()
        }
        v => panic!("unknown variant {v}"),
    };
    let t = t0.elapsed();
    assert_eq!(r, expected(leaves));
    println!(
        "skynet-probe {probe}: OK one run {:.1} ms, VmRSS at start {base} KiB, VmHWM {} KiB",
        t.as_secs_f64() * 1e3,
        status_kib("VmHWM:"),
    );
    std::process::exit(0);
}

/// Run one variant in a fresh child process (so a crash or an exhausted
/// `vm.max_map_count` does not take the whole bench down, and VmHWM is that
/// variant's own peak). Returns whether it succeeded.
fn probe(variant: &str, leaves: u64) -> bool {
    let variant = format!("{variant}@{leaves}");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .env("SKYNET_PROBE", &variant)
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("spawn probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    match stdout.lines().find(|l| l.starts_with("skynet-probe")) {
        Some(l) if out.status.success() => {
            eprintln!("{l}");
            true
        }
        _ => {
            let why = stderr.lines().filter(|l| !l.trim().is_empty()).take(3).collect::<Vec<_>>().join(" | ");
            eprintln!("skynet-probe {variant}: FAILED ({}): {why}", out.status);
            false
        }
    }
}

fn skynet(c: &mut Criterion) {
    const VARIANTS: [&str; 5] = ["numafiber_1w", "numafiber_2w", "numafiber_2w_wf", "may_1w", "may_2w"];
    for (label, leaves) in [("skynet_1M", LEAVES), ("skynet_100k", SMALL), ("skynet_10k", TINY)] {
        let ok: Vec<&str> = VARIANTS.iter().copied().filter(|v| probe(v, leaves)).collect();
        let mut g = c.benchmark_group(label);
        for (w, wf) in [(1, false), (2, false), (2, true)] {
            let name = format!("numafiber_{w}w{}", if wf { "_wf" } else { "" });
            if ok.contains(&name.as_str()) {
                let rt = numafiber_rt(w, wf);
                g.bench_function(&name, |b| {
                    b.iter(|| black_box(rt.block_on(move || skynet_fiber(0, black_box(leaves)))))
                });
            }
        }
        // may's worker count is process-global and fixed at its first use:
        // the in-process measurement uses 2 workers (1 worker: probe line).
        if ok.contains(&"may_2w") {
            may::config().set_workers(2).set_stack_size(STACK / std::mem::size_of::<usize>());
            g.bench_function("may_2w", |b| {
                b.iter(|| black_box(may::go!(move || skynet_may(0, black_box(leaves))).join().unwrap()))
            });
        }
        g.finish();
    }
}

fn main() {
    if let Ok(v) = std::env::var("SKYNET_PROBE") {
        probe_child(&v);
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(15));
    targets = skynet
}
