//! Cancellation (`JoinHandle::cancel`) in every kind of wait, in the shape
//! of the peers' own tests: may's `test_mutex_canceled` and
//! `test_mutex_canceled_by_other_wait` (and the same for its condvar,
//! rwlock, semaphore and I/O waits), tokio's `abort` tests (abort before
//! the first poll, after completion, of a task parked on a channel), and
//! Boost.Fiber's interruption points. Each victim keeps a `Tally` on its
//! stack: its destructor must run exactly once. No test here panics on
//! purpose, so the panic hook must never run (a cancellation is not shown
//! as a panic).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Once};
use std::time::{Duration, Instant};

mod common;
use common::{settle, Tally};

use numafiber::fiber::{self, JoinHandle, JoinSet};
use numafiber::sync::{self, AutoResetEvent, Barrier, Condvar, Event, Mutex, RwLock, Semaphore, WaitGroup};
use numafiber::Runtime;

static HOOK: Once = Once::new();
static PANICS: AtomicUsize = AtomicUsize::new(0);

/// A one-worker runtime (deterministic interleaving through yields), with
/// a panic hook that counts.
fn rt1() -> Runtime {
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, SeqCst);
            prev(info)
        }));
    });
    Runtime::builder().workers(1).build().unwrap()
}

fn tally() -> (Arc<AtomicUsize>, impl FnOnce() -> Tally) {
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    (n, move || Tally(n2))
}

/// Cancel `h` (parked by now), join it, and check: cancelled, not a panic,
/// its stack's destructors ran once, no panic hook ran.
fn cancel_and_check<T: std::fmt::Debug>(h: JoinHandle<T>, drops: &AtomicUsize) {
    if h.is_finished() {
        let id = h.id();
        panic!("the victim (fiber {id}) must be parked when it is cancelled, but it ended: {:?}", h.join());
    }
    let panics = PANICS.load(SeqCst);
    h.cancel();
    let e = h.join().unwrap_err();
    assert!(e.is_cancelled(), "{e}");
    assert!(!e.is_panic());
    assert_eq!(drops.load(SeqCst), 1, "the victim's destructors run exactly once");
    assert_eq!(PANICS.load(SeqCst), panics, "a cancellation is not reported as a panic");
}

// may: test_mutex_canceled
#[test]
fn mutex_waiter_cancelled() {
    rt1().block_on(|| {
        let m = Arc::new(Mutex::new(0));
        let g = m.lock();
        let (drops, t) = tally();
        let m1 = m.clone();
        let h1 = fiber::spawn(move || {
            let _t = t();
            *m1.lock() += 1;
        });
        let m2 = m.clone();
        let h2 = fiber::spawn(move || {
            settle(); // let h1 queue first
            *m2.lock() += 1;
        });
        settle();
        cancel_and_check(h1, &drops);
        drop(g);
        h2.join().unwrap();
        assert_eq!(*m.lock(), 1);
    });
}

// may: test_mutex_canceled_by_other_wait (cancelled while holding the lock)
#[test]
fn mutex_holder_cancelled_releases_it() {
    rt1().block_on(|| {
        let m = Arc::new(Mutex::new(0));
        let g = m.lock();
        let (drops, t) = tally();
        let m1 = m.clone();
        let h1 = fiber::spawn(move || {
            let _t = t();
            let mut g = m1.lock();
            fiber::sleep(Duration::from_secs(10_000)); // holding the lock
            *g += 1;
        });
        let m2 = m.clone();
        let h2 = fiber::spawn(move || {
            settle();
            *m2.lock() += 1;
        });
        settle();
        drop(g); // h1 gets the lock
        settle(); // ... and sleeps with it; h2 waits
        assert!(m.is_locked());
        cancel_and_check(h1, &drops);
        h2.join().unwrap();
        assert_eq!(*m.lock(), 1, "the guard was dropped by the unwind, not leaked");
    });
}

