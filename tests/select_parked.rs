//! A `select!` that parks: what wakes it and which arm it hands over.
//! Go's `chan_test.go` `TestPseudoRandomSend`, and a select parked on a
//! send arm whose channel is closed or loses its last receiver, on one and
//! two workers.

mod common;

use std::time::Duration;

use numafiber::select;
use numafiber::sync::channel::{self, SendError};
use numafiber::{fiber, Runtime, Topology};

use common::within;

fn rt(workers: usize) -> Runtime {
    Runtime::builder().workers(workers).topology(Topology::uniform(1, workers)).build().expect("runtime")
}

/// How the receiving side of the parked send arm goes away.
#[derive(Clone, Copy, Debug)]
enum End {
    Close,
    DropLastReceiver,
}

/// A fiber parks in a select on a send arm (and a receive arm that never
/// becomes ready); the receiving side then ends. The send arm must
/// complete with its value back.
fn parked_send_arm_sees_the_end(workers: usize, end: End) {
    let got = within(20, &format!("a select parked on a send arm, {end:?}, {workers} worker(s)"), move || {
        rt(workers).block_on(move || {
            let (tx, rx) = channel::bounded::<u32>(0);
            let (_keep, never) = channel::bounded::<u32>(0);
            let h = fiber::spawn(move || {
                select! {
                    send(tx, 6) -> r => r,
                    recv(never) -> _ => panic!("nothing is ever sent on `never`"),
                }
            });
            fiber::sleep(Duration::from_millis(30));
            match end {
                End::Close => {
                    rx.close();
                }
                End::DropLastReceiver => drop(rx),
            }
            h.join().expect("the selecting fiber returns")
        })
    });
    assert_eq!(got, Err(SendError(6)), "{end:?}, {workers} worker(s): the value comes back");
}

#[test]
fn parked_send_arm_wakes_on_close_one_worker() {
    parked_send_arm_sees_the_end(1, End::Close);
}

#[test]
fn parked_send_arm_wakes_on_close_two_workers() {
    parked_send_arm_sees_the_end(2, End::Close);
}

#[test]
fn parked_send_arm_wakes_when_the_last_receiver_drops_one_worker() {
    parked_send_arm_sees_the_end(1, End::DropLastReceiver);
}

#[test]
fn parked_send_arm_wakes_when_the_last_receiver_drops_two_workers() {
    parked_send_arm_sees_the_end(2, End::DropLastReceiver);
}

/// Go's `TestPseudoRandomSend`: a select with two send arms on one channel
/// (`c <- 1` and `c <- 0`) runs 100 times against a receiver that yields
/// before each of its 100 receives; each value must be chosen a fair
/// number of times. At capacity 0 the select mostly parks before the
/// receiver comes, so this checks the parked choice; at capacity 100
/// every send is ready at once, which checks the ready choice.
///
/// The bound: with a fair choice the count of ones is Binomial(100, 1/2),
/// and P(count < 10) = P(count > 90) is about 1.7e-18, so a correct
/// select fails this check (either value fewer than 10 times) with
/// probability about 3.3e-18 per round. An implementation that always
/// hands over one arm fails it every time.
fn pseudo_random_send(workers: usize) {
    const N: usize = 100;
    const AT_LEAST: usize = 10;
    for cap in [0, N] {
        let got = within(60, &format!("pseudo-random send, capacity {cap}, {workers} worker(s)"), move || {
            rt(workers).block_on(move || {
                let (tx, rx) = channel::bounded::<usize>(cap);
                let reader = fiber::spawn(move || {
                    (0..N)
                        .map(|_| {
                            fiber::yield_now();
                            rx.recv().expect("the selecting side sends 100 values")
                        })
                        .collect::<Vec<_>>()
                });
                for _ in 0..N {
                    select! {
                        send(tx, 1) -> r => r.unwrap(),
                        send(tx, 0) -> r => r.unwrap(),
                    }
                }
                reader.join().expect("the reader returns")
            })
        });
        let ones = got.iter().sum::<usize>();
        let zeros = N - ones;
        assert!(
            ones >= AT_LEAST && zeros >= AT_LEAST,
            "want a pseudo-random choice, got {zeros} zeros and {ones} ones (capacity {cap}, {workers} worker(s))"
        );
    }
}

