//! Fiber-local storage (`fiber_local!`) and `fiber::park` / `unpark`, in
//! the shape of the peers' tests: may's `coroutine_local!` test (each
//! coroutine sees its own value, across yields), Boost.Fiber's
//! `fiber_specific_ptr` test (values cleaned up when the fiber ends),
//! std's `thread::park` tests (a token given before the park, from another
//! thread), plus migrations between two workers (forced as in
//! `tests/migration.rs`: joins of a child pinned to the other worker).

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::{fiber, fiber_local, sync, Policy, Runtime, Topology};

fn gettid() -> i32 {
    // SAFETY: gettid has no preconditions.
    unsafe { libc::gettid() }
}

/// Counts its drops.
struct Tally(Arc<AtomicUsize>);
impl Drop for Tally {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

fiber_local! {
    static ID: Cell<u64> = Cell::new(0);
    static TRAIL: RefCell<Vec<usize>> = RefCell::new(Vec::new());
    static GUARD: RefCell<Option<Tally>> = RefCell::new(None);
}

/// Each of 64 fibers on 2 stealing workers writes its own id, then moves
/// between the workers many times: after every suspension it still reads
/// its own id, from whichever worker it runs on, through a reference it
/// holds across the suspensions.
#[test]
fn values_follow_their_fiber_across_migrations() {
    let rt =
        Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).policy(Policy::RandomSteal).build().unwrap();
    let tids: Arc<HashMap<i32, usize>> = Arc::new(rt.stats().workers.iter().map(|w| (w.tid, w.worker)).collect());
    let migrations = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..64u64)
        .map(|n| {
            let (tids, migrations) = (tids.clone(), migrations.clone());
            rt.spawn(move || {
                let me = fiber::current().unwrap().id;
                assert_eq!(ID.get(), 0, "a fresh fiber sees the initial value");
                ID.set(me);
                TRAIL.with(|trail| {
                    // A borrow of the fiber's own value held across every
                    // suspension below: it must stay valid and ours.
                    let mut last = tids[&gettid()];
                    for i in 0..600 {
                        match i % 3 {
                            0 => {
                                let other = 1 - fiber::current().unwrap().worker;
                                fiber::await_fiber(fiber::Builder::new().worker(other).spawn(|| ()).unwrap())
                            }
                            1 => fiber::sleep(Duration::from_micros(1)),
                            _ => fiber::yield_now(),
                        }
                        let w = tids[&gettid()];
                        trail.borrow_mut().push(w);
                        if w != last {
                            migrations.fetch_add(1, SeqCst);
                            last = w;
                        }
                        assert_eq!(ID.get(), me, "fiber {n} reads its own value on worker {w}");
                    }
                });
                let trail = TRAIL.take();
                assert_eq!(trail.len(), 600);
                trail.iter().collect::<std::collections::HashSet<_>>().len()
            })
        })
        .collect();
    let mut both = 0;
    for h in hs {
        if h.join().unwrap() == 2 {
            both += 1;
        }
    }
    let m = migrations.load(SeqCst);
    eprintln!("migrations: {m}, fibers that ran on both workers: {both}");
    assert!(m >= 100, "the test must really migrate fibers (saw {m})");
    assert!(both >= 1);
}

/// Values are dropped when their fiber ends, on the fiber, before its
/// joiner sees the result (Boost: `fiber_specific_ptr` cleanup).
#[test]
fn values_dropped_at_fiber_end_before_join_returns() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.block_on(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let hs: Vec<_> = (0..16)
            .map(|_| {
                let d = drops.clone();
                fiber::spawn(move || {
                    GUARD.set(Some(Tally(d)));
                    fiber::yield_now();
                })
            })
            .collect();
        for h in hs {
            h.join().unwrap();
        }
        assert_eq!(drops.load(SeqCst), 16, "every fiber's value dropped by the time its join returned");
        GUARD.with_borrow(|g| assert!(g.is_none(), "the root fiber has its own value"));
    });
}

/// Values of a fiber that panics or is cancelled are dropped once too.
#[test]
fn values_dropped_when_the_fiber_panics_or_is_cancelled() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let drops = Arc::new(AtomicUsize::new(0));
        let d = drops.clone();
        let p = fiber::spawn(move || {
            GUARD.set(Some(Tally(d)));
            std::panic::resume_unwind(Box::new("quiet")); // no hook output
        });
        assert!(p.join().unwrap_err().is_panic());
        let d = drops.clone();
        let ev = Arc::new(sync::Event::new());
        let e = ev.clone();
        let c = fiber::spawn(move || {
            GUARD.set(Some(Tally(d)));
            e.wait();
        });
        for _ in 0..10 {
            fiber::yield_now();
        }
        c.cancel();
        assert!(c.join().unwrap_err().is_cancelled());
        assert_eq!(drops.load(SeqCst), 2);
    });
}