/// A waiter granted the lock and cancelled at the same instant passes the
/// lock on: nobody is left waiting for a lock nobody holds.
#[test]
fn mutex_grant_and_cancel_at_once() {
    rt1().block_on(|| {
        let m = Arc::new(Mutex::new(0));
        let g = m.lock();
        let (drops, t) = tally();
        let m1 = m.clone();
        let h1 = fiber::spawn(move || {
            let _t = t();
            *m1.lock() += 100;
        });
        let m2 = m.clone();
        let h2 = fiber::spawn(move || {
            settle();
            *m2.lock() += 1;
        });
        settle();
        drop(g); // grants h1 (it is queued first) ...
        h1.cancel(); // ... which is cancelled before it runs again
        let e = h1.join().unwrap_err();
        assert!(e.is_cancelled());
        assert_eq!(drops.load(SeqCst), 1);
        h2.join().unwrap();
        assert_eq!(*m.lock(), 1, "h1 never ran its critical section; h2 got the lock passed on");
    });
}

// may: test_condvar_canceled
#[test]
fn condvar_waiter_cancelled() {
    rt1().block_on(|| {
        let pair = Arc::new((Mutex::new(false), Condvar::new()));
        let (drops, t) = tally();
        let p1 = pair.clone();
        let h1 = fiber::spawn(move || {
            let _t = t();
            let (m, cv) = &*p1;
            let mut g = m.lock();
            while !*g {
                g = cv.wait(g);
            }
        });
        settle();
        cancel_and_check(h1, &drops);
        assert!(pair.0.try_lock().is_some(), "the mutex is not left locked by the cancelled waiter");
    });
}

/// notify_one and cancel at once: the notification goes on to the next
/// waiter (may: the condvar test where a cancelled waiter must not eat the
/// signal).
#[test]
fn condvar_notify_and_cancel_at_once() {
    rt1().block_on(|| {
        let pair = Arc::new((Mutex::new(0u32), Condvar::new()));
        let (drops, t) = tally();
        let p1 = pair.clone();
        let h1 = fiber::spawn(move || {
            let _t = t();
            let (m, cv) = &*p1;
            let g = m.lock();
            let _g = cv.wait(g);
        });
        settle(); // h1 waits first
        let p2 = pair.clone();
        let h2 = fiber::spawn(move || {
            let (m, cv) = &*p2;
            let g = m.lock();
            let _g = cv.wait(g); // ends only if the notification reaches it
        });
        settle(); // h2 waits second
        pair.1.notify_one(); // to h1, the first in the queue
        h1.cancel();
        assert!(h1.join().unwrap_err().is_cancelled());
        assert_eq!(drops.load(SeqCst), 1);
        h2.join().unwrap();
    });
}

#[test]
fn rwlock_waiters_cancelled() {
    rt1().block_on(|| {
        let l = Arc::new(RwLock::new(0));
        let w = l.write();
        let (d1, t1) = tally();
        let (d2, t2) = tally();
        let (l1, l2) = (l.clone(), l.clone());
        let reader = fiber::spawn(move || {
            let _t = t1();
            *l1.read()
        });
        let writer = fiber::spawn(move || {
            let _t = t2();
            *l2.write() += 1;
        });
        settle();
        cancel_and_check(reader, &d1);
        cancel_and_check(writer, &d2);
        drop(w);
        assert_eq!(*l.read(), 0);
        assert!(l.try_write().is_some(), "no reader or writer is left registered");
    });
}

// may: test_semphore_canceled
#[test]
fn semaphore_waiter_cancelled() {
    rt1().block_on(|| {
        let s = Arc::new(Semaphore::new(0));
        let (drops, t) = tally();
        let s1 = s.clone();
        let h = fiber::spawn(move || {
            let _t = t();
            let _p = s1.acquire();
        });
        settle();
        cancel_and_check(h, &drops);
        s.add_permits(1);
        assert_eq!(s.available_permits(), 1, "the cancelled waiter took no permit");
    });
}

#[test]
fn semaphore_grant_and_cancel_at_once() {
    rt1().block_on(|| {
        let s = Arc::new(Semaphore::new(0));
        let (drops, t) = tally();
        let s1 = s.clone();
        let h = fiber::spawn(move || {
            let _t = t();
            s1.acquire().forget(); // would keep the permit if it ran on
        });
        settle();
        s.add_permits(1); // granted to the waiter ...
        h.cancel(); // ... which unwinds before it runs again
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(drops.load(SeqCst), 1);
        assert_eq!(s.available_permits(), 1, "the granted permit was given back");
    });
}

