//! The fiber control block (`Task`) and its run-permission protocol.
//!
//! # The run permission
//!
//! Exactly one party at a time may touch a task's body (its closure or its
//! suspended coroutine): the holder of the *run permission*. Queue entries
//! (`TaskRef`s in the deques, inboxes, wake slots and `run_next`) are
//! *claims* on it: a task that is `QUEUED` has at least one entry, and the
//! permission is created or consumed only by transitions of `Task::state`:
//!
//! 1. `spawn` creates the task in `QUEUED | FRESH` and pushes it to one
//!    queue: that entry is its claim.
//! 2. A worker that pops an entry moves `QUEUED -> RUNNING` with a CAS
//!    (clearing `FRESH`): the winner holds the permission. If the CAS
//!    fails the entry was a *surplus* entry (a reclaimed child's, below) or
//!    the task was cancelled during shutdown (`DONE`): the entry is dropped
//!    without touching the body.
//! 3. While `RUNNING`, only the resuming worker (and the fiber itself, on its
//!    own stack) touches the body.
//! 4. On `Suspend::Yield` the worker stores `QUEUED` and pushes the task back:
//!    the new entry is a claim like the first.
//! 5. On `Suspend::Park` the worker CASes `RUNNING -> PARKED` (Release). From
//!    then on *nobody* holds the permission; a waker re-creates it with a CAS
//!    `PARKED -> QUEUED` (AcqRel) and pushes the task to a queue. If the
//!    worker's CAS fails, a wake-up arrived while the fiber was still running
//!    (`NOTIFIED` bit set): the worker consumes the token and requeues.
//!    **A parked task owns one strong reference to itself**: the worker's
//!    queue reference, which it forgets instead of dropping when its CAS
//!    succeeds. Whoever moves the task out of `PARKED` takes that reference
//!    over: a waker that won `PARKED -> QUEUED` pushes it (a wait-queue
//!    grant, `sync::queue::Waker`, which holds only a pointer), or releases
//!    it because it pushes its own (`Shared::wake`); the drain's
//!    `PARKED -> DONE` releases it (`runtime::destroy`). So a park/wake
//!    through a wait queue counts no reference.
//! 6. When the coroutine returns, the worker stores `DONE`; the body is never
//!    touched again except to drop it by the last `TaskRef`, or to write a
//!    new task over it when that last reference goes to a worker's task
//!    pool (`runtime::task::pool`: only a unique, spent task, whose allocation
//!    then holds a new fiber with a new id).
//! 7. During shutdown the single draining thread may CAS `QUEUED|PARKED ->
//!    DONE` and destroy the body; whoever else holds an entry sees `DONE`.
//!
//! The `NOTIFIED` bit is a wake-up token with `std::thread::park` semantics:
//! `unpark` before `park` makes that `park` return at once.
//!
//! # Reclaim: a parent joining its unstarted child runs it
//!
//! `JoinHandle::join` (and a scope's end) by the fiber that spawned the
//! child, when placement sent the child to *another* worker of the
//! spawner's NUMA node and it is still `FRESH` (nobody has run it), pushes
//! a **second entry** for the same task into its own worker's `run_next`
//! slot and suspends with `Suspend::Reclaim`: the worker keeps the parent
//! `RUNNING` on its private `resume_after` stack (a yielded fiber's state:
//! nobody else can reach it, a waker only sets `NOTIFIED`), runs the child
//! next and resumes the parent right after the child's first suspension or
//! its end, before anything else. It takes no permission itself
//! and touches no body: the two entries race for the one `QUEUED -> RUNNING`
//! CAS of step 2 like any two poppers, and the loser's entry is surplus. The
//! invariant the protocol needs is only "the permission is held by the
//! winner of a CAS out of `QUEUED` (or `PARKED`), and nobody else": a task
//! may have more entries than permissions, never the reverse. A surplus
//! entry popped later finds the task `RUNNING`, `PARKED` or `DONE` and is
//! dropped; if it finds the task `QUEUED` again (it ran, yielded or was
//! woken, and its new entry is still queued), it wins the CAS as a claim of
//! that episode and the other entry becomes the surplus one. Every
//! successful CAS consumes one entry per `QUEUED` episode, so each reclaim
//! produces exactly one failed-CAS drop (plus one per shutdown
//! cancellation of a queued task). The loom model `reclaim_vs_pop_vs_cancel`
//! runs this code (`tests/loom.rs`).
//!
//! A child queued on its spawner's own worker, where no other worker takes
//! work, is not reclaimed: the spawner waits for it with `BEHIND` set and
//! is woken behind its unstarted siblings (`runtime/README.md`, "Run
//! order", 6); no entry is added. Where other workers take work, a join
//! runs such a child if it is the next one its worker would start: it is
//! taken out of the wake slot (`WakeSlot::take_if`, as from the held-child
//! slot below) or popped off the top of the deque by the owner, and put
//! into `run_next` as its one entry; otherwise the spawner waits ("Run
//! order", 5).
//!
//! A child that has not left its spawner's worker yet (the held-child slot,
//! `runtime/README.md`: held there until the spawner gives control back) is
//! taken out of that slot by the join instead (`WakeSlot::take_if`) and
//! put into `run_next` as its one entry: no second entry, no surplus.
//!
//! The same `Task` (not a copy) runs, so its id, name, stack size, packet
//! and every `TaskRef` held elsewhere (the join handle, a scope's list, the
//! deadlock detector, the parked registry) stay right.

