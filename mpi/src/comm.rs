//! [`Comm`]: a communicator, and its point-to-point operations. Every wait
//! parks the calling fiber (a plain thread parks itself), never the worker.

use std::ffi::c_int;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;
use numafiber::fiber;

use crate::engine::{RawRequest, RawStatus, MAX_BACKOFF, MIN_BACKOFF, SPIN_FOR};
use crate::error::check;
use crate::op::{Kind, Op, WaitEnd};
use crate::{Error, Request, Status};

/// A source or tag to match: a value, or any ([`ANY`]).
///
/// ```
/// use numafiber_mpi::{Match, ANY};
/// assert_eq!(Match::from(3), Match::Is(3));
/// assert_eq!(ANY, Match::Any);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Match {
    /// Any source (`MPI_ANY_SOURCE`) or any tag (`MPI_ANY_TAG`).
    Any,
    /// This rank or this tag.
    Is(i32),
}

/// Match any source or any tag.
pub const ANY: Match = Match::Any;

impl From<i32> for Match {
    fn from(v: i32) -> Match {
        Match::Is(v)
    }
}

/// A raw communicator handle (a pointer in Open MPI).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawComm(pub(crate) ffi::MPI_Comm);
// SAFETY: an opaque handle; under MPI_THREAD_MULTIPLE any thread may use a
// communicator, several at once.
unsafe impl Send for RawComm {}
// SAFETY: as above.
unsafe impl Sync for RawComm {}

