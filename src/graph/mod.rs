//! Task graphs with arbitrary dependencies on the work-stealing scheduler
//! (NABBIT: Agrawal, Leiserson, Sukha, "Executing Task Graphs Using
//! Work-Stealing").
//!
//! Two kinds of graphs:
//!
//! * [`StaticGraph`]: all nodes and edges are given before execution. Every
//!   node has a *join counter* (its number of predecessors); the
//!   predecessor that brings a counter to zero runs (or spawns) the
//!   successor, as in the paper's Fig. 2.
//! * [`DynamicGraph`] executed by a [`DynamicExecutor`]: nodes are named by
//!   hashable keys and discovered backwards from a sink through
//!   [`DynamicGraph::init`], then computed forwards (Fig. 7-8). Every key
//!   gets exactly one node, even under concurrent `execute` calls.
//!
//! # How a graph runs on fibers
//!
//! Work is carried by *chains*: a fiber with a small private LIFO stack of
//! ready nodes. A chain computes the top node, decrements the join counters
//! of its successors and pushes the ones it enabled. While the execution
//! has fewer live chains than twice the number of workers, a chain with
//! more than one ready node splits off the older half of its stack into a
//! new fiber, which idle workers steal. So:
//!
//! * a node that waits for its predecessors holds **no** fiber and no
//!   stack: it is only a counter in an array (or a map entry);
//! * only chains, i.e. running computes, occupy fibers, and their number is
//!   bounded by about `2 * workers` plus the chains that finish;
//! * there is no recursion along paths of the graph, so a chain of a
//!   million nodes does not overflow a fiber stack.
//!
//! Computes run inside fibers and may use [`fiber::join`](crate::fiber::join),
//! [`fiber::spawn`](crate::fiber::spawn) and [`fiber::scope`](crate::fiber::scope)
//! themselves (nested parallelism, the paper's parallel COMPUTE).
//!
//! Both kinds also have a serial executor (`execute_serial` and
//! [`execute_serial`]) that runs the same traversal with plain counters and
//! no locks: the paper's "serial version" baseline.
//!
//! ```
//! use numafiber::{graph::StaticGraph, Runtime, Policy};
//! let rt = Runtime::builder().workers(2).policy(Policy::RandomSteal).build().unwrap();
//! let mut g = StaticGraph::new();
//! let a = g.add_node(|_| 1u64);
//! let b = g.add_node(|_| 2u64);
//! let c = g.add_node(|inp| inp.values().sum::<u64>() * 10);
//! g.add_dep(c, a).unwrap();
//! g.add_dep(c, b).unwrap();
//! let out = g.execute_on(&rt).unwrap();
//! assert_eq!(out[c], 30);
//! ```

mod dynamic;
mod error;
mod static_graph;

pub use dynamic::{execute_serial, Computed, DynamicExecutor, DynamicGraph, SerialRun, Status};
pub use error::{GraphError, GraphErrorKind};
pub use static_graph::{Inputs, NodeId, StaticGraph};

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::runtime::task::packet::Packet;

/// Number of workers of the runtime running the calling fiber, or `None`
/// outside a fiber.
fn current_workers() -> Option<usize> {
    crate::fiber::current_task_and_shared().map(|(_, s)| s.workers.len())
}

/// A one-shot latch that a fiber or a thread can wait on.
type Latch = Arc<Packet<()>>;

fn new_latch() -> Latch {
    Packet::new()
}

fn wait_latch(l: &Latch) {
    // The only error is "cancelled" during a runtime shutdown; the caller
    // then finds results missing and reports that.
    // SAFETY: a latch has one waiter, the party that made it (`execute`,
    // `run_parallel`); the others only open it (`Packet::complete`).
    let _ = unsafe { l.wait() };
}

fn open_latch(l: &Latch) {
    l.complete(Ok(()));
}

/// The message of a caught panic payload.
fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "<non-string panic payload>".to_owned()
    }
}

/// Run `f`, turning a panic into its message.
fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|p| panic_message(&*p))
}

/// Run `f` on `rt`: inline when already inside a fiber (of any runtime),
/// else through `block_on`.
fn on_runtime<R: Send + 'static>(rt: &crate::Runtime, f: impl FnOnce() -> R + Send + 'static) -> R {
    if crate::fiber::current().is_some() {
        f()
    } else {
        rt.block_on(f)
    }
}
