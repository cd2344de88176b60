//! numafiber: stackful fibers on pinned NUMA workers (skeleton; see README).
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

pub mod policy;
pub mod topology;

pub use policy::{Policy, StealChunk};
pub use topology::{NumaNode, Topology, TopologyError, TopologyErrorKind, WorkerSlot};
