//! A spawned fiber's [`MainPacket`] kept in its task's [`MainSlot`], so a
//! spawn allocates nothing: the slot, its type-erased table, the entry and
//! [`new_in_task`] (the `packet` module docs, "In the task").

use crate::runtime::task::up::JoinError;

use super::main_packet::{drop_on_fiber, MainPacket};
use super::refs::PacketRef;
use super::Entry;

/// Bytes a [`MainSlot`] holds. A `Packet<()>` takes 88 bytes (state 8,
/// result 24, inline waiter 24, locked list 32), so closures capturing up
/// to 32 bytes whose result takes at most 24 (it shares the cell with the
/// `JoinError`) fit: skynet's children (16 and 8 bytes), an empty spawn
/// (unit test `in_task_sizes`). 128 is a compromise between the closures
/// it admits and the pooled task's size (352 bytes with it, about 220
/// without; BENCHMARKS.md, "Spawn without an allocation"). Under
/// `cfg(loom)` the loom types are larger: 1 KiB, so the models run this
/// path.
#[cfg(not(loom))]
pub(crate) const MAIN_IN_TASK_SIZE: usize = 128;
#[cfg(loom)]
pub(crate) const MAIN_IN_TASK_SIZE: usize = 1024;
/// Alignment of a [`MainSlot`]'s buffer (`MainBuf`'s `repr`).
pub(crate) const MAIN_IN_TASK_ALIGN: usize = 16;

#[repr(C, align(16))]
struct MainBuf(std::mem::MaybeUninit<[u8; MAIN_IN_TASK_SIZE]>);

/// Whether a spawn of `F` returning `T` keeps its closure and packet in
/// its task (size and alignment fit the [`MainSlot`]).
#[inline(always)]
pub(crate) const fn fits_in_task<F, T>() -> bool {
    std::mem::size_of::<MainPacket<F, T>>() <= MAIN_IN_TASK_SIZE
        && std::mem::align_of::<MainPacket<F, T>>() <= MAIN_IN_TASK_ALIGN
}

/// A task's room for its fiber's [`MainPacket`] (module docs, "In the
/// task"). `vt` is `Some` exactly while `buf` holds a live `MainPacket` of
/// the types `vt` was made for.
pub(crate) struct MainSlot {
    vt: std::cell::Cell<Option<&'static InTaskVt>>,
    buf: std::cell::UnsafeCell<MainBuf>,
}

impl MainSlot {
    pub(crate) fn empty() -> MainSlot {
        MainSlot {
            vt: std::cell::Cell::new(None),
            buf: std::cell::UnsafeCell::new(MainBuf(std::mem::MaybeUninit::uninit())),
        }
    }

    /// Drop the `MainPacket` this slot holds, if any (a recycled task:
    /// `NewTask::write_over`; a task freed: `Drop`). Exclusive access
    /// (`&mut`): no entry, handle or scope of the old fiber is left (each
    /// held a `TaskRef`), so its closure was taken and its result taken or
    /// dropped: the drop frees no user value (module docs).
    #[inline]
    pub(crate) fn reset(&mut self) {
        if let Some(vt) = self.vt.take() {
            // SAFETY: `vt` is `Some`: `buf` holds a live `MainPacket` of
            // `vt`'s types, dropped once (`vt` is now `None`).
            unsafe { (vt.drop)(self.buf_ptr()) };
        }
    }

    fn buf_ptr(&self) -> std::ptr::NonNull<u8> {
        // SAFETY: `UnsafeCell::get` is never null.
        unsafe { std::ptr::NonNull::new_unchecked(self.buf.get().cast::<u8>()) }
    }
}

impl Drop for MainSlot {
    fn drop(&mut self) {
        self.reset();
    }
}

/// What an [`InTaskEntry`] and a [`MainSlot`] do with the `MainPacket<F,
/// T>` in the slot, for the `F` and `T` of its spawn.
pub(crate) struct InTaskVt {
    run: unsafe fn(std::ptr::NonNull<u8>),
    fail: unsafe fn(std::ptr::NonNull<u8>, JoinError),
    cancel: unsafe fn(std::ptr::NonNull<u8>),
    drop: unsafe fn(std::ptr::NonNull<u8>),
}

impl<F, T> MainPacket<F, T>
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    const IN_TASK_VT: InTaskVt = InTaskVt {
        run: Self::run_in_task,
        fail: Self::fail_in_task,
        cancel: Self::cancel_in_task,
        drop: Self::drop_in_task,
    };

    /// # Safety (all four)
    /// `p` points to a live `MainPacket<F, T>` in a task the caller keeps
    /// alive; `run`, `fail`, `cancel`: the caller holds the run permission
    /// and calls one of them once (`InTaskEntry`); `drop`: the caller has
    /// exclusive access (`MainSlot::reset`).
    unsafe fn run_in_task(p: std::ptr::NonNull<u8>) {
        // SAFETY: the caller's contract.
        let m = unsafe { p.cast::<Self>().as_ref() };
        // Usually `None` (the handle is still there): nothing to drop, no
        // unwind guard to set up.
        if let Some(detached) = m.run_here() {
            drop_on_fiber(detached);
        }
    }
    unsafe fn fail_in_task(p: std::ptr::NonNull<u8>, e: JoinError) {
        // SAFETY: the caller's contract.
        unsafe { p.cast::<Self>().as_ref() }.fail_here(e);
    }
    unsafe fn cancel_in_task(p: std::ptr::NonNull<u8>) {
        // SAFETY: the caller's contract.
        unsafe { p.cast::<Self>().as_ref() }.cancel_now();
    }
    unsafe fn drop_in_task(p: std::ptr::NonNull<u8>) {
        // SAFETY: the caller's contract: live, exclusive, dropped once.
        unsafe { std::ptr::drop_in_place(p.cast::<Self>().as_ptr()) };
    }
}