#[test]
fn pseudo_random_send_one_worker() {
    pseudo_random_send(1);
}

#[test]
fn pseudo_random_send_two_workers() {
    pseudo_random_send(2);
}

/// Go's nil channel: an arm on `channel::never()` (receive) or
/// `channel::never_sender()` (send) is never chosen; the select waits for
/// its other arm, and a plain wait on it only ends by a deadline.
#[test]
fn never_ends_are_never_chosen() {
    within(20, "never() arms", || {
        rt(2).block_on(|| {
            let off_rx = channel::never::<u32>();
            let off_tx = channel::never_sender::<u32>();
            let (tx, rx) = channel::bounded::<u32>(0);
            let h = fiber::spawn(move || {
                fiber::sleep(Duration::from_millis(20));
                tx.send(5).unwrap();
            });
            for _ in 0..3 {
                let ready = select! {
                    recv(off_rx) -> _ => "never (receive)",
                    send(off_tx, 1) -> _ => "never (send)",
                    default => "none",
                };
                assert_eq!(ready, "none");
            }
            let got = select! {
                recv(off_rx) -> _ => panic!("a never() receiver was chosen"),
                send(off_tx, 1) -> _ => panic!("a never_sender() was chosen"),
                recv(rx) -> v => v,
            };
            assert_eq!(got, Ok(5));
            h.join().unwrap();
            assert!(off_rx.recv_timeout(Duration::from_millis(5)).is_err());
            assert!(off_tx.send_timeout(2, Duration::from_millis(5)).is_err());
            assert!(!off_rx.is_closed() && !off_tx.is_closed());
        })
    });
}

/// `select! {}` parks forever (Go's `select {}`) and is a cancellation
/// point: `cancel` unwinds it, on one and two workers.
#[test]
fn empty_select_parks_until_cancelled() {
    for workers in [1, 2] {
        within(20, &format!("select! {{}} and cancel, {workers} worker(s)"), move || {
            rt(workers).block_on(|| {
                let h = fiber::spawn(|| -> u32 {
                    select! {}
                });
                fiber::sleep(Duration::from_millis(20));
                assert!(!h.is_finished(), "select! {{}} returned");
                h.cancel();
                let e = h.join().expect_err("a cancelled select! {} does not return");
                assert!(e.is_cancelled(), "{e:?}");
                // A deadline too far for an `Instant` never comes: the same.
                let h = fiber::spawn(|| select! { default(Duration::MAX) => 1u32 });
                fiber::sleep(Duration::from_millis(20));
                assert!(!h.is_finished(), "a deadline that never comes passed");
                h.cancel();
                assert!(h.join().expect_err("cancelled").is_cancelled());
            })
        });
    }
}

/// A fiber still parked in `select! {}` when its runtime is dropped is
/// destroyed like any parked fiber (its destructors run once), on one and
/// two workers.
#[test]
fn empty_select_is_destroyed_at_shutdown() {
    for workers in [1, 2] {
        let drops = within(20, &format!("select! {{}} at shutdown, {workers} worker(s)"), move || {
            let n = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let rt = rt(workers);
            let tally = common::Tally(n.clone());
            rt.block_on(move || {
                drop(fiber::spawn(move || {
                    let _t = tally;
                    select! {}
                }));
                fiber::sleep(Duration::from_millis(10));
            });
            drop(rt);
            n.load(std::sync::atomic::Ordering::SeqCst)
        });
        assert_eq!(drops, 1, "{workers} worker(s): the parked fiber's locals dropped once");
    }
}
