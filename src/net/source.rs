//! One non-blocking socket and the blocking-style wait around its syscalls:
//! park the fiber on the reactor, or `poll(2)` the thread.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering::*};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use mio::event::Source;

use crate::runtime;
use crate::runtime::io::{Dir, Reactor, Registration};
use crate::runtime::shared::Shared;
use crate::runtime::task::{wait_kind, TaskRef};

/// A mio socket, its reactor registration (made the first time a fiber
/// has to wait on it) and its timeouts (shared by `try_clone`s, as the
/// kernel's `SO_RCVTIMEO` is shared by dup'ed fds).
///
/// **Readiness kept per socket.** Once registered, each direction also
/// remembers the readiness event count at which a call last said
/// `WouldBlock`. While the count has not moved since, the socket is known
/// not ready and a fiber parks without trying the call again (tokio clears
/// its `ScheduledIo` readiness the same way), so a wait costs at most one
/// failed call. No readiness is lost: data (or a FIN, or an error) that
/// arrives after the failed call makes the edge-triggered epoll report an
/// event, which bumps the count (`runtime::io::ScheduledIo`), so the next call
/// tries again; an event for data that call already saw only causes a
/// spare retry.
pub(crate) struct IoSource<S: Source + AsRawFd> {
    sock: S,
    reg: OnceLock<Registration>,
    reg_init: Mutex<()>,
    /// Nanoseconds; 0 is "no timeout".
    timeouts: [AtomicU64; 2],
    /// Per direction: 1 + the event count at which the direction was seen
    /// drained; 0 when unknown.
    drained_at: [AtomicU64; 2],
}

impl<S: Source + AsRawFd> IoSource<S> {
    pub(crate) fn new(sock: S) -> Arc<IoSource<S>> {
        Arc::new(IoSource {
            sock,
            reg: OnceLock::new(),
            reg_init: Mutex::new(()),
            timeouts: Default::default(),
            drained_at: Default::default(),
        })
    }

    pub(crate) fn sock(&self) -> &S {
        &self.sock
    }

