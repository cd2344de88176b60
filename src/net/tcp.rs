//! TCP: `TcpListener` and `TcpStream` with `std::net`'s shapes.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::each_addr;
use super::source::IoSource;
use super::sys;

/// Backlog asked of listen(2); the kernel caps it at `net.core.somaxconn`.
const LISTEN_BACKLOG: libc::c_int = 65_535;
use crate::runtime::io::Dir;

/// A TCP socket server, listening for connections (`std::net::TcpListener`
/// shape). `accept` parks the calling fiber, not its worker thread, until a
/// client connects; on a plain thread it blocks the thread like std.
///
/// ```
/// use std::io::{Read, Write};
/// use numafiber::{fiber, net::{TcpListener, TcpStream}, Runtime};
///
/// let rt = Runtime::builder().workers(2).build()?;
/// let got = rt.block_on(|| {
///     let listener = TcpListener::bind("127.0.0.1:0").unwrap();
///     let addr = listener.local_addr().unwrap();
///     let server = fiber::spawn(move || {
///         let (mut s, _) = listener.accept().unwrap();
///         let mut buf = [0u8; 5];
///         s.read_exact(&mut buf).unwrap();
///         s.write_all(&buf).unwrap(); // echo
///     });
///     let mut c = TcpStream::connect(addr).unwrap();
///     c.write_all(b"hello").unwrap();
///     let mut back = [0u8; 5];
///     c.read_exact(&mut back).unwrap();
///     fiber::await_fiber(server);
///     back
/// });
/// assert_eq!(&got, b"hello");
/// # Ok::<(), numafiber::BuildError>(())
/// ```
#[derive(Clone)]
pub struct TcpListener {
    inner: Arc<IoSource<mio::net::TcpListener>>,
}

/// A TCP connection (`std::net::TcpStream` shape): `Read` and `Write` (also
/// on `&TcpStream`) park the calling fiber until the socket is ready, up to
/// the read/write timeout; on a plain thread they block the thread.
///
/// `try_clone` gives another handle on the same socket (timeouts are
/// shared, as std's are through the kernel); the socket closes when the
/// last handle is dropped.
///
/// ```
/// use std::io::{Read, Write};
/// use numafiber::net::{TcpListener, TcpStream};
///
/// // From a plain thread they behave like std::net.
/// let l = TcpListener::bind("127.0.0.1:0")?;
/// let mut c = TcpStream::connect(l.local_addr()?)?;
/// let (mut s, peer) = l.accept()?;
/// assert_eq!(peer, c.local_addr()?);
/// c.write_all(b"ping")?;
/// let mut buf = [0u8; 4];
/// s.read_exact(&mut buf)?;
/// assert_eq!(&buf, b"ping");
/// drop(c);
/// assert_eq!(s.read(&mut buf)?, 0); // the peer closed: end of stream
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct TcpStream {
    inner: Arc<IoSource<mio::net::TcpStream>>,
}

impl fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpListener").field("addr", &self.local_addr().ok()).field("fd", &self.as_raw_fd()).finish()
    }
}

impl fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TcpStream")
            .field("addr", &self.local_addr().ok())
            .field("peer", &self.peer_addr().ok())
            .field("fd", &self.as_raw_fd())
            .finish()
    }
}

