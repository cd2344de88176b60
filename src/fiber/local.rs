//! Fiber-local storage: [`fiber_local!`](crate::fiber_local) and
//! [`FiberLocal`].
//!
//! A `thread_local!` is the wrong tool inside a fiber: the fiber may resume
//! on another worker thread after any suspension point, so two reads see
//! two threads' values, and an optimised build may even keep the first
//! thread's address (module docs of [`fiber`](crate::fiber)). A fiber-local
//! value lives in the fiber's control block instead: it moves with the
//! fiber, every access from that fiber sees the same value on whichever
//! worker it runs, and it is dropped when the fiber ends.
//!
//! # Rules
//!
//! 1. Each fiber has its own map of values, created on its first access,
//!    kept in its task and reached through the running task pointer (which
//!    the runtime re-reads after every suspension), so a borrow held across
//!    a suspension point stays valid: the value does not move.
//! 2. A value is initialised lazily, by the declaration's initialiser, on
//!    the first access from a fiber.
//! 3. Values are dropped on the fiber, right after its closure returns or
//!    unwinds and *before* its joiner sees the result, in the reverse order
//!    of their first access; a destructor that touches a fiber-local again
//!    creates a new value, which is dropped in a further round. A fiber
//!    destroyed by the runtime's shutdown has its values dropped with its
//!    control block, on the thread that drains it.
//! 4. Outside a fiber (a plain thread, `Runtime::block_on`'s caller before
//!    it hands over) every thread has its own value, as with
//!    `thread_local!`; it is dropped when the thread exits.
//! 5. Only the fiber itself touches its map: no lock, no atomic.
//!
//! The map in the task and dropping it at the fiber's end are the
//! engine's (`runtime::task::locals`); this module holds the keys.

use std::any::Any;
use std::cell::{Cell, RefCell, UnsafeCell};
use std::fmt;

use crate::runtime::{LocalMap, LocalSlot};

thread_local! {
    /// Rule 4: the map of code that runs outside any fiber.
    static THREAD_MAP: UnsafeCell<Option<Box<LocalMap>>> = const { UnsafeCell::new(None) };
}

/// The calling fiber's slot (in its task, through the engine's door), or
/// the thread's one: a raw pointer, valid until the caller returns to code
/// that may end the fiber (rule 5).
#[inline(never)] // TLS read across suspensions: see `runtime::context`
fn current_slot() -> *const LocalSlot {
    let p = crate::runtime::current_locals();
    if p.is_null() {
        THREAD_MAP.with(|m| m as *const LocalSlot)
    } else {
        p
    }
}

