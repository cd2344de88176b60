//! Timers no fiber can hold hostage: each worker's timer heap sits behind
//! a lock in the worker's shared part, with its earliest deadline
//! published in an atomic, so that an idle worker fires the due timers of
//! a worker stuck in a fiber that does not give control back (as Go lets
//! any idle P run another P's due timers).
//!
//! Protocol (`README.md` beside this file, "Timers any worker can fire"):
//! the owner arms and fires its timers under the lock, between fibers; a
//! searching or watching worker fires another worker's timers only when
//! they are overdue by `STEAL_GRACE` (the owner had its chance and did
//! not take it) and only with `try_lock` (never waits on a busy owner). A
//! fired timer wakes its fiber through `Shared::wake`, which is safe from
//! any thread; a stale timer (its wait ended otherwise) is dropped, and a
//! timer read stale by a racing thief only wakes its fiber spuriously,
//! which every timed wait allows for.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::*};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::runtime::shared::Shared;
use crate::runtime::task::{Task, TaskRef};

/// How long a timer must be overdue before a worker other than its owner
/// fires it.
pub(crate) const STEAL_GRACE: Duration = Duration::from_micros(500);

/// The timer heap is compacted (stale timers dropped) when it reaches
/// twice its size after the last compaction, and never below this.
const TIMER_COMPACT_MIN: usize = 64;

/// Due timers taken out of the heap per lock hold by `fire_due`.
const FIRE_BATCH: usize = 32;

/// No timer armed (`WorkerTimers::next`).
const NONE: u64 = u64::MAX;

/// `t` as nanoseconds after the runtime's process-wide time origin
/// (`dump::deadline_code`; saturating, 0 before it, never `NONE`).
fn to_nanos(t: Instant) -> u64 {
    crate::runtime::dump::deadline_code(t).min(NONE - 1)
}

/// A timer entry: wake `task` at `deadline`.
pub(crate) struct Timer {
    pub(crate) deadline: Instant,
    pub(crate) seq: u64,
    /// `task.timer_gen()` when armed: the timer is live while they match.
    pub(crate) gen: u64,
    pub(crate) task: TaskRef,
}

impl Timer {
    /// The timed wait it was armed for is still going on.
    fn is_live(&self) -> bool {
        self.task.timer_gen() == self.gen
    }
}

impl PartialEq for Timer {
    fn eq(&self, o: &Self) -> bool {
        (self.deadline, self.seq) == (o.deadline, o.seq)
    }
}
impl Eq for Timer {}
impl PartialOrd for Timer {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Timer {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.deadline, self.seq).cmp(&(o.deadline, o.seq))
    }
}

struct Heap {
    heap: BinaryHeap<Reverse<Timer>>,
    seq: u64,
    /// Heap size at which `add` next drops stale timers.
    compact_at: usize,
}

/// One worker's timers (in `WorkerShared`).
pub(crate) struct WorkerTimers {
    heap: Mutex<Heap>,
    /// The earliest deadline in nanoseconds after the time origin, `NONE` when no
    /// timer is armed; written under the lock, read without it (a hint).
    next: AtomicU64,
    /// Timers armed and not fired yet (the deadlock detector: a pending
    /// timer may still wake a fiber).
    count: AtomicUsize,
}

