//! SWAS-style worker status views and NUMA node load estimators
//! (thesis §4.3.2, Alg. 4.4).
//!
//! The thesis gives every worker (thief) its own 2-bit status entry for
//! every worker of the runtime: `BUSY`, `IDLE` or `DONTKNOW` (the initial
//! state). That is O(workers) memory per worker, O(workers²) in all. This
//! module keeps the same information in O(nodes) per worker, by two rules:
//!
//! 1. **Remote nodes: one view per node, per thief ([`NodeView`]).** A
//!    thief learns about a remote node only through its own steal attempts
//!    there, and a remote attempt sets *every* worker of the victim's node
//!    (BUSY on success, IDLE on failure). Starting from all `DONTKNOW`, the
//!    thesis' entries of one remote node are therefore always equal, and a
//!    count of busy / idle / unknown workers per node holds exactly what the
//!    bitmap held (it can also describe mixed states, such as the thesis'
//!    Table 4.1, which no sequence of steals produces).
//! 2. **The thief's own node: one board per node, shared by its workers
//!    ([`StatusBoard`]).** Each entry is what the node's workers last learnt
//!    about that worker: a local steal attempt on it (BUSY/IDLE, as in the
//!    thesis) or the worker's own status (BUSY while it runs fibers, IDLE
//!    before it steals: the thesis has each worker keep its own entry up to
//!    date, and on a shared board its node mates now read it). Entries are
//!    relaxed atomic bytes holding the thesis' 2-bit codes; a write happens
//!    only when the value changes, so the board's cache lines stay shared
//!    while the statuses are stable. A thief leaves its own entry out of its
//!    node's estimator ([`StatusBoard::estimator_without`]).
//!
//! With one worker per node (the default shape of the benchmarks,
//! `uniform:2x1`) the board of a thief's node holds only the thief, whose
//! entry is never read, so the decisions are exactly the thesis' per-thief
//! bitmaps. With several workers per node a thief also sees what its node
//! mates saw (and their own statuses), which the thesis' private bitmap
//! would only learn by trying them itself.
//!
//! Per-worker policy memory is then a [`NodeView`] per node; the boards
//! take one byte per worker once per runtime.
//!
//! ```text
//! code  status    meaning
//! 0b00  BUSY      the worker was seen with work (a steal from it succeeded)
//! 0b01  IDLE      the worker was seen without work (a steal from it failed)
//! 0b10  DONTKNOW  no information yet (the initial state of every entry)
//! ```

use std::sync::atomic::{AtomicU8, Ordering::Relaxed};

/// The status of one worker as seen by one thief.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum WorkerStatus {
    /// `0b00`: the worker has work.
    Busy = 0b00,
    /// `0b01`: the worker has no work.
    Idle = 0b01,
    /// `0b10`: nothing known (initial state).
    DontKnow = 0b10,
}

impl WorkerStatus {
    /// The 2-bit code (stored in a [`StatusBoard`] entry).
    pub const fn bits(self) -> u64 {
        self as u64
    }

    /// Decode a 2-bit code; the unused code `0b11` reads as `DontKnow`.
    pub const fn from_bits(bits: u64) -> WorkerStatus {
        match bits & 0b11 {
            0b00 => WorkerStatus::Busy,
            0b01 => WorkerStatus::Idle,
            _ => WorkerStatus::DontKnow,
        }
    }

    /// Expected amount of stealable work: BUSY 1.0, DONTKNOW 0.5, IDLE 0.0
    /// (the weights of the thesis' NUMA estimator).
    ///
    /// ```
    /// use numafiber::policy::status::WorkerStatus;
    /// assert_eq!(WorkerStatus::Busy.weight(), 1.0);
    /// assert_eq!(WorkerStatus::DontKnow.weight(), 0.5);
    /// assert_eq!(WorkerStatus::Idle.weight(), 0.0);
    /// ```
    pub const fn weight(self) -> f64 {
        match self {
            WorkerStatus::Busy => 1.0,
            WorkerStatus::Idle => 0.0,
            WorkerStatus::DontKnow => 0.5,
        }
    }
}

/// The thesis' NUMA estimator of one node from the statuses of its
/// workers: `(busy * 1.0 + dontknow * 0.5) / workers`, in `0.0..=1.0`. A
/// node without workers has nothing to steal and estimates `0.0`.
///
/// ```
/// use numafiber::policy::status::{node_estimator, WorkerStatus::*};
/// assert_eq!(node_estimator([Busy, Idle, DontKnow]), 0.5);
/// assert_eq!(node_estimator([]), 0.0);
/// ```
pub fn node_estimator(statuses: impl IntoIterator<Item = WorkerStatus>) -> f64 {
    let (mut sum, mut n) = (0.0, 0usize);
    for s in statuses {
        sum += s.weight();
        n += 1;
    }
    if n == 0 {
        0.0
    } else {
        sum / n as f64
    }
}

