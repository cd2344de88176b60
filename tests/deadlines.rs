//! Deadlines everywhere a timeout exists, retold from the peers' own tests
//! (Boost.Fiber `test_mutex_post.cpp` timed mutex, `test_condition_variable_post.cpp`
//! `wait_until`, `test_future_post.cpp` `wait_for`/`wait_until` statuses,
//! `test_fiber_post.cpp` `sleep_until`, `test_bounded_channel_post.cpp`
//! `push_wait_until`/`pop_wait_until`; crossbeam-channel's `recv_deadline`
//! and `send_deadline` tests), each from a fiber and from a plain thread.

use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::sync::channel::{self, RecvTimeoutError, TrySendError};
use numafiber::sync::oneshot::{FutureError, FutureStatus};
use numafiber::sync::{self, AutoResetEvent, Condvar, Event, Mutex, Semaphore};
use numafiber::{fiber, Runtime, Topology};

mod common;
use common::panic_message;

fn rt() -> Runtime {
    Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().expect("runtime")
}

/// Run `f` once inside a fiber of a 2-worker runtime and once on a plain
/// thread.
fn in_fiber_and_thread(f: impl Fn() + Send + Sync + Clone + 'static) {
    let rt = rt();
    let g = f.clone();
    rt.block_on(g);
    std::thread::spawn(f).join().expect("thread");
}

const MS: Duration = Duration::from_millis(1);

// ------------------------------------------------------------ sleep_until

#[test]
fn sleep_until_waits_for_the_deadline() {
    // Boost test_fiber_post.cpp test_sleep_until: after sleep_until(t),
    // now >= t.
    in_fiber_and_thread(|| {
        let deadline = Instant::now() + 20 * MS;
        fiber::sleep_until(deadline);
        assert!(Instant::now() >= deadline);
    });
}

#[test]
fn sleep_until_a_past_deadline_returns_at_once() {
    in_fiber_and_thread(|| {
        let past = Instant::now();
        fiber::sleep(MS);
        let t = Instant::now();
        fiber::sleep_until(past);
        assert!(t.elapsed() < Duration::from_secs(1), "a past deadline does not sleep");
    });
}

/// From a fiber: `n` sleepers, sleeper `i` until `base + step * (n - 1 - i)`
/// (armed in the reverse of their deadline order), each logging its index
/// and whether it woke before its deadline. `hold` runs after every
/// sleeper has armed its timer (on one worker); the log in wake order.
fn sleepers(n: u64, base: Instant, step: Duration, hold: impl FnOnce()) -> Vec<(u64, bool)> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let hs: Vec<_> = (0..n)
        .map(|i| {
            let l = log.clone();
            fiber::spawn(move || {
                let deadline = base + step * u32::try_from(n - 1 - i).unwrap();
                fiber::sleep_until(deadline);
                l.lock().push((i, Instant::now() < deadline));
            })
        })
        .collect();
    fiber::yield_now(); // on one worker: every sleeper arms its timer and parks
    hold();
    for h in hs {
        fiber::await_fiber(h);
    }
    let v = log.lock().clone();
    v
}

#[test]
fn many_sleepers_overdue_together_wake_in_deadline_order() {
    // More sleepers than one firing takes out of the timer heap at a time,
    // armed in the reverse of their deadline order, all overdue when the
    // worker next fires its timers (the spawner holds the only worker past
    // the last deadline): every one wakes, in deadline order ("Run order",
    // 2: fibers woken together run in wake order).
    let rt = Runtime::builder().workers(1).build().unwrap();
    let n = 100u64;
    let woke = rt.block_on(move || {
        let base = Instant::now() + 5 * MS;
        sleepers(n, base, Duration::from_micros(10), || {
            while Instant::now() < base + 2 * MS {
                std::hint::spin_loop();
            }
        })
    });
    assert_eq!(woke, (0..n).rev().map(|i| (i, false)).collect::<Vec<_>>());
}

