//! The thesis benchmark, section 5.1: matrix multiplications and thief
//! fibers that provoke local and remote steals.
//!
//! # Workload (as in 5.1, with the differences said)
//!
//! * `start_work` runs on the calling (non-worker) thread, like the
//!   thesis' `main` → `start_work` through `synchronous`: it first spawns two
//!   matrix-generation fibers (random `size x size` matrices) and waits for
//!   them, then spawns single-multiplication fibers and thief fibers
//!   alternately, and waits for all. Spawning from a non-worker thread is
//!   what makes the thesis' "external scheduling" (node 0) and our
//!   spawner-node-from-CPU switch matter.
//! * A single-multiplication fiber multiplies the two matrices once, or
//!   three times if it *runs* on a worker of NUMA node 0 and the scenario is
//!   imbalanced (checked when it runs, after any steal).
//! * A thief fiber spawns one `multiple_multiplications` fiber
//!   (`--heavy-mults` plain multiplications, default 100, no imbalance
//!   factor) and awaits it: while it waits its worker is free to steal.
//! * Results go through `std::hint::black_box` (corolib's
//!   `do_not_optimize`).
//! * The kernel is faster than the thesis' naive triple loop over nested
//!   `std::vector`s: one flat `Vec<f64>` per matrix and the i-k-j loop order,
//!   which the compiler vectorises. It does the same arithmetic.
//!
//! # Metrics
//!
//! Median execution time over `--runs` runs, coefficient of variation of the
//! times (stability), throughput in fibers per second (fibers of one run /
//! median time), local and remote steals (medians over runs) and the
//! remote-steal ratio.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use numafiber::{fiber, Policy, PolicyOptions, Runtime, Topology};

pub const USAGE_LINE: &str = "usage: thesis_bench [--policy all|NAME[,NAME..]] [--topology detect|uniform:NxP|synthetic:DESC|xml:PATH] \
[--workers N] [--mults N] [--thieves N] [--size N] [--heavy-mults N] [--runs N] [--imbalanced|--balanced|--both] \
[--sweep none|queue|heavy|workers|all] [--out DIR] [--quick] [--help]";

pub const USAGE: &str = "thesis_bench: the thesis' scheduler benchmark (section 5.1) on this machine or a described topology

options:
  --policy P        all (default) or a comma list of: rr, random, numa, load, hybrid, nlh,
                    nlh+decrement, nlh+cpu-node, nlh+work-first (the beyond-the-thesis switches)
  --topology T      detect (default) | uniform:NxP | synthetic:\"pack:2 numa:1 core:2 pu:1\" | xml:PATH
  --workers N       worker threads (default: one per PU of the topology)
  --mults N         single-multiplication fibers, the queue length (default 32)
  --thieves N       thief fibers, each awaiting one heavy fiber (default 2)
  --size N          matrix size (default 500)
  --heavy-mults N   multiplications of one heavy fiber (default 100)
  --runs N          runs per point, for the median and the CV (default 5)
  --imbalanced      only the imbalanced scenario (node 0 multiplies 3x)
  --balanced        only the balanced scenario
  --both            both (default)
  --sweep S         none (default) | queue | heavy | workers | all: reproduce figures 5.1-5.9
  --out DIR         write summary.csv, runs.csv and one SVG per figure into DIR
  --quick           small sizes and a short sweep of everything: under a minute, for CI
";

#[derive(Debug)]
pub enum CliError {
    Help,
    Usage(String),
}

pub fn usage<T>(msg: impl Into<String>) -> Result<T, CliError> {
    Err(CliError::Usage(msg.into()))
}

/// A scheduler under test: a policy plus the beyond-the-thesis switches.
#[derive(Debug, Clone, PartialEq)]
pub struct Variant {
    pub name: &'static str,
    pub policy: Policy,
    pub opts: PolicyOptions,
}

pub fn all_variants() -> Vec<Variant> {
    let thesis = PolicyOptions::default();
    let mut v: Vec<Variant> = [
        ("rr", Policy::RoundRobin),
        ("random", Policy::RandomSteal),
        ("numa", Policy::NumaSteal),
        ("load", Policy::LoadSteal),
        ("hybrid", Policy::HybridSteal),
        ("nlh", Policy::Nlh),
    ]
    .into_iter()
    .map(|(name, policy)| Variant { name, policy, opts: thesis })
    .collect();
    v.push(Variant { name: "nlh+decrement", policy: Policy::Nlh, opts: PolicyOptions { decrement_workload: true, ..thesis } });
    v.push(Variant { name: "nlh+cpu-node", policy: Policy::Nlh, opts: PolicyOptions { spawner_node_from_cpu: true, ..thesis } });
    v.push(Variant { name: "nlh+work-first", policy: Policy::Nlh, opts: PolicyOptions { work_first: true, ..thesis } });
    v
}

