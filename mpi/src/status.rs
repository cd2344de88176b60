//! [`Status`]: what a completed receive (or probe) says about its message.

use std::ffi::c_int;

use mpi::datatype::Equivalence;
use mpi::ffi;
use mpi::raw::AsRaw;

use crate::engine::RawStatus;

/// The envelope of a received or probed message.
///
/// ```no_run
/// # let mpi = numafiber_mpi::init().unwrap();
/// # let world = mpi.world();
/// let mut buf = [0u64; 4];
/// let st = world.recv(&mut buf, numafiber_mpi::ANY, 7).unwrap();
/// println!("{} elements from rank {} with tag {}", st.count, st.source, st.tag);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    /// The sender's rank.
    pub source: i32,
    /// The message's tag.
    pub tag: i32,
    /// Elements received (or, for a probe, in the message), in the
    /// operation's element type.
    pub count: usize,
}

impl Status {
    pub(crate) fn of<E: Equivalence>(st: &RawStatus) -> Status {
        let mut n: c_int = 0;
        // SAFETY: `st` is a status filled by MPI; the datatype is E's, alive
        // for the call.
        unsafe { ffi::MPI_Get_count(&st.0, E::equivalent_datatype().as_raw(), &mut n) };
        Status { source: st.0.MPI_SOURCE, tag: st.0.MPI_TAG, count: n.max(0) as usize }
    }
}

/// Whether the request this status completes was cancelled.
pub(crate) fn was_cancelled(st: &RawStatus) -> bool {
    let mut flag: c_int = 0;
    // SAFETY: `st` is a status filled by MPI.
    unsafe { ffi::MPI_Test_cancelled(&st.0, &mut flag) };
    flag != 0
}
