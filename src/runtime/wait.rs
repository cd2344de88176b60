//! The runtime's fiber-or-thread waiter: the caller read once from TLS
//! ([`Me`]), and the two ways to hold it for a wake-up. In a wait queue
//! (`sync::queue`): the waiting caller's own handle ([`Node`]) and the
//! granter's handle on it ([`Waker`]). Outside any lock (a join packet's
//! inline slot, `task::packet`): [`Direct`]. Either way a fiber's wait
//! allocates nothing and counts no reference: its task and runtime are
//! held as plain pointers, valid while it waits by the holder's rule (the
//! queue lock for a [`Waker`], the packet's `WOKEN` hand-shake for a
//! [`Direct`]; the rules are on each type), and both wake it the same way
//! ([`notify_parked`], [`unpark_thread`]), as does the counted waiter that
//! anyone may keep and wake later (`park::Waiter`: scopes, jobs, blocking
//! calls). The queue protocol itself: `sync::queue`'s docs.

use std::sync::Arc;

use crate::loom::sync::atomic::{AtomicBool, Ordering::*};
use crate::loom::thread::{self, Thread};
use crate::runtime::shared::Shared;
use crate::runtime::task::{Task, TaskRef};
use crate::runtime::worker::WorkerLocal;

/// The waiter's own handle on its wait: where it reads "granted".
///
/// A fiber's flag is intrusive, in its own `Task` (`Task::wait_signalled`;
/// a fiber waits in one queue at a time), so a wait allocates nothing; the
/// raw pointer is the running fiber's own task, alive while it runs. A
/// plain thread gets a small shared flag.
pub(crate) struct Node {
    kind: NodeKind,
}

enum NodeKind {
    Fiber(*const Task),
    Thread(Arc<ThreadFlag>),
}

struct ThreadFlag {
    signalled: AtomicBool,
    thread: Thread,
}

impl Node {
    /// The waiting fiber's task; null for a thread's wait.
    #[inline]
    fn task(&self) -> *const Task {
        match &self.kind {
            NodeKind::Fiber(t) => *t,
            NodeKind::Thread(_) => std::ptr::null(),
        }
    }
    #[inline]
    fn flag(&self) -> &AtomicBool {
        match &self.kind {
            // SAFETY: the pointer is the calling fiber's own task (set by
            // `Inner::push` from the thread's current task), and only that
            // fiber holds this `Node`: the task outlives its running fiber.
            NodeKind::Fiber(t) => unsafe { &(**t).wait_signalled },
            NodeKind::Thread(f) => &f.signalled,
        }
    }
    /// Granted (the entry was popped under the queue lock).
    #[inline]
    pub(crate) fn is_signalled(&self) -> bool {
        self.flag().load(Acquire)
    }
}

/// The granter's handle on a queued waiter: owned by its entry, so the
/// granter can wake the waiter after dropping the lock without touching
/// the waiter's memory (which may be gone once it saw its flag).
pub(crate) struct Waker {
    kind: WakerKind,
}

enum WakerKind {
    /// A queued fiber: its task as a pointer (no count; alive while the
    /// entry is queued, see below) and, once `signal` moved it out of
    /// `PARKED` under the lock, the task's reference to itself that it
    /// held while parked (`runtime::task`, step 5), which `wake` pushes to a
    /// run queue. A wait through the queue counts no task reference.
    ///
    /// The pointer is dereferenced only under the queue lock while the
    /// entry is (or was, in the same critical section) queued: the fiber
    /// is then inside its wait, so its task is referenced by whoever holds
    /// its run permission (a worker, a queue, or the parked task itself).
    ///
    /// `local`: the granter's worker, read by `signal` (one TLS accessor
    /// call) when it is a worker of the waiter's runtime, else null; `wake`
    /// pushes through it without reading TLS again (same thread, no
    /// suspension in between: `Waker::wake`).
    Fiber {
        task: *const Task,
        shared: SharedRef,
        run: Option<TaskRef>,
        local: *const WorkerLocal,
    },
    /// A copy for a wake-up without a grant (`Inner::nodes`): the waiter
    /// may leave before it is woken, so this one holds a counted reference.
    FiberRef {
        task: TaskRef,
        shared: SharedRef,
    },
    Thread(Arc<ThreadFlag>),
}

