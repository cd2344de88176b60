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

#[test]
fn listener_accepts_while_a_thousand_clients_connect() {
    let _g = serial();
    let rt = rt(2);
    let n = 1000usize;
    let ids = rt.block_on(move || {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        // The server answers each client with its id + 1 from a fiber of
        // its own, while the accept loop keeps accepting.
        let server = fiber::spawn(move || {
            let hs: Vec<_> = l
                .incoming()
                .take(n)
                .map(|s| {
                    let mut s = s.unwrap();
                    fiber::spawn(move || {
                        let mut b = [0u8; 4];
                        s.read_exact(&mut b).unwrap();
                        let id = u32::from_le_bytes(b);
                        s.write_all(&(id + 1).to_le_bytes()).unwrap();
                    })
                })
                .collect();
            fiber::when_all(hs);
        });
        let clients: Vec<_> = (0..n as u32)
            .map(|id| {
                fiber::spawn(move || {
                    let mut s = TcpStream::connect(addr).unwrap();
                    s.write_all(&id.to_le_bytes()).unwrap();
                    let mut b = [0u8; 4];
                    s.read_exact(&mut b).unwrap();
                    assert_eq!(u32::from_le_bytes(b), id + 1);
                    id
                })
            })
            .collect();
        let ids = fiber::when_all(clients);
        fiber::await_fiber(server);
        ids
    });
    assert_eq!(ids, (0..n as u32).collect::<Vec<_>>());
    let st = rt.stats();
    assert_eq!(st.spawned, st.completed);
}

