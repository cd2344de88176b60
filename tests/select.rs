//! `select!` and `Select`, retold from the peers' own tests:
//! crossbeam-channel's `tests/select_macro.rs` and `tests/select.rs`
//! (`smoke1`, `smoke2`, `disconnected`, `default`, `timeout`,
//! `unblocks`, `both_ready`, `loop_try`, `fairness1`, `stress_recv`,
//! `stress_send`, `matching`) and Go's `chan_test.go` (`TestSelfSelect`,
//! `TestSelectFairness`, `TestSelectStress`), from fibers and threads.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::select;
use numafiber::sync::channel::{self, RecvError, SendError};
use numafiber::sync::Select;
use numafiber::{fiber, Runtime, Topology};

fn rt() -> Runtime {
    Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().expect("runtime")
}

const MS: Duration = Duration::from_millis(1);

#[test]
fn smoke_takes_the_ready_arm() {
    // crossbeam select_macro.rs smoke1.
    let (s1, r1) = channel::unbounded::<usize>();
    let (s2, r2) = channel::unbounded::<usize>();
    s1.send(1).unwrap();
    select! {
        recv(r1) -> v => assert_eq!(v, Ok(1)),
        recv(r2) -> _ => panic!("r2 is empty"),
    }
    s2.send(2).unwrap();
    select! {
        recv(r1) -> _ => panic!("r1 is empty"),
        recv(r2) -> v => assert_eq!(v, Ok(2)),
    }
}

#[test]
fn smoke_many_arms_and_default() {
    // crossbeam select_macro.rs smoke2: five receivers, the one with a
    // value is chosen; default when none.
    let chans: Vec<_> = (0..5).map(|_| channel::unbounded::<i32>()).collect();
    let (_s0, r0) = &chans[0];
    let (_s1, r1) = &chans[1];
    let (_s2, r2) = &chans[2];
    let (_s3, r3) = &chans[3];
    let (s4, r4) = &chans[4];
    s4.send(4).unwrap();
    let got = select! {
        recv(r0) -> _ => 0,
        recv(r1) -> _ => 1,
        recv(r2) -> _ => 2,
        recv(r3) -> _ => 3,
        recv(r4) -> v => { assert_eq!(v, Ok(4)); 4 }
    };
    assert_eq!(got, 4);
    let got = select! {
        recv(r0) -> _ => 0,
        recv(r4) -> _ => 4,
        default => 99,
    };
    assert_eq!(got, 99);
}

#[test]
fn disconnected_channel_is_ready_with_an_error() {
    // crossbeam select_macro.rs disconnected: a receive on a channel whose
    // senders are gone completes at once with an error, also while waiting.
    let (s1, r1) = channel::unbounded::<i32>();
    let (_s2, r2) = channel::unbounded::<i32>();
    drop(s1);
    select! {
        recv(r1) -> v => assert_eq!(v, Err(RecvError)),
        recv(r2) -> _ => panic!("r2 stays open"),
    }
    let rt = rt();
    rt.block_on(|| {
        let (s1, r1) = channel::unbounded::<i32>();
        let (_s2, r2) = channel::unbounded::<i32>();
        let h = fiber::spawn(move || {
            fiber::sleep(10 * MS);
            drop(s1);
        });
        select! {
            recv(r1) -> v => assert_eq!(v, Err(RecvError)),
            recv(r2) -> _ => panic!("r2 stays open"),
            default(Duration::from_secs(10)) => panic!("the drop wakes the select"),
        }
        fiber::await_fiber(h);
    });
}

#[test]
fn close_wakes_a_blocked_select() {
    // Go: close(c) makes every select waiting on <-c proceed.
    let rt = rt();
    rt.block_on(|| {
        let (s, r) = channel::bounded::<i32>(0);
        let (_s2, r2) = channel::bounded::<i32>(0);
        let s2 = s.clone();
        let h = fiber::spawn(move || {
            fiber::sleep(10 * MS);
            s2.close();
        });
        select! {
            recv(r) -> v => assert_eq!(v, Err(RecvError)),
            recv(r2) -> _ => panic!("r2 stays open"),
        }
        fiber::await_fiber(h);
        assert!(s.send(1).is_err());
    });
}

