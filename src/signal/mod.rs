//! Waiting for Unix signals in a fiber: [`ctrl_c`] and [`signal`]
//! (tokio's `signal` shape), on signal-hook.
//!
//! A fiber that waits here parks (its worker runs other fibers); a plain
//! thread blocks. The usual use is stopping a server cleanly: one fiber
//! waits for Ctrl-C and then cancels the accept loop
//! ([`JoinHandle::cancel`](crate::fiber::JoinHandle::cancel); a fiber
//! parked in `accept`, `read` or `connect` unwinds at once), see
//! `examples/graceful_server.rs`.
//!
//! # How it works
//!
//! 1. The first [`signal`] call for a kind installs a handler for it
//!    (signal-hook's self-pipe: the handler only writes a byte) and, on the
//!    first call of all, starts one dispatcher thread,
//!    `numafiber-signal`, that reads the pipe.
//! 2. The dispatcher counts each delivery in the kind's slot (a
//!    [`sync::Mutex`](crate::sync::Mutex)`<u64>`) and wakes every waiter
//!    with the slot's [`Condvar`].
//! 3. A [`Signal`] remembers the count it has seen; [`Signal::recv`] waits
//!    until the count moves past it. Several deliveries between two `recv`
//!    calls are coalesced into one, as the OS coalesces pending signals.
//!
//! # What installing a handler changes
//!
//! Once a kind has a handler, its default action is gone for the life of
//! the process (tokio does the same): after the first `ctrl_c()` call,
//! Ctrl-C no longer kills the program, even when nobody waits any more.
//! signal-hook chains to a handler that was installed before it, and runs
//! every action registered through it for a signal: a
//! [`Builder::dump_on_signal`](crate::Builder::dump_on_signal) on the same
//! signal (also signal-hook's) and [`ctrl_c`] both see each delivery,
//! whichever was set up first.
//!
//! Refused with [`io::ErrorKind::InvalidInput`]: `SIGKILL` and `SIGSTOP`
//! (they cannot be caught); `SIGSEGV`, `SIGBUS`, `SIGILL` and `SIGFPE`
//! (the program's own faults raise them, and on `SIGSEGV` and `SIGBUS`
//! numafiber's fiber stack-overflow report runs); numbers outside
//! `1..=SIGRTMAX`.

use std::collections::HashMap;
use std::io;
use std::sync::{Arc, OnceLock};

use crate::sync::{Condvar, Mutex};

/// A kind of signal (`tokio::signal::unix::SignalKind` shape).
///
/// ```
/// use numafiber::signal::SignalKind;
/// assert_eq!(SignalKind::interrupt().as_raw_value(), libc::SIGINT);
/// assert_eq!(SignalKind::from_raw(libc::SIGUSR1), SignalKind::user_defined1());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SignalKind(libc::c_int);

impl SignalKind {
    /// Any signal by number (checked when it is waited for: see
    /// [`signal`]).
    pub const fn from_raw(signum: libc::c_int) -> SignalKind {
        SignalKind(signum)
    }
    /// The signal's number.
    pub const fn as_raw_value(&self) -> libc::c_int {
        self.0
    }
    /// `SIGINT` (Ctrl-C in a terminal).
    pub const fn interrupt() -> SignalKind {
        SignalKind(libc::SIGINT)
    }
    /// `SIGTERM` (the polite "stop", from `kill` or a service manager).
    pub const fn terminate() -> SignalKind {
        SignalKind(libc::SIGTERM)
    }
    /// `SIGHUP` (terminal gone; by convention also "reload configuration").
    pub const fn hangup() -> SignalKind {
        SignalKind(libc::SIGHUP)
    }
    /// `SIGQUIT` (Ctrl-\ in a terminal).
    pub const fn quit() -> SignalKind {
        SignalKind(libc::SIGQUIT)
    }
    /// `SIGUSR1`.
    pub const fn user_defined1() -> SignalKind {
        SignalKind(libc::SIGUSR1)
    }
    /// `SIGUSR2`.
    pub const fn user_defined2() -> SignalKind {
        SignalKind(libc::SIGUSR2)
    }
    /// `SIGCHLD` (a child process changed state).
    pub const fn child() -> SignalKind {
        SignalKind(libc::SIGCHLD)
    }
    /// `SIGWINCH` (the terminal was resized).
    pub const fn window_change() -> SignalKind {
        SignalKind(libc::SIGWINCH)
    }
    /// `SIGALRM`.
    pub const fn alarm() -> SignalKind {
        SignalKind(libc::SIGALRM)
    }
    /// `SIGPIPE` (a write to a closed pipe or socket).
    pub const fn pipe() -> SignalKind {
        SignalKind(libc::SIGPIPE)
    }
}

