//! numafiber: stackful fibers on pinned NUMA workers.
#![deny(unsafe_op_in_unsafe_fn)]
#![warn(missing_docs)]

mod error;
pub mod fiber;
pub mod policy;
pub mod runtime;
pub mod sim;
pub mod topology;
mod worker;

pub use error::{BuildError, BuildErrorKind, JoinError, SpawnError, SpawnErrorKind};
pub use policy::{Policy, PolicyOptions, StealChunk};
pub use runtime::{Builder, NodeStats, Runtime, Stats, WorkerStats};
pub use topology::{NumaNode, Topology, TopologyError, TopologyErrorKind, WorkerSlot};
