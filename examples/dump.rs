//! Seeing inside a running runtime: an echo server with idle connections,
//! a request handler that hogs its worker (the stall monitor moves the
//! other fibers off that worker; nothing waits on the hog, so it is named
//! once, in the long-slice count at shutdown),
//! a dump taken while it all runs, and a deadlock whose report ends with
//! the grouped dump.
//!
//! ```text
//! cargo run --release --example dump
//! ```
//! Also dumps on `SIGQUIT` while it runs (`kill -QUIT <pid>`).

use std::io::{Read, Write};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::net::{TcpListener, TcpStream};
use numafiber::sync::{Event, Mutex};
use numafiber::{fiber, Runtime};

fn main() {
    let rt = Runtime::builder()
        .workers(2)
        .name("dump-demo")
        .stall_threshold(Some(Duration::from_millis(20)))
        .on_stall(|r| println!("{r}\n"))
        .dump_on_signal(libc::SIGQUIT)
        .build()
        .expect("runtime");

    // An echo server; a request "hog" makes its handler compute 300 ms
    // without yielding.
    let listener = rt.block_on(|| TcpListener::bind("127.0.0.1:0")).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = fiber::Builder::new()
        .name("acceptor")
        .spawn_on(&rt, move || {
            while let Ok((s, _)) = listener.accept() {
                fiber::Builder::new().name("conn").spawn(move || serve(s)).expect("spawn");
            }
        })
        .expect("spawn");

    // Three idle clients (their handlers park on socket reads) and one
    // that sends "hog".
    let clients: Vec<std::net::TcpStream> =
        (0..3).map(|_| std::net::TcpStream::connect(addr).expect("connect")).collect();
    let mut hog = std::net::TcpStream::connect(addr).expect("connect");
    hog.write_all(b"hog").expect("send");
    // Some sleepers and waiters, so the dump has more to show.
    let ev = Arc::new(Event::new());
    let waiters: Vec<_> = (0..100)
        .map(|i| {
            let e = ev.clone();
            rt.spawn(move || if i % 4 == 0 { fiber::sleep(Duration::from_secs(1)) } else { e.wait() })
        })
        .collect();
    let mut buf = [0u8; 3];
    hog.read_exact(&mut buf).expect("echo"); // after the hog's 300 ms
    std::thread::sleep(Duration::from_millis(50));

    let d = rt.dump();
    println!("--- grouped ---\n{}", d.grouped());
    println!("--- full (first 40 lines) ---");
    for l in d.to_string().lines().take(40) {
        println!("{l}");
    }
    ev.set();
    for w in waiters {
        w.join().expect("waiter");
    }
    drop(clients);
    drop(hog);
    drop(server);
    // A fiber waiting on a socket could still be woken by a peer, so no
    // deadlock is reported while the acceptor listens: shut the server down.
    drop(rt);

    // A deadlock: the report panics out of block_on; it ends with the
    // grouped dump (where each fiber waits, by call site).
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    let r = catch_unwind(AssertUnwindSafe(|| {
        rt.block_on(|| {
            let a = Arc::new(Mutex::new(()));
            let b = Arc::new(Mutex::new(()));
            let (a2, b2) = (a.clone(), b.clone());
            let left = fiber::spawn(move || {
                let _a = a2.lock();
                fiber::sleep(Duration::from_millis(20));
                let _b = b2.lock();
            });
            let _b = b.lock();
            fiber::sleep(Duration::from_millis(20));
            let _a = a.lock();
            left.join().unwrap();
        })
    }));
    match r {
        Err(p) => {
            let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
            println!("--- deadlock report ---\n{msg}");
        }
        Ok(()) => println!("no deadlock?"),
    }
}

fn serve(s: TcpStream) {
    let mut buf = [0u8; 64];
    loop {
        match (&s).read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if &buf[..n] == b"hog" {
                    let t = Instant::now();
                    while t.elapsed() < Duration::from_millis(300) {
                        std::hint::spin_loop(); // never yields: the monitor reports it
                    }
                }
                if (&s).write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}
