//! The held-child slot (`runtime/README.md`, "The held-child slot"): a child a
//! fiber spawns for another worker of its node stays in the spawner's
//! worker until the spawner joins it (then it runs there, and nothing
//! reaches the other worker) or gives control back (then it goes on to the
//! worker placement chose).

use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use super::test_support::{my_worker, occupy};
use super::Runtime;
use crate::fiber;
use crate::{Policy, Topology};

// Both tests: a round-robin (`RandomSteal`) runtime of 2 workers on one
// node, the other worker kept busy (`occupy`) so that nobody steals.

#[test]
fn a_child_joined_at_once_never_reaches_the_other_worker() {
    let rt =
        Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).policy(Policy::RandomSteal).build().unwrap();
    let shared = rt.shared.clone();
    let (held, spawns) = rt.block_on(move || {
        let me = my_worker();
        let other = 1 - me;
        let release = Arc::new(AtomicBool::new(false));
        let spinner = occupy(other, &release);
        let mut held = 0;
        for k in 0..100usize {
            let h = fiber::spawn(move || (k, fiber::current().unwrap().worker));
            if shared.workers[me].held.is_occupied() {
                held += 1;
            }
            assert!(shared.workers[other].inbox.is_empty(), "spawn {k}: an entry reached the other worker's inbox");
            assert_eq!(h.join().unwrap(), (k, me), "spawn {k}: the child ran on its joiner's worker");
            assert!(!shared.workers[me].held.is_occupied(), "spawn {k}: the join took the child out of the slot");
            assert!(shared.workers[other].inbox.is_empty(), "spawn {k}: no surplus entry over there");
        }
        release.store(true, SeqCst);
        fiber::await_fiber(spinner);
        (held, 100)
    });
    // Round-robin alternates the targets: about every other child was
    // placed on the other worker, and each of those was held.
    assert!(held >= spawns / 3, "{held} of {spawns} children were held back");
    let reclaimed: u64 = rt.stats().workers.iter().map(|w| w.reclaimed).sum();
    assert!(reclaimed >= held as u64, "{reclaimed} reclaims for {held} held children");
}

#[test]
fn a_held_child_goes_on_when_its_spawner_parks() {
    let rt =
        Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).policy(Policy::RandomSteal).build().unwrap();
    let shared = rt.shared.clone();
    let (first_seen, ran_on) = rt.block_on(move || {
        let me = my_worker();
        let other = 1 - me;
        let release = Arc::new(AtomicBool::new(false));
        let spinner = occupy(other, &release);
        // Spawn until a child is held (round-robin: at most two spawns).
        let mut handles = Vec::new();
        let mut first_seen = None;
        for k in 0..4usize {
            handles.push(fiber::spawn(move || (k, fiber::current().unwrap().worker)));
            if shared.workers[me].held.is_occupied() {
                first_seen = Some(k);
                break;
            }
        }
        // Park without joining it: the worker sends it on to `other`'s
        // inbox when this fiber gives control back (and, idle while we
        // sleep, may then steal it back from there: either way it runs
        // exactly once).
        fiber::sleep(Duration::from_millis(1));
        assert!(!shared.workers[me].held.is_occupied(), "released when the spawner parked");
        release.store(true, SeqCst);
        fiber::await_fiber(spinner);
        let ran_on: Vec<(usize, usize)> = handles.into_iter().map(|h| h.join().unwrap()).collect();
        (first_seen, ran_on)
    });
    let k = first_seen.expect("round-robin placed one of the first children on the other worker");
    assert_eq!(ran_on.len(), k + 1);
    for (i, &(j, _)) in ran_on.iter().enumerate() {
        assert_eq!(i, j, "each child ran once, with its own closure");
    }
}
