//! `simulate`: run `numafiber::sim` over policies, seeds and sweeps, and
//! report exactly like `thesis_bench` (its table, `summary.csv` /
//! `runs.csv` columns and SVG figures, reused from `../thesis_bench/bench.rs`).
//! "median s" is the median *simulated* makespan over the seeds
//! `1..=--runs`; "cv %" its spread over the seeds (cost jitter and the
//! thieves' random choices).

use std::path::PathBuf;
use std::time::Instant;

use numafiber::sim::{distances, simulate, CostModel, MatrixParams, SimConfig, Workload};
use numafiber::{StealChunk, Topology};

use crate::bench::{self, parse_num, usage, CliError, RunResult, Summary, Variant};

pub const USAGE_LINE: &str =
    "usage: simulate [--policy all|NAME[,NAME..]] [--topology uniform:NxP|synthetic:DESC|xml:PATH] \
[--distances keep|epyc|xeon] [--workers N] [--workload matrix|fib|dag|producer] [--mults N] [--thieves N] [--size N] \
[--heavy-mults N] [--fib N] [--tasks N] [--items N] [--memory-share F] [--chunk half|N] [--runs N] \
[--imbalanced|--balanced|--both] [--sweep none|queue|heavy|workers|nodes|memory|all] [--out DIR] [--quick] [--help]";

pub const USAGE: &str =
    "simulate: the thesis' schedulers on a simulated machine (numafiber::sim), reported like thesis_bench

Every placement and steal decision is made by numafiber's own policy code (policy::Scheduler);
time, queues, parking and memory distance are simulated. Same seed, same result.

