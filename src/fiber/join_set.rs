//! `JoinSet`: a set of fibers whose results are taken in the order they
//! finish (a re-awaitable `when_any`).
//!
//! Each fiber spawned through the set runs its closure inside a small
//! wrapper whose drop guard pushes the fiber's key (a per-set counter) onto
//! the set's *ready queue* (a `WaitQueue<VecDeque<u64>>`) when the closure
//! returns, panics, or is destroyed by shutdown (also unstarted: the guard
//! is captured by the closure). `join_next` pops a key (parking while the
//! queue is empty) and joins that fiber's handle, whose result is there or
//! about to be (the guard runs just before the fiber publishes it). So a
//! `join_next` costs O(1) whatever the set's size, unlike polling every
//! handle.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use crate::fiber::JoinHandle;
use crate::runtime::error::JoinError;
use crate::runtime::task::wait_kind;
use crate::runtime::Handle;
use crate::sync::queue::{wake_all, Outcome, Reason, WaitQueue};

/// A set of fibers, joined in the order they finish (tokio's `JoinSet`;
/// corolib's `when_any` awaited several times).
///
/// [`join_next`](Self::join_next) returns the result of the next fiber
/// to finish and keeps the others running; `None` once the set is empty.
///
/// **Dropping the set detaches its fibers**: they keep running to the end
/// and their results are dropped when they finish (nothing leaks: each
/// result lives in its fiber's join slot, freed with the fiber). Fibers
/// cannot be aborted from outside (scheduling is cooperative and a fiber
/// cannot be interrupted at an arbitrary point); to stop them early, tell
/// them (an [`Event`](crate::sync::Event), a closed channel) and
/// [`join_all`](Self::join_all) or keep calling `join_next`. Dropping the
/// *runtime* destroys whatever is still running, as for any fiber.
///
/// ```
/// use std::time::Duration;
/// use numafiber::{fiber, fiber::JoinSet, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let order = rt.block_on(|| {
///     let mut set = JoinSet::new();
///     for (name, ms) in [("slow", 300), ("fast", 1), ("middle", 100)] {
///         set.spawn(move || { fiber::sleep(Duration::from_millis(ms)); name });
///     }
///     let mut order = Vec::new();
///     while let Some(r) = set.join_next() {
///         order.push(r.unwrap());
///     }
///     order
/// });
/// assert_eq!(order, ["fast", "middle", "slow"]);
/// ```
pub struct JoinSet<T> {
    /// Keyed by a per-set counter (known before the fiber runs).
    handles: HashMap<u64, JoinHandle<T>>,
    next_key: u64,
    ready: Arc<WaitQueue<VecDeque<u64>>>,
}

impl<T> std::fmt::Debug for JoinSet<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JoinSet").field("len", &self.len()).finish()
    }
}

impl<T> Default for JoinSet<T> {
    fn default() -> Self {
        JoinSet::new()
    }
}

/// Pushes the fiber's id onto the ready queue on every exit path.
struct Finished {
    key: u64,
    ready: Arc<WaitQueue<VecDeque<u64>>>,
}

impl Drop for Finished {
    fn drop(&mut self) {
        let granted = {
            let mut q = self.ready.lock();
            q.state.push_back(self.key);
            q.grant_first().into_iter().collect::<Vec<_>>()
        };
        wake_all(granted);
    }
}