impl TcpListener {
    /// Bind to `addr` (each resolved address is tried in turn, as std
    /// does) and listen. `SO_REUSEADDR` is set, as std does on Unix.
    ///
    /// Unlike std (backlog 128), the accept queue is as long as the kernel
    /// allows (`net.core.somaxconn`, 4096 by default), as Go does: a fiber
    /// server is expected to take bursts of thousands of connects, and a
    /// connect that finds the queue full has its SYN dropped and waits a
    /// second for the retransmission.
    ///
    /// Errors as std: `AddrInUse` for a port in use, `InvalidInput` for an
    /// address that does not resolve to anything, `AddrNotAvailable` for an
    /// address not on this host. Resolving a host name blocks the worker
    /// thread (use [`crate::fiber::spawn_blocking`] with `to_socket_addrs`
    /// for names that need DNS).
    ///
    /// ```
    /// let a = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let port_in_use = a.local_addr()?;
    /// let e = numafiber::net::TcpListener::bind(port_in_use).unwrap_err();
    /// assert_eq!(e.kind(), std::io::ErrorKind::AddrInUse);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<TcpListener> {
        each_addr(addr, |a| {
            let l = mio::net::TcpListener::bind(a)?;
            // Calling listen(2) again on a listening socket sets its backlog;
            // the kernel truncates it to net.core.somaxconn.
            // SAFETY: the fd is a valid, bound, listening socket owned by `l`.
            if unsafe { libc::listen(l.as_raw_fd(), LISTEN_BACKLOG) } != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(l)
        })
        .map(|l| TcpListener { inner: IoSource::new(l) })
    }

    /// Accept one connection: the new stream and the peer's address.
    ///
    /// ```no_run
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:8080")?;
    /// let (stream, peer) = l.accept()?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (s, a) = self.inner.do_io(Dir::Read, |l| l.accept())?;
        Ok((TcpStream { inner: IoSource::new(s) }, a))
    }

    /// An endless iterator of `accept`ed connections (std's `incoming`).
    ///
    /// ```no_run
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:8080")?;
    /// for s in l.incoming().take(1) {
    ///     let _s = s?;
    /// }
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn incoming(&self) -> Incoming<'_> {
        Incoming { listener: self }
    }

    /// The address the listener is bound to.
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// assert_ne!(l.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.sock().local_addr()
    }

    /// Another handle on the same listener.
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// assert_eq!(l.try_clone()?.local_addr()?, l.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_clone(&self) -> io::Result<TcpListener> {
        Ok(self.clone())
    }

    /// The pending socket error (`SO_ERROR`), if any.
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// assert!(l.take_error()?.is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.sock().take_error()
    }
}

impl AsRawFd for TcpListener {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

/// The iterator of [`TcpListener::incoming`]; never ends.
#[derive(Debug)]
pub struct Incoming<'a> {
    listener: &'a TcpListener,
}

impl Iterator for Incoming<'_> {
    type Item = io::Result<TcpStream>;
    #[track_caller]
    fn next(&mut self) -> Option<io::Result<TcpStream>> {
        Some(self.listener.accept().map(|(s, _)| s))
    }
}

