//! The task kernel's one way up: every item `task/` uses from the engine
//! above it, named here and nowhere else in `task/` (tokio's `Schedule`
//! trait plays this part for its tasks).
//!
//! Rule: a file of `task/` reaches the scheduler only through `up::`; a new
//! need from above is added here, so this list stays the whole interface
//! the engine offers its tasks:
//!
//! - the running fiber's context (`context.rs`): who runs, whether it is
//!   cancelling, its wait reason, the completion count, the worker pointer;
//! - suspending: `park`, `yield_now`, the counted waiter and the direct
//!   waiter of a join packet's inline slot (`park.rs`, `wait.rs`);
//! - cancellation (`cancel.rs`): the request, the payload, the guarded run
//!   of a fiber's main function;
//! - spawning's reclaim of an unstarted child (`spawn.rs`), the shutdown
//!   drain's `destroy` and the runtime-wide state (`mod.rs`, `shared.rs`),
//!   the deadlock detector's `block_on` root (`deadlock.rs`), the per-worker
//!   counters (`worker/shared.rs`), and the public `JoinError` (`error.rs`).

pub(crate) use crate::runtime::cancel::{
    current_requested as cancel_requested, request_at as cancel_request_at, run_main, Cancelled,
};
pub(crate) use crate::runtime::context::{
    clear_task_wait_reason, current_id, current_is_cancelling, current_task_ptr, note_completed,
    set_task_wait_reason_at, set_wait_reason, worker_ptr,
};
pub(crate) use crate::runtime::deadlock::BlockOnRoot;
pub(crate) use crate::runtime::destroy;
pub(crate) use crate::runtime::error::JoinError;
pub(crate) use crate::runtime::park::{park, yield_now, Waiter};
pub(crate) use crate::runtime::shared::Shared;
pub(crate) use crate::runtime::spawn::reclaim;
pub(crate) use crate::runtime::wait::Direct;
pub(crate) use crate::runtime::worker::Counters;
