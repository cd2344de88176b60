//! Fork-join jobs that live on the forking fiber's stack.
//!
//! `fiber::join(a, b)` does not allocate a fiber for `b`. It builds a
//! `StackJob` on the caller's stack and pushes a `JobRef` to it onto the
//! worker's deque, next to ordinary fibers (`Runnable`). Then it runs `a`.
//!
//! * If nobody stole the job, the caller pops it back and runs `b` inline,
//!   on its own stack: no allocation, no context switch (the common case).
//! * If a thief took it, the thief's worker wraps it in a fiber
//!   (`job_task`), which runs `b` on a fresh stack and then sets the job's
//!   latch. The caller parks on the latch meanwhile.
//!
//! # Lifetime argument
//!
//! The `StackJob` lives in `join`'s frame, so that frame must not be left
//! while anyone may still touch the job. `join` leaves only after (a) it
//! popped the job back itself, or (b) the latch reached its final state,
//! which the executor writes as its very last access to the job (see
//! `Latch::set`). A `JobRef` in a queue is the only other way to reach the
//! job, and it is consumed exactly once: popped by its owner, run by a
//! thief's `job_task`, or cancelled by the shutdown drain (which also sets
//! the latch).
//!
//! # Cancelling a stolen job
//!
//! An owner cancelled while it waits for a stolen job passes the
//! cancellation on to the job's runner fiber, waits for it, and then
//! unwinds (`runtime::cancel`, step 5). The runner may not exist yet (the
//! job waits in the thief's queues), so the hand-off goes through the
//! `runner` lock: the owner sets `cancel` and reads the runner under it,
//! the thief's `job_task` stores the runner and reads `cancel` under it.
//! Whichever comes second sees the other: the owner cancels the runner it
//! found (`cancel::request`), or the thief sets `CANCEL` on its new runner
//! before it first runs, and that runner then drops the closure unrun
//! (loom model `join_cancel_vs_steal`).

use crate::loom::sync::Mutex;
use std::cell::UnsafeCell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::NonNull;

use crate::loom::cell::UnsafeCell as TrackedUnsafeCell;
use crate::loom::sync::atomic::{AtomicU8, Ordering::*};

use crate::runtime::task::packet::FiberMain;
use crate::runtime::task::up::{self, park, JoinError, Waiter};
use crate::runtime::task::TaskRef;

/// What the deques and inboxes hold.
pub(crate) enum Runnable {
    /// A fiber.
    Task(TaskRef),
    /// A fork-join job on some fiber's stack.
    Job(JobRef),
}

/// A pointer to a `StackJob`'s header.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(crate) struct JobRef(NonNull<JobHeader>);

// SAFETY: a `JobRef` is moved between threads through the queues. The job
// it points to stays alive until its latch is set (module docs), the
// closure inside is `Send` (`join` requires it), and the job is executed or
// cancelled by exactly one party: whoever consumes the `JobRef`.
unsafe impl Send for JobRef {}

/// Latch states. The owner waits for `DONE` (if it never registered a
/// waiter) or `WOKEN` (if it did).
const PENDING: u8 = 0;
/// The owner stored a waiter in the slot and will park.
const SLEEPING: u8 = 1;
/// The job finished; the owner had not registered.
const DONE: u8 = 2;
/// The job finished and the setter took the waiter out of the slot.
const WOKEN: u8 = 3;

pub(crate) struct Latch {
    state: AtomicU8,
    /// Written by the owner only while `PENDING`; read by the setter only
    /// after it swapped out `SLEEPING`.
    waiter: TrackedUnsafeCell<Option<Waiter>>,
}

impl Latch {
    fn new() -> Latch {
        Latch { state: AtomicU8::new(PENDING), waiter: TrackedUnsafeCell::new(None) }
    }

