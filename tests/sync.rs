//! `numafiber::sync`: every primitive from fibers, from plain threads and
//! from both at once; FIFO hand-off; timeouts; channel close semantics;
//! a counting stress test; shutdown while fibers are blocked; the deadlock
//! report.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;
use common::panic_message;
use numafiber::sync::channel::{self, RecvTimeoutError, TryRecvError, TrySendError};
use numafiber::sync::{Barrier, Condvar, Event, Mutex, RwLock, Semaphore, WaitGroup};
use numafiber::{fiber, Policy, Runtime, Topology};

fn rt() -> Runtime {
    Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .build()
        .expect("runtime")
}

/// Run `f(i)` for `i in 0..n` as `fibers` fibers on `rt` plus `threads`
/// plain threads at the same time; returns when all are done.
fn mixed(rt: &Runtime, fibers: usize, threads: usize, f: impl Fn(usize) + Send + Sync + 'static) {
    let f = Arc::new(f);
    let hs: Vec<_> = (0..fibers)
        .map(|i| {
            let f = f.clone();
            rt.spawn(move || f(i))
        })
        .collect();
    let ts: Vec<_> = (0..threads)
        .map(|i| {
            let f = f.clone();
            std::thread::spawn(move || f(fibers + i))
        })
        .collect();
    for h in hs {
        h.join().expect("fiber");
    }
    for t in ts {
        t.join().expect("thread");
    }
}

// ---------------------------------------------------------------- Mutex

fn mutex_count(fibers: usize, threads: usize) {
    let rt = rt();
    let m = Arc::new(Mutex::new(0u64));
    let m2 = m.clone();
    mixed(&rt, fibers, threads, move |i| {
        for k in 0..500 {
            let mut g = m2.lock();
            *g += 1;
            if k % 7 == i % 7 {
                fiber::yield_now(); // hold the lock across a suspension
            }
        }
    });
    assert_eq!(*m.lock(), 500 * (fibers + threads) as u64);
}

#[test]
fn mutex_from_fibers() {
    mutex_count(16, 0);
}

#[test]
fn mutex_from_threads() {
    mutex_count(0, 4);
}

#[test]
fn mutex_mixed_fibers_and_threads() {
    mutex_count(8, 2);
}

#[test]
fn mutex_try_lock_and_is_locked() {
    let m = Mutex::new(1);
    let g = m.lock();
    assert!(m.is_locked());
    assert!(m.try_lock().is_none());
    drop(g);
    assert_eq!(*m.try_lock().unwrap(), 1);
}

#[test]
fn mutex_fifo_hand_off_order() {
    // One worker, round-robin: fibers queue on the lock in spawn order and
    // must get it in that order, even though the holder relocks at once.
    let rt =
        Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).policy(Policy::RoundRobin).build().unwrap();
    let (order, arrived) = rt.block_on(|| {
        let m = Arc::new(Mutex::new(Vec::new()));
        // Arrival order at the lock (one worker: logging and queueing
        // happen without a switch in between).
        let arrived = Arc::new(std::sync::Mutex::new(Vec::new()));
        let g = m.lock();
        let hs: Vec<_> = (0..8)
            .map(|i| {
                let (m, arrived) = (m.clone(), arrived.clone());
                fiber::spawn(move || {
                    arrived.lock().unwrap().push(i);
                    m.lock().push(i)
                })
            })
            .collect();
        // Let every fiber reach the lock and queue.
        for _ in 0..20 {
            fiber::yield_now();
        }
        drop(g);
        // Barging attempt: the queue must be served first.
        m.lock().push(100);
        fiber::when_all(hs);
        let v = m.lock().clone();
        let mut a = arrived.lock().unwrap().clone();
        a.push(100);
        (v, a)
    });
    assert_eq!(arrived.len(), 9);
    assert_eq!(order, arrived, "the lock is granted in arrival order");
}

#[test]
fn mutex_thread_waits_for_fiber_holder() {
    let rt = rt();
    let m = Arc::new(Mutex::new(0));
    let ev = Arc::new(Event::new());
    let (m2, ev2) = (m.clone(), ev.clone());
    let h = rt.spawn(move || {
        let mut g = m2.lock();
        ev2.set();
        fiber::sleep(Duration::from_millis(30));
        *g = 1;
    });
    ev.wait();
    let t = Instant::now();
    assert_eq!(*m.lock(), 1, "the thread got the lock only after the fiber released it");
    assert!(t.elapsed() >= Duration::from_millis(10));
    h.join().unwrap();
}

// ---------------------------------------------------------------- Condvar