pub fn parse_variants(s: &str) -> Result<Vec<Variant>, CliError> {
    let all = all_variants();
    if s == "all" {
        return Ok(all);
    }
    let mut out = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let found = all.iter().find(|v| v.name == part).cloned().or_else(|| {
            // Also accept the library's policy names (round-robin, nllass, ...).
            let p: Policy = part.parse().ok()?;
            all.iter().find(|v| v.policy == p && v.opts == PolicyOptions::default()).cloned()
        });
        match found {
            Some(v) if !out.contains(&v) => out.push(v),
            Some(_) => {}
            None => {
                let names: Vec<&str> = all.iter().map(|v| v.name).collect();
                return usage(format!("unknown policy `{part}`: use all or one of {}", names.join(", ")));
            }
        }
    }
    if out.is_empty() {
        return usage("--policy needs at least one policy name");
    }
    Ok(out)
}

/// One benchmark configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Params {
    pub size: usize,
    pub heavy_mults: usize,
    pub mults: usize,
    pub thieves: usize,
    pub workers: Option<usize>,
    pub imbalanced: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sweep {
    Queue,
    Heavy,
    Workers,
}

impl Sweep {
    fn scenario(self) -> &'static str {
        match self {
            Sweep::Queue => "queue_length",
            Sweep::Heavy => "heavy_tasks",
            Sweep::Workers => "concurrency",
        }
    }
    fn param(self) -> &'static str {
        match self {
            Sweep::Queue => "mults",
            Sweep::Heavy => "thieves",
            Sweep::Workers => "workers",
        }
    }
    fn figures(self) -> [&'static str; 3] {
        match self {
            Sweep::Queue => ["fig5_1", "fig5_2", "fig5_3"],
            Sweep::Heavy => ["fig5_4", "fig5_5", "fig5_6"],
            Sweep::Workers => ["fig5_7", "fig5_8", "fig5_9"],
        }
    }
}

struct Settings {
    base: Params,
    runs: usize,
    variants: Vec<Variant>,
    topology: Topology,
    balance: Vec<bool>,
    sweeps: Vec<Sweep>,
    out: Option<PathBuf>,
    quick: bool,
}

pub fn parse_num(flag: &str, v: Option<&String>, min: usize) -> Result<usize, CliError> {
    let Some(v) = v else { return usage(format!("{flag} needs a number")) };
    match v.parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        Ok(n) => usage(format!("{flag} {n}: must be at least {min}")),
        Err(_) => usage(format!("{flag} `{v}`: not a number")),
    }
}

fn parse_args(args: &[String]) -> Result<Settings, CliError> {
    let mut base = Params { size: 500, heavy_mults: 100, mults: 32, thieves: 2, workers: None, imbalanced: false };
    let mut runs = 5;
    let mut variants = all_variants();
    let mut topo_spec = "detect".to_string();
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
                Some(v) => variants = parse_variants(v)?,
                None => return usage("--policy needs a value"),
            },
            "--topology" => match it.next() {
                Some(v) => topo_spec = v.clone(),
                None => return usage("--topology needs a value"),
            },
            "--workers" => base.workers = Some(parse_num(a, it.next(), 1)?),
            "--mults" => base.mults = parse_num(a, it.next(), 1)?,
            "--thieves" => base.thieves = parse_num(a, it.next(), 0)?,
            "--size" => base.size = parse_num(a, it.next(), 1)?,
            "--heavy-mults" => base.heavy_mults = parse_num(a, it.next(), 1)?,
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
                    Some("all") => vec![Sweep::Queue, Sweep::Heavy, Sweep::Workers],
                    Some(other) => return usage(format!("unknown sweep `{other}`: use none, queue, heavy, workers or all")),
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
        // Small enough for CI, big enough that steals happen.
        if !explicit.contains("--size") {
            base.size = 128;
        }
        if !explicit.contains("--heavy-mults") {
            base.heavy_mults = 60;
        }
        if !explicit.contains("--mults") {
            base.mults = 16;
        }
        if !explicit.contains("--runs") {
            runs = 3;
        }
        if !sweep_given {
            sweeps = vec![Sweep::Queue, Sweep::Heavy, Sweep::Workers];
        }
    }
    let topology = Topology::parse(&topo_spec).map_err(|e| CliError::Usage(format!("--topology {topo_spec}: {e}")))?;
    if let Some(w) = base.workers {
        if w > 4 * topology.num_pus().max(1) * 16 {
            return usage(format!("--workers {w}: far more than the {} PUs of the topology", topology.num_pus()));
        }
    }
    if let Some(dir) = &out {
        check_writable(dir)?;
    }
    Ok(Settings { base, runs, variants, topology, balance, sweeps, out, quick })
}

