//! How work splits between workers, measured in ways the machine's load does
//! not move much: per worker, the fibers it resumed and finished, the fibers
//! it stole, its parks (fiber suspensions), the joins that ran their
//! unstarted child at once (`reclaimed`), its thread's on-CPU time and
//! run-queue wait (`/proc/self/task/TID/schedstat`, ns) and its voluntary
//! context switches (futex sleeps); wall-clock only as ratios between
//! variants of one process run back to back.
//!
//! ```text
//! work_split fib [N] [REPS]        fib(N) with fiber::join, no cutoff: 1w, 2w, rayon 2 threads
//! work_split skynet [LEAVES] [REPS] skynet with default settings: 1w, 2w
//! work_split spawn [N] [REPS]      N x spawn + join of an empty fiber: 1w, 2w
//! work_split pingpong [N] [REPS]   N rendezvous and capacity-1 round trips on 2w
//! ```
//!
//! Wall times are medians over REPS (default 5) runs per variant; the
//! per-worker counts are from the last run.

use std::hint::black_box;
use std::time::{Duration, Instant};

use numafiber::{fiber, Policy, Runtime, Stats};

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = fiber::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

/// The worker running the calling fiber.
fn here() -> usize {
    fiber::current().map(|f| f.worker).unwrap_or(0)
}

fn fib_rayon(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = rayon::join(|| fib_rayon(n - 1), || fib_rayon(n - 2));
    a + b
}

fn skynet(num: u64, size: u64) -> u64 {
    if size == 1 {
        return num;
    }
    let sub = size / 10;
    let hs: Vec<_> = (0..10).map(|i| fiber::spawn(move || skynet(num + i * sub, sub))).collect();
    hs.into_iter().map(fiber::await_fiber).sum()
}