fn condvar_ping_pong(fibers: usize, threads: usize) {
    // A token passed round-robin: party i waits until turn % n == i.
    let rt = rt();
    let n = fibers + threads;
    let st = Arc::new((Mutex::new(0usize), Condvar::new()));
    let st2 = st.clone();
    mixed(&rt, fibers, threads, move |i| {
        let (m, cv) = &*st2;
        for _ in 0..50 {
            let mut g = cv.wait_while(m.lock(), |t| *t % n != i);
            *g += 1;
            drop(g);
            cv.notify_all();
        }
    });
    assert_eq!(*st.0.lock(), 50 * n);
}

#[test]
fn condvar_from_fibers() {
    condvar_ping_pong(4, 0);
}

#[test]
fn condvar_from_threads() {
    condvar_ping_pong(0, 3);
}

#[test]
fn condvar_mixed() {
    condvar_ping_pong(3, 2);
}

#[test]
fn condvar_wait_timeout_times_out_in_fiber_and_thread() {
    let rt = rt();
    let (timed_out, waited) = rt.block_on(|| {
        let (m, cv) = (Mutex::new(()), Condvar::new());
        let t = Instant::now();
        let (_g, r) = cv.wait_timeout(m.lock(), Duration::from_millis(20));
        (r.timed_out(), t.elapsed())
    });
    assert!(timed_out);
    assert!(waited >= Duration::from_millis(20), "{waited:?}");
    let (m, cv) = (Mutex::new(()), Condvar::new());
    assert!(cv.wait_timeout(m.lock(), Duration::from_millis(5)).1.timed_out());
}

#[test]
fn condvar_wait_timeout_notified_in_time() {
    let rt = rt();
    let r = rt.block_on(|| {
        let st = Arc::new((Mutex::new(false), Condvar::new()));
        let st2 = st.clone();
        let h = fiber::spawn(move || {
            fiber::sleep(Duration::from_millis(5));
            *st2.0.lock() = true;
            st2.1.notify_one();
        });
        let (g, r) = st.1.wait_timeout_while(st.0.lock(), Duration::from_secs(10), |ok| !*ok);
        assert!(*g);
        drop(g);
        fiber::await_fiber(h);
        r.timed_out()
    });
    assert!(!r);
}

#[test]
fn condvar_notify_one_wakes_in_fifo_order() {
    let rt =
        Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).policy(Policy::RoundRobin).build().unwrap();
    let (order, arrived) = rt.block_on(|| {
        let st = Arc::new((Mutex::new(Vec::new()), Condvar::new()));
        let arrived = Arc::new(std::sync::Mutex::new(Vec::new()));
        let hs: Vec<_> = (0..5)
            .map(|i| {
                let (st, arrived) = (st.clone(), arrived.clone());
                fiber::spawn(move || {
                    let g = st.0.lock();
                    arrived.lock().unwrap().push(i);
                    let mut g = st.1.wait(g);
                    g.push(i);
                })
            })
            .collect();
        for _ in 0..20 {
            fiber::yield_now();
        }
        for _ in 0..5 {
            st.1.notify_one();
            for _ in 0..5 {
                fiber::yield_now();
            }
        }
        fiber::when_all(hs);
        let v = st.0.lock().clone();
        let a = arrived.lock().unwrap().clone();
        (v, a)
    });
    assert_eq!(arrived.len(), 5);
    assert_eq!(order, arrived, "notify_one wakes in wait order");
}

// ---------------------------------------------------------------- RwLock

#[test]
fn rwlock_mixed_readers_and_writers() {
    let rt = rt();
    let l = Arc::new(RwLock::new((0u64, 0u64)));
    let l2 = l.clone();
    mixed(&rt, 8, 2, move |i| {
        for k in 0..200 {
            if (i + k) % 4 == 0 {
                let mut w = l2.write();
                w.0 += 1;
                fiber::yield_now();
                w.1 += 1;
            } else {
                let r = l2.read();
                assert_eq!(r.0, r.1, "a reader saw a half-done write");
            }
        }
    });
    let g = l.read();
    assert_eq!(g.0, g.1);
    assert_eq!(g.0, 10 * 50);
}

#[test]
fn rwlock_readers_share() {
    let rt = rt();
    rt.block_on(|| {
        let l = Arc::new(RwLock::new(1));
        let r1 = l.read();
        let l2 = l.clone();
        // A second reader from another fiber gets in while we hold ours.
        assert_eq!(fiber::await_fiber(fiber::spawn(move || *l2.read())), 1);
        assert!(l.try_write().is_none());
        drop(r1);
        assert!(l.try_write().is_some());
    });
}

