//! The calls of the loom models `unpark_vs_park` and
//! `two_unparks_vs_park` (`runtime::unpark`, "The token"): `fiber::park`'s
//! token against unparks from other threads.

use super::FiberState;
use crate::runtime::unpark;

impl FiberState {
    /// `Fiber::unpark`'s decision: set the token; `true` when the caller
    /// then wakes the fiber (`wake_only`: `transition_to_notified`).
    pub fn unpark_token(&self) -> bool {
        unpark::unpark_token(&self.0)
    }
    /// `park`'s way in: `true` when the token was there (consumed; the
    /// park returns at once).
    pub fn enter_park(&self) -> bool {
        unpark::enter_park(&self.0)
    }
    /// `park`'s way out, after its `park_task`: clear the mark, consume the
    /// token and a wake-up token its unpark left; `true` if the token came.
    pub fn leave_park(&self) -> bool {
        unpark::leave_park(&self.0)
    }
}
