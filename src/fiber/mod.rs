//! Fibers: spawn, yield, join, sleep, fork-join, scopes.
//!
//! A fiber is a function running on its own stack, switched cooperatively on
//! the worker threads of a [`Runtime`](crate::Runtime). Everything here
//! mirrors `std::thread`:
//!
//! ```
//! use numafiber::{fiber, Runtime};
//! let rt = Runtime::builder().workers(2).build().unwrap();
//! let out = rt.block_on(|| {
//!     let h = fiber::spawn(|| {
//!         fiber::yield_now();
//!         21
//!     });
//!     fiber::await_fiber(h) * 2
//! });
//! assert_eq!(out, 42);
//! ```
//!
//! # Thread-locals and migration
//!
//! A fiber that suspends (yield, join, sleep, a contended lock) may resume
//! on another worker thread. A `thread_local!` read before the suspension
//! and one after it may then see *different* threads' values, and in
//! optimised builds the compiler may even reuse the first thread's address
//! after the switch. Rules for user code:
//!
//! * do not hold a reference into a `thread_local!` across a suspension
//!   point, and do not rely on two accesses seeing the same thread;
//! * for thread-affine state (thread-locals, `!Send` handles that must stay
//!   on their thread) use [`spawn_pinned`], whose fiber never migrates;
//! * for per-fiber state, keep it in the fiber's own variables (its stack
//!   moves with it), or in a [`fiber_local!`](crate::fiber_local) static,
//!   whose values live in the fiber's control block and move with it.
//!
//! # Fiber-locals
//!
//! [`fiber_local!`](crate::fiber_local) declares statics with one value per
//! fiber, in `thread_local!`'s syntax and with `std::thread::LocalKey`'s
//! accessors ([`FiberLocal`]): initialised on a fiber's first access,
//! sound across migrations (a borrow may be held across a suspension),
//! dropped on the fiber when it ends, before its joiner sees the result.
//! Outside a fiber each thread has its own value. See `fiber::local`'s
//! rules in [`FiberLocal`].
//!
//! # Cancellation, park, futures
//!
//! [`JoinHandle::cancel`] makes a fiber unwind at its current or next
//! suspension point (every wait of this crate, and [`yield_now`]);
//! [`shield`] defers it over a section. [`park`] / [`Fiber::unpark`] are
//! `std::thread::park` for fibers. [`block_on_future`] runs a
//! `std::future::Future` in a fiber, parking the fiber between polls, and
//! a [`JoinHandle`] can be `.await`ed from async code ([`future`]).
//!
//! The runtime follows the same rule internally: its per-thread state is
//! only read through non-inlined accessors, so [`current`] always reports
//! the worker that is really running the fiber.
//!
//! # Stacks
//!
//! A fiber owns no stack until it first runs, so spawning is never limited
//! by how many fibers exist. Its stack is [`DEFAULT_STACK_SIZE`] (256 KiB)
//! of address space, committed lazily: a fiber costs the pages it touches
//! (one 4 KiB page for a fiber that just parks; measured 4.5 KiB of RSS per
//! parked fiber with a million of them). Below each stack is a guard page,
//! so an overflow is caught, reported with the fiber's id, name and stack
//! size, and the process aborts, like Rust's report for threads. Stacks are
//! carved from large slabs, and on Linux 6.13 and newer the guard pages are
//! `MADV_GUARD_INSTALL` markers that need no memory mapping of their own,
//! so `vm.max_map_count` limits nothing. On older kernels (or with
//! `NUMAFIBER_NO_GUARD_INSTALL=1`) each stack is a mapping with an
//! `mprotect`ed guard, and the process can afford about
//! `vm.max_map_count / 2` of them ([`StackUsage::fallback_budget`]): a
//! worker at that budget runs the fibers that have stacks first and starts
//! new ones as stacks are freed; only when nothing can proceed does
//! `Runtime::block_on` report it, naming the limit and the fix. Any
//! `stack_size` from [`MIN_STACK_SIZE`] (16 KiB) up to [`MAX_STACK_SIZE`]
//! works; the runtime's panic report runs on a side stack of the worker.

mod blocking;
mod cancel;
pub mod future;
mod join_set;
mod local;
mod park;