pub fn check_writable(dir: &Path) -> Result<(), CliError> {
    let probe = dir.join(".thesis_bench_write_test");
    let r = fs::create_dir_all(dir).and_then(|_| fs::write(&probe, b"ok")).and_then(|_| fs::remove_file(&probe));
    r.map_err(|e| CliError::Usage(format!("--out {}: cannot write there ({e})", dir.display())))
}

// ---------------------------------------------------------------------------
// The workload.

type Matrix = Vec<f64>;

fn generate(n: usize, seed: u64) -> Matrix {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n * n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 11) as f64 / (1u64 << 53) as f64
        })
        .collect()
}

fn multiply(a: &[f64], b: &[f64], n: usize) -> Matrix {
    let mut c = vec![0.0; n * n];
    for i in 0..n {
        let ci = &mut c[i * n..(i + 1) * n];
        for k in 0..n {
            let aik = a[i * n + k];
            for (cij, bkj) in ci.iter_mut().zip(&b[k * n..(k + 1) * n]) {
                *cij += aik * bkj;
            }
        }
    }
    c
}

/// What one run measured.
#[derive(Debug, Clone, Copy)]
pub struct RunResult {
    pub secs: f64,
    pub fibers: u64,
    pub local_steals: u64,
    pub remote_steals: u64,
}

pub fn build_runtime(topology: &Topology, v: &Variant, workers: Option<usize>) -> Result<Runtime, String> {
    let mut b = Runtime::builder().topology(topology.clone()).policy(v.policy).policy_options(v.opts);
    if let Some(w) = workers {
        b = b.workers(w);
    }
    b.build().map_err(|e| e.to_string())
}

