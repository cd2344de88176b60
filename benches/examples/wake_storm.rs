//! Many fibers (tokio tasks, may coroutines) woken in batches, each on a
//! stack (or a future) not touched since its last wake:
//!
//! - `sleep`: N fibers each sleep PERIOD_MS in a loop, so every tick a
//!   timer wakes a batch of them;
//! - `barrier`: N fibers meet at one barrier of N parties in a loop, so the
//!   last to arrive wakes the other N - 1 at once (PERIOD_MS is ignored).
//!
//! Measures the wakes per second and the process CPU time per wake over a
//! window after a warm-up (`getrusage`), on W workers.
//!
//! ```text
//! wake_storm sleep|barrier numafiber|numafiber_slack1ms|tokio|may WORKERS FIBERS PERIOD_MS SECS
//! ```
//!
//! `numafiber_slack1ms` is numafiber with `Builder::timer_slack` of 1 ms
//! (tokio's timer resolution).
//!
//! Prints one line:
//!
//! ```text
//! wake_storm KIND MODE workers=W fibers=N period_ms=P wakes_per_s=X user_ns_per_wake=U sys_ns_per_wake=S
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Wake counts, sharded so that counting is not what is measured.
#[repr(align(128))]
struct Shard(AtomicU64);

const SHARDS: usize = 64;
static COUNTS: [Shard; SHARDS] = [const { Shard(AtomicU64::new(0)) }; SHARDS];
/// Set by the measuring thread at the end of the window.
static STOP: AtomicBool = AtomicBool::new(false);
/// `barrier`: the round's leader copies `STOP` here between the two waits
/// of a round, so that every fiber leaves after the same round.
static QUIT: AtomicBool = AtomicBool::new(false);

fn count(i: usize) {
    COUNTS[i % SHARDS].0.fetch_add(1, Relaxed);
}

/// One fiber of the `sleep` kind: sleep and count until told to stop.
fn sleep_loop(i: usize, sleep: impl Fn()) {
    while !STOP.load(Relaxed) {
        sleep();
        count(i);
    }
}

/// One fiber of the `barrier` kind: two barrier waits a round (`wait`
/// returns whether this fiber was the round's leader), counting the
/// waits that parked; the leader of a round's first wait decides for
/// everyone whether this was the last round.
fn barrier_loop(i: usize, wait: impl Fn() -> bool) {
    loop {
        if wait() {
            QUIT.store(STOP.load(Relaxed), Relaxed);
        } else {
            count(i);
        }
        if !wait() {
            count(i);
        }
        if QUIT.load(Relaxed) {
            return;
        }
    }
}

fn total() -> u64 {
    COUNTS.iter().map(|s| s.0.load(Relaxed)).sum()
}

fn cpu() -> (Duration, Duration) {
    // SAFETY: `getrusage` writes the struct it is given; zeroed is a valid
    // `rusage`.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: RUSAGE_SELF with a valid pointer to writable memory.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut ru) };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    (tv(ru.ru_utime), tv(ru.ru_stime))
}

#[derive(Clone)]
struct Args {
    kind: String,
    mode: String,
    workers: usize,
    fibers: usize,
    period: Duration,
    secs: u64,
}

/// Warm up, then measure for `secs` while the fibers run; `wait` sleeps
/// the calling context for the given time.
fn measure(a: &Args, wait: &dyn Fn(Duration)) {
    wait(Duration::from_millis(500));
    let (n0, (u0, s0), t0) = (total(), cpu(), Instant::now());
    wait(Duration::from_secs(a.secs));
    let (n1, (u1, s1), t1) = (total(), cpu(), Instant::now());
    STOP.store(true, Relaxed);
    let wakes = (n1 - n0).max(1);
    println!(
        "wake_storm {} {} workers={} fibers={} period_ms={} wakes_per_s={:.0} user_ns_per_wake={:.0} sys_ns_per_wake={:.0}",
        a.kind,
        a.mode,
        a.workers,
        a.fibers,
        a.period.as_millis(),
        wakes as f64 / (t1 - t0).as_secs_f64(),
        (u1 - u0).as_nanos() as f64 / wakes as f64,
        (s1 - s0).as_nanos() as f64 / wakes as f64,
    );
}