use std::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use crate::runtime::error::{JoinError, SpawnError, SpawnErrorKind};
pub use crate::runtime::task::stack::{
    stack_usage, StackUsage, DEFAULT_STACK_SIZE, MAX_STACK_SIZE, MIN_SLAB_STACK_SIZE, MIN_STACK_SIZE,
};
pub use blocking::{block_in_place, spawn_blocking, BLOCKING_KEEP_ALIVE, MAX_BLOCKING_THREADS};
pub use cancel::{is_cancelled, shield, Cancelled, ShieldGuard};
pub use future::{block_on_future, JoinFuture};
pub use join_set::JoinSet;
pub use local::FiberLocal;
pub use park::{current_handle, park, park_timeout, Fiber};

pub use crate::runtime::task::join::JoinHandle;

use crate::runtime::task::{packet, wait_kind, TaskRef};
use crate::runtime::{self, Handle, SpawnOpts};

// ---------------------------------------------------------------------------
// Public API.

/// Spawn a fiber on the current fiber's runtime; it is placed by the
/// runtime's policy.
///
/// **While the runtime shuts down** (a fiber still finishing its slice
/// after `block_on` returned and the runtime was dropped, or a destructor
/// that the shutdown drain runs) the new fiber is cancelled at once: the
/// closure is dropped without running, and the handle's
/// [`join`](JoinHandle::join) returns an error with
/// [`is_cancelled()`](crate::JoinError::is_cancelled), as for every fiber
/// the shutdown stops. [`Builder::spawn`] and
/// [`Handle::try_spawn`](crate::runtime::Handle::try_spawn) return
/// [`SpawnErrorKind::ShuttingDown`]
/// instead.
///
/// # Panics
/// Outside a fiber of a runtime (like `tokio::spawn`); use
/// [`Runtime::spawn`](crate::Runtime::spawn) from plain threads, or
/// [`Builder::spawn`] for a `Result`. When the closure plus its result is
/// larger than a quarter of the runtime's stack size (box large captures).
/// Never because the runtime shuts down
/// (above), nor because of how many fibers exist: a fiber owns no stack
/// until it first runs, and stacks are carved from slabs without a memory
/// mapping each (see "Stacks" in the module docs).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// assert_eq!(rt.block_on(|| fiber::await_fiber(fiber::spawn(|| 7))), 7);
/// ```
#[track_caller]
pub fn spawn<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    runtime::spawn_current(f, SpawnOpts::infallible()).unwrap_or_else(|e| panic!("{e}"))
}

/// Spawn a fiber that never migrates: it always runs on the current worker
/// (or, from a plain thread, on the worker placement picks). Use it for
/// fibers that touch `thread_local!` state or thread-affine handles.
///
/// While the runtime shuts down the fiber is cancelled at once, as with
/// [`spawn`].
///
/// # Panics
/// Outside a fiber of a runtime.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let same = rt.block_on(|| {
///     fiber::await_fiber(fiber::spawn_pinned(|| {
///         let w = fiber::current().unwrap().worker;
///         (0..100).all(|_| { fiber::yield_now(); fiber::current().unwrap().worker == w })
///     }))
/// });
/// assert!(same);
/// ```
#[track_caller]
pub fn spawn_pinned<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    runtime::spawn_current(f, SpawnOpts { pinned: true, ..SpawnOpts::infallible() }).unwrap_or_else(|e| panic!("{e}"))
}

/// Let other fibers run; the caller is requeued behind them. Outside a
/// fiber this is `std::thread::yield_now`.
///
/// ```
/// numafiber::fiber::yield_now(); // fine on a plain thread too
/// ```
#[inline]
pub fn yield_now() {
    // Inlined into the caller (see `runtime::yield_now`).
    runtime::yield_now()
}

/// Wait for a fiber and return its value (corolib `co_await` on a task).
/// A panic of the fiber is re-raised in the caller.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// assert_eq!(rt.block_on(|| fiber::await_fiber(fiber::spawn(|| "done"))), "done");
/// ```
#[track_caller]
pub fn await_fiber<T>(h: JoinHandle<T>) -> T {
    match h.join() {
        Ok(v) => v,
        Err(e) => e.resume(),
    }
}