pub(crate) mod job;
pub(crate) mod join;
pub(crate) mod locals;
pub(crate) mod overflow;
pub(crate) mod packet;
pub(crate) mod pool;
pub(crate) mod stack;
pub(crate) mod up;

use std::cell::{Cell, UnsafeCell};
use std::panic::Location;
use std::sync::atomic::{AtomicPtr, AtomicU32, AtomicU64, AtomicU8, AtomicUsize, Ordering::*};

use crate::loom::sync::atomic::AtomicU8 as StateCell;
use crate::loom::sync::atomic::AtomicU8 as FlagsCell;
use std::sync::Arc;

use corosensei::{Coroutine, Yielder};

/// Why a fiber hands control back to its worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Suspend {
    /// Still runnable: requeue at the back of the worker's yield queue.
    Yield,
    /// Waiting for an `unpark`.
    Park,
    /// Work-first spawn: run the child the fiber left in the worker's
    /// `run_next` slot now, and leave this fiber stealable on the deque.
    Handoff,
    /// Reclaim (module docs): run the child the fiber left in `run_next`
    /// now, then resume this fiber on the same worker. The fiber stays
    /// `RUNNING` on the worker's private `resume_after` stack meanwhile
    /// (like the yield queue: only that worker can reach it).
    Reclaim,
    /// A join loop's first join, right after the fiber spawned several
    /// children onto this worker (`runtime::spawn::reclaim`): queue this fiber on
    /// the worker's deque under those children, which start first, in
    /// spawn order; it runs again after them and finds them finished, one
    /// suspension for the whole loop instead of one per child.
    Behind,
}

pub(crate) type FiberCoroutine = Coroutine<(), Suspend, (), crate::runtime::task::stack::FiberStack>;
pub(crate) type FiberYielder = Yielder<(), Suspend>;
pub(crate) use crate::runtime::task::packet::Entry;
use crate::runtime::task::packet::MainSlot;
pub(crate) type TaskRef = Arc<Task>;

/// Lifecycle values (low two bits of `state`).
pub(crate) const QUEUED: u8 = 0;
pub(crate) const RUNNING: u8 = 1;
pub(crate) const PARKED: u8 = 2;
pub(crate) const DONE: u8 = 3;
const LIFECYCLE: u8 = 0b11;
/// Wake-up token (bit 2).
pub(crate) const NOTIFIED: u8 = 0b100;
/// Never run yet (bit 3): set at spawn, cleared by the first
/// `QUEUED -> RUNNING` (module docs, "Reclaim").
pub(crate) const FRESH: u8 = 0b1000;

/// `Task::flags`: the shutdown drain destroys the task.
pub(crate) const DRAINING: u8 = 0b1;
/// `Task::flags`: a cancellation was requested (`runtime::cancel`).
pub(crate) const CANCEL: u8 = 0b10;
/// `Task::flags`: the `fiber::park` token (`runtime::unpark`).
pub(crate) const UNPARK: u8 = 0b100;
/// `Task::flags`: the fiber is inside `fiber::park` / `park_timeout`, from
/// its entry to its return; only then does an `unpark` wake it
/// (`runtime::unpark`, "The token").
pub(crate) const PARKING: u8 = 0b1000_0000;
/// `Task::flags`: the fiber waits for a child it queued on its own worker
/// (set by `runtime::spawn::reclaim` where no other worker takes work); woken on
/// that worker, it goes behind its unstarted children
/// (`WorkerLocal::queue_behind_children`, which clears it). Left set when
/// the wait ended otherwise, it at most puts the fiber behind its own
/// unstarted children at a later wake-up on that worker.
pub(crate) const BEHIND: u8 = 0b1000;

pub(crate) struct Body {
    /// The user closure until the fiber first runs.
    pub(crate) entry: Option<Entry>,
    /// The coroutine once the fiber has run (owns the stack).
    pub(crate) coro: Option<FiberCoroutine>,
    /// Yielder of the running coroutine (points into its stack).
    pub(crate) yielder: *const FiberYielder,
}

/// `Task::pin` of a fiber not pinned to a worker.
const NOT_PINNED: u32 = u32::MAX;

/// `Task::pin` for `NewTask::pinned`. Worker indexes are below the
/// builder's worker limit (`BuildErrorKind::WorkerLimit`: the larger of
/// 1,024 and the machine's PUs), so they fit, far below `NOT_PINNED`.
fn pin_of(pinned: Option<usize>) -> u32 {
    match pinned {
        None => NOT_PINNED,
        Some(w) => {
            debug_assert!(w < NOT_PINNED as usize);
            w as u32
        }
    }
}