    /// Mark the job finished and wake its owner.
    ///
    /// # Safety
    /// `latch` points to a live latch; this is the setter's last access to
    /// the job: once the state leaves `PENDING`/`SLEEPING` the owner may
    /// free it.
    unsafe fn set(latch: *const Latch) {
        // SAFETY: live until our final state store (caller's contract).
        let prev = unsafe { (*latch).state.swap(DONE, AcqRel) };
        if prev == SLEEPING {
            // The owner registered a waiter and waits for WOKEN, so the
            // latch is still alive: take the waiter out, then release.
            // SAFETY: the owner wrote the slot before its CAS to SLEEPING
            // (which our swap acquired) and no longer touches it.
            let w = unsafe { (*latch).waiter.with_mut(|p| (*p).take()) };
            // SAFETY: still alive: the owner waits for this store.
            unsafe { (*latch).state.store(WOKEN, Release) };
            if let Some(w) = w {
                w.wake();
            }
        }
    }

    fn probe(&self) -> bool {
        matches!(self.state.load(Acquire), DONE | WOKEN)
    }

    /// Owner: block until the job finished and the setter is done with it;
    /// `before_park` runs before every park.
    fn wait(&self, mut before_park: impl FnMut()) {
        let mut registered = false;
        loop {
            match self.state.load(Acquire) {
                WOKEN => return,
                DONE if !registered => return,
                PENDING => {
                    // SAFETY: while PENDING only the owner touches the slot.
                    let me = Waiter::current();
                    // SAFETY: as above.
                    self.waiter.with_mut(|p| unsafe { *p = Some(me) });
                    if self.state.compare_exchange(PENDING, SLEEPING, AcqRel, Acquire).is_err() {
                        // Finished meanwhile (DONE): the setter saw PENDING
                        // and will not read the slot. Take our waiter back.
                        // SAFETY: as above; nobody else reads it now.
                        drop(self.waiter.with_mut(|p| unsafe { (*p).take() }));
                        return;
                    }
                    registered = true;
                }
                _ => {}
            }
            before_park();
            park();
            if up::current_is_cancelling() && !self.probe() {
                // Being destroyed by the shutdown drain: nobody will set
                // the latch while we cannot park; the caller cancels the
                // runner first (see `join`), so this does not happen.
                return;
            }
        }
    }
}

/// Header shared by all `StackJob`s (first field, `repr(C)`).
#[repr(C)]
pub(crate) struct JobHeader {
    execute: unsafe fn(NonNull<JobHeader>),
    cancel: unsafe fn(NonNull<JobHeader>),
    latch: Latch,
    /// The fiber a thief made to run this job (for the shutdown drain and
    /// a cancelled owner), and the owner's cancellation (module docs).
    runner: Mutex<Runner>,
}

/// What `JobHeader::runner` guards.
#[derive(Default)]
struct Runner {
    task: Option<TaskRef>,
    /// The owner asked to cancel the job.
    cancel: bool,
}

impl JobRef {
    /// Run the job to completion on the current stack and set its latch.
    ///
    /// # Safety
    /// The caller consumed this `JobRef` from a queue (it is the only one
    /// allowed to execute or cancel it).
    pub(crate) unsafe fn execute(self) {
        // SAFETY: the header is alive until the latch is set; `execute`
        // is the job's own function.
        unsafe { ((*self.0.as_ptr()).execute)(self.0) }
    }

    /// Drop the closure without running it; the owner gets
    /// `JoinError::cancelled`.
    ///
    /// # Safety
    /// As for `execute`.
    pub(crate) unsafe fn cancel(self) {
        // SAFETY: as above.
        unsafe { ((*self.0.as_ptr()).cancel)(self.0) }
    }

    /// Record the fiber that runs this job (before it runs). If the owner
    /// cancelled the job already, `t` gets `CANCEL` (module docs,
    /// "Cancelling a stolen job"), so it drops the closure unrun.
    ///
    /// # Safety
    /// As for `execute`.
    pub(crate) unsafe fn set_runner(self, t: TaskRef) {
        // SAFETY: alive until the latch is set, which happens after this.
        let h = unsafe { &*self.0.as_ptr() };
        let mut g = h.runner.lock().unwrap_or_else(|e| e.into_inner());
        if g.cancel {
            t.flags_or(crate::runtime::task::CANCEL);
        }
        g.task = Some(t);
    }
}

