//! SWAS-style worker status bitmaps and NUMA node load estimators
//! (thesis §4.3.2, Alg. 4.4).
//!
//! Every worker (thief) keeps its *own* view of every worker's status: a
//! 2-bit entry per worker, packed into `u64` words (the thesis packs four
//! entries per `uint8`; 32 per `u64` is the same layout, wider words).
//!
//! ```text
//! word k, bits 2*i+1 ..= 2*i : status of worker 32*k + i
//!   0b00 BUSY      the worker was seen with work (a steal from it succeeded)
//!   0b01 IDLE      the worker was seen without work (a steal from it failed)
//!   0b10 DONTKNOW  no information yet (the initial state of every entry)
//!   0b11           never written
//! ```
//!
//! The view is private to its thief (no atomics): it changes only through
//! the thief's own steal attempts ([`StatusBitmap::set`] for a local victim,
//! [`StatusBitmap::set_all`] for every worker of a remote victim's node) and
//! through the thief's own status (busy while running, idle before stealing).

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
    /// The 2-bit code stored in a [`StatusBitmap`].
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

/// Entries per `u64` word.
const PER_WORD: usize = 32;
/// A word with every entry `DONTKNOW` (`0b10` repeated).
const ALL_DONTKNOW: u64 = 0xAAAA_AAAA_AAAA_AAAA;

/// One thief's 2-bit status entry for every worker of a runtime.
///
/// ```
/// use numafiber::policy::status::{StatusBitmap, WorkerStatus};
/// let mut b = StatusBitmap::new(40);
/// assert_eq!(b.get(39), WorkerStatus::DontKnow); // all DONTKNOW at start
/// b.set(39, WorkerStatus::Busy);
/// b.set_all(&[0, 1], WorkerStatus::Idle);
/// assert_eq!((b.get(39), b.get(1), b.get(2)),
///            (WorkerStatus::Busy, WorkerStatus::Idle, WorkerStatus::DontKnow));
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusBitmap {
    words: Vec<u64>,
    len: usize,
}

impl StatusBitmap {
    /// `len` entries, all `DontKnow`.
    pub fn new(len: usize) -> StatusBitmap {
        StatusBitmap { words: vec![ALL_DONTKNOW; len.div_ceil(PER_WORD)], len }
    }

    /// Number of entries (workers).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are no entries.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The raw packed words (layout in the module docs).
    pub fn words(&self) -> &[u64] {
        &self.words
    }

    /// Status of worker `w`.
    ///
    /// # Panics
    /// If `w >= self.len()`.
    pub fn get(&self, w: usize) -> WorkerStatus {
        assert!(w < self.len, "worker {w} out of range (bitmap of {})", self.len);
        let shift = 2 * (w % PER_WORD);
        WorkerStatus::from_bits(self.words[w / PER_WORD] >> shift)
    }

    /// Set the status of worker `w`.
    ///
    /// # Panics
    /// If `w >= self.len()`.
    pub fn set(&mut self, w: usize, s: WorkerStatus) {
        assert!(w < self.len, "worker {w} out of range (bitmap of {})", self.len);
        let shift = 2 * (w % PER_WORD);
        let word = &mut self.words[w / PER_WORD];
        *word = (*word & !(0b11 << shift)) | (s.bits() << shift);
    }

    /// Set the status of every worker in `workers` (the remote-steal update).
    pub fn set_all(&mut self, workers: &[usize], s: WorkerStatus) {
        for &w in workers {
            self.set(w, s);
        }
    }

    /// Forget everything: all entries back to `DontKnow`.
    pub fn reset(&mut self) {
        self.words.fill(ALL_DONTKNOW);
    }
}

/// The thesis' NUMA estimator of one node:
/// `(busy * 1.0 + dontknow * 0.5) / workers on the node`, in `0.0..=1.0`.
/// A node without workers has nothing to steal and estimates `0.0`.
///
/// ```
/// use numafiber::policy::status::{node_estimator, StatusBitmap, WorkerStatus};
/// let mut b = StatusBitmap::new(4);
/// b.set(0, WorkerStatus::Busy);
/// b.set(1, WorkerStatus::Idle);
/// // worker 2 stays DONTKNOW
/// assert_eq!(node_estimator(&b, &[0, 1, 2]), 0.5);
/// assert_eq!(node_estimator(&b, &[]), 0.0);
/// ```
pub fn node_estimator(bitmap: &StatusBitmap, workers_on_node: &[usize]) -> f64 {
    if workers_on_node.is_empty() {
        return 0.0;
    }
    let sum: f64 = workers_on_node.iter().map(|&w| bitmap.get(w).weight()).sum();
    sum / workers_on_node.len() as f64
}

