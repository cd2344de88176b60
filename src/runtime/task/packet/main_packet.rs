//! A spawned fiber's closure and packet ([`MainPacket`]): the fiber side
//! that runs the closure and completes the packet, and its shared (`Arc`)
//! form, [`new_main`] and [`FiberEntry`]. The in-task form is in `in_task`
//! (the `packet` module docs, "The closure and the packet").

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;

use crate::runtime::task::up::{self, Cancelled, JoinError};

use super::refs::PacketRef;
use super::state::{Completion, Packet};
use super::Entry;

/// A spawned fiber's entry: its share of the [`MainPacket`]. Dropped
/// without running (shutdown drain, a coroutine dropped before its first
/// resume), it publishes `JoinError::cancelled`, like a dropped `Main`.
pub(crate) struct FiberEntry(std::mem::ManuallyDrop<Arc<dyn SharedMain>>);

impl FiberEntry {
    pub(super) fn into_inner(self) -> Arc<dyn SharedMain> {
        let mut me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `me` is never dropped, so the `Arc` is taken exactly once.
        unsafe { std::mem::ManuallyDrop::take(&mut me.0) }
    }
}

impl Drop for FiberEntry {
    fn drop(&mut self) {
        // SAFETY: `drop` runs once and `self.0` is not used afterwards.
        let m = unsafe { std::mem::ManuallyDrop::take(&mut self.0) };
        m.cancel();
    }
}

/// The fiber side of a [`MainPacket`] (object-safe).
pub(crate) trait SharedMain: Send + Sync {
    fn run(self: Arc<Self>);
    fn fail(self: Arc<Self>, e: JoinError);
    /// Dropped unrun: publish `JoinError::cancelled` and drop the closure.
    fn cancel(&self);
}

/// A spawned fiber's closure and its join packet, either in one `Arc`
/// (the task's entry holds one reference, the `JoinHandle` the other) or
/// in its task's [`MainSlot`](super::MainSlot) (module docs, "In the task").
/// The closure cell is touched only by the holder of the fiber's run
/// permission (`runtime::task`): the worker that runs it, or the drain.
pub(crate) struct MainPacket<F, T> {
    pub(super) packet: Packet<T>,
    f: std::cell::UnsafeCell<Option<F>>,
}

// SAFETY: `f` is used only under the fiber's run permission, which is
// unique at every instant and moves between threads with a
// happens-before edge (`runtime::task`); the packet is `Sync` for `T: Send`.
unsafe impl<F: Send, T: Send> Sync for MainPacket<F, T> {}

impl<F, T> MainPacket<F, T> {
    pub(super) fn new(f: F) -> MainPacket<F, T> {
        MainPacket { packet: Packet::empty(), f: std::cell::UnsafeCell::new(Some(f)) }
    }

    /// Complete as cancelled unless done, then drop the closure if it is
    /// still there.
    pub(super) fn cancel_now(&self) {
        if !self.packet.is_done() {
            // SAFETY: a `MainPacket`'s packet has one completer, this
            // fiber (`new_main`, `new_in_task`), and it has not completed
            // (not done). A detached `JoinError::cancelled` handed back
            // runs no user code when dropped here.
            drop(unsafe { self.packet.complete_unique(Err(JoinError::cancelled())) });
        }
        // SAFETY: the run permission (type docs): ours.
        drop(unsafe { (*self.f.get()).take() });
    }
}