/// A job on the stack of the fiber that calls `join`.
#[repr(C)]
pub(crate) struct StackJob<F, R> {
    header: JobHeader,
    f: UnsafeCell<Option<F>>,
    result: TrackedUnsafeCell<Option<Result<R, JoinError>>>,
}

impl<F, R> StackJob<F, R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    pub(crate) fn new(f: F) -> StackJob<F, R> {
        StackJob {
            header: JobHeader {
                execute: Self::execute_raw,
                cancel: Self::cancel_raw,
                latch: Latch::new(),
                runner: Mutex::new(Runner::default()),
            },
            f: UnsafeCell::new(Some(f)),
            result: TrackedUnsafeCell::new(None),
        }
    }

    pub(crate) fn as_job_ref(&self) -> JobRef {
        JobRef(NonNull::from(&self.header))
    }

    /// Run the closure inline (the owner popped its own job back).
    #[inline]
    pub(crate) fn run_inline(&self) -> Result<R, JoinError> {
        // SAFETY: the owner consumed the only JobRef, so nobody else
        // touches the job.
        let f = unsafe { (*self.f.get()).take() }.expect("job runs once");
        catch_unwind(AssertUnwindSafe(f)).map_err(JoinError::panicked)
    }

    /// Wait for a stolen job and take its result.
    #[cfg_attr(not(loom), allow(dead_code))]
    pub(crate) fn wait(&self) -> Result<R, JoinError> {
        self.wait_or_cancel(|| false, |_| {}).0
    }

    /// Wait for a stolen job and take its result; before each park, ask
    /// `requested` whether the owner is cancelled, and the first time it
    /// is, cancel the job (module docs, "Cancelling a stolen job"):
    /// `cancel_runner` gets the runner fiber if it exists already. Also
    /// returns whether the job was cancelled so.
    pub(crate) fn wait_or_cancel(
        &self,
        requested: impl Fn() -> bool,
        cancel_runner: impl FnOnce(TaskRef),
    ) -> (Result<R, JoinError>, bool) {
        let mut cancel_runner = Some(cancel_runner);
        self.header.latch.wait(|| {
            if cancel_runner.is_some() && requested() {
                let runner = {
                    let mut g = self.header.runner.lock().unwrap_or_else(|e| e.into_inner());
                    g.cancel = true;
                    g.task.clone()
                };
                let f = cancel_runner.take().expect("checked above");
                if let Some(t) = runner {
                    f(t);
                }
            }
        });
        // SAFETY: the latch is set: the executor wrote the result before
        // and no longer touches the job.
        let r = self.result.with_mut(|p| unsafe { (*p).take() }).unwrap_or_else(|| Err(JoinError::cancelled()));
        (r, cancel_runner.is_none())
    }

    /// loom models only: the owner is about to free the job (it observed
    /// the final latch state). Claims exclusive access to every part the
    /// executor touches, so loom reports any executor access that is not
    /// ordered before this point, and any that comes after it.
    #[cfg(loom)]
    pub(crate) fn assert_free(&mut self) {
        self.header.latch.state.with_mut(|_| ());
        self.header.latch.waiter.with_mut(|_| ());
        self.result.with_mut(|_| ());
    }

    /// Nothing left to drop (after `run_inline` by the owner).
    pub(crate) fn is_empty(&self) -> bool {
        // SAFETY: as for `clear` (debug check by the owner).
        let f = unsafe { (*self.f.get()).is_none() };
        // SAFETY: as above.
        let r = self.result.with_mut(|p| unsafe { (*p).is_none() });
        // SAFETY: as above.
        let w = self.header.latch.waiter.with_mut(|p| unsafe { (*p).is_none() });
        let t = self.header.runner.lock().unwrap_or_else(|e| e.into_inner()).task.is_none();
        f && r && w && t
    }

    unsafe fn execute_raw(h: NonNull<JobHeader>) {
        let this = h.cast::<Self>().as_ptr();
        // SAFETY: the consumer of the JobRef has exclusive access to the
        // closure and the result until it sets the latch.
        let f = unsafe { (*(*this).f.get()).take() }.expect("job runs once");
        let r = catch_unwind(AssertUnwindSafe(f));
        let r = match r {
            Ok(v) => Ok(v),
            Err(p) if up::current_is_cancelling() => {
                // Forced unwind of the runner (shutdown): let it through;
                // `JobMain`'s drop cancels the job.
                std::panic::resume_unwind(p)
            }
            // Unwound by a cancellation its owner passed on (module docs,
            // "Cancelling a stolen job"): a cancellation, not a panic.
            Err(p) if p.is::<up::Cancelled>() => Err(JoinError::cancelled_by_handle()),
            Err(p) => Err(JoinError::panicked(p)),
        };
        // SAFETY: as above; then the latch is our last access.
        unsafe {
            (*this).result.with_mut(|p| *p = Some(r));
            Latch::set(std::ptr::addr_of!((*this).header.latch));
        }
    }

    unsafe fn cancel_raw(h: NonNull<JobHeader>) {
        let this = h.cast::<Self>().as_ptr();
        // SAFETY: as in `execute_raw`.
        unsafe {
            drop((*(*this).f.get()).take());
            (*this).result.with_mut(|p| {
                if (*p).is_none() {
                    *p = Some(Err(JoinError::cancelled()));
                }
            });
            Latch::set(std::ptr::addr_of!((*this).header.latch));
        }
    }
}