options:
  --policy P        all (default) or a comma list of: rr, random, numa, load, hybrid, nlh,
                    nlh+decrement, nlh+cpu-node, nlh+work-first
  --topology T      uniform:NxP (default uniform:8x16) | synthetic:DESC | xml:PATH | detect
  --distances D     keep (default: the topology's matrix, else 10/20) | epyc (10/12/32, 4 nodes a socket)
                    | xeon (10/21/31, 4 sockets a group)
  --workers N       simulated workers (default: one per PU)
  --workload W      matrix (default: the thesis benchmark 5.1) | fib (fork-join tree) | dag (random DAG)
                    | producer (one node spawns everything)
  --mults N         matrix: single-multiplication fibers (default 32)
  --thieves N       matrix: thief fibers, each awaiting one heavy fiber (default 2)
  --size N          matrix: size, sets the costs (default 500; one mult = size^3 x 0.30 ns)
  --heavy-mults N   matrix: multiplications of one heavy fiber (default 100)
  --fib N           fib: tree of fib(N) (default 20)
  --tasks N         dag: tasks (default 2000)
  --items N         producer: consumers (2 ms each, reading the producer's 8 MiB) spawned by one producer (default 2000)
  --memory-share F  memory-bound share of compute, 0..1 (default 0.3): it runs distance/10 slower
  --chunk C         steal chunk: half (default) or a fixed count
  --runs N          seeds per point (1..=N), for the median and the CV (default 5)
  --imbalanced      matrix: only the imbalanced scenario (node 0 multiplies 3x)
  --balanced        matrix: only the balanced scenario
  --both            matrix: both (default)
  --sweep S         none (default) | queue | heavy | workers (figures 5.1-5.9, matrix only for queue/heavy)
                    | nodes (1..64 nodes of the topology's PUs per node) | memory (memory share 0..100 %) | all
  --out DIR         write summary.csv, runs.csv and one SVG per figure into DIR
  --quick           short sweeps and small sizes, for CI
";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Matrix,
    Fib,
    Dag,
    Producer,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Matrix => "matrix",
            Kind::Fib => "fib",
            Kind::Dag => "dag",
            Kind::Producer => "producer",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sweep {
    Queue,
    Heavy,
    Workers,
    Nodes,
    Memory,
}

impl Sweep {
    fn scenario(self) -> &'static str {
        match self {
            Sweep::Queue => "queue_length",
            Sweep::Heavy => "heavy_tasks",
            Sweep::Workers => "concurrency",
            Sweep::Nodes => "nodes",
            Sweep::Memory => "memory_share",
        }
    }
    fn param(self) -> &'static str {
        match self {
            Sweep::Queue => "mults",
            Sweep::Heavy => "thieves",
            Sweep::Workers => "workers",
            Sweep::Nodes => "nodes",
            Sweep::Memory => "memory_pct",
        }
    }
    fn figures(self) -> [&'static str; 3] {
        match self {
            Sweep::Queue => ["fig5_1", "fig5_2", "fig5_3"],
            Sweep::Heavy => ["fig5_4", "fig5_5", "fig5_6"],
            Sweep::Workers => ["fig5_7", "fig5_8", "fig5_9"],
            Sweep::Nodes => ["sim_nodes_time", "sim_nodes_throughput", "sim_nodes_steals"],
            Sweep::Memory => ["sim_memory_time", "sim_memory_throughput", "sim_memory_steals"],
        }
    }
}

/// One simulated configuration.
#[derive(Debug, Clone, Copy)]
pub struct Point {
    pub matrix: MatrixParams,
    pub kind: Kind,
    pub fib: u32,
    pub tasks: usize,
    pub items: usize,
    pub workers: Option<usize>,
    pub memory_share: f64,
    pub chunk: StealChunk,
}

struct Settings {
    base: Point,
    runs: usize,
    variants: Vec<Variant>,
    dist: String,
    topology: Topology,
    balance: Vec<bool>,
    sweeps: Vec<Sweep>,
    out: Option<PathBuf>,
    quick: bool,
}

/// The topology of `spec` with the distance preset `dist` applied.
pub fn build_topology(spec: &str, dist: &str) -> Result<Topology, CliError> {
    let t = Topology::parse(spec).map_err(|e| CliError::Usage(format!("--topology {spec}: {e}")))?;
    let n = t.num_nodes();
    let m = match dist {
        "keep" => return Ok(t),
        "epyc" => distances::epyc_like(n),
        "xeon" => distances::xeon_like(n),
        other => return usage(format!("unknown --distances `{other}`: use keep, epyc or xeon")),
    };
    t.with_distances(m).map_err(|e| CliError::Usage(format!("--distances {dist}: {e}")))
}

fn parse_args(args: &[String]) -> Result<Settings, CliError> {
    let mut matrix = MatrixParams::for_size(500);
    let mut size_given = false;
    let mut base = Point {
        matrix,
        kind: Kind::Matrix,
        fib: 20,
        tasks: 2000,
        items: 2000,
        workers: None,
        memory_share: CostModel::default().memory_share,
        chunk: StealChunk::Half,
    };
    let mut runs = 5;
    let mut variants = bench::all_variants();
    let mut topo_spec = "uniform:8x16".to_string();
    let mut dist = "keep".to_string();
    let mut balance = vec![false, true];
    let mut sweeps = Vec::new();
    let mut sweep_given = false;
    let mut out = None;
    let mut quick = false;
    let mut explicit = std::collections::HashSet::new();
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => return Err(CliError::Help),
            "--policy" => match it.next() {
                Some(v) => variants = bench::parse_variants(v)?,
                None => return usage("--policy needs a value"),
            },
            "--topology" => match it.next() {
                Some(v) => topo_spec = v.clone(),
                None => return usage("--topology needs a value"),
            },
            "--distances" => match it.next() {
                Some(v) => dist = v.clone(),
                None => return usage("--distances needs a value"),
            },
            "--workload" => {
                base.kind = match it.next().map(String::as_str) {
                    Some("matrix") => Kind::Matrix,
                    Some("fib") => Kind::Fib,
                    Some("dag") => Kind::Dag,
                    Some("producer") => Kind::Producer,
                    Some(o) => return usage(format!("unknown workload `{o}`: use matrix, fib, dag or producer")),
                    None => return usage("--workload needs a value"),
                }
            }
            "--workers" => base.workers = Some(parse_num(a, it.next(), 1)?),
            "--mults" => matrix.mults = parse_num(a, it.next(), 1)?,
            "--thieves" => matrix.thieves = parse_num(a, it.next(), 0)?,
            "--size" => {
                let s = parse_num(a, it.next(), 1)?;
                size_given = true;
                let m = MatrixParams::for_size(s);
                (matrix.size, matrix.mult_ns, matrix.gen_ns) = (s, m.mult_ns, m.gen_ns);
            }
            "--heavy-mults" => matrix.heavy_mults = parse_num(a, it.next(), 1)?,
            "--fib" => base.fib = parse_num(a, it.next(), 0)?.min(40) as u32,
            "--tasks" => base.tasks = parse_num(a, it.next(), 1)?,
            "--items" => base.items = parse_num(a, it.next(), 1)?,
            "--memory-share" => {
                let v = it.next().ok_or_else(|| CliError::Usage("--memory-share needs a number".into()))?;
                match v.parse::<f64>() {
                    Ok(f) if (0.0..=1.0).contains(&f) => base.memory_share = f,
                    _ => return usage(format!("--memory-share `{v}`: use a number from 0 to 1")),
                }
            }
            "--chunk" => {
                base.chunk = match it.next().map(String::as_str) {
                    Some("half") => StealChunk::Half,
                    Some(n) => match n.parse::<usize>() {
                        Ok(k) if k > 0 => StealChunk::Fixed(k),
                        _ => return usage(format!("--chunk `{n}`: use half or a positive count")),
                    },
                    None => return usage("--chunk needs a value"),
                }
            }
            "--runs" => runs = parse_num(a, it.next(), 1)?,
            "--imbalanced" => balance = vec![true],
            "--balanced" => balance = vec![false],
            "--both" => balance = vec![false, true],
            "--sweep" => {
                sweep_given = true;
                sweeps = match it.next().map(String::as_str) {
                    Some("none") => vec![],
                    Some("queue") => vec![Sweep::Queue],
                    Some("heavy") => vec![Sweep::Heavy],
                    Some("workers") => vec![Sweep::Workers],
                    Some("nodes") => vec![Sweep::Nodes],
                    Some("memory") => vec![Sweep::Memory],
                    Some("all") => vec![Sweep::Queue, Sweep::Heavy, Sweep::Workers, Sweep::Nodes, Sweep::Memory],
                    Some(o) => {
                        return usage(format!(
                            "unknown sweep `{o}`: use none, queue, heavy, workers, nodes, memory or all"
                        ))
                    }
                    None => return usage("--sweep needs a value"),
                }
            }
            "--out" => match it.next() {
                Some(v) => out = Some(PathBuf::from(v)),
                None => return usage("--out needs a directory"),
            },
            "--quick" => quick = true,
            other => return usage(format!("unknown argument `{other}`")),
        }
        explicit.insert(a.clone());
    }
    if quick {
        if !size_given {
            let m = MatrixParams::for_size(128);
            (matrix.size, matrix.mult_ns, matrix.gen_ns) = (128, m.mult_ns, m.gen_ns);
        }
        if !explicit.contains("--heavy-mults") {
            matrix.heavy_mults = 60;
        }
        if !explicit.contains("--mults") {
            matrix.mults = 16;
        }
        if !explicit.contains("--runs") {
            runs = 3;
        }
        if !explicit.contains("--fib") {
            base.fib = 14;
        }
        if !explicit.contains("--tasks") {
            base.tasks = 300;
        }
        if !explicit.contains("--items") {
            base.items = 300;
        }
        if !sweep_given {
            sweeps = vec![Sweep::Queue, Sweep::Heavy, Sweep::Workers];
        }
    }
    base.matrix = matrix;
    if base.kind != Kind::Matrix {
        balance = vec![false];
        sweeps.retain(|s| !matches!(s, Sweep::Queue | Sweep::Heavy));
    }
    let topology = build_topology(&topo_spec, &dist)?;
    if let Some(w) = base.workers {
        if w > 64 * topology.num_pus().max(1) {
            return usage(format!("--workers {w}: far more than the {} PUs of the topology", topology.num_pus()));
        }
    }
    if let Some(dir) = &out {
        let probe = dir.join(".simulate_write_test");
        let r = std::fs::create_dir_all(dir)
            .and_then(|_| std::fs::write(&probe, b"ok"))
            .and_then(|_| std::fs::remove_file(&probe));
        r.map_err(|e| CliError::Usage(format!("--out {}: cannot write there ({e})", dir.display())))?;
    }
    Ok(Settings { base, runs, variants, dist, topology, balance, sweeps, out, quick })
}

