//! A TCP echo server: one fiber per connection, written as blocking code
//! on `numafiber::net`.
//!
//! ```text
//! cargo run --release --example echo_server -- [ADDR] [WORKERS] [pin]
//! ```
//! ADDR defaults to 127.0.0.1:7000; WORKERS to one per PU; `pin` pins each
//! worker to its PU (not done by default for this server). Stops after
//! `NUMAFIBER_ECHO_MAX_CONNS` connections if that is set (for scripts).

use std::io::{Read, Write};

use numafiber::net::TcpListener;
use numafiber::{fiber, Runtime};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).cloned().unwrap_or_else(|| "127.0.0.1:7000".to_string());
    // A server's workers are not pinned to a PU each: a worker asleep in
    // `epoll_wait` on a PU of its own must be woken on that PU for every
    // request, where the kernel would otherwise wake it on the CPU of the
    // thread that sent the request (figures: BENCHMARKS.md, "Servers
    // under wrk", "Pinning"). `pin` as the third argument pins them.
    let pin = match args.get(3).map(String::as_str) {
        None => false,
        Some("pin") => true,
        Some(x) => {
            eprintln!("echo_server: the third argument may only be `pin`, got {x:?}");
            std::process::exit(2);
        }
    };
    let mut b = Runtime::builder().pin_workers(pin);
    if let Some(w) = args.get(2) {
        match w.parse::<usize>() {
            Ok(n) if n > 0 => b = b.workers(n),
            _ => {
                eprintln!("echo_server: WORKERS must be a positive integer, got {w:?}");
                std::process::exit(2);
            }
        }
    }
    let max: Option<usize> = std::env::var("NUMAFIBER_ECHO_MAX_CONNS").ok().and_then(|v| v.parse().ok());
    let rt = match b.build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("echo_server: {e}");
            std::process::exit(1);
        }
    };
    let r = rt.block_on(move || -> std::io::Result<()> {
        let l = TcpListener::bind(&addr)?;
        println!("echo_server listening on {}", l.local_addr()?);
        let mut served = 0usize;
        let mut handles = Vec::new();
        while max.is_none_or(|m| served < m) {
            let (s, _) = l.accept()?;
            s.set_nodelay(true)?;
            served += 1;
            handles.push(fiber::spawn(move || {
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
            }));
            handles.retain(|h| !h.is_finished());
        }
        fiber::when_all(handles);
        Ok(())
    });
    if let Err(e) = r {
        eprintln!("echo_server: {e}");
        std::process::exit(1);
    }
}
