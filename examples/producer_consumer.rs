//! Ported corolib-style program: producers and consumers sharing a bounded
//! buffer guarded by a `sync::Mutex` and two `sync::Condvar`s (not full /
//! not empty). Every wait parks a fiber, never a worker thread.
//!
//! `cargo run --example producer_consumer`
//!
//! Output (deterministic totals):
//! ```text
//! producers 4 x 250 items, consumers 3, buffer 8
//! consumed 1000 items, sum 499500, max buffer 8
//! ```

use std::collections::VecDeque;
use std::sync::Arc;

use numafiber::sync::{Condvar, Mutex};
use numafiber::{fiber, Runtime};

struct Buffer {
    items: VecDeque<u64>,
    cap: usize,
    /// Producers still running.
    producing: usize,
    max_len: usize,
}

/// Run the program; returns its output.
pub fn run(rt: &Runtime, producers: u64, per_producer: u64, consumers: usize, cap: usize) -> String {
    let (count, sum, max_len) = rt.block_on(move || {
        let state = Arc::new((
            Mutex::new(Buffer { items: VecDeque::new(), cap, producing: producers as usize, max_len: 0 }),
            Condvar::new(), // not full
            Condvar::new(), // not empty
        ));
        let prods: Vec<_> = (0..producers)
            .map(|p| {
                let st = state.clone();
                fiber::spawn(move || {
                    let (m, not_full, not_empty) = &*st;
                    for i in 0..per_producer {
                        let mut b = not_full.wait_while(m.lock(), |b| b.items.len() == b.cap);
                        b.items.push_back(p * per_producer + i);
                        b.max_len = b.max_len.max(b.items.len());
                        drop(b);
                        not_empty.notify_one();
                    }
                    let mut b = m.lock();
                    b.producing -= 1;
                    drop(b);
                    not_empty.notify_all(); // consumers may be waiting for the end
                })
            })
            .collect();
        let cons: Vec<_> = (0..consumers)
            .map(|_| {
                let st = state.clone();
                fiber::spawn(move || {
                    let (m, not_full, not_empty) = &*st;
                    let (mut n, mut s) = (0u64, 0u64);
                    loop {
                        let mut b = not_empty.wait_while(m.lock(), |b| b.items.is_empty() && b.producing > 0);
                        let Some(v) = b.items.pop_front() else { break };
                        drop(b);
                        not_full.notify_one();
                        n += 1;
                        s += v;
                    }
                    (n, s)
                })
            })
            .collect();
        fiber::when_all(prods);
        let (n, s) = fiber::when_all(cons).into_iter().fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
        let max_len = state.0.lock().max_len;
        (n, s, max_len)
    });
    format!(
        "producers {producers} x {per_producer} items, consumers {consumers}, buffer {cap}\n\
         consumed {count} items, sum {sum}, max buffer {max_len}\n"
    )
}

#[allow(dead_code)]
fn main() {
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    print!("{}", run(&rt, 4, 250, 3, 8));
}
