//! Wall time of two shapes in which a fiber is made runnable by a fiber
//! that then computes on without suspending, on 2 workers with default
//! settings (`runtime/README.md`, "A lone entry and the rest of the maker's
//! slice"):
//!
//! * `spawn`: `spawn(f); g(); join`, with `f` and `g` 300 ms of computing
//!   each: 300 ms when `f` runs on the other worker, 600 ms when it waits
//!   for `g`.
//! * `pipe`: a producer computes 10 ms per item and sends it on an
//!   unbounded channel; the consumer computes 10 ms per item; 20 items:
//!   about 210 ms when they overlap, 400 ms one after the other.
//! * `onebusy`: one fiber computing for 2 s while the other worker idles
//!   (run it under `perf stat -e context-switches` to count the idle
//!   worker's watching parks).
//!
//! Usage: `lone_entry [spawn|pipe|onebusy] [rounds]` (default: spawn and
//! pipe, 3 rounds).

#[path = "common/timing_note.rs"]
mod timing_note;

use std::time::{Duration, Instant};

use numafiber::{fiber, Runtime};

fn busy(d: Duration) -> u64 {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        x = x.wrapping_add(1);
    }
    x
}

fn ms(t: Instant) -> f64 {
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let which = args.get(1).map(String::as_str).unwrap_or("all");
    let rounds: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(3);
    if !matches!(which, "all" | "spawn" | "pipe" | "onebusy") {
        eprintln!("usage: lone_entry [spawn|pipe|onebusy] [rounds]");
        std::process::exit(2);
    }
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    for _ in 0..rounds {
        if matches!(which, "all" | "spawn") {
            std::thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            rt.block_on(|| {
                let h = fiber::spawn(|| busy(Duration::from_millis(300)));
                busy(Duration::from_millis(300)).wrapping_add(fiber::await_fiber(h))
            });
            println!("spawn: spawn(300 ms); 300 ms; join: {:.0} ms (overlapped 300, serial 600)", ms(t));
        }
        if matches!(which, "all" | "pipe") {
            std::thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            rt.block_on(|| {
                let (tx, rx) = numafiber::sync::channel::unbounded::<u64>();
                let c = fiber::spawn(move || rx.iter().map(|v| v + busy(Duration::from_millis(10)) % 2).sum::<u64>());
                for i in 0..20 {
                    busy(Duration::from_millis(10));
                    tx.send(i).expect("consumer alive");
                }
                drop(tx);
                fiber::await_fiber(c)
            });
            println!("pipe: 20 x (10 ms produce, 10 ms consume): {:.0} ms (overlapped ~210, serial 400)", ms(t));
        }
        if which == "onebusy" {
            std::thread::sleep(Duration::from_millis(50));
            let t = Instant::now();
            rt.block_on(|| busy(Duration::from_secs(2)));
            println!("onebusy: one fiber computing: {:.0} ms", ms(t));
        }
    }
    timing_note::print();
}
