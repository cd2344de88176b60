//! Dump on a signal the user names (Go prints its goroutines on SIGQUIT):
//! [`Builder::dump_on_signal`](crate::Builder::dump_on_signal).
//!
//! The handler only writes the signal number to a pipe (`write(2)` is
//! async-signal-safe); one helper thread per process, blocked in `read(2)`
//! on the other end (no CPU while nothing arrives), takes the dump of
//! every live runtime that asked for that signal and writes it to stderr.
//! Nothing is allocated, locked or formatted in the handler.

use std::io::Write as _;
use std::sync::atomic::{AtomicI32, Ordering::*};
use std::sync::{Arc, Mutex, Weak};

use crate::runtime::shared::Shared;

/// Write end of the self-pipe (-1 until the helper thread exists).
static PIPE_WR: AtomicI32 = AtomicI32::new(-1);

/// Runtimes and the signal each asked for.
static WATCHERS: Mutex<Vec<(libc::c_int, Weak<Shared>)>> = Mutex::new(Vec::new());

extern "C" fn on_signal(sig: libc::c_int) {
    let fd = PIPE_WR.load(Relaxed);
    if fd >= 0 {
        let b = sig as u8;
        // SAFETY: write(2) is async-signal-safe; one byte from a local.
        // A full pipe drops the byte (a dump is already pending).
        unsafe { libc::write(fd, (&b as *const u8).cast(), 1) };
    }
}

/// Ask for a dump of `shared` on stderr whenever `sig` arrives. Errors:
/// the signal cannot be caught (`SIGKILL`, `SIGSTOP`, out of range), or
/// the pipe or the helper thread cannot be made.
pub(crate) fn watch(shared: &Arc<Shared>, sig: libc::c_int) -> std::io::Result<()> {
    let mut w = WATCHERS.lock().unwrap_or_else(|e| e.into_inner());
    if PIPE_WR.load(Acquire) < 0 {
        let mut fds = [0 as libc::c_int; 2];
        // SAFETY: pipe2 writes two descriptors into `fds`.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC | libc::O_NONBLOCK) } != 0 {
            return Err(std::io::Error::last_os_error());
        }
        let rd = fds[0];
        // The read end blocks: the helper thread sleeps in read(2).
        // SAFETY: fcntl on a descriptor we own.
        unsafe { libc::fcntl(rd, libc::F_SETFL, 0) };
        std::thread::Builder::new().name("numafiber-dump-signal".into()).spawn(move || reader(rd))?;
        crate::runtime::monitor::internal_thread_started();
        PIPE_WR.store(fds[1], Release);
    }
    if !w.iter().any(|(s, _)| *s == sig) {
        // SAFETY: a zeroed sigaction is valid; the handler is an
        // `extern "C" fn(c_int)` that only calls write(2).
        unsafe {
            let mut sa: libc::sigaction = std::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            sa.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut sa.sa_mask);
            if libc::sigaction(sig, &sa, std::ptr::null_mut()) != 0 {
                return Err(std::io::Error::last_os_error());
            }
        }
    }
    w.retain(|(_, r)| r.strong_count() > 0);
    w.push((sig, Arc::downgrade(shared)));
    Ok(())
}

fn reader(rd: libc::c_int) {
    let mut b = 0u8;
    loop {
        // SAFETY: reads one byte into a local.
        let n = unsafe { libc::read(rd, (&mut b as *mut u8).cast(), 1) };
        if n != 1 {
            if n < 0 && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return;
        }
        let sig = libc::c_int::from(b);
        let targets: Vec<Arc<Shared>> = {
            let w = WATCHERS.lock().unwrap_or_else(|e| e.into_inner());
            w.iter().filter(|(s, _)| *s == sig).filter_map(|(_, r)| r.upgrade()).collect()
        };
        for s in targets {
            let d = super::capture(&s);
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "numafiber: signal {sig}: dump follows");
            let _ = write!(err, "{}", d.grouped());
            let _ = writeln!(err);
            let _ = write!(err, "{d}");
        }
    }
}