/// The workload of one point.
pub fn workload(p: &Point, imbalanced: bool) -> Workload {
    match p.kind {
        Kind::Matrix => Workload::matrix(&MatrixParams { imbalanced, ..p.matrix }),
        Kind::Fib => Workload::fork_join(p.fib, 2_000, 200, 512),
        Kind::Dag => Workload::random_dag(p.tasks, 4, 5_000..200_000, 1 << 20, 0xDA6),
        Kind::Producer => Workload::skewed_producer(p.items, 2_000, 2_000_000, 8 << 20),
    }
}

/// Simulate one variant at one point with seed `seed`.
pub fn run_once(topo: &Topology, v: &Variant, p: &Point, wl: &Workload, seed: u64) -> Result<RunResult, String> {
    let cost = CostModel { memory_share: p.memory_share, ..CostModel::default() };
    let cfg = SimConfig {
        chunk: p.chunk,
        workers: p.workers,
        ..SimConfig::new(v.policy).options(v.opts).seed(seed).cost(cost)
    };
    let r = simulate(topo, &cfg, wl).map_err(|e| e.to_string())?;
    // Work units as thesis_bench counts them (matrix workload only).
    let units = match p.kind {
        Kind::Matrix => {
            r.workers.iter().map(|w| (w.nominal_ns as f64 / p.matrix.mult_ns.max(1) as f64).round() as u64).collect()
        }
        _ => Vec::new(),
    };
    Ok(RunResult {
        secs: r.makespan_s(),
        fibers: r.spawned,
        local_steals: r.local_steals,
        remote_steals: r.remote_steals,
        units,
        ..RunResult::default()
    })
}

