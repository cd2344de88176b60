//! The placement probe's estimates (`worker::shared::PublishedLen`) against the
//! true queue lengths, and the sharded placement counters against the
//! number of fibers placed.

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::shared::Shared;
use super::test_support::{my_worker, occupy};
use super::worker::shared::PUBLISH_SLACK;
use super::worker::SpawnerProbe;
use super::Runtime;
use crate::fiber::{self, Builder};
use crate::policy::LoadProbe;
use crate::{Policy, Topology};

/// The true queue of worker `w` (its queues themselves) and the probe's
/// estimate of it as another worker or a foreign thread sees it.
fn true_and_estimate(shared: &Shared, w: usize) -> (usize, usize) {
    (shared.workers[w].queue_len(), LoadProbe::queue_len(shared, w))
}

/// Wait (generously) until every worker sleeps: the runtime is quiescent.
fn wait_all_asleep(shared: &Shared) {
    let t0 = Instant::now();
    while !shared.workers.iter().all(|w| w.sleeper.is_sleeping()) {
        assert!(t0.elapsed() < Duration::from_secs(60), "workers did not go to sleep");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn estimate_tracks_a_busy_workers_own_pushes_within_the_slack() {
    // NLH on 2 workers of one node (the estimates are published). The
    // other worker is kept inside one spinning fiber, so nobody steals:
    // what the root queues on its own worker stays there.
    let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().unwrap();
    let shared = rt.shared.clone();
    assert!(shared.workers.iter().all(|w| w.published_len.enabled()));
    let checked = rt.block_on(move || {
        let me = my_worker();
        let other = 1 - me;
        let release = Arc::new(AtomicBool::new(false));
        let spinner = occupy(other, &release);
        // SAFETY: this fiber runs on worker `me` and does not suspend
        // while `own` is used (local spawns do not suspend).
        let own = unsafe { SpawnerProbe::new(&shared, me) };
        let mut handles = Vec::new();
        let mut checked = 0;
        for k in 1..=40usize {
            handles.push(Builder::new().local(true).spawn(move || k).unwrap());
            let (truth, est) = true_and_estimate(&shared, me);
            assert_eq!(truth, k, "{k} local children queued");
            // The spawner's own view is exact.
            assert_eq!(own.queue_len(me), k);
            // Others see the published value: below the truth by less
            // than the slack (no thief took anything).
            assert!(est <= truth && truth < est + PUBLISH_SLACK, "k={k}: estimate {est}, true {truth}");
            checked += 1;
        }
        // `own` is not used past this point (the awaits below suspend).
        release.store(true, SeqCst);
        fiber::await_fiber(spinner);
        let sum: usize = handles.into_iter().map(fiber::await_fiber).sum();
        assert_eq!(sum, 40 * 41 / 2);
        checked
    });
    assert_eq!(checked, 40);
    wait_all_asleep(&rt.shared);
    for w in 0..2 {
        assert_eq!(true_and_estimate(&rt.shared, w), (0, 0), "worker {w} quiescent");
    }
}

#[test]
fn a_worker_alone_on_its_node_publishes_nothing() {
    // 2 nodes x 1 worker: NLH never probes a queue (one worker per node),
    // and the estimate is the queues themselves.
    let rt = Runtime::builder().workers(2).topology(Topology::uniform(2, 1)).build().unwrap();
    assert!(rt.shared.workers.iter().all(|w| !w.published_len.enabled()));
    assert_eq!(rt.block_on(|| tree(3)), 64);
    let rr =
        Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).policy(Policy::RoundRobin).build().unwrap();
    assert!(rr.shared.workers.iter().all(|w| !w.published_len.enabled()));
}

fn tree(depth: u32) -> u64 {
    if depth == 0 {
        return 1;
    }
    let hs: Vec<_> = (0..4).map(|_| fiber::spawn(move || tree(depth - 1))).collect();
    hs.into_iter().map(fiber::await_fiber).sum()
}

#[test]
fn estimates_are_exact_when_the_runtime_is_quiescent_and_counters_add_up() {
    // The default policy (NLH) on 2 workers of one node: spawns probe the
    // estimates, thieves steal, reclaims leave surplus entries.
    let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).build().unwrap();
    let shared: Arc<Shared> = rt.shared.clone();
    let rounds = 3u64;
    for _ in 0..rounds {
        assert_eq!(rt.block_on(|| tree(6)), 4096);
        wait_all_asleep(&shared);
        for w in 0..2 {
            let (truth, est) = true_and_estimate(&shared, w);
            assert_eq!(truth, 0, "worker {w}: nothing left queued");
            assert_eq!(est, truth, "worker {w}: a quiescent estimate is exact");
        }
    }
    // Every fiber was counted once, in the shard of its spawner: per round
    // the root (a foreign spawner: block_on) and its tree below, 1 + 4 +
    // ... + 4^6 fibers in all.
    let fibers = rounds * (4u64.pow(7) - 1) / 3;
    let stats = rt.stats();
    assert_eq!(stats.spawned, fibers);
    assert_eq!(stats.nodes.iter().map(|n| n.placements).sum::<u64>(), fibers);
    // Thesis counts only grow: the single node's workload is its placements.
    assert_eq!(stats.nodes[0].workload, fibers as i64);
}