/// One run of `start_work` on a fresh runtime.
pub fn run_once(topology: &Topology, v: &Variant, p: Params, seed: u64) -> Result<RunResult, String> {
    let rt = build_runtime(topology, v, p.workers)?;
    let n = p.size;
    let t0 = Instant::now();
    // Matrix generation fibers, awaited before the multiplications start.
    let gens: Vec<_> = (0..2).map(|i| rt.spawn(move || generate(n, seed * 2 + i))).collect();
    let mut mats = gens.into_iter().map(|h| h.join().map_err(|e| e.to_string()));
    let a = Arc::new(mats.next().expect("two")?);
    let b = Arc::new(mats.next().expect("two")?);
    let mut hs = Vec::with_capacity(p.mults + p.thieves);
    for i in 0..p.mults.max(p.thieves) {
        if i < p.mults {
            let (a, b) = (a.clone(), b.clone());
            let imb = p.imbalanced;
            hs.push(rt.spawn(move || {
                let on_node0 = fiber::current().is_some_and(|f| f.node == 0);
                let reps = if imb && on_node0 { 3 } else { 1 };
                for _ in 0..reps {
                    std::hint::black_box(multiply(&a, &b, n));
                }
            }));
        }
        if i < p.thieves {
            let (a, b) = (a.clone(), b.clone());
            let heavy = p.heavy_mults;
            hs.push(rt.spawn(move || {
                let h = fiber::spawn(move || {
                    for _ in 0..heavy {
                        std::hint::black_box(multiply(&a, &b, n));
                    }
                });
                fiber::await_fiber(h)
            }));
        }
    }
    for h in hs {
        h.join().map_err(|e| e.to_string())?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let s = rt.stats();
    rt.shutdown();
    Ok(RunResult { secs, fibers: s.spawned, local_steals: s.local_steals, remote_steals: s.remote_steals })
}

// ---------------------------------------------------------------------------
// Statistics and reporting.

#[derive(Debug, Clone)]
pub struct Summary {
    pub scenario: String,
    pub param: &'static str,
    pub value: usize,
    pub variant: &'static str,
    pub runs: Vec<RunResult>,
    pub median_s: f64,
    pub cv: f64,
    pub throughput: f64,
    pub local_steals: u64,
    pub remote_steals: u64,
}

fn median_f(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn median_u(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

pub fn summarize(scenario: &str, param: &'static str, value: usize, variant: &'static str, runs: Vec<RunResult>) -> Summary {
    let mut t: Vec<f64> = runs.iter().map(|r| r.secs).collect();
    let mean = t.iter().sum::<f64>() / t.len() as f64;
    let var = t.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / t.len() as f64;
    let cv = if mean > 0.0 { var.sqrt() / mean } else { 0.0 };
    let median_s = median_f(&mut t);
    let fibers = runs.first().map_or(0, |r| r.fibers);
    let mut ls: Vec<u64> = runs.iter().map(|r| r.local_steals).collect();
    let mut rs: Vec<u64> = runs.iter().map(|r| r.remote_steals).collect();
    Summary {
        scenario: scenario.to_string(),
        param,
        value,
        variant,
        median_s,
        cv,
        throughput: if median_s > 0.0 { fibers as f64 / median_s } else { 0.0 },
        local_steals: median_u(&mut ls),
        remote_steals: median_u(&mut rs),
        runs,
    }
}

pub fn remote_ratio(s: &Summary) -> f64 {
    let all = s.local_steals + s.remote_steals;
    if all == 0 {
        0.0
    } else {
        s.remote_steals as f64 / all as f64
    }
}

pub fn print_table(rows: &[Summary]) {
    let Some(first) = rows.first() else { return };
    let rr = rows.iter().find(|r| r.variant == "rr").map(|r| r.median_s);
    println!("\n{}  {}={}", first.scenario, first.param, first.value);
    println!(
        "  {:<15} {:>10} {:>7} {:>12} {:>8} {:>8} {:>7} {:>10}",
        "policy", "median s", "cv %", "fibers/s", "local", "remote", "remote%", "vs rr"
    );
    for r in rows {
        let vs = match rr {
            Some(rr) if r.variant != "rr" && rr > 0.0 => format!("{:+.1}%", (rr - r.median_s) / rr * 100.0),
            _ => "-".into(),
        };
        println!(
            "  {:<15} {:>10.4} {:>7.2} {:>12.1} {:>8} {:>8} {:>7.1} {:>10}",
            r.variant,
            r.median_s,
            r.cv * 100.0,
            r.throughput,
            r.local_steals,
            r.remote_steals,
            remote_ratio(r) * 100.0,
            vs
        );
    }
}

pub fn write_csvs(dir: &Path, all: &[Summary]) -> std::io::Result<()> {
    let mut s = String::from("scenario,param,value,policy,runs,median_s,cv,throughput,local_steals,remote_steals\n");
    let mut r = String::from("scenario,param,value,policy,run,secs,fibers,local_steals,remote_steals\n");
    for x in all {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{:.6},{:.6},{:.3},{},{}",
            x.scenario,
            x.param,
            x.value,
            x.variant,
            x.runs.len(),
            x.median_s,
            x.cv,
            x.throughput,
            x.local_steals,
            x.remote_steals
        );
        for (i, run) in x.runs.iter().enumerate() {
            let _ = writeln!(
                r,
                "{},{},{},{},{},{:.6},{},{},{}",
                x.scenario, x.param, x.value, x.variant, i, run.secs, run.fibers, run.local_steals, run.remote_steals
            );
        }
    }
    fs::write(dir.join("summary.csv"), s)?;
    fs::write(dir.join("runs.csv"), r)
}

// ---------------------------------------------------------------------------
// Plots.

pub mod plot {
    use super::{remote_ratio, Summary};
    use plotters::prelude::*;
    use std::path::Path;

    type DrawResult = Result<(), Box<dyn std::error::Error>>;

    const COLORS: [RGBColor; 9] = [
        RGBColor(0, 0, 0),
        RGBColor(230, 159, 0),
        RGBColor(86, 180, 233),
        RGBColor(0, 158, 115),
        RGBColor(213, 94, 0),
        RGBColor(204, 121, 167),
        RGBColor(0, 114, 178),
        RGBColor(120, 120, 120),
        RGBColor(200, 30, 30),
    ];

    /// One panel: x = swept value, one line per policy.
    fn panel<DB: DrawingBackend>(
        area: &DrawingArea<DB, plotters::coord::Shift>,
        title: &str,
        xdesc: &str,
        ydesc: &str,
        rows: &[&Summary],
        variants: &[&'static str],
        y: &dyn Fn(&Summary) -> f64,
    ) -> DrawResult
    where
        DB::ErrorType: 'static,
    {
        let xs: Vec<f64> = rows.iter().map(|r| r.value as f64).collect();
        let (x0, x1) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
        let (x0, x1) = if x0 == x1 { (x0 - 1.0, x1 + 1.0) } else { (x0, x1) };
        let ymax = rows.iter().map(|r| y(r)).fold(0.0f64, f64::max).max(1e-9) * 1.1;
        let mut chart = ChartBuilder::on(area)
            .caption(title, ("sans-serif", 16))
            .margin(8)
            .x_label_area_size(35)
            .y_label_area_size(60)
            .build_cartesian_2d(x0..x1, 0.0..ymax)?;
        chart.configure_mesh().x_desc(xdesc).y_desc(ydesc).draw()?;
        for (i, v) in variants.iter().enumerate() {
            let mut pts: Vec<(f64, f64)> =
                rows.iter().filter(|r| r.variant == *v).map(|r| (r.value as f64, y(r))).collect();
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            let c = COLORS[i % COLORS.len()];
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(2)))?
                .label(*v)
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], c.stroke_width(2)));
            chart.draw_series(pts.into_iter().map(|p| Circle::new(p, 3, c.filled())))?;
        }
        chart.configure_series_labels().background_style(WHITE.mix(0.85)).border_style(BLACK).draw()?;
        Ok(())
    }

    /// Time, throughput and steals figures for one sweep, each with a
    /// balanced and an imbalanced panel. Returns the files written.
    pub fn figures(
        dir: &Path,
        names: [&str; 3],
        scenario: &str,
        param: &str,
        all: &[Summary],
        variants: &[&'static str],
    ) -> Result<Vec<std::path::PathBuf>, Box<dyn std::error::Error>> {
        let panels: Vec<(String, Vec<&Summary>)> = ["balanced", "imbalanced"]
            .iter()
            .map(|b| {
                let sc = format!("{scenario}/{b}");
                (b.to_string(), all.iter().filter(|r| r.scenario == sc).collect::<Vec<_>>())
            })
            .filter(|(_, rows)| !rows.is_empty())
            .collect();
        let mut files = Vec::new();
        type Metric<'a> = (&'a str, &'a str, &'a dyn Fn(&Summary) -> f64);
        let metrics: [Metric; 2] = [
            ("median execution time", "seconds", &|r: &Summary| r.median_s),
            ("median throughput", "fibers / s", &|r: &Summary| r.throughput),
        ];
        for (k, (what, unit, f)) in metrics.iter().enumerate() {
            let path = dir.join(format!("{}_{}_{}.svg", names[k], scenario, if k == 0 { "time" } else { "throughput" }));
            let root = SVGBackend::new(&path, (640 * panels.len() as u32, 420)).into_drawing_area();
            root.fill(&WHITE)?;
            let areas = root.split_evenly((1, panels.len()));
            for (area, (b, rows)) in areas.iter().zip(&panels) {
                panel(area, &format!("{what}, {b}"), param, unit, rows, variants, *f)?;
            }
            root.present()?;
            drop(areas);
            drop(root);
            files.push(path);
        }
        let path = dir.join(format!("{}_{}_steals.svg", names[2], scenario));
        let root = SVGBackend::new(&path, (640 * panels.len() as u32, 780)).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((2, panels.len()));
        for (i, (b, rows)) in panels.iter().enumerate() {
            panel(&areas[i], &format!("total steals, {b}"), param, "steals (median)", rows, variants, &|r: &Summary| {
                (r.local_steals + r.remote_steals) as f64
            })?;
            panel(&areas[panels.len() + i], &format!("remote-steal ratio, {b}"), param, "remote / all steals", rows, variants, &|r: &Summary| remote_ratio(r))?;
        }
        root.present()?;
        drop(areas);
        drop(root);
        files.push(path);
        Ok(files)
    }
}

