//! The crate's errors: every MPI failure comes back as a value (the
//! communicators use `MPI_ERRORS_RETURN`), never an abort.

use std::ffi::c_int;
use std::fmt;

use mpi::ffi;

/// Why [`init`](crate::init) failed.
///
/// ```no_run
/// match numafiber_mpi::init() {
///     Ok(_mpi) => {}
///     Err(e) => eprintln!("{e}"),
/// }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum InitError {
    /// MPI was initialised already in this process (by this crate, rsmpi or
    /// C code); MPI can be initialised once per process.
    AlreadyInitialized,
    /// The MPI library cannot give `MPI_THREAD_MULTIPLE`, which fibers
    /// need: they migrate between worker threads, and several workers call
    /// MPI at once. `provided` is the level it gave.
    NoThreadMultiple {
        /// The level the library provided.
        provided: mpi::Threading,
    },
}

impl fmt::Display for InitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InitError::AlreadyInitialized => write!(f, "MPI is initialised already in this process: call numafiber_mpi::init once, before any other MPI initialisation"),
            InitError::NoThreadMultiple { provided } => write!(
                f,
                "the MPI library provides {provided:?} thread support, not Multiple: fibers call MPI from every worker thread; use an MPI built with thread support (Debian's Open MPI has it)"
            ),
        }
    }
}

impl std::error::Error for InitError {}

/// An MPI operation's failure.
///
/// ```no_run
/// use numafiber_mpi::Error;
/// let mpi = numafiber_mpi::init().unwrap();
/// let world = mpi.world();
/// let err = world.send(&[1u8], world.size(), 0).unwrap_err();
/// assert!(matches!(err, Error::BadRank { .. }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Error {
    /// A rank outside the communicator.
    BadRank {
        /// The operation.
        op: &'static str,
        /// The rank given.
        rank: i32,
        /// The communicator's size (valid ranks are `0..size`).
        size: i32,
    },
    /// A negative tag (tags are `0..=TAG_UB`; use [`ANY`](crate::ANY) to
    /// receive any tag).
    BadTag {
        /// The operation.
        op: &'static str,
        /// The tag given.
        tag: i32,
    },
    /// A buffer longer than MPI's `int` count can say.
    TooLong {
        /// The operation.
        op: &'static str,
        /// Its length in elements.
        len: usize,
    },
    /// Buffers whose lengths do not fit the operation (e.g. a gather's
    /// receive buffer not `size` times the send buffer).
    BadLength {
        /// The operation.
        op: &'static str,
        /// What was wrong, and what length was expected.
        what: String,
    },
    /// The wait's deadline passed; a receive was cancelled, other requests
    /// are returned to the caller where the call says so.
    Timeout {
        /// The operation.
        op: &'static str,
    },
    /// The request was cancelled (by [`Request::cancel`](crate::Request::cancel)
    /// or a deadline) before it matched a message.
    Cancelled {
        /// The operation.
        op: &'static str,
    },
    /// MPI was finalised (the [`Mpi`](crate::Mpi) was dropped): no MPI
    /// call is possible any more in this process.
    Finalized {
        /// The operation.
        op: &'static str,
    },
    /// The MPI library returned an error.
    Mpi {
        /// The operation.
        op: &'static str,
        /// The MPI error code.
        code: i32,
        /// Its error class (`MPI_ERR_TRUNCATE`, `MPI_ERR_RANK`, ...).
        class: i32,
        /// The library's message for it.
        message: String,
    },
}

impl Error {
    pub(crate) fn from_code(op: &'static str, code: c_int) -> Error {
        let mut class: c_int = code;
        let mut buf = vec![0u8; ffi::MPI_MAX_ERROR_STRING as usize + 1];
        let mut len: c_int = 0;
        // SAFETY: both are callable after init (and before finalize) from
        // any thread; `buf` has MPI_MAX_ERROR_STRING bytes of room.
        unsafe {
            ffi::MPI_Error_class(code, &mut class);
            ffi::MPI_Error_string(code, buf.as_mut_ptr().cast(), &mut len);
        }
        buf.truncate(len.max(0) as usize);
        Error::Mpi { op, code, class, message: String::from_utf8_lossy(&buf).into_owned() }
    }

    /// Whether this is a message longer than the receive buffer
    /// (`MPI_ERR_TRUNCATE`).
    ///
    /// ```
    /// let e = numafiber_mpi::Error::Timeout { op: "recv" };
    /// assert!(!e.is_truncated());
    /// ```
    pub fn is_truncated(&self) -> bool {
        matches!(self, Error::Mpi { class, .. } if *class == ffi::MPI_ERR_TRUNCATE as i32)
    }

    /// Whether this is a deadline that passed.
    ///
    /// ```
    /// assert!(numafiber_mpi::Error::Timeout { op: "recv" }.is_timeout());
    /// ```
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::BadRank { op, rank, size } => {
                write!(f, "{op}: rank {rank} is not in this communicator (ranks are 0..{size})")
            }
            Error::BadTag { op, tag } => {
                write!(f, "{op}: tag {tag} is negative (tags are 0 and up; receive any tag with numafiber_mpi::ANY)")
            }
            Error::TooLong { op, len } => {
                write!(f, "{op}: a buffer of {len} elements is longer than MPI's int count; split it")
            }
            Error::BadLength { op, what } => write!(f, "{op}: {what}"),
            Error::Timeout { op } => write!(f, "{op}: the deadline passed before the request completed"),
            Error::Cancelled { op } => write!(f, "{op}: the request was cancelled before it matched"),
            Error::Finalized { op } => {
                write!(f, "{op}: MPI was finalised (the Mpi was dropped); keep it alive while fibers use MPI")
            }
            Error::Mpi { op, code, message, .. } => write!(f, "{op}: MPI error {code}: {message}"),
        }
    }
}

impl std::error::Error for Error {}

/// A raw MPI return code as a `Result`.
pub(crate) fn check(op: &'static str, rc: c_int) -> Result<(), Error> {
    if rc == ffi::MPI_SUCCESS as c_int {
        Ok(())
    } else {
        Err(Error::from_code(op, rc))
    }
}
