//! Instruction-count driver for `asm-notes/README.md` (in the repository root).
//!
//! `yield_count numafiber N`: two fibers on ONE worker ping-pong through
//! `fiber::yield_now`, N yields in total.
//! `yield_count raw N`: one corosensei coroutine, N resume+suspend round
//! trips from the main thread.
//! `yield_count spawn N`: N times spawn + join of an empty fiber on one worker.
//! `yield_count join N`: fork-join fib(N) with `fiber::join`, no cutoff, one
//! worker (fib(N) performs F(N+1) - 1 joins).
//! `yield_count rayon_join N`: the same with `rayon::join` on a 1-thread pool.
//! `yield_count rendezvous|cap1|rendezvous_rw N` (suffix `2`: two workers):
//! channel ping-pong, N round trips; `rendezvous_rw` lets the receiver
//! block first, so each hand-off meets a waiting receiver.
//! `yield_count startup N` / `rayon_startup N`: N default runtimes (pools)
//! built, used once and shut down; `phases N` splits that into build,
//! `block_on` and shutdown (`phases_nopin N`: the same, workers not
//! pinned; `rayon_phases N`: build, `install`, drop);
//! `rayon_joined N`: `rayon_startup`, then waiting until every pool thread
//! has run its exit handler (rayon's drop does not wait; numafiber's
//! shutdown joins its workers);
//! `phases_med N` / `rayon_phases_med N`: per-iteration medians and 90th
//! percentiles of each phase and of the total;
//! `detect 1`: a fresh process's first detection, then build, `block_on`
//! and shutdown apart; `hwloc_split 1`: hwloc's init (plugins) and load
//! (sysfs scan) apart, with the runtime's discovery settings.
//!
//! Per-operation instruction counts come from the difference of two runs:
//!
//! ```text
//! valgrind --tool=callgrind --callgrind-out-file=cg.%p target/release/examples/yield_count numafiber 100000
//! valgrind --tool=callgrind --callgrind-out-file=cg.%p target/release/examples/yield_count numafiber 200000
//! (Ir(200000) - Ir(100000)) / 100000
//! ```

#![allow(clippy::unit_arg)] // black_box(()) on purpose: keep the switch from being optimised out
use std::hint::black_box;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, Yielder};
use numafiber::{fiber, Policy, Runtime, Topology};