/// [`node_estimator`] of every node: `out[n]` for the workers
/// `node_workers[n]`. `out` is cleared first (reuse it to avoid allocating).
pub fn node_estimators(bitmap: &StatusBitmap, node_workers: &[Vec<usize>], out: &mut Vec<f64>) {
    out.clear();
    out.extend(node_workers.iter().map(|ws| node_estimator(bitmap, ws)));
}

/// The estimators a thief steals by: [`node_estimators`] with the thief's
/// own entry left out of its node's mean (a node whose only worker is the
/// thief has nothing to steal and estimates `0.0`).
///
/// The thesis (4.3.2) sets a worker's own entry to IDLE before it steals
/// *and* states that "the first steal attempts will always be local".
/// Counted in, the thief's own IDLE entry lowers its node below remote
/// nodes that are still DONTKNOW, so a thief that has been busy once would
/// try a remote node first. The thief's own status says nothing about what
/// it can steal, so it is left out here: with no information, the own node
/// ties with the others and comes first, as the thesis says.
///
/// ```
/// use numafiber::policy::status::{thief_node_estimators, StatusBitmap, WorkerStatus};
/// let mut b = StatusBitmap::new(4); // nodes {0, 1} and {2, 3}, all DONTKNOW
/// b.set(0, WorkerStatus::Idle);     // thief 0 is about to steal
/// let mut est = Vec::new();
/// thief_node_estimators(&b, &[vec![0, 1], vec![2, 3]], 0, &mut est);
/// assert_eq!(est, vec![0.5, 0.5]);  // worker 1 is DONTKNOW: a tie, own node first
/// ```
pub fn thief_node_estimators(bitmap: &StatusBitmap, node_workers: &[Vec<usize>], thief: usize, out: &mut Vec<f64>) {
    out.clear();
    out.extend(node_workers.iter().map(|ws| {
        if !ws.contains(&thief) {
            return node_estimator(bitmap, ws);
        }
        let others = ws.len() - 1;
        if others == 0 {
            return 0.0;
        }
        let sum: f64 = ws.iter().filter(|&&w| w != thief).map(|&w| bitmap.get(w).weight()).sum();
        sum / others as f64
    }));
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
    fn bitmap_starts_all_dontknow_across_word_boundaries() {
        let b = StatusBitmap::new(70);
        assert_eq!(b.words().len(), 3);
        assert!((0..70).all(|w| b.get(w) == WorkerStatus::DontKnow));
        assert_eq!(StatusBitmap::new(0).words().len(), 0);
        assert!(StatusBitmap::new(0).is_empty());
    }

    #[test]
    fn bitmap_set_touches_only_its_entry() {
        let mut b = StatusBitmap::new(66);
        b.set(31, WorkerStatus::Busy); // last entry of word 0
        b.set(32, WorkerStatus::Idle); // first entry of word 1
        b.set(65, WorkerStatus::Busy);
        for w in 0..66 {
            let want = match w {
                31 | 65 => WorkerStatus::Busy,
                32 => WorkerStatus::Idle,
                _ => WorkerStatus::DontKnow,
            };
            assert_eq!(b.get(w), want, "worker {w}");
        }
        // Overwrite in both directions (clears the old bits).
        b.set(31, WorkerStatus::DontKnow);
        b.set(32, WorkerStatus::Busy);
        assert_eq!(b.get(31), WorkerStatus::DontKnow);
        assert_eq!(b.get(32), WorkerStatus::Busy);
        assert_eq!(b.get(30), WorkerStatus::DontKnow);
        b.reset();
        assert_eq!(b, StatusBitmap::new(66));
    }

    #[test]
    #[should_panic(expected = "out of range")]
    fn bitmap_rejects_out_of_range_worker() {
        StatusBitmap::new(3).get(3);
    }

    #[test]
    fn estimator_weights_busy_one_dontknow_half_idle_zero() {
        let mut b = StatusBitmap::new(6);
        let node = [0, 1, 2, 3];
        assert_eq!(node_estimator(&b, &node), 0.5); // all DONTKNOW
        b.set_all(&node, WorkerStatus::Busy);
        assert_eq!(node_estimator(&b, &node), 1.0);
        b.set_all(&node, WorkerStatus::Idle);
        assert_eq!(node_estimator(&b, &node), 0.0);
        b.set(0, WorkerStatus::Busy);
        b.set(1, WorkerStatus::DontKnow);
        assert_eq!(node_estimator(&b, &node), 1.5 / 4.0);
        let mut out = vec![9.0; 7];
        node_estimators(&b, &[vec![0, 1, 2, 3], vec![4, 5], vec![]], &mut out);
        assert_eq!(out, vec![1.5 / 4.0, 0.5, 0.0]);
    }
}
