//! How long a dump of a million parked fibers takes, and how long its
//! grouped form is.
//!
//! ```text
//! cargo run --release --example dump_million -- [N]
//! ```
//! N defaults to 1,000,000 (half wait on an `Event`, half on a channel
//! `recv`; default runtime on 2 workers). Prints the capture time, the
//! time to format the grouped form and its line count. About 5 GB of RSS
//! at a million.

use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::{sync, Runtime};

fn main() {
    let n: usize = match std::env::args().nth(1).map(|a| a.parse()) {
        None => 1_000_000,
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            eprintln!("dump_million: N must be a positive integer");
            std::process::exit(2);
        }
    };
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    let event = Arc::new(sync::Event::new());
    let (tx, rx) = sync::channel::unbounded::<u8>();
    let t0 = Instant::now();
    let hs: Vec<_> = (0..n)
        .map(|i| {
            if i % 2 == 0 {
                let ev = event.clone();
                rt.spawn(move || ev.wait())
            } else {
                let rx = rx.clone();
                rt.spawn(move || {
                    let _ = rx.recv();
                })
            }
        })
        .collect();
    drop(rx);
    let parked = || rt.stats().workers.iter().map(|w| w.parks).sum::<u64>();
    while parked() < n as u64 {
        assert!(t0.elapsed() < Duration::from_secs(300), "only {} of {n} parked", parked());
        std::thread::sleep(Duration::from_millis(20));
    }
    println!("{n} fibers spawned and parked in {:.1} s", t0.elapsed().as_secs_f64());
    for round in 0..3 {
        let t = Instant::now();
        let c = cpu_time();
        let d = rt.dump();
        let capture = t.elapsed();
        let capture_cpu = cpu_time() - c;
        let t = Instant::now();
        let g = d.grouped().to_string();
        let grouped = t.elapsed();
        println!(
            "round {round}: dump of {} fibers in {:.3} s wall, {:.3} s CPU of the process; grouped form in {:.3} s, {} lines",
            d.fibers().count(),
            capture.as_secs_f64(),
            capture_cpu.as_secs_f64(),
            grouped.as_secs_f64(),
            g.lines().count()
        );
        if round == 0 {
            print!("{g}");
        }
    }
    event.set();
    drop(tx);
    for h in hs {
        h.join().expect("fiber");
    }
}

/// CPU time of the process (the dump runs on this thread and, for its
/// page-table queries, a helper; the workers are parked meanwhile).
fn cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}
