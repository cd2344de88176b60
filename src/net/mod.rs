//! Fiber-aware networking: TCP and UDP with `std::net`'s shapes, on a
//! reactor (mio: epoll on Linux).
//!
//! Every socket is non-blocking. A call that would block parks the calling
//! *fiber* until the socket is ready (the worker runs other fibers
//! meanwhile) and then retries; on a plain thread, or in a fiber of another
//! runtime than the one whose reactor the socket was registered with, it
//! blocks the thread in `poll(2)` instead, so the types behave like
//! `std::net` there. Each socket is registered once with its runtime's
//! reactor, the first time a fiber has to wait on it, and deregistered when
//! its last handle is dropped. How readiness reaches the fibers (one
//! reactor per runtime, polled by whichever worker goes idle) is described
//! in the runtime's protocol notes in the repository.
//!
//! Errors are std's: `Ok(0)` from a read of a connection the peer closed,
//! `BrokenPipe`/`ConnectionReset` writing to it, `ConnectionRefused`,
//! `AddrInUse`, `InvalidInput`. Timeouts report `WouldBlock` as std does on
//! Linux. A fiber waiting on a socket is never reported as a deadlock (a
//! peer may wake it), and at runtime shutdown it is unwound like any parked
//! fiber; I/O from a fiber that is being unwound fails with `Other`
//! instead of waiting.
//!
//! ```
//! use std::io::{BufRead, BufReader, Write};
//! use numafiber::{fiber, net::{TcpListener, TcpStream}, Runtime};
//!
//! let rt = Runtime::builder().workers(2).build()?;
//! rt.block_on(|| {
//!     let l = TcpListener::bind("127.0.0.1:0").unwrap();
//!     let addr = l.local_addr().unwrap();
//!     // A fiber per connection, written as blocking code.
//!     let server = fiber::spawn(move || {
//!         for c in l.incoming().take(3) {
//!             let c = c.unwrap();
//!             fiber::spawn(move || {
//!                 let mut line = String::new();
//!                 BufReader::new(&c).read_line(&mut line).unwrap();
//!                 (&c).write_all(line.to_uppercase().as_bytes()).unwrap();
//!             });
//!         }
//!     });
//!     let clients: Vec<_> = (0..3)
//!         .map(|i| fiber::spawn(move || {
//!             let mut s = TcpStream::connect(addr).unwrap();
//!             writeln!(s, "client {i}").unwrap();
//!             let mut back = String::new();
//!             BufReader::new(&s).read_line(&mut back).unwrap();
//!             assert_eq!(back, format!("CLIENT {i}\n"));
//!         }))
//!         .collect();
//!     fiber::when_all(clients);
//!     fiber::await_fiber(server);
//! });
//! # Ok::<(), numafiber::BuildError>(())
//! ```

mod source;
mod sys;
mod tcp;
mod udp;

use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

pub use tcp::{Incoming, TcpListener, TcpStream};
pub use udp::UdpSocket;

/// Try `f` on each address `addr` resolves to; the last error, or
/// `InvalidInput` if it resolves to none (std's `each_addr`).
fn each_addr<A: ToSocketAddrs, T>(addr: A, mut f: impl FnMut(SocketAddr) -> io::Result<T>) -> io::Result<T> {
    let mut last = None;
    for a in addr.to_socket_addrs()? {
        match f(a) {
            Ok(t) => return Ok(t),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "could not resolve to any addresses")))
}
