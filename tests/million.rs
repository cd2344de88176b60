//! A million live fibers at once (unguarded slab stacks), their memory
//! cost, and shutdown with all of them parked. Prints the measured figures.
//! Ignored in a plain `cargo test` (it needs about 6.5 GB):
//! `cargo test --release --test million -- --ignored` runs it (CI does).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::{sync, Policy, Runtime, Topology};

fn status_kib(key: &str) -> usize {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[test]
#[ignore = "scale: a million parked fibers, about 6.5 GB of memory; run with --ignored (CI does)"]
fn a_million_parked_fibers() {
    const N: usize = 1_000_000;
    let stack: usize = std::env::var("MILLION_STACK").ok().and_then(|s| s.parse().ok()).unwrap_or(6 * 1024);
    #[allow(non_snake_case)]
    let STACK = stack;
    // SAFETY: the fibers below only wait; the shutdown's forced unwind of
    // a parked fiber needs more than 5 KiB (measured: 4 and 5 KiB stacks
    // overflow during the unwind, 6 KiB do not). RSS per parked fiber is
    // about the stack size plus ~400 bytes, so 6 KiB meets the 8 KiB target.
    #[allow(deprecated)] // the deprecated unguarded mode keeps its test
    let rt = unsafe {
        Runtime::builder()
            .workers(2)
            .topology(Topology::uniform(1, 2))
            .policy(Policy::RandomSteal)
            .stack_size(STACK)
            .unguarded_stacks()
    }
    .build()
    .unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    // Half of them wait on an event nobody sets, half on a channel nobody
    // sends on (the sender stays alive until after shutdown).
    let event = Arc::new(sync::Event::new());
    let (tx, rx) = sync::channel::unbounded::<u8>();
    let rss0 = status_kib("VmRSS:");
    let t0 = Instant::now();
    for i in 0..N {
        let c = Counted(drops.clone());
        if i % 2 == 0 {
            let ev = event.clone();
            drop(rt.spawn(move || {
                let _c = c;
                ev.wait();
            }));
        } else {
            let rx = rx.clone();
            drop(rt.spawn(move || {
                let _c = c;
                let _ = rx.recv();
            }));
        }
    }
    drop(rx);
    // Wait until every fiber has started and parked.
    let parked = || rt.stats().workers.iter().map(|w| w.parks).sum::<u64>();
    while parked() < N as u64 {
        assert!(t0.elapsed() < Duration::from_secs(120), "only {} of {N} parked", parked());
        std::thread::sleep(Duration::from_millis(20));
    }
    let spawn_time = t0.elapsed();
    let rss1 = status_kib("VmRSS:");
    let per_fiber = (rss1 - rss0) as f64 * 1024.0 / N as f64;
    eprintln!(
        "{N} parked fibers: spawned and parked in {spawn_time:?}; RSS {rss0} KiB -> {rss1} KiB = {per_fiber:.0} bytes per fiber; VmHWM {} KiB",
        status_kib("VmHWM:")
    );
    assert_eq!(drops.load(Ordering::Relaxed), 0);
    let t1 = Instant::now();
    rt.shutdown();
    let shutdown = t1.elapsed();
    drop(tx);
    eprintln!("shutdown with {N} parked fibers: {shutdown:?}");
    assert_eq!(drops.load(Ordering::Relaxed), N, "every parked fiber's destructors ran exactly once");
    assert!(per_fiber < 16.0 * 1024.0, "RSS per parked fiber {per_fiber:.0} bytes");
}

// Guarded stacks past the old mapping budget (about 30,000) used to be a
// `SpawnErrorKind::TooManyFibers`; with guarded slab stacks they just run:
// see `tests/stacks.rs` (a million parked fibers with default settings).