#[test]
fn rwlock_failed_try_leaves_state_alone() {
    let l = RwLock::new(0);
    let w = l.write();
    for _ in 0..3 {
        assert!(l.try_read().is_none());
        assert!(l.try_write().is_none());
    }
    drop(w);
    let r = l.read();
    assert!(l.try_write().is_none());
    drop(r);
    assert!(l.try_write().is_some(), "no phantom reader or writer left behind");
}

// ---------------------------------------------------------------- Semaphore

#[test]
fn semaphore_limits_concurrency_mixed() {
    let rt = rt();
    let sem = Arc::new(Semaphore::new(3));
    let now = Arc::new(AtomicUsize::new(0));
    let max = Arc::new(AtomicUsize::new(0));
    let (s2, n2, m2) = (sem.clone(), now.clone(), max.clone());
    mixed(&rt, 12, 2, move |_| {
        for _ in 0..50 {
            let _p = s2.acquire();
            let n = n2.fetch_add(1, SeqCst) + 1;
            m2.fetch_max(n, SeqCst);
            fiber::yield_now();
            n2.fetch_sub(1, SeqCst);
        }
    });
    assert!(max.load(SeqCst) <= 3, "max {}", max.load(SeqCst));
    assert_eq!(sem.available_permits(), 3, "every permit came back");
}

#[test]
fn semaphore_permits_try_and_timeout() {
    let s = Semaphore::new(2);
    let a = s.try_acquire().unwrap();
    let _b = s.acquire();
    assert!(s.try_acquire().is_none());
    assert!(s.acquire_timeout(Duration::from_millis(5)).is_none());
    drop(a);
    assert_eq!(s.available_permits(), 1);
    s.add_permits(2);
    assert_eq!(s.available_permits(), 3);
    let rt = rt();
    let got = rt.block_on(|| {
        let s = Arc::new(Semaphore::new(0));
        let s2 = s.clone();
        fiber::spawn(move || {
            fiber::sleep(Duration::from_millis(5));
            s2.add_permits(1);
        });
        let got = s.acquire_timeout(Duration::from_secs(5)).is_some();
        got
    });
    assert!(got);
}

// ---------------------------------------------------------------- Barrier, WaitGroup, Event

#[test]
fn barrier_mixed_rounds_one_leader_each() {
    let rt = rt();
    let b = Arc::new(Barrier::new(6));
    let leaders = Arc::new(AtomicUsize::new(0));
    let phase = Arc::new(AtomicUsize::new(0));
    let (b2, l2, p2) = (b.clone(), leaders.clone(), phase.clone());
    mixed(&rt, 4, 2, move |_| {
        for round in 0..10 {
            assert!(p2.load(SeqCst) >= round * 6);
            p2.fetch_add(1, SeqCst);
            if b2.wait().is_leader() {
                l2.fetch_add(1, SeqCst);
            }
            assert!(p2.load(SeqCst) >= (round + 1) * 6, "left the barrier before everyone arrived");
            b2.wait();
        }
    });
    assert_eq!(leaders.load(SeqCst), 10);
}

#[test]
fn waitgroup_fibers_and_threads() {
    let rt = rt();
    let wg = Arc::new(WaitGroup::new());
    let done = Arc::new(AtomicUsize::new(0));
    wg.add(10);
    for i in 0..10 {
        let (wg, done) = (wg.clone(), done.clone());
        if i % 2 == 0 {
            rt.spawn(move || {
                fiber::sleep(Duration::from_millis(2));
                done.fetch_add(1, SeqCst);
                wg.done();
            });
        } else {
            std::thread::spawn(move || {
                done.fetch_add(1, SeqCst);
                wg.done();
            });
        }
    }
    // Waiters: a fiber and this thread.
    let (wg2, done2) = (wg.clone(), done.clone());
    let seen = rt.spawn(move || {
        wg2.wait();
        done2.load(SeqCst)
    });
    wg.wait();
    assert_eq!(done.load(SeqCst), 10);
    assert_eq!(seen.join().unwrap(), 10);
    assert_eq!(wg.count(), 0);
}

#[test]
#[should_panic(expected = "more often than add")]
fn waitgroup_done_below_zero_panics() {
    WaitGroup::new().done();
}

