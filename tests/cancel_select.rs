//! Cancellation (`JoinHandle::cancel`) in the waits of `select!` and the
//! deadline calls, in the shape of `tests/cancel.rs` (may's
//! `test_*_canceled`, tokio's abort of a task parked in `select!`): each
//! victim is parked in the wait when it is cancelled, unwinds with its
//! destructors run once, and its join says it was cancelled; a value or a
//! lock granted in the same instant is passed on, never lost.

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::{settle, Tally};

use numafiber::fiber::{self, JoinHandle};
use numafiber::sync::{self, channel, Condvar, Mutex};
use numafiber::{select, Runtime};

fn rt1() -> Runtime {
    Runtime::builder().workers(1).build().unwrap()
}

/// Far enough that no deadline of these tests passes while they run, near
/// enough that a wait that is not a cancellation point ends and fails the
/// test instead of hanging it.
fn far() -> Instant {
    Instant::now() + Duration::from_secs(30)
}

/// Cancel `h` (parked by now) and check: cancelled, not a panic, the
/// victim's destructor ran once.
fn cancel_and_check<T: std::fmt::Debug>(h: JoinHandle<T>, drops: &AtomicUsize) {
    assert!(!h.is_finished(), "the victim must be parked when it is cancelled");
    h.cancel();
    let e = h.join().unwrap_err();
    assert!(e.is_cancelled() && !e.is_panic(), "{e}");
    assert_eq!(drops.load(SeqCst), 1, "the victim's destructors run exactly once");
}

// Go: a goroutine blocked in `select` that is abandoned; tokio: abort of a
// task parked in `select!`.
#[test]
fn select_waiter_cancelled_leaves_no_entry_behind() {
    rt1().block_on(|| {
        let (tx1, rx1) = channel::bounded::<u32>(0);
        let (tx2, rx2) = channel::bounded::<u32>(0);
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let h = fiber::spawn(move || {
            let _t = Tally(d);
            select! {
                recv(rx1) -> v => v.ok(),
                recv(rx2) -> v => v.ok(),
            }
        });
        settle();
        cancel_and_check(h, &drops);
        // Its entries are gone from both channels: a send finds nobody.
        assert!(tx1.try_send(1).is_err(), "the cancelled select left a receiver entry behind");
        assert!(tx2.try_send(2).is_err(), "the cancelled select left a receiver entry behind");
    });
}

/// A value handed to a parked select and the select cancelled at once:
/// the value goes back to its channel.
#[test]
fn select_value_in_flight_to_cancelled_select_is_kept() {
    rt1().block_on(|| {
        let (tx1, rx1) = channel::bounded::<u32>(4);
        let (_tx2, rx2) = channel::bounded::<u32>(4);
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let (r1, r2) = (rx1.clone(), rx2.clone());
        let h = fiber::spawn(move || {
            let _t = Tally(d);
            select! {
                recv(r1) -> v => v.ok(),
                recv(r2) -> v => v.ok(),
            }
        });
        settle();
        tx1.send(9).unwrap(); // granted to the parked select ...
        assert!(rx1.is_empty(), "the value went to the select's cell, not to the buffer");
        h.cancel(); // ... which unwinds before it reads it
        let e = h.join().unwrap_err();
        assert!(e.is_cancelled(), "{e}");
        assert_eq!(drops.load(SeqCst), 1);
        assert_eq!(rx1.try_recv().unwrap(), 9, "the value in flight was put back");
    });
}

/// A select blocked on a send arm, cancelled: its value is dropped once and
/// never received.
#[test]
fn select_sender_cancelled_drops_its_value() {
    rt1().block_on(|| {
        let (tx, rx) = channel::bounded::<Tally>(0);
        let value_drops = Arc::new(AtomicUsize::new(0));
        let drops = Arc::new(AtomicUsize::new(0));
        let (vd, d) = (value_drops.clone(), drops.clone());
        let h = fiber::spawn(move || {
            let _t = Tally(d);
            select! {
                send(tx, Tally(vd)) -> r => r.is_ok(),
                default(Duration::from_secs(30)) => false,
            }
        });
        settle();
        cancel_and_check(h, &drops);
        assert_eq!(value_drops.load(SeqCst), 1, "the value of the send arm was dropped once");
        assert!(rx.try_recv().is_err(), "and never delivered");
    });
}

