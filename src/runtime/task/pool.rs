//! Per-worker recycling of finished tasks (Go's per-P `gFree` list).
//!
//! A `Task` is one heap allocation (`Arc<Task>`, about 350 bytes). Without
//! recycling, a task spawned on worker A is often freed on worker B: the
//! surplus entry a reclaim leaves in B's inbox (`runtime::task`, "Reclaim")
//! holds the last reference, and B drops it. glibc then takes A's arena
//! lock while A mallocs: skynet 1M on 2 workers spent about a quarter of
//! its samples in that lock's futex waits and wakes. So the
//! places where a worker drops what may be a task's last reference hand
//! it to that worker's [`TaskPool`] instead, and a spawn on a worker writes
//! the new task over one from its pool: no `malloc`, no `free`, and the
//! memory stays with the worker that last used it.
//!
//! # Why a pooled task is nobody else's
//!
//! A task enters a pool only through [`TaskPool::recycle`], and only if
//! `Arc::get_mut` succeeds on the reference being dropped: no other strong
//! reference exists, and no weak one (the crate never makes a
//! `Weak<Task>`). Every party that holds a task counts a reference: a
//! queue entry, the wake slot and `run_next`, a timer, a wait queue's
//! grant while the task is parked (a parked task owns a reference to
//! itself, `runtime::task` step 5), a packet's completer while it wakes its
//! owner (the owner is parked then, same argument), the parked-task
//! registry, the deadlock detector's roots, a job's runner, a scope's
//! list, the `JoinHandle`. So a unique task is in no queue, timer, wait
//! queue, packet or registry, and nobody can reach it again: the raw
//! pointers some of those keep (the wait queue's waker, the packet's
//! inline waiter, a worker's `CURRENT`) are only used while a counted
//! reference keeps the task alive, which is the rule that made freeing it
//! sound before. The acquire in `get_mut`'s uniqueness check pairs with
//! the release of every other holder's decrement, so all their accesses
//! to the task happen before its reuse.
//!
//! The task must also be *spent* (`Task::is_spent`): finished (`DONE`),
//! with its closure and its coroutine gone. Writing a new task over a
//! spent one drops only the old name and the old fiber's in-task
//! `MainPacket`, whose closure and result cells are empty by then
//! (`runtime::task::packet`, "In the task"), so neither `recycle` nor a spawn
//! ever runs user code (a destructor that spawns or drops a handle) while
//! the pool is borrowed, and a new fiber never sees an old one's value.
//!
//! A spawn writes a new task over the pooled one ([`TaskPool::alloc`],
//! `NewTask::write_over`, which names every field): every field is reset (state `QUEUED | FRESH`, a
//! fresh id from `next_fiber_id`, so ids stay unique and are never
//! reused; the new name, stack size, pinning, placement and reclaimer; no
//! registration, no timer generation, no wait reason).
//!
//! # Where tasks are recycled
//!
//! Where a worker thread drops a reference that is often the last one:
//! the `Return` arm of `WorkerLocal::run_task` (`finish_fiber`: a detached
//! fiber, or a fiber whose handle was dropped or joined first), `drop_surplus` (the
//! reclaim's surplus entry: skynet's cross-thread case) and
//! `JoinHandle`'s drop on a worker thread (spawn then join: the joiner
//! drops the last reference). Everything else (the shutdown drain, a
//! plain thread, a timer, a scope's list) drops as before. A worker
//! recycles tasks of any runtime: a `Task` names no runtime, and a spawn
//! resets every field.
//!
//! # The spill
//!
//! The flow between workers is not balanced: the worker that drops a
//! reclaim's surplus entries is not the one that spawned the tasks, and
//! in skynet on 2 workers one worker recycled up to 18,000 tasks more per
//! million fibers than it spawned, which a per-worker bound alone (64 or
//! 1,024 made no difference) turned into cross-thread `free`s again,
//! with the arena-lock futex waits the pool is meant to remove (10 % of
//! the samples). So, like Go's global `sched.gFree`, a full pool moves
//! its oldest `SPILL_BATCH` tasks to the runtime's [`TaskSpill`] (one
//! mutex, taken once per batch), and a pool that runs dry takes a batch
//! back from there before it allocates.
//!
//! # Bound and memory
//!
//! A pool keeps at most [`TASK_POOL_CAP`] tasks, the spill at most
//! `SPILL_CAP` (8 pools' worth); beyond that a task is freed normally.
//! A task's allocation is `size_of::<Task>()` plus the `Arc`'s two counts,
//! at most 400 bytes, of which 128 are the room for a spawned fiber's
//! closure and packet (`runtime::task::packet`, "In the task"; unit test
//! `task_fits_the_documented_size`): at most 100 KiB per worker and 800 KiB
//! per runtime, kept until the worker exits
//! (its pool) or the runtime is dropped (the spill). A pool's vector is
//! allocated once, at its full capacity (2 KiB), when the worker starts.
//! Unlike the stack pool, a task pool is not trimmed when its worker
//! parks: it holds no stack pages, its bound is small, and a worker of a
//! spawn-and-join workload parks often (skynet on 2 workers: thousands of
//! times per run), so trimming there would throw away what the next spawn
//! reuses.