/// Prefetch `n` cache lines from `addr` (a hint: any address, mapped or not).
#[inline(always)]
fn prefetch_lines(addr: usize, n: usize) {
    #[cfg(target_arch = "x86_64")]
    for i in 0..n {
        // SAFETY: a prefetch reads nothing the program sees and never
        // faults (an unmapped address is dropped), so any address is fine.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                addr.wrapping_add(i * 64) as *const i8
            )
        };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (addr, n);
}

/// Prefetch the three lines from a task's address and, if `sp` is not 0,
/// the saved registers and return address below that resume point and the
/// frames above it that the resumed calls return through. Addresses only:
/// nothing is dereferenced. The task's field order is rustc's, so which
/// fields those lines hold is not fixed (today the hints, the join packet
/// and the id; the state and the body lie further in): what this hides is
/// mainly the stack (BENCHMARKS.md, "Servers, part 5", on putting the hot
/// fields first).
#[inline]
fn prefetch_task(task: usize, sp: usize) {
    prefetch_lines(task, 3);
    if sp != 0 {
        prefetch_lines(sp.wrapping_sub(128), 12);
    }
}

/// A fiber: identity, scheduling state and body.
pub(crate) struct Task {
    pub(crate) id: u64,
    pub(crate) name: Option<Arc<str>>,
    pub(crate) stack_size: usize,
    /// The worker it never migrates off (`Task::pinned`), or `NOT_PINNED`;
    /// 32 bits, so the task keeps within its documented size.
    pin: u32,
    /// Id of the fiber that may reclaim this one while it is `FRESH` (its
    /// spawner, when placement sent it to another worker of the spawner's
    /// node; module docs, "Reclaim"), or 0 (fiber ids start at 1).
    pub(crate) reclaim_by: u64,
    /// Lifecycle and token (module docs); a loom atomic under `cfg(loom)`.
    state: StateCell,
    /// Requests and marks read on every suspension: `DRAINING` (set by the
    /// shutdown drain while it destroys this task: the fiber must not
    /// suspend any more), `CANCEL` (`JoinHandle::cancel`, `runtime::cancel`),
    /// `UNPARK` (the `fiber::park` token, `runtime::unpark`), `PARKING`
    /// (inside `fiber::park`). Other threads only `fetch_or` `CANCEL` and
    /// `UNPARK`; the fiber sets and clears `PARKING` and clears `UNPARK`.
    /// Kept in one byte so a yield reads one flag word for all of them.
    /// A loom atomic under `cfg(loom)` (models `cancel_flag_outlives_its_wake_up`,
    /// `unpark_vs_park`).
    flags: FlagsCell,
    /// Depth of the fiber's `fiber::shield` sections (`cancel::ShieldGuard`):
    /// cancellation points do not unwind while it is above zero. Only the
    /// fiber touches it.
    pub(crate) shield: Cell<u16>,
    /// The fiber's fiber-local values (`locals`): only the fiber touches
    /// them, or whoever holds the run permission once it ended.
    pub(crate) locals: locals::LocalSlot,
    /// Lowest address of the fiber's stack mapping (its guard page starts
    /// here), 0 while it has no stack. Read by the overflow handler.
    pub(crate) stack_lo: AtomicUsize,
    /// Where the fiber's resumption starts reading its stack (an address
    /// in its frame at its last suspension), as an offset from `stack_lo`;
    /// written by the fiber as it suspends, 0 before the first. A hint.
    resume_at: AtomicU32,
    /// What to prefetch when this fiber is resumed: the task and the
    /// resume point of the fiber queued right behind it
    /// (`Task::chain_prefetch`), or 0. Hints: never dereferenced.
    next_hint: [AtomicUsize; 2],
    /// Worker that last ran the fiber; until it first runs, the worker
    /// placement sent it to. Written (relaxed) by the holder of
    /// the run permission when it resumes the fiber; read by a waker after
    /// it won `PARKED -> QUEUED` (whose acquire orders the write before),
    /// and, as a hint only, by a reclaiming parent (`runtime::spawn::reclaim`).
    /// Not in the body: the shutdown drain may take the permission back
    /// from a `QUEUED` task (`transition_to_cancelled`) and destroy the
    /// body while that waker is still looking for a queue (found by the
    /// loom model `cancel_vs_wake`).
    last_worker: AtomicUsize,
    /// What the fiber is parked on (`wait_kind::*`), for the deadlock
    /// report. Written by the fiber itself around a park, read by the
    /// `block_on` thread; relaxed, since the report only reads it after
    /// every worker has been seen asleep twice.
    pub(crate) wait_kind: AtomicU8,
    /// The object waited on: its address, or a fiber id for joins.
    pub(crate) wait_obj: AtomicU64,
    /// The user call that waits (`#[track_caller]` through the public
    /// waiting functions), for dumps: written by the fiber with
    /// `wait_kind`, read (relaxed) by a dump. Null: none recorded.
    wait_site: AtomicPtr<Location<'static>>,
    /// The user call that spawned the fiber (`None`: the runtime did).
    pub(crate) spawn_site: Option<&'static Location<'static>>,
    /// The runtime's coarse clock at spawn (`runtime::dump::Insight`;
    /// 0: the clock was not running), for the fiber's age in dumps.
    pub(crate) born_ms: u32,
    /// Moves to another worker when resumed: to one of the same node in
    /// the low 16 bits, of another node in the high 16, each saturating.
    /// Written only by the holder of the run permission; read by dumps.
    migrations: AtomicU32,
    /// "Granted" flag of the wait queue entry this fiber waits on
    /// (`sync::queue`): cleared by the fiber when it queues itself, set by
    /// the granter, both under that queue's lock; read by the fiber.
    /// A loom atomic under `cfg(loom)` (model `handoff_grant_vs_leave`).
    pub(crate) wait_signalled: crate::loom::sync::atomic::AtomicBool,
    /// Generation of the fiber's timed wait: a worker timer armed for this
    /// task records it, and the fiber bumps it when the wait ends
    /// ([`Task::timed_wait_over`]), so a timer whose wait was ended by
    /// something else (readiness, a send, a set event) is stale: it wakes
    /// nobody when due, and the worker drops it when it compacts its heap.
    /// Written only by the fiber itself, read by the worker holding the
    /// timer; relaxed: a timer that reads an old value wakes the task once
    /// spuriously, which every park already tolerates.
    timer_gen: AtomicU64,
    /// In the runtime's parked-task registry. Read and written only by the
    /// holder of the run permission, as the body is.
    pub(crate) registered: Cell<bool>,
    body: UnsafeCell<Body>,
    /// A spawned fiber's closure and join packet when they fit
    /// (`runtime::task::packet`, "In the task"). Declared after `body`, so it is
    /// dropped after it: an unrun entry or a suspended coroutine dropped
    /// with the task still completes the packet in here.
    pub(crate) main: MainSlot,
}