/// Per-thread counters from procfs: (on-CPU ns, run-queue wait ns,
/// voluntary switches, involuntary switches).
fn thread_clock(tid: i32) -> (u64, u64, u64, u64) {
    let sched = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).unwrap_or_default();
    let mut it = sched.split_whitespace().map(|v| v.parse::<u64>().unwrap_or(0));
    let (cpu, wait) = (it.next().unwrap_or(0), it.next().unwrap_or(0));
    let status = std::fs::read_to_string(format!("/proc/self/task/{tid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (cpu, wait, field("voluntary_ctxt_switches:"), field("nonvoluntary_ctxt_switches:"))
}

struct Snap {
    stats: Stats,
    clocks: Vec<(u64, u64, u64, u64)>,
}

fn snap(rt: &Runtime) -> Snap {
    let stats = rt.stats();
    let clocks = stats.workers.iter().map(|w| thread_clock(w.tid)).collect();
    Snap { stats, clocks }
}

fn report(label: &str, before: &Snap, after: &Snap, wall: Duration) {
    println!("  {label}: wall {:.2} ms", wall.as_secs_f64() * 1e3);
    for (i, (a, b)) in after.stats.workers.iter().zip(&before.stats.workers).enumerate() {
        let (c1, w1, v1, n1) = after.clocks[i];
        let (c0, w0, v0, n0) = before.clocks[i];
        println!(
            "    w{i}: finished {:>8} resumed {:>8} stolen {:>7} steals {:>6} failed {:>8} parks {:>7} reclaimed {:>7} stacks {:>6} | cpu {:>7.2} ms runq-wait {:>6.2} ms vol-cs {:>6} invol-cs {:>5}",
            a.executed - b.executed,
            a.resumes - b.resumes,
            a.stolen_fibers - b.stolen_fibers,
            (a.local_steals + a.remote_steals) - (b.local_steals + b.remote_steals),
            a.failed_steals - b.failed_steals,
            a.parks - b.parks,
            a.reclaimed - b.reclaimed,
            a.stacks_mapped,
            (c1 - c0) as f64 / 1e6,
            (w1 - w0) as f64 / 1e6,
            v1 - v0,
            n1 - n0,
        );
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Run `f` on `rt` `reps` times; print the last run's split; return the median wall time.
fn measure(label: &str, rt: &Runtime, reps: usize, f: impl Fn(&Runtime)) -> Duration {
    let mut walls = Vec::new();
    let mut last = None;
    for _ in 0..reps {
        let b = snap(rt);
        let t = Instant::now();
        f(rt);
        let e = t.elapsed();
        let a = snap(rt);
        walls.push(e);
        last = Some((b, a, e));
    }
    let (b, a, e) = last.expect("reps >= 1");
    report(label, &b, &a, e);
    let m = median(walls);
    println!("    median wall over {reps}: {:.2} ms", m.as_secs_f64() * 1e3);
    m
}

fn rt(workers: usize, policy: Option<Policy>) -> Runtime {
    let mut b = Runtime::builder().workers(workers);
    if let Some(p) = policy {
        b = b.policy(p);
    }
    b.build().unwrap_or_else(|e| fail(&e.to_string()))
}

fn fail(msg: &str) -> ! {
    eprintln!("work_split: {msg}");
    std::process::exit(2)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("fib");
    let num = |i: usize, d: u64| -> u64 {
        match args.get(i) {
            None => d,
            Some(s) => s.parse().unwrap_or_else(|_| fail(&format!("`{s}`: expected a number"))),
        }
    };
    let reps = num(2, 5).max(1) as usize;
    match mode {
        "fib" => {
            let n = num(1, 30);
            if n > 40 {
                fail("N must be <= 40");
            }
            println!("fib({n}), fiber::join without cutoff, Policy::RandomSteal");
            let want = {
                let r1 = rt(1, Some(Policy::RandomSteal));
                r1.block_on(move || fib(n))
            };
            let r1 = rt(1, Some(Policy::RandomSteal));
            let r2 = rt(2, Some(Policy::RandomSteal));
            let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().expect("rayon pool");
            let t1 = measure("1 worker", &r1, reps, |r| assert_eq!(r.block_on(move || fib(black_box(n))), want));
            let t2 = measure("2 workers", &r2, reps, |r| assert_eq!(r.block_on(move || fib(black_box(n))), want));
            let mut rw = Vec::new();
            for _ in 0..reps {
                let t = Instant::now();
                assert_eq!(pool.install(|| fib_rayon(black_box(n))), want);
                rw.push(t.elapsed());
            }
            let tr = median(rw);
            println!("  rayon 2 threads: median wall {:.2} ms", tr.as_secs_f64() * 1e3);
            println!(
                "  ratios: 1w/2w = {:.2} (target >= 1.6), 2w/rayon = {:.2} (target <= 1.25)",
                t1.as_secs_f64() / t2.as_secs_f64(),
                t2.as_secs_f64() / tr.as_secs_f64()
            );
        }
        "skynet" => {
            let leaves = num(1, 1_000_000);
            if leaves == 0 || leaves > 10_000_000 {
                fail("LEAVES must be in 1..=10,000,000");
            }
            let size = {
                let mut s = 1;
                while s < leaves {
                    s *= 10;
                }
                s
            };
            let want = size * (size - 1) / 2;
            println!("skynet {size} leaves, default policy");
            // WORK_SPLIT_POLICY=NAME overrides the default policy.
            let policy = std::env::var("WORK_SPLIT_POLICY")
                .ok()
                .map(|p| p.parse::<Policy>().unwrap_or_else(|e| fail(&e.to_string())));
            let r1 = rt(1, policy);
            let r2 = rt(2, policy);
            let t1 = measure("1 worker", &r1, reps, |r| assert_eq!(r.block_on(move || skynet(0, size)), want));
            let t2 = measure("2 workers", &r2, reps, |r| assert_eq!(r.block_on(move || skynet(0, size)), want));
            println!("  ratio 1w/2w = {:.2}", t1.as_secs_f64() / t2.as_secs_f64());
        }
        "spawn" => {
            let n = num(1, 100_000);
            println!("{n} x spawn + join of an empty fiber, Policy::RandomSteal");
            let r1 = rt(1, Some(Policy::RandomSteal));
            let r2 = rt(2, Some(Policy::RandomSteal));
            let moves = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let away = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
            let body = {
                let (moves, away) = (moves.clone(), away.clone());
                move |r: &Runtime| {
                    let (moves, away) = (moves.clone(), away.clone());
                    r.block_on(move || {
                        use std::sync::atomic::Ordering::Relaxed;
                        let mut at = here();
                        for i in 0..n {
                            let w = fiber::spawn(here).join().unwrap();
                            black_box(i);
                            if w != at {
                                away.fetch_add(1, Relaxed);
                            }
                            let now = here();
                            if now != at {
                                moves.fetch_add(1, Relaxed);
                                at = now;
                            }
                        }
                    })
                }
            };
            let report_moves = |label: &str| {
                use std::sync::atomic::Ordering::Relaxed;
                println!(
                    "    {label}: the parent changed workers {} times; {} children ran on another worker than the parent before the join (all runs)",
                    moves.swap(0, Relaxed),
                    away.swap(0, Relaxed)
                );
            };
            let t1 = measure("1 worker", &r1, reps, &body);
            report_moves("1 worker");
            let t2 = measure("2 workers", &r2, reps, &body);
            report_moves("2 workers");
            println!(
                "  per op: 1w {:.0} ns, 2w {:.0} ns",
                t1.as_nanos() as f64 / n as f64,
                t2.as_nanos() as f64 / n as f64
            );
        }
        "pingpong" => {
            let n = num(1, 100_000);
            let r2 = rt(2, Some(Policy::RandomSteal));
            for cap in [0usize, 1] {
                println!("{n} ping-pong round trips, capacity {cap}, 2 workers, Policy::RandomSteal");
                let t = measure("2 workers", &r2, reps, move |r| {
                    r.block_on(move || {
                        let (tx1, rx1) = numafiber::sync::channel::bounded::<u64>(cap);
                        let (tx2, rx2) = numafiber::sync::channel::bounded::<u64>(cap);
                        let pong = fiber::spawn(move || {
                            for v in rx1.iter() {
                                tx2.send(v + 1).unwrap();
                            }
                        });
                        let mut v = 0;
                        for _ in 0..n {
                            tx1.send(v).unwrap();
                            v = rx2.recv().unwrap();
                        }
                        drop(tx1);
                        fiber::await_fiber(pong);
                        assert_eq!(v, n);
                    })
                });
                println!("  per round trip: {:.0} ns", t.as_nanos() as f64 / n as f64);
            }
        }
        other => fail(&format!("unknown mode `{other}`: fib, skynet, spawn or pingpong")),
    }
}
