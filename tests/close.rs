//! Explicit channel `close()` while both ends live, retold from the peers'
//! own tests: Go's `chan_test.go` (TestChan's "close while receivers wait",
//! TestNonblockRecvRace's closed receive, the "values sent before close
//! are received" rule of the spec) and Boost.Fiber's
//! `test_buffered_channel_post.cpp` / `test_unbuffered_channel_post.cpp`
//! (`test_closed`, `test_pop_closed`, `test_push_closed`: push on a closed
//! channel reports closed, pop drains then reports closed).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use numafiber::sync::channel::{self, RecvError, RecvTimeoutError, TryRecvError, TrySendError};
use numafiber::{fiber, Runtime, Topology};

fn rt() -> Runtime {
    Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().expect("runtime")
}

#[test]
fn values_sent_before_close_are_received_then_the_end() {
    // Go: close(c) after sending; the receiver gets every value, then
    // v, ok := <-c gives ok == false. Boost test_pop_closed.
    for cap in [Some(0), Some(1), Some(16), None] {
        let rt = rt();
        let got = rt.block_on(move || {
            let (tx, rx) = match cap {
                Some(c) => channel::bounded(c),
                None => channel::unbounded(),
            };
            let tx2 = tx.clone();
            let h = fiber::spawn(move || {
                for i in 0..100 {
                    tx2.send(i).unwrap();
                }
                assert!(tx2.close());
            });
            let got: Vec<i32> = rx.iter().collect();
            fiber::await_fiber(h);
            assert_eq!(rx.recv(), Err(RecvError));
            drop(tx); // a sender still existed the whole time
            got
        });
        assert_eq!(got, (0..100).collect::<Vec<_>>(), "cap {cap:?}");
    }
}

#[test]
fn send_after_close_fails_with_the_value_from_either_end() {
    // Boost test_push_closed: push on a closed channel returns closed.
    for close_tx in [true, false] {
        let (tx, rx) = channel::bounded(4);
        tx.send(1).unwrap();
        if close_tx {
            assert!(tx.close());
        } else {
            assert!(rx.close());
        }
        assert!(!tx.close() && !rx.close(), "second close reports already closed");
        assert!(tx.is_closed() && rx.is_closed());
        assert_eq!(tx.send(2).unwrap_err().0, 2);
        assert_eq!(tx.try_send(3), Err(TrySendError::Disconnected(3)));
        assert_eq!(tx.send_timeout(4, Duration::from_millis(1)), Err(TrySendError::Disconnected(4)));
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
        assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Err(RecvTimeoutError::Disconnected));
    }
}

#[test]
fn close_wakes_every_blocked_receiver() {
    // Go TestChan: "close while receivers are parked" - each gets the
    // zero/!ok result, none hangs.
    let rt = rt();
    let ended = Arc::new(AtomicUsize::new(0));
    let e2 = ended.clone();
    rt.block_on(move || {
        let (tx, rx) = channel::bounded::<u8>(0);
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let (rx, e) = (rx.clone(), e2.clone());
                fiber::spawn(move || {
                    assert_eq!(rx.recv(), Err(RecvError));
                    e.fetch_add(1, SeqCst);
                })
            })
            .collect();
        fiber::sleep(Duration::from_millis(10)); // let them park
        tx.close();
        fiber::when_all(hs);
    });
    assert_eq!(ended.load(SeqCst), 8);
}

#[test]
fn close_fails_every_blocked_sender_with_its_value() {
    // Blocked sends did not complete before the close: they fail and
    // give their values back; nothing blocked is received afterwards.
    let rt = rt();
    rt.block_on(|| {
        let (tx, rx) = channel::bounded::<usize>(1);
        tx.send(100).unwrap(); // fills the buffer
        let hs: Vec<_> = (0..6)
            .map(|i| {
                let tx = tx.clone();
                fiber::spawn(move || tx.send(i).map_err(|e| e.0))
            })
            .collect();
        fiber::sleep(Duration::from_millis(10));
        rx.close();
        let mut back: Vec<usize> =
            fiber::when_all(hs).into_iter().map(|r| r.expect_err("blocked send fails")).collect();
        back.sort();
        assert_eq!(back, (0..6).collect::<Vec<_>>());
        assert_eq!(rx.recv(), Ok(100), "the value sent before the close");
        assert_eq!(rx.recv(), Err(RecvError));
    });
}

#[test]
fn close_from_a_thread_while_fibers_and_threads_wait() {
    let rt = rt();
    let (tx, rx) = channel::unbounded::<u32>();
    let fibers: Vec<_> = (0..4)
        .map(|_| {
            let rx = rx.clone();
            rt.spawn(move || rx.iter().count())
        })
        .collect();
    let threads: Vec<_> = (0..2)
        .map(|_| {
            let rx = rx.clone();
            std::thread::spawn(move || rx.iter().count())
        })
        .collect();
    for i in 0..1000 {
        tx.send(i).unwrap();
    }
    std::thread::sleep(Duration::from_millis(10));
    rx.close(); // a receiver closes: senders and receivers all see it
    let n: usize = fibers.into_iter().map(|h| h.join().unwrap()).sum::<usize>()
        + threads.into_iter().map(|t| t.join().unwrap()).sum::<usize>();
    assert_eq!(n, 1000, "every value sent before the close was received once");
    assert!(tx.send(0).is_err());
}

#[test]
fn close_racing_sends_loses_and_duplicates_nothing() {
    // Every send either succeeded (and its value is received exactly
    // once) or failed with its value back.
    for round in 0..20 {
        let rt = rt();
        let (tx, rx) = channel::bounded::<usize>(if round % 2 == 0 { 0 } else { 3 });
        let senders: Vec<_> = (0..4)
            .map(|s| {
                let tx = tx.clone();
                rt.spawn(move || {
                    let mut ok = Vec::new();
                    for i in 0..200 {
                        match tx.send(s * 1000 + i) {
                            Ok(()) => ok.push(s * 1000 + i),
                            Err(e) => assert_eq!(e.0, s * 1000 + i),
                        }
                    }
                    ok
                })
            })
            .collect();
        let rx2 = rx.clone();
        let receiver = rt.spawn(move || rx2.iter().collect::<Vec<_>>());
        std::thread::sleep(Duration::from_micros(200 * round as u64));
        tx.close();
        let mut sent: Vec<usize> = senders.into_iter().flat_map(|h| h.join().unwrap()).collect();
        let mut got = receiver.join().unwrap();
        sent.sort();
        got.sort();
        assert_eq!(sent, got, "round {round}");
    }
}
