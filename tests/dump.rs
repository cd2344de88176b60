//! `Runtime::dump`: each fiber's state, wait and call sites checked one by
//! one on a small runtime; the grouped form; `block_in_place`; the stall
//! monitor (a hog named once while other fibers keep running; more in
//! `tests/monitor.rs`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use numafiber::runtime::{Dump, FiberState, StallReport, WaitKind, WorkerActivity};
use numafiber::sync::{channel, oneshot, Barrier, Condvar, Event, Mutex, RwLock, Semaphore, WaitGroup};
use numafiber::{fiber, Runtime, Topology};

/// Spawn a named fiber running `f`; its spawn site is the caller's line.
#[track_caller]
fn spawn_named(name: &str, f: impl FnOnce() + Send + 'static) -> fiber::JoinHandle<()> {
    fiber::Builder::new().name(name).spawn(f).unwrap()
}

/// Yield (as the running root) until every fiber named in `names` is
/// parked; returns the dump that showed it. Panics after 10 s.
fn dump_when_parked(names: &[&str]) -> Dump {
    let t = Instant::now();
    loop {
        let d = Runtime::dump_current();
        let parked = names.iter().all(|n| d.fibers().any(|f| f.name() == Some(*n) && f.state() == FiberState::Parked));
        if parked {
            return d;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "not all of {names:?} parked:\n{d}");
        fiber::yield_now();
    }
}

#[test]
fn every_state_and_wait_one_by_one() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| {
        let me = fiber::current().unwrap().id;
        let mutex = Arc::new(Mutex::new(()));
        let held = mutex.lock();
        let ev = Arc::new(Event::new());
        let (tx, rx) = channel::bounded::<u32>(1);
        tx.send(0).unwrap(); // full: the next send waits
        let (keep_tx, empty_rx) = channel::bounded::<u32>(1);
        let sem = Arc::new(Semaphore::new(0));
        let rw = Arc::new(RwLock::new(()));
        let read = rw.read();
        let barrier = Arc::new(Barrier::new(2));
        let wg = Arc::new(WaitGroup::new());
        wg.add(1);
        let (promise, future) = oneshot::<u32>();
        let cv = Arc::new((Mutex::new(false), Condvar::new()));
        let mut lines: HashMap<&str, (WaitKind, u32)> = HashMap::new();
        let mut hs = Vec::new();

        let m = mutex.clone();
        hs.push(spawn_named("mutex", move || drop(m.lock())));
        lines.insert("mutex", (WaitKind::Mutex, line!() - 1));
        let e = ev.clone();
        hs.push(spawn_named("event", move || e.wait()));
        lines.insert("event", (WaitKind::Event, line!() - 1));
        hs.push(spawn_named("send", move || tx.send(1).unwrap()));
        lines.insert("send", (WaitKind::ChannelSend, line!() - 1));
        #[rustfmt::skip]
        hs.push(spawn_named("recv", move || { let _ = empty_rx.recv(); }));
        lines.insert("recv", (WaitKind::ChannelRecv, line!() - 1));
        let s = sem.clone();
        hs.push(spawn_named("semaphore", move || drop(s.acquire())));
        lines.insert("semaphore", (WaitKind::Semaphore, line!() - 1));
        let r = rw.clone();
        hs.push(spawn_named("rwlock", move || drop(r.write())));
        lines.insert("rwlock", (WaitKind::RwLockWrite, line!() - 1));
        let b = barrier.clone();
        #[rustfmt::skip]
        hs.push(spawn_named("barrier", move || { b.wait(); }));
        lines.insert("barrier", (WaitKind::Barrier, line!() - 1));
        let w = wg.clone();
        hs.push(spawn_named("waitgroup", move || w.wait()));
        lines.insert("waitgroup", (WaitKind::WaitGroup, line!() - 1));
        hs.push(spawn_named("oneshot", move || drop(future.wait())));
        lines.insert("oneshot", (WaitKind::Oneshot, line!() - 1));
        let c = cv.clone();
        hs.push(spawn_named("condvar", move || drop(c.1.wait_while(c.0.lock(), |ready| !*ready))));
        lines.insert("condvar", (WaitKind::Condvar, line!() - 1));
        hs.push(spawn_named("sleep", || fiber::sleep(Duration::from_secs(30))));
        lines.insert("sleep", (WaitKind::Sleep, line!() - 1));
        let e = ev.clone();
        let inner = spawn_named("inner", move || e.wait());
        let inner_id = inner.id();
        hs.push(spawn_named("join", move || inner.join().unwrap()));
        lines.insert("join", (WaitKind::Join, line!() - 1));
        lines.insert("inner", (WaitKind::Event, line!() - 4));
        hs.push(spawn_named("blocking", || fiber::block_in_place(|| std::thread::sleep(Duration::from_millis(1000)))));
        lines.insert("blocking", (WaitKind::Blocking, line!() - 1));

        let names: Vec<&str> = lines.keys().copied().collect();
        let d = dump_when_parked(&names);
        let text = d.to_string();
        for (name, (kind, line)) in &lines {
            let f =
                d.fibers().find(|f| f.name() == Some(*name)).unwrap_or_else(|| panic!("{name} not listed:\n{text}"));
            assert_eq!(f.state(), FiberState::Parked, "{name}:\n{text}");
            let w = f.wait().unwrap_or_else(|| panic!("{name} has no wait:\n{text}"));
            assert_eq!(w.kind(), *kind, "{name}:\n{text}");
            let site = f.wait_site().unwrap_or_else(|| panic!("{name} has no wait site:\n{text}"));
            assert_eq!((site.file(), site.line()), (file!(), *line), "{name}'s wait site:\n{text}");
            let spawned = f.spawn_site().unwrap();
            assert_eq!((spawned.file(), spawned.line()), (file!(), *line), "{name}'s spawn site:\n{text}");
            assert_eq!((f.worker(), f.node()), (0, 0));
            assert!(f.stack_touched().unwrap() > 0, "{name}: a started fiber touched its stack");
            assert!(f.age().is_some(), "the monitor's clock runs");
        }
        let join = d.fibers().find(|f| f.name() == Some("join")).unwrap();
        assert_eq!(join.wait().unwrap().object(), inner_id);
        let sleep = d.fibers().find(|f| f.name() == Some("sleep")).unwrap();
        assert!(sleep.wait().unwrap().until().unwrap() > Instant::now() + Duration::from_secs(20));
        // The root: running on worker 0, which is running it.
        let root = d.fibers().find(|f| f.id() == me).unwrap();
        assert_eq!(root.state(), FiberState::Running);
        let w0 = d.workers().next().unwrap();
        assert_eq!((w0.activity(), w0.running()), (WorkerActivity::Running, Some(me)));
        assert_eq!(w0.timers(), 1, "the sleeper's timer");

        // Runnable: woken, not run yet (one worker, and we do not yield).
        ev.set();
        let d = Runtime::dump_current();
        for name in ["event", "inner"] {
            let f = d.fibers().find(|f| f.name() == Some(name)).unwrap();
            assert_eq!(f.state(), FiberState::Runnable, "{name}:\n{d}");
            assert!(f.wait().is_none());
        }

        // Let everybody go.
        drop(held);
        assert_eq!(rx.recv(), Ok(0));
        assert_eq!(rx.recv(), Ok(1));
        drop(keep_tx);
        sem.add_permits(1);
        drop(read);
        barrier.wait();
        wg.done();
        promise.set(1);
        *cv.0.lock() = true;
        cv.1.notify_all();
        for h in hs {
            if h.id() != sleep.id() {
                h.join().unwrap();
            }
        }
    });
}