/// Park the fiber (not the worker thread) for at least `d`. Outside a fiber
/// this is `std::thread::sleep`. In a destructor that the shutdown drain
/// runs (a fiber being destroyed by [`Runtime::shutdown`](crate::Runtime::shutdown)
/// or drop) it returns at once, so it never delays shutdown.
///
/// ```
/// use std::time::{Duration, Instant};
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let t = Instant::now();
/// rt.block_on(|| fiber::sleep(Duration::from_millis(5)));
/// assert!(t.elapsed() >= Duration::from_millis(5));
/// ```
#[track_caller]
pub fn sleep(d: Duration) {
    runtime::sleep(d)
}

/// Park the fiber (not the worker thread) until `deadline` at least
/// (Boost `this_fiber::sleep_until`); returns at once if it has passed.
/// Outside a fiber the thread sleeps. Same rules as [`sleep`].
///
/// ```
/// use std::time::{Duration, Instant};
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let deadline = Instant::now() + Duration::from_millis(5);
/// rt.block_on(|| fiber::sleep_until(deadline));
/// assert!(Instant::now() >= deadline);
/// ```
#[track_caller]
pub fn sleep_until(deadline: Instant) {
    // `sleep` measures from a later `now`, so this never wakes early.
    if let Some(d) = deadline.checked_duration_since(Instant::now()) {
        sleep(d);
    }
}

/// Run `a` and `b` in parallel, possibly, and return both results
/// (`rayon::join` shape). `b` is offered to thieves on the current
/// worker's deque while the caller runs `a`; if nobody took it, the caller
/// runs it inline, without a fiber or a stack of its own (no allocation).
/// A stolen `b` runs as a fiber on the thief. Both closures may borrow from
/// the caller. Outside a fiber both run sequentially on the caller. A panic
/// in either is re-raised after both have finished. A caller cancelled
/// meanwhile ([`JoinHandle::cancel`]) cancels a stolen `b` (which then
/// never starts, or unwinds at its next cancellation point), waits for it,
/// and unwinds; inside a [`shield`] it waits for `b` to finish.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// fn fib(n: u64) -> u64 {
///     if n < 2 { return n; }
///     let (a, b) = fiber::join(|| fib(n - 1), || fib(n - 2));
///     a + b
/// }
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// assert_eq!(rt.block_on(|| fib(20)), 6765);
/// ```
#[track_caller]
pub fn join<A, B, RA, RB>(a: A, b: B) -> (RA, RB)
where
    A: FnOnce() -> RA + Send,
    B: FnOnce() -> RB + Send,
    RA: Send,
    RB: Send,
{
    runtime::join(a, b)
}

/// Wait for every handle, in order, and return their values.
/// A panic of any fiber is re-raised (after the earlier ones were taken).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let v = rt.block_on(|| fiber::when_all((0..4).map(|i| fiber::spawn(move || i * 10)).collect()));
/// assert_eq!(v, vec![0, 10, 20, 30]);
/// ```
///
/// Scoped handles work too (all of one kind per call):
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let data = [1u64, 2, 3, 4];
/// let sums = rt.block_on(|| fiber::scope(|s| {
///     fiber::when_all(data.chunks(2).map(|c| s.spawn(move || c.iter().sum::<u64>())).collect())
/// }));
/// assert_eq!(sums, vec![3, 7]);
/// ```
#[track_caller]
pub fn when_all<H: FiberHandle>(handles: Vec<H>) -> Vec<H::Output> {
    // A loop, not `map(..)`: the closure of a `map` would be the caller
    // `#[track_caller]` sees (the wait site in dumps).
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await_fiber());
    }
    out
}

mod sealed {
    pub trait Sealed {}
    impl<T> Sealed for super::JoinHandle<T> {}
    impl<T> Sealed for super::ScopedJoinHandle<'_, T> {}
}

/// A handle [`when_all`] can wait for: [`JoinHandle`] and
/// [`ScopedJoinHandle`] (sealed).
///
/// ```
/// use numafiber::{fiber::{self, FiberHandle}, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// assert_eq!(rt.block_on(|| fiber::spawn(|| 3).await_fiber()), 3);
/// ```
pub trait FiberHandle: sealed::Sealed {
    /// The fiber's value.
    type Output;
    /// Wait for the fiber and return its value; re-raise its panic.
    ///
    /// # Panics
    /// When the fiber panicked (its payload is resumed) or was cancelled.
    #[track_caller]
    fn await_fiber(self) -> Self::Output;
}

impl<T> FiberHandle for JoinHandle<T> {
    type Output = T;
    #[track_caller]
    fn await_fiber(self) -> T {
        await_fiber(self)
    }
}

