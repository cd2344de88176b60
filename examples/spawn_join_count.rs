//! Spawn + join of an empty fiber, N times from inside a fiber on one
//! worker, for instruction counts under callgrind (no timing):
//!
//! ```text
//! cargo build --release --example spawn_join_count
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/sj.out \
//!     target/release/examples/spawn_join_count 100000
//! ```
//!
//! Compare the total `Ir` of runs with two values of N: the difference
//! divided by the difference in N is the cost of one spawn + join, with the
//! runtime's start-up and shutdown cancelled out. A second argument
//! `unguarded` uses `unguarded_stacks()` instead of the default stacks.

use std::hint::black_box;

use numafiber::{fiber, Policy, Runtime, Topology};

fn main() {
    let n: u64 = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let b = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).policy(Policy::RandomSteal);
    let b = if std::env::args().nth(2).as_deref() == Some("unguarded") {
        #[allow(deprecated)]
        // SAFETY: these fibers use a few hundred bytes of stack.
        unsafe {
            b.unguarded_stacks()
        }
    } else {
        b
    };
    let rt = b.build().expect("runtime");
    let s = rt.block_on(move || {
        let mut s = 0u64;
        for i in 0..n {
            s += fiber::spawn(move || black_box(i)).join().unwrap();
        }
        s
    });
    assert_eq!(s, n * (n - 1) / 2);
    println!("{n} spawn+join done");
}