/// A fiber-local key: declare it with [`fiber_local!`](crate::fiber_local).
///
/// Each fiber sees its own value, initialised on its first access and
/// dropped when the fiber ends; the value stays with the fiber when it
/// migrates to another worker, so a reference obtained with
/// [`with`](FiberLocal::with) may be held across suspension points. The
/// API mirrors `std::thread::LocalKey`: `with` for any `T`, plus `set`,
/// `get`, `take`, `replace` for `Cell` and `RefCell` values. Outside a
/// fiber each thread has its own value (as with `thread_local!`).
///
/// ```
/// use std::cell::Cell;
/// use numafiber::{fiber, fiber_local, Runtime};
///
/// fiber_local! {
///     static COUNTER: Cell<u32> = Cell::new(0);
/// }
///
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let sums = rt.block_on(|| {
///     let hs: Vec<_> = (0..4u32)
///         .map(|i| fiber::spawn(move || {
///             for _ in 0..=i {
///                 COUNTER.set(COUNTER.get() + 1);
///                 fiber::yield_now(); // may migrate: the value comes along
///             }
///             COUNTER.get()
///         }))
///         .collect();
///     hs.into_iter().map(fiber::await_fiber).collect::<Vec<_>>()
/// });
/// assert_eq!(sums, [1, 2, 3, 4]); // each fiber counted on its own
/// ```
pub struct FiberLocal<T: 'static> {
    init: fn() -> T,
}

impl<T: 'static> FiberLocal<T> {
    /// A key whose values start as `init()`. Used by
    /// [`fiber_local!`](crate::fiber_local); call it yourself only in a
    /// `static` (the key's identity is its address).
    ///
    /// ```
    /// use numafiber::fiber::FiberLocal;
    /// static NAME: FiberLocal<String> = FiberLocal::new(String::new);
    /// NAME.with(|n| assert!(n.is_empty()));
    /// ```
    #[doc(hidden)]
    pub const fn new(init: fn() -> T) -> FiberLocal<T> {
        FiberLocal { init }
    }

    /// Call `f` with a reference to the calling fiber's value (the
    /// thread's value outside a fiber), initialising it first if needed.
    ///
    /// The reference may be held across suspension points (yield, a lock,
    /// a channel): the value belongs to the fiber, not to a thread.
    ///
    /// # Panics
    /// If `f` panics. The initialiser may itself use fiber-locals; if it
    /// initialises this same key recursively, the value it made first is
    /// kept and the later one dropped.
    ///
    /// ```
    /// use numafiber::{fiber_local, Runtime};
    /// fiber_local! { static ID: u64 = 7; }
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// assert_eq!(rt.block_on(|| ID.with(|v| *v)), 7);
    /// ```
    pub fn with<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        let v = self.value();
        // SAFETY: `value` points into a box owned by the calling fiber's
        // (or thread's) map, which drops it only after the fiber's closure
        // has returned (rule 3) or on thread exit (rule 4): neither can
        // happen while `f` runs on this fiber or thread. Only shared
        // references to it are ever made.
        f(unsafe { &*v })
    }

    fn key(&'static self) -> usize {
        self as *const Self as usize
    }

    /// The calling fiber's value, initialised if needed.
    fn value(&'static self) -> *const T {
        let key = self.key();
        let slot = current_slot();
        // SAFETY (the three blocks below): `slot` is the calling fiber's or
        // thread's own slot, touched by nobody else (rule 5); each `&mut`
        // ends before user code (the initialiser) runs, and boxes inside
        // the map never move when the vector grows.
        if let Some(map) = unsafe { (*(*slot).get()).as_deref() } {
            if let Some(v) = map.get(key) {
                return downcast::<T>(v);
            }
        }
        let fresh: Box<dyn Any> = Box::new((self.init)());
        let map = unsafe { (*(*slot).get()).get_or_insert_with(Default::default) };
        if let Some(v) = map.get(key) {
            // The initialiser initialised this key recursively: keep that.
            drop(fresh);
            return downcast::<T>(v);
        }
        let p = &*fresh as *const dyn Any;
        unsafe { (*(*slot).get()).as_mut() }.expect("inserted above").push(key, fresh);
        downcast::<T>(p)
    }
}

fn downcast<T: 'static>(v: *const dyn Any) -> *const T {
    // SAFETY: `v` points to a live value in a map (caller).
    let any = unsafe { &*v };
    any.downcast_ref::<T>().expect("a fiber-local key always stores its own type") as *const T
}

impl<T: 'static> fmt::Debug for FiberLocal<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FiberLocal").finish_non_exhaustive()
    }
}

impl<T: 'static> FiberLocal<Cell<T>> {
    /// Set the calling fiber's value (initialising the key first if needed,
    /// as `std::thread::LocalKey::set` does not: the old value is dropped).
    ///
    /// ```
    /// use std::cell::Cell;
    /// use numafiber::fiber_local;
    /// fiber_local! { static X: Cell<i32> = Cell::new(1); }
    /// X.set(5);
    /// assert_eq!(X.get(), 5);
    /// ```
    pub fn set(&'static self, value: T) {
        self.with(|c| c.set(value));
    }

    /// A copy of the calling fiber's value.
    ///
    /// ```
    /// use std::cell::Cell;
    /// use numafiber::fiber_local;
    /// fiber_local! { static X: Cell<i32> = Cell::new(3); }
    /// assert_eq!(X.get(), 3);
    /// ```
    pub fn get(&'static self) -> T
    where
        T: Copy,
    {
        self.with(Cell::get)
    }

    /// Take the calling fiber's value, leaving `T::default()`.
    ///
    /// ```
    /// use std::cell::Cell;
    /// use numafiber::fiber_local;
    /// fiber_local! { static X: Cell<u8> = Cell::new(9); }
    /// assert_eq!(X.take(), 9);
    /// assert_eq!(X.get(), 0);
    /// ```
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(Cell::take)
    }

    /// Replace the calling fiber's value, returning the old one.
    ///
    /// ```
    /// use std::cell::Cell;
    /// use numafiber::fiber_local;
    /// fiber_local! { static X: Cell<u8> = Cell::new(1); }
    /// assert_eq!(X.replace(2), 1);
    /// ```
    pub fn replace(&'static self, value: T) -> T {
        self.with(|c| c.replace(value))
    }
}

