//! Ported corolib-style program: a recursive fork-join sum of squares
//! (corolib's recursive `co_await` on two child tasks), checked against a
//! serial sum.
//!
//! `cargo run --release --example fork_join_sum -- [N]`
//!
//! Output for N = 1000000:
//! ```text
//! sum of squares 0..1000000 = 333332833333500000 (serial 333332833333500000): ok
//! ```

use numafiber::{fiber, Runtime};

/// Below this many numbers a range is summed serially.
const GRAIN: u64 = 1024;

/// Sum of `i * i` over `lo..hi`, splitting the range in two fibers
/// (`fiber::join`) until it is small.
pub fn sum_squares(lo: u64, hi: u64) -> u128 {
    if hi - lo <= GRAIN {
        return serial_sum_squares(lo, hi);
    }
    let mid = lo + (hi - lo) / 2;
    let (a, b) = fiber::join(|| sum_squares(lo, mid), || sum_squares(mid, hi));
    a + b
}

/// The same sum on one thread.
pub fn serial_sum_squares(lo: u64, hi: u64) -> u128 {
    (lo..hi).map(|i| i as u128 * i as u128).sum()
}

/// Run the program; returns its output.
pub fn run(rt: &Runtime, n: u64) -> String {
    let parallel = rt.block_on(move || sum_squares(0, n));
    let serial = serial_sum_squares(0, n);
    let verdict = if parallel == serial { "ok" } else { "MISMATCH" };
    format!("sum of squares 0..{n} = {parallel} (serial {serial}): {verdict}\n")
}

#[allow(dead_code)]
fn main() {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(1_000_000);
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    print!("{}", run(&rt, n));
}