#[test]
fn channel_receiver_cancelled() {
    rt1().block_on(|| {
        let (tx, rx) = sync::channel::bounded::<u32>(4);
        let (drops, t) = tally();
        let rx1 = rx.clone();
        let h = fiber::spawn(move || {
            let _t = t();
            rx1.recv()
        });
        settle();
        cancel_and_check(h, &drops);
        tx.send(5).unwrap();
        assert_eq!(rx.try_recv().unwrap(), 5, "the value was not handed to the cancelled receiver");
    });
}

/// A value put into a parked receiver's cell and the receiver cancelled at
/// once: the value goes back to the channel.
#[test]
fn channel_value_in_flight_to_cancelled_receiver_is_kept() {
    rt1().block_on(|| {
        let (tx, rx) = sync::channel::bounded::<u32>(4);
        let (drops, t) = tally();
        let rx1 = rx.clone();
        let h = fiber::spawn(move || {
            let _t = t();
            rx1.recv()
        });
        settle();
        tx.send(9).unwrap(); // handed to the parked receiver ...
        h.cancel(); // ... which unwinds before it takes it
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(drops.load(SeqCst), 1);
        assert_eq!(rx.try_recv().unwrap(), 9, "the value in flight was put back");
    });
}

/// A blocked sender cancelled: its value is dropped, once, and never
/// received.
#[test]
fn channel_sender_cancelled_drops_its_value() {
    rt1().block_on(|| {
        let (tx, rx) = sync::channel::bounded::<Tally>(0);
        let (value_drops, v) = tally();
        let (drops, t) = tally();
        let h = fiber::spawn(move || {
            let _t = t();
            tx.send(v()).ok();
        });
        settle();
        cancel_and_check(h, &drops);
        assert_eq!(value_drops.load(SeqCst), 1, "the value being sent was dropped once");
        assert!(rx.try_recv().is_err(), "and never delivered");
    });
}

#[test]
fn barrier_waitgroup_event_waiters_cancelled() {
    rt1().block_on(|| {
        let b = Arc::new(Barrier::new(2));
        let wg = Arc::new(WaitGroup::new());
        wg.add(1);
        let ev = Arc::new(Event::new());
        let are = Arc::new(AutoResetEvent::new());
        let (_p, fut) = sync::oneshot::<u32>();
        let mut victims = Vec::new();
        let mut tallies = Vec::new();
        macro_rules! victim {
            ($body:expr) => {{
                let (d, t) = tally();
                tallies.push(d);
                victims.push(fiber::spawn(move || {
                    let _t = t();
                    $body;
                }));
            }};
        }
        let b1 = b.clone();
        victim!(b1.wait());
        let wg1 = wg.clone();
        victim!(wg1.wait());
        let ev1 = ev.clone();
        victim!(ev1.wait());
        let are1 = are.clone();
        victim!(are1.wait());
        victim!(fut.wait().ok());
        settle();
        for (h, d) in victims.into_iter().zip(&tallies) {
            cancel_and_check(h, d);
        }
        // The primitives still work: the barrier needs two new arrivals.
        let b2 = b.clone();
        let other = fiber::spawn(move || b2.wait().is_leader());
        let leader = b.wait().is_leader();
        assert!(leader != other.join().unwrap(), "one leader among the two live arrivals");
        are.set();
        assert!(are.wait_timeout(Duration::from_millis(1)), "the set was not eaten by a cancelled waiter");
    });
}

#[test]
fn sleep_join_joinset_park_blocking_cancelled() {
    rt1().block_on(|| {
        let gate = Arc::new(Event::new());
        let (d1, t1) = tally();
        let sleeper = fiber::spawn(move || {
            let _t = t1();
            fiber::sleep(Duration::from_secs(3600));
        });
        let (d2, t2) = tally();
        let g2 = gate.clone();
        let joiner = fiber::spawn(move || {
            let _t = t2();
            let g = g2.clone();
            fiber::spawn(move || g.wait()).join().ok();
        });
        let (d3, t3) = tally();
        let g3 = gate.clone();
        let set_waiter = fiber::spawn(move || {
            let _t = t3();
            let mut set = JoinSet::new();
            set.spawn(move || g3.wait());
            set.join_next();
        });
        let (d4, t4) = tally();
        let parker = fiber::spawn(move || {
            let _t = t4();
            loop {
                fiber::park();
            }
        });
        // `spawn_blocking`'s own fiber waits for its helper thread.
        let g5 = gate.clone();
        let blocker = fiber::spawn_blocking(move || {
            while !g5.is_set() {
                std::thread::sleep(Duration::from_millis(1));
            }
        });
        let (d6, t6) = tally();
        let pending = fiber::spawn(move || {
            let _t = t6();
            fiber::block_on_future(std::future::pending::<()>());
        });
        settle();
        let t = Instant::now();
        cancel_and_check(sleeper, &d1);
        assert!(t.elapsed() < Duration::from_secs(60), "the sleep ended at the cancellation");
        cancel_and_check(joiner, &d2);
        cancel_and_check(set_waiter, &d3);
        cancel_and_check(parker, &d4);
        assert!(!blocker.is_finished());
        blocker.cancel();
        assert!(blocker.join().unwrap_err().is_cancelled(), "the wait for the helper thread was cancelled");
        cancel_and_check(pending, &d6);
        gate.set(); // the joined children and the blocking call end now
    });
}

