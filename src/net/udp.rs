//! UDP: `UdpSocket` with `std::net`'s shape.

use std::fmt;
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::{AsRawFd, RawFd};
use std::sync::Arc;
use std::time::Duration;

use super::each_addr;
use super::source::IoSource;
use crate::runtime::io::Dir;

/// A UDP socket (`std::net::UdpSocket` shape). Receives park the calling
/// fiber until a datagram arrives (up to the read timeout); on a plain
/// thread they block the thread.
///
/// ```
/// use numafiber::net::UdpSocket;
/// let a = UdpSocket::bind("127.0.0.1:0")?;
/// let b = UdpSocket::bind("127.0.0.1:0")?;
/// a.send_to(b"hi", b.local_addr()?)?;
/// let mut buf = [0u8; 16];
/// let (n, from) = b.recv_from(&mut buf)?;
/// assert_eq!((&buf[..n], from), (&b"hi"[..], a.local_addr()?));
/// # Ok::<(), std::io::Error>(())
/// ```
#[derive(Clone)]
pub struct UdpSocket {
    inner: Arc<IoSource<mio::net::UdpSocket>>,
}

impl fmt::Debug for UdpSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UdpSocket").field("addr", &self.local_addr().ok()).field("fd", &self.as_raw_fd()).finish()
    }
}

impl UdpSocket {
    /// Bind to `addr` (each resolved address in turn). Errors as std
    /// (`AddrInUse`, `InvalidInput`, `AddrNotAvailable`).
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// assert!(s.local_addr()?.ip().is_loopback());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn bind<A: ToSocketAddrs>(addr: A) -> io::Result<UdpSocket> {
        each_addr(addr, mio::net::UdpSocket::bind).map(|s| UdpSocket { inner: IoSource::new(s) })
    }

    /// Send one datagram to `addr` (the first address it resolves to).
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// assert_eq!(s.send_to(b"abc", s.local_addr()?)?, 3);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn send_to<A: ToSocketAddrs>(&self, buf: &[u8], addr: A) -> io::Result<usize> {
        let a = addr.to_socket_addrs()?.next().ok_or_else(no_addr)?;
        self.inner.do_io(Dir::Write, |s| s.send_to(buf, a))
    }

    /// Receive one datagram and its sender.
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// s.send_to(b"me", s.local_addr()?)?;
    /// let mut b = [0u8; 8];
    /// assert_eq!(s.recv_from(&mut b)?.0, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn recv_from(&self, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
        self.inner.do_io(Dir::Read, |s| s.recv_from(buf))
    }

    /// Set the default peer for `send`/`recv` (and filter received
    /// datagrams to it).
    ///
    /// ```
    /// let a = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// let b = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// a.connect(b.local_addr()?)?;
    /// assert_eq!(a.peer_addr()?, b.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn connect<A: ToSocketAddrs>(&self, addr: A) -> io::Result<()> {
        each_addr(addr, |a| self.inner.sock().connect(a))
    }

    /// Send to the connected peer.
    ///
    /// ```
    /// let a = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// let b = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// a.connect(b.local_addr()?)?;
    /// a.send(b"x")?;
    /// let mut buf = [0u8; 4];
    /// assert_eq!(b.recv(&mut buf)?, 1);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn send(&self, buf: &[u8]) -> io::Result<usize> {
        self.inner.do_io(Dir::Write, |s| s.send(buf))
    }

    /// Receive from the connected peer (or anyone, if not connected).
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// s.send_to(b"yo", s.local_addr()?)?;
    /// assert_eq!(s.recv(&mut [0u8; 4])?, 2);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    #[track_caller]
    pub fn recv(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.do_io(Dir::Read, |s| s.recv(buf))
    }

    /// The local address.
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// assert_ne!(s.local_addr()?.port(), 0);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.sock().local_addr()
    }

    /// The connected peer (`NotConnected` if none).
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// assert_eq!(s.peer_addr().unwrap_err().kind(), std::io::ErrorKind::NotConnected);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.sock().peer_addr()
    }

    /// Receives wait at most `t` (then `WouldBlock`, as std on Linux);
    /// `Some(Duration::ZERO)` is `InvalidInput`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// s.set_read_timeout(Some(Duration::from_millis(10)))?;
    /// assert_eq!(s.recv(&mut [0u8; 4]).unwrap_err().kind(), std::io::ErrorKind::WouldBlock);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_read_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.inner.set_timeout(Dir::Read, t)
    }

    /// Sends wait at most `t` for buffer space.
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// assert!(s.set_write_timeout(Some(std::time::Duration::ZERO)).is_err());
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn set_write_timeout(&self, t: Option<Duration>) -> io::Result<()> {
        self.inner.set_timeout(Dir::Write, t)
    }

    /// The read timeout.
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// assert_eq!(s.read_timeout()?, None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn read_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.inner.timeout(Dir::Read))
    }

    /// The write timeout.
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// assert_eq!(s.write_timeout()?, None);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn write_timeout(&self) -> io::Result<Option<Duration>> {
        Ok(self.inner.timeout(Dir::Write))
    }

    /// Another handle on the same socket.
    ///
    /// ```
    /// let s = numafiber::net::UdpSocket::bind("127.0.0.1:0")?;
    /// assert_eq!(s.try_clone()?.local_addr()?, s.local_addr()?);
    /// # Ok::<(), std::io::Error>(())
    /// ```
    pub fn try_clone(&self) -> io::Result<UdpSocket> {
        Ok(self.clone())
    }
}

impl AsRawFd for UdpSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.inner.as_raw_fd()
    }
}

fn no_addr() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any addresses")
}
