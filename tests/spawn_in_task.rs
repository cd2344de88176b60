//! A spawned fiber's closure and result packet kept in its pooled task
//! (`runtime::task::packet`, "In the task") or, when they do not fit, in an `Arc`
//! of their own: every closure capture and every result is dropped exactly
//! once, where it was dropped before (a detached fiber's result on the
//! fiber, a joined or late-detached one by the handle's owner), for
//! fibers that are joined, detached, panic, have a panicking result
//! destructor, or are cancelled at shutdown, unrun or parked. A recycled
//! task shows nothing of its previous fiber. And a spawn that fits
//! allocates nothing (counted by this binary's allocator).

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numafiber::{fiber, sync, Runtime};

// ----- allocations on this thread -----

struct Counting;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; the counter is a const
// thread-local `Cell` (no allocation, no destructor).
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: forwarded.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: forwarded.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn allocs() -> u64 {
    ALLOCS.with(Cell::get)
}

// ----- counted values -----

/// Per value: how often it was dropped, and by which fiber (0: a thread).
#[derive(Default)]
struct Ledger {
    drops: Mutex<Vec<(u32, u64)>>,
}

impl Ledger {
    fn new_value(self: &Arc<Ledger>, panic_on_drop: bool) -> Tracked {
        let mut d = self.drops.lock().unwrap();
        d.push((0, u64::MAX));
        Tracked { ledger: self.clone(), id: (d.len() - 1) as u32, panic_on_drop }
    }
    fn drops_of(&self, id: usize) -> u32 {
        self.drops.lock().unwrap()[id].0
    }
    fn dropped_by(&self, id: usize) -> u64 {
        self.drops.lock().unwrap()[id].1
    }
    /// Every value made was dropped exactly once.
    fn assert_each_once(&self, what: &str) {
        let d = self.drops.lock().unwrap();
        assert!(!d.is_empty(), "{what}: no values made");
        for (i, (n, _)) in d.iter().enumerate() {
            assert_eq!(*n, 1, "{what}: value {i} of {} dropped {n} times", d.len());
        }
    }
}

/// 16 bytes: a closure capturing one and returning one fits in the task.
struct Tracked {
    ledger: Arc<Ledger>,
    id: u32,
    panic_on_drop: bool,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let by = fiber::current().map_or(0, |f| f.id);
        {
            let mut d = self.ledger.drops.lock().unwrap();
            d[self.id as usize].0 += 1;
            d[self.id as usize].1 = by;
        }
        if self.panic_on_drop {
            panic!("result destructor {} panics", self.id);
        }
    }
}

/// Too large for the task: the `Arc` path.
struct Big {
    t: Tracked,
    _pad: [u64; 40],
}

/// Aligned beyond the task's buffer: the `Arc` path.
#[repr(align(64))]
struct Aligned {
    t: Tracked,
}

/// One of the three shapes: wraps a value in it, unwraps it.
trait Shape: Sized + Send + 'static {
    const NAME: &'static str;
    /// Whether its spawns keep closure and packet in the task.
    const IN_TASK: bool;
    fn wrap(t: Tracked) -> Self;
    fn tracked(&self) -> &Tracked;
    fn id(&self) -> usize {
        self.tracked().id as usize
    }
    /// A new value of the same ledger.
    fn sibling(&self) -> Self {
        Self::wrap(self.tracked().ledger.new_value(false))
    }
}
impl Shape for Tracked {
    const NAME: &'static str = "in task";
    const IN_TASK: bool = true;
    fn wrap(t: Tracked) -> Self {
        t
    }
    fn tracked(&self) -> &Tracked {
        self
    }
}
impl Shape for Big {
    const NAME: &'static str = "oversized (Arc)";
    const IN_TASK: bool = false;
    fn wrap(t: Tracked) -> Self {
        Big { t, _pad: [7; 40] }
    }
    fn tracked(&self) -> &Tracked {
        &self.t
    }
}
impl Shape for Aligned {
    const NAME: &'static str = "over-aligned (Arc)";
    const IN_TASK: bool = false;
    fn wrap(t: Tracked) -> Self {
        Aligned { t }
    }
    fn tracked(&self) -> &Tracked {
        &self.t
    }
}

