//! Helpers shared by the runtime's unit tests.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::fiber::{Builder, JoinHandle};
use crate::runtime::context;

/// From a fiber: keep worker `other` busy (a fiber pinned there spins)
/// until `release` is set (or 60 s pass), so that nobody steals from the
/// caller's worker meanwhile. Returns once the spinner runs.
pub(super) fn occupy(other: usize, release: &Arc<AtomicBool>) -> JoinHandle<()> {
    let started = Arc::new(AtomicBool::new(false));
    let (s, r) = (started.clone(), release.clone());
    let h = Builder::new()
        .worker(other)
        .spawn(move || {
            s.store(true, SeqCst);
            let t0 = Instant::now();
            while !r.load(SeqCst) && t0.elapsed() < Duration::from_secs(60) {
                std::hint::spin_loop();
            }
        })
        .unwrap();
    let t0 = Instant::now();
    while !started.load(SeqCst) {
        assert!(t0.elapsed() < Duration::from_secs(60), "the spinner did not start");
        std::thread::yield_now();
    }
    h
}

/// From a fiber: the index of the worker running it.
pub(super) fn my_worker() -> usize {
    let w = context::worker_ptr();
    assert!(!w.is_null());
    // SAFETY: a fiber runs on a live worker of this runtime.
    unsafe { (*w).index }
}
