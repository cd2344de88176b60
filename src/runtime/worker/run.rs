//! Running one fiber: start it (a stack and a coroutine), resume it, and
//! act on how it gave control back (yield, hand-off, reclaim, park,
//! return); the yield fast path resumes the next yielded fiber without a
//! pass through the loop.
//!
//! Rule: the worker holds the fiber's run permission from the queue entry
//! (or the private yield queue) until the fiber parks, is queued again or
//! finishes; the book's "Where a runnable fiber can be", "The yield fast
//! path" and "Parking a *fiber*" (`../README.md`).

use std::sync::atomic::Ordering::*;
use std::sync::Arc;
use std::time::Instant;

use corosensei::{Coroutine, CoroutineResult};

use super::Counters;
use crate::runtime::error::JoinError;
use crate::runtime::task::job::{JobMain, JobRef, Runnable};
use crate::runtime::task::stack::{FiberStack, StackError};
use crate::runtime::task::{NewTask, Suspend, Task, TaskRef};

use super::{WorkerLocal, LONG_SLICE, YIELD_STREAK};

impl WorkerLocal {
    pub(super) fn run_runnable(&self, r: Runnable) {
        match r {
            Runnable::Task(t) => self.run_task(t, false),
            Runnable::Job(j) => self.run_job(j),
        }
    }

    /// A stolen fork-join job: its runner fiber, run. Out of line, so that
    /// `run_runnable` keeps a fiber's path to `run_task` a plain jump.
    #[inline(never)]
    fn run_job(&self, j: JobRef) {
        let t = self.job_task(j);
        self.run_task(t, false)
    }

    /// A fork-join job left this worker's hands (stolen, or its owner
    /// migrated): run it as a fiber of its own.
    pub(super) fn job_task(&self, j: JobRef) -> TaskRef {
        let new = NewTask {
            id: crate::runtime::spawn::next_fiber_id(),
            name: None,
            stack_size: self.shared.default_stack,
            pinned: None,
            placed: self.index,
            reclaim_by: 0,
            spawn_site: None,
            born_ms: self.shared.insight.born_now(),
            entry: Some(Box::new(JobMain::new(j)).into()),
        };
        let t = self.tasks.alloc(new, &self.counters().tasks_reused, &self.shared.task_spill);
        // SAFETY: we consumed the JobRef from a queue.
        unsafe { j.set_runner(t.clone()) };
        Counters::bump(&self.counters().spawned, 1);
        t
    }

    /// Resume `task` until it yields, parks or finishes. `owned`: it comes
    /// from the private yield queue (or the starved queue) and is still
    /// `RUNNING`.
    ///
    /// After a yield, if nothing but the yield queue has work for this
    /// worker, the next yielded fiber is resumed right here, without a pass
    /// through `run` (see `next_after_yield`).
    pub(super) fn run_task(&self, mut task: TaskRef, owned: bool) {
        // The placement probe's estimate (`worker::shared::PublishedLen`).
        self.me().publish_len(self);
        if !owned {
            if !task.transition_to_running() {
                // A surplus entry (a reclaimed child's other entry, see
                // `runtime::task`) or a task cancelled by the drain: dropped
                // unrun. With `decrement_workload` the NLH count of the
                // entry leaves here (`Scheduler::fiber_entered_node`).
                self.drop_surplus(task);
                return;
            }
            let last = task.last_worker();
            if last != self.index {
                task.set_last_worker(self.index);
                // SAFETY: we hold the run permission. A fiber with a
                // coroutine ran before: count the move (dumps).
                if unsafe { (*task.body_ptr()).coro.is_some() } {
                    task.note_migration(self.shared.node_of(last) != self.shared.node_of(self.index));
                }
            }
        }
        // Owned fibers were last run by this worker (the yield and starved
        // queues are private), so `last_worker` is already ours.
        debug_assert_eq!(task.last_worker(), self.index);
        // SAFETY: we hold the run permission (from the queue entry or the
        // private yield queue), so the body is ours.
        if unsafe { (*task.body_ptr()).coro.is_none() } {
            let stack = match self.stacks.borrow_mut().get(task.stack_size, &self.shared.stacks) {
                Ok(s) => s,
                Err(e) => {
                    self.no_stack(task, e);
                    return;
                }
            };
            self.start_fiber(&task, stack);
        }
        let current = self.current.get();
        debug_assert!(!current.is_null(), "run_task outside WorkerLocal::run");
        // SAFETY: set by `run` on this thread, which outlives the loop.
        let current = unsafe { &*current };
        loop {
            // SAFETY: as above, for the task of this iteration (every task
            // here has its permission with us, and has started: only a
            // fiber that ran can yield). Only the `coro` field is borrowed
            // mutably across the resume; the fiber itself reads the
            // disjoint `yielder` field through the raw pointer.
            let coro = unsafe { (*task.body_ptr()).coro.as_mut() }.expect("started above or yielded");
            // The fiber queued behind this one, if a reactor batch chained
            // them: its lines load while this one runs.
            task.prefetch_next();
            let prev = current.load(Relaxed);
            current.store(Arc::as_ptr(&task) as *mut Task, Relaxed);
            let r = coro.resume(());
            current.store(prev, Relaxed);
            let behind = matches!(r, CoroutineResult::Yield(Suspend::Behind));
            self.after_resume(&task, behind);
            match r {
                CoroutineResult::Yield(Suspend::Yield) => {
                    if self.can_share
                        && task.pinned().is_none()
                        && self.shared.has_idle_workers()
                        && self.has_other_work()
                    {
                        self.give_away_yielded(task);
                        return;
                    }
                    // Stays RUNNING: see `next_local`.
                    match self.next_after_yield(task) {
                        Some(next) => task = next,
                        None => return,
                    }
                }
                CoroutineResult::Yield(Suspend::Handoff) => {
                    self.queue_handed_off(task);
                    return;
                }
                CoroutineResult::Yield(Suspend::Reclaim) => {
                    // Stays RUNNING, private to this worker (see
                    // `next_local`): the child in `run_next` runs first.
                    self.resume_after.borrow_mut().push(task);
                    self.first_pending.set(true);
                    return;
                }
                CoroutineResult::Yield(Suspend::Behind) => {
                    self.queue_behind_batch(task);
                    return;
                }
                CoroutineResult::Yield(Suspend::Park) => {
                    self.park_fiber(task);
                    return;
                }
                CoroutineResult::Return(()) => {
                    self.finish_fiber(task);
                    return;
                }
            }
        }
    }