#[test]
fn timeouts_in_fibers_and_on_threads() {
    let _g = serial();
    let rt = rt(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let check = move || {
        let c = TcpStream::connect(addr).unwrap();
        let (s, _) = l.accept().unwrap();
        // Read timeout: nobody writes.
        c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        assert_eq!(c.read_timeout().unwrap(), Some(Duration::from_millis(50)));
        let t = Instant::now();
        let e = (&c).read(&mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        assert!(t.elapsed() >= Duration::from_millis(50));
        // Data arriving before the timeout is read.
        (&s).write_all(b"late").unwrap();
        let mut b = [0u8; 4];
        (&c).read_exact(&mut b).unwrap();
        assert_eq!(&b, b"late");
        // Write timeout: the peer never reads, so the buffers fill up.
        s.set_write_timeout(Some(Duration::from_millis(50))).unwrap();
        let chunk = vec![7u8; 1 << 16];
        let t = Instant::now();
        let e = loop {
            match (&s).write(&chunk) {
                Ok(n) => assert!(n > 0 && t.elapsed() < Duration::from_secs(60), "the send buffer never filled"),
                Err(e) => break e,
            }
        };
        assert_eq!(e.kind(), ErrorKind::WouldBlock, "{e}");
        // Zero timeouts are rejected as in std; None clears.
        assert_eq!(c.set_read_timeout(Some(Duration::ZERO)).unwrap_err().kind(), ErrorKind::InvalidInput);
        c.set_read_timeout(None).unwrap();
        assert_eq!(c.read_timeout().unwrap(), None);
        // UDP receive timeout.
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        u.set_read_timeout(Some(Duration::from_millis(30))).unwrap();
        assert_eq!(u.recv(&mut [0u8; 8]).unwrap_err().kind(), ErrorKind::WouldBlock);
    };
    let check2 = check.clone();
    // In a fiber, while another fiber keeps sleeping and waking on the same
    // runtime (timers and readiness share the parking path).
    rt.block_on(move || {
        let ticker = fiber::spawn(|| {
            for _ in 0..20 {
                fiber::sleep(Duration::from_millis(5));
            }
        });
        check();
        fiber::await_fiber(ticker);
    });
    // On a plain thread: the same behaviour as std.
    std::thread::spawn(check2).join().unwrap();
    // connect_timeout to a reachable listener, and its zero-timeout error.
    let l2 = TcpListener::bind("127.0.0.1:0").unwrap();
    let a2 = l2.local_addr().unwrap();
    rt.block_on(move || TcpStream::connect_timeout(&a2, Duration::from_secs(10)).unwrap());
    assert_eq!(TcpStream::connect_timeout(&a2, Duration::ZERO).unwrap_err().kind(), ErrorKind::InvalidInput);
}

#[test]
fn plain_threads_and_fibers_share_sockets() {
    let _g = serial();
    let rt = rt(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    // A plain-thread server, fiber clients; then the reverse.
    let server = std::thread::spawn(move || {
        for _ in 0..10 {
            let (mut s, _) = l.accept().unwrap();
            let mut b = [0u8; 3];
            s.read_exact(&mut b).unwrap();
            s.write_all(&b).unwrap();
        }
        l
    });
    rt.block_on(move || {
        let hs: Vec<_> = (0..10)
            .map(|_| {
                fiber::spawn(move || {
                    let mut c = TcpStream::connect(addr).unwrap();
                    c.write_all(b"abc").unwrap();
                    let mut b = [0u8; 3];
                    c.read_exact(&mut b).unwrap();
                    assert_eq!(&b, b"abc");
                })
            })
            .collect();
        fiber::when_all(hs);
    });
    let l = server.join().unwrap();
    // The listener was used from a thread, now a fiber accepts on it, and
    // the accepted stream is handed to a plain thread.
    let th_client = std::thread::spawn(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        c.write_all(b"xyz").unwrap();
        let mut b = [0u8; 3];
        c.read_exact(&mut b).unwrap();
        b
    });
    let s = rt.block_on(move || l.accept().unwrap().0);
    std::thread::spawn(move || {
        let mut b = [0u8; 3];
        (&s).read_exact(&mut b).unwrap();
        (&s).write_all(&b).unwrap();
    })
    .join()
    .unwrap();
    assert_eq!(&th_client.join().unwrap(), b"xyz");
    // UDP: fiber and thread.
    let a = UdpSocket::bind("127.0.0.1:0").unwrap();
    let b = UdpSocket::bind("127.0.0.1:0").unwrap();
    let (aa, ba) = (a.local_addr().unwrap(), b.local_addr().unwrap());
    let echo = rt.spawn(move || {
        let mut buf = [0u8; 64];
        for _ in 0..5 {
            let (n, from) = b.recv_from(&mut buf).unwrap();
            b.send_to(&buf[..n], from).unwrap();
        }
    });
    a.connect(ba).unwrap();
    for i in 0..5u8 {
        a.send(&[i; 10]).unwrap();
        let mut buf = [0u8; 64];
        assert_eq!(a.recv(&mut buf).unwrap(), 10);
        assert_eq!(buf[..10], [i; 10]);
    }
    echo.join().unwrap();
    assert_eq!(a.local_addr().unwrap(), aa);
}

fn assert_send<T: Send + Sync>() {}

#[test]
fn types_are_send() {
    assert_send::<TcpListener>();
    assert_send::<TcpStream>();
    assert_send::<UdpSocket>();
}

/// Counts drops: proves a fiber was unwound (its destructors ran).
struct Guard(Arc<AtomicUsize>);
impl Drop for Guard {
    fn drop(&mut self) {
        self.0.fetch_add(1, SeqCst);
    }
}

#[test]
fn shutdown_unwinds_fibers_parked_on_accept_and_read() {
    let _g = serial();
    let before = open_fds();
    let dropped = Arc::new(AtomicUsize::new(0));
    {
        let rt = rt(2);
        let d = dropped.clone();
        let (accepting, reading) = rt.block_on(move || {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = l.local_addr().unwrap();
            let g = Guard(d.clone());
            let accepting = fiber::spawn(move || {
                let _g = g;
                // Accept the 10 readers and keep their streams open (never
                // writing); the 11th accept parks until shutdown.
                let mut keep = Vec::new();
                loop {
                    keep.push(l.accept().unwrap());
                }
            });
            let mut readers = Vec::new();
            for _ in 0..10 {
                let g = Guard(d.clone());
                readers.push(fiber::spawn(move || {
                    let _g = g;
                    let mut c = TcpStream::connect(addr).unwrap();
                    let mut b = [0u8; 1];
                    let _ = c.read(&mut b); // the peer never writes
                }));
            }
            // Let them all park.
            fiber::sleep(Duration::from_millis(100));
            (accepting, readers)
        });
        std::thread::sleep(Duration::from_millis(50));
        drop(rt); // shutdown: every parked fiber is unwound
        assert!(accepting.join().unwrap_err().is_cancelled());
        for r in reading {
            assert!(r.join().unwrap_err().is_cancelled());
        }
    }
    assert_eq!(dropped.load(SeqCst), 11, "every parked fiber's destructors ran once");
    // Every socket and the reactor's epoll/eventfd are closed.
    assert_eq!(open_fds(), before, "fds leaked");
}

#[test]
fn spawn_blocking_results_and_panics() {
    let _g = serial();
    let rt = rt(2);
    let (sum, err, ran_meanwhile) = rt.block_on(|| {
        let hs: Vec<_> = (0..100u64)
            .map(|i| {
                fiber::spawn_blocking(move || {
                    std::thread::sleep(Duration::from_millis(1)); // a blocking call
                    i * 2
                })
            })
            .collect();
        // Meanwhile the workers keep running fibers.
        let other = fiber::spawn(|| (0..1000u64).sum::<u64>());
        let ran = fiber::await_fiber(other);
        let sum: u64 = fiber::when_all(hs).into_iter().sum();
        let err = fiber::spawn_blocking(|| -> u32 { panic!("helper panicked") }).join().unwrap_err();
        (sum, err, ran)
    });
    assert_eq!(sum, 99 * 100);
    assert_eq!(err.panic_message(), Some("helper panicked"));
    assert_eq!(ran_meanwhile, 499_500);
}

#[test]
fn io_wait_longer_than_the_deadlock_window_is_not_a_deadlock() {
    let _g = serial();
    let rt = rt(2);
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    // The peer is a plain thread that writes after 400 ms (the detector
    // reports after about 100 ms of quiescence).
    let peer = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        std::thread::sleep(Duration::from_millis(400));
        s.write_all(b"!").unwrap();
    });
    let got = rt.block_on(move || {
        let mut c = TcpStream::connect(addr).unwrap();
        let mut b = [0u8; 1];
        c.read_exact(&mut b).unwrap();
        // And a blocking call longer than the window.
        let v = fiber::await_fiber(fiber::spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(300));
            5
        }));
        (b[0], v)
    });
    assert_eq!(got, (b'!', 5));
    peer.join().unwrap();
}

