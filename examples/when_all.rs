//! Ported corolib-style program: a `when_all` fan-out. One fiber per input
//! computes a result (here: the Collatz stopping time of the number), and
//! `fiber::when_all` collects them in input order (corolib `when_all`,
//! cppcoro `when_all`).
//!
//! `cargo run --example when_all`
//!
//! Output:
//! ```text
//! collatz steps of 27: 111
//! collatz steps of 97: 118
//! collatz steps of 871: 178
//! collatz steps of 6171: 261
//! total 668
//! ```

use numafiber::{fiber, Runtime};

/// Steps until the Collatz sequence of `n` reaches 1.
pub fn collatz_steps(mut n: u64) -> u64 {
    let mut steps = 0;
    while n != 1 {
        n = if n % 2 == 0 { n / 2 } else { 3 * n + 1 };
        steps += 1;
        if steps % 32 == 0 {
            fiber::yield_now(); // be a good citizen on a shared worker
        }
    }
    steps
}

/// Run the program on `inputs`; returns its output.
pub fn run(rt: &Runtime, inputs: &[u64]) -> String {
    let inputs = inputs.to_vec();
    let (inputs, steps) = rt.block_on(move || {
        let handles = inputs.iter().map(|&n| fiber::spawn(move || collatz_steps(n))).collect();
        let steps: Vec<u64> = fiber::when_all(handles);
        (inputs, steps)
    });
    let mut out = String::new();
    for (n, s) in inputs.iter().zip(&steps) {
        out += &format!("collatz steps of {n}: {s}\n");
    }
    out += &format!("total {}\n", steps.iter().sum::<u64>());
    out
}

#[allow(dead_code)]
fn main() {
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    print!("{}", run(&rt, &[27, 97, 871, 6171]));
}