impl<T> FiberHandle for ScopedJoinHandle<'_, T> {
    type Output = T;
    #[track_caller]
    fn await_fiber(self) -> T {
        await_fiber(self.inner)
    }
}

/// Wait until the first of `handles` finishes; return its index and value.
/// The others keep running, detached (their results are dropped); use
/// [`when_any_cancel_rest`] to cancel them instead. A panic of the first
/// finisher is re-raised.
///
/// # Panics
/// If `handles` is empty.
///
/// ```
/// use std::time::Duration;
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let (i, v) = rt.block_on(|| fiber::when_any(vec![
///     fiber::spawn(|| { fiber::sleep(Duration::from_millis(200)); "slow" }),
///     fiber::spawn(|| "fast"),
/// ]));
/// assert_eq!((i, v), (1, "fast"));
/// ```
#[track_caller]
pub fn when_any<T>(handles: Vec<JoinHandle<T>>) -> (usize, T) {
    when_any_then(handles, |_| {})
}

/// [`when_any`], cancelling the losers ([`JoinHandle::cancel`]) before it
/// returns: they unwind at their next cancellation point, detached. Also
/// when the first finisher panicked (its panic is re-raised after the
/// cancellations), and when the caller itself is cancelled while it waits.
///
/// # Panics
/// If `handles` is empty.
///
/// ```
/// use std::time::Duration;
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let (i, v) = rt.block_on(|| fiber::when_any_cancel_rest(vec![
///     fiber::spawn(|| { fiber::sleep(Duration::from_secs(3600)); "slow" }), // cancelled
///     fiber::spawn(|| "fast"),
/// ]));
/// assert_eq!((i, v), (1, "fast"));
/// ```
#[track_caller]
pub fn when_any_cancel_rest<T>(handles: Vec<JoinHandle<T>>) -> (usize, T) {
    when_any_then(handles, |hs| {
        for h in hs {
            h.cancel();
        }
    })
}

/// `when_any`, calling `losers` on the handles once the wait is over
/// (returning, re-raising a panic, or unwinding).
#[track_caller]
fn when_any_then<T>(handles: Vec<JoinHandle<T>>, losers: impl Fn(&[JoinHandle<T>])) -> (usize, T) {
    struct Losers<'a, T, F: Fn(&[JoinHandle<T>])>(&'a [JoinHandle<T>], F);
    impl<T, F: Fn(&[JoinHandle<T>])> Drop for Losers<'_, T, F> {
        fn drop(&mut self) {
            (self.1)(self.0);
        }
    }
    let _losers = Losers(&handles, losers);
    assert!(!handles.is_empty(), "fiber::when_any needs at least one handle");
    loop {
        for (i, h) in handles.iter().enumerate() {
            // SAFETY (the packet calls of this loop): `when_any` owns the
            // handles, so it is each packet's owner; it takes one result.
            if let Some(r) = unsafe { h.packet.try_take() } {
                for h in &handles {
                    unsafe { h.packet.clear_waiter() };
                }
                return match r {
                    Ok(v) => (i, v),
                    Err(e) => e.resume(),
                };
            }
        }
        let mut any_done = false;
        for h in &handles {
            // SAFETY: as above.
            any_done |= unsafe { h.packet.register_owner() };
        }
        if !any_done {
            runtime::set_wait_reason(wait_kind::JOIN_ANY, handles[0].task.id);
            runtime::park();
            runtime::set_wait_reason(wait_kind::NONE, 0);
        }
    }
}

/// What [`current`] reports about the running fiber.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FiberInfo {
    /// Process-unique id.
    pub id: u64,
    /// Name given with [`Builder::name`].
    pub name: Option<String>,
    /// Index of the worker running the fiber right now.
    pub worker: usize,
    /// NUMA node of that worker (in the runtime's topology).
    pub node: usize,
}

/// The running fiber, or `None` on a plain thread.
///
/// ```
/// use numafiber::{fiber, Runtime};
/// assert!(fiber::current().is_none());
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// let info = rt.block_on(|| fiber::current().unwrap());
/// assert_eq!(info.worker, 0);
/// ```
pub fn current() -> Option<FiberInfo> {
    let (id, name, worker, node) = runtime::current_fiber()?;
    Some(FiberInfo { id, name, worker, node })
}

/// Configures one fiber (`std::thread::Builder` shape).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let name = rt.block_on(|| {
///     let h = fiber::Builder::new().name("io").stack_size(256 << 10)
///         .spawn(|| fiber::current().unwrap().name)
///         .unwrap();
///     fiber::await_fiber(h)
/// });
/// assert_eq!(name.as_deref(), Some("io"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Builder {
    opts: BuilderOpts,
}

#[derive(Debug, Clone, Default)]
struct BuilderOpts {
    name: Option<String>,
    stack_size: Option<usize>,
    node: Option<usize>,
    worker: Option<usize>,
    pinned: bool,
    local: bool,
    eager: bool,
}

impl Builder {
    /// Defaults: unnamed, the runtime's stack size, placed by the policy.
    pub fn new() -> Builder {
        Builder::default()
    }
    /// Name (shown by [`current`] and in reports).
    pub fn name(mut self, name: impl Into<String>) -> Builder {
        self.opts.name = Some(name.into());
        self
    }
    /// Stack size in bytes, from [`MIN_STACK_SIZE`] (16 KiB) to
    /// [`MAX_STACK_SIZE`]; outside that range `spawn` returns
    /// `SpawnErrorKind::StackTooSmall` / `StackTooLarge`. Guarded stacks are
    /// rounded up to a power of two; only touched pages cost memory.
    /// The closure and its result are moved onto this stack when the fiber starts, so
    /// together they may take at most a quarter of it: a larger closure is a
    /// [`SpawnErrorKind::ClosureTooLarge`] error, not a stack overflow (box
    /// large captures instead).
    ///
    /// ```
    /// use numafiber::{fiber, Runtime, SpawnErrorKind};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let big = [1u8; 32 << 10];
    /// let e = fiber::Builder::new().stack_size(64 << 10).spawn_on(&rt, move || big[0]).unwrap_err();
    /// assert!(matches!(e.kind(), SpawnErrorKind::ClosureTooLarge { .. }));
    /// let boxed = Box::new(big); // 8 bytes to move
    /// assert_eq!(fiber::Builder::new().stack_size(64 << 10).spawn_on(&rt, move || boxed[0]).unwrap().join().unwrap(), 1);
    /// ```
    pub fn stack_size(mut self, bytes: usize) -> Builder {
        self.opts.stack_size = Some(bytes);
        self
    }
    /// Start on the least-loaded worker of NUMA node `node` (it may still be
    /// stolen later unless pinned). Given together with
    /// [`worker`](Self::worker), the worker wins and must be on `node`:
    /// otherwise spawning fails with [`SpawnErrorKind::WorkerNotOnNode`].
    ///
    /// ```
    /// use numafiber::{fiber, Runtime, SpawnErrorKind, Topology};
    /// let rt = Runtime::builder().workers(2).topology(Topology::uniform(2, 1)).build().unwrap();
    /// let e = fiber::Builder::new().worker(0).node(1).spawn_on(&rt, || ()).unwrap_err();
    /// assert_eq!(e.kind(), &SpawnErrorKind::WorkerNotOnNode { worker: 0, node: 1, worker_node: 0 });
    /// assert!(fiber::Builder::new().worker(1).node(1).spawn_on(&rt, || ()).is_ok());
    /// ```
    pub fn node(mut self, node: usize) -> Builder {
        self.opts.node = Some(node);
        self
    }
    /// Run on worker `worker` and never migrate.
    pub fn worker(mut self, worker: usize) -> Builder {
        self.opts.worker = Some(worker);
        self
    }
    /// Never migrate (see [`spawn_pinned`]).
    pub fn pinned(mut self, pinned: bool) -> Builder {
        self.opts.pinned = pinned;
        self
    }
    /// Start on the spawning worker's own deque instead of asking the
    /// placement policy (thieves may still take it). From a thread that is
    /// not a worker of the runtime this has no effect.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let w = fiber::Builder::new().worker(1).spawn_on(&rt, || {
    ///     // a fiber that nobody steals runs where it was spawned
    ///     fiber::await_fiber(fiber::Builder::new().local(true).spawn(|| fiber::current().unwrap().worker).unwrap())
    /// }).unwrap().join().unwrap();
    /// assert!(w < 2);
    /// ```
    pub fn local(mut self, local: bool) -> Builder {
        self.opts.local = local;
        self
    }

    /// Start the child *now*, on this worker, before `spawn` returns
    /// (corolib's order: a task runs in its caller until its first
    /// suspension). The spawning fiber is queued on this worker's deque,
    /// where an idle worker may steal it, and continues when the child
    /// suspends or finishes (or a thief picks it up earlier). Plain
    /// `spawn` instead queues the child and the parent keeps running until
    /// it suspends; see "Things that behave differently" in
    /// `docs/porting-from-cpp.md`.
    ///
    /// No effect when spawning from a plain thread or from another
    /// runtime, with [`node`](Self::node), or when the child is pinned to
    /// another worker: the child is then queued as usual.
    ///
    /// ```
    /// use std::sync::{Arc, Mutex};
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let order = rt.block_on(|| {
    ///     let log = Arc::new(Mutex::new(Vec::new()));
    ///     let l = log.clone();
    ///     log.lock().unwrap().push("parent: before spawn");
    ///     let h = fiber::Builder::new().eager(true)
    ///         .spawn(move || l.lock().unwrap().push("child runs first"))
    ///         .unwrap();
    ///     log.lock().unwrap().push("parent: after spawn");
    ///     fiber::await_fiber(h);
    ///     let v = log.lock().unwrap().clone();
    ///     v
    /// });
    /// assert_eq!(order, ["parent: before spawn", "child runs first", "parent: after spawn"]);
    /// ```
    pub fn eager(mut self, eager: bool) -> Builder {
        self.opts.eager = eager;
        self
    }

    fn spawn_opts(&self) -> SpawnOpts {
        SpawnOpts {
            name: self.opts.name.as_deref().map(Arc::from),
            stack_size: self.opts.stack_size,
            node: self.opts.node,
            worker: self.opts.worker,
            pinned: self.opts.pinned,
            local: self.opts.local,
            eager: self.opts.eager,
            cancelled_if_shutting_down: false,
        }
    }

    /// Spawn on the current fiber's runtime.
    ///
    /// # Errors
    /// [`SpawnErrorKind::NoRuntime`] outside a fiber,
    /// [`SpawnErrorKind::ShuttingDown`] while the runtime shuts down (also
    /// from a destructor the shutdown drain runs), and the kinds of bad
    /// options: stack size, worker, node, closure size, too many fibers.
    #[track_caller]
    pub fn spawn<F, T>(self, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        runtime::spawn_current(f, self.spawn_opts())
    }

    /// Spawn on `rt`, from any thread.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// let h = fiber::Builder::new().worker(1).spawn_on(&rt, || fiber::current().unwrap().worker).unwrap();
    /// assert_eq!(h.join().unwrap(), 1);
    /// ```
    #[track_caller]
    pub fn spawn_on<F, T>(self, rt: &crate::Runtime, f: F) -> Result<JoinHandle<T>, SpawnError>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        runtime::spawn_on(rt.shared(), f, self.spawn_opts())
    }
}

/// A scope for fibers that borrow from the caller (`std::thread::scope`
/// shape). See [`scope`].
pub struct Scope<'scope, 'env: 'scope> {
    handle: Handle,
    /// Children and their packets. The packets' lifetime is erased to
    /// `'static` (see `Scope::spawn`).
    children: Mutex<Vec<(TaskRef, packet::CompletionRef)>>,
    _scope: PhantomData<&'scope mut &'scope ()>,
    _env: PhantomData<&'env mut &'env ()>,
}

/// Handle of a scoped fiber.
pub struct ScopedJoinHandle<'scope, T> {
    inner: JoinHandle<T>,
    _scope: PhantomData<&'scope ()>,
}

impl<T> ScopedJoinHandle<'_, T> {
    /// Wait for the fiber; `Err` carries its panic.
    #[track_caller]
    pub fn join(self) -> Result<T, JoinError> {
        self.inner.join()
    }
    /// Whether the fiber has finished.
    pub fn is_finished(&self) -> bool {
        self.inner.is_finished()
    }
    /// Cancel the fiber ([`JoinHandle::cancel`]); the scope still waits
    /// for it to unwind.
    ///
    /// ```
    /// use numafiber::{fiber, sync, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// rt.block_on(|| {
    ///     let ev = sync::Event::new();
    ///     fiber::scope(|s| {
    ///         let h = s.spawn(|| ev.wait()); // nobody sets it
    ///         fiber::yield_now();
    ///         h.cancel();
    ///         assert!(h.join().unwrap_err().is_cancelled());
    ///     });
    /// });
    /// ```
    pub fn cancel(&self) {
        self.inner.cancel()
    }
}