const USAGE: &str =
    "usage: wake_storm sleep|barrier numafiber|numafiber_slack1ms|tokio|may WORKERS FIBERS PERIOD_MS SECS";

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("wake_storm: {msg}");
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    match args.get(i).map(|a| a.parse::<T>()) {
        Some(Ok(v)) => v,
        _ => fail(format!("{what} missing or not a number\n{USAGE}")),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let a = Args {
        kind: args.get(1).cloned().unwrap_or_default(),
        mode: args.get(2).cloned().unwrap_or_default(),
        workers: arg(&args, 3, "WORKERS"),
        fibers: arg(&args, 4, "FIBERS"),
        period: Duration::from_millis(arg(&args, 5, "PERIOD_MS")),
        secs: arg(&args, 6, "SECS"),
    };
    if a.workers == 0 || a.fibers == 0 || a.period.is_zero() || a.secs == 0 {
        fail(format!("WORKERS, FIBERS, PERIOD_MS and SECS must be positive\n{USAGE}"));
    }
    if a.kind != "sleep" && a.kind != "barrier" {
        fail(format!("unknown kind {:?}\n{USAGE}", a.kind));
    }
    match a.mode.as_str() {
        "numafiber" => numafiber_run(&a, Duration::ZERO),
        "numafiber_slack1ms" => numafiber_run(&a, Duration::from_millis(1)),
        "tokio" => tokio_run(&a),
        "may" => may_run(&a),
        _ => fail(format!("unknown mode {:?}\n{USAGE}", a.mode)),
    }
}

fn numafiber_run(a: &Args, slack: Duration) {
    use numafiber::fiber;
    let rt = numafiber::Runtime::builder().workers(a.workers).timer_slack(slack).build().unwrap_or_else(|e| fail(e));
    let (d, n, sleep) = (a.period, a.fibers, a.kind == "sleep");
    let b = Arc::new(numafiber::sync::Barrier::new(n));
    rt.block_on(move || {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let b = b.clone();
                fiber::spawn(move || {
                    if sleep {
                        sleep_loop(i, || fiber::sleep(d));
                    } else {
                        barrier_loop(i, || b.wait().is_leader());
                    }
                })
            })
            .collect();
        measure(a, &|t| fiber::sleep(t));
        for h in hs {
            fiber::await_fiber(h);
        }
    });
}

fn tokio_run(a: &Args) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(a.workers)
        .enable_time()
        .build()
        .unwrap_or_else(|e| fail(e));
    let (d, n, sleep) = (a.period, a.fibers, a.kind == "sleep");
    let b = Arc::new(tokio::sync::Barrier::new(n));
    rt.block_on(async move {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let b = b.clone();
                tokio::spawn(async move {
                    if sleep {
                        while !STOP.load(Relaxed) {
                            tokio::time::sleep(d).await;
                            count(i);
                        }
                        return;
                    }
                    loop {
                        if b.wait().await.is_leader() {
                            QUIT.store(STOP.load(Relaxed), Relaxed);
                        } else {
                            count(i);
                        }
                        if !b.wait().await.is_leader() {
                            count(i);
                        }
                        if QUIT.load(Relaxed) {
                            return;
                        }
                    }
                })
            })
            .collect();
        // The measuring thread is not a worker: it only sleeps.
        let a = a.clone();
        tokio::task::spawn_blocking(move || measure(&a, &std::thread::sleep)).await.unwrap_or_else(|e| fail(e));
        for h in hs {
            h.await.unwrap_or_else(|e| fail(e));
        }
    });
}

fn may_run(a: &Args) {
    may::config().set_workers(a.workers);
    let (d, n, sleep) = (a.period, a.fibers, a.kind == "sleep");
    let b = Arc::new(may::sync::Barrier::new(n));
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let b = b.clone();
            may::go!(move || {
                if sleep {
                    sleep_loop(i, || may::coroutine::sleep(d));
                } else {
                    barrier_loop(i, || b.wait().is_leader());
                }
            })
        })
        .collect();
    measure(a, &std::thread::sleep);
    for h in hs {
        h.join().unwrap_or_else(|_| fail("a coroutine panicked"));
    }
}