impl WorkerTimers {
    pub(crate) fn new() -> WorkerTimers {
        WorkerTimers {
            heap: Mutex::new(Heap { heap: BinaryHeap::new(), seq: 0, compact_at: TIMER_COMPACT_MIN }),
            next: AtomicU64::new(NONE),
            count: AtomicUsize::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Heap> {
        // Nothing panics under this lock but an allocation failure.
        self.heap.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publish the heap's earliest deadline and size (under its lock).
    fn publish(&self, h: &Heap) {
        let next = h.heap.peek().map_or(NONE, |Reverse(t)| to_nanos(t.deadline));
        self.next.store(next, Release);
        self.count.store(h.heap.len(), SeqCst);
    }

    /// Timers armed and not fired yet.
    pub(crate) fn len(&self) -> usize {
        self.count.load(SeqCst)
    }

    /// A timer may be armed (a hint: one relaxed load).
    #[inline]
    pub(crate) fn any(&self) -> bool {
        self.next.load(Relaxed) != NONE
    }

    /// Arm a timer that wakes `task` at `deadline` (owner).
    ///
    /// The timer belongs to the task's current timed wait: once the fiber
    /// calls `Task::timed_wait_over` it is stale. Stale timers wake nobody
    /// and are dropped when the heap reaches twice its size after the last
    /// compaction, so the heap stays within about twice the live timers
    /// however many waits end early (O(1) amortized per timer).
    pub(crate) fn add(&self, deadline: Instant, task: TaskRef) {
        let gen = task.timer_gen();
        let stale = {
            let mut h = self.lock();
            let seq = h.seq;
            h.seq = seq.wrapping_add(1);
            h.heap.push(Reverse(Timer { deadline, seq, gen, task }));
            let stale = if h.heap.len() >= h.compact_at {
                let (live, stale): (Vec<_>, Vec<_>) =
                    std::mem::take(&mut h.heap).into_vec().into_iter().partition(|Reverse(t)| t.is_live());
                h.heap = BinaryHeap::from(live);
                h.compact_at = h.heap.len().saturating_mul(2).max(TIMER_COMPACT_MIN);
                stale
            } else {
                Vec::new()
            };
            self.publish(&h);
            stale
        };
        // Outside the lock: the last reference to a finished task may go
        // here.
        drop(stale);
    }

    /// The earliest deadline, if a timer is armed.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        match self.next.load(Acquire) {
            NONE => None,
            n => Some(crate::runtime::dump::deadline_from_code(n)),
        }
    }

    /// The earliest deadline is at or before `now` minus `grace`.
    #[inline]
    pub(crate) fn overdue(&self, now: Instant, grace: Duration) -> bool {
        let n = self.next.load(Acquire);
        n != NONE && n.saturating_add(u64::try_from(grace.as_nanos()).unwrap_or(NONE)) <= to_nanos(now)
    }

    /// Fire the timers due at `now`, in deadline order, up to `FIRE_BATCH`
    /// per lock hold: each live one wakes its fiber (`Shared::wake`, onto
    /// the calling worker's queues), a stale one is dropped. `try_only`:
    /// give up if another thread holds the lock (a thief never waits on the
    /// owner). Returns how many fibers were woken.
    pub(crate) fn fire_due(&self, shared: &std::sync::Arc<Shared>, now: Instant, try_only: bool) -> usize {
        let mut woken = 0;
        loop {
            let mut fired: [Option<Timer>; FIRE_BATCH] = [const { None }; FIRE_BATCH];
            let n = {
                let mut h = if try_only {
                    match self.heap.try_lock() {
                        Ok(h) => h,
                        Err(std::sync::TryLockError::Poisoned(e)) => e.into_inner(),
                        Err(std::sync::TryLockError::WouldBlock) => return woken,
                    }
                } else {
                    self.lock()
                };
                let mut n = 0;
                while n < FIRE_BATCH {
                    match h.heap.peek() {
                        Some(Reverse(t)) if t.deadline <= now => fired[n] = h.heap.pop().map(|Reverse(t)| t),
                        _ => break,
                    }
                    n += 1;
                }
                self.publish(&h);
                n
            };
            // Outside the lock: dropping a stale timer or waking pushes
            // onto queues may drop the last reference to a task. The live
            // ones are woken in deadline order, chained for prefetching
            // (`Task::chain_prefetch`); the first, which usually runs
            // next, is prefetched now.
            for slot in &mut fired[..n] {
                if slot.as_ref().is_some_and(|t| !t.is_live()) {
                    *slot = None;
                }
            }
            if let Some(first) = Task::chain_prefetch(fired[..n].iter().flatten().map(|t| &*t.task)) {
                first.prefetch_self();
            }
            for t in fired[..n].iter_mut().filter_map(Option::take) {
                shared.wake(t.task);
                woken += 1;
            }
            if n < FIRE_BATCH {
                return woken;
            }
        }
    }

    /// Shutdown: drop every timer (they only hold extra references to
    /// parked fibers, which the registry also holds).
    pub(crate) fn clear(&self) {
        let old = {
            let mut h = self.lock();
            let old = std::mem::take(&mut h.heap);
            self.publish(&h);
            old
        };
        drop(old);
    }
}
