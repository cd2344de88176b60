//! NABBIT Sec. IV: the irregular dynamic program of Eq. (2), blocked B×B,
//! five ways (serial, NABBIT static graph, NABBIT dynamic graph, wavefront,
//! divide-and-conquer K=2 and K=5), each checked against serial M(n,n).
//!
//! ```text
//! cargo run --release --example smith_waterman              # N in {1000,2000}, B=16; B sweep at N=1000
//! cargo run --release --example smith_waterman -- --n 2000 --b 16 --reps 5
//! cargo run --release --example smith_waterman -- --quick
//! ```
//! Options: `--n N` (one size), `--b B` (one block size, no sweep),
//! `--sweep-n N` (size of the B sweep), `--reps R` (median of R runs),
//! `--workers W`, `--quick` (N=300, reps 1).
//! Runtime: `Policy::RandomSteal` on W workers (default 2).

#[path = "common/timing_note.rs"]
mod timing_note;

#[path = "graph_common/sw.rs"]
mod sw;

use std::sync::Arc;
use std::time::Instant;

use numafiber::{Policy, Runtime};

fn arg(args: &[String], name: &str) -> Option<usize> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(|v| v.parse().expect("a number"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

type Impl = fn(&Arc<sw::Problem>, usize) -> i32;

const IMPLS: [(&str, Impl); 5] = [
    ("nabbit-static", |p, b| sw::nabbit_static(p, b).corner()),
    ("nabbit-dynamic", |p, b| sw::nabbit_dynamic(p, b).corner()),
    ("wavefront", |p, b| sw::wavefront(p, b).corner()),
    ("d&c K=2", |p, b| sw::divide_conquer(p, b, 2).corner()),
    ("d&c K=5", |p, b| sw::divide_conquer(p, b, 5).corner()),
];

/// Median serial time, then each implementation's median time and
/// speed-up; every result is checked against serial M(n,n).
fn run(rt: &Runtime, n: usize, b: usize, reps: usize) {
    let p = Arc::new(sw::Problem::random(n, 42));
    let mut ts = Vec::new();
    let mut want = 0;
    for _ in 0..reps {
        let t = Instant::now();
        want = sw::serial(&p, b).corner();
        ts.push(t.elapsed().as_secs_f64());
    }
    let serial = median(ts);
    print!("| {n:5} | {b:3} | {serial:8.3} s |");
    for (name, f) in IMPLS {
        let mut ts = Vec::new();
        for _ in 0..reps {
            let p2 = p.clone();
            let (got, secs) = rt.block_on(move || {
                let t = Instant::now();
                let got = f(&p2, b);
                (got, t.elapsed().as_secs_f64())
            });
            assert_eq!(got, want, "{name}: M(n,n) differs from serial (n={n}, b={b})");
            ts.push(secs);
        }
        let t = median(ts);
        print!(" {t:7.3} s ({:4.2}x) |", serial / t);
    }
    println!();
}

fn header() {
    print!("|     N |   B |     serial |");
    for (name, _) in IMPLS {
        print!(" {name:>18} |");
    }
    println!();
    print!("|------:|----:|-----------:|");
    for _ in IMPLS {
        print!("-------------------:|");
    }
    println!();
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let workers = arg(&args, "--workers").unwrap_or(2);
    let reps = arg(&args, "--reps").unwrap_or(if quick { 1 } else { 3 });
    let rt = Runtime::builder().workers(workers).policy(Policy::RandomSteal).build().expect("runtime");
    println!("Smith-Waterman, Eq. (2), general gap penalty; {workers} workers, RandomSteal; median of {reps} run(s);");
    println!("time (speed-up over serial of the same B). Every M(n,n) equals serial.\n");
    let sizes: Vec<usize> = match (arg(&args, "--n"), quick) {
        (Some(n), _) => vec![n],
        (None, true) => vec![300],
        (None, false) => vec![1000, 2000],
    };
    let b = arg(&args, "--b");
    header();
    for &n in &sizes {
        run(&rt, n, b.unwrap_or(16), reps);
    }
    if b.is_none() {
        let n = arg(&args, "--sweep-n").unwrap_or(if quick { 300 } else { 1000 });
        println!("\nBlock-size sweep (Fig. 6 shape), N = {n}:\n");
        header();
        for b in [1, 4, 16, 64] {
            run(&rt, n, b, reps);
        }
    }
    timing_note::print();
}
