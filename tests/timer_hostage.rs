//! Timers no fiber can hold hostage (`src/runtime/README.md`,
//! "Timers any worker can fire"): a due timer fires even while its worker
//! runs a fiber that never gives control back, because an idle worker
//! fires it and runs the woken fiber itself.
//!
//! No timed assertions: without the rule the test hangs, and the watchdog
//! turns that into a failure.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use numafiber::{fiber, Runtime, Topology};

mod common;
use common::within;

/// A fiber pinned to worker 0 starts a sleeper there, lets it arm its
/// timer on worker 0, then spins without yielding until the sleeper has
/// woken. Worker 1 is idle: it must fire worker 0's timer and run the
/// sleeper. (A thief may take the sleeper before it arms its timer; then
/// the round proves nothing and is repeated.)
#[test]
fn a_due_timer_fires_while_its_worker_runs_a_fiber_that_never_yields() {
    let (armed_on, woke_on) = within(60, "timer on a held worker (a timer is held hostage)", || {
        let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().expect("runtime");
        rt.block_on(|| {
            for _ in 0..100 {
                let armed = Arc::new(AtomicUsize::new(usize::MAX));
                let done = Arc::new(AtomicBool::new(false));
                let (a, d) = (armed.clone(), done.clone());
                let holder = fiber::Builder::new()
                    .worker(0)
                    .pinned(true)
                    .spawn(move || {
                        let (a2, d2) = (a.clone(), d.clone());
                        let sleeper = fiber::Builder::new()
                            .local(true)
                            .spawn(move || {
                                // No suspension between this store and the
                                // timer armed by `sleep`: same worker.
                                a2.store(fiber::current().expect("in a fiber").worker, SeqCst);
                                fiber::sleep(Duration::from_millis(20));
                                let w = fiber::current().expect("in a fiber").worker;
                                d2.store(true, SeqCst);
                                w
                            })
                            .expect("spawn sleeper");
                        while a.load(SeqCst) == usize::MAX {
                            fiber::yield_now();
                        }
                        // Hold worker 0: no yield until the sleeper woke.
                        while !d.load(SeqCst) {
                            std::hint::spin_loop();
                        }
                        sleeper
                    })
                    .expect("spawn holder");
                let sleeper = holder.join().expect("holder");
                let woke_on = sleeper.join().expect("sleeper");
                let armed_on = armed.load(SeqCst);
                if armed_on == 0 {
                    return (armed_on, woke_on);
                }
            }
            panic!("the sleeper never armed its timer on worker 0 in 100 rounds");
        })
    });
    assert_eq!(armed_on, 0);
    assert_eq!(woke_on, 1, "the idle worker fired the timer and ran the sleeper");
}
