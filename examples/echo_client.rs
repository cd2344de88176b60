//! Echo load generator: N connections, each sending M messages of S bytes
//! and waiting for each echo; prints requests/s and p50/p99 latency.
//!
//! ```text
//! cargo run --release --example echo_client -- ADDR [N] [M] [S] [WORKERS]
//! ```
//! Defaults: N=100, M=1000, S=64. Every echoed byte is checked.

#[path = "common/timing_note.rs"]
mod timing_note;

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use numafiber::net::TcpStream;
use numafiber::{fiber, Runtime};

fn arg(args: &[String], i: usize, name: &str, default: usize) -> usize {
    match args.get(i) {
        None => default,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n > 0 => n,
            _ => {
                eprintln!("echo_client: {name} must be a positive integer, got {v:?}");
                std::process::exit(2);
            }
        },
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let Some(addr) = args.get(1).cloned() else {
        eprintln!("usage: echo_client ADDR [CONNECTIONS] [MESSAGES] [SIZE] [WORKERS]");
        std::process::exit(2);
    };
    let n = arg(&args, 2, "CONNECTIONS", 100);
    let m = arg(&args, 3, "MESSAGES", 1000);
    let size = arg(&args, 4, "SIZE", 64);
    let mut b = Runtime::builder();
    if args.get(5).is_some() {
        b = b.workers(arg(&args, 5, "WORKERS", 1));
    }
    let rt = b.build().unwrap_or_else(|e| {
        eprintln!("echo_client: {e}");
        std::process::exit(1)
    });
    let t0 = Instant::now();
    let results = rt.block_on(move || {
        let hs: Vec<_> = (0..n)
            .map(|c| {
                let addr = addr.clone();
                fiber::spawn(move || -> std::io::Result<Vec<Duration>> {
                    let mut s = TcpStream::connect(addr.as_str())?;
                    s.set_nodelay(true)?;
                    let msg: Vec<u8> = (0..size).map(|i| (i + c) as u8).collect();
                    let mut back = vec![0u8; size];
                    let mut lat = Vec::with_capacity(m);
                    for _ in 0..m {
                        let t = Instant::now();
                        s.write_all(&msg)?;
                        s.read_exact(&mut back)?;
                        lat.push(t.elapsed());
                        if back != msg {
                            return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "echo differs"));
                        }
                    }
                    Ok(lat)
                })
            })
            .collect();
        fiber::when_all(hs)
    });
    let elapsed = t0.elapsed();
    let mut lat = Vec::with_capacity(n * m);
    for r in results {
        match r {
            Ok(l) => lat.extend(l),
            Err(e) => {
                eprintln!("echo_client: a connection failed: {e}");
                std::process::exit(1);
            }
        }
    }
    lat.sort();
    let q = |p: f64| lat[((lat.len() as f64 * p) as usize).min(lat.len() - 1)];
    println!(
        "echo_client: {n} connections x {m} messages x {size} B: {:.0} requests/s, p50 {:?}, p99 {:?} ({:.2?} total)",
        lat.len() as f64 / elapsed.as_secs_f64(),
        q(0.50),
        q(0.99),
        elapsed
    );
    timing_note::print();
}
