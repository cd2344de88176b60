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

#[path = "common/server_args.rs"]
mod server_args;
use numafiber::fiber::JoinSet;

fn main() {
    let (addr, b) = server_args::parse("echo_server", "127.0.0.1:7000");
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
        // Finished connections leave the set in O(1) each (a `Vec` of
        // handles filtered at every accept costs O(connections) per accept).
        let mut conns = JoinSet::new();
        while max.is_none_or(|m| served < m) {
            let (s, _) = l.accept()?;
            s.set_nodelay(true)?;
            served += 1;
            conns.spawn(move || {
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
            });
            while conns.try_join_next().is_some() {}
        }
        conns.join_all();
        Ok(())
    });
    if let Err(e) = r {
        eprintln!("echo_server: {e}");
        std::process::exit(1);
    }
}
