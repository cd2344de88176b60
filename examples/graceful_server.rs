//! A fiber-per-connection echo server that stops cleanly on Ctrl-C.
//!
//! ```text
//! cargo run --release --example graceful_server -- [ADDR]
//! ```
//! ADDR defaults to 127.0.0.1:7001. Press Ctrl-C (or `kill -INT <pid>`):
//! the accept loop, parked in `accept`, is cancelled; it cancels every
//! connection fiber (each parked in `read`, or between two), waits until
//! all have unwound (their sockets closed by their destructors), and the
//! program prints how many connections it served and closed.
//!
//! The pieces: `signal::ctrl_c()` parks a fiber until SIGINT;
//! `JoinHandle::cancel` makes a fiber unwind at its suspension point;
//! `JoinSet::cancel_all` does it for a set; `fiber::shield` lets the
//! cancelled accept loop still wait for its connections.
//! `tests/graceful_server.rs` runs `serve` and sends the SIGINT itself.

use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;

use numafiber::fiber::{self, JoinSet};
use numafiber::net::{TcpListener, TcpStream};
use numafiber::signal::{self, SignalKind};

/// What a stopped server reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Report {
    /// Connections accepted.
    pub served: usize,
    /// Connection fibers that ended (closed by the client, or cancelled).
    pub closed: usize,
}

/// Counts a connection fiber's end, however it ends (return or unwind).
struct Closed(Arc<AtomicUsize>);
impl Drop for Closed {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

fn echo(s: TcpStream) {
    let mut buf = [0u8; 4096];
    loop {
        match (&s).read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if (&s).write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

/// The accept loop: one fiber per connection, in a `JoinSet`. When this
/// fiber is cancelled (parked in `accept`), it cancels the connections and
/// waits for them before it ends.
fn accept_loop(listener: TcpListener, served: Arc<AtomicUsize>, closed: Arc<AtomicUsize>) -> io::Result<()> {
    let mut conns = JoinSet::new();
    let r = catch_unwind(AssertUnwindSafe(|| -> io::Result<()> {
        loop {
            let (s, _) = listener.accept()?; // a cancellation point
            served.fetch_add(1, SeqCst);
            let closed = closed.clone();
            conns.spawn(move || {
                let _closed = Closed(closed);
                echo(s)
            });
            while conns.try_join_next().is_some() {} // reap the finished ones
        }
    }));
    // Cancelled (or accept failed): stop every connection and wait for
    // them. Shielded: this fiber's cancellation is still pending, and the
    // waits below are cancellation points too.
    conns.cancel_all();
    fiber::shield(|| while conns.join_next().is_some() {});
    match r {
        Ok(r) => r,
        Err(p) => resume_unwind(p), // the cancellation goes on: the join sees it
    }
}

/// Serve on `listener` until SIGINT; `ready` is called with the address
/// once the SIGINT handler is installed. Call it from a fiber.
pub fn serve(listener: TcpListener, ready: impl FnOnce(SocketAddr)) -> io::Result<Report> {
    let mut ctrl_c = signal::signal(SignalKind::interrupt())?; // installs the handler now
    let addr = listener.local_addr()?;
    let served = Arc::new(AtomicUsize::new(0));
    let closed = Arc::new(AtomicUsize::new(0));
    let (s, c) = (served.clone(), closed.clone());
    let server = fiber::spawn(move || accept_loop(listener, s, c));
    ready(addr);
    ctrl_c.recv(); // parks this fiber until Ctrl-C
    server.cancel();
    match server.join() {
        Err(e) if e.is_cancelled() => {}
        Err(e) => e.resume(),
        Ok(r) => r?, // accept failed before the signal
    }
    Ok(Report { served: served.load(SeqCst), closed: closed.load(SeqCst) })
}

#[allow(dead_code)] // the test includes this file and calls `serve`
fn main() {
    let addr = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:7001".to_string());
    let rt = match numafiber::Runtime::builder().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("graceful_server: {e}");
            std::process::exit(1);
        }
    };
    let r = rt.block_on(move || -> io::Result<Report> {
        let l = TcpListener::bind(&addr)?;
        serve(l, |a| println!("graceful_server listening on {a}; Ctrl-C stops it"))
    });
    match r {
        Ok(r) => println!("stopped: {} connections served, {} closed", r.served, r.closed),
        Err(e) => {
            eprintln!("graceful_server: {e}");
            std::process::exit(1);
        }
    }
}