#[test]
fn with_timer_slack_every_sleeper_wakes_and_none_early() {
    // An idle worker sleeps up to the slack past its earliest timer and
    // fires what is due together: every sleeper still wakes, none before
    // its deadline.
    let rt = Runtime::builder().workers(1).timer_slack(2 * MS).build().unwrap();
    let n = 20u64;
    let woke = rt.block_on(move || sleepers(n, Instant::now() + 5 * MS, Duration::from_micros(300), || {}));
    let mut ids: Vec<u64> = woke.iter().map(|&(i, _)| i).collect();
    ids.sort_unstable();
    assert_eq!(ids, (0..n).collect::<Vec<_>>(), "every sleeper wakes once");
    assert!(woke.iter().all(|&(_, early)| !early), "a sleeper woke before its deadline: {woke:?}");
}

#[test]
fn a_timer_slack_above_the_maximum_is_a_typed_error() {
    let too_much = numafiber::runtime::MAX_TIMER_SLACK + Duration::from_nanos(1);
    let e = Runtime::builder().workers(1).timer_slack(too_much).build().unwrap_err();
    assert_eq!(
        e.kind(),
        &numafiber::BuildErrorKind::TimerSlackTooLarge {
            requested: too_much,
            maximum: numafiber::runtime::MAX_TIMER_SLACK
        }
    );
    let msg = e.to_string();
    assert!(msg.contains("timer_slack(d)") && msg.contains("1s"), "{msg}");
    // The maximum itself is accepted.
    let rt = Runtime::builder().workers(1).timer_slack(numafiber::runtime::MAX_TIMER_SLACK).build().unwrap();
    assert_eq!(rt.block_on(|| 7), 7);
}

#[test]
fn sleep_until_lets_other_fibers_run_on_one_worker() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let order = rt.block_on(|| {
        let log = Arc::new(Mutex::new(Vec::new()));
        let l = log.clone();
        let deadline = Instant::now() + 30 * MS;
        let h = fiber::spawn(move || {
            fiber::sleep_until(deadline);
            l.lock().push("sleeper");
        });
        fiber::yield_now(); // the sleeper parks
        log.lock().push("other");
        fiber::await_fiber(h);
        let v = log.lock().clone();
        v
    });
    assert_eq!(order, ["other", "sleeper"]);
}

// ------------------------------------------------------------ timed mutex

#[test]
fn try_lock_for_times_out_while_held_and_succeeds_when_free() {
    // Boost test_mutex_post.cpp test_timed_mutex: try_lock_for on a locked
    // mutex fails after about the timeout; on a free one it succeeds.
    in_fiber_and_thread(|| {
        let m = Mutex::new(0);
        let g = m.lock();
        let t = Instant::now();
        assert!(m.try_lock_for(20 * MS).is_none());
        assert!(t.elapsed() >= 20 * MS);
        drop(g);
        *m.try_lock_for(20 * MS).expect("free") += 1;
        assert_eq!(*m.lock(), 1);
    });
}

#[test]
fn try_lock_until_gets_the_lock_released_before_the_deadline() {
    let rt = rt();
    rt.block_on(|| {
        let m = Arc::new(Mutex::new(0));
        let g = m.lock();
        let m2 = m.clone();
        let h = fiber::spawn(move || {
            let g = m2.try_lock_until(Instant::now() + Duration::from_secs(10));
            *g.expect("released in time") += 1;
        });
        fiber::sleep(10 * MS);
        drop(g);
        fiber::await_fiber(h);
        assert_eq!(*m.lock(), 1);
    });
}

#[test]
fn timed_out_lock_waiter_leaves_the_queue_others_keep_their_place() {
    // A waiter that times out must not take the lock later, nor block the
    // FIFO: the holder's unlock goes to the waiter still queued.
    let rt = rt();
    rt.block_on(|| {
        let m = Arc::new(Mutex::new(Vec::new()));
        let g = m.lock();
        let (m1, m2) = (m.clone(), m.clone());
        let timed = fiber::spawn(move || m1.try_lock_for(5 * MS).is_some());
        let patient = fiber::spawn(move || m2.lock().push("patient"));
        assert!(!fiber::await_fiber(timed), "held for longer than the timeout");
        drop(g);
        fiber::await_fiber(patient);
        assert!(!m.is_locked(), "nobody holds it: the timed-out waiter never took it");
        assert_eq!(*m.lock(), ["patient"]);
    });
}

