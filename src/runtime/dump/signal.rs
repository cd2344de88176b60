//! Dump on a signal the user names (Go prints its goroutines on SIGQUIT):
//! [`Builder::dump_on_signal`](crate::Builder::dump_on_signal).
//!
//! The handler is signal-hook's (the same machinery as `numafiber::signal`):
//! it only writes to signal-hook's self-pipe, and one helper thread per
//! process, blocked on the other end (no CPU while nothing arrives), takes
//! the dump of every live runtime that asked for that signal and writes it
//! to stderr. Nothing is allocated, locked or formatted in the handler.
//!
//! # Handlers chain
//!
//! signal-hook keeps every action registered for a signal and runs them
//! all, and calls a handler installed before its first one. So a dump on
//! `SIGINT` and [`signal::ctrl_c`](crate::signal::ctrl_c) both see each
//! Ctrl-C, in whichever order the two were set up.
//!
//! # Signals refused
//!
//! `SIGSEGV`, `SIGBUS`, `SIGILL` and `SIGFPE` are raised by the program's
//! own faults: a handler that only asks for a dump would return to the
//! faulting instruction, and on `SIGSEGV` and `SIGBUS` it would stand in
//! the way of the fiber stack-overflow report (`task::overflow`). They are
//! refused ([`fault_signal`]), as `numafiber::signal` refuses them.

use std::io::Write as _;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use crate::runtime::shared::Shared;

/// Runtimes and the signal each asked for.
static WATCHERS: Mutex<Vec<(libc::c_int, Weak<Shared>)>> = Mutex::new(Vec::new());

/// The helper thread's registrations: signal-hook's handle of its
/// iterator, or why it could not start.
static READER: OnceLock<Result<signal_hook::iterator::Handle, (std::io::ErrorKind, String)>> = OnceLock::new();

/// The name of `sig` when the program's own faults raise it (`SIGSEGV`,
/// `SIGBUS`, `SIGILL`, `SIGFPE`): such a signal must not get a dump or
/// wait handler (module docs, "Signals refused").
pub(crate) fn fault_signal(sig: libc::c_int) -> Option<&'static str> {
    match sig {
        libc::SIGSEGV => Some("SIGSEGV"),
        libc::SIGBUS => Some("SIGBUS"),
        libc::SIGILL => Some("SIGILL"),
        libc::SIGFPE => Some("SIGFPE"),
        _ => None,
    }
}

/// Start the helper thread (once per process); signal-hook's handle to
/// add signals to it.
fn reader() -> std::io::Result<&'static signal_hook::iterator::Handle> {
    let r = READER.get_or_init(|| {
        let fail = |e: std::io::Error| (e.kind(), e.to_string());
        let mut signals = signal_hook::iterator::Signals::new(std::iter::empty::<libc::c_int>()).map_err(fail)?;
        let handle = signals.handle();
        std::thread::Builder::new()
            .name("numafiber-dump-signal".into())
            .spawn(move || {
                for sig in signals.forever() {
                    dump_for(sig);
                }
            })
            .map_err(fail)?;
        crate::runtime::monitor::internal_thread_started();
        Ok(handle)
    });
    r.as_ref().map_err(|(k, m)| std::io::Error::new(*k, format!("could not start the dump-on-signal thread: {m}")))
}

/// Ask for a dump of `shared` on stderr whenever `sig` arrives. Errors:
/// the signal cannot be caught (`SIGKILL`, `SIGSTOP`, a fault signal, out
/// of range: checked at `Builder::check_insight` first), or the helper
/// thread or the handler cannot be made.
pub(crate) fn watch(shared: &Arc<Shared>, sig: libc::c_int) -> std::io::Result<()> {
    if let Some(name) = fault_signal(sig) {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidInput, format!("{name} is raised by faults")));
    }
    let handle = reader()?;
    let mut w = WATCHERS.lock().unwrap_or_else(|e| e.into_inner());
    if !w.iter().any(|(s, _)| *s == sig) {
        handle.add_signal(sig)?;
    }
    w.retain(|(_, r)| r.strong_count() > 0);
    w.push((sig, Arc::downgrade(shared)));
    Ok(())
}

/// On the helper thread: the dump of every runtime watching `sig`.
fn dump_for(sig: libc::c_int) {
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