/// Deliveries of one kind: a count, and the waiters for its next change.
struct Slot {
    count: Mutex<u64>,
    changed: Condvar,
}

struct Dispatcher {
    handle: signal_hook::iterator::Handle,
    slots: std::sync::Mutex<HashMap<libc::c_int, Arc<Slot>>>,
}

static DISPATCHER: OnceLock<Result<Dispatcher, (io::ErrorKind, String)>> = OnceLock::new();

fn dispatcher() -> io::Result<&'static Dispatcher> {
    let d = DISPATCHER.get_or_init(|| {
        let fail = |e: io::Error| (e.kind(), e.to_string());
        let mut signals = signal_hook::iterator::Signals::new(std::iter::empty::<libc::c_int>()).map_err(fail)?;
        let handle = signals.handle();
        std::thread::Builder::new()
            .name("numafiber-signal".into())
            .spawn(move || {
                for sig in signals.forever() {
                    deliver(sig);
                }
            })
            .map_err(fail)?;
        Ok(Dispatcher { handle, slots: std::sync::Mutex::new(HashMap::new()) })
    });
    d.as_ref()
        .map_err(|(k, m)| io::Error::new(*k, format!("numafiber::signal: could not start the signal dispatcher: {m}")))
}

/// Step 2, on the dispatcher thread.
fn deliver(sig: libc::c_int) {
    let Some(Ok(d)) = DISPATCHER.get() else { return };
    let slot = d.slots.lock().unwrap_or_else(|e| e.into_inner()).get(&sig).cloned();
    if let Some(slot) = slot {
        *slot.count.lock() += 1;
        slot.changed.notify_all();
    }
}

/// Check `kind` and install its handler (step 1); its slot.
fn slot_for(kind: SignalKind) -> io::Result<Arc<Slot>> {
    let sig = kind.0;
    if sig < 1 || sig > libc::SIGRTMAX() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("signal number {sig} is out of range: use 1..={} (see SignalKind)", libc::SIGRTMAX()),
        ));
    }
    if let Some(name) = crate::runtime::dump::signal::fault_signal(sig) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "signal {sig} ({name}) cannot be waited for: the program's own faults raise it, and a handler \
                 would stand in the way of the fiber stack-overflow report (SIGSEGV, SIGBUS) or return to the \
                 faulting instruction; wait for SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2 instead"
            ),
        ));
    }
    if signal_hook::consts::FORBIDDEN.contains(&sig) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "signal {sig} cannot be waited for: SIGKILL and SIGSTOP cannot be caught; wait for SIGTERM, \
                 SIGINT, SIGHUP, SIGQUIT, SIGUSR1 or SIGUSR2 instead"
            ),
        ));
    }
    let d = dispatcher()?;
    let mut slots = d.slots.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(s) = slots.get(&sig) {
        return Ok(s.clone());
    }
    // The slot first, so the first delivery after the handler is counted.
    let slot = Arc::new(Slot { count: Mutex::new(0), changed: Condvar::new() });
    slots.insert(sig, slot.clone());
    if let Err(e) = d.handle.add_signal(sig) {
        slots.remove(&sig);
        return Err(io::Error::new(
            e.kind(),
            format!("numafiber::signal: cannot install a handler for signal {sig}: {e}"),
        ));
    }
    Ok(slot)
}

