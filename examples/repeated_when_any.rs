//! Ported corolib program (tutorial p1118, "auto_reset_event, thread, 3,
//! when_any"): three tasks each wait on an auto-reset event that a detached
//! plain thread sets; their parent awaits one `when_any` three times and
//! adds up the results. In numafiber the re-awaitable `when_any` is a
//! `fiber::JoinSet` (`join_next` in finishing order, the others kept), the
//! event is `sync::AutoResetEvent`, and the tasks start eagerly as corolib's
//! do (`fiber::Builder::eager`).
//!
//! To make the output reproducible the completion threads do not sleep for
//! fixed delays: each waits for a "go" from the parent, which releases them
//! one at a time in a given order, so `join_next` must return them in that
//! order.
//!
//! `cargo run --example repeated_when_any`
//!
//! Output (first iteration):
//! ```text
//! iteration 0: release order [2, 0, 1]
//!   when_any -> task 2 returned 3
//!   when_any -> task 0 returned 1
//!   when_any -> task 1 returned 2
//!   sum + 1 = 7
//! ```

use std::fmt::Write as _;
use std::sync::{mpsc, Arc};

use numafiber::fiber::{self, JoinSet};
use numafiber::sync::AutoResetEvent;
use numafiber::Runtime;

/// One task (corolib's `coroutine4a/b/c`): hand a completion thread the
/// event, wait for it, return `index + 1`.
fn task(index: usize, go: mpsc::Receiver<()>) -> (usize, usize) {
    let are = Arc::new(AutoResetEvent::new());
    let are2 = are.clone();
    // corolib: std::thread thread1(...); thread1.detach();
    std::thread::spawn(move || {
        if go.recv().is_ok() {
            are2.set(); // are.resume()
        }
    });
    are.wait(); // co_await are
    (index, index + 1)
}

/// Run `orders.len()` iterations; iteration `i` releases the completion
/// threads in `orders[i]`. Returns the program's output.
pub fn run(rt: &Runtime, orders: &[[usize; 3]]) -> String {
    let mut out = String::new();
    for (it, order) in orders.iter().enumerate() {
        let order = *order;
        let lines = rt.block_on(move || {
            let mut lines = String::new();
            let _ = writeln!(lines, "iteration {it}: release order {order:?}");
            let mut set = JoinSet::new();
            let mut go = Vec::new();
            for i in 0..3 {
                let (tx, rx) = mpsc::channel();
                go.push(tx);
                set.spawn_on(&numafiber::runtime::Handle::current(), move || task(i, rx));
            }
            let mut sum = 0;
            for k in order {
                go[k].send(()).expect("the completion thread waits");
                // co_await wa: the next task to finish, the others stay.
                let (i, v) = set.join_next().expect("three tasks").expect("no panic");
                let _ = writeln!(lines, "  when_any -> task {i} returned {v}");
                sum += v;
            }
            assert!(set.is_empty());
            let _ = writeln!(lines, "  sum + 1 = {}", sum + 1);
            lines
        });
        out.push_str(&lines);
    }
    out
}

/// The eager start order of corolib's tasks: each child runs until its
/// first suspension before its parent goes on. Returns the event log.
pub fn eager_order(rt: &Runtime) -> Vec<String> {
    rt.block_on(|| {
        let log = Arc::new(std::sync::Mutex::new(Vec::new()));
        let mut hs = Vec::new();
        for i in 0..3 {
            let l = log.clone();
            log.lock().unwrap().push(format!("coroutine3: start task {i}"));
            let ev = Arc::new(AutoResetEvent::new());
            let e2 = ev.clone();
            let h = fiber::Builder::new()
                .eager(true)
                .spawn(move || {
                    l.lock().unwrap().push(format!("task {i}: co_await are"));
                    e2.wait();
                })
                .expect("spawn");
            hs.push((h, ev));
        }
        for (h, ev) in hs {
            ev.set();
            fiber::await_fiber(h);
        }
        let v = log.lock().unwrap().clone();
        v
    })
}

#[allow(dead_code)]
fn main() {
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    print!("{}", run(&rt, &[[2, 0, 1], [0, 1, 2], [1, 2, 0]]));
    let one = Runtime::builder().workers(1).build().expect("runtime");
    for line in eager_order(&one) {
        println!("{line}");
    }
}