use std::cell::RefCell;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::runtime::task::up::{self, Counters};
use crate::runtime::task::{NewTask, TaskRef};

/// Most tasks one worker's pool keeps (module docs, "Bound and memory").
pub(crate) const TASK_POOL_CAP: usize = 256;
/// Tasks moved between a worker's pool and the runtime's spill at once.
const SPILL_BATCH: usize = TASK_POOL_CAP / 2;
/// Most tasks the runtime's spill keeps.
const SPILL_CAP: usize = 8 * TASK_POOL_CAP;

/// The runtime's spill of spent tasks (module docs, "The spill"): one
/// mutex, taken once per `SPILL_BATCH` tasks.
pub(crate) struct TaskSpill {
    free: Mutex<Vec<TaskRef>>,
    /// `free.len()`, read without the lock by a pool that ran dry.
    len: AtomicUsize,
}

impl TaskSpill {
    pub(crate) fn new() -> TaskSpill {
        TaskSpill { free: Mutex::new(Vec::new()), len: AtomicUsize::new(0) }
    }

    fn lock(&self) -> MutexGuard<'_, Vec<TaskRef>> {
        // Nothing panics under the lock (no drop, no user code); recover
        // anyway.
        self.free.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// One worker's spent tasks (module docs). Thread-owned: only its worker
/// thread touches it, from the worker loop or from a fiber it runs.
pub(crate) struct TaskPool {
    free: RefCell<Vec<TaskRef>>,
}

impl TaskPool {
    pub(crate) fn new() -> TaskPool {
        TaskPool { free: RefCell::new(Vec::with_capacity(TASK_POOL_CAP)) }
    }

    /// Drop `t`, keeping its allocation here if it was the last reference
    /// to a spent task and the pool (or, when the pool is full, the
    /// runtime's `spill`) has room. Returns whether it was kept.
    #[inline]
    pub(crate) fn recycle(&self, t: TaskRef, spill: &TaskSpill) -> bool {
        // A plain load first: most references dropped here are not the
        // last one (the handle or the queue entry is still out), and
        // `get_mut` costs a locked compare-exchange.
        Arc::strong_count(&t) == 1 && self.keep(t, spill)
    }

    /// `recycle` of a reference that looked like the last one.
    #[inline]
    fn keep(&self, mut t: TaskRef, spill: &TaskSpill) -> bool {
        if let Some(task) = Arc::get_mut(&mut t) {
            if task.is_spent() {
                let mut free = self.free.borrow_mut();
                if free.len() == TASK_POOL_CAP {
                    spill_half(&mut free, spill);
                }
                if free.len() < TASK_POOL_CAP {
                    free.push(t);
                    return true;
                }
            }
        }
        // Outside the borrow: the drop of a task that is not spent may run
        // user code (its closure's captures).
        drop(t);
        false
    }

