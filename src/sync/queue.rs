//! The one wait-queue core every primitive is built on.
//!
//! # Protocol
//!
//! A primitive keeps its state `S` and a FIFO of waiters together in a
//! [`WaitQueue<S, P>`], i.e. behind one lock (`super::lock::SpinLock`: its
//! unlock is a release store; waiters spin, then yield, then sleep). That
//! lock is an *internal* lock: it is held only for a few instructions
//! (check the state, push or pop a waiter) and **never across a park, a
//! wake-up or user code**, so blocking a worker thread on it is bounded and
//! cannot deadlock with fibers. Primitives may add a lock-free fast path in front of it
//! (`Mutex` does).
//!
//! 1. *Wait.* Under the lock the caller sees it must wait, pushes an
//!    [`Entry`] (its id, a [`Waker`], and an optional payload `P`: a value
//!    a blocked sender offers, or a pointer to a blocked receiver's
//!    [`Handoff`] cell), drops the lock and calls [`WaitQueue::park`] with
//!    its own [`Node`]. A fiber's "granted" flag is intrusive
//!    (`Task::wait_signalled`; a fiber waits in one queue at a time), and
//!    its entry holds its task and runtime as plain pointers, valid while
//!    the entry is queued (`WakerKind::Fiber`, `SharedRef`): a fiber's
//!    wait allocates nothing and counts no reference (a thread's wait
//!    allocates a small flag).
//! 2. *Grant.* A releaser, under the lock, pops the first entry (FIFO) and
//!    hands it whatever it waited for (the mutex stays locked and changes
//!    owner; a permit; a value moved into the receiver's cell), then calls
//!    [`Waker::signal`] and, after dropping the lock, [`Waker::wake`].
//!    **Being popped is being granted**: the signal flag only lets the
//!    waiter notice without taking the lock. For a fiber, `signal` also
//!    moves it out of `PARKED` (or leaves a token), under the lock, and
//!    takes over the reference the parked task holds on itself
//!    (`runtime::task`, step 5), because after the signal the waiter may run
//!    on and finish. After the lock is dropped the granter touches only
//!    what its entry owns: that reference, and its runtime (counted by
//!    `signal` unless the granter is a worker of the same runtime). So a
//!    hand-off is one lock acquisition by the waiter (to queue) and one by
//!    the granter; the woken waiter does not lock again.
//! 3. *Park.* `park` loops on the flag around `park_caller` (which may
//!    return spuriously, and keeps a token when the wake-up comes before the
//!    park, like `std::thread::park`), so no wake-up is lost between step 1
//!    and the park.
//! 4. *Leaving early* (timeout; a fiber that cannot suspend because the
//!    shutdown drain destroys it or it unwinds; a forced unwind through the
//!    park): the waiter takes the lock and removes its own entry. If the
//!    entry is gone it was granted in the meantime (step 2 ran under the
//!    lock), so the wait counts as successful, or, while unwinding, the
//!    primitive's `on_granted_unwind` passes the grant on (unlock, give the
//!    permit back). So a grant is never lost and nobody stays queued.
//!
//! A fiber parked here may be resumed by any worker (it migrates);
//! `spawn_pinned` fibers go back to their own worker (`Shared::reschedule`).

use std::collections::VecDeque;
use std::time::Instant;

use super::lock::{SpinGuard, SpinLock};

use crate::runtime::wait::new_waiter;
pub(crate) use crate::runtime::wait::{Me, Node, Waker};

/// A queued waiter.
pub(crate) struct Entry<P> {
    pub(crate) node: Waker,
    pub(crate) payload: P,
}

/// State and waiters of one primitive, behind the internal lock.
///
/// Waiters sit in arrival (= id) order. A waiter that leaves early (timeout,
/// cancellation, shutdown) is found by binary search on its id and leaves a
/// tombstone instead of shifting the queue, so leaving is O(log n) and a
/// shutdown that unwinds n waiters of one primitive costs O(n log n), not
/// O(n^2). Tombstones are skipped when granting, never left at the front,
/// and compacted away once they outnumber the live waiters.
pub(crate) struct Inner<S, P> {
    pub(crate) state: S,
    waiters: VecDeque<Slot<P>>,
    live: usize,
    next_id: u64,
}

struct Slot<P> {
    id: u64,
    entry: Option<Entry<P>>,
}