#[test]
fn event_set_reset_wait() {
    let rt = rt();
    let ev = Arc::new(Event::new());
    let hs: Vec<_> = (0..4)
        .map(|_| {
            let ev = ev.clone();
            rt.spawn(move || ev.wait())
        })
        .collect();
    let ev2 = ev.clone();
    let t = std::thread::spawn(move || ev2.wait());
    std::thread::sleep(Duration::from_millis(10));
    assert!(!hs.iter().any(|h| h.is_finished()));
    ev.set();
    for h in hs {
        h.join().unwrap();
    }
    t.join().unwrap();
    assert!(ev.is_set());
    ev.reset();
    assert!(!ev.is_set());
    let timed = rt.block_on({
        let ev = ev.clone();
        move || ev.wait_timeout(Duration::from_millis(10))
    });
    assert!(!timed);
}

// ---------------------------------------------------------------- channels

#[test]
fn channel_close_when_last_sender_drops() {
    let (tx, rx) = channel::unbounded();
    let tx2 = tx.clone();
    tx.send(1).unwrap();
    drop(tx);
    assert_eq!(rx.try_recv(), Ok(1));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Empty), "one sender is still alive");
    tx2.send(2).unwrap();
    drop(tx2);
    assert_eq!(rx.recv(), Ok(2), "buffered messages are still delivered");
    assert_eq!(rx.recv(), Err(channel::RecvError));
    assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Disconnected));
}

#[test]
fn channel_send_fails_when_receivers_gone() {
    let (tx, rx) = channel::bounded(1);
    let rx2 = rx.clone();
    drop(rx);
    tx.send(1).unwrap();
    drop(rx2);
    assert_eq!(tx.send(2).unwrap_err().0, 2);
    assert!(matches!(tx.try_send(3), Err(TrySendError::Disconnected(3))));
}

#[test]
fn channel_blocked_sender_fails_when_receiver_drops() {
    let rt = rt();
    let (tx, rx) = channel::bounded(1);
    tx.send(0).unwrap();
    let h = rt.spawn(move || tx.send(1).map_err(|e| e.0));
    std::thread::sleep(Duration::from_millis(20));
    assert!(!h.is_finished());
    drop(rx);
    assert_eq!(h.join().unwrap(), Err(1));
}

#[test]
fn channel_blocked_receiver_wakes_on_close() {
    let rt = rt();
    let (tx, rx) = channel::unbounded::<u8>();
    let h = rt.spawn(move || rx.recv());
    std::thread::sleep(Duration::from_millis(20));
    drop(tx);
    assert_eq!(h.join().unwrap(), Err(channel::RecvError));
}