impl<'scope> Scope<'scope, '_> {
    /// Spawn a fiber that may borrow anything that outlives the scope.
    /// While the runtime shuts down the fiber is cancelled at once, as
    /// with [`spawn`]: its closure is dropped unrun
    /// and its join reports [`is_cancelled()`](crate::JoinError::is_cancelled).
    #[track_caller]
    pub fn spawn<F, T>(&'scope self, f: F) -> ScopedJoinHandle<'scope, T>
    where
        F: FnOnce() -> T + Send + 'scope,
        T: Send + 'scope,
    {
        // SAFETY: `scope` waits for (or destroys) every child before it
        // returns or unwinds, so borrows of 'scope outlive the fiber.
        let h = unsafe { runtime::spawn_unchecked(self.handle.shared(), f, SpawnOpts::infallible()) }
            .unwrap_or_else(|e| panic!("{e}"));
        // Lifetime-erased already (`packet::new_main`): `scope` drops
        // every entry of `children` before it returns, i.e. while 'scope
        // is still alive, and only waits for completion through them.
        // SAFETY: the view is kept beside a `TaskRef` of the child's task,
        // which keeps an in-task packet alive.
        let c = unsafe { h.packet.completion() };
        self.children.lock().unwrap_or_else(|e| e.into_inner()).push(((*h.task).clone(), c));
        ScopedJoinHandle { inner: h, _scope: PhantomData }
    }
}