// ------------------------------------------------------------ condvar

#[test]
fn condvar_wait_until_times_out_without_notify() {
    // Boost test_condition_variable_post.cpp test_wait_until_timeout.
    in_fiber_and_thread(|| {
        let (m, cv) = (Mutex::new(()), Condvar::new());
        let deadline = Instant::now() + 20 * MS;
        let (_g, r) = cv.wait_until(m.lock(), deadline);
        assert!(r.timed_out());
        assert!(Instant::now() >= deadline);
    });
}

#[test]
fn condvar_wait_while_until_sees_the_notify_before_the_deadline() {
    // Boost test_wait_until_pred: the predicate turns true, notify_one;
    // the waiter returns with it true and no timeout.
    let rt = rt();
    rt.block_on(|| {
        let st = Arc::new((Mutex::new(0), Condvar::new()));
        let st2 = st.clone();
        let h = fiber::spawn(move || {
            fiber::sleep(5 * MS);
            *st2.0.lock() = 1;
            st2.1.notify_one();
        });
        let (g, r) = st.1.wait_while_until(st.0.lock(), Instant::now() + Duration::from_secs(10), |v| *v == 0);
        assert!(!r.timed_out());
        assert_eq!(*g, 1);
        drop(g);
        fiber::await_fiber(h);
    });
}

#[test]
fn condvar_with_a_second_mutex_panics_and_leaves_it_unlocked() {
    // std documents the panic; may panics as well.
    let (m1, m2, cv) = (Mutex::new(()), Mutex::new(()), Condvar::new());
    let (g, r) = cv.wait_timeout(m1.lock(), MS);
    assert!(r.timed_out());
    drop(g);
    let p = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _ = cv.wait_timeout(m2.lock(), MS);
    }));
    let msg = panic_message(p.expect_err("second mutex"));
    assert!(msg.contains("two different mutexes"), "{msg}");
    assert!(!m2.is_locked(), "the guard was dropped by the unwind");
    // The first mutex still works with it.
    let (_g, r) = cv.wait_timeout(m1.lock(), MS);
    assert!(r.timed_out());
}

// ------------------------------------------------------------ channels

#[test]
fn recv_deadline_times_out_then_receives() {
    // crossbeam-channel tests/array.rs recv_timeout / recv_deadline shape.
    in_fiber_and_thread(|| {
        let (tx, rx) = channel::bounded::<i32>(1);
        let t = Instant::now();
        assert_eq!(rx.recv_deadline(t + 20 * MS), Err(RecvTimeoutError::Timeout));
        assert!(t.elapsed() >= 20 * MS);
        tx.send(7).unwrap();
        assert_eq!(rx.recv_deadline(Instant::now() + 20 * MS), Ok(7));
        drop(tx);
        assert_eq!(rx.recv_deadline(Instant::now() + 20 * MS), Err(RecvTimeoutError::Disconnected));
    });
}

#[test]
fn recv_deadline_gets_a_value_sent_later() {
    let rt = rt();
    rt.block_on(|| {
        let (tx, rx) = channel::bounded(0);
        let h = fiber::spawn(move || {
            fiber::sleep(5 * MS);
            tx.send("late").unwrap();
        });
        assert_eq!(rx.recv_deadline(Instant::now() + Duration::from_secs(10)), Ok("late"));
        fiber::await_fiber(h);
    });
}

#[test]
fn send_deadline_times_out_on_a_full_channel_and_returns_the_value() {
    // Boost test_bounded_channel_post.cpp push_wait_until on a full
    // channel: timeout, value not enqueued.
    in_fiber_and_thread(|| {
        let (tx, rx) = channel::bounded(1);
        tx.send(1).unwrap();
        let t = Instant::now();
        assert_eq!(tx.send_deadline(2, t + 20 * MS), Err(TrySendError::Full(2)));
        assert!(t.elapsed() >= 20 * MS);
        assert_eq!(rx.len(), 1);
        assert_eq!(rx.recv(), Ok(1));
        assert_eq!(tx.send_deadline(3, Instant::now() + 20 * MS), Ok(()));
        assert_eq!(rx.recv(), Ok(3));
    });
}

