//! Ported corolib program: the client-server pair of corolib's
//! `examples/boost/clientserver1` (`server.cpp` + `client1.cpp`), on
//! `numafiber::net`. corolib writes it with C++20 coroutines over Boost.Asio
//! (`co_await start_accepting()`, `start_reading()`, `start_timer()`, ...);
//! here every step is a plain blocking call in a fiber, and the fiber parks
//! on the reactor while the socket is not ready.
//!
//! - The server's main fiber accepts connections in a loop and starts one
//!   fiber per connection without waiting for it (corolib's
//!   `mainflow_reading_writing`): read one request line, wait a little to
//!   simulate a long calculation, answer the request in upper case, close.
//! - Each client fiber repeats corolib `client1`'s `mainflow` sequence:
//!   connect, write "This is string N to echo", read the response (until the
//!   server closes), wait a little, close.
//!
//! The delays are corolib's 500 ms / 100 ms scaled down to 5 ms / 1 ms.
//!
//! ```text
//! cargo run --release --example corolib_clientserver -- [CLIENTS] [ROUNDS]
//! ```
//!
//! Output of `-- 2 2` (the transcript is in client, round order, so it is
//! the same on every run):
//! ```text
//! server listening, expecting 4 connections
//! client 0 round 0: sent "client 0: This is string 0 to echo" got "CLIENT 0: THIS IS STRING 0 TO ECHO"
//! client 0 round 1: sent "client 0: This is string 1 to echo" got "CLIENT 0: THIS IS STRING 1 TO ECHO"
//! client 1 round 0: sent "client 1: This is string 0 to echo" got "CLIENT 1: THIS IS STRING 0 TO ECHO"
//! client 1 round 1: sent "client 1: This is string 1 to echo" got "CLIENT 1: THIS IS STRING 1 TO ECHO"
//! server: 4 connections, 4 requests, 140 bytes answered
//! ```

use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::SocketAddr;
use std::time::Duration;

use numafiber::net::{TcpListener, TcpStream};
use numafiber::{fiber, Runtime};

/// The server's simulated calculation between reading and writing.
const SERVER_DELAY: Duration = Duration::from_millis(5);
/// The client's simulated calculation after reading the response.
const CLIENT_DELAY: Duration = Duration::from_millis(1);

/// One connection on the server (corolib `mainflow_reading_writing`):
/// read a request line, delay, answer it in upper case, close.
/// Returns the number of bytes answered.
fn serve_one(s: TcpStream) -> io::Result<usize> {
    let mut line = String::new();
    BufReader::new(&s).read_line(&mut line)?;
    if !line.ends_with('\n') {
        return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "request without a newline"));
    }
    fiber::sleep(SERVER_DELAY);
    let answer = line.to_uppercase();
    (&s).write_all(answer.as_bytes())?;
    s.shutdown(std::net::Shutdown::Write)?;
    Ok(answer.len())
}

/// The server (corolib `ServerApp::mainflow`): accept `expect` connections,
/// one fiber each, not waiting for one before accepting the next.
fn server(l: TcpListener, expect: usize) -> io::Result<String> {
    let mut handles = Vec::with_capacity(expect);
    for _ in 0..expect {
        let (s, _) = l.accept()?;
        handles.push(fiber::spawn(move || serve_one(s)));
    }
    let mut bytes = 0;
    for r in fiber::when_all(handles) {
        bytes += r?;
    }
    Ok(format!("server: {expect} connections, {expect} requests, {bytes} bytes answered\n"))
}

/// One client (corolib `ClientApp::mainflow`): `rounds` times connect,
/// write, read the answer, delay, close. Returns its transcript lines.
fn client(addr: SocketAddr, c: usize, rounds: usize) -> io::Result<String> {
    let mut out = String::new();
    for i in 0..rounds {
        let mut s = TcpStream::connect(addr)?;
        let request = format!("client {c}: This is string {i} to echo");
        s.write_all(format!("{request}\n").as_bytes())?;
        let mut answer = String::new();
        s.read_to_string(&mut answer)?; // the server closes after answering
        fiber::sleep(CLIENT_DELAY);
        drop(s); // corolib: stop()
        out += &format!("client {c} round {i}: sent {request:?} got {:?}\n", answer.trim_end_matches('\n'));
    }
    Ok(out)
}

/// Run the program: a server and `clients` client fibers doing `rounds`
/// rounds each, on 127.0.0.1 with a port chosen by the OS. Returns the
/// transcript.
pub fn run(rt: &Runtime, clients: usize, rounds: usize) -> io::Result<String> {
    rt.block_on(move || {
        let l = TcpListener::bind("127.0.0.1:0")?;
        let addr = l.local_addr()?;
        let expect = clients * rounds;
        let mut out = format!("server listening, expecting {expect} connections\n");
        let srv = fiber::spawn(move || server(l, expect));
        let cs: Vec<_> = (0..clients).map(|c| fiber::spawn(move || client(addr, c, rounds))).collect();
        let mut first_err = None;
        for r in fiber::when_all(cs) {
            match r {
                Ok(t) => out += &t,
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_err {
            // The server may still wait for connections that will never come.
            return Err(e);
        }
        out += &srv.join().map_err(|e| io::Error::other(format!("server fiber: {e}")))??;
        Ok(out)
    })
}

#[allow(dead_code)]
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let num = |i: usize, name: &str, default: usize| match args.get(i) {
        None => default,
        Some(v) => match v.parse::<usize>() {
            Ok(n) if n > 0 && n <= 1000 => n,
            _ => {
                eprintln!("corolib_clientserver: {name} must be an integer in 1..=1000, got {v:?}");
                std::process::exit(2);
            }
        },
    };
    let clients = num(1, "CLIENTS", 3);
    let rounds = num(2, "ROUNDS", 5);
    let rt = Runtime::builder().workers(2).build().unwrap_or_else(|e| {
        eprintln!("corolib_clientserver: {e}");
        std::process::exit(1)
    });
    match run(&rt, clients, rounds) {
        Ok(out) => print!("{out}"),
        Err(e) => {
            eprintln!("corolib_clientserver: {e}");
            std::process::exit(1);
        }
    }
}