/// A stream of deliveries of one signal kind; [`recv`](Signal::recv) waits
/// for the next one. Made by [`signal`].
///
/// ```no_run
/// use numafiber::{signal, Runtime};
/// let rt = Runtime::builder().workers(1).build().unwrap();
/// rt.block_on(|| -> std::io::Result<()> {
///     let mut hup = signal::signal(signal::SignalKind::hangup())?;
///     loop {
///         hup.recv(); // parks this fiber until the next SIGHUP
///         println!("reloading configuration");
///     }
/// }).unwrap();
/// ```
pub struct Signal {
    kind: SignalKind,
    slot: Arc<Slot>,
    seen: u64,
}

impl std::fmt::Debug for Signal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signal").field("kind", &self.kind).field("seen", &self.seen).finish()
    }
}

impl Signal {
    /// Wait until the signal is delivered after this `Signal` was made or
    /// after the previous `recv` returned (deliveries in between are
    /// coalesced into one). Parks a fiber, blocks a thread. A cancellation
    /// point.
    ///
    /// ```no_run
    /// let mut s = numafiber::signal::signal(numafiber::signal::SignalKind::user_defined1()).unwrap();
    /// s.recv();
    /// ```
    pub fn recv(&mut self) {
        let mut g = self.slot.count.lock();
        while *g == self.seen {
            g = self.slot.changed.wait(g);
        }
        self.seen = *g;
    }

    /// Whether the signal was delivered since this `Signal` was made or
    /// since the last `recv` / `try_recv` that returned; consumes that
    /// delivery. Never waits.
    ///
    /// ```
    /// use numafiber::signal::{signal, SignalKind};
    /// let mut s = signal(SignalKind::user_defined2()).unwrap();
    /// assert!(!s.try_recv());
    /// unsafe { libc::raise(libc::SIGUSR2) };
    /// while !s.try_recv() { std::thread::yield_now() } // the dispatcher counts it
    /// ```
    pub fn try_recv(&mut self) -> bool {
        let n = *self.slot.count.lock();
        let got = n != self.seen;
        self.seen = n;
        got
    }

    /// The kind this stream receives.
    ///
    /// ```
    /// use numafiber::signal::{signal, SignalKind};
    /// assert_eq!(signal(SignalKind::window_change()).unwrap().kind(), SignalKind::window_change());
    /// ```
    pub fn kind(&self) -> SignalKind {
        self.kind
    }
}

/// Listen for `kind`: installs its handler on the first call for that kind
/// (its default action is gone from then on, see the module docs) and
/// returns a [`Signal`] that sees the deliveries from now on.
///
/// # Errors
/// [`io::ErrorKind::InvalidInput`] for a refused signal (module docs:
/// `SIGKILL`, `SIGSTOP`, and the fault signals `SIGSEGV`, `SIGBUS`,
/// `SIGILL`, `SIGFPE`) or a number out of range; an OS error if the
/// handler or the dispatcher thread cannot be installed.
///
/// ```
/// use numafiber::signal::{signal, SignalKind};
/// assert!(signal(SignalKind::from_raw(libc::SIGKILL)).is_err());
/// assert!(signal(SignalKind::from_raw(libc::SIGBUS)).is_err());
/// assert!(signal(SignalKind::from_raw(0)).is_err());
/// ```
pub fn signal(kind: SignalKind) -> io::Result<Signal> {
    let slot = slot_for(kind)?;
    let seen = *slot.count.lock();
    Ok(Signal { kind, slot, seen })
}

/// Wait for the next Ctrl-C (`SIGINT`) after this call: parks the calling
/// fiber (or blocks the thread). The first call installs the handler, so
/// from then on Ctrl-C no longer ends the process by itself: the program
/// decides (module docs). A cancellation point.
///
/// # Errors
/// If the handler or the dispatcher thread cannot be installed.
///
/// ```no_run
/// use numafiber::{fiber, signal, Runtime};
/// let rt = Runtime::builder().build().unwrap();
/// rt.block_on(|| {
///     let server = fiber::spawn(|| { /* accept loop */ });
///     signal::ctrl_c().expect("install the SIGINT handler");
///     server.cancel(); // a fiber parked in accept unwinds at once
///     let _ = server.join();
/// });
/// ```
pub fn ctrl_c() -> io::Result<()> {
    signal(SignalKind::interrupt())?.recv();
    Ok(())
}
