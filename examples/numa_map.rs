//! Print a topology and the worker plan a runtime would use on it.
//!
//! ```text
//! cargo run --example numa_map -- [--topology SPEC] [--workers N] [--strict]
//!   SPEC: detect (default) | uniform:NxP | synthetic:DESC | xml:PATH
//!   N:    default one worker per PU of the topology
//! ```
//!
//! Example: `cargo run --example numa_map -- --topology "synthetic:pack:2 numa:1 core:2 pu:1" --workers 6`

use std::process::ExitCode;

use numafiber::topology::current_cpu;
use numafiber::topology::real_cpus;
use numafiber::{fiber, Runtime, Topology};

const USAGE: &str = "usage: numa_map [--topology detect|uniform:NxP|synthetic:DESC|xml:PATH] [--workers N] [--strict]";

fn main() -> ExitCode {
    let mut spec = "detect".to_string();
    let mut workers: Option<usize> = None;
    let mut strict = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--topology" | "-t" => match args.next() {
                Some(v) => spec = v,
                None => return usage("--topology needs a value"),
            },
            "--workers" | "-w" => match args.next().map(|v| v.parse::<usize>()) {
                Some(Ok(n)) => workers = Some(n),
                _ => return usage("--workers needs a number"),
            },
            "--strict" => strict = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return ExitCode::SUCCESS;
            }
            other => return usage(&format!("unknown argument `{other}`")),
        }
    }

    let topo = match Topology::parse(&spec) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("numa_map: {e}");
            return ExitCode::from(2);
        }
    };

    println!("topology: {}", topo.description());
    println!(
        "  {} NUMA node(s), {} PU(s); {}",
        topo.num_nodes(),
        topo.num_pus(),
        if topo.is_this_machine() {
            "this machine: workers pin to these PUs".to_string()
        } else {
            format!("not this machine: logical PUs map round-robin onto real PUs {:?}", real_cpus())
        }
    );
    for n in topo.nodes() {
        let os = topo.node_os_index(n.id).map_or(String::new(), |o| format!(" (os node {o})"));
        println!("  node {}{os}: PUs {:?}", n.id, n.cpus);
    }

    println!(
        "distances ({}):",
        if topo.has_distance_matrix() {
            "from the topology"
        } else {
            "none in the topology: default 10 local / 20 remote"
        }
    );
    print!("  {:>6}", "");
    for b in 0..topo.num_nodes() {
        print!("{:>6}", format!("n{b}"));
    }
    println!();
    for a in 0..topo.num_nodes() {
        print!("  {:>6}", format!("n{a}"));
        for b in 0..topo.num_nodes() {
            print!("{:>6}", topo.distance(a, b));
        }
        println!("   nearest first: {:?}", topo.nodes_by_distance(a));
    }

    let w = workers.unwrap_or(topo.num_pus());
    match topo.plan_workers(w, strict) {
        Ok(plan) => {
            println!("plan: {w} worker(s){}", if strict { ", strict" } else { "" });
            println!("  {:>6} {:>10} {:>8} {:>5}", "worker", "logical_pu", "real_cpu", "node");
            for (i, s) in plan.iter().enumerate() {
                println!("  {i:>6} {:>10} {:>8} {:>5}", s.logical_pu, s.cpu, s.node);
            }
            run_workers(topo, w, strict)
        }
        Err(e) => {
            eprintln!("numa_map: {e}");
            ExitCode::from(2)
        }
    }
}

/// Start the runtime on the topology and let a fiber on each worker say
/// where it really runs (`sched_getcpu`).
fn run_workers(topo: Topology, workers: usize, strict: bool) -> ExitCode {
    let rt = match Runtime::builder().topology(topo).workers(workers).strict_pinning(strict).build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("numa_map: {e}");
            return ExitCode::from(2);
        }
    };
    let stats = rt.stats();
    println!(
        "running: {} worker thread(s) started{}",
        rt.workers(),
        if stats.mapped_onto_real_pus { " (best-effort pinning: topology is not this machine)" } else { "" }
    );
    println!("  {:>6} {:>8} {:>5} {:>7} {:>13}", "worker", "real_cpu", "node", "pinned", "sched_getcpu");
    for w in &stats.workers {
        let seen = fiber::Builder::new()
            .worker(w.worker)
            .spawn_on(&rt, || {
                fiber::yield_now();
                current_cpu()
            })
            .map(|h| h.join().ok().flatten());
        let seen = match seen {
            Ok(Some(c)) => c.to_string(),
            _ => "?".into(),
        };
        println!("  {:>6} {:>8} {:>5} {:>7} {:>13}", w.worker, w.cpu, w.node, w.pinned, seen);
    }
    rt.shutdown();
    ExitCode::SUCCESS
}

fn usage(why: &str) -> ExitCode {
    eprintln!("numa_map: {why}\n{USAGE}");
    ExitCode::from(2)
}
