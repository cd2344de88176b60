//! A minimal HTTP/1.1 responder: a fiber per connection, keep-alive,
//! "Hello, world!" for every request, each response in one write on a
//! `TCP_NODELAY` socket (so a TechEmpower-style plaintext run with `wrk`
//! works; a response split in two writes would wait for the client's
//! delayed ACK under Nagle's algorithm).
//!
//! ```text
//! cargo run --release --example http_hello -- [ADDR [WORKERS [pin]]]     # then: curl http://127.0.0.1:8080/
//! ```
//! Stops after `NUMAFIBER_HTTP_MAX_CONNS` connections if that is set.

use std::io::{BufRead, BufReader, Write};

use numafiber::net::{TcpListener, TcpStream};
use numafiber::{fiber, Runtime};

const BODY: &str = "Hello, world!\n";

/// Serve one connection until the client closes it or asks to.
fn serve(s: TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    let mut r = BufReader::new(&s);
    let mut out = Vec::with_capacity(256);
    loop {
        let mut request = String::new();
        if r.read_line(&mut request)? == 0 {
            return Ok(());
        }
        let mut close = request.trim_end().ends_with("HTTP/1.0");
        loop {
            let mut h = String::new();
            if r.read_line(&mut h)? == 0 {
                return Ok(());
            }
            let h = h.trim_end();
            if h.is_empty() {
                break;
            }
            if let Some((k, v)) = h.split_once(':') {
                if k.eq_ignore_ascii_case("connection") {
                    close = v.trim().eq_ignore_ascii_case("close");
                }
            }
        }
        let (status, body) = if request.starts_with("GET ") || request.starts_with("HEAD ") {
            ("200 OK", BODY)
        } else {
            ("405 Method Not Allowed", "only GET and HEAD\n")
        };
        out.clear();
        write!(
            out,
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{}\r\n",
            body.len(),
            if close { "Connection: close\r\n" } else { "" }
        )?;
        if !request.starts_with("HEAD ") {
            out.extend_from_slice(body.as_bytes());
        }
        // One write per response: head and body in one segment.
        (&s).write_all(&out)?;
        if close {
            return Ok(());
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).cloned().unwrap_or_else(|| "127.0.0.1:8080".to_string());
    // A server's workers are not pinned to a PU each: a worker asleep in
    // `epoll_wait` on a PU of its own must be woken on that PU for every
    // request, where the kernel would otherwise wake it on the CPU of the
    // thread that sent the request (figures: BENCHMARKS.md, "Servers:
    // pinning"). `pin` as the third argument pins them.
    let pin = match args.get(3).map(String::as_str) {
        None => false,
        Some("pin") => true,
        Some(x) => {
            eprintln!("http_hello: the third argument may only be `pin`, got {x:?}");
            std::process::exit(2);
        }
    };
    let mut b = Runtime::builder().pin_workers(pin);
    if let Some(w) = args.get(2) {
        match w.parse::<usize>() {
            Ok(n) if n > 0 => b = b.workers(n),
            _ => {
                eprintln!("http_hello: WORKERS must be a positive integer, got {w:?}");
                std::process::exit(2);
            }
        }
    }
    let max: Option<usize> = std::env::var("NUMAFIBER_HTTP_MAX_CONNS").ok().and_then(|v| v.parse().ok());
    let rt = b.build().unwrap_or_else(|e| {
        eprintln!("http_hello: {e}");
        std::process::exit(1)
    });
    let r = rt.block_on(move || -> std::io::Result<()> {
        let l = TcpListener::bind(&addr)?;
        println!("http_hello listening on http://{}/", l.local_addr()?);
        let mut hs = Vec::new();
        let mut n = 0;
        while max.is_none_or(|m| n < m) {
            let (s, _) = l.accept()?;
            n += 1;
            hs.push(fiber::spawn(move || {
                let _ = serve(s);
            }));
            hs.retain(|h| !h.is_finished());
        }
        fiber::when_all(hs);
        Ok(())
    });
    if let Err(e) = r {
        eprintln!("http_hello: {e}");
        std::process::exit(1);
    }
}
