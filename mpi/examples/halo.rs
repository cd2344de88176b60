//! A 2D Jacobi iteration split into row bands over the ranks, whose halo
//! exchange overlaps the computation: each step starts the boundary rows'
//! receives and sends, computes the band's interior in fibers meanwhile,
//! then waits for the halos and computes the two boundary rows. Rank 0
//! checks the result against the same iteration on one process.
//!
//!     cargo build --release -p numafiber-mpi --example halo
//!     mpirun -np 2 target/release/examples/halo      # or -np 4 --oversubscribe
//!
//! The grid's edges are fixed at 1.0, the inside starts at 0.0.

use numafiber::{fiber, Runtime};
use numafiber_mpi::Comm;

const N: usize = 256; // grid side (rows and columns), edges included
const STEPS: usize = 100;
const CHUNK: usize = 16; // interior rows per fiber

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mpi = numafiber_mpi::init()?;
    let world = mpi.world();
    let rt = Runtime::new()?;
    let w = world.clone();
    let (sum, mine) = rt.block_on(move || run(&w))?;
    if world.rank() == 0 {
        let want = serial(world.size() as usize);
        println!("ranks {}: checksum {sum:.9}, one process {want:.9} ({} rows here)", world.size(), mine);
        assert_eq!(sum, want, "the distributed iteration must give the serial result");
    }
    Ok(())
}

/// This rank's rows: `lo..hi` of the inner rows `1..N-1`.
fn band(rank: usize, size: usize) -> (usize, usize) {
    let inner = N - 2;
    let lo = 1 + inner * rank / size;
    let hi = 1 + inner * (rank + 1) / size;
    (lo, hi)
}

fn initial() -> Vec<f64> {
    let mut g = vec![0.0; N * N];
    for i in 0..N {
        for j in 0..N {
            if i == 0 || j == 0 || i == N - 1 || j == N - 1 {
                g[i * N + j] = 1.0;
            }
        }
    }
    g
}

/// One Jacobi update of row `i` (interior columns) from `old` into `new`.
fn row(old: &[f64], new: &mut [f64], i: usize) {
    for j in 1..N - 1 {
        new[j] = 0.25 * (old[(i - 1) * N + j] + old[(i + 1) * N + j] + old[i * N + j - 1] + old[i * N + j + 1]);
    }
}

fn run(w: &Comm) -> Result<(f64, usize), numafiber_mpi::Error> {
    let (rank, size) = (w.rank() as usize, w.size() as usize);
    let (lo, hi) = band(rank, size);
    // Each rank keeps the whole grid for simplicity but owns rows lo..hi.
    let mut old = initial();
    let mut new = old.clone();
    for _ in 0..STEPS {
        // Start the halo exchange: my first and last rows out, the
        // neighbours' rows in.
        let up = (rank > 0).then(|| rank as i32 - 1);
        let down = (rank + 1 < size).then(|| rank as i32 + 1);
        let mut reqs = Vec::new();
        let mut recvs = Vec::new();
        if let Some(u) = up {
            reqs.push(w.isend(old[lo * N..(lo + 1) * N].to_vec(), u, 0)?);
            recvs.push((lo - 1, w.irecv(vec![0.0; N], u, 0)?));
        }
        if let Some(d) = down {
            reqs.push(w.isend(old[(hi - 1) * N..hi * N].to_vec(), d, 0)?);
            recvs.push((hi, w.irecv(vec![0.0; N], d, 0)?));
        }
        // The interior rows lo+1..hi-1 need no halo: compute them in fibers
        // while the messages travel.
        let old_ref = &old;
        let inner = &mut new[(lo + 1).min(hi) * N..(hi - 1).max(lo + 1) * N];
        fiber::scope(|s| {
            for (k, chunk) in inner.chunks_mut(CHUNK * N).enumerate() {
                s.spawn(move || {
                    for (r, out) in chunk.chunks_mut(N).enumerate() {
                        row(old_ref, out, lo + 1 + k * CHUNK + r);
                    }
                });
            }
        });
        for (at, r) in recvs {
            let (halo, _) = r.wait()?;
            old[at * N..(at + 1) * N].copy_from_slice(&halo);
        }
        for r in numafiber_mpi::wait_all(reqs) {
            r?;
        }
        row(&old, &mut new[lo * N..(lo + 1) * N], lo);
        if hi - 1 > lo {
            row(&old, &mut new[(hi - 1) * N..hi * N], hi - 1);
        }
        std::mem::swap(&mut old, &mut new);
    }
    let local: f64 = old[lo * N..hi * N].iter().sum();
    let mut parts = vec![0.0; size];
    w.all_gather(&[local], &mut parts)?;
    // Summed in rank order: the same rounding as `serial`'s sum of the
    // same bands.
    Ok((parts.iter().sum(), hi - lo))
}

/// The same iteration on one process, summed band by band as `run` does.
fn serial(size: usize) -> f64 {
    let mut old = initial();
    let mut new = old.clone();
    for _ in 0..STEPS {
        for i in 1..N - 1 {
            row(&old, &mut new[i * N..(i + 1) * N], i);
        }
        std::mem::swap(&mut old, &mut new);
    }
    (0..size).map(|r| band(r, size)).map(|(lo, hi)| old[lo * N..hi * N].iter().sum::<f64>()).sum()
}