/// Every deadline wait is a cancellation point: `recv_deadline`,
/// `send_deadline`, `Condvar::wait_until`, `Mutex::try_lock_until`,
/// `fiber::sleep_until`, `SharedFuture::wait_until`.
#[test]
fn deadline_waits_are_cancellation_points() {
    rt1().block_on(|| {
        // The other ends stay alive here, so the waits below really wait.
        let (tx_full, _rx_of_full) = channel::bounded::<u32>(1);
        let (_tx_of_empty, rx_empty) = channel::bounded::<u32>(1);
        tx_full.try_send(0).unwrap();
        let m = Arc::new(Mutex::new(0u32));
        let cv = Arc::new(Condvar::new());
        let (_p, f) = sync::oneshot::<u32>();
        let shared = f.share();
        let held = m.lock(); // the lock waiter below waits for this guard
        type Victim = Box<dyn FnOnce() + Send>;
        let victims: Vec<(&str, Victim)> = vec![
            ("recv_deadline", Box::new(move || assert!(rx_empty.recv_deadline(far()).is_err(), "received nothing"))),
            (
                "send_deadline",
                Box::new(move || assert!(tx_full.send_deadline(1, far()).is_err(), "the channel stays full")),
            ),
            ("try_lock_until", {
                let m = m.clone();
                Box::new(move || drop(m.try_lock_until(far())))
            }),
            ("sleep_until", Box::new(|| fiber::sleep_until(far()))),
            (
                "SharedFuture::wait_until",
                Box::new(move || {
                    let _ = shared.wait_until(far());
                }),
            ),
        ];
        for (what, v) in victims {
            let drops = Arc::new(AtomicUsize::new(0));
            let d = drops.clone();
            let h = fiber::spawn(move || {
                let _t = Tally(d);
                v();
            });
            settle();
            assert!(!h.is_finished(), "{what}: the victim must be parked");
            h.cancel();
            let e = h.join().unwrap_err();
            assert!(e.is_cancelled(), "{what}: {e}");
            assert_eq!(drops.load(SeqCst), 1, "{what}: destructors run once");
        }
        drop(held);
        // The condition variable: the waiter holds the mutex's guard while
        // it is not parked, and gets it back before it unwinds.
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let (m2, cv2) = (m.clone(), cv.clone());
        let h = fiber::spawn(move || {
            let _t = Tally(d);
            let g = m2.lock();
            let _ = cv2.wait_until(g, far());
        });
        settle();
        cancel_and_check(h, &drops);
        assert!(m.try_lock().is_some(), "the cancelled condvar waiter released the mutex");
    });
}

/// A mutex handed to a fiber parked in `try_lock_until` and the fiber
/// cancelled at once: the lock goes on to the next waiter.
#[test]
fn timed_lock_grant_and_cancel_at_once() {
    rt1().block_on(|| {
        let m = Arc::new(Mutex::new(0u32));
        let g = m.lock();
        let m1 = m.clone();
        let victim = fiber::spawn(move || {
            let g = m1.try_lock_until(far());
            g.map(|mut g| *g += 1)
        });
        settle();
        let m2 = m.clone();
        let next = fiber::spawn(move || *m2.lock() += 10);
        settle();
        drop(g); // handed to the victim ...
        victim.cancel(); // ... which unwinds before it runs
        assert!(victim.join().unwrap_err().is_cancelled());
        next.join().unwrap();
        assert_eq!(*m.lock(), 10, "the lock went on to the next waiter; the victim never ran its update");
    });
}
