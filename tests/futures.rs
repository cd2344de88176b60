//! Futures and condition variables for ports, retold from Boost.Fiber's
//! own tests: `test_shared_future_post.cpp` (copy, move, get from many
//! readers, `wait_for`/`wait_until` statuses, broken promise, exception
//! seen by every reader), `test_packaged_task_post.cpp` (`get_future` then
//! run, broken promise when destroyed unrun, exception from the task,
//! run on another fiber) and `test_condition_variable_any_post.cpp`
//! (`wait` with a predicate, `wait_for`/`wait_until` over a lock other
//! than the fiber mutex, notify_all wakes every waiter).

use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::sync::oneshot::{FutureError, FutureStatus};
use numafiber::sync::{self, CondvarAny, Mutex, PackagedTask, RwLock, SharedError, TaskPanicked};
use numafiber::{fiber, Runtime, Topology};

fn rt() -> Runtime {
    Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().expect("runtime")
}

const MS: Duration = Duration::from_millis(1);

// ------------------------------------------------------------ SharedFuture

#[test]
fn shared_future_every_reader_gets_the_value() {
    // Boost test_shared_future_get_many: copies of one shared_future on
    // several fibers all get the value; get() can be called twice.
    let rt = rt();
    let got = rt.block_on(|| {
        let (p, f) = sync::oneshot::<String>();
        let s = f.share();
        let readers: Vec<_> = (0..8)
            .map(|_| {
                let s = s.clone();
                fiber::spawn(move || (s.wait().unwrap(), s.wait().unwrap()))
            })
            .collect();
        fiber::sleep(5 * MS); // the readers park first
        p.set("v".to_string());
        fiber::when_all(readers)
    });
    assert_eq!(got.len(), 8);
    assert!(got.iter().all(|(a, b)| a == "v" && b == "v"));
}

#[test]
fn shared_future_readers_on_threads_and_fibers() {
    let rt = rt();
    let (p, f) = sync::oneshot::<u64>();
    let s = f.share();
    let fibers: Vec<_> = (0..3).map(|_| s.clone()).map(|s| rt.spawn(move || s.wait().unwrap())).collect();
    let threads: Vec<_> = (0..3).map(|_| s.clone()).map(|s| std::thread::spawn(move || s.wait().unwrap())).collect();
    std::thread::sleep(5 * MS);
    p.set(11);
    let sum: u64 = fibers.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
        + threads.into_iter().map(|t| t.join().unwrap()).sum::<u64>();
    assert_eq!(sum, 66);
    assert_eq!(s.try_get().unwrap(), 11);
}

#[test]
fn shared_future_wait_for_and_wait_until_statuses() {
    // Boost test_shared_future_wait_for / wait_until: timeout before the
    // value, ready after; the value is still readable.
    let (p, f) = sync::oneshot::<i32>();
    let s = f.share();
    let t = Instant::now();
    assert_eq!(s.wait_for(10 * MS), FutureStatus::Timeout);
    assert!(t.elapsed() >= 10 * MS);
    assert_eq!(s.wait_until(Instant::now() + MS), FutureStatus::Timeout);
    assert!(matches!(s.wait_timeout(MS), Err(FutureError::TimedOut)));
    assert!(!s.is_ready());
    p.set(-1);
    assert_eq!(s.wait_for(10 * MS), FutureStatus::Ready);
    assert_eq!(s.wait_until(Instant::now()), FutureStatus::Ready);
    assert!(s.is_ready());
    assert_eq!(s.wait().unwrap(), -1);
}

#[test]
fn shared_future_broken_promise_seen_by_every_reader() {
    // Boost test_shared_future_broken_promise.
    let (p, f) = sync::oneshot::<i32>();
    let s1 = f.share();
    let s2 = s1.clone();
    drop(p);
    assert!(s1.wait().unwrap_err().is_broken());
    assert!(s2.wait().unwrap_err().is_broken());
}

#[test]
fn shared_future_error_seen_by_every_reader() {
    // Boost test_shared_future_set_exception: every get() rethrows it.
    let (p, f) = sync::oneshot::<i32>();
    let s = f.share();
    let s2 = s.clone();
    p.set_error(std::io::Error::new(std::io::ErrorKind::ConnectionReset, "reset by peer"));
    for s in [s, s2] {
        let e = s.wait().unwrap_err();
        assert!(e.is_failed());
        let e = e.into_error().unwrap();
        assert_eq!(e.to_string(), "reset by peer");
        let inner = e.downcast_ref::<SharedError>().unwrap().get();
        assert_eq!(inner.downcast_ref::<std::io::Error>().unwrap().kind(), std::io::ErrorKind::ConnectionReset);
    }
}

#[test]
fn promise_is_closed_once_the_last_shared_reader_is_gone() {
    let (p, f) = sync::oneshot::<u8>();
    let s = f.share();
    assert!(!p.is_closed(), "share is not a drop of the future");
    let s2 = s.clone();
    drop(s);
    assert!(!p.is_closed());
    drop(s2);
    assert!(p.is_closed());
}

// ------------------------------------------------------------ PackagedTask

#[test]
fn packaged_task_completes_its_future_when_run_on_another_fiber() {
    // Boost test_packaged_task_create + run on a fiber: get() returns the
    // function's result.
    let rt = rt();
    let v = rt.block_on(|| {
        let (task, f) = PackagedTask::new(|| (1..=10).sum::<u32>());
        let h = fiber::spawn(move || task.run());
        let v = f.wait().unwrap();
        fiber::await_fiber(h);
        v
    });
    assert_eq!(v, 55);
}

