//! `spawn_blocking`: run a blocking call on a bounded pool of helper
//! threads while the calling fiber's worker runs other fibers.
//!
//! The handle is an ordinary fiber's [`JoinHandle`]: `spawn_blocking`
//! spawns a small fiber that hands the closure to the pool and parks until
//! a helper thread has run it, then returns its value or re-raises its
//! panic, so `join` gives the result or a `JoinError` exactly as for any
//! fiber. Each call is given an idle helper that no other call has
//! claimed, or a new helper thread, up to [`MAX_BLOCKING_THREADS`], so
//! calls made together run side by side; helpers exit after
//! [`BLOCKING_KEEP_ALIVE`] without work, and calls beyond the cap wait in
//! a FIFO queue.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use super::JoinHandle;
use crate::runtime::task::wait_kind;
use crate::runtime::{self, Waiter};

/// Most helper threads alive at once.
pub const MAX_BLOCKING_THREADS: usize = 64;
/// A helper thread without work for this long exits.
pub const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

/// The pool's counts, under its lock.
///
/// A submit *claims* an idle helper for its job (`idle -= 1`,
/// `claims += 1`, one notification) or starts a new one (up to
/// [`MAX_BLOCKING_THREADS`]); a helper woken by a claim takes it
/// (`claims -= 1`). So `idle` counts the waiting helpers nobody has
/// claimed yet, and a burst of submits wakes or starts one helper per job
/// instead of queuing them all behind the one helper that was idle.
struct PoolState {
    queue: VecDeque<Job>,
    threads: usize,
    /// Helpers waiting for work and not claimed by a submit.
    idle: usize,
    /// Claims made by submits and not yet taken by a woken helper.
    claims: usize,
}

struct Pool {
    state: Mutex<PoolState>,
    cv: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        state: Mutex::new(PoolState { queue: VecDeque::new(), threads: 0, idle: 0, claims: 0 }),
        cv: Condvar::new(),
    })
}