/// Run `f` with a [`Scope`] whose fibers may borrow from the caller; every
/// fiber spawned in it is joined before `scope` returns. If one of them
/// panicked and was not joined, `scope` panics after all are done.
///
/// # Panics
/// Outside a fiber of a runtime (scoped fibers need the current runtime).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// let total = rt.block_on(|| {
///     let data = vec![1u64, 2, 3, 4];
///     let mut sums = [0u64; 2];
///     fiber::scope(|s| {
///         let (l, r) = sums.split_at_mut(1);
///         s.spawn(|| l[0] = data[..2].iter().sum());
///         s.spawn(|| r[0] = data[2..].iter().sum());
///     });
///     sums[0] + sums[1]
/// });
/// assert_eq!(total, 10);
/// ```
#[track_caller]
pub fn scope<'env, F, R>(f: F) -> R
where
    F: for<'scope> FnOnce(&'scope Scope<'scope, 'env>) -> R,
{
    let handle = runtime::current_handle().unwrap_or_else(|| panic!("{}", SpawnError::new(SpawnErrorKind::NoRuntime)));
    let scope = Scope { handle, children: Mutex::new(Vec::new()), _scope: PhantomData, _env: PhantomData };
    let r = catch_unwind(AssertUnwindSafe(|| f(&scope)));
    // Waits for every child again when dropped: a forced unwind of this
    // fiber (shutdown drain, `block_on`'s deadlock path) that starts inside
    // the wait below still destroys or awaits the children, which borrow
    // from our frame, before the frame goes.
    struct Children(Vec<(TaskRef, packet::CompletionRef)>);
    impl Drop for Children {
        fn drop(&mut self) {
            for (t, c) in &self.0 {
                runtime::wait_child(t, &**c);
            }
        }
    }
    let children = Children(std::mem::take(&mut *scope.children.lock().unwrap_or_else(|e| e.into_inner())));
    {
        // The children borrow our frame: wait for them even when this fiber
        // is cancelled (shielded), and pass a cancellation on to them so the
        // wait ends (`runtime::cancel` module docs, step 5).
        let _shield = ShieldGuard::new();
        let mut passed_on = false;
        for (t, c) in &children.0 {
            while !runtime::wait_child_or_cancel(t, &**c, !passed_on) {
                passed_on = true;
                for (t, _) in &children.0 {
                    runtime::cancel_in(t, scope.handle.shared());
                }
            }
        }
    }
    let child_panicked = children.0.iter().any(|(_, c)| c.unjoined_panic());
    drop(children);
    match r {
        Err(p) => resume_unwind(p),
        Ok(_) if child_panicked => panic!("a scoped fiber panicked"),
        Ok(r) => {
            // A cancellation that came while we waited for the children.
            runtime::cancel_point_current();
            r
        }
    }
}
