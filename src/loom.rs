//! A small loom/std facade (in the style of tokio's `src/loom`).
//!
//! The synchronisation the scheduling protocols rely on (the fiber state
//! machine in `runtime::task`, the join `Packet`, the fork-join `Latch`, the
//! idle-worker protocol in `runtime::worker::idle`) is written against these paths.
//! In a normal build they are plain `std` types and functions, so the
//! compiled code is unchanged. Built with `RUSTFLAGS="--cfg loom"` they are
//! [loom](https://docs.rs/loom)'s instrumented types, and the models in
//! `tests/loom.rs` explore every interleaving of that real code.
//!
//! Only types that can be constructed at run time go through the facade:
//! statics need `const` initialisers, which loom's types do not have, and
//! stay on `std`. crossbeam-deque and corosensei are not loom-aware; the
//! models replace them with stand-ins (see `tests/loom.rs`).

#![allow(unused_imports)]

pub(crate) mod sync {
    #[cfg(loom)]
    pub(crate) use ::loom::sync::{Mutex, MutexGuard};
    #[cfg(not(loom))]
    pub(crate) use std::sync::{Mutex, MutexGuard};

    pub(crate) mod atomic {
        #[cfg(loom)]
        pub(crate) use ::loom::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
        #[cfg(not(loom))]
        pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicPtr, AtomicU8, AtomicUsize, Ordering};
    }
}

pub(crate) mod thread {
    #[cfg(loom)]
    pub(crate) use ::loom::thread::{current, park, yield_now, Thread};
    #[cfg(not(loom))]
    pub(crate) use std::thread::{current, park, yield_now, Thread};
}

pub(crate) mod cell {
    #[cfg(loom)]
    pub(crate) use ::loom::cell::UnsafeCell;

    /// `std::cell::UnsafeCell` with loom's closure-based API, so that loom
    /// can check every access to the cell for data races.
    #[cfg(not(loom))]
    #[derive(Debug)]
    #[repr(transparent)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    #[cfg(not(loom))]
    impl<T> UnsafeCell<T> {
        #[inline(always)]
        pub(crate) const fn new(v: T) -> UnsafeCell<T> {
            UnsafeCell(std::cell::UnsafeCell::new(v))
        }
        /// Shared access through a raw pointer.
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }
        /// Exclusive access through a raw pointer.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(loom)]
pub mod model;