impl TcpStream {
    /// Connect to `addr` (each resolved address in turn, as std does),
    /// parking the fiber until the handshake completes.
    ///
    /// Errors as std: `ConnectionRefused` for a closed port, `InvalidInput`
    /// for an address that resolves to nothing. Host-name resolution
    /// blocks the worker (see [`TcpListener::bind`]).
    ///
    /// ```
    /// // A port nobody listens on (bound, then closed):
    /// let port = numafiber::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?;
    /// let e = numafiber::net::TcpStream::connect(port).unwrap_err();
    /// assert_eq!(e.kind(), std::io::ErrorKind::ConnectionRefused);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn connect<A: ToSocketAddrs>(addr: A) -> io::Result<TcpStream> {
        each_addr(addr, |a| connect_one(a, None))
    }

    /// Connect to one address, giving up after `timeout` (std's
    /// `connect_timeout`; a zero timeout is `InvalidInput`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let s = numafiber::net::TcpStream::connect_timeout(&l.local_addr()?, Duration::from_secs(5))?;
    /// assert_eq!(s.peer_addr()?, l.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn connect_timeout(addr: &SocketAddr, timeout: Duration) -> io::Result<TcpStream> {
        if timeout.is_zero() {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "cannot set a 0 duration timeout"));
        }
        connect_one(*addr, Some(timeout))
    }

    /// The remote address.
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// assert_eq!(c.peer_addr()?, l.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.sock().peer_addr()
    }

    /// The local address.
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// assert!(c.local_addr()?.ip().is_loopback());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.sock().local_addr()
    }

    /// Shut down the read half, the write half or both (`shutdown(2)`).
    ///
    /// ```
    /// use std::io::Read;
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// let (mut s, _) = l.accept()?;
    /// c.shutdown(std::net::Shutdown::Write)?;
    /// assert_eq!(s.read(&mut [0u8; 8])?, 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.sock().shutdown(how)
    }

    /// Set `TCP_NODELAY` (disable Nagle's algorithm).
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// c.set_nodelay(true)?;
    /// assert!(c.nodelay()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_nodelay(&self, on: bool) -> io::Result<()> {
        self.inner.sock().set_nodelay(on)
    }

    /// Whether `TCP_NODELAY` is set.
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// assert!(!c.nodelay()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn nodelay(&self) -> io::Result<bool> {
        self.inner.sock().nodelay()
    }

    /// Reads wait at most `t` (then fail with `WouldBlock`, as std on
    /// Linux does); `None` waits forever. `Some(Duration::ZERO)` is
    /// `InvalidInput`, as in std.
    ///
    /// ```
    /// use std::io::Read;
    /// use std::time::Duration;
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let mut c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// c.set_read_timeout(Some(Duration::from_millis(20)))?;
    /// let e = c.read(&mut [0u8; 1]).unwrap_err(); // nobody writes
    /// assert!(matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.inner.set_timeout(Dir::Read, t)
    }

    /// Writes wait at most `t` for buffer space (as `set_read_timeout`).
    ///
    /// ```
    /// use std::time::Duration;
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// c.set_write_timeout(Some(Duration::from_secs(1)))?;
    /// assert_eq!(c.write_timeout()?, Some(Duration::from_secs(1)));
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.inner.set_timeout(Dir::Write, t)
    }

    /// The read timeout.
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// assert_eq!(c.read_timeout()?, None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.inner.timeout(Dir::Read))
    }

    /// The write timeout.
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// assert_eq!(c.write_timeout()?, None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.inner.timeout(Dir::Write))
    }

    /// Another handle on the same connection (shares the timeouts).
    ///
    /// ```
    /// use std::io::{Read, Write};
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// let (mut s, _) = l.accept()?;
    /// c.try_clone()?.write_all(b"x")?;
    /// let mut b = [0u8; 1];
    /// s.read_exact(&mut b)?;
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_clone(&self) -> io::Result<TcpStream> {
        Ok(self.clone())
    }

    /// The pending socket error (`SO_ERROR`), if any.
    ///
    /// ```
    /// let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
    /// let c = numafiber::net::TcpStream::connect(l.local_addr()?)?;
    /// assert!(c.take_error()?.is_none());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn take_error(&self) -> io::Result<Option<io::Error>> {
        self.inner.sock().take_error()
    }

    #[track_caller]
    fn read_inner(&self, buf: &mut [u8]) -> io::Result<usize> {
        let len = buf.len();
        self.inner.do_stream_io(Dir::Read, len, |s| sys::recv(s.as_raw_fd(), buf))
    }

    #[track_caller]
    fn write_inner(&self, buf: &[u8]) -> io::Result<usize> {
        self.inner.do_stream_io(Dir::Write, buf.len(), |s| sys::send(s.as_raw_fd(), buf))
    }

    /// `Read::read_exact` with the caller's line as the wait site (std's
    /// default method would be the caller the runtime sees); same errors.
    #[track_caller]
    fn read_exact_inner(&self, mut buf: &mut [u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.read_inner(buf) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "failed to fill whole buffer")),
                Ok(n) => buf = &mut buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// `Write::write_all` with the caller's line as the wait site; same
    /// errors as std's.
    #[track_caller]
    fn write_all_inner(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            match self.write_inner(buf) {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "failed to write whole buffer")),
                Ok(n) => buf = &buf[n..],
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

#[track_caller]
fn connect_one(addr: SocketAddr, timeout: Option<Duration>) -> io::Result<TcpStream> {
    let s = mio::net::TcpStream::connect(addr)?;
    let inner = IoSource::new(s);
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    // mio's recipe: wait for writability, then `SO_ERROR`, then
    // `peer_addr` (`NotConnected`: not done yet, keep waiting).
    inner
        .do_io_until(
            Dir::Write,
            deadline,
            timeout,
            &mut |s: &mio::net::TcpStream| {
                if let Some(e) = s.take_error()? {
                    return Err(e);
                }
                match s.peer_addr() {
                    Ok(_) => Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => Err(io::ErrorKind::WouldBlock.into()),
                    Err(e) => Err(e),
                }
            },
            |_| false,
        )
        .map_err(|e| {
            if e.kind() == io::ErrorKind::WouldBlock && timeout.is_some() {
                io::Error::new(io::ErrorKind::TimedOut, format!("connect to {addr} timed out"))
            } else {
                e
            }
        })?;
    Ok(TcpStream { inner })
}

impl AsRawFd for TcpStream {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

impl Read for TcpStream {
    #[track_caller]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buf)
    }
    #[track_caller]
    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.read_exact_inner(buf)
    }
}

impl Read for &TcpStream {
    #[track_caller]
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.read_inner(buf)
    }
    #[track_caller]
    fn read_exact(&mut self, buf: &mut [u8]) -> io::Result<()> {
        self.read_exact_inner(buf)
    }
}

impl Write for TcpStream {
    #[track_caller]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_inner(buf)
    }
    #[track_caller]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.write_all_inner(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Write for &TcpStream {
    #[track_caller]
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.write_inner(buf)
    }
    #[track_caller]
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.write_all_inner(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