fn rt1() -> Runtime {
    Runtime::builder().workers(1).build().unwrap()
}

/// Joined, panicking, detached before and after the run, a panicking
/// result destructor detached either way, and an unjoined panic in a
/// scope, all in one runtime of one worker (so tasks are recycled between
/// the cases: a recycled task must not show an old value).
fn lifecycle<S: Shape>() {
    let ledger = Arc::new(Ledger::default());
    let rt = rt1();
    let l = ledger.clone();
    rt.block_on(move || {
        let me = fiber::current().unwrap().id;
        // Allocations made by the `spawn` calls of rounds 1 and 2 (the
        // task pool is warm by then), and how many calls.
        let (spawn_allocs, spawns) = (Cell::new(0u64), Cell::new(0u64));
        macro_rules! spawn {
            ($round:expr, $f:expr) => {{
                let before = allocs();
                let h = fiber::spawn($f);
                if $round > 0 {
                    spawn_allocs.set(spawn_allocs.get() + allocs() - before);
                    spawns.set(spawns.get() + 1);
                }
                h
            }};
        }
        // Warm the worker's task pool with a few tasks at once (a scope
        // drops its children's tasks without recycling them).
        let warm: Vec<_> = (0..16).map(|_| fiber::spawn(|| ())).collect();
        warm.into_iter().for_each(|h| h.join().unwrap());
        for round in 0..3u32 {
            // Joined: the closure's capture goes with the closure, the
            // result to the joiner.
            let cap = S::wrap(l.new_value(false));
            let (cap_id, l2) = (cap.id(), l.clone());
            let h = spawn!(round, move || {
                let c = cap;
                drop(c);
                S::wrap(l2.new_value(false))
            });
            let child = h.id();
            let r = h.join().unwrap();
            assert_eq!(l.drops_of(cap_id), 1);
            assert_eq!(l.dropped_by(cap_id), child, "the capture is dropped by the fiber");
            let rid = r.id();
            assert_eq!(l.drops_of(rid), 0, "the joiner owns the result");
            drop(r);
            assert_eq!(l.dropped_by(rid), me);

            // Joined, panicking: the capture unwinds with the fiber.
            let cap = S::wrap(l.new_value(false));
            let cap_id = cap.id();
            let h = spawn!(round, move || -> S {
                let _c = cap;
                panic!("boom {round}")
            });
            let e = h.join().err().expect("panicked");
            assert_eq!(e.panic_message(), Some(&*format!("boom {round}")));
            assert_eq!(l.drops_of(cap_id), 1);

            // Detached before it ran (one worker: the child waits for
            // us): the fiber drops its result on its own stack.
            let (l2, slot) = (l.clone(), Arc::new(AtomicUsize::new(usize::MAX)));
            let s2 = slot.clone();
            let h = spawn!(round, move || {
                let r = S::wrap(l2.new_value(false));
                s2.store(r.id(), SeqCst);
                r
            });
            let child = h.id();
            assert!(!h.is_finished(), "one worker: the child has not run");
            drop(h);
            while slot.load(SeqCst) == usize::MAX {
                fiber::yield_now();
            }
            let rid = slot.load(SeqCst);
            wait_for(|| l.drops_of(rid) == 1, "a detached result is dropped");
            assert_eq!(l.dropped_by(rid), child, "dropped on the detached fiber");

            // Detached after it finished: the handle's owner drops it.
            let l2 = l.clone();
            let h = spawn!(round, move || S::wrap(l2.new_value(false)));
            while !h.is_finished() {
                fiber::yield_now();
            }
            let before = l.drops.lock().unwrap().len();
            drop(h);
            assert_eq!(l.drops_of(before - 1), 1);
            assert_eq!(l.dropped_by(before - 1), me, "dropped by the handle's owner");

            // A panicking result destructor, detached before the run: the
            // fiber contains it, the runtime goes on.
            let l2 = l.clone();
            let h = spawn!(round, move || S::wrap(l2.new_value(true)));
            drop(h);
            let n = l.drops.lock().unwrap().len();
            wait_for(|| l.drops.lock().unwrap().len() > n && l.drops_of(n) == 1, "the panicking drop ran");

            // ... and detached after the run: the panic reaches the owner.
            let l2 = l.clone();
            let h = spawn!(round, move || S::wrap(l2.new_value(true)));
            while !h.is_finished() {
                fiber::yield_now();
            }
            let n = l.drops.lock().unwrap().len() - 1;
            let p = catch_unwind(AssertUnwindSafe(move || drop(h))).expect_err("the destructor panicked");
            assert!(message(&*p).contains("panics"));
            assert_eq!(l.drops_of(n), 1);

            // An unjoined panic in a scope is still reported; the detached
            // child's capture is dropped once.
            let cap = S::wrap(l.new_value(false));
            let cap_id = cap.id();
            let r = catch_unwind(AssertUnwindSafe(|| {
                fiber::scope(|s| {
                    drop(s.spawn(move || -> u8 {
                        let _c = cap;
                        panic!("scoped boom")
                    }));
                })
            }));
            let p = r.expect_err("the scope reports its child's panic");
            assert!(message(&*p).contains("a scoped fiber panicked"), "{}", message(&*p));
            assert_eq!(l.drops_of(cap_id), 1);
        }
        // The path this shape took: in the task, a warm spawn allocates
        // nothing; otherwise each takes its `Arc`.
        assert!(spawns.get() > 0);
        if S::IN_TASK {
            assert_eq!(spawn_allocs.get(), 0, "{}: spawns that fit allocate nothing", S::NAME);
        } else {
            assert!(
                spawn_allocs.get() >= spawns.get(),
                "{}: {} allocations in {} spawns",
                S::NAME,
                spawn_allocs.get(),
                spawns.get()
            );
        }
    });
    drop(rt);
    ledger.assert_each_once(S::NAME);
}