    /// The task `new` describes, in a recycled allocation if the pool has
    /// one (counted in `reused`, the worker's `WorkerStats::tasks_reused`),
    /// else in a new one.
    #[inline]
    pub(crate) fn alloc(&self, new: NewTask, reused: &AtomicU64, spill: &TaskSpill) -> TaskRef {
        let popped = {
            let mut free = self.free.borrow_mut();
            if free.is_empty() && spill.len.load(Relaxed) != 0 {
                refill(&mut free, spill);
            }
            free.pop()
        };
        if let Some(mut t) = popped {
            // Unique by the pool's invariant (module docs); a pool holding
            // a shared task would be a bug, and then a fresh allocation is
            // still right.
            if let Some(slot) = Arc::get_mut(&mut t) {
                // Drops the spent old values: only its name (`is_spent`).
                new.write_over(slot);
                Counters::bump(reused, 1);
                return t;
            }
            debug_assert!(false, "a pooled task is shared");
        }
        Arc::new(new.into_task())
    }

    /// Tasks waiting in the pool.
    #[allow(dead_code)] // unit tests
    pub(crate) fn len(&self) -> usize {
        self.free.borrow().len()
    }

    /// Free every pooled task (the worker exits). Spent tasks run no user
    /// code when dropped.
    pub(crate) fn clear(&self) {
        let free = std::mem::take(&mut *self.free.borrow_mut());
        drop(free);
    }
}

/// A full pool's oldest `SPILL_BATCH` tasks to the spill, if it has room
/// (module docs, "The spill"). Moves references only: drops nothing.
#[cold]
fn spill_half(free: &mut Vec<TaskRef>, spill: &TaskSpill) {
    let mut s = spill.lock();
    if s.len() + SPILL_BATCH <= SPILL_CAP {
        s.extend(free.drain(..SPILL_BATCH));
        spill.len.store(s.len(), Relaxed);
    }
}

/// A dry pool takes up to `SPILL_BATCH` tasks from the spill.
#[cold]
fn refill(free: &mut Vec<TaskRef>, spill: &TaskSpill) {
    let mut s = spill.lock();
    let n = s.len().min(SPILL_BATCH);
    let at = s.len() - n;
    free.extend(s.drain(at..));
    spill.len.store(s.len(), Relaxed);
}

/// Drop a task reference on the calling thread: into this thread's
/// worker's pool if it is the last reference to a spent task and the
/// thread runs a worker (`JoinHandle`'s drop), else as usual.
#[inline]
pub(crate) fn release(t: TaskRef) {
    if Arc::strong_count(&t) == 1 {
        release_to_worker(t);
    }
}

#[inline(never)]
fn release_to_worker(t: TaskRef) {
    let w = up::worker_ptr();
    if w.is_null() {
        return;
    }
    // SAFETY: a non-null WORKER points to this thread's live worker; used
    // here only, with no suspension.
    let w = unsafe { &*w };
    w.tasks.keep(t, &w.shared.task_spill);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::task::Task;

    use crate::runtime::task::packet::NopMain as Nop;

    fn new_task(id: u64, name: Option<&str>) -> NewTask {
        NewTask {
            id,
            name: name.map(Arc::from),
            stack_size: crate::runtime::task::stack::DEFAULT_STACK_SIZE,
            pinned: None,
            placed: 1,
            reclaim_by: 0,
            spawn_site: None,
            born_ms: 0,
            entry: Some(Box::new(Nop).into()),
        }
    }

    /// A task that ran and finished: `DONE`, closure taken, no coroutine.
    fn spent(id: u64) -> TaskRef {
        let t = Arc::new(new_task(id, Some("old")).into_task());
        assert!(t.transition_to_running());
        // SAFETY: we hold the run permission (just won it).
        let body = unsafe { t.body() };
        drop(body.entry.take());
        t.registered.set(true); // it parked once; the registry let go
        t.transition_to_done();
        t
    }

    #[test]
    fn task_fits_the_documented_size() {
        // The module docs' memory bound assumes at most 400 bytes per
        // pooled task, counts included.
        let size = std::mem::size_of::<Task>() + 2 * std::mem::size_of::<usize>();
        assert!(size <= 400, "a pooled task takes {size} bytes: update the module docs");
    }

    #[test]
    fn keeps_only_unique_spent_tasks() {
        let (pool, spill) = (TaskPool::new(), TaskSpill::new());
        // Shared: another reference is still out.
        let t = spent(1);
        let other = t.clone();
        assert!(!pool.recycle(t, &spill));
        assert_eq!(Arc::strong_count(&other), 1, "dropped, not kept");
        // Not spent: queued with its closure (dropping it may run user code).
        assert!(!pool.recycle(Arc::new(new_task(2, None).into_task()), &spill));
        // Running (coroutine-less but not DONE).
        let t = Arc::new(new_task(3, None).into_task());
        assert!(t.transition_to_running());
        assert!(!pool.recycle(t, &spill));
        assert_eq!(pool.len(), 0);
        // Unique and spent.
        assert!(pool.recycle(other, &spill));
        assert_eq!(pool.len(), 1);
    }

    #[test]
    fn alloc_resets_every_field() {
        let (pool, spill, reused) = (TaskPool::new(), TaskSpill::new(), AtomicU64::new(0));
        let old = spent(7);
        // Dirty what a fiber's life leaves behind.
        crate::runtime::context::set_task_wait_reason(&old, crate::runtime::task::wait_kind::JOIN, 5);
        old.timed_wait_over();
        old.stack_lo.store(4096, Relaxed);
        old.set_cancelling();
        old.set_last_worker(3);
        let addr = Arc::as_ptr(&old);
        assert!(pool.recycle(old, &spill));
        let t = pool.alloc(new_task(8, Some("new")), &reused, &spill);
        assert_eq!(Arc::as_ptr(&t), addr, "the pooled allocation was reused");
        assert_eq!(reused.load(Relaxed), 1);
        assert_eq!(pool.len(), 0);
        assert_eq!(t.id, 8);
        assert_eq!(t.name.as_deref(), Some("new"));
        assert_eq!(t.last_worker(), 1);
        assert_eq!(t.reclaim_by, 0);
        assert!(t.is_fresh() && !t.is_surplus(), "QUEUED | FRESH");
        assert!(!t.is_cancelling());
        assert_eq!(t.stack_lo.load(Relaxed), 0);
        assert_eq!(t.wait_kind.load(Relaxed), crate::runtime::task::wait_kind::NONE);
        assert_eq!(t.wait_obj.load(Relaxed), 0);
        assert_eq!(t.timer_gen(), 0);
        // SAFETY: a fresh task nobody else references.
        let body = unsafe { t.body() };
        assert!(body.entry.is_some() && body.coro.is_none() && body.yielder.is_null() && !t.registered.get());
        // An empty pool allocates.
        let u = pool.alloc(new_task(9, None), &reused, &spill);
        assert_ne!(Arc::as_ptr(&u), Arc::as_ptr(&t));
        assert_eq!(reused.load(Relaxed), 1);
    }

    #[test]
    fn a_full_pool_spills_and_a_dry_one_takes_back() {
        let (a, b, spill, reused) = (TaskPool::new(), TaskPool::new(), TaskSpill::new(), AtomicU64::new(0));
        for i in 0..TASK_POOL_CAP as u64 {
            assert!(a.recycle(spent(i), &spill));
        }
        assert_eq!((a.len(), spill.len.load(Relaxed)), (TASK_POOL_CAP, 0));
        // One more: the oldest half goes to the spill.
        assert!(a.recycle(spent(1000), &spill));
        assert_eq!((a.len(), spill.len.load(Relaxed)), (TASK_POOL_CAP - SPILL_BATCH + 1, SPILL_BATCH));
        // A dry pool takes a batch back.
        let t = b.alloc(new_task(2000, None), &reused, &spill);
        assert_eq!(reused.load(Relaxed), 1);
        assert_eq!((b.len(), spill.len.load(Relaxed)), (SPILL_BATCH - 1, 0));
        drop(t);
        // The spill's bound: once it is full, a full pool drops the task.
        let (c, full) = (TaskPool::new(), TaskSpill::new());
        let mut kept = 0;
        for i in 0..(SPILL_CAP + 2 * TASK_POOL_CAP) as u64 {
            kept += c.recycle(spent(i), &full) as usize;
        }
        assert_eq!(full.len.load(Relaxed), SPILL_CAP);
        assert_eq!(c.len(), TASK_POOL_CAP);
        assert_eq!(kept, SPILL_CAP + TASK_POOL_CAP);
        c.clear();
        assert_eq!(c.len(), 0);
    }
}
