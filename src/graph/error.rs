//! Errors of task graphs.

use std::fmt;

use super::NodeId;

/// Why a task graph could not be built or executed.
///
/// ```
/// use numafiber::graph::{GraphErrorKind, StaticGraph};
/// let mut g = StaticGraph::<u8>::new();
/// let a = g.add_node(|_| 0);
/// let e = g.add_dep(a, a).unwrap_err();
/// assert!(matches!(e.kind(), GraphErrorKind::SelfDependency { .. }));
/// println!("{e}"); // says how to fix it
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphError {
    kind: GraphErrorKind,
}

/// The kind of a [`GraphError`], for matching in code and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GraphErrorKind {
    /// `add_dep` named a node that this graph does not have.
    UnknownNode {
        /// The id that was passed.
        node: NodeId,
        /// Number of nodes in the graph.
        nodes: usize,
    },
    /// `add_dep(n, n)`: a node cannot depend on itself.
    SelfDependency {
        /// The node.
        node: NodeId,
    },
    /// The static graph has a cycle; `cycle` lists its nodes, each one
    /// depending on the next and the last on the first.
    Cycle {
        /// Nodes along one cycle.
        cycle: Vec<NodeId>,
    },
    /// A dynamic execution stopped with its sink not computed: the keys
    /// declared by `init` form a cycle.
    DynamicCycle {
        /// Nodes reachable backwards from the sink that could not be
        /// computed.
        stuck: usize,
    },
    /// A compute (or a dynamic `init`) panicked; nodes that depend on it
    /// were not computed.
    ComputePanicked {
        /// The node that panicked (its id, or "key" for dynamic graphs).
        node: String,
        /// The panic message.
        message: String,
    },
    /// `execute` was called outside a fiber.
    NoRuntime,
    /// The runtime shut down before the graph finished.
    ShuttingDown,
}

impl GraphError {
    pub(crate) fn new(kind: GraphErrorKind) -> GraphError {
        GraphError { kind }
    }
    /// What went wrong.
    pub fn kind(&self) -> &GraphErrorKind {
        &self.kind
    }
}

impl fmt::Display for GraphError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            GraphErrorKind::UnknownNode { node, nodes } => write!(
                f,
                "node {} is not in this graph (it has {nodes} nodes): pass only NodeIds returned \
                 by add_node of the same StaticGraph",
                node.index()
            ),
            GraphErrorKind::SelfDependency { node } => write!(
                f,
                "node {} was made to depend on itself, which can never be satisfied: remove \
                 this add_dep call",
                node.index()
            ),
            GraphErrorKind::Cycle { cycle } => {
                let path: Vec<String> = cycle.iter().map(|n| n.index().to_string()).collect();
                write!(
                    f,
                    "the graph has a cycle ({} -> {}, each node depending on the next), so no \
                     node on it can ever run: remove one of these add_dep edges",
                    path.join(" -> "),
                    path.first().map(String::as_str).unwrap_or("?")
                )
            }
            GraphErrorKind::DynamicCycle { stuck } => write!(
                f,
                "the keys declared by init() form a cycle: {stuck} node(s) reachable from the \
                 requested key wait for each other and can never be computed; make init() \
                 declare only keys that are strictly earlier in some order (for example \
                 smaller indices)"
            ),
            GraphErrorKind::ComputePanicked { node, message } => write!(
                f,
                "the compute of node {node} panicked ({message}); nodes depending on it were not \
                 computed: fix the compute, or catch the failure inside it and return an error \
                 value as its output"
            ),
            GraphErrorKind::NoRuntime => write!(
                f,
                "execute() was called outside a fiber: call it from a fiber of a Runtime, or use \
                 execute_on(&runtime) from a plain thread"
            ),
            GraphErrorKind::ShuttingDown => write!(
                f,
                "the runtime shut down before the graph finished: keep the Runtime alive until \
                 execute returns"
            ),
        }
    }
}

impl std::error::Error for GraphError {}
