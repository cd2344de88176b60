//! Peer echo servers for `scripts/bench-echo.sh`, in the same shape as
//! `examples/echo_server.rs` (read up to 4 KiB, write it back, until EOF),
//! so that the same `echo_client` can drive each of them; plus `hold`, which
//! opens N idle connections for the memory-per-connection figure.
//!
//! ```text
//! cargo run --release -p numafiber-peers --example echo_peers -- may     ADDR WORKERS  # may::net, one coroutine per connection
//! cargo run --release -p numafiber-peers --example echo_peers -- tokio   ADDR WORKERS  # tokio multi-thread runtime, one task per connection
//! cargo run --release -p numafiber-peers --example echo_peers -- threads ADDR          # std::net, one OS thread per connection
//! cargo run --release -p numafiber-peers --example echo_peers -- hold    ADDR N SECS   # N idle connections (one echo each), held SECS seconds
//! ```
//! The servers run until killed.

use std::io::{Read, Write};
use std::time::Duration;

fn usage() -> ! {
    eprintln!("usage: echo_peers may|tokio ADDR WORKERS | threads ADDR | hold ADDR N SECS");
    std::process::exit(2)
}

fn num(args: &[String], i: usize, name: &str) -> usize {
    match args.get(i).map(|v| (v, v.parse::<usize>())) {
        Some((_, Ok(n))) if n > 0 => n,
        Some((v, _)) => {
            eprintln!("echo_peers: {name} must be a positive integer, got {v:?}");
            std::process::exit(2)
        }
        None => usage(),
    }
}

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("echo_peers: {e}");
    std::process::exit(1)
}

fn echo_loop<S: Read + Write>(mut s: S) {
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                if s.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        }
    }
}

fn may_server(addr: &str, workers: usize) {
    may::config().set_workers(workers);
    let l = may::net::TcpListener::bind(addr).unwrap_or_else(|e| fail(e));
    println!("may echo listening on {}", l.local_addr().unwrap_or_else(|e| fail(e)));
    let h = may::go!(move || {
        for s in l.incoming() {
            match s {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    may::go!(move || echo_loop(s));
                }
                Err(e) => fail(e),
            }
        }
    });
    let _ = h.join();
}

fn tokio_server(addr: &str, workers: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .unwrap_or_else(|e| fail(e));
    rt.block_on(async {
        let l = tokio::net::TcpListener::bind(addr).await.unwrap_or_else(|e| fail(e));
        println!("tokio echo listening on {}", l.local_addr().unwrap_or_else(|e| fail(e)));
        loop {
            let (mut s, _) = l.accept().await.unwrap_or_else(|e| fail(e));
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = [0u8; 4096];
                loop {
                    match s.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            if s.write_all(&buf[..n]).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    })
}

fn thread_server(addr: &str) {
    let l = std::net::TcpListener::bind(addr).unwrap_or_else(|e| fail(e));
    println!("thread-per-connection echo listening on {}", l.local_addr().unwrap_or_else(|e| fail(e)));
    for s in l.incoming() {
        let s = s.unwrap_or_else(|e| fail(e));
        let _ = s.set_nodelay(true);
        std::thread::spawn(move || echo_loop(s));
    }
}

/// Open `n` connections from one thread, echo one byte on each (so the
/// server has accepted it and its handler waits in `read`), hold them.
fn hold(addr: &str, n: usize, secs: usize) {
    let mut conns = Vec::with_capacity(n);
    for i in 0..n {
        let mut s = std::net::TcpStream::connect(addr).unwrap_or_else(|e| fail(format!("connection {i}: {e}")));
        let mut b = [i as u8];
        s.write_all(&b).and_then(|_| s.read_exact(&mut b)).unwrap_or_else(|e| fail(format!("connection {i}: {e}")));
        if b[0] != i as u8 {
            fail(format!("connection {i}: echo differs"));
        }
        conns.push(s);
    }
    println!("holding {n} idle connections for {secs} s");
    std::thread::sleep(Duration::from_secs(secs as u64));
    drop(conns);
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(addr) = args.get(2) else { usage() };
    match args.get(1).map(String::as_str) {
        Some("may") => may_server(addr, num(&args, 3, "WORKERS")),
        Some("tokio") => tokio_server(addr, num(&args, 3, "WORKERS")),
        Some("threads") => thread_server(addr),
        Some("hold") => hold(addr, num(&args, 3, "N"), num(&args, 4, "SECS")),
        _ => usage(),
    }
}
