//! Shutdown under load: drop a runtime while 100,000 fibers are yielding,
//! sleeping, blocked on a mutex and on channels, and joining each other.
//! Every destructor runs exactly once, every stack is unmapped, every
//! worker is joined, in bounded time. (Alone in its binary: it reads the
//! process-wide stack counters.)

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::{fiber, sync, Policy, Runtime, Topology};

struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

fn run(rt: Runtime, per_kind: usize) -> (Duration, usize) {
    let drops = Arc::new(AtomicUsize::new(0));
    let c = || Counted(drops.clone());
    // 1. yielding forever
    for _ in 0..per_kind {
        let d = c();
        drop(rt.spawn(move || {
            let _d = d;
            loop {
                fiber::yield_now();
            }
        }));
    }
    // 2. sleeping
    for _ in 0..per_kind {
        let d = c();
        drop(rt.spawn(move || {
            let _d = d;
            fiber::sleep(Duration::from_secs(3600));
        }));
    }
    // 3. blocked on a mutex whose holder sleeps forever
    let m = Arc::new(sync::Mutex::new(0u64));
    {
        let m = m.clone();
        let d = c();
        drop(rt.spawn(move || {
            let _d = d;
            let _g = m.lock();
            fiber::sleep(Duration::from_secs(3600));
        }));
    }
    while !m.is_locked() {
        std::thread::sleep(Duration::from_millis(1));
    }
    for _ in 0..per_kind {
        let (m, d) = (m.clone(), c());
        drop(rt.spawn(move || {
            let _d = d;
            *m.lock() += 1;
        }));
    }
    // 4. blocked on channels nobody sends on (the sender is kept alive by a
    //    sleeping fiber, so the channel stays open)
    let (tx, rx) = sync::channel::unbounded::<u64>();
    {
        let d = c();
        drop(rt.spawn(move || {
            let _d = d;
            let _tx = tx;
            fiber::sleep(Duration::from_secs(3600));
        }));
    }
    for _ in 0..per_kind {
        let (rx, d) = (rx.clone(), c());
        drop(rt.spawn(move || {
            let _d = d;
            let _ = rx.recv();
        }));
    }
    drop(rx);
    // 5. joining each other: a chain, the last one sleeps
    let d = c();
    let mut h = rt.spawn(move || {
        let _d = d;
        fiber::sleep(Duration::from_secs(3600));
    });
    for _ in 1..per_kind {
        let d = c();
        h = rt.spawn(move || {
            let _d = d;
            let _ = h.join();
        });
    }
    drop(h);
    let total = 5 * per_kind + 2;
    // Let every fiber start and block (or keep yielding).
    let t0 = Instant::now();
    while rt.stats().workers.iter().map(|w| w.parks).sum::<u64>() < (4 * per_kind) as u64 {
        let s = rt.stats();
        assert!(
            t0.elapsed() < Duration::from_secs(120),
            "fibers did not all block: parks {}, spawned {}, completed {}",
            s.workers.iter().map(|w| w.parks).sum::<u64>(),
            s.spawned,
            s.completed
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(drops.load(Ordering::Relaxed), 0);
    let t = Instant::now();
    drop(rt);
    let took = t.elapsed();
    assert_eq!(drops.load(Ordering::Relaxed), total, "every destructor exactly once");
    (took, total)
}

#[test]
fn shutdown_with_100k_fibers_in_every_state() {
    // SAFETY: the fibers here are shallow (a lock, a recv, a join, a sleep).
    #[allow(deprecated)] // the deprecated unguarded mode keeps its test
    let rt = unsafe {
        Runtime::builder()
            .workers(2)
            .topology(Topology::uniform(1, 2))
            .policy(Policy::RandomSteal)
            .stack_size(16 * 1024)
            .deadlock_detection(false)
            .unguarded_stacks()
    }
    .build()
    .unwrap();
    let (took, total) = run(rt, 20_000);
    let u = fiber::stack_usage();
    eprintln!("shutdown with {total} fibers (yielding, sleeping, on a mutex, on a channel, joining): {took:?}; stacks left: {u:?}");
    assert_eq!((u.guarded_stacks, u.slab_bytes), (0, 0), "every stack unmapped");
    assert!(took < Duration::from_secs(60), "shutdown took {took:?}");

    // The same with guarded stacks (within the mapping budget).
    let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).deadlock_detection(false).build().unwrap();
    let (took, total) = run(rt, 4_000);
    let u = fiber::stack_usage();
    eprintln!("guarded stacks: shutdown with {total} fibers: {took:?}; stacks left: {u:?}");
    assert_eq!((u.guarded_stacks, u.slab_bytes), (0, 0), "every stack unmapped");
}