/// One thief's view of the workers of a node other than its own: how many
/// it believes busy, idle and unknown (rule 1 of the module docs).
///
/// ```
/// use numafiber::policy::status::{NodeView, WorkerStatus};
/// let v = NodeView::uniform(3, WorkerStatus::DontKnow); // the initial view
/// assert_eq!((v.estimator(), v.status()), (0.5, Some(WorkerStatus::DontKnow)));
/// let table_4_1_node_2 = NodeView { busy: 2, idle: 1, dont_know: 0 };
/// assert_eq!(table_4_1_node_2.estimator(), 2.0 / 3.0);
/// assert_eq!(table_4_1_node_2.status(), None); // mixed
/// assert_eq!(NodeView::uniform(0, WorkerStatus::Busy).estimator(), 0.0);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NodeView {
    /// Workers believed busy.
    pub busy: u32,
    /// Workers believed idle.
    pub idle: u32,
    /// Workers nothing is known about.
    pub dont_know: u32,
}

impl NodeView {
    /// All `workers` workers of the node with status `s` (what a remote
    /// steal attempt leaves behind; `DontKnow` at start).
    pub const fn uniform(workers: u32, s: WorkerStatus) -> NodeView {
        match s {
            WorkerStatus::Busy => NodeView { busy: workers, idle: 0, dont_know: 0 },
            WorkerStatus::Idle => NodeView { busy: 0, idle: workers, dont_know: 0 },
            WorkerStatus::DontKnow => NodeView { busy: 0, idle: 0, dont_know: workers },
        }
    }

    /// Number of workers the view describes.
    pub const fn workers(&self) -> u64 {
        self.busy as u64 + self.idle as u64 + self.dont_know as u64
    }

    /// The thesis' NUMA estimator of the node (see [`node_estimator`]):
    /// `(busy + 0.5 * dont_know) / workers`, `0.0` without workers.
    pub fn estimator(&self) -> f64 {
        let n = self.workers();
        if n == 0 {
            return 0.0;
        }
        (f64::from(self.busy) + 0.5 * f64::from(self.dont_know)) / n as f64
    }

    /// The status all workers share, `None` if the view is mixed or empty.
    pub const fn status(&self) -> Option<WorkerStatus> {
        match (self.busy, self.idle, self.dont_know) {
            (0, 0, 0) => None,
            (_, 0, 0) => Some(WorkerStatus::Busy),
            (0, _, 0) => Some(WorkerStatus::Idle),
            (0, 0, _) => Some(WorkerStatus::DontKnow),
            _ => None,
        }
    }
}

/// The status entries of one node's workers, shared by those workers
/// (rule 2 of the module docs): entry `i` is the `i`-th worker of the node.
/// Relaxed atomic bytes holding [`WorkerStatus::bits`]; all `DontKnow` at
/// start.
///
/// ```
/// use numafiber::policy::status::{StatusBoard, WorkerStatus};
/// let b = StatusBoard::new(3);
/// assert_eq!(b.get(2), WorkerStatus::DontKnow);
/// b.set(0, WorkerStatus::Busy); // &self: any worker of the node may write
/// b.set(1, WorkerStatus::Idle);
/// // Worker 1 (entry 1) steals: its own entry is left out.
/// assert_eq!(b.estimator_without(1), (1.0 + 0.5) / 2.0);
/// ```
#[derive(Debug)]
pub struct StatusBoard {
    entries: Box<[AtomicU8]>,
}

impl StatusBoard {
    /// `len` entries, all `DontKnow`.
    pub fn new(len: usize) -> StatusBoard {
        StatusBoard { entries: (0..len).map(|_| AtomicU8::new(WorkerStatus::DontKnow as u8)).collect() }
    }