/// Waits on `ev` from a function of its own, whose name the park-point
/// backtrace must show.
#[inline(never)]
fn park_here_for_the_backtrace(ev: &Event) {
    ev.wait();
    std::hint::black_box(ev);
}

/// While park backtraces are on, a parked fiber's dump entry carries the
/// stack of its wait, naming the function that waits (when the binary has
/// symbols); off, none is captured or shown.
#[test]
fn park_backtraces_name_the_waiting_function() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let ev = Arc::new(Event::new());
    let t = Instant::now();
    let wait_parked = |name: &str| loop {
        let d = rt.dump();
        let f = d.fibers().find(|f| f.state() == FiberState::Parked && f.name() == Some(name)).cloned();
        if let Some(f) = f {
            return (d, f);
        }
        assert!(t.elapsed() < Duration::from_secs(10), "{name} not parked:\n{d}");
        std::thread::sleep(Duration::from_millis(1));
    };
    let e = ev.clone();
    let off = fiber::Builder::new().name("off").spawn_on(&rt, move || park_here_for_the_backtrace(&e)).unwrap();
    let (_, f) = wait_parked("off");
    assert!(f.backtrace().is_none(), "captured while off:\n{f}");

    rt.set_park_backtraces(true);
    // Parked before capture was on: still none.
    let (_, f) = wait_parked("off");
    assert!(f.backtrace().is_none(), "a wait begun while off has no trace:\n{f}");
    let e = ev.clone();
    let on = fiber::Builder::new().name("on").spawn_on(&rt, move || park_here_for_the_backtrace(&e)).unwrap();
    let (d, f) = wait_parked("on");
    let bt = f.backtrace().expect("a backtrace while on");
    let text = bt.to_string();
    match bt.status() {
        std::backtrace::BacktraceStatus::Captured => {
            assert!(!text.trim().is_empty());
            // Symbols resolve when the binary has debug information (this
            // crate's test profile has): then the waiting function is named.
            if text.contains("numafiber::") {
                assert!(text.contains("park_here_for_the_backtrace"), "{text}");
            } else {
                eprintln!("park_backtraces: no symbols in this build, function names not checked");
            }
            let shown = d.to_string();
            assert!(shown.contains("backtrace of the wait:"), "{shown}");
        }
        s => eprintln!("park_backtraces: backtraces are not supported here ({s:?})"),
    }
    rt.set_park_backtraces(false);
    let (_, f) = wait_parked("on");
    assert!(f.backtrace().is_none(), "shown while off:\n{f}");
    ev.set();
    off.join().unwrap();
    on.join().unwrap();
}

