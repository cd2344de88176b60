//! The progress engine: every pending MPI request of the process, polled
//! with `MPI_Testsome` in bounded batches by one progress fiber, and the
//! completions that wake the fibers (or threads) waiting on them.
//!
//! Rules:
//!
//! * Once submitted, a request handle is touched by the poller only (the
//!   one who holds `Engine::poll`): `MPI_Testsome` and `MPI_Cancel` on it
//!   never run on two threads at once, which the MPI standard forbids even
//!   under `MPI_THREAD_MULTIPLE`. A waiter that wants its request cancelled
//!   sets [`Completion::cancel`] and the poller calls `MPI_Cancel`.
//! * The poller is a fiber, so it migrates between workers. That is legal:
//!   the library was initialised with `MPI_THREAD_MULTIPLE`, under which
//!   any thread may call MPI on any request; the hand-offs (submitter to
//!   poller through `Engine::incoming`, pass to pass through the `poll`
//!   mutex) order every use of a handle before the next one.
//! * No thread ever sits in `MPI_Wait`: the poller tests, and when a pass
//!   completes nothing it yields (other fibers run first), and after
//!   [`SPIN_FOR`] without a completion parks with a timeout that doubles up
//!   to [`MAX_BACKOFF`]. A submission unparks it. With no request pending
//!   the poller fiber ends, so an idle rank costs no CPU.
//! * A fiber about to park on a request first runs one pass itself if no
//!   one else is polling (`Engine::try_pass`): a send that completes at
//!   once (an eager message) returns without a park.
//! * A plain thread (no fiber) that waits drives the passes itself when no
//!   progress fiber runs.

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use mpi::ffi;
use numafiber::fiber::{self, Fiber};

/// Requests tested by one `MPI_Testsome` call.
pub(crate) const BATCH: usize = 64;
/// Requests tested in one pass, at most, before the poller gives its worker
/// back: a pass is bounded however many requests are pending.
pub(crate) const PASS_MAX: usize = 4 * BATCH;
/// How long the poller keeps yielding (busy polling between the other
/// fibers' turns) after its last completion before it parks with a timeout.
pub(crate) const SPIN_FOR: Duration = Duration::from_micros(200);
/// The first and longest parking timeout of an idle poller.
pub(crate) const MIN_BACKOFF: Duration = Duration::from_micros(20);
pub(crate) const MAX_BACKOFF: Duration = Duration::from_millis(1);

/// A raw MPI request handle (a pointer in Open MPI).
#[derive(Clone, Copy)]
pub(crate) struct RawRequest(pub(crate) ffi::MPI_Request);
// SAFETY: a handle is an opaque token; under MPI_THREAD_MULTIPLE any thread
// may use it, and the engine's rules keep two threads from using the same
// one at once (module docs).
unsafe impl Send for RawRequest {}

/// A raw MPI status.
#[derive(Clone, Copy)]
pub(crate) struct RawStatus(pub(crate) ffi::MPI_Status);
// SAFETY: plain integers.
unsafe impl Send for RawStatus {}

/// Who waits on a completion.
enum Waiter {
    Fiber(Fiber),
    Thread(std::thread::Thread),
}

impl Waiter {
    fn current() -> Waiter {
        match fiber::current_handle() {
            Some(f) => Waiter::Fiber(f),
            None => Waiter::Thread(std::thread::current()),
        }
    }

    fn wake(self) {
        match self {
            Waiter::Fiber(f) => f.unpark(),
            Waiter::Thread(t) => t.unpark(),
        }
    }
}

#[derive(Default)]
struct CState {
    /// The request's status once complete, or the MPI error code it
    /// completed (or failed to be tested) with.
    result: Option<Result<RawStatus, c_int>>,
    waiter: Option<Waiter>,
}

/// One request's completion: filled by the poller, waited for by its owner.
#[derive(Default)]
pub(crate) struct Completion {
    state: Mutex<CState>,
    /// The owner asked for `MPI_Cancel` (the poller calls it).
    cancel: AtomicBool,
    /// The poller has called `MPI_Cancel` (poller only).
    cancel_sent: AtomicBool,
}

impl Completion {
    fn lock(&self) -> MutexGuard<'_, CState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn is_done(&self) -> bool {
        self.lock().result.is_some()
    }

    /// The result if complete; otherwise registers the caller to be woken.
    pub(crate) fn take_or_register(&self) -> Option<Result<RawStatus, c_int>> {
        let mut s = self.lock();
        match s.result {
            Some(r) => Some(r),
            None => {
                s.waiter = Some(Waiter::current());
                None
            }
        }
    }

    /// The result if complete (without registering).
    pub(crate) fn peek(&self) -> Option<Result<RawStatus, c_int>> {
        self.lock().result
    }

    /// Wake the waiter (if any) without completing: it re-checks.
    fn wake_waiter(&self) {
        let w = self.lock().waiter.take();
        if let Some(w) = w {
            w.wake();
        }
    }

    fn complete(&self, r: Result<RawStatus, c_int>) {
        let w = {
            let mut s = self.lock();
            s.result = Some(r);
            s.waiter.take()
        };
        if let Some(w) = w {
            w.wake();
        }
    }
}