/// Values of `Task::wait_kind`.
pub(crate) mod wait_kind {
    pub(crate) const NONE: u8 = 0;
    pub(crate) const JOIN: u8 = 1;
    pub(crate) const MUTEX: u8 = 2;
    pub(crate) const CONDVAR: u8 = 3;
    pub(crate) const RWLOCK_READ: u8 = 4;
    pub(crate) const RWLOCK_WRITE: u8 = 5;
    pub(crate) const SEMAPHORE: u8 = 6;
    pub(crate) const BARRIER: u8 = 7;
    pub(crate) const WAITGROUP: u8 = 8;
    pub(crate) const EVENT: u8 = 9;
    pub(crate) const CHAN_RECV: u8 = 10;
    pub(crate) const CHAN_SEND: u8 = 11;
    pub(crate) const JOIN_ANY: u8 = 12;
    pub(crate) const SCOPE: u8 = 13;
    /// Socket readiness (`crate::net`): woken from outside the runtime (a
    /// peer), so never part of a deadlock; `describe` gives `None`.
    pub(crate) const IO: u8 = 14;
    /// A `spawn_blocking` call on a helper thread: same as `IO`.
    pub(crate) const BLOCKING: u8 = 15;
    pub(crate) const ONESHOT: u8 = 16;
    pub(crate) const AUTO_EVENT: u8 = 17;
    pub(crate) const JOIN_SET: u8 = 18;
    /// A blocking `select` (`obj`: its first channel; 0 for `select! {}`).
    pub(crate) const SELECT: u8 = 19;
    /// `fiber::sleep` (the object is the deadline, `runtime::dump::deadline_code`):
    /// a timer is armed, so never part of a deadlock.
    pub(crate) const SLEEP: u8 = 20;
    /// Socket readiness for writing (`IO` is for reading): same as `IO`.
    pub(crate) const IO_WRITE: u8 = 21;
    /// `fiber::park` (woken by a `Fiber::unpark`).
    pub(crate) const PARK: u8 = 22;
    /// `fiber::block_on_future`: woken by the future's waker, which an
    /// outside party (another executor, a reactor) may hold: as `IO`.
    pub(crate) const FUTURE: u8 = 23;

