//! skynet with default settings: a 10-ary tree of 1,111,111 fibers
//! (1,000,000 leaves); every inner fiber spawns its 10 children with
//! `fiber::spawn` and sums their results with `fiber::await_fiber`.
//! `Runtime::builder().workers(W).build()`: default policy, default
//! (256 KiB, lazily committed, guarded) stacks, detected topology.
//! The `may` variant runs the same tree with may's default configuration
//! and W workers.
//!
//! Prints one line per run and the process's VmHWM (peak RSS) at the end,
//! in the format `scripts/bench-skynet.sh` parses:
//!
//! ```text
//! skynet numafiber workers=W leaves=N run=I ms=T sum=S
//! skynet numafiber workers=W spawned=S tasks_reused=R reclaimed=C
//! skynet numafiber workers=W parks=P steals=T stolen=F
//! skynet numafiber workers=W vmhwm_kib=K
//! ```
//!
//! `numafiber_wf` is numafiber with `PolicyOptions::work_first` (a spawning
//! worker runs the child at once and leaves itself stealable), to show
//! what the default help-first placement costs this recursive tree.
//! `numafiber_local` keeps the default policy but spawns every child with
//! `fiber::Builder::local(true)` (onto the spawner's own worker, stealable
//! there), to show what NLH's worker choice (the shortest queue of the
//! node, thesis Alg. 4.6) costs it: on 2 workers about every other child
//! goes to the other worker and is mostly reclaimed by its parent.
//!
//! Usage: `skynet numafiber|numafiber_wf|numafiber_local|may <workers> [leaves] [runs]`

use std::time::Instant;

use numafiber::policy::PolicyOptions;
use numafiber::{fiber, Runtime};

fn skynet_fiber(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let sub = size / 10;
    let hs: Vec<_> = (0..10).map(|i| fiber::spawn(move || skynet_fiber(num + i * sub, sub))).collect();
    hs.into_iter().map(fiber::await_fiber).sum()
}

fn skynet_local(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let sub = size / 10;
    let hs: Vec<_> = (0..10)
        .map(|i| fiber::Builder::new().local(true).spawn(move || skynet_local(num + i * sub, sub)).expect("spawn"))
        .collect();
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

fn vmhwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Fibers spawned on the workers over all runs, how many of them reused a
/// finished fiber's control block (`WorkerStats::tasks_reused`), how many
/// joins reclaimed their child, how often fibers parked and how many were
/// stolen.
fn print_pool_stats(rt: &Runtime, which: &str, workers: usize) {
    let s = rt.stats();
    let sum = |f: fn(&numafiber::runtime::WorkerStats) -> u64| s.workers.iter().map(f).sum::<u64>();
    println!(
        "skynet {which} workers={workers} spawned={} tasks_reused={} reclaimed={}",
        sum(|w| w.spawned),
        sum(|w| w.tasks_reused),
        sum(|w| w.reclaimed)
    );
    println!(
        "skynet {which} workers={workers} parks={} steals={} stolen={}",
        sum(|w| w.parks),
        sum(|w| w.local_steals + w.remote_steals),
        sum(|w| w.stolen_fibers)
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage = "usage: skynet numafiber|numafiber_wf|numafiber_local|may <workers> [leaves] [runs]";
    let which = args.get(1).map(String::as_str).unwrap_or("numafiber");
    let workers: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(1);
    let leaves: u64 = args.get(3).and_then(|s| s.parse().ok()).unwrap_or(1_000_000);
    let runs: usize = args.get(4).and_then(|s| s.parse().ok()).unwrap_or(5);
    if leaves == 0 || workers == 0 {
        eprintln!("{usage}");
        std::process::exit(2);
    }
    let want = leaves * (leaves - 1) / 2;
    let run = |i: usize, f: &dyn Fn() -> u64| {
        let t0 = Instant::now();
        let sum = f();
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        assert_eq!(sum, want, "wrong sum");
        println!("skynet {which} workers={workers} leaves={leaves} run={i} ms={ms:.1} sum={sum}");
    };
    match which {
        "numafiber" => {
            let rt = Runtime::builder().workers(workers).build().expect("runtime");
            for i in 0..runs {
                run(i, &|| rt.block_on(move || skynet_fiber(0, leaves)));
            }
            print_pool_stats(&rt, which, workers);
        }
        "numafiber_wf" => {
            let opts = PolicyOptions { work_first: true, ..PolicyOptions::default() };
            let rt = Runtime::builder().workers(workers).policy_options(opts).build().expect("runtime");
            for i in 0..runs {
                run(i, &|| rt.block_on(move || skynet_fiber(0, leaves)));
            }
            print_pool_stats(&rt, which, workers);
        }
        "numafiber_local" => {
            let rt = Runtime::builder().workers(workers).build().expect("runtime");
            for i in 0..runs {
                run(i, &|| rt.block_on(move || skynet_local(0, leaves)));
            }
            print_pool_stats(&rt, which, workers);
        }
        "may" => {
            may::config().set_workers(workers);
            for i in 0..runs {
                run(i, &|| may::go!(move || skynet_may(0, leaves)).join().unwrap());
            }
        }
        _ => {
            eprintln!("{usage}");
            std::process::exit(2);
        }
    }
    println!("skynet {which} workers={workers} vmhwm_kib={}", vmhwm_kib());
}