// SAFETY: `task` is a pointer to a `Sync` `Task` that is dereferenced only
// under the queue lock (see the variant's docs); the other fields are
// `Send`. Entries move between threads only inside the queue's mutex.
unsafe impl Send for WakerKind {}

/// The waiting fiber's runtime, as its entry sees it: a plain pointer
/// while queued (no reference count per wait), turned into a
/// counted reference by `Waker::signal` (under the queue lock) unless the
/// granter runs on a worker of that same runtime.
///
/// Why the pointer is valid whenever it is used:
///
/// - *While the entry is queued*, the waiting fiber is inside its wait
///   (it leaves only by seeing its signal, or by removing its entry under
///   the queue lock). Its runtime's `Shared` outlives every fiber of it:
///   the workers and the `Runtime` hold `Arc`s until the shutdown drain has
///   destroyed every fiber, and destroying this one unwinds its wait, whose
///   drop guard takes the queue lock. So whoever holds the queue lock and
///   sees the entry may dereference the pointer, and may add a count.
/// - *After the lock is dropped* (`Waker::wake`), the waiter may be gone
///   and its runtime shut down. Then the pointer is used only if
///   `signal` or `clone_ref` made it counted (`owned`), or if the thread
///   that granted runs a worker of that runtime: a worker's `WorkerLocal`
///   holds an `Arc<Shared>` for as long as its thread runs fibers, and
///   every granter wakes right after unlocking, without suspending in
///   between (so it is still on that worker).
struct SharedRef {
    /// Built with `Arc::from_raw` from a live `Arc`'s pointer; dropped
    /// (one count released) only if `owned`.
    arc: std::mem::ManuallyDrop<Arc<Shared>>,
    owned: bool,
}

impl SharedRef {
    /// A borrowed view of the calling worker's runtime.
    ///
    /// # Safety
    /// `p` comes from `Arc::as_ptr` of a live `Arc<Shared>`, and the
    /// caller follows the rules of the type's docs.
    unsafe fn borrowed(p: *const Shared) -> SharedRef {
        // SAFETY: `p` is an `Arc`'s pointer (caller); the `ManuallyDrop`
        // keeps the count unchanged.
        SharedRef { arc: std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(p) }), owned: false }
    }
    /// Under the queue lock: keep the runtime alive past the unlock unless
    /// this thread is one of its workers.
    #[inline]
    fn own_unless_local(&mut self) {
        if crate::runtime::context::current_shared_ptr() != Arc::as_ptr(&self.arc) {
            self.own();
        }
    }
    /// Under the queue lock: keep the runtime alive past the unlock.
    #[inline]
    fn own(&mut self) {
        if !self.owned {
            // SAFETY: under the queue lock with the entry still ours to
            // grant: the runtime is alive (type docs), so a count may be
            // added; `owned` makes our drop release it.
            unsafe { Arc::increment_strong_count(Arc::as_ptr(&self.arc)) };
            self.owned = true;
        }
    }
    /// The same view again (see `own_unless_local`): call under the lock.
    fn clone_under_lock(&self) -> SharedRef {
        // SAFETY: under the queue lock, entry queued: alive (type docs).
        let mut r = unsafe { SharedRef::borrowed(Arc::as_ptr(&self.arc)) };
        r.own_unless_local();
        r
    }
}

impl Drop for SharedRef {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: we added this count in `own_unless_local`, and drop
            // the `ManuallyDrop` exactly once.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.arc) }
        }
    }
}