#[test]
fn grouped_folds_a_thousand_fibers_into_a_few_lines() {
    let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().unwrap();
    let ev = Arc::new(Event::new());
    let hs: Vec<_> = (0..1000)
        .map(|i| {
            let e = ev.clone();
            let line = line!() + 1;
            let h = rt.spawn(move || if i % 2 == 0 { e.wait() } else { fiber::sleep(Duration::from_secs(60)) });
            (h, line)
        })
        .collect();
    let line = hs[0].1;
    let t = Instant::now();
    let d = loop {
        let d = rt.dump();
        if d.fibers().filter(|f| f.state() == FiberState::Parked).count() == 1000 {
            break d;
        }
        assert!(t.elapsed() < Duration::from_secs(20), "not all parked:\n{}", d.grouped());
        std::thread::sleep(Duration::from_millis(5));
    };
    let g = d.grouped().to_string();
    assert!(g.lines().count() < 10, "{g}");
    let ev_line = format!("     500 parked: Event wait, waiting at {}:{line}:", file!());
    let sleep_line = format!("     500 parked: sleep, waiting at {}:{line}:", file!());
    assert!(g.contains(&ev_line), "{g}");
    assert!(g.contains(&sleep_line), "{g}");
    assert!(g.contains(&format!("spawned at {}:{line}:", file!())), "{g}");
    assert_eq!(d.grouped().len(), 2);
    ev.set();
    for (h, _) in hs.into_iter().step_by(2) {
        h.join().unwrap();
    }
    drop(rt); // the sleepers are destroyed by the shutdown
}

#[test]
fn block_in_place_keeps_the_worker_running_other_fibers() {
    let rt = Runtime::builder().workers(1).build().unwrap();
    let text = String::from("borrowed");
    let (n, ticks_during) = rt.block_on(|| {
        let stop = Arc::new(AtomicBool::new(false));
        let ticks = Arc::new(AtomicUsize::new(0));
        let (s, t) = (stop.clone(), ticks.clone());
        let ticker = fiber::spawn(move || {
            while !s.load(SeqCst) {
                t.fetch_add(1, SeqCst);
                fiber::sleep(Duration::from_millis(2));
            }
        });
        let before = ticks.load(SeqCst);
        let n = fiber::block_in_place(|| {
            std::thread::sleep(Duration::from_millis(200));
            text.len()
        });
        let during = ticks.load(SeqCst) - before;
        stop.store(true, SeqCst);
        ticker.join().unwrap();
        (n, during)
    });
    assert_eq!(n, 8);
    // One worker: the ticker can only have run while the root's call
    // blocked a helper thread instead of the worker.
    assert!(ticks_during > 0, "the worker ran nothing while the call blocked");
    // A panic of the call comes back to the caller.
    let r = rt.block_on(|| std::panic::catch_unwind(|| fiber::block_in_place(|| -> u8 { panic!("in place") })));
    assert!(r.is_err());
    // Outside a fiber it is a plain call.
    assert_eq!(fiber::block_in_place(|| 5), 5);
}