#[test]
fn default_and_timeout_arms() {
    // crossbeam select_macro.rs default / timeout: default when nothing is
    // ready; default(timeout) waits about that long; an Instant works too.
    let (_s, r) = channel::unbounded::<i32>();
    let hit = select! {
        recv(r) -> _ => false,
        default => true,
    };
    assert!(hit, "nothing ready: default");
    for deadline_form in [false, true] {
        let t = Instant::now();
        let got = if deadline_form {
            select! { recv(r) -> _ => 1, default(Instant::now() + 20 * MS) => 2 }
        } else {
            select! { recv(r) -> _ => 1, default(20 * MS) => 2 }
        };
        assert_eq!(got, 2);
        assert!(t.elapsed() >= 20 * MS);
    }
}

#[test]
fn timeout_arm_loses_to_a_value_sent_in_time() {
    // crossbeam select_macro.rs timeout, second half.
    let rt = rt();
    rt.block_on(|| {
        let (s, r) = channel::bounded::<i32>(0);
        let h = fiber::spawn(move || {
            fiber::sleep(5 * MS);
            s.send(7).unwrap();
        });
        let got = select! {
            recv(r) -> v => v.unwrap(),
            default(Duration::from_secs(10)) => panic!("sent in time"),
        };
        assert_eq!(got, 7);
        fiber::await_fiber(h);
    });
}

#[test]
fn send_and_recv_arms_rendezvous_with_plain_operations() {
    // crossbeam select_macro.rs unblocks: a blocked select is unblocked by
    // a plain recv (its send arm) or a plain send (its recv arm), from a
    // fiber and from a thread.
    let rt = rt();
    for thread_side in [false, true] {
        let (s1, r1) = channel::bounded::<i32>(0);
        let (s2, r2) = channel::bounded::<i32>(0);
        let other = move || {
            std::thread::sleep(5 * MS);
            assert_eq!(r1.recv(), Ok(10)); // takes the select's send
            s2.send(20).unwrap(); // feeds the next select's receive
        };
        let (h, f) = if thread_side { (Some(std::thread::spawn(other)), None) } else { (None, Some(rt.spawn(other))) };
        rt.block_on(move || {
            select! {
                send(s1, 10) -> res => assert_eq!(res, Ok(())),
                recv(r2) -> _ => panic!("nothing sent yet"),
            }
            let v = select! { recv(r2) -> v => v.unwrap() };
            assert_eq!(v, 20);
        });
        if let Some(h) = h {
            h.join().unwrap();
        }
        if let Some(f) = f {
            f.join().unwrap();
        }
    }
}

#[test]
fn two_selects_pair_on_a_rendezvous_channel() {
    // crossbeam select.rs matching: selects on both ends of zero-capacity
    // channels pair up; every value is received exactly once.
    let rt = rt();
    const N: usize = 40;
    let got = rt.block_on(|| {
        let (s, r) = channel::bounded::<usize>(0);
        let hs: Vec<_> = (0..N)
            .map(|i| {
                let (s, r) = (s.clone(), r.clone());
                fiber::spawn(move || {
                    select! {
                        send(s, i) -> res => { res.unwrap(); None }
                        recv(r) -> v => Some(v.unwrap()),
                    }
                })
            })
            .collect();
        fiber::when_all(hs)
    });
    // Every select completed either a send or a receive of another's value.
    let recvd: Vec<usize> = got.iter().flatten().copied().collect();
    let sends = got.iter().filter(|g| g.is_none()).count();
    assert_eq!(sends, recvd.len(), "each send met one receive");
    assert_eq!(sends, N / 2);
    let mut uniq = recvd.clone();
    uniq.sort();
    uniq.dedup();
    assert_eq!(uniq.len(), recvd.len(), "no value twice");
}

