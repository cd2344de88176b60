//! The loom models `unpark_vs_park` and `two_unparks_vs_park`
//! (`runtime::unpark`, "The token"): `fiber::park` against `unpark`s from
//! other threads, on the real token code (`unpark_token`, `enter_park`,
//! `leave_park`) and the real task state machine.

use std::sync::Arc;

use loom::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use loom::thread;

use numafiber::__loom::FiberState;

use super::check;

/// `fiber::park` by the running `fiber`, its suspension re-stated as in
/// the model `park_token` (`park_task`: `take_token`, then the worker's
/// `transition_to_parked`). `resumed` is called when the fiber parked for
/// real: it returns once someone has pushed the fiber again (or panics if
/// nobody will). Returns `true` when the park returned at once on the
/// token.
fn park(fiber: &FiberState, resumed: impl FnOnce()) -> bool {
    if fiber.enter_park() {
        return true;
    }
    if !fiber.take_token() {
        if fiber.transition_to_parked() {
            resumed();
        }
        // Requeued (by its worker after a token, or by the unparker) and
        // popped: the fiber runs again.
        assert!(fiber.transition_to_running(), "a pushed fiber gets the run permission");
    }
    fiber.leave_park();
    false
}

/// After the park and every unpark: no wake-up token is left (it would
/// end the next park early, a second token beside the unpark token);
/// whether an unpark token is left (`true`: the next park returns at once).
fn tokens_left(fiber: &FiberState) -> bool {
    assert!(!fiber.take_token(), "an unpark left a wake-up token after the park");
    fiber.enter_park()
}

/// An unpark from another thread races with the fiber's park. The park
/// ends (no unpark is lost: a fiber that parked for real is pushed by the
/// unparker), the fiber is pushed at most once, and afterwards it holds
/// no token: neither the unpark token nor a wake-up token that would end
/// its next park early (before the token protocol marked the park, an
/// unpark of a running fiber left that wake-up token beside its own).
#[test]
fn unpark_vs_park() {
    check("unpark_vs_park", None, || {
        let fiber = FiberState::new();
        assert!(fiber.transition_to_running());
        let pushed = Arc::new(AtomicUsize::new(0));
        let unparker = {
            let (fiber, pushed) = (fiber.clone(), pushed.clone());
            thread::spawn(move || {
                if fiber.unpark_token() && fiber.transition_to_notified() {
                    pushed.fetch_add(1, Relaxed);
                }
            })
        };
        let mut unparker = Some(unparker);
        park(&fiber, || {
            unparker.take().unwrap().join().unwrap();
            assert_eq!(pushed.load(Relaxed), 1, "the fiber parked and its unpark did not push it");
        });
        if let Some(u) = unparker {
            u.join().unwrap();
        }
        assert!(pushed.load(Relaxed) <= 1);
        // The park consumed the only unpark.
        assert!(!tokens_left(&fiber), "an unpark token was left after the park that took it");
    });
}

/// Two unparks race with the park: one of them wakes the fiber (or
/// neither, when the park found the token), never both, and at most the
/// unpark token is left (when the second unpark came after the park).
#[test]
fn two_unparks_vs_park() {
    check("two_unparks_vs_park", Some(3), || {
        let fiber = FiberState::new();
        assert!(fiber.transition_to_running());
        let pushed = Arc::new(AtomicUsize::new(0));
        let unparkers: Vec<_> = (0..2)
            .map(|_| {
                let (fiber, pushed) = (fiber.clone(), pushed.clone());
                thread::spawn(move || {
                    if fiber.unpark_token() && fiber.transition_to_notified() {
                        pushed.fetch_add(1, Relaxed);
                    }
                })
            })
            .collect();
        let mut unparkers = Some(unparkers);
        park(&fiber, || {
            for u in unparkers.take().unwrap() {
                u.join().unwrap();
            }
            assert_eq!(pushed.load(Relaxed), 1, "the fiber parked and no unpark pushed it");
        });
        for u in unparkers.into_iter().flatten() {
            u.join().unwrap();
        }
        assert!(pushed.load(Relaxed) <= 1);
        // An unpark after the park ended may leave the one token for the
        // next park, never a wake-up token beside it.
        tokens_left(&fiber);
    });
}