/// Fibers that migrate all the time while a thread takes dumps. Each fiber
/// runs a while on a worker, then hops half-way round the workers: it
/// joins a child pinned there, and the child's end wakes it there (a
/// wake-up goes to the waker's worker). A dump reads the workers one after
/// the other, so a fiber that hops to a later worker between the two reads
/// was seen running on both; the hop length puts the fiber where the
/// reader arrives about when the fiber does. Each dump must list each
/// fiber once, and a worker's running fiber as running on that worker.
#[test]
fn a_fiber_migrating_during_a_dump_is_listed_once() {
    const WORKERS: usize = 24;
    const HOP: usize = WORKERS / 2;
    const FIBERS: usize = 6;
    const STAY: Duration = Duration::from_micros(100);
    const FOR: Duration = Duration::from_secs(3);
    let rt = Runtime::builder()
        .workers(WORKERS)
        .topology(Topology::uniform(1, WORKERS))
        .stall_threshold(None)
        .build()
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let hops = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..FIBERS)
        .map(|_| {
            let (stop, hops) = (stop.clone(), hops.clone());
            rt.spawn(move || {
                while !stop.load(SeqCst) {
                    let t = Instant::now();
                    while t.elapsed() < STAY {
                        std::hint::spin_loop();
                    }
                    let next = (fiber::current().unwrap().worker + HOP) % WORKERS;
                    fiber::await_fiber(fiber::Builder::new().worker(next).spawn(|| ()).unwrap());
                    hops.fetch_add(1, SeqCst);
                }
            })
        })
        .collect();
    let t0 = Instant::now();
    let mut dumps = 0usize;
    let mut failure = None;
    while t0.elapsed() < FOR && failure.is_none() {
        let d = rt.dump();
        dumps += 1;
        let mut seen = std::collections::HashSet::new();
        for f in d.fibers() {
            if !seen.insert(f.id()) {
                failure = Some(format!("fiber {} listed twice in dump {dumps}:\n{d}", f.id()));
            }
        }
        for w in d.workers() {
            let Some(id) = w.running() else { continue };
            let f = d.fibers().find(|f| f.id() == id).expect("a worker's running fiber is listed");
            if failure.is_none() && (f.state(), f.worker()) != (FiberState::Running, w.index()) {
                failure = Some(format!(
                    "worker {} runs fiber {id}, listed as {} on worker {}:\n{d}",
                    w.index(),
                    f.state(),
                    f.worker()
                ));
            }
        }
    }
    stop.store(true, SeqCst);
    for h in hs {
        h.join().unwrap();
    }
    eprintln!("{dumps} dumps, {} hops in {:?}", hops.load(SeqCst), t0.elapsed());
    if let Some(f) = failure {
        panic!("{f}");
    }
}

/// A fiber spinning 1.5 s without yielding on one of 2 workers: a sleeper
/// loop and a ping-pong pair it queued on its own worker's deque are taken
/// by the other worker and keep running, and the hog is named once, by
/// name (in the long-slice summary: nothing waited on it).
#[test]
fn a_hog_is_named_once_and_the_fibers_behind_it_run() {
    let reports: Arc<StdMutex<Vec<StallReport>>> = Arc::new(StdMutex::new(Vec::new()));
    let r2 = reports.clone();
    let rt = Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .stall_threshold(Some(Duration::from_millis(20)))
        .on_stall(move |r| r2.lock().unwrap().push(r.clone()))
        .build()
        .unwrap();
    let done = Arc::new(AtomicBool::new(false));
    let sleeps = Arc::new(AtomicUsize::new(0));
    let pongs = Arc::new(AtomicUsize::new(0));
    let (d, s, p) = (done.clone(), sleeps.clone(), pongs.clone());
    // The hog queues the others on its own worker's deque, then spins.
    let hog = fiber::Builder::new()
        .name("hog")
        .spawn_on(&rt, move || {
            let (d1, d2) = (d.clone(), d.clone());
            let local = || fiber::Builder::new().local(true);
            let sleeper = local()
                .spawn(move || {
                    while !d1.load(SeqCst) {
                        fiber::sleep(Duration::from_millis(10));
                        s.fetch_add(1, SeqCst);
                    }
                })
                .unwrap();
            let (ping_tx, ping_rx) = channel::bounded::<u32>(1);
            let (pong_tx, pong_rx) = channel::bounded::<u32>(1);
            let pinger = local()
                .spawn(move || {
                    while !d2.load(SeqCst) {
                        ping_tx.send(1).unwrap();
                        pong_rx.recv().unwrap();
                        p.fetch_add(1, SeqCst);
                    }
                })
                .unwrap();
            let ponger = local()
                .spawn(move || {
                    while let Ok(v) = ping_rx.recv() {
                        if pong_tx.send(v).is_err() {
                            break;
                        }
                    }
                })
                .unwrap();
            let t = Instant::now();
            while t.elapsed() < Duration::from_millis(1500) {
                std::hint::spin_loop();
            }
            (sleeper, pinger, ponger)
        })
        .unwrap();
    let hog_id = hog.id();
    std::thread::sleep(Duration::from_millis(500));
    let mid = rt.dump();
    let (sleeper, pinger, ponger) = hog.join().unwrap();
    let (s, p) = (sleeps.load(SeqCst), pongs.load(SeqCst));
    if s < 5 || p < 50 {
        eprintln!("{mid}");
    }
    done.store(true, SeqCst);
    sleeper.join().unwrap();
    pinger.join().unwrap();
    ponger.join().unwrap();
    // Generous liveness bounds (the machine may be loaded): about 150
    // sleeps and many thousand round trips are expected in 1.5 s.
    assert!(s >= 5, "the sleeper behind the hog slept {s} times");
    assert!(p >= 50, "the ping-pong pair behind the hog made {p} round trips");
    // Nothing waited on the hog (the other worker took its fibers), so it
    // is named once: by the long-slice summary at shutdown (its slice is
    // the longest), or by a stall report if the machine kept the other
    // worker from its timers that long.
    drop(rt);
    let reports = reports.lock().unwrap();
    let hog_reports: Vec<_> = reports.iter().filter(|r| r.fiber_id() == Some(hog_id)).collect();
    assert_eq!(hog_reports.len(), 1, "{reports:?}");
    let r = hog_reports[0];
    assert_eq!(r.name(), Some("hog"));
    assert!(r.running_for() >= Duration::from_millis(20));
    assert_eq!(r.spawn_site().unwrap().file(), file!());
    let text = r.to_string();
    assert!(text.contains(&format!("fiber {hog_id} \"hog\"")), "{text}");
}