    /// Start the unstarted `task` (whose run permission we hold) on
    /// `stack`: its coroutine, which runs the fiber's entry.
    #[inline]
    fn start_fiber(&self, task: &TaskRef, stack: FiberStack) {
        // SAFETY: we hold the run permission, so the body is ours; the
        // fiber has not started, so nothing else reads it.
        let (slot, entry) = unsafe {
            let body = task.body_ptr();
            (&mut *std::ptr::addr_of_mut!((*body).coro), &mut *std::ptr::addr_of_mut!((*body).entry))
        };
        let main = entry.take().expect("a queued unstarted fiber has its entry");
        task.stack_lo.store(corosensei::stack::Stack::limit(&stack).get(), Relaxed);
        let tp: *const crate::runtime::task::Task = &**task;
        *slot = Some(Coroutine::with_stack(stack, move |y: &crate::runtime::task::FiberYielder, ()| {
            // SAFETY: the coroutine runs only while its task's run
            // permission is held by the resuming worker, and the task
            // outlives its coroutine (the coroutine lives in the task's
            // body). The yielder lives on this stack for the
            // coroutine's whole life.
            unsafe { (*(*tp).body_ptr()).yielder = y };
            main.run();
        }));
    }

    /// No stack for the unstarted `task`: at the fallback path's
    /// budget it waits for one (`starve`) while the worker runs fibers that
    /// have stacks; if the mapping failed, its joiner gets the error.
    #[cold]
    fn no_stack(&self, task: TaskRef, e: StackError) {
        match e {
            StackError::AtBudget => self.starve(task),
            StackError::Os(e) => {
                // SAFETY: we hold the run permission and the fiber has not
                // started: the body is ours.
                let entry = unsafe { &mut (*task.body_ptr()).entry };
                let main = entry.take().expect("a queued unstarted fiber has its entry");
                task.transition_to_done();
                main.fail(JoinError::no_stack(format!("mmap of a {} byte stack failed: {e}", task.stack_size)));
            }
        }
    }

    /// The fiber `task` just gave control back, whatever the reason: hand
    /// on what it left for this moment, check its stack, count the resume.
    /// `behind`: it suspended with `Suspend::Behind`, and its spawn batch
    /// goes onto the deque after it (`queue_behind_batch`), not here.
    #[inline]
    fn after_resume(&self, task: &TaskRef, behind: bool) {
        // A child the fiber placed elsewhere and did not join at once
        // goes to its worker now ("The held-child slot").
        if self.holding.get() {
            self.holding.set(false);
            self.shared.release_held(self.index);
        }
        // Children spawned while the wake slot was occupied go onto
        // the deque now, in spawn order ("Run order", `README.md`).
        if self.has_spawned.get() && !behind {
            self.flush_spawned();
        }
        if self.slab_stacks && !crate::runtime::task::stack::canary_intact(task.stack_lo.load(Relaxed)) {
            crate::runtime::task::overflow::report_canary(task);
        }
        Counters::bump(&self.counters().resumes, 1);
    }

    /// `Suspend::Yield` while somebody is idle and this worker has more to
    /// run than this fiber: requeue it where thieves can see it (the
    /// inbox), not in the private yield queue. Otherwise (not here) it
    /// stays: it is what this worker runs next anyway.
    #[inline]
    fn give_away_yielded(&self, task: TaskRef) {
        // Given away: not while a dump reads it
        // (`runtime::dump::running`).
        self.me().insight.wait_unprotected(&*task);
        task.transition_to_queued_after_yield();
        self.me().inbox.push(Runnable::Task(task));
        self.shared.notify_idle();
    }