#[test]
fn channel_rendezvous_send_waits_for_receiver() {
    let rt = rt();
    let (tx, rx) = channel::bounded(0);
    let sent = Arc::new(AtomicUsize::new(0));
    let s2 = sent.clone();
    let h = rt.spawn(move || {
        for i in 0..5 {
            tx.send(i).unwrap();
            s2.fetch_add(1, SeqCst);
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(sent.load(SeqCst), 0, "a rendezvous send completes only with a receiver");
    assert!(matches!(channel::bounded::<u8>(0).0.try_send(1), Err(TrySendError::Full(1))));
    let got: Vec<i32> = rx.iter().collect();
    assert_eq!(got, vec![0, 1, 2, 3, 4]);
    h.join().unwrap();
    // Fiber to fiber.
    let v = rt.block_on(|| {
        let (tx, rx) = channel::bounded(0);
        let h = fiber::spawn(move || (0..100).map(|_| rx.recv().unwrap()).sum::<u64>());
        for i in 0..100u64 {
            tx.send(i).unwrap();
        }
        fiber::await_fiber(h)
    });
    assert_eq!(v, 4950);
}

#[test]
fn channel_bounded_capacity_blocks_sender() {
    let rt = rt();
    let (tx, rx) = channel::bounded(2);
    let h = rt.spawn(move || {
        for i in 0..10 {
            tx.send(i).unwrap();
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(rx.len(), 2);
    assert!(!h.is_finished());
    assert_eq!((&rx).into_iter().collect::<Vec<_>>(), (0..10).collect::<Vec<_>>());
    h.join().unwrap();
}

#[test]
fn channel_recv_timeout_fiber_and_thread() {
    let rt = rt();
    let (tx, rx) = channel::unbounded::<u8>();
    let r = rt.block_on(move || {
        let t = Instant::now();
        let r = rx.recv_timeout(Duration::from_millis(20));
        (r, t.elapsed())
    });
    assert_eq!(r.0, Err(RecvTimeoutError::Timeout));
    assert!(r.1 >= Duration::from_millis(20));
    drop(tx);
    let (tx, rx) = channel::bounded(0);
    assert_eq!(tx.send_timeout(1, Duration::from_millis(5)), Err(TrySendError::Full(1)));
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(5));
        tx.send(9).unwrap()
    });
    assert_eq!(rx.recv_timeout(Duration::from_secs(5)), Ok(9));
    t.join().unwrap();
}

#[test]
fn channel_receiver_is_an_iterator() {
    let (tx, rx) = channel::unbounded();
    for i in 0..5 {
        tx.send(i).unwrap();
    }
    drop(tx);
    let v: Vec<i32> = rx.take(10).collect(); // `Receiver: Iterator`
    assert_eq!(v, vec![0, 1, 2, 3, 4]);
}

/// Many producers and consumers, fibers and threads, over bounded, unbounded
/// and rendezvous channels; every message is counted exactly once.
#[test]
fn stress_channel_every_message_counted() {
    let rt = rt();
    for cap in [Some(0), Some(1), Some(16), None] {
        let (tx, rx) = match cap {
            Some(c) => channel::bounded::<u64>(c),
            None => channel::unbounded(),
        };
        const PRODUCERS: u64 = 10;
        const PER: u64 = 2000;
        let sum = Arc::new(AtomicUsize::new(0));
        let count = Arc::new(AtomicUsize::new(0));
        let mut consumers = Vec::new();
        let mut threads = Vec::new();
        for c in 0..6 {
            let (rx, sum, count) = (rx.clone(), sum.clone(), count.clone());
            let f = move || {
                for (k, v) in rx.iter().enumerate() {
                    sum.fetch_add(v as usize, SeqCst);
                    count.fetch_add(1, SeqCst);
                    if k % 13 == 0 {
                        fiber::yield_now();
                    }
                }
            };
            if c < 5 {
                consumers.push(rt.spawn(f));
            } else {
                threads.push(std::thread::spawn(f));
            }
        }
        drop(rx);
        for p in 0..PRODUCERS {
            let tx = tx.clone();
            let f = move || {
                for i in 0..PER {
                    tx.send(p * PER + i).unwrap();
                    if i % 17 == 0 {
                        fiber::yield_now();
                    }
                }
            };
            if p < 8 {
                consumers.push(rt.spawn(f));
            } else {
                threads.push(std::thread::spawn(f));
            }
        }
        drop(tx);
        for h in consumers {
            h.join().unwrap();
        }
        for t in threads {
            t.join().unwrap();
        }
        let n = PRODUCERS * PER;
        assert_eq!(count.load(SeqCst) as u64, n, "cap {cap:?}");
        assert_eq!(sum.load(SeqCst) as u64, n * (n - 1) / 2, "cap {cap:?}");
    }
}

/// Every lock acquisition counted across 2 workers plus 2 plain threads.
#[test]
fn stress_mutex_every_acquisition_counted() {
    let rt = rt();
    let m = Arc::new(Mutex::new(0u64));
    let acquisitions = Arc::new(AtomicUsize::new(0));
    let (m2, a2) = (m.clone(), acquisitions.clone());
    mixed(&rt, 30, 2, move |i| {
        for k in 0..1000 {
            let mut g = if k % 3 == 0 {
                loop {
                    if let Some(g) = m2.try_lock() {
                        break g;
                    }
                    fiber::yield_now();
                }
            } else {
                m2.lock()
            };
            *g += 1;
            a2.fetch_add(1, SeqCst);
            if (k + i) % 11 == 0 {
                fiber::yield_now();
            }
        }
    });
    assert_eq!(*m.lock(), 32 * 1000);
    assert_eq!(acquisitions.load(SeqCst), 32 * 1000);
}

#[test]
fn pinned_fiber_returns_to_its_worker_after_waits() {
    let rt = rt();
    let ok = rt.block_on(|| {
        let m = Arc::new(Mutex::new(()));
        let (tx, rx) = channel::bounded(0);
        let m2 = m.clone();
        let h = fiber::spawn_pinned(move || {
            let w = fiber::current().unwrap().worker;
            let mut same = true;
            for _ in 0..50 {
                drop(m2.lock());
                rx.recv().unwrap();
                same &= fiber::current().unwrap().worker == w;
            }
            same
        });
        for _ in 0..50 {
            let g = m.lock();
            fiber::yield_now();
            drop(g);
            tx.send(()).unwrap();
        }
        fiber::await_fiber(h)
    });
    assert!(ok);
}

// ---------------------------------------------------------------- shutdown

struct CountDrop(Arc<AtomicUsize>);
impl Drop for CountDrop {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn shutdown_with_fibers_blocked_on_mutex_and_channel() {
    let drops = Arc::new(AtomicUsize::new(0));
    let rt = rt();
    let m = Arc::new(Mutex::new(0));
    let (tx, rx) = channel::bounded::<u32>(0);
    let (tx2, rx2) = channel::unbounded::<u32>();
    let held = Arc::new(Event::new());
    // A fiber holds the mutex and waits on a channel forever.
    {
        let (m, d, held) = (m.clone(), CountDrop(drops.clone()), held.clone());
        let rx2 = rx2.clone();
        rt.spawn(move || {
            let _d = d;
            let _g = m.lock();
            held.set();
            let _ = rx2.recv();
        });
    }
    held.wait();
    let mut hs = Vec::new();
    for _ in 0..4 {
        let (m, d) = (m.clone(), CountDrop(drops.clone()));
        hs.push(rt.spawn(move || {
            let _d = d;
            *m.lock() += 1;
        }));
    }
    for _ in 0..3 {
        let (rx, d) = (rx.clone(), CountDrop(drops.clone()));
        hs.push(rt.spawn(move || {
            let _d = d;
            let _ = rx.recv();
        }));
        let (tx, d) = (tx.clone(), CountDrop(drops.clone()));
        hs.push(rt.spawn(move || {
            let _d = d;
            let _ = tx.send(1);
            let _ = tx.send(2);
        }));
    }
    std::thread::sleep(Duration::from_millis(30));
    let t = Instant::now();
    drop(rt);
    assert!(t.elapsed() < Duration::from_secs(5));
    assert_eq!(drops.load(SeqCst), 1 + 4 + 6, "every destructor ran exactly once");
    for h in hs {
        let _ = h.join(); // finished or cancelled, never hangs
    }
    // The primitives are consistent afterwards.
    assert!(m.try_lock().is_some(), "the destroyed holder passed the lock on");
    drop((tx, tx2, rx, rx2));
}

// ---------------------------------------------------------------- deadlock report

/// The test harness runs other threads (other tests, its main thread), so
/// the default check can never prove a deadlock here and only warns; these
/// tests use the strict check. The proven reports are in `tests/deadlock.rs`
/// (a single-threaded harness).
fn strict_rt() -> Runtime {
    Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .strict_deadlock_detection(true)
        .build()
        .expect("runtime")
}

#[test]
fn deadlock_report_names_fibers_of_a_lock_cycle() {
    let rt = strict_rt();
    let t = Instant::now();
    let r = catch_unwind(AssertUnwindSafe(|| rt.block_on(common::lock_cycle)));
    let msg = panic_message(r.expect_err("block_on must report the deadlock"));
    assert!(msg.contains("all fibers are asleep - deadlock!"), "{msg}");
    assert!(msg.contains("\"left\" [Mutex lock"), "{msg}");
    assert!(msg.contains("\"right\" [Mutex lock"), "{msg}");
    assert!(msg.contains("[join of fiber"), "{msg}");
    assert!(t.elapsed() < Duration::from_secs(5));
    drop(rt); // destroys the deadlocked fibers without hanging
}

#[test]
fn deadlock_report_channel_without_active_sender() {
    let rt = strict_rt();
    let r = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(|| {
            let (tx, rx) = channel::unbounded::<u32>();
            // The sender stays alive (so the channel is not closed) but
            // nobody will ever use it: it is owned by a fiber that waits
            // for an event nobody sets.
            let ev = Arc::new(Event::new());
            let ev2 = ev.clone();
            let _keeper = fiber::Builder::new()
                .name("keeper")
                .spawn(move || {
                    let _tx = tx;
                    ev2.wait();
                })
                .unwrap();
            let h = fiber::Builder::new().name("consumer").spawn(move || rx.recv().ok()).unwrap();
            fiber::await_fiber(h)
        })
    }));
    let msg = panic_message(r.expect_err("block_on must report the deadlock"));
    assert!(msg.contains("all fibers are asleep - deadlock!"), "{msg}");
    assert!(msg.contains("\"consumer\" [channel receive"), "{msg}");
    assert!(msg.contains("\"keeper\" [Event wait"), "{msg}");
}

#[test]
fn no_deadlock_report_while_a_timer_is_pending() {
    let rt = rt();
    let v = rt.block_on(|| {
        let (tx, rx) = channel::bounded(0);
        fiber::spawn(move || {
            fiber::sleep(Duration::from_millis(300));
            tx.send(5).unwrap();
        });
        rx.recv().unwrap()
    });
    assert_eq!(v, 5);
}

#[test]
fn no_deadlock_report_when_disabled() {
    let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).deadlock_detection(false).build().unwrap();
    let (tx, rx) = channel::bounded(0);
    let t = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(400));
        tx.send(1).unwrap();
    });
    assert_eq!(rt.block_on(move || rx.recv().unwrap()), 1);
    t.join().unwrap();
}

