//! `spawn_blocking`: run a blocking call on a bounded pool of helper
//! threads while the calling fiber's worker runs other fibers.
//!
//! The handle is an ordinary fiber's [`JoinHandle`]: `spawn_blocking`
//! spawns a small fiber that hands the closure to the pool and parks until
//! a helper thread has run it, then returns its value or re-raises its
//! panic, so `join` gives the result or a `JoinError` exactly as for any
//! fiber. Helper threads are started on demand up to
//! [`MAX_BLOCKING_THREADS`] and exit after [`BLOCKING_KEEP_ALIVE`] without work;
//! calls beyond that wait in a FIFO queue.

use std::collections::VecDeque;
use std::panic::{self, AssertUnwindSafe};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::Duration;

use crate::runtime::task::{wait_kind, TaskRef};
use super::JoinHandle;
use crate::runtime::shared::Shared;

/// Most helper threads alive at once.
pub const MAX_BLOCKING_THREADS: usize = 64;
/// A helper thread without work for this long exits.
pub const BLOCKING_KEEP_ALIVE: Duration = Duration::from_secs(10);

type Job = Box<dyn FnOnce() + Send>;

struct PoolState {
    queue: VecDeque<Job>,
    threads: usize,
    idle: usize,
}

struct Pool {
    state: Mutex<PoolState>,
    cv: Condvar,
}

fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| Pool {
        state: Mutex::new(PoolState { queue: VecDeque::new(), threads: 0, idle: 0 }),
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
            let (g, to) = self.cv.wait_timeout(s, BLOCKING_KEEP_ALIVE).unwrap_or_else(|e| e.into_inner());
            s = g;
            s.idle -= 1;
            if to.timed_out() && s.queue.is_empty() {
                s.threads -= 1;
                return;
            }
        }
    }
}

/// The result slot a helper fills and the fiber waiting for it.
struct Slot<T> {
    state: Mutex<(Option<std::thread::Result<T>>, Option<TaskRef>)>,
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
    let (task, shared) = super::current_task_and_shared().expect("spawn_blocking's fiber runs in a runtime");
    let slot = Arc::new(Slot { state: Mutex::new((None, None)) });
    let job_slot = slot.clone();
    let job_shared: Arc<Shared> = shared;
    let job: Job = Box::new(move || {
        let r = panic::catch_unwind(AssertUnwindSafe(f));
        let waiter = {
            let mut g = job_slot.state.lock().unwrap_or_else(|e| e.into_inner());
            g.0 = Some(r);
            g.1.take()
        };
        if let Some(t) = waiter {
            job_shared.wake(t);
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
            g.1 = Some(task.clone());
        }
        super::set_wait_reason(wait_kind::BLOCKING, 0);
        super::park_current();
        super::set_wait_reason(wait_kind::NONE, 0);
        if super::current_cannot_suspend() {
            // Cannot park (not reached from this fiber's own body, which
            // is unwound at its suspension point when destroyed): wait on
            // the thread instead of spinning on `park`.
            std::thread::sleep(Duration::from_millis(1));
        }
    }
}