fn message(p: &(dyn std::any::Any + Send)) -> &str {
    p.downcast_ref::<&str>().copied().or_else(|| p.downcast_ref::<String>().map(String::as_str)).unwrap_or("")
}

fn wait_for(mut f: impl FnMut() -> bool, what: &str) {
    let t0 = Instant::now();
    while !f() {
        assert!(t0.elapsed() < Duration::from_secs(60), "timed out: {what}");
        fiber::yield_now();
    }
}

#[test]
fn every_capture_and_result_dropped_once_in_task() {
    lifecycle::<Tracked>();
}

#[test]
fn every_capture_and_result_dropped_once_oversized() {
    lifecycle::<Big>();
}

#[test]
fn every_capture_and_result_dropped_once_over_aligned() {
    lifecycle::<Aligned>();
}

/// Cancelled at shutdown: unrun fibers (queued behind a fiber that holds
/// the only worker until the shutdown starts) and parked ones (on a
/// channel nobody sends on). Their joiners get `JoinError::cancelled`,
/// and every capture is dropped once.
fn cancelled_at_shutdown<S: Shape>() {
    let ledger = Arc::new(Ledger::default());
    let rt = rt1();
    let started = Arc::new(AtomicBool::new(false));
    let s2 = started.clone();
    let hog = rt.spawn(move || {
        s2.store(true, SeqCst);
        // Hold the worker until the runtime shuts down (a spawn is then
        // refused), so the fibers queued meanwhile never run.
        while fiber::Builder::new().spawn(|| ()).is_ok() {
            std::thread::sleep(Duration::from_millis(1));
        }
    });
    while !started.load(SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let (tx, rx) = sync::channel::unbounded::<u8>();
    let mut handles = Vec::new();
    let mut spawn_allocs = 0;
    for i in 0..40 {
        let cap = S::wrap(ledger.new_value(false));
        let rx = (i % 2 == 0).then(|| rx.clone());
        let before = allocs();
        // Captures 24 bytes: fits in the task for `Tracked`.
        let h = rt.spawn(move || {
            if let Some(rx) = rx {
                // Parks on the channel; the drain unwinds it.
                let _ = rx.recv();
            }
            cap.sibling()
        });
        // The task; for an `Arc` path also its packet.
        spawn_allocs += allocs() - before;
        handles.push(h);
    }
    drop(rx);
    let joiner = std::thread::spawn(move || {
        handles.into_iter().map(|h| h.join().err().expect("cancelled").is_cancelled()).filter(|&c| c).count()
    });
    // The hog sees the shutdown and returns; the worker leaves its loop
    // without running the queued fibers; the drain destroys them.
    drop(rt);
    drop(tx);
    assert_eq!(joiner.join().unwrap(), 40, "every joiner gets cancelled");
    assert!(hog.is_finished());
    drop(hog);
    ledger.assert_each_once(S::NAME);
    assert_eq!(ledger.drops.lock().unwrap().len(), 40, "no fiber ran: no results made");
    // A spawn from a plain thread allocates its task; one that does not fit
    // also its `Arc` packet.
    assert_eq!(spawn_allocs, if S::IN_TASK { 40 } else { 80 }, "{}", S::NAME);
}

#[test]
fn cancelled_at_shutdown_in_task() {
    cancelled_at_shutdown::<Tracked>();
}

#[test]
fn cancelled_at_shutdown_oversized() {
    cancelled_at_shutdown::<Big>();
}

/// Parked fibers that ran first and are cancelled by the drain (a forced
/// unwind on their stacks).
fn parked_at_shutdown<S: Shape>() {
    let ledger = Arc::new(Ledger::default());
    let rt = rt1();
    let (tx, rx) = sync::channel::unbounded::<u8>();
    let parked = Arc::new(AtomicUsize::new(0));
    let mut handles = Vec::new();
    let mut spawn_allocs = 0;
    for _ in 0..20 {
        let (rx, p) = (rx.clone(), parked.clone());
        let cap = S::wrap(ledger.new_value(false));
        let before = allocs();
        let h = rt.spawn(move || {
            p.fetch_add(1, SeqCst);
            let _ = rx.recv();
            cap.sibling()
        });
        spawn_allocs += allocs() - before;
        handles.push(h);
    }
    let t0 = Instant::now();
    while parked.load(SeqCst) < 20 {
        assert!(t0.elapsed() < Duration::from_secs(60), "fibers did not start");
        std::thread::sleep(Duration::from_millis(1));
    }
    drop(rx);
    let joiner = std::thread::spawn(move || {
        handles.into_iter().map(|h| h.join().err().expect("cancelled").is_cancelled()).filter(|&c| c).count()
    });
    drop(rt);
    drop(tx);
    assert_eq!(joiner.join().unwrap(), 20, "every joiner gets cancelled");
    ledger.assert_each_once(S::NAME);
    assert_eq!(ledger.drops.lock().unwrap().len(), 20, "no fiber finished: no results made");
    assert_eq!(spawn_allocs, if S::IN_TASK { 20 } else { 40 }, "{}", S::NAME);
}

#[test]
fn parked_and_cancelled_at_shutdown_in_task() {
    parked_at_shutdown::<Tracked>();
}

#[test]
fn parked_and_cancelled_at_shutdown_oversized() {
    parked_at_shutdown::<Big>();
}

/// A spawn whose closure and result fit allocates nothing once the worker's
/// task pool is warm; one that does not fit allocates its `Arc` (one
/// allocation per spawn more). Counted on the spawning worker thread.
#[test]
fn a_spawn_that_fits_allocates_nothing() {
    let rt = rt1();
    let (small, big) = rt.block_on(|| {
        let a = [1u64, 2];
        let b = [3u64; 40];
        // Warm the pool, the queues and the counters.
        for _ in 0..300 {
            fiber::spawn(move || a[0] + a[1]).join().unwrap();
            fiber::spawn(move || b[0]).join().unwrap();
        }
        let count = |f: &dyn Fn()| {
            let mut least = u64::MAX;
            for _ in 0..20 {
                let before = allocs();
                f();
                least = least.min(allocs() - before);
            }
            least
        };
        let small = count(&|| {
            let h = fiber::spawn(move || a[0] + a[1]);
            std::hint::black_box(&h);
            assert_eq!(h.join().unwrap(), 3);
        });
        let big = count(&|| {
            let h = fiber::spawn(move || b[0] + b[39]);
            std::hint::black_box(&h);
            assert_eq!(h.join().unwrap(), 6);
        });
        (small, big)
    });
    assert_eq!(small, 0, "a spawn + join that fits allocates nothing");
    assert_eq!(big, 1, "an oversized closure takes its own allocation");
}
