//! The loom model `select_send_arm_vs_close` (`sync::select`, step 3; the
//! channel's close): a select parked on a send arm, its channel closed.

use std::sync::Arc;

use loom::thread;

use numafiber::__loom::{SendArmModel, SendArmWaiter};

use super::check;

/// A select registers its send arm (the value moves into the channel's
/// queue) and parks until a granter claims it or the channel is over; a
/// closer closes the channel meanwhile. The select must wake (no lost
/// wake-up between its "is the channel over" check and its park: loom
/// reports a deadlock otherwise), see the end although its value sits in
/// the queue, and get its value back when it leaves the round. A check
/// that looked only at the value the arm holds itself never saw the end
/// while registered: the select parked for good.
#[test]
fn select_send_arm_vs_close() {
    check("select_send_arm_vs_close", None, || {
        let m = Arc::new(SendArmModel::new());
        let mut w = SendArmWaiter::new(6);
        let m2 = m.clone();
        let closer = thread::spawn(move || m2.close());
        if m.register(&mut w) {
            while w.selected().is_none() && !m.gone(&w) {
                thread::park();
            }
            assert_eq!(m.leave(&mut w), None, "nobody receives: the abort wins");
        }
        closer.join().unwrap();
        assert_eq!(m.value(&w), Some(6), "the value is the select's again");
    });
}
