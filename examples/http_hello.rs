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

use std::io::{Read, Write};

use numafiber::net::{TcpListener, TcpStream};

#[path = "common/server_args.rs"]
mod server_args;
use numafiber::fiber::JoinSet;

const BODY: &str = "Hello, world!\n";

/// The longest request head accepted: a client that sends more without the
/// blank line that ends a head is answered 431 and disconnected.
const MAX_HEAD: usize = 64 << 10;

/// Serve one connection until the client closes it or asks to. Each read
/// answers every complete request head it completed (pipelined requests
/// too) in one write; the head is scanned as bytes, as the peers' servers
/// in `scripts/bench-io.sh` do.
fn serve(mut s: TcpStream) -> std::io::Result<()> {
    s.set_nodelay(true)?;
    // Bytes of an unfinished head carried over from the previous reads.
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut out = Vec::with_capacity(4096);
    let mut tmp = [0u8; 4096];
    loop {
        let n = s.read(&mut tmp)?;
        if n == 0 {
            return Ok(());
        }
        // Most reads hold whole requests: answer them from the read buffer
        // and copy only a trailing partial head.
        let carried = !buf.is_empty();
        if carried {
            buf.extend_from_slice(&tmp[..n]);
        }
        let data: &[u8] = if carried { &buf } else { &tmp[..n] };
        out.clear();
        let (used, mut close) = answer(data, &mut out);
        if carried {
            buf.drain(..used);
        } else if used < n {
            buf.extend_from_slice(&tmp[used..n]);
        }
        if !close && buf.len() > MAX_HEAD {
            out.extend_from_slice(
                b"HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
            );
            close = true;
        }
        if !out.is_empty() {
            s.write_all(&out)?;
        }
        if close {
            return Ok(());
        }
    }
}

/// Append a response to `out` for every complete request head in `data`, up
/// to one that closes the connection; how many bytes of `data` were
/// answered, and whether to close.
fn answer(data: &[u8], out: &mut Vec<u8>) -> (usize, bool) {
    let mut start = 0;
    while let Some(i) = head_end(&data[start..]) {
        let close = respond(&data[start..start + i], out);
        start += i + 4;
        if close {
            return (start, true);
        }
    }
    (start, false)
}

/// Where the first `\r\n\r\n` of `hay` starts: `memchr` finds each `\n`
/// and only the bytes before it are compared.
fn head_end(hay: &[u8]) -> Option<usize> {
    memchr::memchr_iter(b'\n', hay).find(|&nl| nl >= 3 && &hay[nl - 3..=nl] == b"\r\n\r\n").map(|nl| nl - 3)
}

fn respond(head: &[u8], out: &mut Vec<u8>) -> bool {
    let line_end = memchr::memchr(b'\n', head).unwrap_or(head.len());
    let line = head[..line_end].strip_suffix(b"\r").unwrap_or(&head[..line_end]);
    let mut close = line.ends_with(b"HTTP/1.0");
    let mut rest = &head[(line_end + 1).min(head.len())..];
    while !rest.is_empty() {
        let end = memchr::memchr(b'\n', rest).unwrap_or(rest.len());
        let h = &rest[..end];
        rest = &rest[(end + 1).min(rest.len())..];
        // A header line starts with its name: only one that starts with a
        // `c` can be `Connection`.
        if h.first().is_none_or(|&b| b | 0x20 != b'c') {
            continue;
        }
        if let Some(colon) = memchr::memchr(b':', h) {
            if h[..colon].trim_ascii().eq_ignore_ascii_case(b"connection") {
                close = h[colon + 1..].trim_ascii().eq_ignore_ascii_case(b"close");
            }
        }
    }
    let head_only = line.starts_with(b"HEAD ");
    let ok = line.starts_with(b"GET ") || head_only;
    out.extend_from_slice(&RESPONSES[usize::from(ok) * 4 + usize::from(head_only) * 2 + usize::from(close)]);
    close
}

/// Every response this server gives, formatted once: index
/// `ok * 4 + head_only * 2 + close` (a refused method is never `HEAD`).
static RESPONSES: std::sync::LazyLock<[Vec<u8>; 8]> = std::sync::LazyLock::new(|| {
    std::array::from_fn(|i| {
        let (ok, head_only, close) = (i & 4 != 0, i & 2 != 0, i & 1 != 0);
        let (status, body) = if ok { ("200 OK", BODY) } else { ("405 Method Not Allowed", "only GET and HEAD\n") };
        let mut r = format!(
            "HTTP/1.1 {status}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n{}\r\n",
            body.len(),
            if close { "Connection: close\r\n" } else { "" }
        );
        if !head_only {
            r.push_str(body);
        }
        r.into_bytes()
    })
});

fn main() {
    let (addr, b) = server_args::parse("http_hello", "127.0.0.1:8080");
    let max: Option<usize> = std::env::var("NUMAFIBER_HTTP_MAX_CONNS").ok().and_then(|v| v.parse().ok());
    let rt = b.build().unwrap_or_else(|e| {
        eprintln!("http_hello: {e}");
        std::process::exit(1)
    });
    let r = rt.block_on(move || -> std::io::Result<()> {
        let l = TcpListener::bind(&addr)?;
        println!("http_hello listening on http://{}/", l.local_addr()?);
        // Finished connections leave the set in O(1) each (a `Vec` of
        // handles filtered at every accept costs O(connections) per accept).
        let mut conns = JoinSet::new();
        let mut n = 0;
        while max.is_none_or(|m| n < m) {
            let (s, _) = l.accept()?;
            n += 1;
            conns.spawn(move || {
                let _ = serve(s);
            });
            while conns.try_join_next().is_some() {}
        }
        conns.join_all();
        Ok(())
    });
    if let Err(e) = r {
        eprintln!("http_hello: {e}");
        std::process::exit(1);
    }
}
