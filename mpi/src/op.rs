//! One submitted MPI request as its owner sees it: wait (parking), wait
//! with a deadline, cancel; and the drop rule that keeps a buffer alive
//! until MPI is done with it.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::Instant;

use numafiber::fiber;

use crate::engine::{self, Completion, RawRequest, RawStatus};
use crate::Error;

/// What kind of request: only receives are cancelled with `MPI_Cancel`
/// (cancelling a send is deprecated, a collective cannot be).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) enum Kind {
    Recv,
    Send,
    /// The receive of a message already matched by a probe.
    Matched,
    Collective,
}

/// A submitted request. Dropped before it completed, it cancels a receive
/// and then waits (shielded from cancellation) until MPI reports the
/// request complete, so the memory it reads or writes outlives it.
pub(crate) struct Op {
    c: Arc<Completion>,
    kind: Kind,
    what: &'static str,
}

/// How a wait ended without a result.
pub(crate) enum WaitEnd {
    Timeout,
}

impl Op {
    /// Hand `req` (just started by the caller) to the engine.
    pub(crate) fn submit(req: RawRequest, kind: Kind, what: &'static str) -> Op {
        Op { c: engine::engine().submit(req), kind, what }
    }

    pub(crate) fn what(&self) -> &'static str {
        self.what
    }

    /// Whether the request completed (without waiting).
    pub(crate) fn is_done(&self) -> bool {
        self.c.is_done()
    }

    /// Park until complete or `deadline`. A cancellation point in a fiber
    /// (the cancellation unwinds from the park; this `Op`'s drop then
    /// cancels and waits).
    #[track_caller]
    pub(crate) fn wait(&self, deadline: Option<Instant>) -> Result<Result<RawStatus, c_int>, WaitEnd> {
        let e = engine::engine();
        let in_fiber = fiber::current_handle().is_some();
        if in_fiber && !self.c.is_done() {
            e.try_pass(); // completes at once? then no park
        }
        loop {
            if let Some(r) = self.c.take_or_register() {
                return Ok(r);
            }
            if in_fiber {
                // Every round: the poller may have ended with its runtime.
                e.ensure_poller();
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Err(WaitEnd::Timeout);
            }
            if in_fiber {
                match deadline {
                    Some(d) => fiber::park_timeout(d - now),
                    None => fiber::park(),
                }
            } else {
                engine::thread_wait_step(e, deadline);
            }
        }
    }

    /// Whether complete; if not, the caller is registered to be woken
    /// when it is.
    pub(crate) fn done_or_register(&self) -> bool {
        self.c.take_or_register().is_some()
    }

    /// The result if complete.
    pub(crate) fn peek(&self) -> Option<Result<RawStatus, c_int>> {
        self.c.peek()
    }

    /// Ask for the request's cancellation (receives only; others are
    /// waited for). The request still completes: wait for it.
    pub(crate) fn cancel(&self) {
        if self.kind == Kind::Recv {
            engine::engine().request_cancel(&self.c);
        }
    }

    /// Cancel (receives) and wait shielded until complete.
    pub(crate) fn finish(&self) -> Result<RawStatus, c_int> {
        self.cancel();
        let r = fiber::shield(|| self.wait(None));
        match r {
            Ok(r) => r,
            Err(WaitEnd::Timeout) => unreachable!("no deadline"),
        }
    }

    /// The error of a completed request's result, with this request's name.
    pub(crate) fn result(&self, r: Result<RawStatus, c_int>) -> Result<RawStatus, Error> {
        match r {
            Ok(st) if crate::status::was_cancelled(&st) => Err(Error::Cancelled { op: self.what }),
            Ok(st) => Ok(st),
            Err(code) => Err(Error::from_code(self.what, code)),
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        if !self.c.is_done() {
            let _ = self.finish();
        }
    }
}
