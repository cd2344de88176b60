//! [`TopologyError`]: what was wrong with a topology request and how to fix it.

use std::fmt;

/// The category of a [`TopologyError`], for programs (and tests) that need to
/// react to a specific failure. The human-readable explanation is the
/// error's [`Display`](fmt::Display) text.
///
/// ```
/// use numafiber::topology::TopologyErrorKind;
/// use numafiber::Topology;
///
/// let err = Topology::try_uniform(0, 4).unwrap_err();
/// assert_eq!(err.kind(), TopologyErrorKind::NoNodes);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum TopologyErrorKind {
    /// hwloc could not detect the machine this program runs on.
    Detection,
    /// An hwloc synthetic description was rejected.
    InvalidSynthetic,
    /// The XML file does not exist or cannot be read.
    XmlFileUnreadable,
    /// The XML file was read but hwloc could not load it as a topology.
    InvalidXml,
    /// The topology has no NUMA node.
    NoNodes,
    /// The topology has no processing unit.
    NoPus,
    /// A distance matrix is not `nodes x nodes`.
    DistanceShape,
    /// A distance matrix contains a zero.
    ZeroDistance,
    /// A node is farther from itself than from some other node.
    DiagonalNotMinimum,
    /// `distance(a, b) != distance(b, a)` somewhere in a matrix.
    AsymmetricDistances,
    /// A worker plan was asked for zero workers.
    ZeroWorkers,
    /// Strict pinning was asked for more workers than there are PUs.
    TooManyWorkers,
    /// A topology spec string (see [`Topology::parse`](super::Topology::parse))
    /// was not understood.
    InvalidSpec,
    /// The topology is larger than numafiber accepts (more than
    /// [`MAX_PUS`](super::MAX_PUS) PUs or [`MAX_NODES`](super::MAX_NODES)
    /// nodes, or a synthetic level wider than [`MAX_ARITY`](super::MAX_ARITY)).
    TooLarge,
}

/// What went wrong while building or using a [`Topology`](super::Topology).
///
/// Its `Display` text says what was wrong *and* how to fix it; its
/// [`kind`](TopologyError::kind) says which check failed.
///
/// ```
/// use numafiber::Topology;
///
/// let err = Topology::uniform(2, 1).with_distances(vec![vec![10, 20]]).unwrap_err();
/// assert!(err.to_string().contains("2x2"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopologyError {
    kind: TopologyErrorKind,
    msg: String,
}

impl TopologyError {
    pub(crate) fn new(kind: TopologyErrorKind, msg: impl Into<String>) -> TopologyError {
        TopologyError { kind, msg: msg.into() }
    }

    /// Which check failed.
    ///
    /// ```
    /// use numafiber::topology::TopologyErrorKind;
    /// use numafiber::Topology;
    ///
    /// let err = Topology::uniform(1, 2).plan_workers(0, false).unwrap_err();
    /// assert_eq!(err.kind(), TopologyErrorKind::ZeroWorkers);
    /// ```
    pub fn kind(&self) -> TopologyErrorKind {
        self.kind
    }
}

impl fmt::Display for TopologyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for TopologyError {}
