//! # numafiber-mpi
//!
//! MPI for [numafiber](numafiber) fibers: a fiber that sends, receives or
//! takes part in a collective parks until MPI completes the operation; its
//! worker thread runs other fibers meanwhile, and no thread ever sits in
//! `MPI_Wait`. Built on rsmpi (the `mpi` crate) and any MPI library with
//! `MPI_THREAD_MULTIPLE` (Debian's Open MPI has it).
//!
//! ```no_run
//! use numafiber::{fiber, Runtime};
//!
//! let mpi = numafiber_mpi::init()?; // MPI_THREAD_MULTIPLE, or an error
//! let world = mpi.world();
//! let rt = Runtime::builder().workers(2).build()?;
//! rt.block_on(move || {
//!     let peer = (world.rank() + 1) % world.size();
//!     let from = (world.rank() + world.size() - 1) % world.size();
//!     // 64 fibers each exchange a message with the neighbours: a blocking
//!     // MPI_Recv in each would hold both workers; here they park.
//!     let hs: Vec<_> = (0..64)
//!         .map(|i| {
//!             let w = world.clone();
//!             fiber::spawn(move || {
//!                 let r = w.irecv(vec![0u64], from, i).unwrap();
//!                 w.send(&[i as u64], peer, i).unwrap();
//!                 r.wait().unwrap().0[0]
//!             })
//!         })
//!         .collect();
//!     for (i, h) in hs.into_iter().enumerate() {
//!         assert_eq!(fiber::await_fiber(h), i as u64);
//!     }
//! });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## What it offers
//!
//! * [`init`]: `MPI_Init_thread` with `MPI_THREAD_MULTIPLE`; a library that
//!   cannot give it is [`InitError::NoThreadMultiple`]. Errors come back as
//!   values ([`Error`]): the world communicator uses `MPI_ERRORS_RETURN`.
//! * Point to point on a [`Comm`]: [`send`](Comm::send), [`recv`](Comm::recv),
//!   [`recv_timeout`](Comm::recv_timeout), [`sendrecv`](Comm::sendrecv),
//!   [`probe`](Comm::probe), [`recv_vec`](Comm::recv_vec); immediate forms
//!   [`isend`](Comm::isend) / [`irecv`](Comm::irecv) returning a
//!   [`Request`] that owns its buffer, with [`Request::wait`],
//!   [`Request::wait_until`], [`Request::cancel`], [`wait_all`],
//!   [`wait_any`].
//! * Collectives through their MPI-3 non-blocking forms, so they park
//!   too: [`barrier`](Comm::barrier), [`broadcast`](Comm::broadcast),
//!   [`reduce`](Comm::reduce), [`all_reduce`](Comm::all_reduce),
//!   [`gather`](Comm::gather), [`all_gather`](Comm::all_gather),
//!   [`scatter`](Comm::scatter), [`all_to_all`](Comm::all_to_all), and
//!   [`dup`](Comm::dup) (`MPI_Comm_idup`) for a communicator per fiber.
//!
//! ## Cancellation
//!
//! Every wait is a cancellation point of numafiber's
//! [`JoinHandle::cancel`](numafiber::fiber::JoinHandle::cancel). A
//! cancelled fiber's pending receive is cancelled with `MPI_Cancel`, and
//! the fiber then waits (shielded) until MPI reports the request complete
//! before it unwinds, so the receive buffer is never freed while MPI may
//! write it. Sends and collectives cannot be cancelled in MPI: the fiber
//! unwinds once they complete.
//!
//! ## Progress, and what it costs
//!
//! Requests are tested by one *progress fiber* per process, spawned on the
//! runtime of the fiber that starts a request (unless it completes at
//! once) and ended when no request is pending. Each pass tests at most a bounded number of requests with
//! `MPI_Testsome`, in batches, then yields its worker to the other fibers.
//! While requests are pending and completing it busy-polls between the
//! other fibers' turns (so one worker's spare time goes to polling); after
//! a short spell without completions it parks with a timeout that doubles
//! up to one millisecond, and a new request wakes it at once. An idle rank
//! (nothing pending) costs nothing. A plain thread (outside any runtime)
//! that waits drives the passes itself when no progress fiber runs.
//!
//! ## Rules
//!
//! * Call [`init`] once per process, before any other MPI call, and drop
//!   the [`Mpi`] (which finalises MPI) on the thread that created it, after
//!   the fibers that use MPI are done.
//! * Collectives on one communicator must be called in the same order on
//!   every rank: call them from one fiber at a time, and give fibers that
//!   run collectives concurrently a communicator each ([`Comm::dup`]).
//! * A fiber waiting on MPI is parked (`WaitKind::Park` in
//!   [`Runtime::dump`](numafiber::Runtime::dump)), with the call site of
//!   the MPI operation as its wait site. While a request is pending the
//!   progress fiber is runnable or parked with a timeout, so `block_on`'s
//!   deadlock detector does not report a rank whose fibers all wait on MPI.
//! * Run one rank per NUMA node with `mpirun --map-by numa --bind-to numa`:
//!   numafiber's workers follow the process' CPU affinity, so they land on
//!   the rank's node and the stealing policies stay inside it (see the
//!   crate's README).

