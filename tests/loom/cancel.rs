//! The loom model `cancel_vs_grant` (`runtime::cancel`, step 3): a parked
//! fiber granted a channel value and cancelled at once.

use std::sync::Arc;

use loom::thread;

use numafiber::__loom::{FiberState, ForkJob, HandoffCell, HandoffQueue, HandoffWaiter};

use super::check;

/// What the receiving fiber ended with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Got {
    /// Not cancelled: it received the value through its signal.
    Received(u64),
    /// Cancelled after the grant: its wait's guard found the entry granted
    /// and passed the value back to the channel.
    PassedBack(u64),
    /// Cancelled before any grant: it left the queue with nothing.
    Nothing,
}

/// The fiber's continuation after its park, run by whoever pushed it (a
/// worker pops the entry): it takes the run permission, passes its
/// cancellation point (step 2) and ends its wait: a cancelled fiber
/// unwinds through the wait's guard (remove the entry; if it is gone, the
/// grant is passed back), one that is not ends through its signal.
fn resume_receiver(
    fiber: &FiberState,
    q: &HandoffQueue,
    cell: &HandoffCell,
    waiter: &loom::sync::Mutex<Option<HandoffWaiter>>,
) -> Got {
    assert!(fiber.transition_to_running(), "a pushed fiber gets the run permission");
    let w = waiter.lock().unwrap().take().expect("the fiber is resumed exactly once");
    if fiber.cancel_requested() {
        match q.wait(w, cell, 0, false) {
            Some(v) => Got::PassedBack(v),
            None => Got::Nothing,
        }
    } else {
        match q.wait(w, cell, 1, false) {
            Some(v) => Got::Received(v),
            None => panic!("woken with neither a grant nor a cancellation request"),
        }
    }
}

/// A fiber parked in a channel receive (entry queued, the worker's
/// `RUNNING -> PARKED` CAS racing) is granted a value by a sender and
/// cancelled by another thread at once. Exactly one party pushes it (the
/// sender, the canceller, or its worker requeueing after a token), so it
/// is resumed once; it sees the cancellation unless the sender's push came
/// first; and the value is never lost or duplicated: it ends received,
/// passed back to the channel by the cancelled receiver, or still with
/// the sender (the receiver left first). Loom's cell checks that no write
/// to the receiver's cell races a read.
#[test]
fn cancel_vs_grant() {
    check("cancel_vs_grant", Some(3), || {
        let fiber = FiberState::new();
        assert!(fiber.transition_to_running());
        let q = Arc::new(HandoffQueue::new());
        let cell = Arc::new(HandoffCell::new());
        let waiter = Arc::new(loom::sync::Mutex::new(Some(q.push(&cell))));
        let sender = {
            let (fiber, q, cell, waiter) = (fiber.clone(), q.clone(), cell.clone(), waiter.clone());
            thread::spawn(move || {
                let (back, push) = q.send_waking(7, &fiber);
                (back, push.then(|| resume_receiver(&fiber, &q, &cell, &waiter)))
            })
        };
        let canceller = {
            let (fiber, q, cell, waiter) = (fiber.clone(), q.clone(), cell.clone(), waiter.clone());
            thread::spawn(move || fiber.request_cancel().then(|| resume_receiver(&fiber, &q, &cell, &waiter)))
        };
        // The fiber suspended with `Suspend::Park`; its worker:
        let by_worker = (!fiber.transition_to_parked()).then(|| resume_receiver(&fiber, &q, &cell, &waiter));
        let (back, by_sender) = sender.join().unwrap();
        let by_canceller = canceller.join().unwrap();
        let resumed: Vec<Got> = [by_worker, by_sender, by_canceller].into_iter().flatten().collect();
        assert_eq!(resumed.len(), 1, "resumed exactly once: {resumed:?}");
        let got = resumed[0];
        let value_at_end = match got {
            Got::Received(v) | Got::PassedBack(v) => Some(v),
            Got::Nothing => None,
        };
        assert!(
            value_at_end.is_some() != back.is_some(),
            "the value is in exactly one place: {got:?}, sender has {back:?}"
        );
        assert_eq!(value_at_end.or(back), Some(7));
        assert!(waiter.lock().unwrap().is_none());
        // Whatever happened, the cancellation request is there for the
        // fiber's next cancellation point.
        assert!(fiber.cancel_requested());
    });
}

