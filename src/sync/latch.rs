//! `Barrier`, `WaitGroup` and `Event`: one-shot and cyclic rendezvous.

use std::time::{Duration, Instant};

use super::queue::{wake_all, Outcome, Reason, WaitQueue};
use crate::runtime::task::wait_kind;

/// A cyclic barrier for `n` parties (`std::sync::Barrier` shape): each
/// `wait` parks until `n` callers have arrived, then all continue and the
/// barrier resets. Exactly one caller per round is the leader.
///
/// A fiber being destroyed by the runtime's shutdown cannot park: its
/// `wait` returns at once as a non-leader.
///
/// ```
/// use std::sync::Arc;
/// use numafiber::{fiber, sync::Barrier, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let leaders = rt.block_on(|| {
///     let b = Arc::new(Barrier::new(4));
///     let hs: Vec<_> = (0..4).map(|_| { let b = b.clone(); fiber::spawn(move || b.wait().is_leader()) }).collect();
///     fiber::when_all(hs).into_iter().filter(|&l| l).count()
/// });
/// assert_eq!(leaders, 1);
/// ```
pub struct Barrier {
    queue: WaitQueue<BarrierState>,
}

struct BarrierState {
    n: usize,
    count: usize,
}

/// What [`Barrier::wait`] returns.
///
/// ```
/// let b = numafiber::sync::Barrier::new(1);
/// assert!(b.wait().is_leader());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BarrierWaitResult(bool);

impl BarrierWaitResult {
    /// This caller completed the round (exactly one per round).
    pub fn is_leader(&self) -> bool {
        self.0
    }
}

impl std::fmt::Debug for Barrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let q = self.queue.lock();
        f.debug_struct("Barrier").field("n", &q.state.n).field("waiting", &q.state.count).finish()
    }
}

impl Barrier {
    /// A barrier for `n` parties (`0` behaves like `1`).
    ///
    /// ```
    /// let b = numafiber::sync::Barrier::new(1);
    /// b.wait();
    /// b.wait(); // cyclic
    /// ```
    pub const fn new(n: usize) -> Barrier {
        Barrier { queue: WaitQueue::new(BarrierState { n: if n == 0 { 1 } else { n }, count: 0 }) }
    }

    /// Park until all `n` parties have called `wait` in this round.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let b = Arc::new(numafiber::sync::Barrier::new(2));
    /// let b2 = b.clone();
    /// let t = std::thread::spawn(move || b2.wait().is_leader());
    /// let me = b.wait().is_leader();
    /// assert!(me ^ t.join().unwrap());
    /// ```
    #[track_caller]
    pub fn wait(&self) -> BarrierWaitResult {
        let (id, node) = {
            let mut q = self.queue.lock();
            q.state.count += 1;
            if q.state.count >= q.state.n {
                q.state.count = 0;
                let es = q.grant_all();
                drop(q);
                wake_all(es);
                return BarrierWaitResult(true);
            }
            q.push(())
        };
        let leave = |q: &mut super::queue::Inner<BarrierState, ()>| q.state.count -= 1;
        self.queue.park(id, &node, None, Reason::new(wait_kind::BARRIER, self), leave, || {});
        BarrierWaitResult(false)
    }
}

/// Go's `sync.WaitGroup`: `add(n)` work items, `done()` for each, and
/// `wait()` parks until the count is back to zero.
///
/// ```
/// use std::sync::Arc;
/// use numafiber::{fiber, sync::WaitGroup, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let wg = Arc::new(WaitGroup::new());
///     for _ in 0..5 {
///         wg.add(1);
///         let wg = wg.clone();
///         fiber::spawn(move || { fiber::yield_now(); wg.done(); });
///     }
///     wg.wait();
///     assert_eq!(wg.count(), 0);
/// });
/// ```
pub struct WaitGroup {
    queue: WaitQueue<usize>,
}

impl Default for WaitGroup {
    fn default() -> Self {
        WaitGroup::new()
    }
}

impl std::fmt::Debug for WaitGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WaitGroup").field("count", &self.count()).finish()
    }
}

impl WaitGroup {
    /// A wait group with count 0.
    ///
    /// ```
    /// numafiber::sync::WaitGroup::new().wait(); // count 0: returns at once
    /// ```
    pub const fn new() -> WaitGroup {
        WaitGroup { queue: WaitQueue::new(0) }
    }

    /// Add `n` to the count.
    ///
    /// # Panics
    /// If the count would exceed `usize::MAX` (an overflow is a bug, as
    /// for std's counters, never a silent wrap to zero that would release
    /// the waiters); the count is left unchanged then.
    ///
    /// ```
    /// let wg = numafiber::sync::WaitGroup::new();
    /// wg.add(2);
    /// assert_eq!(wg.count(), 2);
    /// ```
    pub fn add(&self, n: usize) {
        let mut q = self.queue.lock();
        match q.state.checked_add(n) {
            Some(c) => q.state = c,
            None => {
                let c = q.state;
                drop(q);
                panic!("WaitGroup::add({n}) on a count of {c} would overflow usize");
            }
        }
    }

