//! Instruction-count driver for `asm-notes/README.md`.
//!
//! `yield_count numafiber N`: two fibers on ONE worker ping-pong through
//! `fiber::yield_now`, N yields in total.
//! `yield_count raw N`: one corosensei coroutine, N resume+suspend round
//! trips from the main thread.
//! `yield_count spawn N`: N times spawn + join of an empty fiber on one worker.
//! `yield_count join N`: fork-join fib(N) with `fiber::join`, no cutoff, one
//! worker (fib(N) performs F(N+1) - 1 joins).
//! `yield_count rayon_join N`: the same with `rayon::join` on a 1-thread pool.
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
        m => panic!("unknown mode {m}: use raw | numafiber | spawn | join | rayon_join"),
    }
}