/// A destructor that touches a fiber-local again gets a fresh value,
/// which is dropped in a further round (nothing leaks, nothing dangles).
#[test]
fn destructor_reaching_a_local_again() {
    struct Again(Arc<AtomicUsize>);
    impl Drop for Again {
        fn drop(&mut self) {
            self.0.fetch_add(1, SeqCst);
            ID.set(99); // re-initialises ID in a new round
            GUARD.set(Some(Tally(self.0.clone())));
        }
    }
    fiber_local! { static AGAIN: RefCell<Option<Again>> = RefCell::new(None); }
    let rt = Runtime::builder().workers(1).build().unwrap();
    let drops = Arc::new(AtomicUsize::new(0));
    let d = drops.clone();
    rt.block_on(move || fiber::spawn(move || AGAIN.set(Some(Again(d)))).join().unwrap());
    assert_eq!(drops.load(SeqCst), 2, "Again dropped, then the Tally it stored");
}

/// Outside a fiber each thread has its own value (like `thread_local!`).
#[test]
fn plain_threads_have_their_own_values() {
    ID.set(5);
    let other = std::thread::spawn(|| {
        let before = ID.get();
        ID.set(6);
        before
    })
    .join()
    .unwrap();
    assert_eq!((ID.get(), other), (5, 0));
    let rt = Runtime::builder().workers(1).build().unwrap();
    assert_eq!(rt.block_on(|| ID.get()), 0, "a fiber does not see the calling thread's value");
}

/// std `park` semantics: an unpark before the park makes it return at
/// once; several unparks leave one token.
#[test]
fn unpark_before_park_is_a_token() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let me = fiber::current_handle().unwrap();
        me.unpark();
        me.unpark();
        let t = Instant::now();
        fiber::park(); // the token: returns at once
        assert!(t.elapsed() < Duration::from_secs(5));
        // The token is used up: this park times out (a spurious return is
        // allowed, so loop until the time has passed).
        let t = Instant::now();
        while t.elapsed() < Duration::from_millis(20) {
            fiber::park_timeout(Duration::from_millis(20));
        }
    });
}

/// may's `park_timeout` test: a fiber that unparks itself and parks (the
/// token: the park returns at once) holds no token after that, so its
/// next `park_timeout` waits its time, as std's does; two unparks before
/// the park leave one token too. Nothing else wakes the fiber here.
#[test]
fn after_a_self_unpark_and_park_the_next_park_timeout_waits() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        for unparks in [1, 2] {
            let me = fiber::current_handle().unwrap();
            for _ in 0..unparks {
                me.unpark();
            }
            fiber::park(); // the token: returns at once
            let t = Instant::now();
            fiber::park_timeout(Duration::from_millis(80));
            let waited = t.elapsed();
            assert!(
                waited >= Duration::from_millis(40),
                "after {unparks} unpark(s) and a park, park_timeout(80 ms) returned after {waited:?}: a second token was left"
            );
        }
    });
}

/// The std test of the same name: a plain thread unparks a parked fiber,
/// many times, with the flag protocol std documents.
#[test]
fn unpark_from_a_plain_thread() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    rt.block_on(|| {
        let me = fiber::current_handle().unwrap();
        let rounds = 200;
        let flag = Arc::new(AtomicUsize::new(0));
        let f = flag.clone();
        let t = std::thread::spawn(move || {
            for i in 1..=rounds {
                while f.load(SeqCst) != i - 1 {
                    std::thread::yield_now();
                }
                f.store(i, SeqCst);
                me.unpark();
            }
        });
        for i in 1..=rounds {
            while flag.load(SeqCst) < i {
                fiber::park();
            }
        }
        t.join().unwrap();
    });
}

/// A user's unpark is not eaten by the runtime's own waits (a lock wait
/// in between), unlike a shared wake-up token would be.
#[test]
fn unpark_survives_an_unrelated_wait() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let m = Arc::new(sync::Mutex::new(()));
        let g = m.lock();
        let woke = Arc::new(AtomicBool::new(false));
        let (m2, w2) = (m.clone(), woke.clone());
        let h = fiber::spawn(move || {
            let me = fiber::current_handle().unwrap();
            me.unpark(); // a token for the park below
            drop(m2.lock()); // a wait that parks and is woken in between
            fiber::park(); // must return at once: the token is still there
            w2.store(true, SeqCst);
        });
        for _ in 0..10 {
            fiber::yield_now();
        }
        drop(g);
        h.join().unwrap();
        assert!(woke.load(SeqCst));
    });
}