// ---------------------------------------------------------------- direct hand-off

/// A value whose fate is recorded exactly once: received, returned to its
/// sender, or dropped by the channel (buffered when the last receiver
/// went). `marks[id]` counts how often value `id` met its end.
struct Tok {
    id: usize,
    fate: u8,
    marks: Arc<Vec<AtomicUsize>>,
    fates: Arc<[AtomicUsize; 3]>,
}
const RECEIVED: u8 = 0;
const RETURNED: u8 = 1;
const DROPPED_BY_CHANNEL: u8 = 2;
impl Drop for Tok {
    fn drop(&mut self) {
        self.marks[self.id].fetch_add(1, SeqCst);
        self.fates[self.fate as usize].fetch_add(1, SeqCst);
    }
}

/// Producers and consumers (fibers and a thread each) with short, uneven
/// timeouts on both sides, so timeouts race with hand-offs into waiting
/// receivers' cells and out of waiting senders' entries; then the channel
/// closes from the sender side (`close_by_receivers == false`: every value
/// must be received or returned) or from the receiver side mid-stream
/// (values may also be dropped with the buffer). Every value must meet
/// exactly one end.
fn handoff_counted(cap: usize, close_by_receivers: bool) {
    const PRODUCERS: usize = 4;
    const PER: usize = 1500;
    const TOTAL: usize = PRODUCERS * PER;
    let rt = rt();
    let marks: Arc<Vec<AtomicUsize>> = Arc::new((0..TOTAL).map(|_| AtomicUsize::new(0)).collect());
    let fates: Arc<[AtomicUsize; 3]> = Arc::new(Default::default());
    let (tx, rx) = channel::bounded::<Tok>(cap);
    let timed_out = Arc::new(AtomicUsize::new(0));
    let created = Arc::new(AtomicUsize::new(0));
    let mut fibers = Vec::new();
    let mut threads = Vec::new();
    for c in 0..3usize {
        let (rx, timed_out) = (rx.clone(), timed_out.clone());
        // Receiver-side close: each consumer quits after its quota.
        let quota = if close_by_receivers { TOTAL / 6 } else { usize::MAX };
        let f = move || {
            let mut got = 0;
            let mut k = 0u64;
            while got < quota {
                k += 1;
                // 0-40 us: often shorter than a hand-off under load.
                let d = Duration::from_micros((k * 7 + c as u64 * 13) % 41);
                match rx.recv_timeout(d) {
                    Ok(mut t) => {
                        t.fate = RECEIVED;
                        got += 1;
                    }
                    Err(RecvTimeoutError::Timeout) => {
                        timed_out.fetch_add(1, SeqCst);
                    }
                    Err(RecvTimeoutError::Disconnected) => break,
                }
            }
        };
        if c < 2 {
            fibers.push(rt.spawn(f));
        } else {
            threads.push(std::thread::spawn(f));
        }
    }
    drop(rx);
    for p in 0..PRODUCERS {
        let (tx, marks, fates, timed_out, created) =
            (tx.clone(), marks.clone(), fates.clone(), timed_out.clone(), created.clone());
        let f = move || {
            for i in 0..PER {
                let mut t =
                    Tok { id: p * PER + i, fate: DROPPED_BY_CHANNEL, marks: marks.clone(), fates: fates.clone() };
                created.fetch_add(1, SeqCst);
                let mut k = 0u64;
                loop {
                    k += 1;
                    let d = Duration::from_micros((k * 11 + i as u64) % 37);
                    match tx.send_timeout(t, d) {
                        Ok(()) => break,
                        Err(TrySendError::Full(back)) => {
                            timed_out.fetch_add(1, SeqCst);
                            t = back;
                        }
                        Err(TrySendError::Disconnected(mut back)) => {
                            back.fate = RETURNED;
                            return; // the receivers are gone: drop the rest unsent
                        }
                    }
                }
            }
        };
        if p < 3 {
            fibers.push(rt.spawn(f));
        } else {
            threads.push(std::thread::spawn(f));
        }
    }
    drop(tx);
    for h in fibers {
        h.join().expect("fiber");
    }
    for t in threads {
        t.join().expect("thread");
    }
    drop(rt);
    let ended: usize = fates.iter().map(|f| f.load(SeqCst)).sum();
    let once = marks.iter().filter(|m| m.load(SeqCst) == 1).count();
    let what = format!(
        "cap {cap}, close by receivers {close_by_receivers}: received {}, returned {}, dropped by the channel {}, \
         {} timeouts",
        fates[0].load(SeqCst),
        fates[1].load(SeqCst),
        fates[2].load(SeqCst),
        timed_out.load(SeqCst)
    );
    println!("{what}");
    assert!(marks.iter().all(|m| m.load(SeqCst) <= 1), "a value ended twice: {what}");
    if close_by_receivers {
        // Producers stop at the first `Disconnected`: the values they
        // created each end once (none leaked in a cell or an entry).
        assert_eq!(ended, created.load(SeqCst), "every created value ended: {what}");
        assert_eq!(ended, once, "{what}");
        assert!(fates[0].load(SeqCst) >= TOTAL / 2, "every consumer took its quota: {what}");
    } else {
        assert_eq!(once, TOTAL, "every value ended exactly once: {what}");
        assert_eq!(fates[0].load(SeqCst), TOTAL, "with receivers to the end, every value is received: {what}");
    }
}

