//! The views of a fiber's packet held outside the fiber: the
//! `JoinHandle`'s [`PacketRef`] and a scope's [`CompletionRef`].

use std::sync::Arc;

use super::state::{Completion, Packet};

/// The `JoinHandle`'s share of a fiber's packet: a pointer to it (for
/// direct calls) and, for an `Arc` [`MainPacket`](super::main_packet::MainPacket), the counted owner. An
/// in-task packet has no owner here: the handle's `TaskRef` keeps the task,
/// and with it the packet, alive.
pub(crate) struct PacketRef<T> {
    pub(super) packet: std::ptr::NonNull<Packet<T>>,
    pub(super) owner: Option<Arc<dyn Completion + Send + Sync>>,
}

// SAFETY: a `PacketRef` is an `Arc` of a `Send + Sync` allocation (for
// `T: Send`) plus a pointer into it, or a pointer into a task (`Sync`)
// that its holder keeps alive; `Packet<T>` is `Send + Sync` for `T: Send`.
unsafe impl<T: Send> Send for PacketRef<T> {}
// SAFETY: as for `Send`.
unsafe impl<T: Send> Sync for PacketRef<T> {}

impl<T> std::ops::Deref for PacketRef<T> {
    type Target = Packet<T>;
    #[inline]
    fn deref(&self) -> &Packet<T> {
        // SAFETY: points into the allocation `owner` keeps alive, or into
        // the task the holder keeps alive (`new_in_task`'s contract).
        unsafe { self.packet.as_ref() }
    }
}

impl<T> PacketRef<T> {
    /// Whether the packet lives in its task (owner side: `detach` on drop).
    #[inline]
    pub(crate) fn in_task(&self) -> bool {
        self.owner.is_none()
    }

    /// The packet as a scope sees it (type-erased).
    ///
    /// # Safety
    /// For an in-task packet the result points into the task: the caller
    /// uses it only while it holds a `TaskRef` of the handle's task (a
    /// scope keeps one beside it).
    pub(crate) unsafe fn completion<'a>(&'a self) -> CompletionRef
    where
        T: Send + 'a,
    {
        match &self.owner {
            Some(o) => CompletionRef::Shared(o.clone()),
            None => {
                let p: std::ptr::NonNull<dyn Completion + Send + Sync + 'a> = self.packet;
                // SAFETY: lifetime erasure only; the caller uses the
                // pointer while the task is alive, and the packet's `T`
                // values are gone or taken by then only through the owner
                // and completer, never through this view (it reads the
                // state word).
                CompletionRef::InTask(unsafe {
                    std::mem::transmute::<
                        std::ptr::NonNull<dyn Completion + Send + Sync + 'a>,
                        std::ptr::NonNull<dyn Completion + Send + Sync + 'static>,
                    >(p)
                })
            }
        }
    }
}

/// A scope's view of a child's packet (`PacketRef::completion`).
pub(crate) enum CompletionRef {
    Shared(Arc<dyn Completion + Send + Sync>),
    /// Into the child's task; valid while a `TaskRef` of it is held.
    InTask(std::ptr::NonNull<dyn Completion + Send + Sync>),
}

// SAFETY: an `Arc` of a `Send + Sync` value, or a pointer to a `Sync`
// packet inside a task kept alive by its holder (`completion`'s contract).
unsafe impl Send for CompletionRef {}
// SAFETY: as for `Send`: only `&self` methods of a `Sync` value.
unsafe impl Sync for CompletionRef {}

impl std::ops::Deref for CompletionRef {
    type Target = dyn Completion + Send + Sync;
    #[inline]
    fn deref(&self) -> &Self::Target {
        match self {
            CompletionRef::Shared(a) => &**a,
            // SAFETY: the task is alive (`completion`'s contract).
            CompletionRef::InTask(p) => unsafe { p.as_ref() },
        }
    }
}
