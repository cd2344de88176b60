//! Ping-pong between two ranks, fiber to fiber: the round-trip time of an
//! 8-byte message and the bandwidth of 1 MiB messages.
//!
//!     cargo build --release -p numafiber-mpi --example ping_pong
//!     mpirun -np 2 target/release/examples/ping_pong
//!
//! Ranks beyond the first two wait at the final barrier. Figures from one
//! run are noisy: compare interleaved runs (BENCHMARKS.md).

use std::time::Instant;

use numafiber::{fiber, Runtime};
use numafiber_mpi::Comm;

const SMALL_ROUNDS: usize = 10_000;
const BIG_ROUNDS: usize = 200;
const BIG: usize = 1 << 20;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mpi = numafiber_mpi::init()?;
    let world = mpi.world();
    if world.size() < 2 {
        eprintln!("ping_pong needs 2 ranks: mpirun -np 2 {}", std::env::args().next().unwrap_or_default());
        return Ok(());
    }
    let rt = Runtime::builder().workers(1).build()?;
    let w = world.clone();
    rt.block_on(move || -> Result<(), numafiber_mpi::Error> {
        if w.rank() < 2 {
            // The ping-pong runs in a fiber of its own, as an application's would.
            let w2 = w.clone();
            fiber::await_fiber(fiber::spawn(move || pingpong(&w2)))?;
        }
        w.barrier()
    })?;
    Ok(())
}

fn pingpong(w: &Comm) -> Result<(), numafiber_mpi::Error> {
    let (me, peer) = (w.rank(), 1 - w.rank());
    let mut small = [0u8; 8];
    let mut big = vec![0u8; BIG];
    for (len, rounds) in [(8, SMALL_ROUNDS), (BIG, BIG_ROUNDS)] {
        let buf: &mut [u8] = if len == 8 { &mut small } else { &mut big };
        w.barrier()?;
        let t = Instant::now();
        for _ in 0..rounds {
            if me == 0 {
                w.send(buf, peer, 0)?;
                w.recv(buf, peer, 0)?;
            } else {
                w.recv(buf, peer, 0)?;
                w.send(buf, peer, 0)?;
            }
        }
        let secs = t.elapsed().as_secs_f64();
        if me == 0 {
            let half_rtt_us = secs / rounds as f64 / 2.0 * 1e6;
            let mib_s = (2 * rounds * len) as f64 / secs / (1 << 20) as f64;
            println!("{len:>8} bytes: {half_rtt_us:8.2} us one way, {mib_s:10.1} MiB/s");
        }
    }
    Ok(())
}
