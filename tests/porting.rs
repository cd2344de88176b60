//! Issue 13's primitives for ported C++ programs: eager spawn, oneshot
//! promise/future, JoinSet, AutoResetEvent, runtime::Handle, borrowing
//! block_on, when_all over scoped handles, JoinError::resume.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::Duration;

use numafiber::fiber::{self, JoinSet};
use numafiber::runtime::Handle;
use numafiber::sync::{self, oneshot::FutureError, AutoResetEvent};
use numafiber::{Runtime, Topology};

fn rt(workers: usize) -> Runtime {
    Runtime::builder().workers(workers).topology(Topology::uniform(1, workers)).build().expect("runtime")
}

// ------------------------------------------------------------------ eager

fn spawn_order(eager: bool) -> Vec<&'static str> {
    let rt = rt(1);
    rt.block_on(move || {
        let log = Arc::new(StdMutex::new(Vec::new()));
        let l = log.clone();
        log.lock().unwrap().push("parent before");
        let h = fiber::Builder::new()
            .eager(eager)
            .spawn(move || {
                l.lock().unwrap().push("child start");
                fiber::yield_now(); // first suspension: the parent goes on
                l.lock().unwrap().push("child end");
            })
            .unwrap();
        log.lock().unwrap().push("parent after spawn");
        fiber::await_fiber(h);
        let v = log.lock().unwrap().clone();
        v
    })
}

#[test]
fn eager_runs_the_child_until_its_first_suspension() {
    assert_eq!(spawn_order(true), ["parent before", "child start", "parent after spawn", "child end"]);
}

#[test]
fn plain_spawn_queues_the_child_on_one_worker() {
    assert_eq!(spawn_order(false), ["parent before", "parent after spawn", "child start", "child end"]);
}

#[test]
fn eager_parent_may_be_stolen_and_everything_runs() {
    let rt = rt(2);
    let n = Arc::new(AtomicUsize::new(0));
    let n2 = n.clone();
    rt.block_on(move || {
        let hs: Vec<_> = (0..200)
            .map(|_| {
                let n = n2.clone();
                fiber::Builder::new()
                    .eager(true)
                    .spawn(move || {
                        fiber::yield_now();
                        n.fetch_add(1, SeqCst);
                    })
                    .unwrap()
            })
            .collect();
        fiber::when_all(hs);
    });
    assert_eq!(n.load(SeqCst), 200);
}

#[test]
fn eager_from_a_plain_thread_just_queues() {
    let rt = rt(1);
    let h = fiber::Builder::new().eager(true).spawn_on(&rt, || 3).unwrap();
    assert_eq!(h.join().unwrap(), 3);
}

// ---------------------------------------------------------------- oneshot

#[test]
fn oneshot_from_thread_to_fiber_and_fiber_to_thread() {
    let rt = rt(2);
    let v = rt.block_on(|| {
        let (p, f) = sync::oneshot::<String>();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            p.set("from a thread".into());
        });
        f.wait().unwrap()
    });
    assert_eq!(v, "from a thread");
    let (p, f) = sync::oneshot::<u32>();
    rt.spawn(move || {
        fiber::sleep(Duration::from_millis(20));
        p.set(11);
    });
    assert_eq!(f.wait().unwrap(), 11); // a plain thread waits
}

#[test]
fn oneshot_error_broken_timeout_and_try_get() {
    let rt = rt(1);
    rt.block_on(|| {
        let (p, f) = sync::oneshot::<u8>();
        fiber::spawn(move || p.set_error("bad checksum"));
        match f.wait() {
            Err(FutureError::Failed(e)) => assert_eq!(e.to_string(), "bad checksum"),
            other => panic!("expected the error, got {other:?}"),
        }
        let (p, f) = sync::oneshot::<u8>();
        fiber::spawn(move || drop(p));
        assert!(f.wait().unwrap_err().is_broken());
        let (p, mut f) = sync::oneshot::<u8>();
        assert!(matches!(f.wait_timeout(Duration::from_millis(20)), Err(FutureError::TimedOut)));
        assert!(matches!(f.try_get(), Err(FutureError::NotReady)));
        assert!(!p.is_closed());
        p.set(4);
        assert!(f.is_ready());
        assert_eq!(f.try_get().unwrap(), 4);
        assert!(matches!(f.try_get(), Err(FutureError::Taken)));
        let (p, f) = sync::oneshot::<u8>();
        drop(f);
        assert!(p.is_closed());
        p.set(1); // dropped quietly
    });
}