    /// Subtract one; at zero every waiter is released.
    ///
    /// # Panics
    /// If the count is already zero (as Go's negative counter).
    ///
    /// ```
    /// let wg = numafiber::sync::WaitGroup::new();
    /// wg.add(1);
    /// wg.done();
    /// wg.wait();
    /// ```
    pub fn done(&self) {
        let es = {
            let mut q = self.queue.lock();
            assert!(q.state > 0, "WaitGroup::done called more often than add");
            q.state -= 1;
            if q.state > 0 {
                return;
            }
            q.grant_all()
        };
        wake_all(es);
    }

    /// The current count.
    ///
    /// ```
    /// assert_eq!(numafiber::sync::WaitGroup::new().count(), 0);
    /// ```
    pub fn count(&self) -> usize {
        self.queue.lock().state
    }

    /// Park until the count is zero. A fiber being destroyed by the
    /// runtime's shutdown returns at once.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let wg = Arc::new(numafiber::sync::WaitGroup::new());
    /// wg.add(1);
    /// let w = wg.clone();
    /// std::thread::spawn(move || w.done());
    /// wg.wait();
    /// ```
    #[track_caller]
    pub fn wait(&self) {
        let (id, node) = {
            let mut q = self.queue.lock();
            if q.state == 0 {
                return;
            }
            q.push(())
        };
        self.queue.park(id, &node, None, Reason::new(wait_kind::WAITGROUP, self), |_| {}, || {});
    }
}

/// A manual-reset event: `set` releases every waiter and keeps releasing
/// new ones until `reset` (cppcoro `async_manual_reset_event`, corolib
/// `oneway_event`).
///
/// ```
/// use std::sync::Arc;
/// use numafiber::{fiber, sync::Event, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let ev = Arc::new(Event::new());
///     let e = ev.clone();
///     let h = fiber::spawn(move || { e.wait(); "released" });
///     ev.set();
///     assert_eq!(fiber::await_fiber(h), "released");
/// });
/// ```
pub struct Event {
    queue: WaitQueue<bool>,
}

impl Default for Event {
    fn default() -> Self {
        Event::new()
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("set", &self.is_set()).finish()
    }
}

impl Event {
    /// A new event, not set.
    ///
    /// ```
    /// assert!(!numafiber::sync::Event::new().is_set());
    /// ```
    pub const fn new() -> Event {
        Event { queue: WaitQueue::new(false) }
    }

    /// Set the event and release every waiter.
    ///
    /// ```
    /// let e = numafiber::sync::Event::new();
    /// e.set();
    /// e.wait(); // returns at once
    /// ```
    pub fn set(&self) {
        let es = {
            let mut q = self.queue.lock();
            q.state = true;
            q.grant_all()
        };
        wake_all(es);
    }

    /// Clear the event: later `wait`s park again.
    ///
    /// ```
    /// let e = numafiber::sync::Event::new();
    /// e.set();
    /// e.reset();
    /// assert!(!e.is_set());
    /// ```
    pub fn reset(&self) {
        self.queue.lock().state = false;
    }

    /// Whether the event is set.
    ///
    /// ```
    /// let e = numafiber::sync::Event::new();
    /// e.set();
    /// assert!(e.is_set());
    /// ```
    pub fn is_set(&self) -> bool {
        self.queue.lock().state
    }

    /// Park until the event is set (returns at once if it is). A fiber
    /// being destroyed by the runtime's shutdown returns at once.
    ///
    /// ```
    /// use std::sync::Arc;
    /// let e = Arc::new(numafiber::sync::Event::new());
    /// let e2 = e.clone();
    /// std::thread::spawn(move || e2.set());
    /// e.wait();
    /// ```
    #[track_caller]
    pub fn wait(&self) {
        self.wait_inner(None);
    }

    /// Wait at most `dur`; returns whether the event was set.
    ///
    /// ```
    /// use std::time::Duration;
    /// let e = numafiber::sync::Event::new();
    /// assert!(!e.wait_timeout(Duration::from_millis(1)));
    /// ```
    #[track_caller]
    pub fn wait_timeout(&self, dur: Duration) -> bool {
        self.wait_inner(Instant::now().checked_add(dur))
    }

    /// Wait until `deadline` at the latest; returns whether the event was
    /// set (Boost's `*_until` shape).
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// let e = numafiber::sync::Event::new();
    /// assert!(!e.wait_until(Instant::now() + Duration::from_millis(1)));
    /// e.set();
    /// assert!(e.wait_until(Instant::now()), "set: no wait");
    /// ```
    #[track_caller]
    pub fn wait_until(&self, deadline: Instant) -> bool {
        self.wait_inner(Some(deadline))
    }

    #[track_caller]
    fn wait_inner(&self, deadline: Option<Instant>) -> bool {
        let (id, node) = {
            let mut q = self.queue.lock();
            if q.state {
                return true;
            }
            q.push(())
        };
        let reason = Reason::new(wait_kind::EVENT, self);
        matches!(self.queue.park(id, &node, deadline, reason, |_| {}, || {}), Outcome::Signalled)
    }
}
