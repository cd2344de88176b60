//! The command line of the server examples: `[ADDR [WORKERS [pin]]]`.

use numafiber::{Builder, Runtime};

/// ADDR (`default_addr` when absent) and a runtime builder for WORKERS
/// workers (one per PU when absent). A server's workers are not pinned to a
/// PU each: a worker asleep in `epoll_wait` on a PU of its own must be woken
/// on that PU for every request, where the kernel would otherwise wake it
/// on the CPU of the thread that sent the request (figures: BENCHMARKS.md,
/// "Servers under wrk", "Pinning"). `pin` as the third argument pins them.
/// Bad arguments: a message naming `program`, exit status 2.
pub fn parse(program: &str, default_addr: &str) -> (String, Builder) {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).cloned().unwrap_or_else(|| default_addr.to_string());
    let pin = match args.get(3).map(String::as_str) {
        None => false,
        Some("pin") => true,
        Some(x) => {
            eprintln!("{program}: the third argument may only be `pin`, got {x:?}");
            std::process::exit(2);
        }
    };
    let mut b = Runtime::builder().pin_workers(pin);
    if let Some(w) = args.get(2) {
        match w.parse::<usize>() {
            Ok(n) if n > 0 => b = b.workers(n),
            _ => {
                eprintln!("{program}: WORKERS must be a positive integer, got {w:?}");
                std::process::exit(2);
            }
        }
    }
    (addr, b)
}
