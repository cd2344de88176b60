//! Collectives through their non-blocking MPI-3 forms (`MPI_Ibarrier`,
//! `MPI_Ibcast`, ...), so that a fiber in a collective parks like one in a
//! receive. MPI cannot cancel a collective: a fiber cancelled in one
//! unwinds once the collective completes (every rank must take part).

use std::ffi::{c_int, c_void};

use mpi::collective::Operation;
use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;

use crate::comm::{complete, count, null_request};
use crate::engine::RawRequest;
use crate::error::check;
use crate::op::{Kind, Op};
use crate::{Comm, Error, Request, Status};

/// A closure that starts a non-blocking collective into the request.
type Start<'a> = &'a mut dyn FnMut(*mut ffi::MPI_Request) -> c_int;

impl Comm {
    /// Start a collective with `start`, and wait for it (parking).
    #[track_caller]
    fn collective(&self, op: &'static str, start: Start<'_>) -> Result<(), Error> {
        let pending = self.start_collective(op, start)?;
        complete(&pending, None).map(|_| ())
    }

    fn start_collective(&self, op: &'static str, start: Start<'_>) -> Result<Op, Error> {
        crate::alive(op)?;
        let mut req = null_request();
        check(op, start(&mut req))?;
        Ok(Op::submit(RawRequest(req), Kind::Collective, op))
    }

    fn check_root(&self, op: &'static str, root: i32) -> Result<(), Error> {
        self.check_rank(op, root)
    }

    fn bad_len(op: &'static str, what: String) -> Error {
        Error::BadLength { op, what }
    }

    /// Park until every rank has entered the barrier (`MPI_Ibarrier`).
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// mpi.world().barrier().unwrap();
    /// ```
    #[track_caller]
    pub fn barrier(&self) -> Result<(), Error> {
        let comm = self.raw.0;
        // SAFETY: a valid communicator; MPI fills the request.
        self.collective("barrier", &mut |r| unsafe { ffi::MPI_Ibarrier(comm, r) })
    }

    /// Start a barrier; its request completes once every rank entered it.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let b = mpi.world().ibarrier().unwrap();
    /// // ... work that overlaps the barrier ...
    /// b.wait().unwrap();
    /// ```
    pub fn ibarrier(&self) -> Result<Request<()>, Error> {
        let comm = self.raw.0;
        // SAFETY: a valid communicator; MPI fills the request.
        let op = self.start_collective("ibarrier", &mut |r| unsafe { ffi::MPI_Ibarrier(comm, r) })?;
        Ok(Request::new(op, (), |_| Status { source: -1, tag: -1, count: 0 }))
    }

    /// Broadcast `buf` from `root` to every rank (`MPI_Ibcast`): `root`'s
    /// contents end up in every rank's `buf`, which must have the same
    /// length everywhere.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let w = mpi.world();
    /// let mut v = [if w.rank() == 0 { 42u64 } else { 0 }];
    /// w.broadcast(&mut v, 0).unwrap();
    /// assert_eq!(v[0], 42);
    /// ```
    #[track_caller]
    pub fn broadcast<E: Equivalence>(&self, buf: &mut [E], root: i32) -> Result<(), Error> {
        let op = "broadcast";
        self.check_root(op, root)?;
        let n = count(op, buf.len())?;
        let (comm, p, dt) = (self.raw.0, buf.as_mut_ptr() as *mut c_void, E::equivalent_datatype());
        // SAFETY: `buf` outlives the request (the wait, or the `Op`'s drop
        // on unwinding, completes it before this frame ends).
        self.collective(op, &mut |r| unsafe { ffi::MPI_Ibcast(p, n, dt.as_raw(), root, comm, r) })
    }

