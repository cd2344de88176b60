//! `examples/graceful_server.rs` stopped by a real SIGINT that the test
//! sends to its own process: the accept loop (parked in `accept`) and
//! every connection fiber (parked in `read`) are cancelled, the idle
//! clients see their connections closed, and every fiber is counted.
//! A test binary of its own: it installs a SIGINT handler for the process.

#[path = "../examples/graceful_server.rs"]
mod graceful_server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use numafiber::net::TcpListener;
use numafiber::Runtime;

use graceful_server::{serve, Report};

/// One echo round trip on a plain-thread client.
fn round_trip(s: &mut TcpStream, msg: &[u8]) {
    s.write_all(msg).unwrap();
    let mut got = vec![0u8; msg.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(got, msg);
}

#[test]
fn stops_on_sigint_and_closes_every_connection() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let mut client = None;
    let report = rt
        .block_on(|| {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            serve(l, |addr| {
                client = Some(std::thread::spawn(move || {
                    // Two clients that finish...
                    for i in 0..2u8 {
                        let mut s = TcpStream::connect(addr).unwrap();
                        round_trip(&mut s, &[i; 16]);
                    }
                    // ...and two that stay connected, idle.
                    let mut idle: Vec<TcpStream> = (0..2).map(|_| TcpStream::connect(addr).unwrap()).collect();
                    for s in &mut idle {
                        round_trip(s, b"still here");
                        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
                    }
                    // SAFETY: kill and getpid have no preconditions; the
                    // handler was installed before `ready` was called.
                    assert_eq!(unsafe { libc::kill(libc::getpid(), libc::SIGINT) }, 0);
                    // The server closes the idle connections: EOF.
                    idle.into_iter()
                        .map(|mut s| {
                            let mut b = [0u8; 1];
                            s.read(&mut b).unwrap_or(usize::MAX)
                        })
                        .collect::<Vec<_>>()
                }));
            })
        })
        .unwrap();
    let eofs = client.take().unwrap().join().unwrap();
    assert_eq!(eofs, [0, 0], "each idle client saw its connection closed by the server");
    assert_eq!(report, Report { served: 4, closed: 4 }, "every connection fiber ended and was counted");
}
