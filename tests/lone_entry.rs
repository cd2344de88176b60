//! A fiber made runnable by a fiber that then computes on (without
//! suspending) must be run by an idle worker, not wait for the end of its
//! maker's slice: `spawn(f); g(); join` and a producer feeding a consumer
//! run in parallel on two workers (`runtime/README.md`, "Why a lone spawned
//! entry wakes a sleeper" and "Watching parks").
//!
//! No timing is asserted: the maker spins (never suspends) until the other
//! fiber has run, which can only happen on the other worker; without the
//! mechanism the spin never ends, and the generous deadline turns that into
//! a failure instead of a hang.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::{fiber, Policy, Runtime, Topology};

const DEADLINE: Duration = Duration::from_secs(20);

/// Spin without suspending until `flag` is set; panics after `DEADLINE`.
fn spin_until(flag: &AtomicBool, what: &str) {
    let t0 = Instant::now();
    while !flag.load(SeqCst) {
        assert!(
            t0.elapsed() < DEADLINE,
            "{what}: the other fiber did not run within {DEADLINE:?} while this one computed"
        );
        std::hint::spin_loop();
    }
}

fn runtime(policy: Policy) -> Runtime {
    Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).policy(policy).build().unwrap()
}

#[test]
fn spawned_child_runs_while_its_spawner_computes() {
    for policy in [Policy::Nlh, Policy::RandomSteal, Policy::NumaSteal] {
        let rt = runtime(policy);
        for round in 0..50 {
            // Let the other worker fall asleep first now and then.
            if round % 10 == 0 {
                std::thread::sleep(Duration::from_millis(20));
            }
            let ran = Arc::new(AtomicBool::new(false));
            let r = ran.clone();
            let worker = rt.block_on(move || {
                let h = fiber::spawn(move || {
                    r.store(true, SeqCst);
                    fiber::current().unwrap().worker
                });
                spin_until(&ran, &format!("{policy:?} round {round}"));
                (fiber::current().unwrap().worker, h.join().unwrap())
            });
            assert_ne!(
                worker.0, worker.1,
                "{policy:?}: the child ran on its spawner's worker although the spawner never suspended"
            );
        }
    }
}

#[test]
fn woken_consumer_runs_while_its_producer_computes() {
    for policy in [Policy::Nlh, Policy::RandomSteal] {
        let rt = runtime(policy);
        let got = rt.block_on(move || {
            let (tx, rx) = numafiber::sync::channel::unbounded::<usize>();
            let waiting = Arc::new(AtomicUsize::new(0));
            let seen = Arc::new(AtomicUsize::new(0));
            let (w, s) = (waiting.clone(), seen.clone());
            let consumer = fiber::spawn(move || {
                let mut sum = 0;
                loop {
                    w.fetch_add(1, SeqCst);
                    let Ok(v) = rx.recv() else { break };
                    sum += v;
                    s.store(v, SeqCst);
                }
                sum
            });
            for v in 1..=20usize {
                // Wait (suspending) until the consumer is about to block.
                while waiting.load(SeqCst) < v {
                    fiber::yield_now();
                }
                for _ in 0..10 {
                    fiber::yield_now();
                }
                // Compute a while first, so that the other worker runs out
                // of searching and parks (its search lasts about 25 us).
                let t0 = Instant::now();
                while t0.elapsed() < Duration::from_millis(2) {
                    std::hint::spin_loop();
                }
                tx.send(v).unwrap();
                // Compute on without suspending until the consumer took it.
                let t0 = Instant::now();
                while seen.load(SeqCst) != v {
                    assert!(
                        t0.elapsed() < DEADLINE,
                        "{policy:?}: the woken consumer did not run within {DEADLINE:?} while its producer computed (value {v})"
                    );
                    std::hint::spin_loop();
                }
            }
            drop(tx);
            fiber::await_fiber(consumer)
        });
        assert_eq!(got, (1..=20).sum::<usize>());
    }
}

#[test]
fn woken_fiber_runs_while_its_waker_computes_after_the_runtime_was_idle() {
    // Every worker parked plainly (nobody busy, so nobody watches); then
    // one worker wakes for a new root, which wakes an old fiber and
    // computes on. The wake-up itself must make some idle worker look.
    for policy in [Policy::Nlh, Policy::RandomSteal] {
        let rt = runtime(policy);
        let (tx, rx) = numafiber::sync::channel::unbounded::<usize>();
        let waiting = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(AtomicBool::new(false));
        let (w, s) = (waiting.clone(), seen.clone());
        let consumer = rt.spawn(move || {
            w.store(true, SeqCst);
            let v = rx.recv().unwrap();
            s.store(true, SeqCst);
            v
        });
        while !waiting.load(SeqCst) {
            std::thread::sleep(Duration::from_millis(1));
        }
        // Let it block in `recv`, and every worker run out of searching.
        std::thread::sleep(Duration::from_millis(100));
        rt.block_on(move || {
            tx.send(7).unwrap();
            spin_until(&seen, &format!("{policy:?}: woken after an idle spell"));
        });
        assert_eq!(consumer.join().unwrap(), 7);
    }
}

/// The other side of the rule above: a spawn wakes a sleeping worker, and
/// that worker must not be woken again by every later spawn when the
/// spawner joins each child at once (its one steal pass would always come
/// before the child could be taken, and the spawner would pay a futex wake
/// per spawn). A counted bound, not a timed one: with the rule, a woken
/// worker searches until a slot entry could ripen (twice the grace
/// period), during which the spawner makes many spawns that wake nobody;
/// without it, 20,000 spawn + join woke the other worker 10,600-18,100
/// times, with it about 400 times.
#[test]
fn spawn_and_join_at_once_does_not_wake_a_worker_per_spawn() {
    const SPAWNS: u64 = 20_000;
    for policy in [Policy::Nlh, Policy::RandomSteal] {
        let rt = runtime(policy);
        rt.block_on(|| {
            for i in 0..SPAWNS {
                assert_eq!(fiber::spawn(move || i).join().unwrap(), i);
            }
        });
        let stats = rt.stats();
        let woken: u64 = stats.workers.iter().map(|w| w.woken).sum();
        assert!(
            woken < SPAWNS / 4,
            "{policy:?}: {woken} wake-ups of a sleeping worker for {SPAWNS} spawns joined at once ({:?})",
            stats.workers
        );
    }
}