/// A communicator: a group of ranks that exchange messages. Cheap to clone
/// and to move into fibers. Get the world from [`Mpi::world`](crate::Mpi::world).
///
/// Every operation parks the calling fiber until MPI completes it, and is a
/// cancellation point: a cancelled fiber's pending receive is cancelled
/// (`MPI_Cancel`), and any request is waited for before the call unwinds,
/// so no buffer is released while MPI may still touch it. Sends and
/// collectives cannot be cancelled in MPI: a fiber cancelled in one unwinds
/// once it completes.
///
/// Collective operations must be called in the same order on every rank:
/// with fibers, call a communicator's collectives from one fiber at a time,
/// and give fibers that run collectives concurrently a communicator each
/// ([`Comm::dup`]).
///
/// ```no_run
/// use numafiber::{fiber, Runtime};
/// let mpi = numafiber_mpi::init().unwrap();
/// let world = mpi.world();
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(move || {
///     let peer = 1 - world.rank();
///     let mut got = [0u32; 1];
///     world.sendrecv(&[world.rank() as u32], peer, 0, &mut got, peer, 0).unwrap();
///     assert_eq!(got[0], peer as u32);
/// });
/// ```
#[derive(Clone, Debug)]
pub struct Comm {
    pub(crate) raw: RawComm,
    pub(crate) rank: i32,
    pub(crate) size: i32,
    /// A communicator made by [`Comm::dup`], freed with its last clone.
    pub(crate) _owned: Option<Arc<Owned>>,
}

/// A communicator this crate created, freed (`MPI_Comm_free`) on drop
/// unless MPI is finalised by then.
#[derive(Debug)]
pub(crate) struct Owned(RawComm);

impl Drop for Owned {
    fn drop(&mut self) {
        if crate::alive("drop").is_ok() {
            let mut c = self.0 .0;
            // SAFETY: a communicator from MPI_Comm_idup, not freed before
            // (this is its one owner), MPI not finalised.
            unsafe { ffi::MPI_Comm_free(&mut c) };
        }
    }
}

/// The element count of a buffer as MPI's `int`.
pub(crate) fn count(op: &'static str, len: usize) -> Result<c_int, Error> {
    c_int::try_from(len).map_err(|_| Error::TooLong { op, len })
}

/// A null request handle to be filled by MPI.
pub(crate) fn null_request() -> ffi::MPI_Request {
    // SAFETY: reading a constant exported by mpi-sys.
    unsafe { ffi::RSMPI_REQUEST_NULL }
}

/// Wait for `op` (with an optional deadline); a receive whose deadline
/// passes is cancelled and waited for ([`Error::Timeout`] unless it matched
/// in the meantime).
#[track_caller]
pub(crate) fn complete(op: &Op, deadline: Option<Instant>) -> Result<RawStatus, Error> {
    match op.wait(deadline) {
        Ok(r) => op.result(r),
        Err(WaitEnd::Timeout) => match op.result(op.finish()) {
            Err(Error::Cancelled { op }) => Err(Error::Timeout { op }),
            r => r,
        },
    }
}

impl Comm {
    /// This process' rank in the communicator.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// assert!(mpi.world().rank() < mpi.world().size());
    /// ```
    pub fn rank(&self) -> i32 {
        self.rank
    }

    /// The number of ranks.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// assert!(mpi.world().size() >= 1);
    /// ```
    pub fn size(&self) -> i32 {
        self.size
    }

    /// A new communicator with the same ranks (`MPI_Comm_idup`, so the
    /// fiber parks): its messages and collectives never match this one's.
    /// Fibers that run collectives at the same time need one communicator
    /// each. A collective call: every rank calls it, in the same order.
    /// Freed when its last clone is dropped.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let world = mpi.world();
    /// let other = world.dup().unwrap();
    /// assert_eq!((other.rank(), other.size()), (world.rank(), world.size()));
    /// ```
    #[track_caller]
    pub fn dup(&self) -> Result<Comm, Error> {
        let op = "dup";
        crate::alive(op)?;
        // SAFETY: reading a constant exported by mpi-sys.
        let mut new = unsafe { ffi::RSMPI_COMM_NULL };
        let np: *mut ffi::MPI_Comm = &mut new;
        let comm = self.raw.0;
        let mut req = null_request();
        // SAFETY: a valid communicator; `new` is written when the request
        // completes, and outlives it (the `Op` below is dropped first, and
        // waits for completion even when the fiber is cancelled).
        check(op, unsafe { ffi::MPI_Comm_idup(comm, np, &mut req) })?;
        let pending = Op::submit(RawRequest(req), Kind::Collective, op);
        let r = complete(&pending, None);
        drop(pending);
        r?;
        let (mut rank, mut size) = (0, 0);
        // SAFETY: `new` is a valid communicator now; the error handler is
        // MPI's predefined one.
        unsafe {
            ffi::MPI_Comm_set_errhandler(new, ffi::RSMPI_ERRORS_RETURN);
            ffi::MPI_Comm_rank(new, &mut rank);
            ffi::MPI_Comm_size(new, &mut size);
        }
        Ok(Comm { raw: RawComm(new), rank, size, _owned: Some(Arc::new(Owned(RawComm(new)))) })
    }

    pub(crate) fn check_rank(&self, op: &'static str, rank: i32) -> Result<(), Error> {
        crate::alive(op)?;
        if (0..self.size).contains(&rank) {
            Ok(())
        } else {
            Err(Error::BadRank { op, rank, size: self.size })
        }
    }

    fn source(&self, op: &'static str, m: Match) -> Result<c_int, Error> {
        crate::alive(op)?;
        match m {
            // SAFETY: reading a constant exported by mpi-sys.
            Match::Any => Ok(unsafe { ffi::RSMPI_ANY_SOURCE }),
            Match::Is(r) => self.check_rank(op, r).map(|()| r),
        }
    }

    fn tag(op: &'static str, m: Match) -> Result<c_int, Error> {
        match m {
            // SAFETY: reading a constant exported by mpi-sys.
            Match::Any => Ok(unsafe { ffi::RSMPI_ANY_TAG }),
            Match::Is(t) if t < 0 => Err(Error::BadTag { op, tag: t }),
            Match::Is(t) => Ok(t),
        }
    }

    /// Start a send of `len` elements at `ptr`; the caller keeps the memory
    /// alive until the returned `Op` is dropped.
    fn start_send<E: Equivalence>(
        &self,
        op: &'static str,
        ptr: *const E,
        len: usize,
        dest: i32,
        tag: i32,
    ) -> Result<Op, Error> {
        self.check_rank(op, dest)?;
        let tag = Self::tag(op, Match::Is(tag))?;
        let n = count(op, len)?;
        let mut req = null_request();
        // SAFETY: `ptr` points to `len` elements of E kept alive by the
        // caller while the request is pending (the `Op`'s drop waits).
        let rc = unsafe {
            ffi::MPI_Isend(ptr.cast(), n, E::equivalent_datatype().as_raw(), dest, tag, self.raw.0, &mut req)
        };
        check(op, rc)?;
        Ok(Op::submit(RawRequest(req), Kind::Send, op))
    }

    /// Start a receive into `len` elements at `ptr` (kept alive by the
    /// caller until the `Op` is dropped).
    fn start_recv<E: Equivalence>(
        &self,
        op: &'static str,
        ptr: *mut E,
        len: usize,
        src: Match,
        tag: Match,
    ) -> Result<Op, Error> {
        let src = self.source(op, src)?;
        let tag = Self::tag(op, tag)?;
        let n = count(op, len)?;
        let mut req = null_request();
        // SAFETY: `ptr` points to `len` writable elements kept alive by the
        // caller while the request is pending (the `Op`'s drop waits).
        let rc =
            unsafe { ffi::MPI_Irecv(ptr.cast(), n, E::equivalent_datatype().as_raw(), src, tag, self.raw.0, &mut req) };
        check(op, rc)?;
        Ok(Op::submit(RawRequest(req), Kind::Recv, op))
    }

    /// Send `buf` to rank `dest` with `tag`, parking the fiber until the
    /// send buffer may be reused. A cancellation point (a send is not
    /// cancelled: a cancelled fiber unwinds once it completes).
    ///
    /// Errors: [`Error::BadRank`], [`Error::BadTag`], [`Error::TooLong`],
    /// or the library's [`Error::Mpi`]. Never panics.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let world = mpi.world();
    /// if world.rank() == 0 {
    ///     world.send(&[1.0f64, 2.0], 1, 0).unwrap();
    /// }
    /// ```
    #[track_caller]
    pub fn send<E: Equivalence>(&self, buf: &[E], dest: i32, tag: i32) -> Result<(), Error> {
        let op = self.start_send("send", buf.as_ptr(), buf.len(), dest, tag)?;
        complete(&op, None).map(|_| ())
    }

    /// Receive into `buf` a message from `src` with `tag` (either may be
    /// [`ANY`]), parking the fiber until it arrives. A cancellation point:
    /// a cancelled fiber's receive is cancelled before it unwinds.
    ///
    /// Errors: a message longer than `buf` is an [`Error::Mpi`] whose
    /// [`is_truncated`](Error::is_truncated) is true; [`Error::BadRank`],
    /// [`Error::BadTag`], [`Error::TooLong`]. Never panics.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let world = mpi.world();
    /// let mut buf = [0.0f64; 2];
    /// let st = world.recv(&mut buf, 0, numafiber_mpi::ANY).unwrap();
    /// assert_eq!(st.source, 0);
    /// ```
    #[track_caller]
    pub fn recv<E: Equivalence>(
        &self,
        buf: &mut [E],
        src: impl Into<Match>,
        tag: impl Into<Match>,
    ) -> Result<Status, Error> {
        let op = self.start_recv("recv", buf.as_mut_ptr(), buf.len(), src.into(), tag.into())?;
        complete(&op, None).map(|st| Status::of::<E>(&st))
    }

    /// [`recv`](Comm::recv) that gives up after `timeout`: the receive is
    /// cancelled, and [`Error::Timeout`] returned unless a message matched
    /// before the cancellation took effect (then it is returned).
    ///
    /// ```no_run
    /// use std::time::Duration;
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let mut buf = [0u8; 8];
    /// let r = mpi.world().recv_timeout(&mut buf, numafiber_mpi::ANY, 99, Duration::from_millis(10));
    /// assert!(r.unwrap_err().is_timeout());
    /// ```
    #[track_caller]
    pub fn recv_timeout<E: Equivalence>(
        &self,
        buf: &mut [E],
        src: impl Into<Match>,
        tag: impl Into<Match>,
        timeout: Duration,
    ) -> Result<Status, Error> {
        let deadline = Instant::now() + timeout;
        let op = self.start_recv("recv_timeout", buf.as_mut_ptr(), buf.len(), src.into(), tag.into())?;
        complete(&op, Some(deadline)).map(|st| Status::of::<E>(&st))
    }

    /// Send `send` to `dest` and receive into `recv` from `src` at once
    /// (neither waits for the other: no deadlock when two ranks exchange).
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let world = mpi.world();
    /// let peer = (world.rank() + 1) % world.size();
    /// let from = (world.rank() + world.size() - 1) % world.size();
    /// let mut got = [0i32];
    /// world.sendrecv(&[world.rank()], peer, 5, &mut got, from, 5).unwrap();
    /// ```
    #[track_caller]
    pub fn sendrecv<E: Equivalence, F: Equivalence>(
        &self,
        send: &[E],
        dest: i32,
        send_tag: i32,
        recv: &mut [F],
        src: impl Into<Match>,
        recv_tag: impl Into<Match>,
    ) -> Result<Status, Error> {
        let r = self.start_recv("sendrecv", recv.as_mut_ptr(), recv.len(), src.into(), recv_tag.into())?;
        let s = self.start_send("sendrecv", send.as_ptr(), send.len(), dest, send_tag)?;
        complete(&s, None)?;
        complete(&r, None).map(|st| Status::of::<F>(&st))
    }

    /// Start a send of `buf` (owned by the request until it completes).
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let req = mpi.world().isend(vec![1u32, 2, 3], 1, 0).unwrap();
    /// let (buf, _) = req.wait().unwrap(); // the buffer comes back
    /// assert_eq!(buf.len(), 3);
    /// ```
    pub fn isend<E: Equivalence>(&self, buf: Vec<E>, dest: i32, tag: i32) -> Result<Request<Vec<E>>, Error> {
        let op = self.start_send("isend", buf.as_ptr(), buf.len(), dest, tag)?;
        Ok(Request::new(op, buf, Status::of::<E>))
    }

    /// Start a receive into `buf` (owned by the request until it completes;
    /// the message fills its first [`Status::count`] elements).
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let req = mpi.world().irecv(vec![0u32; 3], 0, numafiber_mpi::ANY).unwrap();
    /// let (buf, st) = req.wait().unwrap();
    /// println!("{:?}", &buf[..st.count]);
    /// ```
    pub fn irecv<E: Equivalence>(
        &self,
        mut buf: Vec<E>,
        src: impl Into<Match>,
        tag: impl Into<Match>,
    ) -> Result<Request<Vec<E>>, Error> {
        let op = self.start_recv("irecv", buf.as_mut_ptr(), buf.len(), src.into(), tag.into())?;
        Ok(Request::new(op, buf, Status::of::<E>))
    }

    /// Whether a message from `src` with `tag` can be received now
    /// (`MPI_Iprobe`); its envelope, counted in elements of `E`.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let ready = mpi.world().iprobe::<u8>(numafiber_mpi::ANY, numafiber_mpi::ANY).unwrap();
    /// assert!(ready.is_none() || ready.unwrap().count > 0 || true);
    /// ```
    pub fn iprobe<E: Equivalence>(
        &self,
        src: impl Into<Match>,
        tag: impl Into<Match>,
    ) -> Result<Option<Status>, Error> {
        let src = self.source("iprobe", src.into())?;
        let tag = Self::tag("iprobe", tag.into())?;
        let mut flag: c_int = 0;
        // SAFETY: MPI_Status is plain integers; zeroed is a valid value.
        let mut st: ffi::MPI_Status = unsafe { std::mem::zeroed() };
        // SAFETY: a valid communicator; out-parameters point to locals.
        check("iprobe", unsafe { ffi::MPI_Iprobe(src, tag, self.raw.0, &mut flag, &mut st) })?;
        Ok((flag != 0).then(|| Status::of::<E>(&RawStatus(st))))
    }

    /// Park until a message from `src` with `tag` can be received, and
    /// return its envelope (counted in elements of `E`), without receiving
    /// it. MPI has no non-blocking probe request: the fiber itself polls
    /// `MPI_Iprobe`, yielding between polls and parking with a growing
    /// timeout (at most a millisecond) once nothing came for a while. A
    /// cancellation point.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let world = mpi.world();
    /// let st = world.probe::<u8>(numafiber_mpi::ANY, 3).unwrap();
    /// let mut buf = vec![0u8; st.count];
    /// world.recv(&mut buf, st.source, st.tag).unwrap();
    /// ```
    #[track_caller]
    pub fn probe<E: Equivalence>(&self, src: impl Into<Match>, tag: impl Into<Match>) -> Result<Status, Error> {
        self.probe_until::<E>(src, tag, None)?.ok_or(Error::Timeout { op: "probe" })
    }

    /// [`probe`](Comm::probe) that gives up at `deadline` (`Ok(None)`).
    ///
    /// ```no_run
    /// use std::time::{Duration, Instant};
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let d = Instant::now() + Duration::from_millis(5);
    /// let st = mpi.world().probe_until::<u8>(numafiber_mpi::ANY, 77, Some(d)).unwrap();
    /// assert!(st.is_none());
    /// ```
    #[track_caller]
    pub fn probe_until<E: Equivalence>(
        &self,
        src: impl Into<Match>,
        tag: impl Into<Match>,
        deadline: Option<Instant>,
    ) -> Result<Option<Status>, Error> {
        let (src, tag) = (src.into(), tag.into());
        let last = Instant::now();
        let mut backoff = MIN_BACKOFF;
        loop {
            if let Some(st) = self.iprobe::<E>(src, tag)? {
                return Ok(Some(st));
            }
            let now = Instant::now();
            if deadline.is_some_and(|d| now >= d) {
                return Ok(None);
            }
            if now - last < SPIN_FOR {
                fiber::yield_now();
            } else {
                let nap = deadline.map_or(backoff, |d| backoff.min(d - now));
                fiber::park_timeout(nap);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }

    /// Receive a message of any length from `src` with `tag` into a new
    /// vector: a matched probe (`MPI_Improbe`, polled as in
    /// [`probe`](Comm::probe)) then `MPI_Imrecv`, so no other receive can
    /// take the message in between.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let (v, st) = mpi.world().recv_vec::<u64>(numafiber_mpi::ANY, 1).unwrap();
    /// assert_eq!(v.len(), st.count);
    /// ```
    #[track_caller]
    pub fn recv_vec<E: Equivalence + Default + Clone>(
        &self,
        src: impl Into<Match>,
        tag: impl Into<Match>,
    ) -> Result<(Vec<E>, Status), Error> {
        let op = "recv_vec";
        let src = self.source(op, src.into())?;
        let tag = Self::tag(op, tag.into())?;
        let start = Instant::now();
        let mut backoff = MIN_BACKOFF;
        loop {
            let mut flag: c_int = 0;
            // SAFETY: reading a constant exported by mpi-sys.
            let mut msg = unsafe { ffi::RSMPI_MESSAGE_NULL };
            // SAFETY: MPI_Status is plain integers; zeroed is a valid value.
            let mut st: ffi::MPI_Status = unsafe { std::mem::zeroed() };
            // SAFETY: a valid communicator; out-parameters point to locals.
            check(op, unsafe { ffi::MPI_Improbe(src, tag, self.raw.0, &mut flag, &mut msg, &mut st) })?;
            if flag != 0 {
                let status = Status::of::<E>(&RawStatus(st));
                let mut buf = vec![E::default(); status.count];
                let mut req = null_request();
                // SAFETY: `buf` holds `count` elements and outlives the
                // request (the `Op` below is dropped first); `msg` is the
                // message just matched.
                check(op, unsafe {
                    ffi::MPI_Imrecv(
                        buf.as_mut_ptr().cast(),
                        count(op, buf.len())?,
                        E::equivalent_datatype().as_raw(),
                        &mut msg,
                        &mut req,
                    )
                })?;
                let pending = Op::submit(RawRequest(req), Kind::Matched, op);
                let st = complete(&pending, None)?;
                drop(pending);
                return Ok((buf, Status::of::<E>(&st)));
            }
            if start.elapsed() < SPIN_FOR {
                fiber::yield_now();
            } else {
                fiber::park_timeout(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}
