//! The order and liveness rules servers and ported C++ programs rely on
//! (`docs/porting-from-cpp.md`):
//! a failed `try_lock` / `try_acquire` / `try_recv` lets other fibers run,
//! so spin-on-try loops ported from Boost.Fiber complete on one worker.
//! No timed assertions: a bug shows as a hang (each test is bounded by a
//! watchdog that fails it) or a wrong sequence.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::Duration;

use numafiber::sync::channel::{self, TryRecvError};

mod common;
use common::{uniform_rt as rt, within};
use numafiber::sync::{Mutex, Semaphore};
use numafiber::{fiber, Runtime, Topology};

/// Boost.Fiber `test_mutex_post.cpp`, fn18 in spirit: one fiber holds the
/// lock across a 250 ms sleep, another spins on `try_lock` on the same
/// worker. The spinner's failed `try_lock` yields, the worker's loop fires
/// the holder's timer, the holder unlocks, the spinner gets the lock.
#[test]
fn spin_on_try_lock_completes_on_one_worker() {
    for workers in [1, 2] {
        let spins = within(30, "spin on try_lock", move || {
            let rt = rt(workers);
            rt.block_on(|| {
                let m = Arc::new(Mutex::new(0u32));
                let held = Arc::new(AtomicBool::new(false));
                let (m2, held2) = (m.clone(), held.clone());
                let holder = fiber::Builder::new()
                    .worker(0)
                    .pinned(true)
                    .spawn(move || {
                        let mut g = m2.lock();
                        held2.store(true, SeqCst);
                        fiber::sleep(Duration::from_millis(250));
                        *g += 1;
                    })
                    .expect("spawn holder");
                let spinner = fiber::Builder::new()
                    .worker(0)
                    .pinned(true)
                    .spawn(move || {
                        while !held.load(SeqCst) {
                            fiber::yield_now();
                        }
                        let mut spins = 0u64;
                        loop {
                            if let Some(mut g) = m.try_lock() {
                                *g += 1;
                                return (*g, spins);
                            }
                            spins += 1;
                        }
                    })
                    .expect("spawn spinner");
                holder.join().expect("holder");
                spinner.join().expect("spinner")
            })
        });
        assert_eq!(spins.0, 2, "{workers} workers: the holder's increment, then the spinner's");
        assert!(spins.1 > 0, "{workers} workers: the spinner found the lock taken at least once");
    }
}

/// The same for `Semaphore::try_acquire` and `Receiver::try_recv` on one
/// worker: the permit holder and the sender sleep, then release / send.
#[test]
fn spin_on_try_acquire_and_try_recv_complete_on_one_worker() {
    let got = within(30, "spin on try_acquire / try_recv", || {
        let rt = rt(1);
        rt.block_on(|| {
            let s = Arc::new(Semaphore::new(1));
            let (tx, rx) = channel::unbounded::<u32>();
            let taken = Arc::new(AtomicUsize::new(0));
            let (s2, taken2) = (s.clone(), taken.clone());
            let holder = fiber::spawn(move || {
                let p = s2.acquire();
                taken2.store(1, SeqCst);
                fiber::sleep(Duration::from_millis(100));
                drop(p);
                fiber::sleep(Duration::from_millis(100));
                tx.send(7).expect("receiver alive");
            });
            let spinner = fiber::spawn(move || {
                while taken.load(SeqCst) == 0 {
                    fiber::yield_now();
                }
                loop {
                    if let Some(p) = s.try_acquire() {
                        drop(p);
                        break;
                    }
                }
                loop {
                    match rx.try_recv() {
                        Ok(v) => return v,
                        Err(TryRecvError::Empty) => {}
                        Err(TryRecvError::Disconnected) => panic!("sender gone without sending"),
                    }
                }
            });
            holder.join().expect("holder");
            spinner.join().expect("spinner")
        })
    });
    assert_eq!(got, 7);
}