/// The dump of a runtime whose fiber hogs a worker names it as running,
/// with the worker marked held.
#[test]
fn a_dump_shows_the_held_worker() {
    let rt = Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .stall_threshold(Some(Duration::from_millis(10)))
        .on_stall(|_| {})
        .build()
        .unwrap();
    let release = Arc::new(AtomicBool::new(false));
    // Released on every way out, so a failed assertion below fails the test
    // instead of leaving the runtime's drop waiting for the spinner.
    struct ReleaseOnExit(Arc<AtomicBool>);
    impl Drop for ReleaseOnExit {
        fn drop(&mut self) {
            self.0.store(true, SeqCst);
        }
    }
    let _release_on_exit = ReleaseOnExit(release.clone());
    let r = release.clone();
    let hog = fiber::Builder::new()
        .name("spinner")
        .spawn_on(&rt, move || {
            while !r.load(SeqCst) {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    let t = Instant::now();
    let d = loop {
        let d = rt.dump();
        if d.workers().any(|w| w.held() && w.running() == Some(hog.id())) {
            break d;
        }
        assert!(t.elapsed() < Duration::from_secs(10), "never held:\n{d}");
        std::thread::sleep(Duration::from_millis(2));
    };
    release.store(true, SeqCst);
    hog.join().unwrap();
    let f = d.fibers().find(|f| f.name() == Some("spinner")).unwrap();
    assert_eq!(f.state(), FiberState::Running);
    assert!(f.running_for().is_some());
    let text = d.to_string();
    assert!(text.contains("[held]") && text.contains("\"spinner\" [running"), "{text}");
}

/// Boost.Fiber's pattern: a child spins on `try_lock` (which never
/// yields) while its parent, holding the lock, sleeps. On 2 workers it
/// must complete through the monitor alone: the spinner holds one worker,
/// the monitor wakes the other, which must then fire the parent's timer,
/// also when that timer sits in the held worker's heap (an idle worker
/// fires another worker's overdue timers).
#[test]
fn spin_on_try_lock_completes_on_two_workers() {
    let rt = Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .stall_threshold(Some(Duration::from_millis(20)))
        .on_stall(|_| {})
        .build()
        .unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = rt.handle();
    std::thread::spawn(move || {
        let r = h.spawn(|| {
            let m = Arc::new(Mutex::new(0u32));
            let g = m.lock();
            let m2 = m.clone();
            let child = fiber::spawn(move || loop {
                if let Some(mut g) = m2.try_lock() {
                    *g += 1;
                    return;
                }
            });
            fiber::sleep(Duration::from_millis(50));
            drop(g);
            child.join().unwrap();
            let v = *m.lock();
            v
        });
        let _ = tx.send(r.join().unwrap());
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(v) => assert_eq!(v, 1),
        Err(_) => {
            let d = rt.dump();
            // The spinner never ends: dropping the runtime would wait for
            // it for ever.
            std::mem::forget(rt);
            panic!("the spin-on-try_lock pattern hung:\n{}\n{d}", d.grouped());
        }
    }
}