impl<T: 'static> FiberLocal<RefCell<T>> {
    /// Set the calling fiber's value.
    ///
    /// # Panics
    /// If the value is currently borrowed (`RefCell` rules).
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use numafiber::fiber_local;
    /// fiber_local! { static V: RefCell<Vec<u8>> = RefCell::new(Vec::new()); }
    /// V.set(vec![1, 2]);
    /// assert_eq!(V.take(), [1, 2]);
    /// ```
    pub fn set(&'static self, value: T) {
        self.with(|c| *c.borrow_mut() = value);
    }

    /// Take the calling fiber's value, leaving `T::default()`.
    ///
    /// # Panics
    /// If the value is currently borrowed.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use numafiber::fiber_local;
    /// fiber_local! { static S: RefCell<String> = RefCell::new("a".into()); }
    /// assert_eq!(S.take(), "a");
    /// ```
    pub fn take(&'static self) -> T
    where
        T: Default,
    {
        self.with(RefCell::take)
    }

    /// Replace the calling fiber's value, returning the old one.
    ///
    /// # Panics
    /// If the value is currently borrowed.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use numafiber::fiber_local;
    /// fiber_local! { static S: RefCell<u32> = RefCell::new(1); }
    /// assert_eq!(S.replace(2), 1);
    /// ```
    pub fn replace(&'static self, value: T) -> T {
        self.with(|c| c.replace(value))
    }

    /// Call `f` with a shared borrow of the calling fiber's value.
    ///
    /// # Panics
    /// If the value is mutably borrowed.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use numafiber::fiber_local;
    /// fiber_local! { static S: RefCell<Vec<u8>> = RefCell::new(vec![4]); }
    /// assert_eq!(S.with_borrow(|v| v.len()), 1);
    /// ```
    pub fn with_borrow<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&T) -> R,
    {
        self.with(|c| f(&c.borrow()))
    }

    /// Call `f` with a mutable borrow of the calling fiber's value.
    ///
    /// # Panics
    /// If the value is already borrowed.
    ///
    /// ```
    /// use std::cell::RefCell;
    /// use numafiber::fiber_local;
    /// fiber_local! { static S: RefCell<Vec<u8>> = RefCell::new(Vec::new()); }
    /// S.with_borrow_mut(|v| v.push(1));
    /// assert_eq!(S.take(), [1]);
    /// ```
    pub fn with_borrow_mut<F, R>(&'static self, f: F) -> R
    where
        F: FnOnce(&mut T) -> R,
    {
        self.with(|c| f(&mut c.borrow_mut()))
    }
}

/// Declare fiber-local statics, in `thread_local!`'s syntax: each fiber
/// (and, outside fibers, each thread) has its own value, which migrates
/// with the fiber and is dropped when it ends. See
/// [`FiberLocal`](crate::fiber::FiberLocal) for the accessors and
/// [`fiber`](crate::fiber), "Fiber-locals", for the rules.
///
/// ```
/// use std::cell::RefCell;
/// use numafiber::{fiber, fiber_local, Runtime};
///
/// fiber_local! {
///     /// The request id of the fiber's current request (for logging).
///     static REQUEST: RefCell<Option<u64>> = RefCell::new(None);
///     pub(crate) static DEPTH: std::cell::Cell<u32> = std::cell::Cell::new(0);
/// }
///
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     REQUEST.set(Some(1));
///     let child = fiber::spawn(|| REQUEST.take()); // a fresh value
///     assert_eq!(fiber::await_fiber(child), None);
///     assert_eq!(REQUEST.take(), Some(1));
///     DEPTH.set(DEPTH.get() + 1);
/// });
/// ```
#[macro_export]
macro_rules! fiber_local {
    () => {};
    ($(#[$attr:meta])* $vis:vis static $name:ident : $t:ty = $init:expr; $($rest:tt)*) => {
        $(#[$attr])* $vis static $name: $crate::fiber::FiberLocal<$t> = {
            fn __numafiber_init() -> $t {
                $init
            }
            $crate::fiber::FiberLocal::new(__numafiber_init)
        };
        $crate::fiber_local!($($rest)*);
    };
    ($(#[$attr:meta])* $vis:vis static $name:ident : $t:ty = $init:expr) => {
        $crate::fiber_local!($(#[$attr])* $vis static $name: $t = $init;);
    };
}
