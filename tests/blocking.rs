//! The blocking pool (`fiber::spawn_blocking`, `fiber::block_in_place`):
//! a burst of calls runs on as many helpers as it has calls (up to the
//! pool's cap), also when one helper is idle from an earlier call.
//!
//! Each call of a burst waits, on its helper, until every call of the
//! burst has started (a rendezvous): the burst completes only if its
//! calls run side by side. A pool that queued the calls behind the one
//! idle helper would hold all but the first back, and the rendezvous
//! gives up after a while and says so. No time is asserted.
//!
//! The idle helper is held (a signal handler on its thread waits) while
//! the burst is submitted, so every submit comes before the helper wakes:
//! the order in which a fast burst meets a helper that is slow to wake,
//! made certain.
//!
//! The pool is the process's, so each test runs in a fresh process of
//! this binary (helpers left idle by another test would hide the case).

mod common;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering::SeqCst};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use numafiber::{fiber, Runtime};

/// Calls in a burst: the pool's cap, so none has to wait for a helper.
const BURST: usize = fiber::MAX_BLOCKING_THREADS;
/// How long a call waits for the others of its burst before it gives up
/// (the burst then failed to run side by side).
const GIVE_UP: Duration = Duration::from_secs(5);

/// Where the calls of a burst meet: how many arrived, and whether one gave
/// up waiting (the later ones then do not wait).
struct Rendezvous {
    state: Mutex<(usize, bool)>,
    cv: Condvar,
}

impl Rendezvous {
    fn new() -> Arc<Rendezvous> {
        Arc::new(Rendezvous { state: Mutex::new((0, false)), cv: Condvar::new() })
    }

    /// A call of the burst arrives; `true` if all `BURST` calls were there
    /// at once.
    fn meet(&self) -> bool {
        let mut g = self.state.lock().unwrap();
        g.0 += 1;
        self.cv.notify_all();
        let (mut g, _) = self.cv.wait_timeout_while(g, GIVE_UP, |s| s.0 < BURST && !s.1).unwrap();
        if g.0 < BURST {
            g.1 = true;
            self.cv.notify_all();
        }
        g.0 >= BURST
    }
}

/// The held helper waits in the signal handler while this is set.
static HOLD: AtomicBool = AtomicBool::new(false);
/// The handler has started on the helper's thread.
static HELD: AtomicBool = AtomicBool::new(false);

extern "C" fn hold_here(_: libc::c_int) {
    HELD.store(true, SeqCst);
    while HOLD.load(SeqCst) {
        let ts = libc::timespec { tv_sec: 0, tv_nsec: 1_000_000 };
        // SAFETY: `nanosleep` is async-signal-safe; `ts` is a valid timespec.
        unsafe { libc::nanosleep(&ts, std::ptr::null_mut()) };
    }
}

/// Hold the pool's one helper thread (it waits for work) in a signal
/// handler until `HOLD` is cleared.
fn hold_the_idle_helper() {
    let helpers: Vec<i32> = std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|e| {
            let e = e.ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            comm.starts_with("numafiber-block").then(|| e.file_name().to_str()?.parse().ok())?
        })
        .collect();
    assert_eq!(helpers.len(), 1, "one helper thread after one call");
    HOLD.store(true, SeqCst);
    // SAFETY: a plain handler function; SIGUSR1 is not used otherwise in
    // this process; `tgkill` targets a thread of this process.
    unsafe {
        let mut sa: libc::sigaction = std::mem::zeroed();
        sa.sa_sigaction = hold_here as extern "C" fn(libc::c_int) as usize;
        sa.sa_flags = libc::SA_RESTART;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &sa, std::ptr::null_mut()), 0);
        assert_eq!(libc::syscall(libc::SYS_tgkill, libc::getpid(), helpers[0], libc::SIGUSR1), 0);
    }
    while !HELD.load(SeqCst) {
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// One call, so that exactly one helper is idle when the burst comes; then
/// run `burst` (which makes `BURST` calls at once, each meeting the
/// others at the rendezvous) while that helper is held, let it go once
/// the calls are submitted, and return how many calls met all the others.
fn after_one_warm_call(burst: fn(Arc<Rendezvous>) -> Vec<fiber::JoinHandle<bool>>) -> usize {
    let rt = Runtime::builder().workers(1).build().unwrap();
    rt.block_on(|| fiber::await_fiber(fiber::spawn_blocking(|| ())));
    // The helper goes back to waiting right after it has run the call.
    std::thread::sleep(Duration::from_millis(100));
    hold_the_idle_helper();
    let r = Rendezvous::new();
    rt.block_on(move || {
        let hs = burst(r);
        // The one worker runs every call's fiber (each submits its call)
        // before this fiber again.
        fiber::sleep(Duration::from_millis(100));
        HOLD.store(false, SeqCst);
        hs.into_iter().map(fiber::await_fiber).filter(|&m| m).count()
    })
}

/// Set in the child process that runs one test alone.
const CHILD_ENV: &str = "NUMAFIBER_BLOCKING_TEST_CHILD";

/// Run `body` in a fresh process of this binary running `test` alone, and
/// fail with its output if it fails.
fn in_fresh_process(test: &str, body: fn()) {
    if std::env::var_os(CHILD_ENV).is_some() {
        body();
        return;
    }
    let exe = std::env::current_exe().unwrap();
    let test = test.to_string();
    let out = common::within(120, "the child process", move || {
        Command::new(exe)
            .args(["--exact", &test, "--nocapture", "--test-threads=1"])
            .env(CHILD_ENV, "1")
            .output()
            .unwrap()
    });
    assert!(
        out.status.success(),
        "the child failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_burst_of_spawn_blocking_calls_after_one_call_runs_side_by_side() {
    in_fresh_process("a_burst_of_spawn_blocking_calls_after_one_call_runs_side_by_side", || {
        let met = after_one_warm_call(|r| {
            (0..BURST)
                .map(|_| {
                    let r = r.clone();
                    fiber::spawn_blocking(move || r.meet())
                })
                .collect()
        });
        assert_eq!(
            met, BURST,
            "of {BURST} spawn_blocking calls submitted at once, {met} ran side by side with all the others"
        );
    });
}

#[test]
fn a_burst_of_block_in_place_calls_after_one_call_runs_side_by_side() {
    in_fresh_process("a_burst_of_block_in_place_calls_after_one_call_runs_side_by_side", || {
        let met = after_one_warm_call(|r| {
            (0..BURST)
                .map(|_| {
                    let r = r.clone();
                    fiber::spawn(move || fiber::block_in_place(|| r.meet()))
                })
                .collect()
        });
        assert_eq!(
            met, BURST,
            "of {BURST} block_in_place calls made at once, {met} ran side by side with all the others"
        );
    });
}