#[test]
fn packaged_task_run_on_a_thread_future_waited_in_a_fiber() {
    let rt = rt();
    let (task, f) = PackagedTask::new(|| "from a thread");
    let h = rt.spawn(move || f.wait().unwrap());
    std::thread::sleep(5 * MS);
    std::thread::spawn(move || task.run()).join().unwrap();
    assert_eq!(h.join().unwrap(), "from a thread");
}

#[test]
fn packaged_task_dropped_unrun_breaks_the_promise() {
    // Boost test_packaged_task_broken_promise: the future's get() throws
    // broken_promise when the task is destroyed without being run.
    let (task, f) = PackagedTask::new(|| 1);
    assert!(!task.is_future_dropped());
    drop(task);
    assert!(f.wait().unwrap_err().is_broken());
}

#[test]
fn packaged_task_panic_reaches_the_future_and_the_runner() {
    // Boost test_packaged_task_exception: the task's exception is stored
    // in the future. The runner's panic still unwinds (not swallowed).
    let rt = rt();
    let (task, f) = PackagedTask::new(|| -> u8 { panic!("task failed") });
    let runner = rt.spawn(move || task.run());
    assert!(runner.join().is_err(), "the runner fiber panicked");
    let e = f.wait().unwrap_err().into_error().unwrap();
    assert_eq!(e.downcast_ref::<TaskPanicked>().unwrap().message(), Some("task failed"));
}

#[test]
fn packaged_task_shared_future_many_readers() {
    let rt = rt();
    let n = rt.block_on(|| {
        let (task, f) = PackagedTask::new(|| 3usize);
        let s = f.share();
        let rs: Vec<_> = (0..5).map(|_| s.clone()).map(|s| fiber::spawn(move || s.wait().unwrap())).collect();
        fiber::spawn(move || task.run());
        fiber::when_all(rs).into_iter().sum::<usize>()
    });
    assert_eq!(n, 15);
}

// ------------------------------------------------------------ CondvarAny

#[test]
fn condvar_any_over_rwlock_wait_with_predicate() {
    // Boost test_condition_variable_any_post.cpp test_two_waiter_notify_all
    // over a shared_mutex locked exclusively, with a predicate.
    let rt = rt();
    let woken = Arc::new(AtomicUsize::new(0));
    let w2 = woken.clone();
    rt.block_on(move || {
        let st = Arc::new((RwLock::new(false), CondvarAny::new()));
        let hs: Vec<_> = (0..2)
            .map(|_| {
                let (st, w) = (st.clone(), w2.clone());
                fiber::spawn(move || {
                    let g = st.1.wait_while(&st.0, st.0.write(), |ready| !*ready);
                    assert!(*g);
                    w.fetch_add(1, SeqCst);
                })
            })
            .collect();
        fiber::sleep(5 * MS);
        *st.0.write() = true;
        st.1.notify_all();
        fiber::when_all(hs);
    });
    assert_eq!(woken.load(SeqCst), 2);
}

#[test]
fn condvar_any_over_std_mutex_from_fibers_and_threads() {
    let rt = rt();
    let st = Arc::new((std::sync::Mutex::new(0u32), CondvarAny::new()));
    let (a, b) = (st.clone(), st.clone());
    let f = rt.spawn(move || {
        let g = a.1.wait_while(&a.0, a.0.lock().unwrap(), |n| *n < 1);
        *g
    });
    let t = std::thread::spawn(move || {
        let g = b.1.wait_while(&b.0, b.0.lock().unwrap(), |n| *n < 1);
        *g
    });
    std::thread::sleep(5 * MS);
    *st.0.lock().unwrap() = 1;
    st.1.notify_all();
    assert_eq!(f.join().unwrap(), 1);
    assert_eq!(t.join().unwrap(), 1);
}

#[test]
fn condvar_any_wait_for_and_wait_until_time_out() {
    // Boost test_wait_for_timeout / test_wait_until_timeout.
    let m = Mutex::new(0);
    let cv = CondvarAny::new();
    let t = Instant::now();
    let (g, r) = cv.wait_timeout(&m, m.lock(), 10 * MS);
    assert!(r.timed_out() && t.elapsed() >= 10 * MS);
    drop(g);
    let (g, r) = cv.wait_until(&m, m.lock(), Instant::now() + 5 * MS);
    assert!(r.timed_out());
    drop(g);
    let (g, r) = cv.wait_while_until(&m, m.lock(), Instant::now() + 5 * MS, |n| *n == 0);
    assert!(r.timed_out() && *g == 0);
}

#[test]
fn condvar_any_used_with_two_locks_over_time() {
    // Unlike Condvar, CondvarAny may be used with different locks.
    let (m1, m2) = (Mutex::new(()), Mutex::new(()));
    let cv = CondvarAny::new();
    let (g, r) = cv.wait_timeout(&m1, m1.lock(), MS);
    assert!(r.timed_out());
    drop(g);
    let (g, r) = cv.wait_timeout(&m2, m2.lock(), MS);
    assert!(r.timed_out());
    drop(g);
}

#[test]
fn condvar_any_notify_one_wakes_one_in_fifo_order() {
    let rt = rt();
    let order = rt.block_on(|| {
        let st = Arc::new((Mutex::new(Vec::new()), CondvarAny::new()));
        let hs: Vec<_> = (0..3)
            .map(|i| {
                let st = st.clone();
                let h = fiber::spawn(move || {
                    let g = st.0.lock();
                    let mut g = st.1.wait(&st.0, g);
                    g.push(i);
                });
                fiber::sleep(3 * MS); // queue in order 0, 1, 2
                h
            })
            .collect();
        for _ in 0..3 {
            st.1.notify_one();
            fiber::sleep(3 * MS);
        }
        fiber::when_all(hs);
        let v = st.0.lock().clone();
        v
    });
    assert_eq!(order, [0, 1, 2]);
}