    /// Human-readable description (`obj` is an address or a fiber id).
    pub(crate) fn describe(kind: u8, obj: u64) -> Option<String> {
        Some(match kind {
            JOIN => format!("join of fiber {obj}"),
            JOIN_ANY => format!("when_any over fibers (first: fiber {obj})"),
            SCOPE => format!("scope end, joining fiber {obj}"),
            MUTEX => format!("Mutex lock {obj:#x}"),
            CONDVAR => format!("Condvar wait {obj:#x}"),
            RWLOCK_READ => format!("RwLock read {obj:#x}"),
            RWLOCK_WRITE => format!("RwLock write {obj:#x}"),
            SEMAPHORE => format!("Semaphore acquire {obj:#x}"),
            BARRIER => format!("Barrier wait {obj:#x}"),
            WAITGROUP => format!("WaitGroup wait {obj:#x}"),
            EVENT => format!("Event wait {obj:#x}"),
            ONESHOT => format!("oneshot Future wait {obj:#x}"),
            AUTO_EVENT => format!("AutoResetEvent wait {obj:#x}"),
            JOIN_SET => format!("JoinSet::join_next {obj:#x}"),
            PARK => "fiber::park".to_string(),
            CHAN_RECV => format!("channel receive {obj:#x}"),
            CHAN_SEND => format!("channel send {obj:#x}"),
            SELECT if obj == 0 => "select! with no arms (waits forever)".to_string(),
            SELECT => format!("select over channels (first: {obj:#x})"),
            // IO, BLOCKING, FUTURE: an outside party (a peer, a helper thread)
            // wakes the fiber: not a deadlock.
            _ => return None,
        })
    }
}

// SAFETY (the one `Send`/`Sync` argument for fibers): a `Task` is shared
// between threads through `Arc`, but its non-`Sync` parts (`body`, which
// holds a `!Send` corosensei coroutine and the fiber's stack, plus the
// `Cell`s) are only accessed by the holder of the run permission described
// in the module docs. The permission is unique at every instant and moves
// between threads only through a queue push/pop or an AcqRel CAS on
// `state`, both of which order all earlier accesses before later ones. The
// coroutine's stack may hold `!Send` values (for example a `Rc` or a
// `MutexGuard` of the user); moving such a suspended stack to another
// thread is what the user accepts by calling a migrating spawn, and the
// crate documents it (use `spawn_pinned` for thread-affine state). The
// runtime itself keeps no thread-affine value on a fiber stack across a
// suspension: its thread-local state is re-read after every resume through
// `#[inline(never)]` accessors (see `worker::tls`).
unsafe impl Send for Task {}
// SAFETY: see the `Send` argument above; shared access from several threads
// only touches atomics and immutable fields. The plain cells (`shield`,
// `registered`) and the body are touched only by the holder of the run
// permission, which one thread has at a time (the state's transitions
// order one holder's writes before the next holder's reads).
unsafe impl Sync for Task {}

/// What a spawn decides about a new task: the fields it sets; every other
/// field starts at its initial value (`QUEUED | FRESH`, no stack, no
/// registration, no wait, timer generation 0).
pub(crate) struct NewTask {
    pub(crate) id: u64,
    pub(crate) name: Option<Arc<str>>,
    pub(crate) stack_size: usize,
    pub(crate) pinned: Option<usize>,
    /// The worker placement sent it to (`Task::last_worker` until it runs).
    pub(crate) placed: usize,
    /// The fiber that may reclaim it, or 0 (`Task::reclaim_by`).
    pub(crate) reclaim_by: u64,
    /// The user call that spawned it (`Task::spawn_site`).
    pub(crate) spawn_site: Option<&'static Location<'static>>,
    /// The coarse clock at spawn (`Task::born_ms`).
    pub(crate) born_ms: u32,
    /// `None` for a spawn that puts its entry in afterwards, with its
    /// closure in the task (`runtime::task::packet::new_in_task`).
    pub(crate) entry: Option<Entry>,
}

impl NewTask {
    /// The task, as a value (for `Arc::new`).
    pub(crate) fn into_task(self) -> Task {
        Task {
            id: self.id,
            name: self.name,
            stack_size: self.stack_size,
            pin: pin_of(self.pinned),
            reclaim_by: self.reclaim_by,
            state: StateCell::new(QUEUED | FRESH),
            flags: FlagsCell::new(0),
            shield: Cell::new(0),
            locals: locals::LocalSlot::new(None),
            stack_lo: AtomicUsize::new(0),
            resume_at: AtomicU32::new(0),
            next_hint: [AtomicUsize::new(0), AtomicUsize::new(0)],
            last_worker: AtomicUsize::new(self.placed),
            wait_kind: AtomicU8::new(wait_kind::NONE),
            wait_obj: AtomicU64::new(0),
            wait_site: AtomicPtr::new(std::ptr::null_mut()),
            spawn_site: self.spawn_site,
            born_ms: self.born_ms,
            migrations: AtomicU32::new(0),
            wait_signalled: crate::loom::sync::atomic::AtomicBool::new(false),
            timer_gen: AtomicU64::new(0),
            registered: Cell::new(false),
            body: UnsafeCell::new(Body { entry: self.entry, coro: None, yielder: std::ptr::null() }),
            main: MainSlot::empty(),
        }
    }

