//! `Builder::dump_on_signal` beside `numafiber::signal`: the fault signals
//! are refused with a typed error; a dump on `SIGINT` and a `SIGINT`
//! stream both see each delivery, whichever was set up first. Handlers
//! are process-wide and stay, so each order runs in a child process of
//! its own (this binary re-run for one test).

use std::io::Read as _;
use std::os::fd::FromRawFd as _;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numafiber::signal::{self, SignalKind};
use numafiber::{BuildErrorKind, Runtime};

const CHILD_ENV: &str = "NUMAFIBER_DUMP_SIGNAL_CHILD";

/// `SIGSEGV`, `SIGBUS`, `SIGILL` and `SIGFPE` carry the program's own
/// faults (and the fiber stack-overflow report): `dump_on_signal` refuses
/// them with `FaultSignal`, saying why and what to use; `signal::signal`
/// refuses them too.
#[test]
fn fault_signals_are_refused() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    for (sig, name) in
        [(libc::SIGSEGV, "SIGSEGV"), (libc::SIGBUS, "SIGBUS"), (libc::SIGILL, "SIGILL"), (libc::SIGFPE, "SIGFPE")]
    {
        let e = Runtime::builder().workers(1).dump_on_signal(sig).build().expect_err(name);
        assert_eq!(e.kind(), &BuildErrorKind::FaultSignal { signal: sig, name });
        let text = e.to_string();
        assert!(text.contains(name) && text.contains("stack-overflow") && text.contains("SIGQUIT"), "{text}");
        let e = signal::signal(SignalKind::from_raw(sig)).expect_err(name);
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidInput, "{name}");
        assert!(e.to_string().contains(name), "{e}");
    }
    // Still accepted: a signal meant for it.
    assert!(Runtime::builder().workers(1).dump_on_signal(libc::SIGUSR1).build().is_ok());
}

/// In the child: this process's stderr, from now on, also collected in
/// the returned buffer (a pipe on fd 2, read by a thread that copies it to
/// the real stderr).
fn capture_stderr() -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: pipe writes two descriptors; dup/dup2 on descriptors we own
    // or on fd 2; the read end is owned by the File from here on.
    let (rd, real) = unsafe {
        assert_eq!(libc::pipe(fds.as_mut_ptr()), 0);
        let real = libc::dup(2);
        assert!(real >= 0);
        assert!(libc::dup2(fds[1], 2) >= 0);
        libc::close(fds[1]);
        (std::fs::File::from_raw_fd(fds[0]), std::fs::File::from_raw_fd(real))
    };
    let b = buf.clone();
    std::thread::spawn(move || {
        use std::io::Write as _;
        let (mut rd, mut real) = (rd, real);
        let mut chunk = [0u8; 4096];
        while let Ok(n) = rd.read(&mut chunk) {
            if n == 0 {
                break;
            }
            b.lock().unwrap().extend_from_slice(&chunk[..n]);
            let _ = real.write_all(&chunk[..n]);
        }
    });
    buf
}

/// The child's scenario: `signal::ctrl_c`'s handler (installed by its
/// first `SIGINT` stream) and a runtime dumping on `SIGINT`, set up in the
/// given order; then a fiber waits in `ctrl_c()` and `SIGINT` is raised
/// until it returns and the dump is on stderr (10 s at most). Prints
/// whether each saw it.
fn chain_scenario(ctrl_c_first: bool) {
    let err = capture_stderr();
    let build = || Runtime::builder().workers(1).dump_on_signal(libc::SIGINT).build().unwrap();
    let rt = if ctrl_c_first {
        drop(signal::signal(SignalKind::interrupt()).unwrap());
        build()
    } else {
        let rt = build();
        drop(signal::signal(SignalKind::interrupt()).unwrap());
        rt
    };
    let waiter = rt.spawn(|| signal::ctrl_c().unwrap());
    let dumped = || {
        String::from_utf8_lossy(&err.lock().unwrap())
            .contains(&format!("numafiber: signal {}: dump follows", libc::SIGINT))
    };
    let t = Instant::now();
    while t.elapsed() < Duration::from_secs(10) && !(waiter.is_finished() && dumped()) {
        // SAFETY: raise has no preconditions; the handlers are installed.
        unsafe { libc::raise(libc::SIGINT) };
        std::thread::sleep(Duration::from_millis(50));
    }
    let (got_ctrl_c, got_dump) = (waiter.is_finished(), dumped());
    if got_ctrl_c {
        waiter.join().unwrap();
    } else {
        std::mem::forget(rt); // the waiter would keep its drop waiting
    }
    println!("CTRL-C:{got_ctrl_c} DUMP:{got_dump}");
    println!("CHILD-OK");
}

/// Run this binary for `test` alone as a child; its stdout.
fn run_child(test: &str) -> String {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, test)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success() && stdout.contains("CHILD-OK"),
        "{test}: child ended with {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// `signal::ctrl_c`'s handler set up first, then `dump_on_signal(SIGINT)`:
/// both see the `SIGINT` (the dump's handler chains through signal-hook
/// instead of replacing it).
#[test]
fn ctrl_c_then_dump_on_sigint_both_see_it() {
    const NAME: &str = "ctrl_c_then_dump_on_sigint_both_see_it";
    match std::env::var(CHILD_ENV) {
        Ok(t) if t == NAME => return chain_scenario(true),
        Ok(_) => return,
        Err(_) => {}
    }
    let out = run_child(NAME);
    assert!(out.contains("CTRL-C:true DUMP:true"), "{out}");
}

/// The other order: `dump_on_signal(SIGINT)` first, then `ctrl_c`'s handler.
#[test]
fn dump_on_sigint_then_ctrl_c_both_see_it() {
    const NAME: &str = "dump_on_sigint_then_ctrl_c_both_see_it";
    match std::env::var(CHILD_ENV) {
        Ok(t) if t == NAME => return chain_scenario(false),
        Ok(_) => return,
        Err(_) => {}
    }
    let out = run_child(NAME);
    assert!(out.contains("CTRL-C:true DUMP:true"), "{out}");
}