    pub(crate) fn set_timeout(&self, d: Dir, t: Option<Duration>) -> io::Result<()> {
        let nanos = match t {
            None => 0,
            Some(t) if t.is_zero() => {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "cannot set a 0 duration timeout (use None for no timeout)",
                ))
            }
            Some(t) => u64::try_from(t.as_nanos()).unwrap_or(u64::MAX),
        };
        self.timeouts[d as usize].store(nanos, Relaxed);
        Ok(())
    }

    pub(crate) fn timeout(&self, d: Dir) -> Option<Duration> {
        match self.timeouts[d as usize].load(Relaxed) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// Run the non-blocking `op` until it does not say `WouldBlock`,
    /// waiting for readiness `d` in between, up to the direction's timeout.
    #[track_caller]
    pub(crate) fn do_io<R>(&self, d: Dir, mut op: impl FnMut(&S) -> io::Result<R>) -> io::Result<R> {
        let timeout = self.timeout(d);
        self.do_io_until(d, timeout.and_then(|t| Instant::now().checked_add(t)), timeout, &mut op, |_| false)
    }

    /// `do_io` for a stream read or write of `len` bytes.
    #[track_caller]
    pub(crate) fn do_stream_io(
        &self,
        d: Dir,
        len: usize,
        mut op: impl FnMut(&S) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let timeout = self.timeout(d);
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        // A short transfer (some bytes, fewer than asked) drained the
        // direction, as tokio takes it: the next call waits for an event
        // instead of failing a syscall first. Not once an event carried
        // the peer's close or an error (`do_io_until` checks): no later
        // event repeats those, so the next call must try the syscall.
        self.do_io_until(d, deadline, timeout, &mut op, |n: &usize| *n > 0 && *n < len)
    }

    /// `do_io` with an explicit deadline (`None`: wait forever); `short`
    /// tells whether a successful result left the direction drained.
    #[track_caller]
    pub(crate) fn do_io_until<R>(
        &self,
        d: Dir,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
        op: &mut impl FnMut(&S) -> io::Result<R>,
        short: impl Fn(&R) -> bool,
    ) -> io::Result<R> {
        // Fast path: just the syscall, unless the socket is known drained.
        let mut would_block = 0;
        match self.reg.get() {
            None => match op(&self.sock) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => would_block = 1,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            },
            Some(reg) => {
                let (seen, closed) = reg.io.seq(d);
                if !self.is_drained(d, seen) {
                    match op(&self.sock) {
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                            would_block = 1;
                            self.mark_drained(d, seen);
                        }
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        r => {
                            if !closed && r.as_ref().is_ok_and(&short) {
                                self.mark_drained(d, seen);
                            }
                            return r;
                        }
                    }
                }
            }
        }
        let on_fiber = runtime::with_current_fiber(|task, shared| {
            if runtime::current_cannot_suspend() {
                return Err(task);
            }
            Ok((task, self.registration(shared)))
        });
        match on_fiber {
            Some(Ok((task, reg))) => {
                // `None`: registered with another runtime's reactor; block
                // this worker thread instead (documented).
                if let Some(reg) = reg? {
                    reg.reactor.note_would_block(would_block);
                    return self.fiber_loop(reg, &task, d, deadline, timeout, op, &short);
                }
            }
            Some(Err(_)) => {
                return Err(io::Error::other(
                    "numafiber::net: this fiber is being destroyed (runtime shutdown) or is unwinding a \
                     panic, so it cannot wait for the socket",
                ))
            }
            None => {}
        }
        self.thread_loop(d, deadline, timeout, op)
    }

    /// The registration with `shared`'s reactor (made now if needed), or
    /// `None` if the socket belongs to another runtime's reactor.
    fn registration(&self, shared: &Shared) -> io::Result<Option<&Registration>> {
        let reactor = Reactor::of(shared)?;
        let reg = match self.reg.get() {
            Some(r) => r,
            None => {
                let _g = self.reg_init.lock().unwrap_or_else(|e| e.into_inner());
                match self.reg.get() {
                    Some(r) => r,
                    None => {
                        // mio's register takes `&mut`, but only reads the
                        // fd: register through a by-fd source.
                        let raw = self.sock.as_raw_fd();
                        let mut fd = mio::unix::SourceFd(&raw);
                        let r = reactor.register(&mut fd)?;
                        self.reg.get_or_init(|| r)
                    }
                }
            }
        };
        Ok(Arc::ptr_eq(&reg.reactor, reactor).then_some(reg))
    }

    /// The direction was seen drained at event count `seen`, and no event
    /// came since (the caller read `seen` just now).
    #[inline]
    fn is_drained(&self, d: Dir, seen: u64) -> bool {
        self.drained_at[d as usize].load(Relaxed) == seen.wrapping_add(1)
    }

    /// A call begun at event count `seen` found the direction drained.
    #[inline]
    fn mark_drained(&self, d: Dir, seen: u64) {
        self.drained_at[d as usize].store(seen.wrapping_add(1), Relaxed);
    }

    #[allow(clippy::too_many_arguments)]
    #[track_caller]
    fn fiber_loop<R>(
        &self,
        reg: &Registration,
        task: &TaskRef,
        d: Dir,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
        op: &mut impl FnMut(&S) -> io::Result<R>,
        short: &impl Fn(&R) -> bool,
    ) -> io::Result<R> {
        loop {
            let (seen, closed) = reg.io.seq(d);
            // Known drained since `seen`: wait for the next event instead.
            if !self.is_drained(d, seen) {
                match op(&self.sock) {
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        reg.reactor.note_would_block(1);
                        self.mark_drained(d, seen);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    r => {
                        if !closed && r.as_ref().is_ok_and(short) {
                            self.mark_drained(d, seen);
                        }
                        return r;
                    }
                }
            }
            if let Some(dl) = deadline {
                if Instant::now() >= dl {
                    return Err(timed_out(d, timeout));
                }
            }
            if !reg.io.add_waiter(&reg.reactor, d, seen, task) {
                continue; // an event came in between: retry
            }
            let kind = match d {
                Dir::Read => wait_kind::IO,
                Dir::Write => wait_kind::IO_WRITE,
            };
            runtime::set_wait_reason(kind, reg.io_addr());
            match deadline {
                Some(dl) => runtime::park_until(dl),
                None => runtime::park(),
            }
            runtime::set_wait_reason(wait_kind::NONE, 0);
            reg.io.remove_waiter(&reg.reactor, d, task);
            if runtime::current_cannot_suspend() {
                return Err(io::Error::other(
                    "numafiber::net: the runtime is shutting down (the fiber waiting on the socket is destroyed)",
                ));
            }
        }
    }

    fn thread_loop<R>(
        &self,
        d: Dir,
        deadline: Option<Instant>,
        timeout: Option<Duration>,
        op: &mut impl FnMut(&S) -> io::Result<R>,
    ) -> io::Result<R> {
        let fd = self.sock.as_raw_fd();
        loop {
            let ms = match deadline {
                None => -1,
                Some(dl) => {
                    let now = Instant::now();
                    if now >= dl {
                        return Err(timed_out(d, timeout));
                    }
                    // Round up so we never wake before the deadline.
                    let left = dl - now;
                    i32::try_from(left.as_micros().div_ceil(1000)).unwrap_or(i32::MAX)
                }
            };
            poll_fd(fd, d, ms)?;
            match op(&self.sock) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock || e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
}

impl<S: Source + AsRawFd> Drop for IoSource<S> {
    fn drop(&mut self) {
        if let Some(reg) = self.reg.get() {
            reg.deregister(&mut mio::unix::SourceFd(&self.sock.as_raw_fd()));
        }
    }
}

impl<S: Source + AsRawFd> AsRawFd for IoSource<S> {
    fn as_raw_fd(&self) -> RawFd {
        self.sock.as_raw_fd()
    }
}

fn timed_out(d: Dir, t: Option<Duration>) -> io::Error {
    let what = match d {
        Dir::Read => "read",
        Dir::Write => "write",
    };
    // std on Linux reports an expired SO_RCVTIMEO/SO_SNDTIMEO as EAGAIN,
    // i.e. `WouldBlock`; keep that kind so code written against std works.
    io::Error::new(
        io::ErrorKind::WouldBlock,
        match t {
            Some(t) => format!("{what} timed out after {t:?} (set_{what}_timeout)"),
            None => format!("{what} timed out"),
        },
    )
}

/// Block the thread until `fd` is ready for `d` or `ms` milliseconds pass
/// (-1: forever). A timeout returns `Ok` (the caller re-checks).
fn poll_fd(fd: RawFd, d: Dir, ms: i32) -> io::Result<()> {
    let events = match d {
        Dir::Read => libc::POLLIN,
        Dir::Write => libc::POLLOUT,
    };
    let mut p = libc::pollfd { fd, events, revents: 0 };
    // SAFETY: `p` is one valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&mut p, 1, ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
    Ok(())
}