    /// Make `t` (a recycled task: `runtime::task::pool`) the task `into_task`
    /// would build, field by field (no copy of a whole `Task` through the
    /// stack). The destructuring names every field, so a field added to
    /// `Task` without a reset here does not compile. The old values are
    /// dropped; for a spent task (`Task::is_spent`) that is only its name
    /// and its spent in-task `MainPacket`, whose closure and result cells
    /// are empty by then (`runtime::task::packet`, "In the task"): no user value.
    #[inline]
    pub(crate) fn write_over(self, t: &mut Task) {
        let Task {
            id,
            name,
            stack_size,
            pin,
            reclaim_by,
            state,
            flags,
            shield,
            locals,
            stack_lo,
            resume_at,
            next_hint,
            last_worker,
            wait_kind,
            wait_obj,
            wait_site,
            spawn_site,
            born_ms,
            migrations,
            wait_signalled,
            timer_gen,
            registered,
            body,
            main,
        } = t;
        *id = self.id;
        *name = self.name;
        *stack_size = self.stack_size;
        *pin = pin_of(self.pinned);
        *reclaim_by = self.reclaim_by;
        *state = StateCell::new(QUEUED | FRESH);
        *flags = FlagsCell::new(0);
        *shield = Cell::new(0);
        // A fiber's values are dropped when it ends (`fiber::local`), or by
        // the drain right after it destroyed the fiber: a spent task has
        // none left.
        debug_assert!(locals.get_mut().is_none());
        *locals = locals::LocalSlot::new(None);
        *stack_lo = AtomicUsize::new(0);
        *resume_at = AtomicU32::new(0);
        *next_hint = [AtomicUsize::new(0), AtomicUsize::new(0)];
        *last_worker = AtomicUsize::new(self.placed);
        *wait_kind = AtomicU8::new(self::wait_kind::NONE);
        *wait_obj = AtomicU64::new(0);
        *wait_site = AtomicPtr::new(std::ptr::null_mut());
        *spawn_site = self.spawn_site;
        *born_ms = self.born_ms;
        *migrations = AtomicU32::new(0);
        *wait_signalled = crate::loom::sync::atomic::AtomicBool::new(false);
        *timer_gen = AtomicU64::new(0);
        // The old fiber's closure and packet: gone, so a recycled task never
        // shows a previous fiber's value.
        main.reset();
        let body = body.get_mut();
        body.entry = self.entry;
        body.coro = None;
        body.yielder = std::ptr::null();
        *registered = Cell::new(false);
    }
}

impl Task {
    /// The flags (`DRAINING`, `CANCEL`, `UNPARK`, `BEHIND`, `PARKING`).
    #[inline(always)]
    pub(crate) fn flags_load(&self) -> u8 {
        self.flags.load(Acquire)
    }

    /// Set flags; returns the previous ones.
    #[inline]
    pub(crate) fn flags_or(&self, f: u8) -> u8 {
        self.flags.fetch_or(f, AcqRel)
    }

    /// Keep only the flags in `f`; returns the previous ones.
    #[inline]
    pub(crate) fn flags_and(&self, f: u8) -> u8 {
        self.flags.fetch_and(f, AcqRel)
    }

    /// Being destroyed by the shutdown drain.
    #[inline(always)]
    pub(crate) fn is_cancelling(&self) -> bool {
        self.flags.load(Relaxed) & DRAINING != 0
    }

    /// The drain starts destroying the task (it holds the run permission).
    pub(crate) fn set_cancelling(&self) {
        self.flags.fetch_or(DRAINING, Relaxed);
    }

    /// `Some(w)`: the fiber never migrates off worker `w`.
    #[inline]
    pub(crate) fn pinned(&self) -> Option<usize> {
        (self.pin != NOT_PINNED).then_some(self.pin as usize)
    }

    /// The running fiber records where it suspends (`park::suspend_task`).
    #[inline(always)]
    pub(crate) fn note_resume_sp(&self, sp: usize) {
        // Stacks are far below 4 GiB; an address off the stack (a wrap,
        // or none at all) only makes a useless prefetch.
        self.resume_at.store(sp.wrapping_sub(self.stack_lo.load(Relaxed)) as u32, Relaxed);
    }