impl<F, T> MainPacket<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    /// Run the closure and publish its result. Returns the result when
    /// the owner detached first (in-task packets only): the caller drops
    /// it with [`drop_on_fiber`].
    pub(super) fn run_here(&self) -> Option<Result<T, JoinError>> {
        // SAFETY: the run permission (type docs).
        let f = unsafe { (*self.f.get()).take() }.expect("fiber main runs once");
        let r = up::run_main(f);
        if r.is_ok() || !up::current_is_cancelling() {
            // Count before publishing, so a joiner that reads the stats
            // right after its join sees this fiber as completed.
            up::note_completed();
        }
        let r = match r {
            Ok(v) => Ok(v),
            Err(p) => {
                if up::current_is_cancelling() {
                    // A forced unwind from the shutdown drain: let it reach
                    // the coroutine root, reporting the cancellation first.
                    self.cancel_now();
                    std::panic::resume_unwind(p);
                }
                if p.is::<Cancelled>() {
                    drop_on_fiber(p);
                    Err(JoinError::cancelled_by_handle())
                } else {
                    Err(JoinError::panicked(p))
                }
            }
        };
        // SAFETY: this fiber is its packet's one completer (`new_main`),
        // completing once: not done yet (only `cancel`, never called on a
        // started fiber, and `fail`, only for unstarted ones, complete too).
        unsafe { self.packet.complete_unique(r) }
    }

    /// The fiber cannot run: publish `e` and drop the closure.
    pub(super) fn fail_here(&self, e: JoinError) {
        // SAFETY: as in `run_here`; an unstarted fiber, not completed. A
        // detached `JoinError` handed back runs no user code when dropped.
        drop(unsafe { self.packet.complete_unique(Err(e)) });
        // SAFETY: the run permission (type docs).
        drop(unsafe { (*self.f.get()).take() });
    }
}

/// Drop what a finished fiber's result leaves to the fiber (a detached
/// fiber's value or panic payload, the last reference of its
/// `MainPacket`), here on the fiber's stack. A destructor that panics here
/// must not escape the fiber (it would reach the worker loop and abort the
/// process): contain and report it.
pub(crate) fn drop_on_fiber<X>(x: X) {
    let id = up::current_id();
    if let Err(p) = catch_unwind(AssertUnwindSafe(move || drop(x))) {
        report_contained_drop_panic(id, "a detached fiber's result", &*p);
        // That panic's payload may panic when dropped as well: then
        // leak it rather than loop.
        if let Err(again) = catch_unwind(AssertUnwindSafe(move || drop(p))) {
            std::mem::forget(again);
        }
    }
}

impl<F, T> SharedMain for MainPacket<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    fn run(self: Arc<Self>) {
        let detached = self.run_here();
        // A detached fiber's packet dies with us: its value (or panic
        // payload) is dropped here, on the fiber's stack. (`detached` is
        // `None`: nobody calls `detach` on an `Arc` packet.)
        drop_on_fiber((detached, self));
    }
    fn fail(self: Arc<Self>, e: JoinError) {
        self.fail_here(e);
    }
    fn cancel(&self) {
        self.cancel_now();
    }
}

impl<F: Send, T: Send> Completion for MainPacket<F, T> {
    fn is_done(&self) -> bool {
        self.packet.is_done()
    }
    fn register_current(&self) -> bool {
        self.packet.register_current()
    }
    fn unjoined_panic(&self) -> bool {
        self.packet.unjoined_panic()
    }
}

/// A spawned fiber's entry and its handle's packet, in one allocation.
///
/// # Safety
/// As `fiber::spawn_unchecked`: the fiber finishes (or is destroyed) before
/// anything `f` borrows goes away (the lifetimes are erased here).
pub(crate) unsafe fn new_main<'a, F, T>(f: F) -> (Entry, PacketRef<T>)
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    let m = Arc::new(MainPacket::new(f));
    let packet = std::ptr::NonNull::from(&m.packet);
    let owner: Arc<dyn Completion + Send + Sync + 'a> = m.clone();
    let main: Arc<dyn SharedMain + 'a> = m;
    // SAFETY: lifetime erasure only (caller's contract). After the fiber
    // is finished or destroyed the closure cell is empty, so a late drop
    // of the allocation runs no code of `F`.
    let owner: Arc<dyn Completion + Send + Sync> = unsafe { std::mem::transmute(owner) };
    // SAFETY: as above.
    let main: Arc<dyn SharedMain> = unsafe { std::mem::transmute(main) };
    (Entry::Fiber(FiberEntry(std::mem::ManuallyDrop::new(main))), PacketRef { packet, owner: Some(owner) })
}

/// Say on stderr that a destructor's panic was contained (the fiber's
/// result had no joiner to receive it).
pub(crate) fn report_contained_drop_panic(id: Option<u64>, what: &str, p: &(dyn std::any::Any + Send)) {
    let msg = p
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| p.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("<non-string payload>");
    let who = id.map_or_else(|| "a fiber".to_string(), |i| format!("fiber {i}"));
    eprintln!("numafiber: the destructor of {what} of {who} panicked ({msg}); contained, the runtime goes on");
}