#[test]
fn send_deadline_on_rendezvous_completes_when_a_receiver_comes() {
    let rt = rt();
    rt.block_on(|| {
        let (tx, rx) = channel::bounded(0);
        let h = fiber::spawn(move || {
            fiber::sleep(5 * MS);
            rx.recv().unwrap()
        });
        assert_eq!(tx.send_deadline(9, Instant::now() + Duration::from_secs(10)), Ok(()));
        assert_eq!(fiber::await_fiber(h), 9);
    });
}

// ------------------------------------------------------------ futures

#[test]
fn future_wait_for_and_wait_until_report_timeout_then_ready() {
    // Boost test_future_post.cpp test_future_wait_for /
    // test_future_wait_until: timeout before set_value, ready after, and
    // the value is still there (the wait did not consume it).
    in_fiber_and_thread(|| {
        let (p, mut f) = sync::oneshot::<u32>();
        let t = Instant::now();
        assert_eq!(f.wait_for(20 * MS), FutureStatus::Timeout);
        assert!(t.elapsed() >= 20 * MS);
        assert_eq!(f.wait_until(Instant::now() + 5 * MS), FutureStatus::Timeout);
        p.set(3);
        assert_eq!(f.wait_for(20 * MS), FutureStatus::Ready);
        assert_eq!(f.wait_until(Instant::now()), FutureStatus::Ready);
        assert_eq!(f.try_get().unwrap(), 3);
    });
}

#[test]
fn future_wait_for_wakes_when_set_from_another_fiber() {
    let rt = rt();
    rt.block_on(|| {
        let (p, f) = sync::oneshot::<&str>();
        let h = fiber::spawn(move || {
            fiber::sleep(5 * MS);
            p.set("v");
        });
        assert_eq!(f.wait_for(Duration::from_secs(10)), FutureStatus::Ready);
        assert_eq!(f.wait().unwrap(), "v");
        fiber::await_fiber(h);
    });
}

#[test]
fn future_wait_until_is_ready_for_an_error_and_a_broken_promise() {
    let (p, f) = sync::oneshot::<u8>();
    p.set_error("boom");
    assert_eq!(f.wait_until(Instant::now()), FutureStatus::Ready);
    assert!(matches!(f.wait(), Err(FutureError::Failed(_))));
    let (p, f) = sync::oneshot::<u8>();
    drop(p);
    assert_eq!(f.wait_for(MS), FutureStatus::Ready);
    assert!(f.wait().unwrap_err().is_broken());
}

// ------------------------------------------------------------ semaphore, events

#[test]
fn semaphore_acquire_until_times_out_then_gets_a_released_permit() {
    in_fiber_and_thread(|| {
        let s = Semaphore::new(1);
        let p = s.acquire();
        let t = Instant::now();
        assert!(s.acquire_until(t + 20 * MS).is_none());
        assert!(t.elapsed() >= 20 * MS);
        drop(p);
        assert!(s.acquire_until(Instant::now() + 20 * MS).is_some());
        assert_eq!(s.available_permits(), 1);
    });
}

#[test]
fn events_wait_until_time_out_and_see_a_set() {
    in_fiber_and_thread(|| {
        let e = Event::new();
        let t = Instant::now();
        assert!(!e.wait_until(t + 10 * MS));
        assert!(t.elapsed() >= 10 * MS);
        e.set();
        assert!(e.wait_until(Instant::now() + 10 * MS));
        let a = AutoResetEvent::new();
        assert!(!a.wait_until(Instant::now() + 10 * MS));
        a.set();
        assert!(a.wait_until(Instant::now() + 10 * MS));
        assert!(!a.wait_until(Instant::now() + MS), "auto-reset: consumed");
    });
}