/// A spawned fiber's entry whose `MainPacket` lives in its task's
/// [`MainSlot`]. Dropped without running, it publishes
/// `JoinError::cancelled`, like a [`FiberEntry`](super::main_packet::FiberEntry).
pub(crate) struct InTaskEntry {
    main: std::ptr::NonNull<u8>,
    vt: &'static InTaskVt,
}

// SAFETY: the entry is a claim on a `MainPacket` in its own task; it is
// used (run, failed or dropped) only by the holder of that task's run
// permission, which moves between threads with a happens-before edge
// (`runtime::task`), while the task is alive (the entry lives in the task's
// body, or in a local of the party holding the task). `F: Send` was
// required at spawn.
unsafe impl Send for InTaskEntry {}

impl InTaskEntry {
    pub(super) fn run(self) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: `main` is the live `MainPacket` of `vt`'s types in the
        // running fiber's task (alive: the worker holds it while the
        // coroutine runs); we hold the run permission; consumed once (`me`
        // is never dropped).
        unsafe { (me.vt.run)(me.main) }
    }
    pub(super) fn fail(self, e: JoinError) {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: as in `run` (the worker holds the task).
        unsafe { (me.vt.fail)(me.main, e) }
    }
}

impl Drop for InTaskEntry {
    fn drop(&mut self) {
        // SAFETY: as in `run`: the holder of the permission drops the
        // entry (the drain, or the task's own drop: `body` drops before
        // `main`, `Task`'s field order), once.
        unsafe { (self.vt.cancel)(self.main) }
    }
}

/// A spawned fiber's closure and packet in `task`'s [`MainSlot`]: the
/// entry to put in its body and the handle's packet.
///
/// # Safety
/// As [`new_main`](super::new_main) (borrows of `f` outlive the fiber), and: `task` was just
/// made (`TaskPool::alloc`) and is reachable by nobody else yet, its slot
/// is empty (`write_over` reset it), `fits_in_task::<F, T>()` holds, and
/// the returned `PacketRef` is used only while a `TaskRef` of `task` is
/// held (the `JoinHandle` keeps one).
#[inline]
pub(crate) unsafe fn new_in_task<'a, F, T>(slot: &MainSlot, f: F) -> (Entry, PacketRef<T>)
where
    F: FnOnce() -> T + Send + 'a,
    T: Send + 'a,
{
    debug_assert!(fits_in_task::<F, T>() && slot.vt.get().is_none());
    let p = slot.buf_ptr();
    // SAFETY: the buffer is large and aligned enough (`fits_in_task`),
    // empty, and nobody else can reach the task (caller).
    unsafe { p.cast::<MainPacket<F, T>>().as_ptr().write(MainPacket::new(f)) };
    let vt: &'static InTaskVt = &MainPacket::<F, T>::IN_TASK_VT;
    slot.vt.set(Some(vt));
    // SAFETY: just written; a field pointer of a live value.
    let packet = unsafe { std::ptr::NonNull::from(&p.cast::<MainPacket<F, T>>().as_ref().packet) };
    (Entry::InTask(InTaskEntry { main: p, vt }), PacketRef { packet, owner: None })
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::super::Packet;
    use super::*;
    use crate::runtime::task::Task;

    /// Closures of a fn item's type, or capturing `N` words, returning `R`.
    type Words<const N: usize> = [u64; N];

    #[test]
    fn in_task_sizes() {
        assert_eq!(std::mem::size_of::<Packet<()>>(), 88, "update MAIN_IN_TASK_SIZE's docs");
        // Captures up to 32 bytes with a result of up to 24 fit ...
        assert!(fits_in_task::<fn(), ()>());
        assert!(fits_in_task::<Words<2>, u64>(), "skynet's children");
        assert!(fits_in_task::<Words<4>, u64>());
        assert!(fits_in_task::<Words<4>, Words<2>>());
        // ... more does not: the `Arc` path.
        assert!(!fits_in_task::<Words<5>, u64>());
        assert!(!fits_in_task::<Words<4>, Words<4>>());
        #[repr(align(32))]
        struct Aligned32(#[allow(dead_code)] u8);
        assert!(!fits_in_task::<Aligned32, ()>(), "over-aligned");
        assert!(std::mem::size_of::<Task>() + 16 <= 400, "task_pool's memory bound");
    }
}
