//! Ported corolib-style program: a generator → bounded channel → consumer
//! pipeline. The generator fiber produces the Fibonacci numbers (a cppcoro
//! `generator<T>` becomes a fiber that sends into a channel); a middle
//! stage keeps the even ones; the consumer sums them. Bounded channels give
//! back-pressure: a fast stage parks until the next one catches up.
//!
//! `cargo run --example pipeline`
//!
//! Output:
//! ```text
//! generated 90 fibonacci numbers, 30 even, sum of even 889989708002357094
//! ```

use numafiber::sync::channel;
use numafiber::{fiber, Runtime};

/// Run the pipeline over the first `count` Fibonacci numbers (`count <= 93`
/// so they fit in `u64`) with channels of capacity `cap`.
pub fn run(rt: &Runtime, count: usize, cap: usize) -> String {
    let (generated, evens, sum) = rt.block_on(move || {
        let (gen_tx, gen_rx) = channel::bounded::<u64>(cap);
        let (even_tx, even_rx) = channel::bounded::<u64>(cap);
        let generator = fiber::spawn(move || {
            let (mut a, mut b) = (0u64, 1u64);
            for _ in 0..count {
                gen_tx.send(a).expect("the filter is alive");
                (a, b) = (b, a.wrapping_add(b));
            }
            count // gen_tx drops here: the filter's loop ends
        });
        let filter = fiber::spawn(move || {
            let mut n = 0;
            for v in gen_rx.iter().filter(|v| v % 2 == 0) {
                even_tx.send(v).expect("the consumer is alive");
                n += 1;
            }
            n
        });
        let sum: u64 = even_rx.iter().sum();
        (fiber::await_fiber(generator), fiber::await_fiber(filter), sum)
    });
    format!("generated {generated} fibonacci numbers, {evens} even, sum of even {sum}\n")
}

#[allow(dead_code)]
fn main() {
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    print!("{}", run(&rt, 90, 4));
}