#[test]
fn self_select_never_pairs_with_itself() {
    // Go TestSelfSelect: one fiber selecting send and recv on the same
    // unbuffered channel must not complete with itself; two such fibers
    // pair with each other.
    let rt = rt();
    rt.block_on(|| {
        let (s, r) = channel::bounded::<usize>(0);
        let got = select! {
            send(s, 1) -> _ => "sent",
            recv(r) -> _ => "received",
            default(10 * MS) => "timeout",
        };
        assert_eq!(got, "timeout", "alone it cannot rendezvous with itself");
        let hs: Vec<_> = (0..2)
            .map(|p| {
                let (s, r) = (s.clone(), r.clone());
                fiber::spawn(move || {
                    let mut n = 0;
                    for i in 0..200 {
                        select! {
                            send(s, p * 1000 + i) -> res => res.unwrap(),
                            recv(r) -> v => assert_ne!(v.unwrap() / 1000, p, "received its own value"),
                        }
                        n += 1;
                    }
                    n
                })
            })
            .collect();
        assert_eq!(fiber::when_all(hs), [200, 200]);
    });
}

/// CPU time of the calling thread.
fn thread_cpu() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: a valid out-pointer for the calling thread's clock.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    assert_eq!(r, 0);
    Duration::new(ts.tv_sec as u64, ts.tv_nsec as u32)
}

#[test]
fn self_select_alone_parks_until_a_partner_comes() {
    // A select with a send and a receive on the same rendezvous channel
    // must not take its own entry for a partner: it parks (it does not
    // retry in a loop) until another thread receives its value.
    let (s, r) = channel::bounded::<u32>(0);
    let r2 = r.clone();
    let partner = std::thread::spawn(move || {
        std::thread::sleep(100 * MS);
        r2.recv().unwrap()
    });
    let cpu = thread_cpu();
    let got = select! {
        send(s, 5) -> res => { res.unwrap(); "sent" }
        recv(r) -> _ => "received",
    };
    let spent = thread_cpu() - cpu;
    assert_eq!(got, "sent");
    assert_eq!(partner.join().unwrap(), 5);
    assert!(spent < 50 * MS, "the select spun for {spent:?} of CPU instead of parking for 100 ms");
}

#[test]
fn fairness_two_always_ready_arms_each_40_to_60_percent() {
    // Go TestSelectFairness / crossbeam fairness1: with both arms ready
    // every time, each is chosen between 40 % and 60 % of 10,000 selects.
    let (s1, r1) = channel::unbounded::<()>();
    let (s2, r2) = channel::unbounded::<()>();
    for _ in 0..10_000 {
        s1.send(()).unwrap();
        s2.send(()).unwrap();
    }
    let mut hits = [0usize; 2];
    for _ in 0..10_000 {
        select! {
            recv(r1) -> _ => hits[0] += 1,
            recv(r2) -> _ => hits[1] += 1,
        }
    }
    assert_eq!(hits[0] + hits[1], 10_000);
    for h in hits {
        assert!((4_000..=6_000).contains(&h), "{hits:?}");
    }
}

#[test]
fn fairness_with_send_arms_in_a_fiber() {
    let rt = rt();
    let hits = rt.block_on(|| {
        let (s1, r1) = channel::unbounded::<u8>();
        let (s2, r2) = channel::unbounded::<u8>();
        let mut hits = [0usize; 2];
        for _ in 0..10_000 {
            select! {
                send(s1, 1) -> _ => hits[0] += 1,
                send(s2, 2) -> _ => hits[1] += 1,
            }
        }
        assert_eq!(r1.len() + r2.len(), 10_000);
        hits
    });
    for h in hits {
        assert!((4_000..=6_000).contains(&h), "{hits:?}");
    }
}

#[test]
fn losing_send_values_are_dropped_not_sent() {
    let (s1, r1) = channel::unbounded::<String>();
    let (s2, r2) = channel::bounded::<String>(0); // never ready
    select! {
        send(s1, "a".to_string()) -> res => res.unwrap(),
        send(s2, "b".to_string()) -> _ => panic!("no receiver"),
    }
    assert_eq!(r1.try_recv().unwrap(), "a");
    assert!(r2.try_recv().is_err());
}

#[test]
fn send_arm_on_a_disconnected_channel_returns_the_value() {
    let (s, r) = channel::unbounded::<u8>();
    drop(r);
    select! {
        send(s, 5) -> res => assert_eq!(res, Err(SendError(5))),
    }
}