#[test]
fn socket_accept_and_read_cancelled() {
    rt1().block_on(|| {
        let l = numafiber::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let (d1, t1) = tally();
        let acceptor = fiber::spawn(move || {
            let _t = t1();
            l.accept().map(|_| ())
        });
        // A connection nobody writes to: its reader parks in read.
        let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let saddr = server.local_addr().unwrap();
        let (d2, t2) = tally();
        let reader = fiber::spawn(move || {
            let _t = t2();
            let mut s = numafiber::net::TcpStream::connect(saddr).unwrap();
            let mut b = [0u8; 1];
            std::io::Read::read(&mut s, &mut b).map(|_| ())
        });
        settle(); // the reader connects (the kernel completes it) and parks in read
        let (_peer, _) = server.accept().unwrap(); // already connected: returns at once
        settle();
        cancel_and_check(acceptor, &d1);
        cancel_and_check(reader, &d2);
        // The listener's address is free again: the cancelled fiber dropped it.
        assert!(numafiber::net::TcpListener::bind(addr).is_ok());
    });
}

// tokio: abort before the first poll
#[test]
fn cancelled_before_it_starts_never_runs() {
    rt1().block_on(|| {
        let ran = Arc::new(AtomicUsize::new(0));
        let r = ran.clone();
        let h = fiber::spawn(move || {
            r.fetch_add(1, SeqCst);
        });
        h.cancel(); // still queued: this fiber has not yielded
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(ran.load(SeqCst), 0);
    });
}

// tokio: abort after completion
#[test]
fn cancel_after_finish_keeps_the_result() {
    rt1().block_on(|| {
        let h = fiber::spawn(|| 5);
        settle();
        assert!(h.is_finished());
        h.cancel();
        assert_eq!(h.join().unwrap(), 5);
    });
}

#[test]
fn cancel_is_idempotent_and_works_from_a_plain_thread() {
    let rt = rt1();
    let ev = Arc::new(Event::new());
    let e = ev.clone();
    let h = rt.spawn(move || e.wait());
    std::thread::sleep(Duration::from_millis(20));
    h.cancel();
    h.cancel();
    assert!(h.join().unwrap_err().is_cancelled());
}

#[test]
fn shield_defers_cancellation_to_the_next_point() {
    rt1().block_on(|| {
        let (tx, rx) = sync::channel::bounded::<u32>(0);
        let got = Arc::new(AtomicUsize::new(0));
        let g = got.clone();
        let h = fiber::spawn(move || {
            let v = fiber::shield(|| rx.recv().unwrap());
            g.store(v as usize, SeqCst);
            assert!(fiber::is_cancelled());
            fiber::yield_now(); // a cancellation point: unwinds here
            unreachable!("cancelled at the yield");
        });
        settle();
        h.cancel();
        settle();
        assert!(!h.is_finished(), "shielded: still waiting in recv");
        tx.send(7).unwrap();
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(got.load(SeqCst), 7);
    });
}

#[test]
fn catch_unwind_sees_the_cancelled_payload() {
    rt1().block_on(|| {
        let ev = Arc::new(Event::new());
        let e = ev.clone();
        let h = fiber::spawn(move || {
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| e.wait()));
            let p = r.unwrap_err();
            assert!(p.is::<fiber::Cancelled>());
            "caught" // swallowed: the fiber ends normally
        });
        settle();
        h.cancel();
        assert_eq!(h.join().unwrap(), "caught");
    });
}