    /// Reduce `send` element-wise over all ranks with `op` into `recv` at
    /// `root` (`MPI_Ireduce`). `recv` is needed at the root only (same
    /// length as `send`); other ranks pass `None`.
    ///
    /// ```no_run
    /// use numafiber_mpi::SystemOperation;
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let w = mpi.world();
    /// let mut sum = [0i32];
    /// let out = (w.rank() == 0).then_some(&mut sum[..]);
    /// w.reduce(&[w.rank()], out, SystemOperation::sum(), 0).unwrap();
    /// ```
    #[track_caller]
    pub fn reduce<E: Equivalence>(
        &self,
        send: &[E],
        recv: Option<&mut [E]>,
        op: impl Operation,
        root: i32,
    ) -> Result<(), Error> {
        let what = "reduce";
        self.check_root(what, root)?;
        let n = count(what, send.len())?;
        let rp = match recv {
            Some(r) if r.len() == send.len() => r.as_mut_ptr() as *mut c_void,
            Some(r) => {
                return Err(Self::bad_len(
                    what,
                    format!(
                        "the receive buffer has {} elements, the send buffer {}: they must be equal",
                        r.len(),
                        send.len()
                    ),
                ))
            }
            None if self.rank == root => {
                return Err(Self::bad_len(what, "the root needs a receive buffer (Some)".into()))
            }
            None => std::ptr::null_mut(),
        };
        let (comm, sp, dt, o) = (self.raw.0, send.as_ptr() as *const c_void, E::equivalent_datatype(), op.as_raw());
        // SAFETY: both buffers outlive the request (see `broadcast`).
        self.collective(what, &mut |r| unsafe { ffi::MPI_Ireduce(sp, rp, n, dt.as_raw(), o, root, comm, r) })
    }

    /// Reduce `send` element-wise over all ranks with `op` into every
    /// rank's `recv` (`MPI_Iallreduce`); equal lengths.
    ///
    /// ```no_run
    /// use numafiber_mpi::SystemOperation;
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let w = mpi.world();
    /// let mut max = [0i32];
    /// w.all_reduce(&[w.rank()], &mut max, SystemOperation::max()).unwrap();
    /// assert_eq!(max[0], w.size() - 1);
    /// ```
    #[track_caller]
    pub fn all_reduce<E: Equivalence>(&self, send: &[E], recv: &mut [E], op: impl Operation) -> Result<(), Error> {
        let what = "all_reduce";
        if recv.len() != send.len() {
            return Err(Self::bad_len(
                what,
                format!(
                    "the receive buffer has {} elements, the send buffer {}: they must be equal",
                    recv.len(),
                    send.len()
                ),
            ));
        }
        let n = count(what, send.len())?;
        let (comm, sp, rp, dt, o) = (
            self.raw.0,
            send.as_ptr() as *const c_void,
            recv.as_mut_ptr() as *mut c_void,
            E::equivalent_datatype(),
            op.as_raw(),
        );
        // SAFETY: both buffers outlive the request (see `broadcast`).
        self.collective(what, &mut |r| unsafe { ffi::MPI_Iallreduce(sp, rp, n, dt.as_raw(), o, comm, r) })
    }

    /// Gather every rank's `send` into `recv` at `root`, in rank order
    /// (`MPI_Igather`): `recv` (root only) holds `size * send.len()`.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let w = mpi.world();
    /// let mut all = vec![0i32; w.size() as usize];
    /// let out = (w.rank() == 0).then_some(&mut all[..]);
    /// w.gather(&[w.rank()], out, 0).unwrap();
    /// ```
    #[track_caller]
    pub fn gather<E: Equivalence>(&self, send: &[E], recv: Option<&mut [E]>, root: i32) -> Result<(), Error> {
        let what = "gather";
        self.check_root(what, root)?;
        let n = count(what, send.len())?;
        let rp = self.root_buffer(what, recv, send.len(), root)?;
        let (comm, sp, dt) = (self.raw.0, send.as_ptr() as *const c_void, E::equivalent_datatype());
        // SAFETY: both buffers outlive the request (see `broadcast`).
        self.collective(what, &mut |r| unsafe {
            ffi::MPI_Igather(sp, n, dt.as_raw(), rp, n, dt.as_raw(), root, comm, r)
        })
    }

    /// Gather every rank's `send` into every rank's `recv`, in rank order
    /// (`MPI_Iallgather`): `recv` holds `size * send.len()`.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let w = mpi.world();
    /// let mut all = vec![0i32; w.size() as usize];
    /// w.all_gather(&[w.rank()], &mut all).unwrap();
    /// ```
    #[track_caller]
    pub fn all_gather<E: Equivalence>(&self, send: &[E], recv: &mut [E]) -> Result<(), Error> {
        let what = "all_gather";
        let n = count(what, send.len())?;
        let rp = self.root_buffer(what, Some(recv), send.len(), self.rank)?;
        let (comm, sp, dt) = (self.raw.0, send.as_ptr() as *const c_void, E::equivalent_datatype());
        // SAFETY: both buffers outlive the request (see `broadcast`).
        self.collective(what, &mut |r| unsafe { ffi::MPI_Iallgather(sp, n, dt.as_raw(), rp, n, dt.as_raw(), comm, r) })
    }