impl<S, P> Inner<S, P> {
    pub(crate) const fn new(state: S) -> Self {
        Inner { state, waiters: VecDeque::new(), live: 0, next_id: 0 }
    }
    /// Queue the caller; returns what `park` needs.
    pub(crate) fn push(&mut self, payload: P) -> (u64, Node) {
        self.push_as(Me::current(), payload)
    }
    /// `push` for a caller that read `me` under this lock already.
    /// Inlined into the waiting call: the entry is built in place.
    #[inline(always)]
    pub(crate) fn push_as(&mut self, me: Me, payload: P) -> (u64, Node) {
        let id = self.next_id;
        self.next_id += 1;
        let (node, waker) = new_waiter(me);
        self.waiters.push_back(Slot { id, entry: Some(Entry { node: waker, payload }) });
        self.live += 1;
        (id, node)
    }
    /// Drop tombstones at the front (the front is then live, or empty).
    fn clean_front(&mut self) {
        while self.waiters.front().is_some_and(|s| s.entry.is_none()) {
            self.waiters.pop_front();
        }
    }
    /// Pop and signal the first waiter; the caller wakes it after unlocking.
    pub(crate) fn grant_first(&mut self) -> Option<Entry<P>> {
        self.clean_front();
        let mut e = self.waiters.pop_front()?.entry?;
        self.live -= 1;
        self.clean_front();
        e.node.signal();
        Some(e)
    }
    pub(crate) fn front(&self) -> Option<&Entry<P>> {
        self.waiters.iter().find_map(|s| s.entry.as_ref())
    }
    pub(crate) fn has_waiters(&self) -> bool {
        self.live > 0
    }
    /// Pop and signal the first waiter whose payload matches.
    pub(crate) fn grant_first_where(&mut self, f: impl Fn(&P) -> bool) -> Option<Entry<P>> {
        self.grant_first_where_then(f, |_| {})
    }
    /// Pop the first waiter whose payload matches, run `fill` on its
    /// payload (e.g. put a value into its [`Handoff`]), *then* signal it:
    /// whatever `fill` writes is visible to the waiter once it sees the
    /// signal, without the lock (the signal is a release store).
    pub(crate) fn grant_first_where_then(
        &mut self,
        f: impl Fn(&P) -> bool,
        fill: impl FnOnce(&mut P),
    ) -> Option<Entry<P>> {
        // The front is live (`clean_front` keeps it so) and usually the
        // one wanted: pop it without a search and a tombstone.
        let front = self.waiters.front()?.entry.as_ref().is_some_and(|e| f(&e.payload));
        let mut e = if front { self.waiters.pop_front()?.entry? } else { self.take_first_where(f)? };
        self.live -= 1;
        self.clean_front();
        fill(&mut e.payload);
        e.node.signal();
        Some(e)
    }
    /// `grant_first_where_then` past a front that does not match: the
    /// first matching entry, left as a tombstone (out of the grant's
    /// inlined path).
    #[inline(never)]
    fn take_first_where(&mut self, f: impl Fn(&P) -> bool) -> Option<Entry<P>> {
        let i = self.waiters.iter().position(|s| s.entry.as_ref().is_some_and(|e| f(&e.payload)))?;
        self.waiters[i].entry.take()
    }
    /// Whether a queued waiter's payload matches (a `select` arm asks
    /// whether a partner could be granted now).
    pub(crate) fn any_waiter(&self, f: impl Fn(&P) -> bool) -> bool {
        self.waiters.iter().any(|s| s.entry.as_ref().is_some_and(|e| f(&e.payload)))
    }
    /// Pop and signal every waiter.
    pub(crate) fn grant_all(&mut self) -> Vec<Entry<P>> {
        let mut v: Vec<_> = self.waiters.drain(..).filter_map(|s| s.entry).collect();
        self.live = 0;
        for e in &mut v {
            e.node.signal();
        }
        v
    }
    /// Wake every waiter without removing it (they re-check the state).
    pub(crate) fn nodes(&self) -> Vec<Waker> {
        self.waiters.iter().filter_map(|s| s.entry.as_ref().map(|e| e.node.clone_ref())).collect()
    }
    /// The waiter `id` leaves on its own: its entry, or `None` when it was
    /// granted (popped) already.
    pub(crate) fn remove(&mut self, id: u64) -> Option<Entry<P>> {
        let i = self.waiters.binary_search_by_key(&id, |s| s.id).ok()?;
        let e = self.waiters[i].entry.take()?;
        self.live -= 1;
        self.clean_front();
        if self.waiters.len() > 64 && self.waiters.len() > 2 * self.live {
            self.waiters.retain(|s| s.entry.is_some());
        }
        Some(e)
    }
}

/// Wake the nodes of popped entries (after the lock is dropped), in order;
/// chained for prefetching first (`Waker::chain_prefetch`: where many
/// fibers waited, their stacks are cold).
pub(crate) fn wake_all<P>(es: Vec<Entry<P>>) -> Vec<P> {
    Waker::chain_prefetch(es.iter().map(|e| &e.node));
    es.into_iter()
        .map(|e| {
            e.node.wake();
            e.payload
        })
        .collect()
}