#[test]
fn a_burst_of_connects_fits_the_accept_queue() {
    // std's backlog of 128 drops the SYNs of a burst of connects that
    // nobody accepts yet, and each of those waits a second for the
    // retransmission (seen as 1.1 s for 1,000 echo connections). Ours is
    // the kernel's maximum: a burst up to net.core.somaxconn connects at
    // once. No accept runs here, so every connect below must complete from
    // the queue alone.
    let _g = serial();
    let somaxconn: usize = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(4096);
    let n = 1000.min(somaxconn.saturating_sub(8));
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = Instant::now();
    let mut held = Vec::with_capacity(n);
    for i in 0..n {
        match std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(5)) {
            Ok(s) => held.push(s),
            Err(e) => panic!("connect {i} of {n} failed with no accept running: {e} (is the backlog 128?)"),
        }
    }
    eprintln!("{n} connects queued without accept in {:?}", t.elapsed());
    assert_eq!(held.len(), n);
}

/// A read with a timeout that data ends early leaves no timer behind: the
/// worker's heap stays near its live size instead of one 60 s timer per
/// read (and a stale timer no longer wakes the fiber later).
#[test]
fn reads_that_beat_their_timeout_do_not_pile_up_timers() {
    let _g = serial();
    const ROUNDS: usize = 3_000;
    let rt = rt(1);
    rt.block_on(|| {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut c = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (mut s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
        let echo = fiber::spawn(move || {
            let mut b = [0u8; 1];
            let mut n = 0;
            // Parks in the read (with its timer) until the byte comes.
            while s.read(&mut b).unwrap() == 1 {
                s.write_all(&b).unwrap();
                n += 1;
            }
            n
        });
        let mut b = [0u8; 1];
        for i in 0..ROUNDS {
            fiber::yield_now(); // the reader gets to its read first
            c.write_all(&[i as u8]).unwrap();
            c.read_exact(&mut b).unwrap();
            assert_eq!(b[0], i as u8);
        }
        c.shutdown(Shutdown::Write).unwrap();
        assert_eq!(fiber::await_fiber(echo), ROUNDS);
    });
    let timers = rt.stats().workers[0].pending_timers;
    assert!(timers <= 128, "{timers} timers left after {ROUNDS} reads that beat their timeout");
}
