//! Fork-join Fibonacci with `fiber::join`, timed against a serial loop.
//!
//! It runs **without a cutoff, on purpose**: every call down to `fib(1)` is
//! a `fiber::join`, so the ratio printed (fibers / serial) is what a join
//! costs against a plain function call, a few nanoseconds of work per join.
//! It measures the runtime, not a way to compute Fibonacci numbers: a real
//! divide-and-conquer program stops splitting below a size where the work
//! outweighs the join (here, calling `fib_serial` below n = 20 or so).
//!
//! `cargo run --release --example fib -- [N] [--policy NAME] [--workers W]`

#[path = "common/timing_note.rs"]
mod timing_note;

use std::time::Instant;

use numafiber::{fiber, Policy, Runtime};

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = fiber::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn fib_serial(n: u64) -> u64 {
    if n < 2 {
        n
    } else {
        fib_serial(n - 1) + fib_serial(n - 2)
    }
}

fn main() {
    let mut n = 30u64;
    let mut policy = Policy::RandomSteal;
    let mut workers = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--policy" => match args.next().map(|p| p.parse::<Policy>()) {
                Some(Ok(p)) => policy = p,
                Some(Err(e)) => fail(&e.to_string()),
                None => fail("--policy needs a name"),
            },
            "--workers" => match args.next().and_then(|w| w.parse().ok()) {
                Some(w) => workers = Some(w),
                None => fail("--workers needs a number >= 1"),
            },
            _ => match a.parse() {
                Ok(v) if v <= 60 => n = v,
                _ => fail(&format!("`{a}`: expected N (<= 60), --policy NAME or --workers W")),
            },
        }
    }
    let mut b = Runtime::builder().policy(policy);
    if let Some(w) = workers {
        b = b.workers(w);
    }
    let rt = b.build().unwrap_or_else(|e| fail(&e.to_string()));
    let t = Instant::now();
    let serial = fib_serial(std::hint::black_box(n));
    let ts = t.elapsed();
    let t = Instant::now();
    let par = rt.block_on(move || fib(std::hint::black_box(n)));
    let tp = t.elapsed();
    assert_eq!(par, serial);
    let s = rt.stats();
    println!("fib({n}) = {par}");
    println!(
        "serial: {ts:?}; fibers ({policy}, {} workers): {tp:?}; ratio fibers / serial {:.2} \
         (no cutoff, on purpose: every call is a fiber::join, so this is a join's cost against a plain call)",
        rt.workers(),
        tp.as_secs_f64() / ts.as_secs_f64()
    );
    println!(
        "spawned {} fibers, steals: {} local / {} remote / {} failed",
        s.spawned, s.local_steals, s.remote_steals, s.failed_steals
    );
    timing_note::print();
}

fn fail(msg: &str) -> ! {
    eprintln!("fib: {msg}");
    std::process::exit(2)
}