#[test]
fn join_set_cancel_all() {
    rt1().block_on(|| {
        let ev = Arc::new(Event::new());
        let drops = Arc::new(AtomicUsize::new(0));
        let mut set = JoinSet::new();
        for _ in 0..5 {
            let (e, d) = (ev.clone(), drops.clone());
            set.spawn(move || {
                let _t = Tally(d);
                e.wait();
            });
        }
        settle();
        set.cancel_all();
        let mut n = 0;
        while let Some(r) = set.join_next() {
            assert!(r.unwrap_err().is_cancelled());
            n += 1;
        }
        assert_eq!((n, drops.load(SeqCst)), (5, 5));
    });
}

/// A cancelled scope owner cancels its children, waits for them (they
/// borrow its frame), then unwinds.
#[test]
fn cancelled_scope_cancels_its_children() {
    rt1().block_on(|| {
        let ev = Arc::new(Event::new());
        let drops = Arc::new(AtomicUsize::new(0));
        let (e, d) = (ev.clone(), drops.clone());
        let owner = fiber::spawn(move || {
            let local = Tally(d.clone());
            fiber::scope(|s| {
                for _ in 0..3 {
                    let (e, d, local) = (&e, &d, &local);
                    s.spawn(move || {
                        let _t = Tally(d.clone());
                        let _borrow = local;
                        e.wait();
                    });
                }
                e.wait();
            });
        });
        settle();
        owner.cancel();
        assert!(owner.join().unwrap_err().is_cancelled());
        assert_eq!(drops.load(SeqCst), 4, "three children and the owner's local, each dropped once");
    });
}

#[test]
fn when_any_cancel_rest_cancels_the_losers() {
    rt1().block_on(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let ev = Arc::new(Event::new());
        let mut hs = Vec::new();
        for i in 0..4u32 {
            let (e, t) = (ev.clone(), Tally(drops.clone()));
            hs.push(fiber::spawn(move || {
                let _t = t; // dropped once: at the end, the unwind, or unrun
                if i != 2 {
                    e.wait();
                }
                i
            }));
        }
        assert_eq!(fiber::when_any_cancel_rest(hs), (2, 2));
        settle(); // the losers unwind at their next run
        assert_eq!(drops.load(SeqCst), 4);
    });
}

/// Stress on 2 workers: fibers increment a counter under a mutex, half
/// of them are cancelled at random moments. Every fiber ends (counted),
/// the lock is free at the end, and the counter equals the increments that
/// completed (no critical section half-done, no grant lost).
#[test]
fn stampede_lock_handoff_vs_cancel() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.block_on(|| {
        const FIBERS: usize = 64;
        const ROUNDS: usize = 200;
        let m = Arc::new(Mutex::new(0usize));
        let done = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..FIBERS)
            .map(|_| {
                let (m, done) = (m.clone(), done.clone());
                fiber::spawn(move || {
                    for _ in 0..ROUNDS {
                        let mut g = m.lock();
                        *g += 1;
                        done.fetch_add(1, SeqCst);
                        drop(g);
                        fiber::yield_now();
                    }
                })
            })
            .collect();
        for (i, h) in hs.iter().enumerate() {
            if i % 2 == 0 {
                h.cancel();
            }
            fiber::yield_now();
        }
        let (mut ok, mut cancelled) = (0, 0);
        for h in hs {
            match h.join() {
                Ok(()) => ok += 1,
                Err(e) => {
                    assert!(e.is_cancelled(), "{e}");
                    cancelled += 1
                }
            }
        }
        assert_eq!(ok + cancelled, FIBERS);
        assert!(ok >= FIBERS / 2, "the uncancelled half finished");
        assert!(m.try_lock().is_some(), "nobody holds the lock at the end");
        assert_eq!(*m.lock(), done.load(SeqCst), "every completed increment counted, none half-done");
    });
}