#[derive(Default)]
struct Incoming {
    reqs: Vec<(RawRequest, Arc<Completion>)>,
    /// A progress fiber runs (spawned and not yet ended).
    poller_running: bool,
    /// Its handle, once it has started.
    poller: Option<Fiber>,
}

/// The poller's private list: raw handles contiguous for `MPI_Testsome`.
#[derive(Default)]
struct Polled {
    reqs: Vec<ffi::MPI_Request>,
    done: Vec<Arc<Completion>>,
    cursor: usize,
    indices: Vec<c_int>,
    statuses: Vec<ffi::MPI_Status>,
}
// SAFETY: the handles are opaque tokens used by one thread at a time (the
// mutex holder), as `RawRequest`.
unsafe impl Send for Polled {}

/// The process' engine (MPI is process-wide, so is this).
pub(crate) struct Engine {
    incoming: Mutex<Incoming>,
    poll: Mutex<Polled>,
    /// Requests submitted and not yet completed.
    pending: AtomicUsize,
    /// Some owner set its `Completion::cancel`.
    cancels: AtomicBool,
}

pub(crate) fn engine() -> &'static Engine {
    static E: OnceLock<Engine> = OnceLock::new();
    E.get_or_init(|| Engine {
        incoming: Mutex::new(Incoming::default()),
        poll: Mutex::new(Polled::default()),
        pending: AtomicUsize::new(0),
        cancels: AtomicBool::new(false),
    })
}

impl Engine {
    fn incoming(&self) -> MutexGuard<'_, Incoming> {
        self.incoming.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn pending(&self) -> usize {
        self.pending.load(SeqCst)
    }

    /// Hand a freshly started request to the engine; the returned
    /// completion says when it is done. The caller never touches `req`
    /// again.
    pub(crate) fn submit(&'static self, req: RawRequest) -> Arc<Completion> {
        let c = Arc::new(Completion::default());
        self.pending.fetch_add(1, SeqCst);
        let mut inc = self.incoming();
        inc.reqs.push((req, c.clone()));
        if inc.poller_running {
            self.ensure_poller_locked(&mut inc); // unparks it
            return c;
        }
        drop(inc);
        // No poller yet: a request that completes at once (an eager send)
        // needs none.
        if fiber::current_handle().is_some() {
            self.try_pass();
            if c.is_done() {
                return c;
            }
        }
        self.ensure_poller();
        c
    }

    /// Ask the poller to cancel `c`'s request (it completes, cancelled or
    /// not, on a later pass).
    pub(crate) fn request_cancel(&'static self, c: &Completion) {
        c.cancel.store(true, SeqCst);
        self.cancels.store(true, SeqCst);
        let mut inc = self.incoming();
        self.ensure_poller_locked(&mut inc);
    }

    /// Make sure a progress fiber runs (spawned from the calling fiber's
    /// runtime if none does), without waking a running one.
    pub(crate) fn ensure_poller(&'static self) {
        let mut inc = self.incoming();
        if !inc.poller_running {
            self.ensure_poller_locked(&mut inc);
        }
    }

    fn ensure_poller_locked(&'static self, inc: &mut Incoming) {
        if inc.poller_running {
            if let Some(p) = &inc.poller {
                p.unpark();
            }
            return;
        }
        if fiber::current_handle().is_none() {
            return; // a plain thread: its waits drive progress
        }
        // Not eager: the poller must not run before this caller releases
        // `incoming` (it takes that lock first).
        let spawned =
            fiber::Builder::new().name("numafiber-mpi progress").eager(false).spawn(move || self.poller_main());
        if spawned.is_ok() {
            inc.poller_running = true; // the JoinHandle drops: detached
        }
    }

    pub(crate) fn poller_running(&self) -> bool {
        self.incoming().poller_running
    }

