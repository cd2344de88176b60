//! Two fibers ping-pong through `yield_now` on one worker; prints the cost
//! of a switch. (A quick look; the criterion bench `switch` is the measure.)
//!
//! `cargo run --release --example ping_pong -- [ROUNDS]`

#[path = "common/timing_note.rs"]
mod timing_note;

use std::time::Instant;

use numafiber::{fiber, Runtime};

fn main() {
    let rounds: u64 = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let rt = Runtime::builder().workers(1).build().expect("runtime");
    let elapsed = rt.block_on(move || {
        let t = Instant::now();
        let a = fiber::spawn(move || (0..rounds).for_each(|_| fiber::yield_now()));
        let b = fiber::spawn(move || (0..rounds).for_each(|_| fiber::yield_now()));
        fiber::await_fiber(a);
        fiber::await_fiber(b);
        t.elapsed()
    });
    println!(
        "{rounds} rounds x 2 fibers: {elapsed:?}; {:.1} ns per yield",
        elapsed.as_nanos() as f64 / (2 * rounds) as f64
    );
    timing_note::print();
}