#[test]
fn many_oneshots_completed_from_threads_count_every_value() {
    let rt = rt(2);
    let total = rt.block_on(|| {
        let mut futures = Vec::new();
        let mut threads = Vec::new();
        for i in 0..64u64 {
            let (p, f) = sync::oneshot();
            futures.push(f);
            threads.push(std::thread::spawn(move || p.set(i)));
        }
        let hs: Vec<_> = futures.into_iter().map(|f| fiber::spawn(move || f.wait().unwrap())).collect();
        let s: u64 = fiber::when_all(hs).into_iter().sum();
        for t in threads {
            t.join().unwrap();
        }
        s
    });
    assert_eq!(total, (0..64).sum());
}

// ---------------------------------------------------------------- JoinSet

#[test]
fn join_set_yields_in_finishing_order_and_keeps_the_rest() {
    let rt = rt(2);
    let order = rt.block_on(|| {
        let mut set = JoinSet::new();
        // Each fiber waits for its own event, released in the order 2, 0, 1.
        let evs: Vec<_> = (0..3).map(|_| Arc::new(AutoResetEvent::new())).collect();
        for (i, e) in evs.iter().enumerate() {
            let e = e.clone();
            set.spawn(move || {
                e.wait();
                i
            });
        }
        assert_eq!(set.len(), 3);
        let mut order = Vec::new();
        for k in [2usize, 0, 1] {
            evs[k].set();
            order.push(set.join_next().unwrap().unwrap());
            assert_eq!(set.len(), 2 - order.len() + 1);
        }
        assert!(set.is_empty());
        assert!(set.join_next().is_none());
        order
    });
    assert_eq!(order, [2, 0, 1]);
}

#[test]
fn join_set_reports_panics_and_counts_every_fiber() {
    let rt = rt(2);
    let (ok, failed) = rt.block_on(|| {
        let mut set = JoinSet::new();
        for i in 0..500u32 {
            set.spawn(move || {
                if i % 50 == 0 {
                    std::panic::panic_any(i);
                }
                fiber::yield_now();
                i
            });
        }
        let (mut ok, mut failed) = (0u32, Vec::new());
        while let Some(r) = set.join_next() {
            match r {
                Ok(_) => ok += 1,
                Err(e) => failed.push(*e.into_panic().unwrap().downcast::<u32>().unwrap()),
            }
        }
        failed.sort();
        (ok, failed)
    });
    assert_eq!(ok, 490);
    assert_eq!(failed, (0..500).step_by(50).collect::<Vec<u32>>());
}

#[test]
fn dropping_a_join_set_detaches_without_leaking() {
    let rt = rt(2);
    let token = Arc::new(());
    let done = Arc::new(AtomicUsize::new(0));
    let (t, d) = (token.clone(), done.clone());
    rt.block_on(move || {
        let mut set = JoinSet::new();
        for _ in 0..20 {
            let (t, d) = (t.clone(), d.clone());
            set.spawn(move || {
                fiber::sleep(Duration::from_millis(30));
                d.fetch_add(1, SeqCst);
                t // the result holds a reference: it must be freed
            });
        }
        drop(set); // detach
    });
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while done.load(SeqCst) < 20 || Arc::strong_count(&token) > 1 {
        assert!(std::time::Instant::now() < deadline, "detached fibers finish and their results are freed");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(Arc::strong_count(&token), 1);
}

#[test]
fn join_set_from_a_plain_thread() {
    let rt = rt(2);
    let mut set = JoinSet::new();
    let h = rt.handle();
    for i in 0..10u32 {
        set.spawn_on(&h, move || i * 2);
    }
    let mut v: Vec<u32> = set.join_all().into_iter().map(Result::unwrap).collect();
    v.sort();
    assert_eq!(v, (0..10).map(|i| i * 2).collect::<Vec<_>>());
}

// --------------------------------------------------------- AutoResetEvent

#[test]
fn two_sets_before_a_wait_release_one_waiter() {
    let rt = rt(2);
    let released = rt.block_on(|| {
        let ev = Arc::new(AutoResetEvent::new());
        ev.set();
        ev.set();
        let count = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (ev, count) = (ev.clone(), count.clone());
                fiber::spawn(move || {
                    if ev.wait_timeout(Duration::from_millis(300)) {
                        count.fetch_add(1, SeqCst);
                    }
                })
            })
            .collect();
        fiber::when_all(hs);
        assert!(!ev.is_set(), "the release reset the event");
        count.load(SeqCst)
    });
    assert_eq!(released, 1);
}