/// A fiber cancelled while it waits for its stolen `fiber::join` job
/// passes the cancellation on (`runtime::task::job`, "Cancelling a stolen
/// job"): under the job's `runner` lock it marks the job and reads the
/// runner, while the thief stores the runner and reads the mark. Unless
/// the job finished before the owner's first park, whatever the order,
/// the runner ends with `CANCEL` set (it was found and
/// cancelled, or it was made after the mark and got the flag before it
/// ran), a runner that saw the flag never runs the closure, the owner is
/// woken (no lost wake-up: loom reports a deadlock) and frees the job only
/// after the executor's last access (`assert_free`).
#[test]
fn join_cancel_vs_steal() {
    check("join_cancel_vs_steal", None, || {
        // A stale wake-up token: the owner's first park may return at once.
        thread::current().unpark();
        let mut job = ForkJob::new(|| 5u32);
        let r = job.job_ref();
        let runner = FiberState::new();
        let thief = {
            let runner = runner.clone();
            // SAFETY: `job` outlives the thief (joined below, and the
            // owner returns only after the latch's final state).
            thread::spawn(move || unsafe { r.run_as(&runner) })
        };
        let (result, passed_on) = job.wait_cancelling_and_release();
        let ran = thief.join().unwrap();
        // Not passed on only when the job was finished before the owner's
        // first park (the owner then unwinds right after the wait).
        assert!(passed_on || ran, "a job not cancelled ran");
        if passed_on {
            assert!(runner.cancel_requested(), "the cancellation reached the runner");
        }
        match result {
            Ok(v) => assert!(ran && v == 5),
            Err(e) => assert!(!ran && e.is_cancelled(), "{e}"),
        }
    });
}

/// A cancellation request is seen at the entry of the fiber's next park
/// (`park::park_task`, `cancel` module docs, step 2) once the fiber has
/// consumed the request's wake-up, whichever way: as a token (the request
/// came while it ran), or by being pushed and resumed (the canceller won
/// `PARKED -> QUEUED`; the resumer's `transition_to_running` orders it).
/// A shielded wait or a caught unwind consumes it without unwinding; the
/// flag, set before the wake-up, must still be there.
#[test]
fn cancel_flag_outlives_its_wake_up() {
    check("cancel_flag_outlives_its_wake_up", None, || {
        let fiber = FiberState::new();
        assert!(fiber.transition_to_running());
        // A queue of one entry (a push is a release store, a pop an
        // acquire load: the stand-in of `tests/loom.rs`).
        let queued = Arc::new(loom::sync::atomic::AtomicBool::new(false));
        let canceller = {
            let (fiber, queued) = (fiber.clone(), queued.clone());
            thread::spawn(move || {
                let push = fiber.request_cancel();
                if push {
                    queued.store(true, loom::sync::atomic::Ordering::Release);
                }
                push
            })
        };
        // The fiber parks (shielded): a token ends the park at once;
        // otherwise its worker's CAS races the canceller's, and a worker
        // that finds the token requeues the fiber itself.
        let token = fiber.take_token();
        let requeued = !token && !fiber.transition_to_parked();
        let parked = !token && !requeued;
        if parked {
            // A worker pops the canceller's push.
            while !queued.load(loom::sync::atomic::Ordering::Acquire) {
                thread::yield_now();
            }
        }
        if requeued || parked {
            // ... and resumes the fiber.
            assert!(fiber.transition_to_running());
        }
        // The shielded wait ends (its grant came); the next park's entry,
        // before anything else orders the canceller's writes:
        assert!(fiber.cancel_requested(), "the flag is there at the next park's entry");
        let pushed = canceller.join().unwrap();
        assert_eq!(parked, pushed, "the canceller pushed exactly the parked fiber");
    });
}
