//! NABBIT Sec. VI: random task graphs (parameters Δi, U, W), Fig. 10's
//! table: static and dynamic NABBIT against their serial versions.
//!
//! ```text
//! cargo run --release --example random_dag                 # Δi=10, U=100000, 1 and 2 workers
//! cargo run --release --example random_dag -- --delta 10 --u 100000 --workers 2 --reps 21
//! cargo run --release --example random_dag -- --quick
//! ```
//! Options: `--delta Δi`, `--u U`, `--seed S`, `--workers P` (one worker
//! count instead of 1 and 2), `--reps R` (median; large W use fewer),
//! `--par` (split each node's work with fiber::join, base case W=25),
//! `--quick`. Runtime: `Policy::RandomSteal`.
//!
//! Static: the graph is built once and only `execute` is timed (the paper
//! also built its nodes beforehand). Dynamic: a fresh `DynamicExecutor`
//! per run, so the time includes creating every node in the concurrent map
//! (the paper pre-inserted its nodes). Serial versions run the same
//! traversals on one thread with plain counters, no locks, no atomics.

#[path = "common/timing_note.rs"]
mod timing_note;

#[path = "graph_common/dag.rs"]
mod dag;

use std::sync::Arc;
use std::time::Instant;

use numafiber::graph::{execute_serial, DynamicExecutor};
use numafiber::{Policy, Runtime};

fn arg(args: &[String], name: &str) -> Option<usize> {
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).map(|v| v.parse().expect("a number"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time<R>(reps: usize, mut f: impl FnMut() -> R, check: impl Fn(&R)) -> f64 {
    median(
        (0..reps)
            .map(|_| {
                let t = Instant::now();
                let r = f();
                let s = t.elapsed().as_secs_f64();
                check(&r);
                s
            })
            .collect(),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let par = args.iter().any(|a| a == "--par");
    let delta = arg(&args, "--delta").unwrap_or(10);
    let u = arg(&args, "--u").unwrap_or(if quick { 10_000 } else { 100_000 });
    let seed = arg(&args, "--seed").unwrap_or(1) as u64;
    let reps_arg = arg(&args, "--reps");
    let worker_counts: Vec<usize> = match arg(&args, "--workers") {
        Some(w) => vec![w],
        None => vec![1, 2],
    };
    let d = dag::Dag::generate(delta, u, seed);
    println!(
        "Random DAG: Δi={delta}, U={u}, seed {seed}: |V|={}, |E|={}, M={} nodes on the longest path; compute {}",
        d.nodes(),
        d.edges(),
        d.longest_path(),
        if par { "split with fiber::join (base W=25)" } else { "serial" }
    );
    let deps = Arc::new(d.deps.clone());
    let ws: &[u64] = if quick { &[1, 100, 1000] } else { &[1, 10, 100, 1000, 10_000] };
    for &p in &worker_counts {
        let rt = Runtime::builder().workers(p).policy(Policy::RandomSteal).build().expect("runtime");
        println!(
            "\nP = {p} worker(s), RandomSteal. Seconds, median of R runs (ratio = NABBIT / its serial version).\n"
        );
        println!("|     W | R  | static NABBIT | static serial | ratio | dynamic NABBIT | dynamic serial | ratio | dyn/static |");
        println!("|------:|---:|--------------:|--------------:|------:|---------------:|---------------:|------:|-----------:|");
        for &w in ws {
            let reps = reps_arg.unwrap_or(match w {
                0..=100 => 21,
                101..=1000 => 11,
                _ => 3,
            });
            let (g, ids) = dag::build_static(&d, w, par);
            let sink = ids[0].expect("the sink exists");
            let deps = deps.clone();
            // Everything is timed inside one fiber of the runtime, so no
            // thread-to-fiber hand-off is counted.
            let (sp, ss, dp, ds) = rt.block_on(move || {
                let want = g.execute_serial().expect("acyclic")[sink];
                let ss = time(reps, || g.execute_serial().unwrap(), |v| assert_eq!(v[sink], want));
                let sp = time(reps, || g.execute().unwrap(), |v| assert_eq!(v[sink], want, "static NABBIT differs"));
                let graph = || dag::DagGraph { deps: deps.clone(), w, par };
                let ds = time(reps, || execute_serial(&graph(), 0).unwrap(), |r| assert_eq!(*r.sink(), want));
                let dp = time(
                    reps,
                    || {
                        let ex = DynamicExecutor::new(graph());
                        let v = *ex.execute(0).unwrap();
                        (v, ex)
                    },
                    |(v, _)| assert_eq!(*v, want, "dynamic NABBIT differs"),
                );
                (sp, ss, dp, ds)
            });
            println!(
                "| {w:5} | {reps:2} | {sp:13.5} | {ss:13.5} | {:5.2} | {dp:14.5} | {ds:14.5} | {:5.2} | {:10.2} |",
                sp / ss,
                dp / ds,
                dp / sp
            );
        }
    }
    timing_note::print();
}