#[test]
fn handoff_every_value_counted_across_timeouts_rendezvous() {
    handoff_counted(0, false);
}

#[test]
fn handoff_every_value_counted_across_timeouts_cap2() {
    handoff_counted(2, false);
}

#[test]
fn handoff_every_value_counted_across_receiver_close() {
    handoff_counted(0, true);
    handoff_counted(1, true);
}

/// Shutdown destroys receivers that were handed a value (granted, queued,
/// not run yet) or are still waiting: a handed value goes back to the
/// channel (the next waiting receiver or the buffer), so after the runtime
/// is gone every sent value is still received exactly once.
#[test]
fn handoff_value_survives_shutdown_of_its_receiver() {
    for round in 0..20 {
        let rt = Runtime::builder()
            .workers(1)
            .topology(Topology::uniform(1, 1))
            .policy(Policy::RandomSteal)
            .build()
            .expect("runtime");
        let (tx, rx) = channel::bounded::<u64>(0);
        let got = Arc::new(AtomicUsize::new(0));
        for _ in 0..3 {
            let (rx, got) = (rx.clone(), got.clone());
            rt.spawn(move || {
                if let Ok(v) = rx.recv() {
                    got.fetch_add(v as usize, SeqCst);
                }
            });
        }
        // Wait (generously) until the receivers are blocked: try_send
        // succeeds only by handing a value to a waiting receiver.
        let mut sent = 0;
        let end = Instant::now() + Duration::from_secs(20);
        while sent < 2 && Instant::now() < end {
            match tx.try_send(1 << (10 * sent)) {
                Ok(()) => sent += 1,
                Err(_) => std::thread::sleep(Duration::from_micros(200)),
            }
        }
        assert_eq!(sent, 2, "round {round}: two receivers blocked in time");
        // Shut down at once: the granted receivers may or may not have run.
        drop(rt);
        let mut rest = 0;
        while let Ok(v) = rx.try_recv() {
            rest += v as usize;
        }
        println!("round {round}: {} received by fibers, {} left in the channel", got.load(SeqCst), rest);
        assert_eq!(got.load(SeqCst) + rest, 1 + (1 << 10), "round {round}: each value received exactly once");
    }
}