impl Pool {
    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn submit(&'static self, job: Job) -> std::io::Result<()> {
        let mut s = self.lock();
        s.queue.push_back(job);
        if s.idle > 0 {
            // Claim one idle helper for this job: the next submit sees one
            // idle helper fewer and wakes another or starts a thread.
            s.idle -= 1;
            s.claims += 1;
            self.cv.notify_one();
            return Ok(());
        }
        if s.threads < MAX_BLOCKING_THREADS {
            s.threads += 1;
            drop(s);
            let r = std::thread::Builder::new().name("numafiber-blocking".into()).spawn(move || self.helper());
            if let Err(e) = r {
                let mut s = self.lock();
                s.threads -= 1;
                if s.threads == 0 {
                    // Nobody will run it: take the job back (the caller
                    // reports the error).
                    s.queue.pop_back();
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn helper(&self) {
        let mut s = self.lock();
        loop {
            if let Some(job) = s.queue.pop_front() {
                drop(s);
                job(); // never unwinds: the job catches the closure's panic
                s = self.lock();
                continue;
            }
            s.idle += 1;
            // Counted by the deadlock detector while it waits (taken
            // under the pool's lock, as `idle`).
            let idle = runtime::IdleHelper::enter();
            let (g, claimed) = self.wait_for_claim(s);
            s = g;
            drop(idle);
            if !claimed && s.queue.is_empty() {
                s.threads -= 1;
                return;
            }
        }
    }

    /// An idle helper (counted in `idle` by the caller) waits until a
    /// submit claims it (`true`) or [`BLOCKING_KEEP_ALIVE`] passes without
    /// a claim (`false`, and it is no longer counted idle). A spurious
    /// wake-up waits on for the rest of the keep-alive.
    fn wait_for_claim<'a>(
        &self,
        mut s: std::sync::MutexGuard<'a, PoolState>,
    ) -> (std::sync::MutexGuard<'a, PoolState>, bool) {
        let until = std::time::Instant::now() + BLOCKING_KEEP_ALIVE;
        loop {
            if s.claims > 0 {
                // The claimer already took this helper out of `idle`.
                s.claims -= 1;
                return (s, true);
            }
            let left = until.saturating_duration_since(std::time::Instant::now());
            if left.is_zero() {
                s.idle -= 1;
                return (s, false);
            }
            s = self.cv.wait_timeout(s, left).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

/// The result slot a helper fills and the fiber waiting for it.
struct Slot<T> {
    state: Mutex<(Option<std::thread::Result<T>>, Option<Waiter>)>,
}

/// Run the blocking closure `f` (file I/O, DNS through `to_socket_addrs`,
/// a C library call...) on a helper thread; the calling fiber goes on, and
/// the returned handle's `join` parks until `f` is done: its value, or a
/// `JoinError` carrying its panic, as for [`spawn`](super::spawn).
///
/// # Panics
/// Outside a fiber of a runtime (like [`spawn`](super::spawn)). If no
/// helper thread can be started at all, the returned fiber panics with the
/// OS error (so `join` returns it as a `JoinError`).
///
/// ```
/// use numafiber::{fiber, Runtime};
/// use std::net::ToSocketAddrs;
/// let rt = Runtime::builder().workers(1).build()?;
/// let n = rt.block_on(|| {
///     let h = fiber::spawn_blocking(|| ("localhost", 80).to_socket_addrs().map(|a| a.count()));
///     fiber::await_fiber(h)
/// });
/// assert!(n.unwrap() >= 1);
/// let e = rt.block_on(|| fiber::spawn_blocking(|| -> u8 { panic!("in a helper") }).join().unwrap_err());
/// assert_eq!(e.panic_message(), Some("in a helper"));
/// # Ok::<(), numafiber::BuildError>(())
/// ```
#[track_caller]
pub fn spawn_blocking<F, T>(f: F) -> JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    super::spawn(move || run_blocking(f))
}

/// In the fiber: submit `f`, park until a helper has run it.
fn run_blocking<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    let me = Waiter::current();
    assert!(me.is_fiber(), "spawn_blocking's fiber runs in a runtime");
    let slot = Arc::new(Slot { state: Mutex::new((None, None)) });
    let job_slot = slot.clone();
    let job: Job = Box::new(move || {
        let r = panic::catch_unwind(AssertUnwindSafe(f));
        let waiter = {
            let mut g = job_slot.state.lock().unwrap_or_else(|e| e.into_inner());
            g.0 = Some(r);
            g.1.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    });
    if let Err(e) = pool().submit(job) {
        panic!("spawn_blocking: could not start a helper thread: {e}");
    }
    loop {
        {
            let mut g = slot.state.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(r) = g.0.take() {
                return match r {
                    Ok(v) => v,
                    Err(p) => panic::resume_unwind(p),
                };
            }
            g.1 = Some(me.clone());
        }
        runtime::set_wait_reason(wait_kind::BLOCKING, 0);
        runtime::park();
        runtime::set_wait_reason(wait_kind::NONE, 0);
        if runtime::current_cannot_suspend() {
            // Cannot park (not reached from this fiber's own body, which
            // is unwound at its suspension point when destroyed): wait on
            // the thread instead of spinning on `park`.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}

/// Where a `block_in_place` call's result goes and who waits for it.
struct PlaceSlot<T> {
    state: Mutex<PlaceState<T>>,
    done: Condvar,
}

struct PlaceState<T> {
    result: Option<std::thread::Result<T>>,
    /// The closure has run and been dropped: nothing borrowed is touched
    /// any more.
    finished: bool,
    waiter: Option<Waiter>,
}

/// Waits, on the thread, until the helper is done with the closure: the
/// closure may borrow from the caller's frame, which must outlive it even
/// when the fiber is destroyed (unwound) while the helper still runs it.
struct WaitFinished<'s, T>(&'s PlaceSlot<T>);

impl<T> Drop for WaitFinished<'_, T> {
    fn drop(&mut self) {
        let mut g = self.0.state.lock().unwrap_or_else(|e| e.into_inner());
        while !g.finished {
            g = self.0.done.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        // A result nobody took (unwinding) is dropped here, in the
        // borrowing frame, not by the helper.
        drop(g.result.take());
    }
}

/// Run the blocking call `f` (a C library, a file, a lock of another
/// library, `std::thread::sleep`) without costing the worker: `f` runs on
/// one of [`spawn_blocking`]'s helper threads while the calling fiber
/// parks, so the worker runs its other fibers meanwhile, and the value (or
/// the panic) of `f` comes back to the caller. `f` may borrow from the
/// caller (no `'static` bound): the call returns only after `f` is done,
/// on every path (if the fiber is destroyed by a shutdown meanwhile, the
/// shutdown waits for `f`). Outside a fiber, `f` runs on the calling
/// thread.
///
/// **`block_in_place` or `spawn_blocking`?** `block_in_place` when the
/// fiber needs the result before it can go on (a file read, a DNS lookup,
/// a mutex of a C library) and `f` borrows from the fiber; it reads like a
/// plain call. [`spawn_blocking`] when the fiber has other things to do
/// while the call runs, or the call must outlive the fiber: it returns a
/// handle, and its closure is `'static`.
///
/// `f` runs on another thread than the fiber's worker (as a fiber may run
/// on any worker between two suspensions anyway): thread-local values of
/// the worker thread are not `f`'s. A [`spawn_pinned`](super::spawn_pinned)
/// fiber that relies on its thread's locals inside `f` must call the
/// blocking code directly (costing its worker for that long).
///
/// # Panics
/// Re-raises a panic of `f` in the caller. Panics if no helper thread can
/// be started at all (the OS error), like [`spawn_blocking`].
///
/// ```
/// use numafiber::{fiber, Runtime};
/// let rt = Runtime::builder().workers(1).build()?;
/// let text = String::from("read me");
/// let n = rt.block_on(|| {
///     let ticker = fiber::spawn(|| 7); // runs while the worker's fiber blocks
///     let n = fiber::block_in_place(|| {
///         std::thread::sleep(std::time::Duration::from_millis(20));
///         text.len() // borrowed
///     });
///     assert_eq!(fiber::await_fiber(ticker), 7);
///     n
/// });
/// assert_eq!(n, 7);
/// # Ok::<(), numafiber::BuildError>(())
/// ```
#[track_caller]
pub fn block_in_place<F, T>(f: F) -> T
where
    F: FnOnce() -> T + Send,
    T: Send,
{
    let me = Waiter::current();
    if !me.is_fiber() || runtime::current_cannot_suspend() {
        return f();
    }
    let slot: Arc<PlaceSlot<T>> = Arc::new(PlaceSlot {
        state: Mutex::new(PlaceState { result: None, finished: false, waiter: None }),
        done: Condvar::new(),
    });
    let job_slot = slot.clone();
    let job: Box<dyn FnOnce() + Send + '_> = Box::new(move || {
        let r = panic::catch_unwind(AssertUnwindSafe(f));
        // `f` and its captures are gone here.
        let waiter = {
            let mut g = job_slot.state.lock().unwrap_or_else(|e| e.into_inner());
            g.result = Some(r);
            g.finished = true;
            job_slot.done.notify_all();
            g.waiter.take()
        };
        if let Some(w) = waiter {
            w.wake();
        }
    });
    // SAFETY: the closure borrows from the caller's frame (lifetime of `f`
    // and `T`). It is erased to `'static` for the pool's queue; `guard`
    // below keeps this frame alive (blocking the thread on every path that
    // leaves it, including an unwind) until the job has run `f` and
    // dropped it (`finished`), and takes any result out before returning,
    // so the helper touches nothing borrowed afterwards (it only locks the
    // slot, which the `Arc` keeps alive, and wakes the fiber).
    let job: Job = unsafe { std::mem::transmute::<Box<dyn FnOnce() + Send + '_>, Job>(job) };
    let guard = WaitFinished(&slot);
    if let Err(e) = pool().submit(job) {
        // The job was taken back and dropped: nothing runs `f`.
        std::mem::forget(guard);
        panic!("block_in_place: could not start a helper thread: {e}");
    }
    loop {
        {
            let mut g = slot.state.lock().unwrap_or_else(|e| e.into_inner());
            if g.finished {
                let r = g.result.take().expect("the job stores its result before it finishes");
                drop(g);
                drop(guard);
                return match r {
                    Ok(v) => v,
                    Err(p) => panic::resume_unwind(p),
                };
            }
            g.waiter = Some(me.clone());
        }
        // The caller's location (`#[track_caller]` through here).
        runtime::set_wait_reason(wait_kind::BLOCKING, 0);
        runtime::park();
        runtime::set_wait_reason(wait_kind::NONE, 0);
        if runtime::current_cannot_suspend() {
            // Destroyed while parked (not unwound at the park: a destructor
            // path): wait on the thread; `guard` blocks until `f` is done.
            let mut g = slot.state.lock().unwrap_or_else(|e| e.into_inner());
            while !g.finished {
                g = slot.done.wait(g).unwrap_or_else(|e| e.into_inner());
            }
        }
    }
}