impl<T: Send + 'static> JoinSet<T> {
    /// Spawn `f` as a fiber of the current fiber's runtime (placed as by
    /// [`spawn`](crate::fiber::spawn)) and add it to the set.
    ///
    /// While the runtime shuts down the fiber is cancelled at once (see
    /// [`spawn_on`](Self::spawn_on)).
    ///
    /// # Panics
    /// Outside a fiber of a runtime (use [`spawn_on`](Self::spawn_on) from
    /// plain threads), and as [`spawn_on`](Self::spawn_on).
    ///
    /// ```
    /// use numafiber::{fiber::JoinSet, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let n = rt.block_on(|| {
    ///     let mut set = JoinSet::new();
    ///     set.spawn(|| 1);
    ///     set.len()
    /// });
    /// assert_eq!(n, 1);
    /// ```
    #[track_caller]
    pub fn spawn<F>(&mut self, f: F)
    where
        F: FnOnce() -> T + Send + 'static,
    {
        let h = Handle::try_current()
            .unwrap_or_else(|| panic!("{}", crate::SpawnError::new(crate::SpawnErrorKind::NoRuntime)));
        self.spawn_on(&h, f);
    }

    /// Spawn `f` on the runtime of `handle`, from any thread, and add it
    /// to the set. While that runtime shuts down the fiber is cancelled at
    /// once, as with [`fiber::spawn`](crate::fiber::spawn): its closure is
    /// dropped unrun and `join_next` reports it as cancelled.
    ///
    /// # Panics
    /// In a `fork()`ed child of the process that built the runtime, and
    /// when the closure plus its result is larger than a quarter of the
    /// runtime's stack size (box large captures).
    ///
    /// ```
    /// use numafiber::{fiber::JoinSet, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let mut set = JoinSet::new();
    /// set.spawn_on(&rt.handle(), || "from a thread");
    /// assert_eq!(set.join_next().unwrap().unwrap(), "from a thread");
    /// ```
    #[track_caller]
    pub fn spawn_on<F>(&mut self, handle: &Handle, f: F)
    where
        F: FnOnce() -> T + Send + 'static,
    {
        let key = self.next_key;
        self.next_key += 1;
        // Captured by the closure, so it also reports a fiber whose closure
        // is dropped unrun (destroyed by shutdown before it started).
        let finished = Finished { key, ready: self.ready.clone() };
        let h = crate::runtime::spawn_on(
            handle.shared(),
            move || {
                let _finished = finished;
                f()
            },
            crate::runtime::SpawnOpts::infallible(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        self.handles.insert(key, h);
    }
}

impl<T> JoinSet<T> {
    /// An empty set.
    ///
    /// ```
    /// let set = numafiber::fiber::JoinSet::<u8>::new();
    /// assert!(set.is_empty());
    /// ```
    pub fn new() -> JoinSet<T> {
        JoinSet { handles: HashMap::new(), next_key: 0, ready: Arc::new(WaitQueue::new(VecDeque::new())) }
    }

    /// Number of fibers in the set (running, or finished and not joined).
    ///
    /// ```
    /// assert_eq!(numafiber::fiber::JoinSet::<()>::new().len(), 0);
    /// ```
    pub fn len(&self) -> usize {
        self.handles.len()
    }

    /// Whether the set holds no fiber.
    ///
    /// ```
    /// assert!(numafiber::fiber::JoinSet::<()>::new().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.handles.is_empty()
    }

    /// Wait for the next fiber of the set to finish and take its result
    /// (`Err` carries its panic, see [`JoinError::into_panic`]); the other
    /// fibers keep running and stay in the set. `None` when the set is
    /// empty. Parks a fiber, blocks a thread.
    ///
    /// ```
    /// use numafiber::{fiber::JoinSet, Runtime};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let (ok, failed) = rt.block_on(|| {
    ///     let mut set = JoinSet::new();
    ///     set.spawn(|| 1);
    ///     set.spawn(|| -> i32 { panic!("expected") });
    ///     let (mut ok, mut failed) = (0, 0);
    ///     while let Some(r) = set.join_next() {
    ///         match r { Ok(_) => ok += 1, Err(e) => { assert!(e.is_panic()); failed += 1 } }
    ///     }
    ///     (ok, failed)
    /// });
    /// assert_eq!((ok, failed), (1, 1));
    /// ```
    #[track_caller]
    pub fn join_next(&mut self) -> Option<Result<T, JoinError>> {
        if self.handles.is_empty() {
            return None;
        }
        loop {
            let (id, node) = {
                let mut q = self.ready.lock();
                if let Some(fid) = q.state.pop_front() {
                    drop(q);
                    if let Some(h) = self.handles.remove(&fid) {
                        return Some(h.join());
                    }
                    continue; // detached by `detach_all` meanwhile
                }
                q.push(())
            };
            let reason = Reason::new(wait_kind::JOIN_SET, &*self.ready);
            match self.ready.park(id, &node, None, reason, |_| {}, || {}) {
                Outcome::Signalled => continue,
                Outcome::TimedOut(()) => continue,
                Outcome::Cancelled(()) => {
                    // The caller is being destroyed by shutdown: the fibers
                    // are being destroyed too; report one as cancelled.
                    let fid = *self.handles.keys().next()?;
                    let h = self.handles.remove(&fid)?;
                    return Some(if h.is_finished() { h.join() } else { Err(JoinError::cancelled()) });
                }
            }
        }
    }

    /// The result of a fiber of the set that has finished, if any, without
    /// waiting (tokio's `try_join_next`); `None` when none has finished yet
    /// or the set is empty.
    ///
    /// ```
    /// use numafiber::{fiber::{self, JoinSet}, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let mut set = JoinSet::new();
    ///     assert!(set.try_join_next().is_none());
    ///     set.spawn(|| 3);
    ///     while set.try_join_next().is_none() {
    ///         fiber::yield_now();
    ///     }
    /// });
    /// ```
    pub fn try_join_next(&mut self) -> Option<Result<T, JoinError>> {
        loop {
            let fid = self.ready.lock().state.pop_front()?;
            if let Some(h) = self.handles.remove(&fid) {
                return Some(h.join());
            }
            // detached by `detach_all` meanwhile: look further
        }
    }

    /// Cancel every fiber of the set ([`JoinHandle::cancel`]); they stay in
    /// the set, so [`join_next`](JoinSet::join_next) then returns their
    /// results (cancelled, or finished if they were done first).
    ///
    /// ```
    /// use numafiber::{fiber::{self, JoinSet}, sync, Runtime};
    /// use std::sync::Arc;
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let ev = Arc::new(sync::Event::new());
    ///     let mut set = JoinSet::new();
    ///     for _ in 0..3 {
    ///         let ev = ev.clone();
    ///         set.spawn(move || ev.wait()); // nobody sets it
    ///     }
    ///     set.cancel_all();
    ///     while let Some(r) = set.join_next() {
    ///         assert!(r.unwrap_err().is_cancelled());
    ///     }
    /// });
    /// ```
    pub fn cancel_all(&self) {
        for h in self.handles.values() {
            h.cancel();
        }
    }

    /// Join every fiber of the set, in finishing order.
    ///
    /// ```
    /// use numafiber::{fiber::JoinSet, Runtime};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let mut v: Vec<u32> = rt.block_on(|| {
    ///     let mut set = JoinSet::new();
    ///     for i in 0..4 { set.spawn(move || i); }
    ///     set.join_all().into_iter().map(Result::unwrap).collect()
    /// });
    /// v.sort();
    /// assert_eq!(v, [0, 1, 2, 3]);
    /// ```
    #[track_caller]
    pub fn join_all(mut self) -> Vec<Result<T, JoinError>> {
        let mut out = Vec::with_capacity(self.len());
        while let Some(r) = self.join_next() {
            out.push(r);
        }
        out
    }

    /// Detach every fiber: they keep running, their results are dropped.
    /// This is also what dropping the set does.
    ///
    /// ```
    /// use numafiber::{fiber::JoinSet, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let mut set = JoinSet::new();
    ///     set.spawn(|| ());
    ///     set.detach_all();
    ///     assert!(set.is_empty());
    /// });
    /// ```
    pub fn detach_all(&mut self) {
        self.handles.clear();
        self.ready.lock().state.clear();
    }
}