impl Waker {
    /// Mark as granted; call under the queue lock, after popping.
    #[inline]
    ///
    /// For a fiber this also performs the wake-up's state transition
    /// (`Task::transition_to_notified`) here, under the lock, while the
    /// task is certainly alive: after the signal the waiter may return and
    /// finish at once, and `wake` must then not touch it. Winning
    /// `PARKED -> QUEUED` hands us the parked task's own reference, which
    /// `wake` pushes; otherwise the fiber has not parked yet and keeps a
    /// token (or is being destroyed), and `wake` does nothing for it.
    /// Every signalled waker must be woken (`wake`), or a fiber moved out
    /// of `PARKED` here would never be pushed.
    pub(crate) fn signal(&mut self) {
        match &mut self.kind {
            WakerKind::Fiber { task, shared, run, local } => {
                *local = shared.arc.local_worker();
                if local.is_null() {
                    shared.own();
                }
                // SAFETY: under the queue lock, on an entry just popped
                // (the variant's docs): the task is alive.
                let t = unsafe { &**task };
                t.wait_signalled.store(true, Release);
                // SAFETY: alive, as above; `task` is a live `Arc<Task>`'s
                // pointer (`new_waiter` took it from the running fiber).
                if let Some(r) = unsafe { notify_parked(*task) } {
                    *run = Some(r);
                }
            }
            WakerKind::FiberRef { task, .. } => task.wait_signalled.store(true, Release),
            WakerKind::Thread(f) => f.signalled.store(true, Release),
        }
    }
    /// Wake the waiter; call after dropping the queue lock, without
    /// suspending since the lock was held (see `SharedRef`).
    #[inline]
    pub(crate) fn wake(self) {
        match self.kind {
            // `shared` is counted, or this thread is one of its workers
            // (`local`, read by `signal` on this thread).
            WakerKind::Fiber { run, shared, local, .. } => {
                if let Some(task) = run {
                    shared.arc.reschedule_from(local, task);
                }
            }
            WakerKind::FiberRef { task, shared } => shared.arc.wake(task),
            WakerKind::Thread(f) => unpark_thread(&f.thread),
        }
    }
    /// The fiber `wake` will push to a run queue, if any: a signalled
    /// fiber waiter that had parked (its task's own reference, held here
    /// until `wake`).
    #[inline]
    fn to_run(&self) -> Option<&Task> {
        match &self.kind {
            WakerKind::Fiber { run: Some(t), .. } => Some(t),
            _ => None,
        }
    }
    /// Signalled wakers about to be woken in this order: the fibers among
    /// them are chained for prefetching (`Task::chain_prefetch`,
    /// "Prefetching one fiber ahead" in `runtime/README.md`). Woken on a
    /// worker they run in this order (the wake slot, then the ready
    /// queue). Hints only: nothing else changes.
    pub(crate) fn chain_prefetch<'a>(ws: impl Iterator<Item = &'a Waker>) {
        Task::chain_prefetch(ws.filter_map(Waker::to_run));
    }
    /// Call under the queue lock.
    pub(crate) fn clone_ref(&self) -> Waker {
        Waker {
            kind: match &self.kind {
                WakerKind::Fiber { task, shared, .. } => {
                    // SAFETY: under the queue lock, entry queued: the task
                    // is alive (variant docs), so a count may be added.
                    let task = unsafe {
                        Arc::increment_strong_count(*task);
                        Arc::from_raw(*task)
                    };
                    WakerKind::FiberRef { task, shared: shared.clone_under_lock() }
                }
                WakerKind::FiberRef { task, shared } => {
                    WakerKind::FiberRef { task: task.clone(), shared: shared.clone_under_lock() }
                }
                WakerKind::Thread(f) => WakerKind::Thread(f.clone()),
            },
        }
    }
}

/// The caller, read from TLS once per wait (one accessor call for the
/// running task and its worker): what `Inner::push_as` queues, and what a
/// primitive checks before queueing (`cannot_suspend`). Use it under the
/// lock it was read for, without suspending since.
#[derive(Clone, Copy)]
pub(crate) struct Me {
    /// The running fiber's task, or null (a plain thread).
    task: *const Task,
    /// Its worker's runtime; null off a worker.
    shared: *const Shared,
}