#[test]
fn builder_loop_try_and_deadline() {
    // crossbeam select.rs loop_try + timeout, through the builder.
    let (s1, r1) = channel::unbounded::<i32>();
    let (s2, r2) = channel::unbounded::<i32>();
    let mut sel = Select::new();
    let i1 = sel.recv(&r1);
    let i2 = sel.recv(&r2);
    assert!(sel.try_select().is_err());
    assert!(sel.select_deadline(Instant::now() + 5 * MS).is_err());
    s2.send(2).unwrap();
    s1.send(1).unwrap();
    let mut got = Vec::new();
    for _ in 0..2 {
        let op = sel.select();
        match op.index() {
            i if i == i1 => got.push(op.recv(&r1).unwrap()),
            i if i == i2 => got.push(op.recv(&r2).unwrap()),
            _ => unreachable!(),
        }
    }
    got.sort();
    assert_eq!(got, [1, 2]);
    assert!(sel.select_timeout(MS).is_err());
}

#[test]
#[should_panic(expected = "pass the receiver of the selected operation")]
fn builder_wrong_receiver_panics() {
    let (s1, r1) = channel::unbounded::<i32>();
    let (_s2, r2) = channel::unbounded::<i32>();
    s1.send(1).unwrap();
    let mut sel = Select::new();
    sel.recv(&r1);
    let _ = sel.select().recv(&r2);
}

#[test]
fn dropped_selected_operation_gives_the_value_back() {
    let (s, r) = channel::unbounded::<i32>();
    s.send(1).unwrap();
    s.send(2).unwrap();
    let mut sel = Select::new();
    sel.recv(&r);
    drop(sel.select()); // not collected
    drop(sel);
    assert_eq!(r.try_iter().collect::<Vec<_>>(), [1, 2], "back at the front, order kept");
}

#[test]
fn stress_selects_from_fibers_and_threads_count_every_value() {
    // crossbeam select.rs stress_recv / stress_send and Go
    // TestSelectStress: producers on four channels (some buffered, some
    // rendezvous) feed consumers that select over all four, from fibers
    // and threads at once; every value arrives exactly once.
    const PER: usize = 2_000;
    let rt = rt();
    let chans: Vec<_> = [0usize, 1, 0, 8].iter().map(|&c| channel::bounded::<usize>(c)).collect();
    let txs: Vec<_> = chans.iter().map(|c| c.0.clone()).collect();
    let rxs: Vec<_> = chans.iter().map(|c| c.1.clone()).collect();
    drop(chans);
    let producers: Vec<_> = txs
        .into_iter()
        .enumerate()
        .map(|(k, tx)| rt.spawn(move || (0..PER).for_each(|i| tx.send(k * PER + i).unwrap())))
        .collect();
    let seen = Arc::new(std::sync::Mutex::new(HashMap::new()));
    let consumer = {
        let (rxs, seen) = (rxs.clone(), seen.clone());
        move || {
            // A channel leaves the select once it is over (its producer
            // finished and it is drained): a Select built per round.
            let mut open = [true; 4];
            let mut local = Vec::new();
            loop {
                let live: Vec<usize> = (0..4).filter(|&k| open[k]).collect();
                if live.is_empty() {
                    break;
                }
                let mut sel = Select::new();
                for &k in &live {
                    sel.recv(&rxs[k]);
                }
                let op = sel.select();
                let k = live[op.index()];
                match op.recv(&rxs[k]) {
                    Ok(v) => local.push(v),
                    Err(RecvError) => open[k] = false,
                }
            }
            let mut s = seen.lock().unwrap();
            for v in local {
                *s.entry(v).or_insert(0) += 1;
            }
        }
    };
    let fibers: Vec<_> = (0..3).map(|_| rt.spawn(consumer.clone())).collect();
    let threads: Vec<_> = (0..2).map(|_| std::thread::spawn(consumer.clone())).collect();
    drop(rxs);
    for p in producers {
        p.join().unwrap();
    }
    for f in fibers {
        f.join().unwrap();
    }
    for t in threads {
        t.join().unwrap();
    }
    let s = seen.lock().unwrap();
    assert_eq!(s.len(), 4 * PER, "every value arrived");
    assert!(s.values().all(|&n| n == 1), "no value twice");
}

#[test]
fn select_with_only_a_deadline_sleeps() {
    let t = Instant::now();
    let v = select! { default(10 * MS) => 3 };
    assert_eq!(v, 3);
    assert!(t.elapsed() >= 10 * MS);
}