    /// Scatter `root`'s `send` (`size * recv.len()` elements, root only) in
    /// rank order: rank `i` gets the `i`-th slice in `recv` (`MPI_Iscatter`).
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let w = mpi.world();
    /// let all: Vec<i32> = (0..w.size()).collect();
    /// let mut mine = [0i32];
    /// w.scatter((w.rank() == 0).then_some(&all[..]), &mut mine, 0).unwrap();
    /// assert_eq!(mine[0], w.rank());
    /// ```
    #[track_caller]
    pub fn scatter<E: Equivalence>(&self, send: Option<&[E]>, recv: &mut [E], root: i32) -> Result<(), Error> {
        let what = "scatter";
        self.check_root(what, root)?;
        let n = count(what, recv.len())?;
        let want = recv.len() * self.size as usize;
        let sp = match send {
            Some(s) if s.len() == want => s.as_ptr() as *const c_void,
            Some(s) => {
                return Err(Self::bad_len(
                    what,
                    format!("the send buffer has {} elements, not size * recv.len() = {want}", s.len()),
                ))
            }
            None if self.rank == root => return Err(Self::bad_len(what, "the root needs a send buffer (Some)".into())),
            None => std::ptr::null(),
        };
        let (comm, rp, dt) = (self.raw.0, recv.as_mut_ptr() as *mut c_void, E::equivalent_datatype());
        // SAFETY: both buffers outlive the request (see `broadcast`).
        self.collective(what, &mut |r| unsafe {
            ffi::MPI_Iscatter(sp, n, dt.as_raw(), rp, n, dt.as_raw(), root, comm, r)
        })
    }

    /// Every rank sends the `i`-th slice of `send` to rank `i` and receives
    /// rank `i`'s slice into the `i`-th slice of `recv` (`MPI_Ialltoall`);
    /// both hold `size * k` elements.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let w = mpi.world();
    /// let send = vec![w.rank(); w.size() as usize];
    /// let mut recv = vec![0i32; w.size() as usize];
    /// w.all_to_all(&send, &mut recv).unwrap();
    /// ```
    #[track_caller]
    pub fn all_to_all<E: Equivalence>(&self, send: &[E], recv: &mut [E]) -> Result<(), Error> {
        let what = "all_to_all";
        let size = self.size as usize;
        if send.len() != recv.len() || send.len() % size != 0 {
            return Err(Self::bad_len(
                what,
                format!(
                    "send ({}) and receive ({}) buffers must have the same length, a multiple of the size {size}",
                    send.len(),
                    recv.len()
                ),
            ));
        }
        let n = count(what, send.len() / size)?;
        let (comm, sp, rp, dt) =
            (self.raw.0, send.as_ptr() as *const c_void, recv.as_mut_ptr() as *mut c_void, E::equivalent_datatype());
        // SAFETY: both buffers outlive the request (see `broadcast`).
        self.collective(what, &mut |r| unsafe { ffi::MPI_Ialltoall(sp, n, dt.as_raw(), rp, n, dt.as_raw(), comm, r) })
    }

    /// A gather's receive buffer: `size * per` elements where needed.
    fn root_buffer<E>(
        &self,
        what: &'static str,
        recv: Option<&mut [E]>,
        per: usize,
        root: i32,
    ) -> Result<*mut c_void, Error> {
        let want = per * self.size as usize;
        match recv {
            Some(r) if r.len() == want => Ok(r.as_mut_ptr() as *mut c_void),
            Some(r) => Err(Self::bad_len(
                what,
                format!("the receive buffer has {} elements, not size * send.len() = {want}", r.len()),
            )),
            None if self.rank == root => Err(Self::bad_len(what, "the root needs a receive buffer (Some)".into())),
            None => Ok(std::ptr::null_mut()),
        }
    }
}