// ---------------------------------------------------------------------------
// Driver.

fn sweep_values(s: Sweep, settings: &Settings) -> Vec<usize> {
    let quick = settings.quick;
    match s {
        Sweep::Queue => {
            if quick {
                vec![8, 16, 32]
            } else {
                vec![8, 16, 32, 64, 128]
            }
        }
        Sweep::Heavy => {
            if quick {
                vec![1, 2, 4]
            } else {
                vec![1, 2, 4, 8]
            }
        }
        Sweep::Workers => {
            let max = settings.topology.num_pus().max(1);
            let mut v: Vec<usize> = std::iter::successors(Some(1usize), |x| Some(x * 2)).take_while(|&x| x <= max).collect();
            if v.last() != Some(&max) {
                v.push(max);
            }
            v
        }
    }
}

/// Run every variant at one point; returns the summaries in variant order.
fn run_point(settings: &Settings, scenario: &str, param: &'static str, value: usize, p: Params, progress: &mut Progress) -> Result<Vec<Summary>, String> {
    let mut out = Vec::new();
    for v in &settings.variants {
        let mut runs = Vec::new();
        for run in 0..settings.runs {
            let r = run_once(&settings.topology, v, p, run as u64 + 1)?;
            progress.tick(&format!("{scenario} {param}={value} {} run {}/{}: {:.3}s", v.name, run + 1, settings.runs, r.secs));
            runs.push(r);
        }
        out.push(summarize(scenario, param, value, v.name, runs));
    }
    Ok(out)
}