    /// Fibers about to be queued in this order (a reactor poll's batch, a
    /// timer firing, a primitive waking its waiters): each one, when
    /// resumed, prefetches the task of the one behind it and the stack
    /// lines where that one will resume. Where thousands of fibers wait,
    /// a resumed fiber's stack page and lines are cold (a TLB walk and
    /// cache misses at the resume point); a prefetch one fiber ahead
    /// overlaps them with the current fiber's run, while one issued
    /// earlier (at wake-up) is evicted again before its fiber runs. The
    /// caller holds a reference to every task, and none has been queued
    /// yet. Returns the first (for `prefetch_self`, where it runs next).
    pub(crate) fn chain_prefetch<'a>(tasks: impl IntoIterator<Item = &'a Task>) -> Option<&'a Task> {
        let mut it = tasks.into_iter();
        let first = it.next()?;
        let mut prev = first;
        for next in it {
            prev.next_hint[0].store(next as *const Task as usize, Relaxed);
            prev.next_hint[1].store(next.resume_sp(), Relaxed);
            prev = next;
        }
        Some(first)
    }

    /// Where this parked fiber will resume reading its stack, or 0 if it
    /// never parked.
    #[inline]
    fn resume_sp(&self) -> usize {
        let at = self.resume_at.load(Relaxed);
        if at == 0 {
            0
        } else {
            self.stack_lo.load(Relaxed).wrapping_add(at as usize)
        }
    }

    /// Prefetch this fiber's own task lines and resume point now: for the
    /// first fiber of a small batch that the caller is about to queue where
    /// it runs next (a timer's wake-up goes to the worker's wake slot),
    /// so that nothing is queued ahead of it for a hint to ride on. The
    /// caller holds a reference.
    #[inline]
    pub(crate) fn prefetch_self(&self) {
        prefetch_task(self as *const Task as usize, self.resume_sp());
    }

    /// Called by the worker that is about to resume this fiber: prefetch
    /// what `chain_prefetch` left, once.
    #[inline]
    pub(crate) fn prefetch_next(&self) {
        let task = self.next_hint[0].load(Relaxed);
        if task == 0 {
            return;
        }
        self.next_hint[0].store(0, Relaxed);
        prefetch_task(task, self.next_hint[1].load(Relaxed));
    }

    /// The generation a timer armed now for this task's timed wait records.
    #[inline]
    pub(crate) fn timer_gen(&self) -> u64 {
        self.timer_gen.load(Relaxed)
    }

    /// The fiber's timed wait is over (called by the fiber after its park
    /// returned): timers armed for it are stale from now on. Only the fiber
    /// itself writes the generation, so no read-modify-write is needed.
    #[inline]
    pub(crate) fn timed_wait_over(&self) {
        self.timer_gen.store(self.timer_gen.load(Relaxed).wrapping_add(1), Relaxed);
    }

    /// A task that nobody may reclaim, placed on its pinned worker (or 0)
    /// (the loom models and unit tests; the runtime spawns through
    /// `runtime::task::pool`).
    #[cfg(any(test, loom))]
    pub(crate) fn new(
        id: u64,
        name: Option<Arc<str>>,
        stack_size: usize,
        pinned: Option<usize>,
        entry: impl Into<Entry>,
    ) -> TaskRef {
        let placed = pinned.unwrap_or(0);
        Arc::new(
            NewTask {
                id,
                name,
                stack_size,
                pinned,
                placed,
                reclaim_by: 0,
                spawn_site: None,
                born_ms: 0,
                entry: Some(entry.into()),
            }
            .into_task(),
        )
    }

    /// Finished and holding nothing that runs code when dropped: no
    /// closure, no coroutine (so no stack, no user value). Only such a
    /// task may wait in a task pool: writing a new task over it then drops
    /// only its name. (`registered` may still be set: a task that
    /// parked and finished has left the registry, which held a reference,
    /// so a unique task is in no registry.)
    pub(crate) fn is_spent(&mut self) -> bool {
        let body = self.body.get_mut();
        body.entry.is_none() && body.coro.is_none() && self.state.load(Relaxed) & LIFECYCLE == DONE
    }

    /// The body.
    ///
    /// # Safety
    /// The caller holds the run permission (module docs) and creates no
    /// other reference to the body while the returned one lives.
    #[allow(clippy::mut_from_ref)]
    pub(crate) unsafe fn body(&self) -> &mut Body {
        // SAFETY: exclusive by the caller's run permission.
        unsafe { &mut *self.body.get() }
    }

    /// Raw pointer to the body, for the fiber itself to read its yielder
    /// while the worker holds `&mut` to the coroutine field.
    pub(crate) fn body_ptr(&self) -> *mut Body {
        self.body.get()
    }

    /// Step 2: a worker that popped an entry tries to take the permission
    /// (and clears `FRESH`). `false`: a surplus or cancelled entry.
    pub(crate) fn transition_to_running(&self) -> bool {
        let mut s = self.state.load(Acquire);
        loop {
            if s & LIFECYCLE != QUEUED {
                return false;
            }
            match self.state.compare_exchange_weak(s, (s & !(LIFECYCLE | FRESH)) | RUNNING, AcqRel, Acquire) {
                Ok(_) => return true,
                Err(a) => s = a,
            }
        }
    }

    /// Step 4: the fiber yielded; the caller requeues it.
    pub(crate) fn transition_to_queued_after_yield(&self) {
        // Only bits other than the lifecycle may change concurrently (a
        // waker setting NOTIFIED), so a fetch_sub keeps them.
        self.state.fetch_sub(RUNNING - QUEUED, AcqRel);
    }

    /// Step 5: the fiber parked. Returns `true` when it is now parked (the
    /// caller lets go of it), `false` when a token was pending: the token is
    /// consumed and the caller must requeue the task.
    pub(crate) fn transition_to_parked(&self) -> bool {
        match self.state.compare_exchange(RUNNING, PARKED, AcqRel, Acquire) {
            Ok(_) => true,
            Err(s) => {
                debug_assert_eq!(s, RUNNING | NOTIFIED);
                // Nobody else writes while NOTIFIED is set and we run.
                self.state.store(QUEUED, Release);
                false
            }
        }
    }

    /// Step 6.
    pub(crate) fn transition_to_done(&self) {
        self.state.store(DONE, Release);
    }

    /// Step 7, shutdown only: take the permission from a queued or parked
    /// task in order to destroy it.
    #[allow(dead_code)] // the loom models' entry point; the drain uses `cancel`
    pub(crate) fn transition_to_cancelled(&self) -> bool {
        self.cancel().is_some()
    }

    /// `transition_to_cancelled`, saying whether the task was `PARKED`
    /// (`Some(true)`: the caller now owns the task's reference to itself,
    /// step 5) or `QUEUED` (`Some(false)`).
    pub(crate) fn cancel(&self) -> Option<bool> {
        let mut s = self.state.load(Acquire);
        loop {
            let l = s & LIFECYCLE;
            if l != QUEUED && l != PARKED {
                return None;
            }
            match self.state.compare_exchange_weak(s, DONE, AcqRel, Acquire) {
                Ok(_) => return Some(l == PARKED),
                Err(a) => s = a,
            }
        }
    }

    /// The fiber consumes a pending wake-up token, if any (called by the
    /// fiber itself while running).
    #[inline]
    pub(crate) fn take_token(&self) -> bool {
        if self.state.load(Acquire) & NOTIFIED != 0 {
            self.state.fetch_and(!NOTIFIED, AcqRel);
            true
        } else {
            false
        }
    }

    /// Wake the task. Returns `true` when the caller gained the run
    /// permission and must push the task to a queue; it then also owns the
    /// parked task's reference to itself (step 5).
    #[inline]
    pub(crate) fn transition_to_notified(&self) -> bool {
        let mut s = self.state.load(Acquire);
        loop {
            match s & LIFECYCLE {
                PARKED => match self.state.compare_exchange_weak(s, QUEUED, AcqRel, Acquire) {
                    Ok(_) => return true,
                    Err(a) => s = a,
                },
                DONE => return false,
                _ => {
                    if s & NOTIFIED != 0 {
                        return false;
                    }
                    match self.state.compare_exchange_weak(s, s | NOTIFIED, AcqRel, Acquire) {
                        Ok(_) => return false,
                        Err(a) => s = a,
                    }
                }
            }
        }
    }

    /// The worker that last ran the fiber (see the field).
    #[inline]
    pub(crate) fn last_worker(&self) -> usize {
        self.last_worker.load(Relaxed)
    }

    /// The holder of the run permission resumes the fiber on worker `w`.
    #[inline]
    pub(crate) fn set_last_worker(&self, w: usize) {
        self.last_worker.store(w, Relaxed);
    }

    /// Queued and never run (module docs, "Reclaim"). A hint: the answer
    /// may be stale by the time the caller acts on it, which the reclaim
    /// tolerates (its entry is then surplus).
    #[inline]
    pub(crate) fn is_fresh(&self) -> bool {
        self.state.load(Acquire) & FRESH != 0
    }

    /// Not `QUEUED`: a queue entry popped now is surplus and may be dropped
    /// unrun (module docs, step 2). A `QUEUED` answer may be stale; the
    /// popper's CAS decides then.
    #[inline]
    pub(crate) fn is_surplus(&self) -> bool {
        self.state.load(Acquire) & LIFECYCLE != QUEUED
    }

    /// Parked with no wake-up pending (deadlock report).
    pub(crate) fn is_parked(&self) -> bool {
        self.state.load(Acquire) == PARKED
    }

    /// The lifecycle value (`QUEUED`, `RUNNING`, `PARKED`, `DONE`) now
    /// (dumps; stale as soon as it is read).
    pub(crate) fn lifecycle(&self) -> u8 {
        self.state.load(Acquire) & LIFECYCLE
    }

    /// Record the user call that waits (the fiber itself, with its wait
    /// reason).
    #[inline]
    pub(crate) fn set_wait_site(&self, site: &'static Location<'static>) {
        self.wait_site.store(site as *const Location<'static> as *mut _, Relaxed);
    }

    /// The user call the fiber last waited at.
    pub(crate) fn wait_site(&self) -> Option<&'static Location<'static>> {
        let p = self.wait_site.load(Relaxed);
        // SAFETY: only ever set from a `&'static Location` (above).
        (!p.is_null()).then(|| unsafe { &*p })
    }

    /// The holder of the run permission resumes the fiber on a worker
    /// other than the last one: count the move (`remote`: another node).
    #[inline]
    pub(crate) fn note_migration(&self, remote: bool) {
        let m = self.migrations.load(Relaxed);
        let (lo, hi) = (m & 0xffff, m >> 16);
        let (lo, hi) = if remote { (lo, (hi + 1).min(0xffff)) } else { ((lo + 1).min(0xffff), hi) };
        self.migrations.store(lo | hi << 16, Relaxed);
    }

    /// Moves (same node, other node), see `note_migration`.
    pub(crate) fn migrations(&self) -> (u32, u32) {
        let m = self.migrations.load(Relaxed);
        (m & 0xffff, m >> 16)
    }
}