fn run_point(
    s: &Settings,
    topo: &Topology,
    scenario: &str,
    param: &'static str,
    value: usize,
    p: &Point,
    imbalanced: bool,
) -> Result<Vec<Summary>, CliError> {
    let wl = workload(p, imbalanced);
    let mut out = Vec::new();
    for v in &s.variants {
        let mut runs = Vec::new();
        for seed in 1..=s.runs as u64 {
            runs.push(run_once(topo, v, p, &wl, seed).map_err(|e| CliError::Usage(format!("simulation failed: {e}")))?);
        }
        let bound = match p.kind {
            Kind::Matrix => {
                let slow: Vec<bool> = match topo.plan_workers(p.workers.unwrap_or(topo.num_pus()), false) {
                    Ok(slots) => slots.iter().map(|w| w.node == 0).collect(),
                    Err(_) => Vec::new(),
                };
                let m = MatrixParams { imbalanced, ..p.matrix };
                bench::units_bound(&slow, m.mults, m.thieves, m.heavy_mults as u64, m.imbalanced)
            }
            _ => 0,
        };
        out.push(bench::summarize(scenario, param, value, v.name, runs).with_point(bound, p.matrix.thieves));
    }
    bench::print_table(&out);
    Ok(out)
}

fn sweep_values(sw: Sweep, s: &Settings) -> Vec<usize> {
    let q = s.quick;
    match sw {
        Sweep::Queue if q => vec![8, 16, 32],
        Sweep::Queue => vec![8, 16, 32, 64, 128, 256, 512, 1024],
        Sweep::Heavy if q => vec![1, 2, 4],
        Sweep::Heavy => vec![1, 2, 4, 8, 16, 32, 64, 128],
        Sweep::Workers => {
            let max = s.topology.num_pus().max(1);
            let mut v: Vec<usize> =
                std::iter::successors(Some(1usize), |x| Some(x * 2)).take_while(|&x| x <= max).collect();
            if v.last() != Some(&max) {
                v.push(max);
            }
            v
        }
        Sweep::Nodes if q => vec![1, 2, 4],
        Sweep::Nodes => vec![1, 2, 4, 8, 16, 32, 64],
        Sweep::Memory if q => vec![0, 30, 100],
        Sweep::Memory => vec![0, 10, 20, 30, 50, 70, 100],
    }
}

