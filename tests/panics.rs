//! Panics everywhere: many panicking fibers, panicking destructors at
//! shutdown.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use numafiber::{fiber, Policy, Runtime, SpawnErrorKind, Topology};

fn rt() -> Runtime {
    Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).policy(Policy::RandomSteal).build().unwrap()
}

#[test]
fn ten_thousand_panicking_fibers_leave_the_runtime_healthy() {
    let rt = rt();
    // Silence the default hook's 10,000 messages for this test only.
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let (panicked, ok) = rt.block_on(|| {
        let hs: Vec<_> = (0..10_000u32)
            .map(|i| {
                fiber::spawn(move || {
                    if i % 3 == 0 {
                        fiber::yield_now();
                    }
                    if i % 2 == 0 {
                        panic!("fiber {i} panics");
                    }
                    i
                })
            })
            .collect();
        let mut panicked = 0;
        let mut ok = 0;
        for (i, h) in hs.into_iter().enumerate() {
            match h.join() {
                Ok(v) => {
                    assert_eq!(v as usize, i);
                    ok += 1;
                }
                Err(e) => {
                    assert_eq!(e.panic_message(), Some(format!("fiber {i} panics").as_str()));
                    panicked += 1;
                }
            }
        }
        (panicked, ok)
    });
    std::panic::set_hook(prev);
    assert_eq!((panicked, ok), (5_000, 5_000));
    // Healthy: more work runs, counters add up.
    assert_eq!(rt.block_on(|| fiber::when_all((0..100).map(|i| fiber::spawn(move || i)).collect()).len()), 100);
    let s = rt.stats();
    assert_eq!(s.spawned, s.completed, "{s:?}");
}

#[test]
fn a_panicking_destructor_of_an_unstarted_fiber_is_contained_at_shutdown() {
    struct Bomb(Arc<AtomicUsize>);
    impl Drop for Bomb {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
            panic!("Bomb::drop");
        }
    }
    let dropped = Arc::new(AtomicUsize::new(0));
    let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
    // Occupy the only worker (spinning, no yield) so the bombs stay queued,
    // unstarted, until shutdown. (A destructor that panics while a
    // *suspended* fiber is unwound is a panic during unwinding, which Rust
    // turns into an abort; that case cannot be contained.)
    let started = Arc::new(AtomicUsize::new(0));
    let st = started.clone();
    let blocker = rt.spawn(move || {
        st.store(1, Ordering::SeqCst);
        // Spin until shutdown has begun (a spawn is then refused with
        // `ShuttingDown`), not for a fixed time: on a loaded machine the main
        // thread may need longer than any fixed spin to reach `shutdown`,
        // and a bomb that started would be unwound while suspended (abort).
        // The probe fibers spawned meanwhile stay queued and are drained.
        let t = std::time::Instant::now();
        while t.elapsed() < Duration::from_secs(120) {
            match fiber::Builder::new().spawn(|| ()) {
                Err(e) if matches!(e.kind(), SpawnErrorKind::ShuttingDown) => return,
                _ => {}
            }
            let s = std::time::Instant::now();
            while s.elapsed() < Duration::from_millis(1) {
                std::hint::spin_loop();
            }
        }
        panic!("shutdown never began");
    });
    while started.load(Ordering::SeqCst) == 0 {
        std::thread::yield_now();
    }
    let mut hs = Vec::new();
    for _ in 0..3 {
        let b = Bomb(dropped.clone());
        hs.push(
            fiber::Builder::new()
                .worker(0)
                .spawn_on(&rt, move || {
                    let _b = &b;
                    fiber::sleep(Duration::from_secs(3600));
                })
                .unwrap(),
        );
    }
    drop(blocker);
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    rt.shutdown();
    std::panic::set_hook(prev);
    assert_eq!(dropped.load(Ordering::SeqCst), 3, "every bomb dropped exactly once");
    for h in hs {
        assert!(h.join().unwrap_err().is_cancelled());
    }
}
