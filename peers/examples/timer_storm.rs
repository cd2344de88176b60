//! Many sleepers: N fibers (tokio tasks, may coroutines) each sleep a fixed
//! period in a loop, so every tick a timer wakes a batch of them, each on a
//! stack (or a future) not touched since its last wake. Measures the wakes
//! per second and the process CPU time per wake over a window after a
//! warm-up (`getrusage`), on W workers.
//!
//! ```text
//! timer_storm numafiber|tokio|may WORKERS FIBERS PERIOD_MS SECS
//! ```
//!
//! Prints one line:
//!
//! ```text
//! timer_storm MODE workers=W fibers=N period_ms=P wakes_per_s=X user_ns_per_wake=U sys_ns_per_wake=S
//! ```

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::time::{Duration, Instant};

/// Wake counts, sharded so that counting is not what is measured.
#[repr(align(128))]
struct Shard(AtomicU64);

const SHARDS: usize = 64;
static COUNTS: [Shard; SHARDS] = [const { Shard(AtomicU64::new(0)) }; SHARDS];
static STOP: AtomicBool = AtomicBool::new(false);

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

/// Warm up, then measure for `secs` while the sleepers run; `wait` sleeps
/// the calling context for the given time.
fn measure(mode: &str, workers: usize, fibers: usize, period: u64, secs: u64, wait: &dyn Fn(Duration)) {
    wait(Duration::from_millis(500));
    let (n0, (u0, s0), t0) = (total(), cpu(), Instant::now());
    wait(Duration::from_secs(secs));
    let (n1, (u1, s1), t1) = (total(), cpu(), Instant::now());
    STOP.store(true, Relaxed);
    let wakes = (n1 - n0).max(1);
    println!(
        "timer_storm {mode} workers={workers} fibers={fibers} period_ms={period} wakes_per_s={:.0} user_ns_per_wake={:.0} sys_ns_per_wake={:.0}",
        wakes as f64 / (t1 - t0).as_secs_f64(),
        (u1 - u0).as_nanos() as f64 / wakes as f64,
        (s1 - s0).as_nanos() as f64 / wakes as f64,
    );
}

fn fail(msg: impl std::fmt::Display) -> ! {
    eprintln!("timer_storm: {msg}");
    std::process::exit(2)
}

fn arg<T: std::str::FromStr>(args: &[String], i: usize, what: &str) -> T {
    match args.get(i).map(|a| a.parse::<T>()) {
        Some(Ok(v)) => v,
        _ => fail(format!(
            "{what} missing or not a number\nusage: timer_storm numafiber|tokio|may WORKERS FIBERS PERIOD_MS SECS"
        )),
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let mode = args.get(1).cloned().unwrap_or_default();
    let workers: usize = arg(&args, 2, "WORKERS");
    let fibers: usize = arg(&args, 3, "FIBERS");
    let period: u64 = arg(&args, 4, "PERIOD_MS");
    let secs: u64 = arg(&args, 5, "SECS");
    if workers == 0 || fibers == 0 || period == 0 || secs == 0 {
        fail("WORKERS, FIBERS, PERIOD_MS and SECS must be positive");
    }
    let d = Duration::from_millis(period);
    match mode.as_str() {
        "numafiber" => {
            let rt = numafiber::Runtime::builder().workers(workers).build().unwrap_or_else(|e| fail(e));
            rt.block_on(move || {
                let hs: Vec<_> = (0..fibers)
                    .map(|i| {
                        numafiber::fiber::spawn(move || {
                            while !STOP.load(Relaxed) {
                                numafiber::fiber::sleep(d);
                                COUNTS[i % SHARDS].0.fetch_add(1, Relaxed);
                            }
                        })
                    })
                    .collect();
                measure("numafiber", workers, fibers, period, secs, &|t| numafiber::fiber::sleep(t));
                for h in hs {
                    numafiber::fiber::await_fiber(h);
                }
            });
        }
        "tokio" => {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(workers)
                .enable_time()
                .build()
                .unwrap_or_else(|e| fail(e));
            rt.block_on(async move {
                let hs: Vec<_> = (0..fibers)
                    .map(|i| {
                        tokio::spawn(async move {
                            while !STOP.load(Relaxed) {
                                tokio::time::sleep(d).await;
                                COUNTS[i % SHARDS].0.fetch_add(1, Relaxed);
                            }
                        })
                    })
                    .collect();
                // The measuring thread is not a worker: it only sleeps.
                tokio::task::spawn_blocking(move || measure("tokio", workers, fibers, period, secs, &std::thread::sleep))
                    .await
                    .unwrap_or_else(|e| fail(e));
                for h in hs {
                    h.await.unwrap_or_else(|e| fail(e));
                }
            });
        }
        "may" => {
            may::config().set_workers(workers);
            let hs: Vec<_> = (0..fibers)
                .map(|i| {
                    may::go!(move || {
                        while !STOP.load(Relaxed) {
                            may::coroutine::sleep(d);
                            COUNTS[i % SHARDS].0.fetch_add(1, Relaxed);
                        }
                    })
                })
                .collect();
            measure("may", workers, fibers, period, secs, &std::thread::sleep);
            for h in hs {
                h.join().unwrap_or_else(|_| fail("a coroutine panicked"));
            }
        }
        _ => fail(format!("unknown mode {mode:?}: numafiber, tokio or may")),
    }
}