impl Me {
    #[inline]
    pub(crate) fn current() -> Me {
        let (w, task) = crate::runtime::context::worker_and_task();
        // SAFETY: a non-null WORKER points to this thread's live worker.
        let shared = if w.is_null() { std::ptr::null() } else { unsafe { Arc::as_ptr(&(*w).shared) } };
        Me { task, shared }
    }
    /// The caller is a fiber (`context::current_task_ptr` is not null).
    #[inline]
    pub(crate) fn is_fiber(&self) -> bool {
        !self.task.is_null()
    }
    /// `fiber::current_cannot_suspend` for this caller.
    #[inline]
    pub(crate) fn cannot_suspend(&self) -> bool {
        // SAFETY: the running fiber's own task, alive while it runs.
        !self.task.is_null() && crate::runtime::context::cannot_suspend(unsafe { &*self.task })
    }
    /// This caller as a [`Direct`] waiter: a fiber of a worker by its
    /// pointers, anything else by its thread (the rule of [`new_waiter`]).
    #[inline]
    pub(crate) fn direct(self) -> Direct {
        if !self.task.is_null() && !self.shared.is_null() {
            Direct::Fiber { task: self.task, shared: self.shared }
        } else {
            Direct::Thread(thread::current())
        }
    }
}

/// A waiter held outside any lock and woken at most once per
/// registration by whoever completes what it waits for (the owner's
/// waiter in a join packet's inline slot, `task::packet`): plain pointers
/// to a fiber's task and runtime, or a thread's handle.
///
/// No reference is counted, so the holder's protocol must keep the fiber
/// inside its wait, and with it its task and runtime alive, from the
/// moment it may read the waiter until it is done waking it (a packet's
/// completer: between its `fetch_or(DONE)` and its `WOKEN` store, which
/// the owner waits for before it leaves its wait; `task::packet`'s docs).
/// That is [`Direct::wake`]'s contract.
pub(crate) enum Direct {
    Fiber { task: *const Task, shared: *const Shared },
    Thread(Thread),
}

impl Direct {
    /// The caller (see [`Me::direct`]).
    #[inline]
    pub(crate) fn current() -> Direct {
        Me::current().direct()
    }

    /// The same waiter (a fiber by its task, a thread by its id).
    pub(crate) fn same(&self, o: &Direct) -> bool {
        match (self, o) {
            (Direct::Fiber { task: a, .. }, Direct::Fiber { task: b, .. }) => std::ptr::eq(*a, *b),
            (Direct::Thread(a), Direct::Thread(b)) => a.id() == b.id(),
            _ => false,
        }
    }

    /// Wake the waiter (a token if it is not parked yet).
    ///
    /// # Safety
    /// For `Fiber`: the waiter is inside its wait, so the task and the
    /// runtime the pointers name are alive (the holder's protocol, type
    /// docs).
    #[inline]
    pub(crate) unsafe fn wake(&self) {
        match self {
            Direct::Fiber { task, shared } => {
                // SAFETY: alive (caller); `task` is `Me::current`'s
                // pointer of the running fiber's `Arc<Task>`.
                if let Some(t) = unsafe { notify_parked(*task) } {
                    // SAFETY: `shared` is `Arc::as_ptr` of the waiter's
                    // live runtime (caller); `ManuallyDrop` keeps its count.
                    let s = std::mem::ManuallyDrop::new(unsafe { Arc::from_raw(*shared) });
                    s.reschedule(t);
                }
            }
            Direct::Thread(t) => unpark_thread(t),
        }
    }
}

/// A fiber's wake-up step, for every waiter kind: move it out of `PARKED`
/// (`Task::transition_to_notified`). Winning `PARKED -> QUEUED` hands over
/// the reference the parked task held on itself (`runtime::task`, step 5),
/// returned here for the caller to push to a run queue; `None` when the
/// fiber has not parked yet (it keeps a token) or is being destroyed.
///
/// # Safety
/// `task` is the pointer of a live `Arc<Task>`.
#[inline]
pub(crate) unsafe fn notify_parked(task: *const Task) -> Option<TaskRef> {
    // SAFETY: alive (caller).
    if unsafe { (*task).transition_to_notified() } {
        // SAFETY: alive (caller).
        #[cfg(feature = "tracing")]
        crate::runtime::dump::fiber_tracing::wake(unsafe { &*task });
        // SAFETY: we won `PARKED -> QUEUED`, so we own the reference the
        // parked task held on itself, made by `Arc` from `task` (caller).
        Some(unsafe { Arc::from_raw(task) })
    } else {
        None
    }
}