/// A waiter's payload cell, on the waiter's own stack: a granter puts
/// what the waiter waited for (a channel value) straight into it, under
/// the queue lock and before the signal, so the woken waiter takes it
/// without locking again (one lock acquisition per hand-off).
///
/// # Why the cell outlives every write to it
///
/// The entry holds only a [`HandoffPtr`] to the cell. The waiter keeps the
/// cell alive (does not return from the frame that owns it) until its wait
/// ended, and a wait ends only in one of three ways, each of which orders
/// the granter's write before the waiter's next access:
///
/// 1. the waiter sees its signal (an acquire load; the granter writes the
///    cell, then signals with a release store, both under the lock, and
///    never touches the cell again after the signal);
/// 2. the waiter takes the lock to remove its own entry (timeout, close,
///    cancellation) and finds it still queued: then nobody was granted and
///    nobody will write the cell, since granting pops the entry under that
///    lock;
/// 3. the same, but the entry is gone: it was granted under the lock the
///    waiter now holds, so the write happened before.
///
/// A forced unwind through the park (shutdown destroys the fiber) runs
/// case 2 or 3 from a drop guard *before* the frame holding the cell is
/// unwound, so the cell is still there; in case 3 the primitive passes
/// the value on (`on_granted_unwind`). A fiber's stack does not move while
/// it is suspended, and is unmapped only after that unwind, so a pointer
/// into it stays valid for as long as the entry is queued. The loom model
/// `handoff_grant_vs_leave` checks the three cases.
pub(crate) struct Handoff<T> {
    cell: crate::loom::cell::UnsafeCell<Option<T>>,
}

/// The entry's pointer to a waiter's [`Handoff`].
pub(crate) struct HandoffPtr<T>(*const Handoff<T>);

// SAFETY: the pointer is only dereferenced by a granter under the queue
// lock, while the waiter is still queued (see `Handoff`), and it carries a
// `T` from the granter's thread to the waiter's: so `T: Send` is enough.
unsafe impl<T: Send> Send for HandoffPtr<T> {}

impl<T> Handoff<T> {
    pub(crate) fn new() -> Handoff<T> {
        Handoff { cell: crate::loom::cell::UnsafeCell::new(None) }
    }
    /// The pointer to queue with the waiter's entry.
    pub(crate) fn ptr(&self) -> HandoffPtr<T> {
        HandoffPtr(self)
    }
    /// Take the handed-over value.
    ///
    /// # Safety
    /// The caller is the waiter that owns the cell, and its wait ended
    /// (cases 1-3 of the type's docs), so no granter writes concurrently.
    pub(crate) unsafe fn take(&self) -> Option<T> {
        // SAFETY: no concurrent access, by the caller's contract.
        self.cell.with_mut(|p| unsafe { (*p).take() })
    }
}

impl<T> HandoffPtr<T> {
    /// Put `v` into the waiter's cell.
    ///
    /// # Safety
    /// Called under the queue lock, on the payload of an entry just popped
    /// for granting (`Inner::grant_first_where_then`'s `fill`), before its
    /// signal: the waiter is still in its wait and reads the cell only
    /// after the signal or after taking the lock (type docs of `Handoff`).
    pub(crate) unsafe fn put(&self, v: T) {
        // SAFETY: the cell is alive and unshared now, by the contract.
        unsafe { (*self.0).cell.with_mut(|p| *p = Some(v)) }
    }
}

/// How a `park` ended.
pub(crate) enum Outcome<P> {
    /// Granted (popped by a releaser).
    Signalled,
    /// The deadline passed first; the entry was removed (its payload).
    TimedOut(P),
    /// The caller is a fiber that cannot suspend (shutdown drain, or
    /// unwinding); the entry was removed.
    Cancelled(P),
}

/// What a fiber waits on, for the deadlock report.
#[derive(Clone, Copy)]
pub(crate) struct Reason {
    pub(crate) kind: u8,
    pub(crate) obj: u64,
    /// The user call that waits (`#[track_caller]` from the public
    /// waiting method down to here): shown by dumps.
    pub(crate) site: &'static std::panic::Location<'static>,
}

impl Reason {
    #[track_caller]
    pub(crate) fn new<T: ?Sized>(kind: u8, obj: &T) -> Reason {
        Reason { kind, obj: obj as *const T as *const () as usize as u64, site: std::panic::Location::caller() }
    }
}

/// A `WaitQueue` with its state.
pub(crate) struct WaitQueue<S, P = ()> {
    inner: SpinLock<Inner<S, P>>,
}

/// The locked state and waiters of a [`WaitQueue`].
pub(crate) type Locked<'a, S, P> = SpinGuard<'a, Inner<S, P>>;

impl<S, P> WaitQueue<S, P> {
    pub(crate) const fn new(state: S) -> Self {
        WaitQueue { inner: SpinLock::new(Inner::new(state)) }
    }