    /// Number of entries (workers of the node).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Status of entry `i` (a relaxed load: another worker's write may be
    /// seen late, as the thesis' views are late by design).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn get(&self, i: usize) -> WorkerStatus {
        assert!(i < self.len(), "entry {i} out of range (board of {})", self.len());
        WorkerStatus::from_bits(u64::from(self.entries[i].load(Relaxed)))
    }

    /// Set entry `i` to `s`: a relaxed load, and a relaxed store only if
    /// the value changes (so stable statuses keep the line shared).
    ///
    /// # Panics
    /// If `i >= self.len()`.
    pub fn set(&self, i: usize, s: WorkerStatus) {
        assert!(i < self.len(), "entry {i} out of range (board of {})", self.len());
        let e = &self.entries[i];
        if e.load(Relaxed) != s as u8 {
            e.store(s as u8, Relaxed);
        }
    }

    /// Forget everything: all entries back to `DontKnow`.
    pub fn reset(&self) {
        for e in self.entries.iter() {
            e.store(WorkerStatus::DontKnow as u8, Relaxed);
        }
    }

    /// The node's estimator as seen by the worker at entry `skip`: the
    /// thesis' estimator over the other entries, in order (`0.0` if there
    /// are none: a thief alone on its node has nothing to steal there).
    ///
    /// The thesis (4.3.2) sets a worker's own entry to IDLE before it
    /// steals *and* states that "the first steal attempts will always be
    /// local". Counted in, the thief's own IDLE entry would lower its node
    /// below remote nodes that are still DONTKNOW, so a thief that has been
    /// busy once would try a remote node first. The thief's own status says
    /// nothing about what it can steal, so it is left out: with no
    /// information, the own node ties with the others and comes first, as
    /// the thesis says.
    pub fn estimator_without(&self, skip: usize) -> f64 {
        node_estimator(
            self.entries
                .iter()
                .enumerate()
                .filter(|&(i, _)| i != skip)
                .map(|(_, e)| WorkerStatus::from_bits(u64::from(e.load(Relaxed)))),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_the_thesis() {
        assert_eq!(WorkerStatus::Busy.bits(), 0b00);
        assert_eq!(WorkerStatus::Idle.bits(), 0b01);
        assert_eq!(WorkerStatus::DontKnow.bits(), 0b10);
        for s in [WorkerStatus::Busy, WorkerStatus::Idle, WorkerStatus::DontKnow] {
            assert_eq!(WorkerStatus::from_bits(s.bits()), s);
        }
        assert_eq!(WorkerStatus::from_bits(0b11), WorkerStatus::DontKnow);
    }

    #[test]
    fn board_starts_all_dontknow() {
        let b = StatusBoard::new(70);
        assert_eq!(b.len(), 70);
        assert!((0..70).all(|i| b.get(i) == WorkerStatus::DontKnow));
        assert!(StatusBoard::new(0).is_empty());
        assert_eq!(StatusBoard::new(0).estimator_without(0), 0.0);
    }

    #[test]
    fn board_set_touches_only_its_entry() {
        let b = StatusBoard::new(66);
        b.set(31, WorkerStatus::Busy);
        b.set(32, WorkerStatus::Idle);
        b.set(65, WorkerStatus::Busy);
        for i in 0..66 {
            let want = match i {
                31 | 65 => WorkerStatus::Busy,
                32 => WorkerStatus::Idle,
                _ => WorkerStatus::DontKnow,
            };
            assert_eq!(b.get(i), want, "entry {i}");
        }
        b.set(31, WorkerStatus::DontKnow);
        b.set(32, WorkerStatus::Busy);
        assert_eq!(
            (b.get(31), b.get(32), b.get(30)),
            (WorkerStatus::DontKnow, WorkerStatus::Busy, WorkerStatus::DontKnow)
        );
        b.reset();
        assert!((0..66).all(|i| b.get(i) == WorkerStatus::DontKnow));
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn board_rejects_out_of_range_entry() {
        StatusBoard::new(3).get(3);
    }

    #[test]
    fn board_writers_on_other_threads_do_not_lose_each_others_entries() {
        let b = StatusBoard::new(8);
        std::thread::scope(|s| {
            for i in 0..8 {
                let b = &b;
                s.spawn(move || {
                    for k in 0..1000 {
                        b.set(i, if k % 2 == 0 { WorkerStatus::Busy } else { WorkerStatus::Idle });
                    }
                });
            }
        });
        // Each writer ended on Idle (k = 999) and nobody overwrote another's entry.
        assert!((0..8).all(|i| b.get(i) == WorkerStatus::Idle));
    }

    #[test]
    fn estimator_weights_busy_one_dontknow_half_idle_zero() {
        use WorkerStatus::*;
        assert_eq!(node_estimator([DontKnow; 4]), 0.5);
        assert_eq!(node_estimator([Busy; 4]), 1.0);
        assert_eq!(node_estimator([Idle; 4]), 0.0);
        assert_eq!(node_estimator([Busy, DontKnow, Idle, Idle]), 1.5 / 4.0);
        let b = StatusBoard::new(4);
        b.set(0, Busy);
        b.set(2, Idle);
        b.set(3, Idle);
        assert_eq!(b.estimator_without(3), 1.5 / 3.0);
        assert_eq!(b.estimator_without(9), 1.5 / 4.0); // no such entry: all count
        assert_eq!(StatusBoard::new(1).estimator_without(0), 0.0); // alone on the node
    }

    #[test]
    fn node_view_matches_the_per_worker_estimator() {
        use WorkerStatus::*;
        for s in [Busy, Idle, DontKnow] {
            for n in 0..5u32 {
                let v = NodeView::uniform(n, s);
                assert_eq!(v.estimator(), node_estimator(std::iter::repeat_n(s, n as usize)), "{s:?} x {n}");
                assert_eq!(v.status(), (n > 0).then_some(s));
                assert_eq!(v.workers(), u64::from(n));
            }
        }
        let mixed = NodeView { busy: 1, idle: 2, dont_know: 3 };
        assert_eq!(mixed.estimator(), node_estimator([Busy, Idle, Idle, DontKnow, DontKnow, DontKnow]));
        assert_eq!(mixed.status(), None);
        assert_eq!(NodeView::uniform(u32::MAX, Busy).workers(), u64::from(u32::MAX));
    }
}