    /// The progress fiber: passes until nothing is pending.
    fn poller_main(&'static self) {
        // Ends normally (nothing pending) or unwinds (its runtime shuts
        // down with requests pending): then the waiters are woken, and
        // those of another runtime start a poller there (`Op::wait`).
        struct Ended(&'static Engine);
        impl Drop for Ended {
            fn drop(&mut self) {
                {
                    let mut inc = self.0.incoming();
                    inc.poller_running = false;
                    inc.poller = None;
                }
                if std::thread::panicking() {
                    let p = self.0.poll.lock().unwrap_or_else(|e| e.into_inner());
                    for c in &p.done {
                        c.wake_waiter();
                    }
                }
            }
        }
        let _ended = Ended(self);
        self.incoming().poller = fiber::current_handle();
        let mut last = Instant::now();
        let mut backoff = MIN_BACKOFF;
        loop {
            let completed = {
                let mut p = self.poll.lock().unwrap_or_else(|e| e.into_inner());
                let n = self.pass(&mut p);
                if p.reqs.is_empty() {
                    let mut inc = self.incoming();
                    if inc.reqs.is_empty() {
                        // Nothing pending: end (a poller that stayed would
                        // spin or take timer wake-ups from the fibers). A
                        // later submission spawns a new one (it sees
                        // `poller_running == false`).
                        inc.poller_running = false;
                        inc.poller = None;
                        return;
                    }
                }
                n
            };
            if completed > 0 {
                last = Instant::now();
                backoff = MIN_BACKOFF;
                fiber::yield_now();
            } else if last.elapsed() < SPIN_FOR {
                fiber::yield_now();
            } else {
                fiber::park_timeout(backoff);
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }

    /// One pass by a plain thread if no one else polls; returns whether it
    /// polled.
    pub(crate) fn try_pass(&'static self) -> bool {
        match self.poll.try_lock() {
            Ok(mut p) => {
                self.pass(&mut p);
                true
            }
            Err(_) => false,
        }
    }

    /// Take in new requests, send the cancellations asked for, and test at
    /// most [`PASS_MAX`] requests in batches of [`BATCH`]. Returns how many
    /// completed.
    fn pass(&self, p: &mut Polled) -> usize {
        {
            let mut inc = self.incoming();
            for (r, c) in inc.reqs.drain(..) {
                p.reqs.push(r.0);
                p.done.push(c);
            }
        }
        if self.cancels.swap(false, SeqCst) {
            for (r, c) in p.reqs.iter_mut().zip(&p.done) {
                if c.cancel.load(SeqCst) && !c.cancel_sent.swap(true, SeqCst) {
                    // SAFETY: `r` is an active request owned by the poller.
                    // An error (a request that cannot be cancelled) leaves
                    // it to complete normally.
                    unsafe { ffi::MPI_Cancel(r) };
                }
            }
        }
        let total = p.reqs.len();
        if total == 0 {
            return 0;
        }
        let mut completed = 0;
        let mut start = p.cursor % total;
        let mut budget = total.min(PASS_MAX);
        let mut finished: Vec<usize> = Vec::new();
        while budget > 0 {
            let n = budget.min(BATCH).min(total - start);
            completed += self.test_batch(p, start, n, &mut finished);
            budget -= n;
            start = (start + n) % total;
        }
        p.cursor = start;
        if !finished.is_empty() {
            remove_finished(p, &mut finished);
        }
        completed
    }

    /// `MPI_Testsome` on `p.reqs[start..start + n]`; completed requests'
    /// completions are filled and their indices pushed to `finished`.
    fn test_batch(&self, p: &mut Polled, start: usize, n: usize, finished: &mut Vec<usize>) -> usize {
        p.indices.resize(n, 0);
        // SAFETY: MPI_Status is plain integers; zeroed is a valid value.
        p.statuses.resize(n, unsafe { std::mem::zeroed() });
        let mut out: c_int = 0;
        // SAFETY: the slice holds `n` request handles owned by the poller;
        // `indices` and `statuses` have room for `n` entries.
        let rc = unsafe {
            ffi::MPI_Testsome(
                n as c_int,
                p.reqs[start..].as_mut_ptr(),
                &mut out,
                p.indices.as_mut_ptr(),
                p.statuses.as_mut_ptr(),
            )
        };
        let in_status = rc == ffi::MPI_ERR_IN_STATUS as c_int;
        if rc != ffi::MPI_SUCCESS as c_int && !in_status {
            // The call itself failed (only a corrupt handle can do that):
            // the requests may still be active, so their buffers must not
            // be released by completing them. They stay pending, and the
            // failure is said once.
            static SAID: AtomicBool = AtomicBool::new(false);
            if !SAID.swap(true, Relaxed) {
                eprintln!("numafiber-mpi: MPI_Testsome failed with error {rc}; the requests stay pending");
            }
            return 0;
        }
        // SAFETY: reading the MPI_UNDEFINED constant exported by mpi-sys.
        if out == unsafe { ffi::RSMPI_UNDEFINED } || out <= 0 {
            return 0;
        }
        for k in 0..out as usize {
            let i = start + p.indices[k] as usize;
            let st = p.statuses[k];
            let r = if in_status && st.MPI_ERROR != ffi::MPI_SUCCESS as c_int {
                Err(st.MPI_ERROR)
            } else {
                Ok(RawStatus(st))
            };
            p.done[i].complete(r);
            finished.push(i);
        }
        self.pending.fetch_sub(out as usize, SeqCst);
        out as usize
    }
}

/// Drop the entries at `finished` (unsorted) from the poller's list.
fn remove_finished(p: &mut Polled, finished: &mut [usize]) {
    finished.sort_unstable_by(|a, b| b.cmp(a));
    for &i in finished.iter() {
        p.reqs.swap_remove(i);
        p.done.swap_remove(i);
    }
}

/// One round of a plain thread's wait: with no progress fiber, drive a
/// pass and nap briefly; with one, sleep until woken by a completion (and
/// look again now and then, in case the poller's runtime went away).
pub(crate) fn thread_wait_step(e: &'static Engine, until: Option<Instant>) {
    let nap = if e.poller_running() {
        Duration::from_millis(10)
    } else {
        e.try_pass();
        Duration::from_micros(50)
    };
    let nap = match until {
        Some(d) => nap.min(d.saturating_duration_since(Instant::now())),
        None => nap,
    };
    std::thread::park_timeout(nap);
}