    /// Take the internal lock (never held across a park or user code;
    /// no poisoning: `super::lock`).
    #[inline]
    pub(crate) fn lock(&self) -> Locked<'_, S, P> {
        self.inner.lock()
    }

    /// Step 3/4 of the protocol: wait until entry `id` is granted, the
    /// deadline passes, or the caller cannot suspend. `on_removed` runs
    /// under the lock after the caller removed its own entry (e.g. the
    /// mutex clears its "queued" bit when the queue became empty).
    /// `on_granted_unwind` runs (without the lock) when the caller is
    /// force-unwound after it was granted: it must pass the grant on.
    pub(crate) fn park(
        &self,
        id: u64,
        node: &Node,
        deadline: Option<Instant>,
        reason: Reason,
        on_removed: impl Fn(&mut Inner<S, P>),
        on_granted_unwind: impl FnOnce(),
    ) -> Outcome<P> {
        self.park_or_leave(id, node, deadline, reason, on_removed, on_granted_unwind, || false)
    }

    /// `park`, also leaving (as `Cancelled`) once `leave_if()` holds; the
    /// primitive wakes its waiters after making it hold (channel close).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn park_or_leave(
        &self,
        id: u64,
        node: &Node,
        deadline: Option<Instant>,
        reason: Reason,
        on_removed: impl Fn(&mut Inner<S, P>),
        on_granted_unwind: impl FnOnce(),
        leave_if: impl Fn() -> bool,
    ) -> Outcome<P> {
        struct Unwind<'a, S, P, R: Fn(&mut Inner<S, P>), G: FnOnce()> {
            q: &'a WaitQueue<S, P>,
            id: u64,
            on_removed: &'a R,
            on_granted: Option<G>,
        }
        impl<S, P, R: Fn(&mut Inner<S, P>), G: FnOnce()> Drop for Unwind<'_, S, P, R, G> {
            fn drop(&mut self) {
                let Some(g) = self.on_granted.take() else { return };
                let mut inner = self.q.lock();
                if inner.remove(self.id).is_some() {
                    (self.on_removed)(&mut inner);
                } else {
                    drop(inner);
                    g();
                }
            }
        }
        let mut guard = Unwind { q: self, id, on_removed: &on_removed, on_granted: Some(on_granted_unwind) };
        // A fiber's node names its own task (the same on every thread): no
        // TLS look-up per step of the wait. A thread's node goes through
        // the accessors (a thread may still run a fiber being destroyed
        // outside any worker: the shutdown drain).
        node.set_wait_reason(reason.kind, reason.obj, reason.site);
        let leave = loop {
            if node.is_signalled() {
                break None;
            }
            if leave_if() {
                break Some(false);
            }
            match deadline {
                // The cannot-suspend check rides on the park's own load of
                // the flags (`park::park_task_or_refuse`).
                None => {
                    if !node.park_or_refuse() {
                        break Some(false);
                    }
                }
                Some(d) => {
                    if node.cannot_suspend() {
                        break Some(false);
                    }
                    if Instant::now() >= d {
                        break Some(true);
                    }
                    crate::runtime::park_until(d);
                }
            }
        };
        node.clear_wait_reason(reason.site);
        guard.on_granted = None; // normal exit: disarm
        let Some(timed_out) = leave else { return Outcome::Signalled };
        self.leave(id, timed_out, &on_removed)
    }

    /// `park_or_leave` ends without a signal (`timed_out`, or closed, or
    /// the caller cannot suspend): remove the entry `id` under the lock,
    /// or find it granted meanwhile. Out of the wait's own frame.
    #[inline(never)]
    fn leave(&self, id: u64, timed_out: bool, on_removed: &impl Fn(&mut Inner<S, P>)) -> Outcome<P> {
        let mut inner = self.lock();
        match inner.remove(id) {
            Some(e) => {
                on_removed(&mut inner);
                if timed_out {
                    Outcome::TimedOut(e.payload)
                } else {
                    Outcome::Cancelled(e.payload)
                }
            }
            None => Outcome::Signalled,
        }
    }
}

/// The last resort of an acquire that cannot park (a fiber being destroyed
/// by the shutdown drain, or unwinding): poll `try_acquire` with short
/// thread sleeps for up to a second (a plain thread may release), then
/// abort: the holder is a fiber that can never run again, and returning
/// without the resource would be unsound.
pub(crate) fn acquire_without_parking<T>(what: &str, mut try_acquire: impl FnMut() -> Option<T>) -> T {
    let end = Instant::now() + std::time::Duration::from_secs(1);
    loop {
        if let Some(t) = try_acquire() {
            return t;
        }
        if Instant::now() >= end {
            eprintln!(
                "numafiber: a fiber that cannot suspend (destroyed at shutdown, or unwinding a panic) \
                 blocked on a {what} that is not released; aborting instead of hanging"
            );
            std::process::abort();
        }
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}