#[test]
fn each_set_releases_exactly_one_parked_waiter() {
    let rt = rt(2);
    let ev = Arc::new(AutoResetEvent::new());
    let woken = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..8)
        .map(|_| {
            let (ev, woken) = (ev.clone(), woken.clone());
            rt.spawn(move || {
                ev.wait();
                woken.fetch_add(1, SeqCst);
            })
        })
        .collect();
    // A plain thread sets; wait until each release is seen before the next.
    for k in 1..=8 {
        // The waiter may not have parked yet: then the set stays pending and
        // its wait returns at once; either way one waiter per set.
        ev.set();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while woken.load(SeqCst) < k {
            assert!(std::time::Instant::now() < deadline, "set {k} released nobody");
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(5));
        assert_eq!(woken.load(SeqCst), k, "set {k} released more than one waiter");
    }
    for h in hs {
        h.join().unwrap();
    }
}

// ----------------------------------------------------------------- Handle

#[test]
fn handle_is_clone_send_sync_and_current_works() {
    fn assert_traits<T: Clone + Send + Sync + 'static>() {}
    assert_traits::<Handle>();
    let rt = rt(2);
    let v = rt.block_on(|| {
        let h = Handle::current();
        let t = std::thread::spawn(move || {
            let h2 = h.clone();
            h2.spawn(|| 20).join().unwrap() + h.spawn(|| 1).join().unwrap()
        });
        t.join().unwrap()
    });
    assert_eq!(v, 21);
    assert!(Handle::try_current().is_none());
    assert!(catch_unwind(Handle::current).is_err(), "Handle::current outside a fiber panics");
    let h = rt.handle();
    drop(rt);
    assert!(matches!(h.try_spawn(|| ()).unwrap_err().kind(), numafiber::SpawnErrorKind::ShuttingDown));
}

// ----------------------------------------------- borrowing and exceptions

#[test]
fn block_on_borrows_and_when_all_takes_scoped_handles() {
    let rt = rt(2);
    let data: Vec<u64> = (1..=1000).collect();
    let mut out = 0u64;
    rt.block_on(|| {
        let parts = fiber::scope(|s| {
            fiber::when_all(data.chunks(100).map(|c| s.spawn(move || c.iter().sum::<u64>())).collect())
        });
        out = parts.iter().sum();
    });
    assert_eq!(out, 500_500);
}

#[test]
fn block_on_waits_for_the_fiber_when_it_panics() {
    let rt = rt(2);
    let counter = AtomicUsize::new(0);
    let r = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(|| {
            fiber::scope(|s| {
                s.spawn(|| {
                    fiber::sleep(Duration::from_millis(50));
                    counter.fetch_add(1, SeqCst);
                });
                panic!("expected");
            })
        })
    }));
    assert!(r.is_err());
    // The scoped child finished before block_on unwound past `counter`.
    assert_eq!(counter.load(SeqCst), 1);
}

#[derive(Debug, PartialEq)]
struct ParseError(u32);

#[test]
fn join_error_resume_rethrows_the_payload() {
    let rt = rt(1);
    let caught = rt.block_on(|| {
        let e = fiber::spawn(|| -> u8 { std::panic::panic_any(ParseError(3)) }).join().unwrap_err();
        assert!(e.is_panic());
        catch_unwind(AssertUnwindSafe(|| e.resume())).unwrap_err()
    });
    assert_eq!(caught.downcast_ref::<ParseError>(), Some(&ParseError(3)));
}

#[test]
fn join_set_on_a_thread_returns_when_the_runtime_shuts_down() {
    let rt = rt(1);
    let h = rt.handle();
    let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let s2 = started.clone();
    let busy = rt.spawn(move || {
        s2.store(true, SeqCst);
        let end = std::time::Instant::now() + Duration::from_millis(300);
        while std::time::Instant::now() < end {
            std::hint::black_box(0); // keeps the only worker, never yields
        }
    });
    while !started.load(SeqCst) {
        std::thread::yield_now();
    }
    let mut set = JoinSet::new();
    for i in 0..5u32 {
        set.spawn_on(&h, move || i); // queued behind `busy`, most likely unstarted
    }
    set.spawn_on(&h, || loop {
        fiber::sleep(Duration::from_secs(60)) // never finishes by itself
    });
    let t = std::thread::spawn(move || set.join_all());
    rt.shutdown(); // destroys the queued and the sleeping fibers
    let rs = t.join().unwrap();
    assert_eq!(rs.len(), 6, "every fiber of the set was reported, none hangs");
    assert!(rs.iter().any(|r| r.as_ref().is_err_and(|e| e.is_cancelled())));
    for r in rs {
        match r {
            Ok(i) => assert!(i < 5),
            Err(e) => assert!(e.is_cancelled(), "{e}"),
        }
    }
    assert!(busy.join().is_ok());
}