struct Progress {
    done: usize,
    total: usize,
    t0: Instant,
}

impl Progress {
    fn tick(&mut self, what: &str) {
        self.done += 1;
        let _ = writeln!(std::io::stderr(), "[{}/{} {:.0}s] {what}", self.done, self.total, self.t0.elapsed().as_secs_f64());
    }
}

pub fn run_cli(args: &[String]) -> Result<(), CliError> {
    let settings = parse_args(args)?;
    let per_point = settings.variants.len() * settings.runs;
    let mut points = 0;
    if settings.sweeps.is_empty() {
        points += settings.balance.len();
    }
    for &s in &settings.sweeps {
        points += sweep_values(s, &settings).len() * settings.balance.len();
    }
    let b = settings.base;
    println!(
        "thesis_bench: topology {} ({} nodes, {} PUs{}), workers {}, size {}, heavy-mults {}, runs {}, policies {}",
        settings.topology.description(),
        settings.topology.num_nodes(),
        settings.topology.num_pus(),
        if settings.topology.has_distance_matrix() { "" } else { ", default 10/20 distances" },
        b.workers.map_or("one per PU".to_string(), |w| w.to_string()),
        b.size,
        b.heavy_mults,
        settings.runs,
        settings.variants.iter().map(|v| v.name).collect::<Vec<_>>().join(",")
    );
    let mut progress = Progress { done: 0, total: points * per_point, t0: Instant::now() };
    let mut all = Vec::new();
    let fail = |e: String| CliError::Usage(format!("benchmark run failed: {e}"));
    if settings.sweeps.is_empty() {
        for &imb in &settings.balance {
            let p = Params { imbalanced: imb, ..b };
            let sc = format!("default/{}", if imb { "imbalanced" } else { "balanced" });
            let rows = run_point(&settings, &sc, "mults", b.mults, p, &mut progress).map_err(fail)?;
            print_table(&rows);
            all.extend(rows);
        }
    }
    for &s in &settings.sweeps {
        for &imb in &settings.balance {
            for value in sweep_values(s, &settings) {
                let mut p = Params { imbalanced: imb, ..b };
                match s {
                    Sweep::Queue => p.mults = value,
                    Sweep::Heavy => p.thieves = value,
                    Sweep::Workers => p.workers = Some(value),
                }
                let sc = format!("{}/{}", s.scenario(), if imb { "imbalanced" } else { "balanced" });
                let rows = run_point(&settings, &sc, s.param(), value, p, &mut progress).map_err(fail)?;
                print_table(&rows);
                all.extend(rows);
            }
        }
    }
    if let Some(dir) = &settings.out {
        write_csvs(dir, &all).map_err(|e| CliError::Usage(format!("--out {}: {e}", dir.display())))?;
        let names: Vec<&'static str> = settings.variants.iter().map(|v| v.name).collect();
        let mut files = vec![dir.join("summary.csv"), dir.join("runs.csv")];
        for &s in &settings.sweeps {
            let f = plot::figures(dir, s.figures(), s.scenario(), s.param(), &all, &names)
                .map_err(|e| CliError::Usage(format!("--out {}: plotting failed: {e}", dir.display())))?;
            files.extend(f);
        }
        println!("\nwrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    Ok(())
}
