//! Peer servers for `scripts/bench-io.sh`, each the same simple shape as
//! numafiber's `examples/echo_server.rs` and `examples/http_hello.rs`: one
//! task (coroutine) per connection, `TCP_NODELAY`, echo = read up to 4 KiB
//! and write it back; HTTP = answer every complete request in the buffer
//! with `Hello, world!\n` in one write, keep-alive.
//!
//! ```text
//! cargo run --release -p numafiber-peers --example io_peers -- KIND ADDR WORKERS
//!
//! io_peers tokio-echo ADDR WORKERS     # tokio multi-thread runtime
//! io_peers tokio-http ADDR WORKERS     # tokio, hand-written responder
//! io_peers hyper-http ADDR WORKERS     # hyper 1 http1 server on tokio
//! io_peers may-echo   ADDR WORKERS     # may coroutines
//! io_peers may-http   ADDR WORKERS     # may, hand-written responder
//! io_peers minihttp   ADDR WORKERS     # may_minihttp
//! ```
//! Each prints `... listening on ADDR` and runs until killed.

use std::io::{Read, Write};

const RESP: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 14\r\n\r\nHello, world!\n";
const BODY: &[u8] = b"Hello, world!\n";

fn fail(e: impl std::fmt::Display) -> ! {
    eprintln!("io_peers: {e}");
    std::process::exit(1)
}

/// Append one response per complete request in `buf` to `out`; drop the
/// answered requests from `buf`.
fn answer(buf: &mut Vec<u8>, out: &mut Vec<u8>) {
    let mut start = 0;
    while let Some(i) = buf[start..].windows(4).position(|w| w == b"\r\n\r\n") {
        out.extend_from_slice(RESP);
        start += i + 4;
    }
    buf.drain(..start);
}

fn tokio_rt(workers: usize) -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(workers).enable_all().build().unwrap_or_else(|e| fail(e))
}

fn tokio_echo(addr: &str, workers: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tokio_rt(workers).block_on(async {
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

fn tokio_http(addr: &str, workers: usize) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    tokio_rt(workers).block_on(async {
        let l = tokio::net::TcpListener::bind(addr).await.unwrap_or_else(|e| fail(e));
        println!("tokio http listening on {}", l.local_addr().unwrap_or_else(|e| fail(e)));
        loop {
            let (mut s, _) = l.accept().await.unwrap_or_else(|e| fail(e));
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let mut buf = Vec::with_capacity(4096);
                let mut out = Vec::with_capacity(4096);
                let mut tmp = [0u8; 4096];
                loop {
                    match s.read(&mut tmp).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => {
                            buf.extend_from_slice(&tmp[..n]);
                            out.clear();
                            answer(&mut buf, &mut out);
                            if !out.is_empty() && s.write_all(&out).await.is_err() {
                                return;
                            }
                        }
                    }
                }
            });
        }
    })
}

fn hyper_http(addr: &str, workers: usize) {
    use http_body_util::Full;
    use hyper::body::Bytes;
    tokio_rt(workers).block_on(async {
        let l = tokio::net::TcpListener::bind(addr).await.unwrap_or_else(|e| fail(e));
        println!("hyper http listening on {}", l.local_addr().unwrap_or_else(|e| fail(e)));
        loop {
            let (s, _) = l.accept().await.unwrap_or_else(|e| fail(e));
            let _ = s.set_nodelay(true);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|_req| async {
                    let mut r = hyper::Response::new(Full::new(Bytes::from_static(BODY)));
                    r.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("text/plain"));
                    Ok::<_, std::convert::Infallible>(r)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(hyper_util::rt::TokioIo::new(s), svc)
                    .await;
            });
        }
    })
}

fn may_listen(addr: &str, workers: usize, what: &str) -> may::net::TcpListener {
    may::config().set_workers(workers);
    let l = may::net::TcpListener::bind(addr).unwrap_or_else(|e| fail(e));
    println!("may {what} listening on {}", l.local_addr().unwrap_or_else(|e| fail(e)));
    l
}

fn may_serve(l: may::net::TcpListener, f: fn(may::net::TcpStream)) {
    let h = may::go!(move || {
        for s in l.incoming() {
            match s {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    may::go!(move || f(s));
                }
                Err(e) => fail(e),
            }
        }
    });
    let _ = h.join();
}

fn may_echo_conn(mut s: may::net::TcpStream) {
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

fn may_http_conn(mut s: may::net::TcpStream) {
    let mut buf = Vec::with_capacity(4096);
    let mut out = Vec::with_capacity(4096);
    let mut tmp = [0u8; 4096];
    loop {
        match s.read(&mut tmp) {
            Ok(0) | Err(_) => return,
            Ok(n) => {
                buf.extend_from_slice(&tmp[..n]);
                out.clear();
                answer(&mut buf, &mut out);
                if !out.is_empty() && s.write_all(&out).is_err() {
                    return;
                }
            }
        }
    }
}

#[derive(Clone)]
struct Hello;

impl may_minihttp::HttpService for Hello {
    fn call(&mut self, _req: may_minihttp::Request, res: &mut may_minihttp::Response) -> std::io::Result<()> {
        res.header("Content-Type: text/plain");
        res.body("Hello, world!\n");
        Ok(())
    }
}

fn minihttp(addr: &str, workers: usize) {
    may::config().set_workers(workers);
    let server = may_minihttp::HttpServer(Hello).start(addr).unwrap_or_else(|e| fail(e));
    println!("may_minihttp listening on {addr}");
    let _ = server.join();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let usage =
        || -> ! { fail("usage: io_peers tokio-echo|tokio-http|hyper-http|may-echo|may-http|minihttp ADDR WORKERS") };
    let (Some(kind), Some(addr), Some(w)) = (args.get(1), args.get(2), args.get(3)) else { usage() };
    let workers = match w.parse::<usize>() {
        Ok(n) if n > 0 => n,
        _ => fail(format!("WORKERS must be a positive integer, got {w:?}")),
    };
    match kind.as_str() {
        "tokio-echo" => tokio_echo(addr, workers),
        "tokio-http" => tokio_http(addr, workers),
        "hyper-http" => hyper_http(addr, workers),
        "may-echo" => may_serve(may_listen(addr, workers, "echo"), may_echo_conn),
        "may-http" => may_serve(may_listen(addr, workers, "http"), may_http_conn),
        "minihttp" => minihttp(addr, workers),
        _ => usage(),
    }
}
