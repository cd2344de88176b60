//! [`Request`]: an operation in flight that owns its buffer, and
//! [`wait_all`] / [`wait_any`] over several.

use std::time::Instant;

use numafiber::fiber;

use crate::engine::{self, RawStatus};
use crate::op::Op;
use crate::{Error, Status};

/// What waiting for a [`Request`] gives: its buffer and status, or the
/// error it completed with.
pub type Completed<T> = Result<(T, Status), Error>;

/// An MPI operation in flight (from [`Comm::isend`](crate::Comm::isend),
/// [`Comm::irecv`](crate::Comm::irecv), [`Comm::ibarrier`](crate::Comm::ibarrier)),
/// owning its buffer `T` until it completes.
///
/// Unlike an rsmpi `Request`, dropping one unfinished is fine: a receive is
/// cancelled, and the drop then parks (shielded from cancellation) until
/// MPI reports the request complete, and only then frees the buffer. A
/// request may be moved to and waited on by another fiber or thread.
///
/// ```no_run
/// use numafiber::Runtime;
/// let mpi = numafiber_mpi::init().unwrap();
/// let world = mpi.world();
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(move || {
///     let peer = 1 - world.rank();
///     let r = world.irecv(vec![0u8; 4], peer, 0).unwrap();
///     let s = world.isend(vec![world.rank() as u8; 4], peer, 0).unwrap();
///     s.wait().unwrap();
///     let (buf, st) = r.wait().unwrap();
///     assert_eq!((buf[0] as i32, st.count), (peer, 4));
/// });
/// ```
pub struct Request<T> {
    // Declared first: dropped (and so completed) before the buffer.
    op: Op,
    payload: T,
    status_of: fn(&RawStatus) -> Status,
}

impl<T> Request<T> {
    pub(crate) fn new(op: Op, payload: T, status_of: fn(&RawStatus) -> Status) -> Request<T> {
        Request { op, payload, status_of }
    }

    /// Whether the request has completed, without waiting. Makes sure
    /// progress is made: starts the progress fiber from a fiber, or runs a
    /// pass from a plain thread when no progress fiber runs.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let r = mpi.world().ibarrier().unwrap();
    /// while !r.test() {
    ///     numafiber::fiber::yield_now();
    /// }
    /// ```
    pub fn test(&self) -> bool {
        if self.op.is_done() {
            return true;
        }
        let e = engine::engine();
        if fiber::current_handle().is_some() {
            e.ensure_poller();
        } else if !e.poller_running() {
            e.try_pass();
        }
        self.op.is_done()
    }

    /// Park until the request completes; the buffer and the status (for a
    /// send or a collective the status says nothing). A cancellation
    /// point: a cancelled fiber's receive is cancelled, and the request
    /// waited for, before the fiber unwinds.
    ///
    /// Errors: the library's [`Error::Mpi`] (e.g. a truncated message),
    /// [`Error::Cancelled`] if the request was cancelled.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let (buf, _st) = mpi.world().isend(vec![1u8], 0, 0).unwrap().wait().unwrap();
    /// # let _ = buf;
    /// ```
    #[track_caller]
    pub fn wait(self) -> Completed<T> {
        let r = self.op.wait(None).unwrap_or_else(|_| unreachable!("no deadline"));
        self.into_result(r)
    }

    /// Park until the request completes or `deadline` passes; returns
    /// whether it completed. The request stays usable either way: wait
    /// again, or [`cancel`](Request::cancel) it. A cancellation point.
    ///
    /// ```no_run
    /// use std::time::{Duration, Instant};
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let r = mpi.world().irecv(vec![0u8; 1], numafiber_mpi::ANY, 42).unwrap();
    /// if !r.wait_until(Instant::now() + Duration::from_millis(10)) {
    ///     assert!(r.cancel().unwrap_err().to_string().contains("cancelled"));
    /// }
    /// ```
    #[track_caller]
    pub fn wait_until(&self, deadline: Instant) -> bool {
        self.op.wait(Some(deadline)).is_ok()
    }

    /// Cancel the request (a receive; a send or a collective cannot be
    /// cancelled and is waited for) and wait, shielded from the fiber's
    /// cancellation, until MPI says it is complete. [`Error::Cancelled`]
    /// if it was cancelled, its result if it had matched already.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let r = mpi.world().irecv(vec![0u8; 1], numafiber_mpi::ANY, 42).unwrap();
    /// assert!(matches!(r.cancel(), Err(numafiber_mpi::Error::Cancelled { .. })));
    /// ```
    pub fn cancel(self) -> Completed<T> {
        let r = self.op.finish();
        self.into_result(r)
    }

    fn into_result(self, r: Result<RawStatus, std::ffi::c_int>) -> Completed<T> {
        let Request { op, payload, status_of } = self;
        let st = op.result(r)?;
        drop(op);
        Ok((payload, status_of(&st)))
    }
}

impl<T> std::fmt::Debug for Request<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request").field("op", &self.op.what()).field("done", &self.op.is_done()).finish()
    }
}

/// Wait for every request, in order; their results in the same order. A
/// cancellation point (the requests not yet waited for are dropped, so
/// cancelled and waited for, as the fiber unwinds).
///
/// ```no_run
/// let mpi = numafiber_mpi::init().unwrap();
/// let w = mpi.world();
/// let reqs = vec![w.isend(vec![1u8], 0, 0).unwrap(), w.isend(vec![2u8], 0, 1).unwrap()];
/// for r in numafiber_mpi::wait_all(reqs) {
///     r.unwrap();
/// }
/// ```
#[track_caller]
pub fn wait_all<T>(reqs: Vec<Request<T>>) -> Vec<Completed<T>> {
    let mut out = Vec::with_capacity(reqs.len());
    for r in reqs {
        out.push(r.wait());
    }
    out
}

/// Park until one of `reqs` completes; remove it and return its index
/// (before removal) and result. `None` if `reqs` is empty. A cancellation
/// point.
///
/// ```no_run
/// let mpi = numafiber_mpi::init().unwrap();
/// let w = mpi.world();
/// let mut reqs = vec![w.irecv(vec![0u8], numafiber_mpi::ANY, 1).unwrap(), w.irecv(vec![0u8], numafiber_mpi::ANY, 2).unwrap()];
/// while let Some((i, r)) = numafiber_mpi::wait_any(&mut reqs) {
///     println!("request {i}: {:?}", r.map(|(_, st)| st.tag));
/// }
/// ```
#[track_caller]
pub fn wait_any<T>(reqs: &mut Vec<Request<T>>) -> Option<(usize, Completed<T>)> {
    if reqs.is_empty() {
        return None;
    }
    let e = engine::engine();
    let in_fiber = fiber::current_handle().is_some();
    loop {
        if let Some(i) = reqs.iter().position(|r| r.op.done_or_register()) {
            let req = reqs.remove(i);
            let r = req.op.peek().expect("complete");
            return Some((i, req.into_result(r)));
        }
        if in_fiber {
            e.ensure_poller(); // as in `Op::wait`
        }
        if in_fiber {
            fiber::park();
        } else {
            engine::thread_wait_step(e, None);
        }
    }
}

/// A request moves between fibers and threads with its buffer.
const _: fn() = || {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Request<Vec<u8>>>();
    send_sync::<crate::Comm>();
};