#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod collective;
mod comm;
mod engine;
mod error;
mod op;
mod request;
mod status;

use std::time::{Duration, Instant};

use mpi::ffi;
use mpi::topology::Communicator;

pub use crate::comm::{Comm, Match, ANY};
pub use crate::error::{Error, InitError};
pub use crate::request::{wait_all, wait_any, Completed, Request};
pub use crate::status::Status;
pub use mpi::collective::SystemOperation;
pub use mpi::datatype::Equivalence;
pub use mpi::Threading;

/// Set when [`Mpi`] is dropped: later operations are [`Error::Finalized`].
static FINALIZED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// [`Error::Finalized`] once MPI is finalised.
pub(crate) fn alive(op: &'static str) -> Result<(), Error> {
    if FINALIZED.load(std::sync::atomic::Ordering::SeqCst) {
        Err(Error::Finalized { op })
    } else {
        Ok(())
    }
}

/// How long dropping [`Mpi`] waits for pending requests before it
/// finalises MPI anyway (with a message on standard error).
const FINALIZE_GRACE: Duration = Duration::from_secs(10);

/// MPI, initialised for fibers; finalised when dropped. Get it from
/// [`init`].
///
/// ```no_run
/// let mpi = numafiber_mpi::init().unwrap();
/// println!("rank {} of {}", mpi.world().rank(), mpi.world().size());
/// drop(mpi); // MPI_Finalize
/// ```
pub struct Mpi {
    world: Comm,
    // Dropped last: MPI_Finalize.
    _universe: mpi::environment::Universe,
}

/// Initialise MPI with `MPI_THREAD_MULTIPLE` and make its errors return
/// (`MPI_ERRORS_RETURN` on the world communicator).
///
/// Errors: [`InitError::AlreadyInitialized`] on a second call (or after
/// another MPI initialisation); [`InitError::NoThreadMultiple`] if the
/// library provides less (MPI is finalised again before the return).
/// Never panics.
///
/// ```no_run
/// let mpi = numafiber_mpi::init().expect("MPI with thread support");
/// assert!(matches!(numafiber_mpi::init(), Err(numafiber_mpi::InitError::AlreadyInitialized)));
/// # drop(mpi);
/// ```
pub fn init() -> Result<Mpi, InitError> {
    let (universe, provided) =
        mpi::initialize_with_threading(Threading::Multiple).ok_or(InitError::AlreadyInitialized)?;
    if provided != Threading::Multiple {
        return Err(InitError::NoThreadMultiple { provided });
    }
    let w = universe.world();
    // SAFETY: MPI is initialised; the world communicator and the
    // predefined error handler are valid handles.
    unsafe { ffi::MPI_Comm_set_errhandler(ffi::RSMPI_COMM_WORLD, ffi::RSMPI_ERRORS_RETURN) };
    // SAFETY: reading a constant exported by mpi-sys.
    let raw = comm::RawComm(unsafe { ffi::RSMPI_COMM_WORLD });
    let world = Comm { raw, rank: w.rank(), size: w.size(), _owned: None };
    Ok(Mpi { world, _universe: universe })
}

impl Mpi {
    /// The world communicator (every rank of the job).
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// let world = mpi.world();
    /// assert!(world.rank() < world.size());
    /// ```
    pub fn world(&self) -> Comm {
        self.world.clone()
    }

    /// Requests started and not yet complete in this process.
    ///
    /// ```no_run
    /// let mpi = numafiber_mpi::init().unwrap();
    /// assert_eq!(mpi.pending(), 0);
    /// ```
    pub fn pending(&self) -> usize {
        pending()
    }
}

/// Requests started and not yet complete in this process (as
/// [`Mpi::pending`], for code that has no [`Mpi`] at hand).
///
/// ```
/// assert_eq!(numafiber_mpi::pending(), 0);
/// ```
pub fn pending() -> usize {
    engine::engine().pending()
}

impl Drop for Mpi {
    /// Waits (a bounded time) for the pending requests, driving progress
    /// if no progress fiber runs, then finalises MPI.
    fn drop(&mut self) {
        let e = engine::engine();
        let until = Instant::now() + FINALIZE_GRACE;
        while e.pending() != 0 || e.poller_running() {
            if Instant::now() >= until {
                eprintln!("numafiber-mpi: finalising MPI with {} requests still pending (drop Mpi after the fibers that use it)", e.pending());
                break;
            }
            engine::thread_wait_step(e, Some(until));
        }
        FINALIZED.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl std::fmt::Debug for Mpi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mpi").field("world", &self.world).finish()
    }
}