/// A thread's wake-up step, for every waiter kind (a token if it has not
/// parked yet).
#[inline]
pub(crate) fn unpark_thread(t: &Thread) {
    crate::runtime::deadlock::note_thread_wake();
    t.unpark();
}

/// The caller as a waiter: its own handle and the entry's. The flag is
/// cleared here, under the queue lock (every write to it is under the lock
/// of the queue the waiter is in).
#[inline(always)]
pub(crate) fn new_waiter(me: Me) -> (Node, Waker) {
    if !me.task.is_null() && !me.shared.is_null() {
        let task = me.task;
        // SAFETY: the running fiber's own task, alive while it runs.
        unsafe { (*task).wait_signalled.store(false, Relaxed) };
        let node = Node { kind: NodeKind::Fiber(task) };
        // SAFETY: `shared` is this worker's live `Arc<Shared>`'s pointer,
        // and the entry follows `SharedRef`'s rules.
        let shared = unsafe { SharedRef::borrowed(me.shared) };
        (node, Waker { kind: WakerKind::Fiber { task, shared, run: None, local: std::ptr::null() } })
    } else {
        new_thread_waiter()
    }
}

/// `new_waiter` for a plain thread (or a fiber off a worker): a small
/// shared flag (out of the fiber's inlined path).
#[inline(never)]
fn new_thread_waiter() -> (Node, Waker) {
    let f = Arc::new(ThreadFlag { signalled: AtomicBool::new(false), thread: thread::current() });
    (Node { kind: NodeKind::Thread(f.clone()) }, Waker { kind: WakerKind::Thread(f) })
}

impl Node {
    /// Record what the waiter waits on and the user call that waits
    /// (deadlock report, dumps); a fiber's node names its own task (the
    /// same on every thread): no TLS look-up.
    #[inline]
    pub(crate) fn set_wait_reason(&self, kind: u8, obj: u64, site: &'static std::panic::Location<'static>) {
        let t = self.task();
        if t.is_null() {
            crate::runtime::context::set_wait_reason_at(kind, obj, site);
        } else {
            // SAFETY: the waiting fiber's own task, alive while it runs.
            crate::runtime::context::set_task_wait_reason_at(unsafe { &*t }, kind, obj, site);
        }
    }
    /// The waiter may not suspend now (`runtime::current_cannot_suspend`).
    #[inline]
    pub(crate) fn cannot_suspend(&self) -> bool {
        let t = self.task();
        if t.is_null() {
            crate::runtime::current_cannot_suspend()
        } else {
            // SAFETY: as above.
            crate::runtime::context::cannot_suspend(unsafe { &*t })
        }
    }
    /// The wait recorded by `set_wait_reason` is over: clear the reason
    /// (the site stays, as `context::clear_task_wait_reason` says).
    #[inline]
    pub(crate) fn clear_wait_reason(&self, site: &'static std::panic::Location<'static>) {
        let t = self.task();
        if t.is_null() {
            crate::runtime::context::set_wait_reason_at(crate::runtime::task::wait_kind::NONE, 0, site);
        } else {
            // SAFETY: the waiting fiber's own task, alive while it runs.
            crate::runtime::context::clear_task_wait_reason(unsafe { &*t });
        }
    }
    /// Park the waiter until woken (may return spuriously), unless it
    /// cannot suspend (`cannot_suspend`): then `false` at once, unparked.
    /// Inlined into the waiting loop, like the switch in it (see
    /// `fiber::yield_now`).
    #[inline(always)]
    pub(crate) fn park_or_refuse(&self) -> bool {
        let t = self.task();
        if t.is_null() {
            if crate::runtime::current_cannot_suspend() {
                return false;
            }
            crate::runtime::park();
            true
        } else {
            crate::runtime::park::park_task_or_refuse(t)
        }
    }
}
