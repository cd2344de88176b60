//! numafiber::net: echo from many fibers, accept storms, timeouts, plain
//! threads, shutdown with parked fibers, spawn_blocking, and the deadlock
//! detector leaving I/O waits alone.
//!
//! Tests that count open fds hold `FD_LOCK` so no other test of this binary
//! opens sockets meanwhile.

use std::io::{ErrorKind, Read, Write};
use std::net::Shutdown;
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use numafiber::net::{TcpListener, TcpStream, UdpSocket};
use numafiber::{fiber, Runtime};

static FD_LOCK: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    FD_LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

fn rt(workers: usize) -> Runtime {
    Runtime::builder().workers(workers).build().unwrap()
}

/// Byte `i` of message `m` of connection `c`.
fn pattern(c: usize, m: usize, i: usize) -> u8 {
    (c.wrapping_mul(31) ^ m.wrapping_mul(7) ^ i.wrapping_mul(13)) as u8
}

fn serve_echo(l: TcpListener, conns: usize) -> fiber::JoinHandle<usize> {
    fiber::spawn(move || {
        let mut handles = Vec::new();
        for _ in 0..conns {
            let (s, _) = l.accept().unwrap();
            handles.push(fiber::spawn(move || {
                let mut buf = vec![0u8; 8192];
                let mut total = 0;
                loop {
                    match (&s).read(&mut buf) {
                        Ok(0) => return total,
                        Ok(n) => {
                            (&s).write_all(&buf[..n]).unwrap();
                            total += n;
                        }
                        Err(e) => panic!("server read: {e}"),
                    }
                }
            }));
        }
        fiber::when_all(handles).into_iter().sum()
    })
}

#[test]
fn echo_from_many_fibers_every_byte_checked() {
    let _g = serial();
    let rt = rt(2);
    let (conns, msgs) = (100usize, 20usize);
    let bytes = rt.block_on(move || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = serve_echo(l, conns);
        let clients: Vec<_> = (0..conns)
            .map(|c| {
                fiber::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.set_nodelay(true).unwrap();
                    let mut sent = 0;
                    for m in 0..msgs {
                        // Sizes from 1 byte to 64 KiB: large ones need
                        // several reads and writes on both sides.
                        let len = 1 + (c * 977 + m * 4099) % 65536;
                        let msg: Vec<u8> = (0..len).map(|i| pattern(c, m, i)).collect();
                        let w = s.try_clone().unwrap();
                        let writer = fiber::spawn(move || (&w).write_all(&msg).unwrap());
                        let mut back = vec![0u8; len];
                        s.read_exact(&mut back).unwrap();
                        fiber::await_fiber(writer);
                        for (i, b) in back.iter().enumerate() {
                            assert_eq!(*b, pattern(c, m, i), "connection {c} message {m} byte {i}");
                        }
                        sent += len;
                    }
                    s.shutdown(Shutdown::Write).unwrap();
                    assert_eq!(s.read(&mut [0u8; 1]).unwrap(), 0, "server closes after our FIN");
                    sent
                })
            })
            .collect();
        let sent: usize = fiber::when_all(clients).into_iter().sum();
        let echoed = fiber::await_fiber(server);
        assert_eq!(sent, echoed);
        sent
    });
    assert!(bytes > conns * msgs);
    let st = rt.stats();
    assert_eq!(st.spawned, st.completed, "no fiber left parked");
}