fn main() {
    let mut args = std::env::args().skip(1);
    let mode = args.next().unwrap_or_else(|| "numafiber".into());
    let n: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    match mode.as_str() {
        "raw" => {
            let mut coro: Coroutine<(), (), (), DefaultStack> =
                Coroutine::with_stack(DefaultStack::new(64 * 1024).unwrap(), |y: &Yielder<(), ()>, ()| loop {
                    y.suspend(black_box(()));
                });
            for _ in 0..n {
                black_box(coro.resume(black_box(())));
            }
            println!("raw: {n} resume+suspend round trips");
        }
        "numafiber" | "spawn" => {
            let rt = Runtime::builder()
                .workers(1)
                .topology(Topology::uniform(1, 2))
                .policy(Policy::RandomSteal)
                .build()
                .expect("runtime");
            if mode == "numafiber" {
                rt.block_on(move || {
                    let theirs = n / 2;
                    let partner = fiber::spawn(move || {
                        for _ in 0..theirs {
                            fiber::yield_now();
                        }
                    });
                    for _ in 0..n - theirs {
                        fiber::yield_now();
                    }
                    fiber::await_fiber(partner);
                });
                println!("numafiber: {n} yield_now calls on one worker");
            } else {
                rt.block_on(move || {
                    for i in 0..n {
                        black_box(fiber::spawn(move || black_box(i)).join().unwrap());
                    }
                });
                println!("numafiber: {n} spawn+join on one worker");
            }
        }
        "join" => {
            fn fib(n: u64) -> u64 {
                if n < 2 {
                    return n;
                }
                let (a, b) = fiber::join(|| fib(n - 1), || fib(n - 2));
                a + b
            }
            let rt = Runtime::builder()
                .workers(1)
                .topology(Topology::uniform(1, 2))
                .policy(Policy::RandomSteal)
                .build()
                .expect("runtime");
            println!("fiber::join fib({n}) = {}", rt.block_on(move || fib(black_box(n))));
        }
        "rayon_join" => {
            fn fib(n: u64) -> u64 {
                if n < 2 {
                    return n;
                }
                let (a, b) = rayon::join(|| fib(n - 1), || fib(n - 2));
                a + b
            }
            let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
            println!("rayon::join fib({n}) = {}", pool.install(|| fib(black_box(n))));
        }
        "spawn2" | "rendezvous" | "cap1" | "rendezvous2" | "cap1_2" | "rendezvous_rw" | "rendezvous_rw2" => {
            let workers = if mode.ends_with('2') { 2 } else { 1 };
            let rt = Runtime::builder()
                .workers(workers)
                .topology(Topology::uniform(1, 2))
                .policy(Policy::RandomSteal)
                .build()
                .expect("runtime");
            let t0 = std::time::Instant::now();
            if mode == "spawn2" {
                rt.block_on(move || {
                    for i in 0..n {
                        black_box(fiber::spawn(move || black_box(i)).join().unwrap());
                    }
                });
            } else {
                let cap = if mode.starts_with("cap1") { 1 } else { 0 };
                let receiver_first = mode.starts_with("rendezvous_rw");
                rt.block_on(move || {
                    let (tx1, rx1) = numafiber::sync::channel::bounded::<u64>(cap);
                    let (tx2, rx2) = numafiber::sync::channel::bounded::<u64>(cap);
                    let pong = fiber::spawn(move || {
                        for v in rx1.iter() {
                            tx2.send(v + 1).unwrap();
                        }
                    });
                    let mut v = 0;
                    if receiver_first {
                        // Let `pong` block in its recv first: then every
                        // hand-off meets a waiting *receiver* (the value
                        // goes into its entry's cell), not a waiting sender.
                        fiber::yield_now();
                    }
                    for _ in 0..n {
                        tx1.send(v).unwrap();
                        v = rx2.recv().unwrap();
                    }
                    drop(tx1);
                    fiber::await_fiber(pong);
                    assert_eq!(v, n);
                });
            }
            let e = t0.elapsed();
            let st = rt.stats();
            println!(
                "numafiber {mode}: {n} ops on {workers} worker(s), {:.1} ns/op, steals {}",
                e.as_nanos() as f64 / n as f64,
                st.local_steals + st.remote_steals
            );
        }
        "startup" => {
            // N times: a default runtime (hwloc topology, one worker per
            // PU) is built, runs one fiber, and shuts down.
            let t0 = std::time::Instant::now();
            for i in 0..n {
                let rt = Runtime::builder().build().expect("runtime");
                black_box(rt.block_on(move || black_box(i)));
                rt.shutdown();
            }
            println!("numafiber startup: {:.1} us per build + block_on + shutdown", t0.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
        "detect" => {
            let t0 = std::time::Instant::now();
            let t = Topology::detect().expect("topology");
            let e1 = t0.elapsed();
            let rt = Runtime::builder().topology(t).build().expect("runtime");
            let e2 = t0.elapsed();
            rt.block_on(|| ());
            let e3 = t0.elapsed();
            rt.shutdown();
            println!("detect {:?}, build {:?}, block_on {:?}, shutdown {:?}", e1, e2 - e1, e3 - e2, t0.elapsed() - e3);
        }
        "phases" | "phases_nopin" => {
            let (mut b, mut o, mut d) = (0f64, 0f64, 0f64);
            for i in 0..n {
                let t0 = std::time::Instant::now();
                let rt = Runtime::builder().pin_workers(mode != "phases_nopin").build().expect("runtime");
                let t1 = std::time::Instant::now();
                black_box(rt.block_on(move || black_box(i)));
                let t2 = std::time::Instant::now();
                rt.shutdown();
                let t3 = std::time::Instant::now();
                b += (t1 - t0).as_secs_f64(); o += (t2 - t1).as_secs_f64(); d += (t3 - t2).as_secs_f64();
            }
            let k = 1e6 / n as f64;
            println!("build {:.1} block_on {:.1} shutdown {:.1} us", b * k, o * k, d * k);
        }
        "phases_med" | "rayon_phases_med" => {
            // Per-iteration medians (and 90th percentiles) of each phase
            // and of the whole build + run + shutdown, N iterations.
            let mut v: Vec<[f64; 4]> = Vec::with_capacity(n as usize);
            for i in 0..n {
                let t0 = std::time::Instant::now();
                let (t1, t2) = if mode == "phases_med" {
                    let rt = Runtime::builder().build().expect("runtime");
                    let t1 = std::time::Instant::now();
                    black_box(rt.block_on(move || black_box(i)));
                    let t2 = std::time::Instant::now();
                    rt.shutdown();
                    (t1, t2)
                } else {
                    let pool = rayon::ThreadPoolBuilder::new().build().unwrap();
                    let t1 = std::time::Instant::now();
                    black_box(pool.install(move || black_box(i)));
                    let t2 = std::time::Instant::now();
                    drop(pool);
                    (t1, t2)
                };
                let t3 = std::time::Instant::now();
                let us = |a: std::time::Instant, b: std::time::Instant| (b - a).as_secs_f64() * 1e6;
                v.push([us(t0, t1), us(t1, t2), us(t2, t3), us(t0, t3)]);
            }
            let q = |k: usize, f: f64| {
                let mut c: Vec<f64> = v.iter().map(|r| r[k]).collect();
                c.sort_by(f64::total_cmp);
                c[((c.len() - 1) as f64 * f) as usize]
            };
            println!(
                "{mode}: median (p90) us: build {:.1} ({:.1}) run {:.1} ({:.1}) shutdown {:.1} ({:.1}) total {:.1} ({:.1})",
                q(0, 0.5), q(0, 0.9), q(1, 0.5), q(1, 0.9), q(2, 0.5), q(2, 0.9), q(3, 0.5), q(3, 0.9)
            );
        }
        "detect_loop" => {
            // N detections (hwloc's topology is cached after the first).
            let _ = Topology::detect().expect("topology");
            let t0 = std::time::Instant::now();
            for _ in 0..n {
                black_box(Topology::detect().expect("topology"));
            }
            println!("detect: {:.2} us per call", t0.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
        "hwloc_split" => {
            // A fresh process's hwloc calls with the runtime's discovery
            // settings (`topology::hwloc::build_restricted`): init (where
            // hwloc dlopens its plugins), then load (the sysfs scan).
            use hwlocality::object::types::ObjectType as T;
            use hwlocality::topology::builder::{BuildFlags, TypeFilter};
            let t0 = std::time::Instant::now();
            let b = hwlocality::Topology::builder();
            let t1 = std::time::Instant::now();
            let b = b.with_flags(BuildFlags::IGNORE_MEMORY_ATTRIBUTES | BuildFlags::IGNORE_CPU_KINDS).expect("flags");
            let b = b.without_component("x86").expect("component");
            let b = b.with_cpu_cache_type_filter(TypeFilter::KeepNone).expect("filter");
            let b = b.with_io_type_filter(TypeFilter::KeepNone).expect("filter");
            let b = b.with_type_filter(T::Misc, TypeFilter::KeepNone).expect("filter");
            let topo = b.build().expect("load");
            let t2 = std::time::Instant::now();
            black_box(&topo);
            println!("hwloc init {:.1} us, load {:.1} us", (t1 - t0).as_secs_f64() * 1e6, (t2 - t1).as_secs_f64() * 1e6);
        }
        "rayon_phases" => {
            let (mut b, mut o, mut d) = (0f64, 0f64, 0f64);
            for i in 0..n {
                let t0 = std::time::Instant::now();
                let pool = rayon::ThreadPoolBuilder::new().build().unwrap();
                let t1 = std::time::Instant::now();
                black_box(pool.install(move || black_box(i)));
                let t2 = std::time::Instant::now();
                drop(pool);
                let t3 = std::time::Instant::now();
                b += (t1 - t0).as_secs_f64(); o += (t2 - t1).as_secs_f64(); d += (t3 - t2).as_secs_f64();
            }
            let k = 1e6 / n as f64;
            println!("build {:.1} install {:.1} drop {:.1} us", b * k, o * k, d * k);
        }
        "rayon_joined" => {
            let t0 = std::time::Instant::now();
            for i in 0..n {
                let exited = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
                let e = exited.clone();
                let pool = rayon::ThreadPoolBuilder::new()
                    .exit_handler(move |_| {
                        e.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    })
                    .build()
                    .unwrap();
                let threads = pool.current_num_threads();
                black_box(pool.install(move || black_box(i)));
                drop(pool);
                while exited.load(std::sync::atomic::Ordering::SeqCst) < threads {
                    std::thread::yield_now();
                }
            }
            println!("rayon joined: {:.1} us per build + install + drop + exit handlers", t0.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
        "rayon_startup" => {
            let t0 = std::time::Instant::now();
            for i in 0..n {
                let pool = rayon::ThreadPoolBuilder::new().build().unwrap();
                black_box(pool.install(move || black_box(i)));
                drop(pool);
            }
            println!("rayon startup: {:.1} us per build + install + drop", t0.elapsed().as_secs_f64() * 1e6 / n as f64);
        }
        m => panic!("unknown mode {m}: use startup | phases | rayon_startup | rayon_phases | rayon_joined | detect | raw | numafiber | spawn | join | rayon_join | spawn2 | rendezvous | cap1 | rendezvous2 | cap1_2 | rendezvous_rw | rendezvous_rw2"),
    }
}
