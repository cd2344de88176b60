//! Helpers shared by test binaries (`mod common;`); each binary uses a
//! part of them.
#![allow(dead_code)]

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::sync::{Barrier, Mutex};
use numafiber::{fiber, Runtime, Topology};

/// The text of a panic payload (`String` or `&str`), empty otherwise.
pub fn panic_message(p: Box<dyn std::any::Any + Send>) -> String {
    p.downcast_ref::<String>().cloned().or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string())).unwrap_or_default()
}

/// A lock cycle between two fibers named "left" and "right" (each holds
/// one mutex and waits for the other's): the body of a `block_on` that can
/// only end in the deadlock report.
pub fn lock_cycle() {
    let a = Arc::new(Mutex::new(()));
    let b = Arc::new(Mutex::new(()));
    let both = Arc::new(Barrier::new(2));
    let (a1, b1, w1) = (a.clone(), b.clone(), both.clone());
    let h1 = fiber::Builder::new()
        .name("left")
        .spawn(move || {
            let _ga = a1.lock();
            w1.wait();
            let _gb = b1.lock();
        })
        .unwrap();
    let h2 = fiber::Builder::new()
        .name("right")
        .spawn(move || {
            let _gb = b.lock();
            both.wait();
            let _ga = a.lock();
        })
        .unwrap();
    fiber::await_fiber(h1);
    fiber::await_fiber(h2);
}

/// Worker 1 spins in a pinned fiber until `release` is set (or 120 s, so
/// that a broken test fails instead of hanging). Returns once it spins.
pub fn occupy_worker1(rt: &Runtime, release: &Arc<AtomicBool>) -> fiber::JoinHandle<()> {
    let started = Arc::new(AtomicBool::new(false));
    let (s, r) = (started.clone(), release.clone());
    let h = fiber::Builder::new()
        .worker(1)
        .spawn_on(rt, move || {
            s.store(true, SeqCst);
            let t0 = Instant::now();
            while !r.load(SeqCst) && t0.elapsed() < Duration::from_secs(120) {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    while !started.load(SeqCst) {
        std::thread::yield_now();
    }
    h
}

/// Let the other fibers of a one-worker runtime run until they park.
pub fn settle() {
    for _ in 0..20 {
        fiber::yield_now();
    }
}

/// Counts its drops (a victim's destructor runs exactly once).
pub struct Tally(pub Arc<std::sync::atomic::AtomicUsize>);
impl Drop for Tally {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

/// A runtime of `workers` workers on one node (`Topology::uniform(1, workers)`).
pub fn uniform_rt(workers: usize) -> Runtime {
    Runtime::builder().workers(workers).topology(Topology::uniform(1, workers)).build().expect("runtime")
}

/// Run `f` on a fresh thread; fail (instead of hanging the suite) if it
/// has not returned after `secs` seconds.
pub fn within<R: Send + 'static>(secs: u64, what: &str, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(Duration::from_secs(secs)) {
        Ok(r) => r,
        Err(_) => panic!("{what}: did not complete within {secs} s"),
    }
}