/// Timed waits that end early (the value comes before the deadline) leave
/// no timers behind: without compaction every `recv_timeout` that parked
/// left its 60 s timer in the worker's heap (20,000 here).
#[test]
fn timed_waits_that_end_early_do_not_pile_up_timers() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    const ROUNDS: usize = 20_000;
    rt.block_on(|| {
        let (to_b, from_a) = channel::bounded::<usize>(0);
        let (to_a, from_b) = channel::bounded::<usize>(0);
        let b = fiber::spawn(move || {
            let mut n = 0;
            while let Ok(v) = from_a.recv_timeout(Duration::from_secs(60)) {
                to_a.send(v + 1).unwrap();
                n += 1;
            }
            n
        });
        let mut v = 0;
        for _ in 0..ROUNDS {
            // The receiver runs first and parks in `recv_timeout` (with a
            // timer) before the value comes.
            fiber::yield_now();
            to_b.send(v).unwrap();
            v = from_b.recv().unwrap();
        }
        drop(to_b);
        assert_eq!(fiber::await_fiber(b), ROUNDS);
        assert_eq!(v, ROUNDS);
    });
    let s = rt.stats();
    // Every round parked the receiver with a timer (counted below); the
    // heap must stay near twice its live size (0 or 1 here), not ROUNDS.
    assert!(s.workers[0].parks >= ROUNDS as u64, "the receiver did not park: {} parks", s.workers[0].parks);
    let timers = s.workers[0].pending_timers;
    assert!(timers <= 128, "{timers} timers left after {ROUNDS} early-ended timed waits");
}