    /// `Suspend::Handoff`: the fiber handed this worker to a child (work
    /// first) and is queued again, stealable unless pinned.
    #[inline]
    fn queue_handed_off(&self, task: TaskRef) {
        self.me().insight.wait_unprotected(&*task);
        task.transition_to_queued_after_yield();
        if task.pinned().is_some() {
            // A pinned parent of an eager child: not stealable.
            self.me().pinned_inbox.push(task);
        } else {
            self.deque.push(Runnable::Task(task));
            self.shared.notify_idle();
        }
    }

    /// `Suspend::Park`: register the fiber for the drain, then park it, or
    /// queue it again if a wake-up raced with the suspension.
    #[inline]
    fn park_fiber(&self, task: TaskRef) {
        let shared = &self.shared;
        self.me().insight.wait_unprotected(&*task);
        self.end_yield_streak();
        // SAFETY: still our permission; the fiber is suspended.
        if !task.registered.get() {
            task.registered.set(true);
            shared.registry.insert(&task);
        }
        Counters::bump(&self.counters().parks, 1);
        if task.transition_to_parked() {
            // The parked task owns this reference now; its
            // waker takes it over (`runtime::task`, step 5).
            std::mem::forget(task);
        } else {
            // A wake-up raced with the suspension: run it again,
            // behind the fibers readied before it.
            self.ready.push(Runnable::Task(task));
        }
    }

    /// The fiber returned: its stack goes back to the pool, the task is
    /// `DONE`, leaves the registry and is kept for reuse.
    #[inline]
    fn finish_fiber(&self, task: TaskRef) {
        let shared = &self.shared;
        self.me().insight.wait_unprotected(&*task);
        self.end_yield_streak();
        // SAFETY: still our permission; the fiber has returned.
        let coro = unsafe { task.body() }.coro.take().expect("it just returned");
        let stack = coro.into_stack();
        if self.stacks.borrow_mut().put(stack, &shared.stacks) {
            shared.notify_stack_freed();
        }
        // SAFETY: as above.
        let registered = task.registered.get();
        task.transition_to_done();
        if registered {
            shared.registry.remove(task.id);
        }
        shared.sched.fiber_left_node(shared.node_of(self.index));
        // The last reference if the handle went first.
        self.tasks.recycle(task, &shared.task_spill);
    }

    /// `task` just yielded and stays with this worker (still `RUNNING`).
    /// If what `run` would do next is to take the front of the yield queue
    /// (no shutdown, no timer armed, no reactor poll due, every other queue
    /// of `next_local` empty), return that fiber (or `task` itself when it
    /// is the only one) for `run_task` to resume without leaving; otherwise
    /// queue `task` and return `None`. Fairness is unchanged: the fast path
    /// is taken only when the yield queue is the only source of work, and
    /// the queue stays FIFO. It counts as a loop iteration for the
    /// reactor's busy poll.
    #[inline]
    pub(super) fn next_after_yield(&self, task: TaskRef) -> Option<TaskRef> {
        // `run_next` is only set right before a `Handoff`.
        debug_assert!(self.run_next.borrow().is_none());
        let me = self.me();
        let io_tick = self.io_tick.get() + 1;
        if io_tick >= crate::runtime::io::BUSY_POLL_TICKS
            || self.has_resume_after()
            || me.timers.any()
            || self.starved_len.get() != 0
            || me.wake_slot.is_occupied()
            || !self.deque.is_empty()
            || !self.ready.is_empty()
            || !me.pinned_inbox.is_empty()
            || !me.inbox.is_empty()
            || !self.shared.io_ready.is_empty()
            || self.shared.shutdown.load(Acquire)
        {
            self.yielded.push_back(task);
            return None;
        }
        self.io_tick.set(io_tick);
        Some(self.yielded.rotate(task))
    }

    /// This worker has runnable fibers besides the one that just yielded.
    /// Fibers in the private yield queue count only when the recent yields
    /// came after long slices (on average `LONG_SLICE` or more over the
    /// last `YIELD_STREAK` yields without a park or a finish, timed once
    /// per streak): fibers that yield to each other while handing work back
    /// and forth (a channel's receive spin) stay on one core, fibers that
    /// compute and yield spread to idle workers.
    #[inline]
    pub(super) fn has_other_work(&self) -> bool {
        let me = self.me();
        if !self.deque.is_empty()
            || !self.ready.is_empty()
            || me.wake_slot.is_occupied()
            || !me.inbox.is_empty()
            || !self.shared.io_ready.is_empty()
        {
            return true;
        }
        let streak = self.yield_streak.get() + 1;
        if streak == 1 {
            self.streak_start.set(Instant::now());
        }
        if streak >= YIELD_STREAK {
            let spent = self.streak_start.get().elapsed();
            self.long_slices.set(spent >= LONG_SLICE * YIELD_STREAK);
            self.yield_streak.set(0);
        } else {
            self.yield_streak.set(streak);
        }
        self.long_slices.get() && !self.yielded.is_empty()
    }

    /// A park or a finish ends a streak of yields.
    #[inline]
    pub(super) fn end_yield_streak(&self) {
        self.yield_streak.set(0);
        self.long_slices.set(false);
    }
}