/// The next suspension after a cancellation that was caught, or deferred
/// by a shield whose wait consumed the wake-up, unwinds again: the flag
/// stays set and every park checks it on entry. One `cancel()` is enough,
/// for `sleep`, `Event::wait` and `fiber::park`, and for the same waits in
/// a fresh loop of the fiber. A hang here fails after the timeout.
#[test]
fn a_caught_or_shielded_cancellation_unwinds_at_the_next_park() {
    common::within(60, "cancellations unwind at the next park", || {
        let rt = rt1();
        for deferred_by_shield in [false, true] {
            for next in 0..3 {
                rt.block_on(|| {
                    let first = Arc::new(Event::new());
                    let f = first.clone();
                    let (d, t) = tally();
                    let never = Arc::new(Event::new());
                    let n = never.clone();
                    let h = fiber::spawn(move || {
                        let _t = t();
                        if deferred_by_shield {
                            // The cancellation wakes this wait, which parks
                            // again (shielded) until `first` is set.
                            fiber::shield(|| f.wait());
                        } else {
                            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f.wait()));
                            assert!(r.unwrap_err().is::<fiber::Cancelled>());
                        }
                        assert!(fiber::is_cancelled());
                        match next {
                            0 => fiber::sleep(Duration::from_secs(3600)),
                            1 => n.wait(),
                            _ => loop {
                                fiber::park();
                            },
                        }
                        unreachable!("the next park unwinds");
                    });
                    settle();
                    let panics = PANICS.load(SeqCst);
                    h.cancel(); // once
                    settle();
                    if deferred_by_shield {
                        assert!(!h.is_finished(), "shielded: still waiting");
                        first.set();
                    }
                    let e = h.join().unwrap_err();
                    assert!(e.is_cancelled(), "shield {deferred_by_shield}, wait {next}: {e}");
                    assert_eq!(d.load(SeqCst), 1);
                    assert_eq!(PANICS.load(SeqCst), panics);
                    drop(never);
                });
            }
        }
    });
}

/// A fiber cancelled inside `fiber::join` cancels the stolen closure (it
/// runs as a fiber of its own, on the owner's worker or a thief's), waits
/// for it to unwind, and then unwinds itself, as a scope does with its
/// children. Both closures' destructors run once. A hang fails after the
/// timeout (before, the join waited for the hour).
#[test]
fn cancelled_join_cancels_its_stolen_closure() {
    common::within(60, "a cancelled fiber::join", || {
        for workers in [2, 1] {
            let rt = Runtime::builder().workers(workers).build().unwrap();
            rt.block_on(|| {
                let (d, t) = tally();
                let (ta, tb) = (t(), Tally(d.clone()));
                let h = fiber::spawn(move || {
                    fiber::join(
                        move || {
                            let _t = ta;
                            fiber::sleep(Duration::from_secs(3600))
                        },
                        move || {
                            let _t = tb;
                            fiber::sleep(Duration::from_secs(3600))
                        },
                    );
                    unreachable!("cancelled in the join");
                });
                fiber::sleep(Duration::from_millis(50));
                assert!(!h.is_finished());
                h.cancel();
                let e = h.join().unwrap_err();
                assert!(e.is_cancelled(), "{workers} workers: {e}");
                assert_eq!(d.load(SeqCst), 2, "both closures unwound once");
            });
        }
    });
}

/// The closure cancelled while `a` computes (no cancellation point in it)
/// is not waited for either: the owner passes the cancellation on as soon
/// as it finds its job stolen. A join inside a shield is not cancelled.
#[test]
fn join_cancelled_while_computing_and_shielded_join() {
    common::within(60, "a join cancelled while computing", || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        rt.block_on(|| {
            let go = Arc::new(std::sync::atomic::AtomicBool::new(false));
            let g = go.clone();
            let h = fiber::spawn(move || {
                fiber::join(
                    || {
                        while !g.load(SeqCst) {
                            std::hint::spin_loop();
                        }
                    },
                    || fiber::sleep(Duration::from_secs(3600)),
                );
            });
            fiber::sleep(Duration::from_millis(50));
            h.cancel();
            go.store(true, SeqCst);
            assert!(h.join().unwrap_err().is_cancelled());

            // Shielded by the caller: the closure is not cancelled, the
            // join returns both results, and the fiber unwinds at its next
            // cancellation point after the shield.
            let ev = Arc::new(Event::new());
            let e = ev.clone();
            let h = fiber::spawn(move || {
                let r = fiber::shield(|| {
                    fiber::join(
                        || 1,
                        || {
                            e.wait();
                            2
                        },
                    )
                });
                assert_eq!(r, (1, 2));
                fiber::yield_now();
                unreachable!("cancelled at the yield");
            });
            fiber::sleep(Duration::from_millis(50));
            h.cancel();
            fiber::sleep(Duration::from_millis(20));
            assert!(!h.is_finished(), "shielded: the join still waits");
            ev.set();
            assert!(h.join().unwrap_err().is_cancelled());
        });
    });
}