/// What `fiber::join` does with its own job besides running it: probe it
/// and empty it (object-safe, for `join`'s unwinding guard).
pub(crate) trait OwnedJob {
    /// The fiber running this job on a thief, if any (shutdown drain).
    fn runner(&self) -> Option<TaskRef>;
    /// The latch is final: the executor no longer touches the job.
    fn is_done(&self) -> bool;
    /// Drop what the job still holds (see `StackJob`'s impl).
    fn clear(&self);
}

impl<F, R> OwnedJob for StackJob<F, R>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    fn runner(&self) -> Option<TaskRef> {
        self.header.runner.lock().unwrap_or_else(|e| e.into_inner()).task.take()
    }

    fn is_done(&self) -> bool {
        self.header.latch.probe()
    }

    /// Drop what the job still holds (its closure if it never ran, a
    /// result nobody took, a registered waiter, the runner reference),
    /// through shared access. `join` keeps its job in `ManuallyDrop` and
    /// calls this once the job is settled, on every path but the inline one
    /// (where `is_empty` holds).
    fn clear(&self) {
        // SAFETY: called by the owner where it used to drop the job: once
        // the latch is final (no executor touches the job any more), or on
        // the unwinding path right after `settle_job`, so the owner has the
        // same exclusive access to every part that a drop had.
        unsafe { drop((*self.f.get()).take()) };
        // SAFETY: as above.
        drop(self.result.with_mut(|p| unsafe { (*p).take() }));
        // SAFETY: as above.
        drop(self.header.latch.waiter.with_mut(|p| unsafe { (*p).take() }));
        drop(self.runner());
    }
}

/// The body of a fiber that runs a stolen job.
pub(crate) struct JobMain {
    job: JobRef,
    finished: bool,
}

impl JobMain {
    pub(crate) fn new(job: JobRef) -> JobMain {
        JobMain { job, finished: false }
    }
}

impl FiberMain for JobMain {
    fn run(mut self: Box<Self>) {
        if up::cancel_requested() {
            // The owner cancelled the job before this runner first ran
            // (`set_runner`): drop the closure unrun, as a spawned fiber
            // cancelled before it ran does.
            // SAFETY: the worker consumed the JobRef and handed it to us.
            unsafe { self.job.cancel() };
        } else {
            // SAFETY: as above.
            unsafe { self.job.execute() };
        }
        up::note_completed();
        // The owner may free the job from now on: never touch it again.
        self.finished = true;
    }
    fn fail(mut self: Box<Self>, _e: JoinError) {
        // SAFETY: as in `run`; the job never started.
        unsafe { self.job.cancel() };
        self.finished = true;
    }
}

impl Drop for JobMain {
    fn drop(&mut self) {
        if !self.finished {
            // Dropped unrun, or unwound by the shutdown drain mid-run.
            // SAFETY: the job's latch is not set yet, so it is alive.
            unsafe { self.job.cancel() };
        }
    }
}
