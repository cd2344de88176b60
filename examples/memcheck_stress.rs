//! A small stress run for `valgrind --tool=memcheck` (every fiber stack is
//! registered with valgrind through corosensei, and slab stacks through our
//! own registration, so stack switches are not reported as errors):
//!
//! ```text
//! cargo build --release --example memcheck_stress
//! valgrind --tool=memcheck --error-exitcode=99 target/release/examples/memcheck_stress
//! ```
//!
//! It exercises spawn, yield, join, fork-join, sleep, channels, a contended
//! mutex, a panic, and a shutdown with fibers parked in every way, once with
//! guarded stacks and once with slab stacks. It prints a checksum so the
//! work cannot be optimised away.

use std::sync::Arc;
use std::time::Duration;

use numafiber::{fiber, sync, Policy, Runtime, Topology};

fn fib(n: u64) -> u64 {
    if n < 2 {
        return n;
    }
    let (a, b) = fiber::join(|| fib(n - 1), || fib(n - 2));
    a + b
}

fn workload(rt: &Runtime) -> u64 {
    let m = Arc::new(sync::Mutex::new(0u64));
    let m2 = m.clone();
    let sum = rt.block_on(move || {
        let (tx, rx) = sync::channel::bounded::<u64>(4);
        let producer = fiber::spawn(move || {
            for i in 0..200 {
                tx.send(i).unwrap();
            }
        });
        let lockers: Vec<_> = (0..50)
            .map(|_| {
                let m = m2.clone();
                fiber::spawn(move || {
                    for _ in 0..10 {
                        *m.lock() += 1;
                        fiber::yield_now();
                    }
                })
            })
            .collect();
        let sleepers: Vec<_> = (0..20).map(|i| fiber::spawn(move || fiber::sleep(Duration::from_micros(i)))).collect();
        let panicker = fiber::spawn(|| -> u64 { panic!("expected panic (memcheck stress)") });
        let total: u64 = rx.iter().sum();
        fiber::await_fiber(producer);
        fiber::when_all(lockers);
        fiber::when_all(sleepers);
        assert!(panicker.join().is_err());
        total + fib(15)
    });
    let locked = *m.lock();
    sum + locked
}

fn park_everything(rt: &Runtime) {
    let ev = Arc::new(sync::Event::new());
    let (tx, rx) = sync::channel::unbounded::<u8>();
    for i in 0..60 {
        let (ev, rx) = (ev.clone(), rx.clone());
        drop(rt.spawn(move || match i % 4 {
            0 => ev.wait(),
            1 => drop(rx.recv()),
            2 => fiber::sleep(Duration::from_secs(3600)),
            _ => loop {
                fiber::yield_now()
            },
        }));
    }
    std::thread::sleep(Duration::from_millis(100));
    drop(tx);
}

fn main() {
    std::panic::set_hook(Box::new(|_| {}));
    let rt = Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .build()
        .expect("runtime");
    let a = workload(&rt);
    park_everything(&rt);
    drop(rt);
    // SAFETY: these fibers are shallow (32 KiB is far more than they use).
    #[allow(deprecated)] // the deprecated unguarded mode keeps its test
    let rt = unsafe {
        Runtime::builder()
            .workers(2)
            .topology(Topology::uniform(1, 2))
            .policy(Policy::Nlh)
            .stack_size(32 << 10)
            .unguarded_stacks()
    }
    .build()
    .expect("runtime");
    let b = workload(&rt);
    park_everything(&rt);
    drop(rt);
    let u = fiber::stack_usage();
    println!("checksum {a} {b}; stacks left {u:?}");
    assert_eq!((u.guarded_stacks, u.slab_bytes), (0, 0));
}