pub fn run_cli(args: &[String]) -> Result<(), CliError> {
    let s = parse_args(args)?;
    let b = &s.base;
    let t0 = Instant::now();
    println!(
        "simulate: topology {} ({} nodes, {} PUs, distances {}{}), workers {}, workload {}, size {}, heavy-mults {}, \
         memory share {}, chunk {:?}, runs (seeds) {}, policies {}",
        s.topology.description(),
        s.topology.num_nodes(),
        s.topology.num_pus(),
        s.dist,
        if s.topology.has_distance_matrix() { "" } else { ", default 10/20" },
        b.workers.map_or("one per PU".to_string(), |w| w.to_string()),
        b.kind.name(),
        b.matrix.size,
        b.matrix.heavy_mults,
        b.memory_share,
        b.chunk,
        s.runs,
        s.variants.iter().map(|v| v.name).collect::<Vec<_>>().join(",")
    );
    let label = |imb: bool| if imb { "imbalanced" } else { "balanced" };
    // Scenario names: thesis_bench's for the matrix workload; the workload's
    // name in front otherwise (those have no imbalanced variant).
    let scen = |base: &str, imb: bool| match b.kind {
        Kind::Matrix => format!("{base}/{}", label(imb)),
        k => format!("{base}_{}/{}", k.name(), label(imb)),
    };
    let mut all = Vec::new();
    if s.sweeps.is_empty() {
        for &imb in &s.balance {
            let (param, value) = match b.kind {
                Kind::Matrix => ("mults", b.matrix.mults),
                Kind::Fib => ("fib", b.fib as usize),
                Kind::Dag => ("tasks", b.tasks),
                Kind::Producer => ("items", b.items),
            };
            all.extend(run_point(&s, &s.topology, &scen("default", imb), param, value, b, imb)?);
        }
    }
    for &sw in &s.sweeps {
        for &imb in &s.balance {
            for value in sweep_values(sw, &s) {
                let mut p = *b;
                let mut topo = s.topology.clone();
                match sw {
                    Sweep::Queue => p.matrix.mults = value,
                    Sweep::Heavy => p.matrix.thieves = value,
                    Sweep::Workers => p.workers = Some(value),
                    Sweep::Memory => p.memory_share = value as f64 / 100.0,
                    Sweep::Nodes => {
                        let per = s.topology.nodes().first().map_or(1, |n| n.cpus.len().max(1));
                        let spec = format!("uniform:{value}x{per}");
                        topo = build_topology(&spec, &s.dist)?;
                    }
                }
                all.extend(run_point(&s, &topo, &scen(sw.scenario(), imb), sw.param(), value, &p, imb)?);
            }
        }
    }
    eprintln!("simulated {} points in {:.1?}", all.len(), t0.elapsed());
    if let Some(dir) = &s.out {
        bench::write_csvs(dir, &all).map_err(|e| CliError::Usage(format!("--out {}: {e}", dir.display())))?;
        let names: Vec<&'static str> = s.variants.iter().map(|v| v.name).collect();
        let mut files = vec![dir.join("summary.csv"), dir.join("runs.csv")];
        for &sw in &s.sweeps {
            let scenario = match b.kind {
                Kind::Matrix => sw.scenario().to_string(),
                k => format!("{}_{}", sw.scenario(), k.name()),
            };
            let f = bench::plot::figures(dir, sw.figures(), &scenario, sw.param(), &all, &names)
                .map_err(|e| CliError::Usage(format!("--out {}: plotting failed: {e}", dir.display())))?;
            files.extend(f);
        }
        println!("\nwrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    Ok(())
}