/// A request costs one read: a read that returned fewer bytes than asked
/// (and no event carried the peer's close) leaves the socket known drained
/// until its next readiness event, so the next read parks without a
/// syscall, as does a read after `WouldBlock` (`Stats::io_would_block`
/// counts the calls that said `WouldBlock`). Each round trip here has two
/// waits (one per side); before the readiness was kept per socket every
/// wait cost two failed reads (about 4 per round trip), and before short
/// reads counted as drained, one (about 2 per round trip).
#[test]
fn would_block_reads_stay_far_below_round_trips() {
    const ROUNDS: usize = 400;
    let rt = rt(2);
    let (trips, wb) = within(60, "echo round trips", move || {
        let trips = rt.block_on(|| -> std::io::Result<usize> {
            use std::io::{Read, Write};
            let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
            let addr = l.local_addr()?;
            let server = fiber::spawn(move || -> std::io::Result<()> {
                let (mut s, _) = l.accept()?;
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf)? {
                        0 => return Ok(()),
                        n => s.write_all(&buf[..n])?,
                    }
                }
            });
            let mut c = numafiber::net::TcpStream::connect(addr)?;
            c.set_nodelay(true)?;
            let msg = [7u8; 64];
            let mut buf = [0u8; 4096];
            for _ in 0..ROUNDS {
                c.write_all(&msg)?;
                let mut got = 0;
                while got < msg.len() {
                    match c.read(&mut buf)? {
                        0 => return Err(std::io::ErrorKind::UnexpectedEof.into()),
                        n => got += n,
                    }
                }
                assert_eq!(got, msg.len(), "echo returned more than was sent");
            }
            drop(c);
            server.join().expect("server fiber")?;
            Ok(ROUNDS)
        });
        (trips.expect("echo"), rt.stats().io_would_block)
    });
    assert_eq!(trips, ROUNDS);
    eprintln!("io_would_block: {wb} over {ROUNDS} round trips");
    // A few per socket while it is first registered; none per round trip.
    let bound = 16u64;
    assert!(wb <= bound, "{wb} socket calls said WouldBlock over {ROUNDS} round trips (expected at most {bound})");
}

/// Data and the peer's close in one readiness event: the short read that
/// returns the data must not leave the socket "drained", or the read that
/// should return end-of-file would wait for an event that never comes.
/// One worker: the reader parks on the socket, then a fiber keeps the
/// worker (and so the reactor) busy while the peer writes and closes, so
/// both arrive before the next poll and come in one event.
#[test]
fn a_short_read_before_the_peers_close_still_sees_end_of_file() {
    let rt = Runtime::builder()
        .workers(1)
        .topology(Topology::uniform(1, 1))
        .stall_threshold(None)
        .build()
        .expect("runtime");
    let got = within(30, "read to end of file", move || {
        rt.block_on(|| -> std::io::Result<Vec<u8>> {
            use std::io::{Read, Write};
            let l = numafiber::net::TcpListener::bind("127.0.0.1:0")?;
            let addr = l.local_addr()?;
            let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
            let (sent_tx, sent_rx) = std::sync::mpsc::channel::<()>();
            let client = std::thread::spawn(move || -> std::io::Result<()> {
                let mut c = std::net::TcpStream::connect(addr)?;
                let _ = go_rx.recv();
                c.write_all(b"hello")?;
                c.shutdown(std::net::Shutdown::Write)?;
                let _ = sent_tx.send(());
                Ok(())
            });
            let (mut s, _) = l.accept()?;
            // Runs once the reader below has parked on the socket: lets the
            // client send, and holds the worker until it has.
            let holder = fiber::spawn(move || {
                let _ = go_tx.send(());
                let _ = sent_rx.recv_timeout(std::time::Duration::from_secs(10));
                std::thread::sleep(std::time::Duration::from_millis(20));
            });
            let mut all = Vec::new();
            let mut buf = [0u8; 4096];
            loop {
                match s.read(&mut buf)? {
                    0 => break,
                    n => all.extend_from_slice(&buf[..n]),
                }
            }
            holder.join().expect("holder");
            client.join().expect("client thread")?;
            Ok(all)
        })
    });
    assert_eq!(got.expect("server"), b"hello");
}
