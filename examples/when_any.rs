//! Ported corolib-style program: a `when_any` race. Several "mirrors"
//! answer after different delays; `fiber::when_any` returns the index and
//! value of the first to finish. The losers are not cancelled: they keep
//! running detached and their results are dropped (corolib's `when_any`
//! also lets them run to completion). Here each loser notices the race is
//! over through an `Event` and stops early.
//!
//! `cargo run --example when_any`
//!
//! Output:
//! ```text
//! winner: mirror 2 (delay 5 ms)
//! losers stopped early: 3
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use numafiber::sync::Event;
use numafiber::{fiber, Runtime};

/// Run the race over mirrors with these delays (ms); returns its output.
pub fn run(rt: &Runtime, delays_ms: &[u64]) -> String {
    let delays = delays_ms.to_vec();
    let (winner, delay, stopped) = rt.block_on(move || {
        let over = Arc::new(Event::new());
        let stopped = Arc::new(AtomicUsize::new(0));
        let handles = delays
            .iter()
            .enumerate()
            .map(|(i, &ms)| {
                let (over, stopped) = (over.clone(), stopped.clone());
                fiber::spawn(move || {
                    // "Work" for `ms`, unless the race ends first.
                    if over.wait_timeout(Duration::from_millis(ms)) {
                        stopped.fetch_add(1, Ordering::SeqCst);
                    }
                    (i, ms)
                })
            })
            .collect();
        let (_, (i, ms)) = fiber::when_any(handles);
        over.set(); // tell the losers
                    // The losers are detached; give them a moment to notice.
        while stopped.load(Ordering::SeqCst) < delays.len() - 1 {
            fiber::sleep(Duration::from_millis(1));
        }
        (i, ms, stopped.load(Ordering::SeqCst))
    });
    format!("winner: mirror {winner} (delay {delay} ms)\nlosers stopped early: {stopped}\n")
}

#[allow(dead_code)]
fn main() {
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    print!("{}", run(&rt, &[400, 300, 5, 500]));
}
