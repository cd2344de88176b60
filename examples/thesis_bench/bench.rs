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
//!   With `--deterministic` the thieves first wait until the main thread
//!   has spawned everything, so that their heavy spawns no longer race the
//!   main thread's spawns for the round-robin counter.
//! * Results go through `std::hint::black_box` (corolib's
//!   `do_not_optimize`).
//! * The kernel is faster than the thesis' naive triple loop over nested
//!   `std::vector`s: one flat `Vec<f64>` per matrix and the i-k-j loop order,
//!   which the compiler vectorises. It does the same arithmetic.
//!
//! # Metrics
//!
//! * Wall time: median over `--runs` runs with an order-statistic
//!   confidence interval (distribution-free, coverage printed), the
//!   coefficient of variation (stability) with a bootstrap interval (fixed
//!   seed), throughput (fibers of one run / median time), local and remote
//!   steals (medians over runs) and the remote-steal ratio.
//! * **Work units**, which machine noise cannot move: a single
//!   multiplication counts 1 (3 when it runs on node 0 of an imbalanced
//!   scenario), a heavy fiber `--heavy-mults`. The *unit makespan* of a run
//!   is the most units any worker executed; the *bound* is the smallest unit
//!   makespan any schedule of the same fibers can reach (exact, by dynamic
//!   programming over the workers). Each worker's CPU time
//!   (`CLOCK_THREAD_CPUTIME_ID`) and where every heavy fiber ran are
//!   recorded too.

use std::fmt::Write as _;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::sim::{simulate, CostModel, MatrixParams, SimConfig, Workload};
use numafiber::sync::Event;
use numafiber::{fiber, Policy, PolicyOptions, Runtime, Topology};

pub const USAGE_LINE: &str =
    "usage: thesis_bench [--policy all|NAME[,NAME..]] [--topology auto|detect|uniform:NxP|synthetic:DESC|xml:PATH] \
[--workers N] [--mults N] [--thieves N] [--size N] [--heavy-mults N] [--runs N] [--imbalanced|--balanced|--both] \
[--deterministic] [--no-sim] [--sweep none|queue|heavy|workers|all] [--out DIR] [--verbose] [--quick] [--help]";

pub const USAGE: &str =
    "thesis_bench: the thesis' scheduler benchmark (section 5.1) on this machine or a described topology

Without --mults/--thieves/--sweep it runs the default scenarios, where stealing matters
(long queues, with and without thieves), and prints a short answer: per policy its work
units and wall time against round-robin (better / worse / inside the noise), and a verdict
against the thesis' 38.88 % (stealing vs round-robin) and 40.59 % (NLH's stability). Before
it starts it prints an estimate of its running time, from one multiplication measured on
every worker at once and the simulator's schedule of every run.

A work unit is one matrix multiplication (3 units on node 0 of an imbalanced scenario);
a run's units are the most any one worker executed: fewer is better. The machine's load
moves units far less than wall times: on a loaded machine trust the units.

options:
  --policy P        all (default) or a comma list of: rr, random, numa, load, hybrid, nlh,
                    nlh+decrement, nlh+cpu-node, nlh+work-first (the beyond-the-thesis switches)
  --topology T      auto (default: the detected machine, or uniform:2xP/2 when it has one NUMA node)
                    | detect | uniform:NxP | synthetic:\"pack:2 numa:1 core:2 pu:1\" | xml:PATH
  --workers N       worker threads (default: one per PU of the topology)
  --mults N         single-multiplication fibers, the queue length (default scenarios: 32 and
                    256 per worker; with --mults or --thieves one scenario, default 32)
  --thieves N       thief fibers, each awaiting one heavy fiber (default scenarios: 0 and one
                    per worker; with --mults or --thieves one scenario, default 2)
  --size N          matrix size (default 160; the thesis used 500: same units, 30x the time)
  --heavy-mults N   multiplications of one heavy fiber (default 100, the thesis')
  --runs N          runs per point, for the medians, intervals and CVs (default 10, at most 1000)
  --imbalanced      only the imbalanced scenario (node 0 multiplies 3x; the default scenarios' default)
  --balanced        only the balanced scenario
  --both            both (the sweeps' and --mults/--thieves' default)
  --deterministic   thieves spawn their heavy fibers only after the main thread spawned
                    everything (no race for the round-robin counter)
  --no-sim          skip the latency calibration and the simulator comparison
  --sweep S         none (default) | queue | heavy | workers | all: reproduce figures 5.1-5.9
  --out DIR         write summary.csv, runs.csv, verdict.txt and the SVG figures into DIR
                    (nothing is written without it)
  --verbose         also print the detailed tables (17 columns, with a legend), where the heavy
                    fibers ran, each worker's CPU share and the simulator's units beside the real ones
  --quick           small sizes and a short sweep of everything, for CI
";

/// The thesis' figures the verdict compares against.
pub const THESIS_STEAL_GAIN: f64 = 0.3888;
pub const THESIS_NLH_CV_GAIN: f64 = 0.4059;
/// The thesis' stealing strategies (4.3-4.4): what its 38.88 % averages.
pub const THESIS_STEALERS: [&str; 4] = ["numa", "load", "hybrid", "nlh"];

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
    v.push(Variant {
        name: "nlh+decrement",
        policy: Policy::Nlh,
        opts: PolicyOptions { decrement_workload: true, ..thesis },
    });
    v.push(Variant {
        name: "nlh+cpu-node",
        policy: Policy::Nlh,
        opts: PolicyOptions { spawner_node_from_cpu: true, ..thesis },
    });
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
    /// Thieves spawn their heavy fibers after the main thread's last spawn.
    pub deterministic: bool,
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
    /// Why the topology is not the machine's, for the header.
    topology_note: Option<String>,
    balance: Vec<bool>,
    sweeps: Vec<Sweep>,
    /// No --mults/--thieves given: the default scenarios.
    default_scenarios: bool,
    sim: bool,
    out: Option<PathBuf>,
    quick: bool,
    /// Print the detailed tables too.
    verbose: bool,
}

pub fn parse_num(flag: &str, v: Option<&String>, min: usize) -> Result<usize, CliError> {
    let Some(v) = v else { return usage(format!("{flag} needs a number")) };
    match v.parse::<usize>() {
        Ok(n) if n >= min => Ok(n),
        Ok(n) => usage(format!("{flag} {n}: must be at least {min}")),
        Err(_) => usage(format!("{flag} `{v}`: not a number")),
    }
}

/// `auto`: the detected machine, or a synthetic 2-node machine over the
/// same PUs when it has one NUMA node (the thesis' question needs two).
fn auto_topology() -> Result<(Topology, Option<String>), String> {
    let t = Topology::detect().map_err(|e| e.to_string())?;
    if t.num_nodes() >= 2 {
        return Ok((t, None));
    }
    let per = (t.num_pus() / 2).max(1);
    let spec = format!("uniform:2x{per}");
    let synth = Topology::parse(&spec).map_err(|e| e.to_string())?;
    let note = format!(
        "this machine has 1 NUMA node ({} PUs): benchmarking on the synthetic 2-node topology {spec} \
         (node 0 = the first {per} PU(s); --topology detect for the machine as it is)",
        t.num_pus()
    );
    Ok((synth, Some(note)))
}

fn parse_args(args: &[String]) -> Result<Settings, CliError> {
    let mut base = Params {
        size: 160,
        heavy_mults: 100,
        mults: 32,
        thieves: 2,
        workers: None,
        imbalanced: false,
        deterministic: false,
    };
    let mut runs = 10;
    let mut variants = all_variants();
    let mut topo_spec = "auto".to_string();
    let mut balance = vec![true, false];
    let mut balance_given = false;
    let mut sweeps = Vec::new();
    let mut sweep_given = false;
    let mut out = None;
    let mut quick = false;
    let mut verbose = false;
    let mut sim = true;
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
            "--runs" => {
                runs = parse_num(a, it.next(), 1)?;
                if runs > 1000 {
                    return usage(format!("--runs {runs}: at most 1000"));
                }
            }
            "--imbalanced" => (balance, balance_given) = (vec![true], true),
            "--balanced" => (balance, balance_given) = (vec![false], true),
            "--both" => (balance, balance_given) = (vec![true, false], true),
            "--deterministic" => base.deterministic = true,
            "--no-sim" => sim = false,
            "--sweep" => {
                sweep_given = true;
                sweeps = match it.next().map(String::as_str) {
                    Some("none") => vec![],
                    Some("queue") => vec![Sweep::Queue],
                    Some("heavy") => vec![Sweep::Heavy],
                    Some("workers") => vec![Sweep::Workers],
                    Some("all") => vec![Sweep::Queue, Sweep::Heavy, Sweep::Workers],
                    Some(other) => {
                        return usage(format!("unknown sweep `{other}`: use none, queue, heavy, workers or all"))
                    }
                    None => return usage("--sweep needs a value"),
                }
            }
            "--out" => match it.next() {
                Some(v) => out = Some(PathBuf::from(v)),
                None => return usage("--out needs a directory"),
            },
            "--quick" => quick = true,
            "-v" | "--verbose" => verbose = true,
            other => return usage(format!("unknown argument `{other}`")),
        }
        explicit.insert(a.clone());
    }
    if base.size > 4096 {
        return usage(format!("--size {}: at most 4096 (a multiplication would take minutes)", base.size));
    }
    if quick {
        // Small enough for CI, big enough that steals happen.
        if !explicit.contains("--size") {
            base.size = 96;
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
    let (topology, topology_note) = if topo_spec == "auto" {
        auto_topology().map_err(|e| CliError::Usage(format!("--topology auto: {e}")))?
    } else {
        let t = Topology::parse(&topo_spec).map_err(|e| CliError::Usage(format!("--topology {topo_spec}: {e}")))?;
        (t, None)
    };
    if let Some(w) = base.workers {
        if w > 4 * topology.num_pus().max(1) * 16 {
            return usage(format!("--workers {w}: far more than the {} PUs of the topology", topology.num_pus()));
        }
    }
    if let Some(dir) = &out {
        check_writable(dir)?;
    }
    let default_scenarios = sweeps.is_empty() && !explicit.contains("--mults") && !explicit.contains("--thieves");
    if default_scenarios && !balance_given {
        // With one worker per node the balanced workload leaves stealing
        // nothing to do but undo the spawn race (round-robin's split is the
        // bound): the default scenarios are the imbalanced ones.
        balance = vec![true];
    }
    Ok(Settings {
        base,
        runs,
        variants,
        topology,
        topology_note,
        balance,
        sweeps,
        default_scenarios,
        sim,
        out,
        quick,
        verbose,
    })
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
#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunResult {
    pub secs: f64,
    pub fibers: u64,
    pub local_steals: u64,
    pub remote_steals: u64,
    /// Work units each worker executed: 1 a single multiplication (3 on
    /// node 0 when imbalanced), `heavy_mults` a heavy fiber.
    pub units: Vec<u64>,
    /// CPU seconds of each worker thread (`CLOCK_THREAD_CPUTIME_ID`) at the
    /// end of the run; empty where not measured (the simulator).
    pub cpu_s: Vec<f64>,
    /// The worker every heavy fiber ran on, in thief order.
    pub heavy_workers: Vec<usize>,
}

impl RunResult {
    /// The most units any worker executed.
    pub fn units_makespan(&self) -> u64 {
        self.units.iter().copied().max().unwrap_or(0)
    }
}

/// The smallest unit makespan any schedule of the fiber set can reach:
/// `singles` single multiplications (1 unit, 3 on a worker with
/// `slow[w]` when `imbalanced`) and `heavies` heavy fibers of
/// `heavy_units` each, every fiber run whole by one worker. Exact (binary
/// search on the makespan, dynamic programming over the workers for the
/// heavies); thieves and matrix generation count 0.
pub fn units_bound(slow: &[bool], singles: usize, heavies: usize, heavy_units: u64, imbalanced: bool) -> u64 {
    if slow.is_empty() || (singles == 0 && heavies == 0) {
        return 0;
    }
    let cost: Vec<u64> = slow.iter().map(|&s| if imbalanced && s { 3 } else { 1 }).collect();
    let s = singles as u64;
    let feasible = |t: u64| -> bool {
        // best[j]: most singles the workers seen so far can take beside j heavies.
        let mut best: Vec<Option<u64>> = vec![None; heavies + 1];
        best[0] = Some(0);
        for &c in &cost {
            let mut next: Vec<Option<u64>> = vec![None; heavies + 1];
            for j in 0..=heavies {
                let Some(b) = best[j] else { continue };
                let mut k = 0usize;
                while j + k <= heavies {
                    let used = (k as u64).saturating_mul(heavy_units);
                    if used > t {
                        break;
                    }
                    let cap = b.saturating_add((t - used) / c);
                    if next[j + k].is_none_or(|x| x < cap) {
                        next[j + k] = Some(cap);
                    }
                    k += 1;
                }
            }
            best = next;
        }
        best[heavies].is_some_and(|b| b >= s)
    };
    // Everything on one slow worker is always a schedule.
    let (mut lo, mut hi) = (0u64, s.saturating_mul(3).saturating_add((heavies as u64).saturating_mul(heavy_units)));
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if feasible(mid) {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    lo
}

pub fn build_runtime(topology: &Topology, v: &Variant, workers: Option<usize>) -> Result<Runtime, String> {
    // The benchmark's fibers are compute units that run for tens of
    // milliseconds by design, and the policies are measured as the thesis
    // defines them: no stall monitor (its reports and its hand-over of a
    // held worker's queue to idle workers would change what is measured).
    let mut b =
        Runtime::builder().topology(topology.clone()).policy(v.policy).policy_options(v.opts).stall_threshold(None);
    if let Some(w) = workers {
        b = b.workers(w);
    }
    b.build().map_err(|e| e.to_string())
}

/// CPU time of the calling thread in seconds (NaN if the clock fails).
fn thread_cpu_s() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes one timespec through a valid, exclusive pointer.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// The node of every worker of `rt`, in worker order.
fn worker_nodes(rt: &Runtime) -> Vec<usize> {
    rt.stats().workers.iter().map(|w| w.node).collect()
}

/// One run of `start_work` on a fresh runtime.
pub fn run_once(topology: &Topology, v: &Variant, p: Params, seed: u64) -> Result<RunResult, String> {
    let rt = build_runtime(topology, v, p.workers)?;
    let nw = worker_nodes(&rt).len();
    let units: Arc<Vec<AtomicU64>> = Arc::new((0..nw).map(|_| AtomicU64::new(0)).collect());
    let heavy_at: Arc<Vec<AtomicUsize>> = Arc::new((0..p.thieves).map(|_| AtomicUsize::new(usize::MAX)).collect());
    let gate = p.deterministic.then(|| Arc::new(Event::new()));
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
            let (a, b, units) = (a.clone(), b.clone(), units.clone());
            let imb = p.imbalanced;
            hs.push(rt.spawn(move || {
                let me = fiber::current();
                let on_node0 = me.as_ref().is_some_and(|f| f.node == 0);
                let reps = if imb && on_node0 { 3 } else { 1 };
                for _ in 0..reps {
                    std::hint::black_box(multiply(&a, &b, n));
                }
                if let Some(f) = me {
                    units[f.worker].fetch_add(reps, Relaxed);
                }
            }));
        }
        if i < p.thieves {
            let (a, b, units, heavy_at) = (a.clone(), b.clone(), units.clone(), heavy_at.clone());
            let heavy = p.heavy_mults;
            let gate = gate.clone();
            hs.push(rt.spawn(move || {
                if let Some(g) = &gate {
                    g.wait();
                }
                let h = fiber::spawn(move || {
                    for _ in 0..heavy {
                        std::hint::black_box(multiply(&a, &b, n));
                    }
                    if let Some(f) = fiber::current() {
                        units[f.worker].fetch_add(heavy as u64, Relaxed);
                        heavy_at[i].store(f.worker, Relaxed);
                    }
                });
                fiber::await_fiber(h)
            }));
        }
    }
    if let Some(g) = &gate {
        g.set();
    }
    for h in hs {
        h.join().map_err(|e| e.to_string())?;
    }
    let secs = t0.elapsed().as_secs_f64();
    let s = rt.stats();
    let mut cpu_s = Vec::with_capacity(nw);
    for w in 0..nw {
        let h = fiber::Builder::new().worker(w).spawn_on(&rt, thread_cpu_s).map_err(|e| e.to_string())?;
        cpu_s.push(h.join().map_err(|e| e.to_string())?);
    }
    rt.shutdown();
    Ok(RunResult {
        secs,
        fibers: s.spawned,
        local_steals: s.local_steals,
        remote_steals: s.remote_steals,
        units: units.iter().map(|u| u.load(Relaxed)).collect(),
        cpu_s,
        heavy_workers: heavy_at.iter().map(|h| h.load(Relaxed)).collect(),
    })
}

/// The real runtime's costs, measured for the simulator.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Calibration {
    /// One `size x size` multiplication on a worker (median of 5), ns.
    pub mult_ns: u64,
    /// One `fiber::spawn` from a worker, charged to the spawner (mean of 2000), ns.
    pub spawn_ns: u64,
    /// From a spawn on the main thread to the fiber running on a parked
    /// worker (median of 31), ns: the simulator's wake-up latency.
    pub wake_ns: u64,
}

/// Measure [`Calibration`] on `topology` (round-robin runtime).
pub fn calibrate(topology: &Topology, workers: Option<usize>, size: usize) -> Result<Calibration, String> {
    let rr = Variant { name: "rr", policy: Policy::RoundRobin, opts: PolicyOptions::default() };
    let rt = build_runtime(topology, &rr, workers)?;
    let nw = worker_nodes(&rt).len();
    let (a, b) = (Arc::new(generate(size, 1)), Arc::new(generate(size, 2)));
    let mult_ns = rt
        .spawn(move || {
            let mut t: Vec<f64> = (0..5)
                .map(|_| {
                    let t0 = Instant::now();
                    std::hint::black_box(multiply(&a, &b, size));
                    t0.elapsed().as_nanos() as f64
                })
                .collect();
            median_f(&mut t)
        })
        .join()
        .map_err(|e| e.to_string())? as u64;
    let spawn_ns = rt
        .spawn(|| {
            const N: u32 = 2000;
            let t0 = Instant::now();
            let hs: Vec<_> = (0..N).map(|_| fiber::spawn(|| ())).collect();
            let dt = t0.elapsed();
            hs.into_iter().for_each(fiber::await_fiber);
            (dt / N).as_nanos() as u64
        })
        .join()
        .map_err(|e| e.to_string())?;
    let mut wake: Vec<f64> = Vec::with_capacity(31);
    for _ in 0..31 {
        // Long enough for the worker to stop spinning and park.
        std::thread::sleep(Duration::from_millis(2));
        let t0 = Instant::now();
        let h = fiber::Builder::new().worker(nw - 1).spawn_on(&rt, Instant::now).map_err(|e| e.to_string())?;
        let started = h.join().map_err(|e| e.to_string())?;
        wake.push(started.saturating_duration_since(t0).as_nanos() as f64);
    }
    rt.shutdown();
    Ok(Calibration { mult_ns: mult_ns.max(1), spawn_ns, wake_ns: median_f(&mut wake) as u64 })
}

/// The simulator on the same configuration: per seed, the unit makespan
/// (nominal work / one multiplication's cost) and the steals.
pub fn simulate_units(
    topology: &Topology,
    v: &Variant,
    p: Params,
    cal: &Calibration,
    runs: usize,
) -> Result<Vec<RunResult>, String> {
    let mp = MatrixParams {
        mults: p.mults,
        thieves: p.thieves,
        heavy_mults: p.heavy_mults,
        imbalanced: p.imbalanced,
        mult_ns: cal.mult_ns,
        ..MatrixParams::for_size(p.size)
    };
    let wl = Workload::matrix(&mp);
    let cost = CostModel { wake_ns: cal.wake_ns, spawn_ns: cal.spawn_ns, ..CostModel::default() };
    (1..=runs as u64)
        .map(|seed| {
            let cfg =
                SimConfig { workers: p.workers, ..SimConfig::new(v.policy).options(v.opts).seed(seed).cost(cost) };
            let r = simulate(topology, &cfg, &wl).map_err(|e| e.to_string())?;
            Ok(RunResult {
                secs: r.makespan_s(),
                fibers: r.spawned,
                local_steals: r.local_steals,
                remote_steals: r.remote_steals,
                units: r.workers.iter().map(|w| (w.nominal_ns as f64 / cal.mult_ns as f64).round() as u64).collect(),
                cpu_s: Vec::new(),
                heavy_workers: Vec::new(),
            })
        })
        .collect()
}

/// Whether a `/proc/loadavg` triple's 1-minute average exceeds `limit`.
fn load_is_high(load: &str, limit: f64) -> bool {
    load.split_whitespace().next().and_then(|x| x.parse::<f64>().ok()).is_some_and(|l| l > limit)
}

/// `4.2 s`, `42 s` or `3 min 5 s`.
pub fn fmt_duration(s: f64) -> String {
    if s < 9.95 {
        return format!("{:.1} s", s.max(0.0));
    }
    let s = s.round() as u64;
    if s < 60 {
        format!("{s} s")
    } else {
        format!("{} min {} s", s / 60, s % 60)
    }
}

// ---------------------------------------------------------------------------
// Statistics.

/// splitmix64, for the bootstrap (fixed seed: the same data give the same
/// intervals).
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn index(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

pub const BOOTSTRAP_SEED: u64 = 0x5EED_0016;
pub const BOOTSTRAP_REPS: usize = 2000;

fn median_f(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

fn median_u(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2
    }
}

/// Population coefficient of variation (0 for a zero mean).
pub fn cv(xs: &[f64]) -> f64 {
    if xs.is_empty() {
        return 0.0;
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
    if mean > 0.0 {
        var.sqrt() / mean
    } else {
        0.0
    }
}

/// Distribution-free confidence interval for the median: the order
/// statistics of ranks `k` and `n + 1 - k` for the largest `k` whose
/// coverage `1 - 2 P(Bin(n, 1/2) < k)` is at least 95 % (for fewer than 6
/// runs no `k` reaches 95 %: min and max, with their lower coverage).
/// Returns `(low, high, coverage)`.
pub fn median_ci(xs: &[f64]) -> (f64, f64, f64) {
    let n = xs.len();
    if n == 0 {
        return (0.0, 0.0, 0.0);
    }
    let mut v = xs.to_vec();
    v.sort_by(|a, b| a.total_cmp(b));
    // cdf[j] = P(Bin(n, 1/2) <= j)
    let mut pmf = 0.5f64.powi(n as i32);
    let mut cdf = Vec::with_capacity(n);
    let mut acc = 0.0;
    for i in 0..n {
        acc += pmf;
        cdf.push(acc);
        pmf = pmf * (n - i) as f64 / (i + 1) as f64;
    }
    let coverage = |k: usize| 1.0 - 2.0 * cdf[k - 1];
    let mut k = 1;
    while k < n / 2 && coverage(k + 1) >= 0.95 {
        k += 1;
    }
    (v[k - 1], v[n - k], coverage(k).max(0.0))
}

/// 95 % percentile interval of `stat` over bootstrap resamples of `xs`.
fn bootstrap(xs: &[f64], stat: &dyn Fn(&[f64]) -> f64) -> (f64, f64) {
    if xs.len() < 2 {
        let s = stat(xs);
        return (s, s);
    }
    let mut rng = SplitMix(BOOTSTRAP_SEED);
    let mut buf = vec![0.0; xs.len()];
    let mut reps: Vec<f64> = (0..BOOTSTRAP_REPS)
        .map(|_| {
            for b in buf.iter_mut() {
                *b = xs[rng.index(xs.len())];
            }
            stat(&buf)
        })
        .collect();
    percentile_interval(&mut reps)
}

fn percentile_interval(reps: &mut [f64]) -> (f64, f64) {
    reps.sort_by(|a, b| a.total_cmp(b));
    let n = reps.len();
    let at = |q: f64| reps[((q * (n - 1) as f64).round() as usize).min(n - 1)];
    (at(0.025), at(0.975))
}

fn resample_median(xs: &[f64], rng: &mut SplitMix, buf: &mut Vec<f64>) -> f64 {
    buf.clear();
    buf.extend((0..xs.len()).map(|_| xs[rng.index(xs.len())]));
    median_f(buf)
}

// ---------------------------------------------------------------------------
// Summaries and reporting.

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
    /// Order-statistic interval of the median wall time, and its coverage.
    pub median_ci: (f64, f64),
    pub ci_coverage: f64,
    /// Bootstrap 95 % interval of the CV.
    pub cv_ci: (f64, f64),
    /// Median over runs of the unit makespan, and its order-statistic interval.
    pub units_makespan: f64,
    pub units_ci: (f64, f64),
    /// Best possible unit makespan for the fiber set (0: not known).
    pub units_bound: u64,
    /// Median over runs of the summed worker CPU time (NaN: not measured).
    pub cpu_s: f64,
    /// Thief fibers of the point (for the table title).
    pub thieves: usize,
}

pub fn summarize(
    scenario: &str,
    param: &'static str,
    value: usize,
    variant: &'static str,
    runs: Vec<RunResult>,
) -> Summary {
    let t: Vec<f64> = runs.iter().map(|r| r.secs).collect();
    let (lo, hi, coverage) = median_ci(&t);
    let median_s = median_f(&mut t.clone());
    let fibers = runs.first().map_or(0, |r| r.fibers);
    let mut ls: Vec<u64> = runs.iter().map(|r| r.local_steals).collect();
    let mut rs: Vec<u64> = runs.iter().map(|r| r.remote_steals).collect();
    let u: Vec<f64> = runs.iter().map(|r| r.units_makespan() as f64).collect();
    let (ulo, uhi, _) = median_ci(&u);
    let mut cpu: Vec<f64> = runs.iter().filter(|r| !r.cpu_s.is_empty()).map(|r| r.cpu_s.iter().sum()).collect();
    Summary {
        scenario: scenario.to_string(),
        param,
        value,
        variant,
        median_s,
        cv: cv(&t),
        throughput: if median_s > 0.0 { fibers as f64 / median_s } else { 0.0 },
        local_steals: median_u(&mut ls),
        remote_steals: median_u(&mut rs),
        median_ci: (lo, hi),
        ci_coverage: coverage,
        cv_ci: bootstrap(&t, &cv),
        units_makespan: median_f(&mut u.clone()),
        units_ci: (ulo, uhi),
        units_bound: 0,
        cpu_s: if cpu.is_empty() { f64::NAN } else { median_f(&mut cpu) },
        thieves: 0,
        runs,
    }
}

impl Summary {
    /// Set the unit bound and the thief count of the point.
    pub fn with_point(mut self, bound: u64, thieves: usize) -> Summary {
        self.units_bound = bound;
        self.thieves = thieves;
        self
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

/// Whether two intervals overlap: a difference inside the noise.
pub fn overlaps(a: (f64, f64), b: (f64, f64)) -> bool {
    a.0 <= b.1 && b.0 <= a.1
}

/// Gain of `x` over `base` in % (positive: `x` is smaller, i.e. faster).
fn gain(base: f64, x: f64) -> f64 {
    if base > 0.0 {
        (base - x) / base * 100.0
    } else {
        0.0
    }
}

pub fn print_table(rows: &[Summary]) {
    let Some(first) = rows.first() else { return };
    let rr = rows.iter().find(|r| r.variant == "rr");
    println!(
        "\n{}  {}={}  thieves={}  ({} runs; median interval coverage {:.1} %, CV interval bootstrap 95 %)",
        first.scenario,
        first.param,
        first.value,
        first.thieves,
        first.runs.len(),
        first.ci_coverage * 100.0
    );
    println!(
        "  {:<15} {:>8} {:>19} {:>6} {:>13} {:>7} {:>13} {:>6} {:>9} {:>9} {:>6} {:>6} {:>7} {:>7}",
        "policy",
        "median s",
        "median interval",
        "cv %",
        "cv interval",
        "units",
        "units intvl",
        "bound",
        "wall/rr",
        "units/rr",
        "local",
        "remote",
        "remote%",
        "cpu s"
    );
    for r in rows {
        let (vs_wall, vs_units) = match rr {
            Some(rr) if r.variant != "rr" => {
                let w = format!(
                    "{:+.1}%{}",
                    gain(rr.median_s, r.median_s),
                    if overlaps(rr.median_ci, r.median_ci) { "~" } else { "" }
                );
                let u = format!(
                    "{:+.1}%{}",
                    gain(rr.units_makespan, r.units_makespan),
                    if overlaps(rr.units_ci, r.units_ci) { "~" } else { "" }
                );
                (w, u)
            }
            _ => ("-".into(), "-".into()),
        };
        println!(
            "  {:<15} {:>8.4} {:>19} {:>6.2} {:>13} {:>7.1} {:>13} {:>6} {:>9} {:>9} {:>6} {:>6} {:>7.1} {:>7.3}",
            r.variant,
            r.median_s,
            format!("[{:.4}, {:.4}]", r.median_ci.0, r.median_ci.1),
            r.cv * 100.0,
            format!("[{:.1}, {:.1}]", r.cv_ci.0 * 100.0, r.cv_ci.1 * 100.0),
            r.units_makespan,
            format!("[{:.0}, {:.0}]", r.units_ci.0, r.units_ci.1),
            r.units_bound,
            vs_wall,
            vs_units,
            r.local_steals,
            r.remote_steals,
            remote_ratio(r) * 100.0,
            r.cpu_s
        );
    }
    println!("  ~ : the intervals of this policy and rr overlap: the difference is inside the noise");
    // How much of the wall time each worker thread got a CPU: a worker that
    // the OS runs less (other load on its PU) does less, and stealing
    // policies' units follow; rr's fixed placement does not.
    let nw = rows.iter().flat_map(|r| r.runs.iter().map(|x| x.cpu_s.len())).max().unwrap_or(0);
    if nw > 0 {
        let shares: Vec<String> = (0..nw)
            .map(|w| {
                let mut v: Vec<f64> = rows
                    .iter()
                    .flat_map(|r| r.runs.iter())
                    .filter(|x| x.cpu_s.len() == nw && x.secs > 0.0)
                    .map(|x| x.cpu_s[w] / x.secs)
                    .collect();
                format!("w{w} {:.0}%", median_f(&mut v) * 100.0)
            })
            .collect();
        println!("  worker CPU time / wall time, median over all runs of the point: {}", shares.join(", "));
    }
    if first.thieves > 0 {
        print_heavy_placement(rows);
    }
}

/// The legend of [`print_table`]'s columns (printed once, with `--verbose`).
pub const TABLE_LEGEND: &str = "legend of the detailed tables (one row per policy, over the runs of one point):
  median s         median wall time of one run, seconds
  median interval  distribution-free confidence interval of that median (order statistics; coverage in the title)
  cv %             coefficient of variation of the wall times (standard deviation / mean): the run-to-run spread
  cv interval      bootstrap 95 % interval of the CV
  units            median unit makespan: the most work units any one worker executed in a run (fewer is better);
                   a unit is one multiplication, 3 on node 0 of an imbalanced scenario
  units intvl      confidence interval of that median, as for the wall time
  bound            the smallest unit makespan any schedule of the same fibers can reach
  wall/rr units/rr how much less than round-robin's (positive: less, i.e. better); ~ marks a difference whose
                   intervals overlap rr's: inside the noise
  local remote     median steals within a NUMA node / across nodes; remote% their remote share
  cpu s            median CPU seconds of all workers together in one run";

/// How a policy compares with round-robin on one measure, from the spread
/// of the repeated runs: the confidence intervals of the two medians.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compared {
    /// The intervals do not overlap and the policy's median is smaller.
    Better,
    /// The intervals do not overlap and the policy's median is larger.
    Worse,
    /// The intervals overlap: this many runs cannot tell the two apart.
    Noise,
}

impl Compared {
    pub fn of(rr_median: f64, rr_ci: (f64, f64), median: f64, ci: (f64, f64)) -> Compared {
        if overlaps(rr_ci, ci) {
            Compared::Noise
        } else if median < rr_median {
            Compared::Better
        } else {
            Compared::Worse
        }
    }

    pub fn word(self) -> &'static str {
        match self {
            Compared::Better => "better",
            Compared::Worse => "worse",
            Compared::Noise => "inside the noise",
        }
    }
}

/// `"48.4 % fewer: better"`: the gain over round-robin in words.
fn against_rr(rr: f64, x: f64, less: &str, more: &str, c: Compared) -> String {
    let g = gain(rr, x);
    let dir = if g >= 0.0 { less } else { more };
    format!("{:.1} % {dir}: {}", g.abs(), c.word())
}

/// What the fibers of a point are, in words.
pub fn describe_point(p: &Params, workers: usize) -> String {
    let thieves = match p.thieves {
        0 => "no thieves".to_string(),
        1 => format!("1 thief awaiting a {}-multiplication heavy fiber", p.heavy_mults),
        t => format!("{t} thieves, each awaiting a {}-multiplication heavy fiber", p.heavy_mults),
    };
    format!(
        "{} single multiplications ({}x{}), {thieves}, {} worker(s), {}",
        p.mults,
        p.size,
        p.size,
        p.workers.unwrap_or(workers),
        if p.imbalanced { "node 0 multiplies 3x" } else { "balanced" }
    )
}

/// The short answer for one point: per policy its units and wall time,
/// each against round-robin in words (better / worse / inside the noise).
pub fn answer_table(rows: &[Summary], what: &str) -> String {
    let mut out = String::new();
    let Some(first) = rows.first() else { return out };
    let rr = rows.iter().find(|r| r.variant == "rr");
    let _ = writeln!(
        out,
        "{}: {what}; best possible schedule {} units; {} runs",
        first.scenario,
        first.units_bound,
        first.runs.len()
    );
    let _ = writeln!(
        out,
        "  {:<15} {:>10}  {:<32} {:>8}  against round-robin",
        "policy", "work units", "against round-robin", "wall s"
    );
    for r in rows {
        let (u, w) = match rr {
            Some(rr) if r.variant != "rr" => (
                against_rr(
                    rr.units_makespan,
                    r.units_makespan,
                    "fewer",
                    "more",
                    Compared::of(rr.units_makespan, rr.units_ci, r.units_makespan, r.units_ci),
                ),
                against_rr(
                    rr.median_s,
                    r.median_s,
                    "less",
                    "more",
                    Compared::of(rr.median_s, rr.median_ci, r.median_s, r.median_ci),
                ),
            ),
            Some(_) => ("(the baseline)".to_string(), "(the baseline)".to_string()),
            None => ("-".to_string(), "-".to_string()),
        };
        let _ = writeln!(out, "  {:<15} {:>10.1}  {:<32} {:>8.3}  {w}", r.variant, r.units_makespan, u, r.median_s);
    }
    out
}

/// Where the heavy fibers ran: per policy, each distinct placement
/// (sorted worker list) with the number of runs that had it.
pub fn heavy_placement(r: &Summary) -> String {
    let mut seen: Vec<(Vec<usize>, usize)> = Vec::new();
    for run in &r.runs {
        let mut w = run.heavy_workers.clone();
        w.sort_unstable();
        match seen.iter_mut().find(|(k, _)| *k == w) {
            Some((_, c)) => *c += 1,
            None => seen.push((w, 1)),
        }
    }
    seen.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    seen.iter()
        .map(|(k, c)| {
            let ws: Vec<String> =
                k.iter().map(|w| if *w == usize::MAX { "?".into() } else { format!("w{w}") }).collect();
            format!("{} x{c}", ws.join("+"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_heavy_placement(rows: &[Summary]) {
    println!("  heavy fibers ran on (workers of one run, sorted; number of runs):");
    for r in rows {
        println!("    {:<15} {}", r.variant, heavy_placement(r));
    }
}

/// The headline: stealing vs round-robin over every point that ran both,
/// and NLH's stability gain, with bootstrap intervals (fixed seed).
#[derive(Debug, Clone, PartialEq)]
pub struct Verdict {
    /// Points (scenario, value) that contributed.
    pub points: usize,
    /// The stealing policies averaged.
    pub policies: Vec<&'static str>,
    /// Mean gain over rr in % of the unit makespan medians, with interval.
    pub units_gain: f64,
    pub units_ci: (f64, f64),
    /// The same for the wall-time medians.
    pub wall_gain: f64,
    pub wall_ci: (f64, f64),
    /// Mean relative CV reduction of nlh vs rr in %, with interval (None
    /// without nlh).
    pub cv_gain: Option<(f64, (f64, f64))>,
    /// The one-line verdict (`verdict.txt`, and `--verbose`).
    pub line: String,
    /// The same in words a reader without the thesis at hand understands.
    pub words: String,
}

/// The verdict over `all` (None if no point ran rr and a thesis stealing policy).
pub fn verdict(all: &[Summary]) -> Option<Verdict> {
    type Point<'a> = (&'a Summary, Vec<&'a Summary>, Option<&'a Summary>);
    let mut points: Vec<Point> = Vec::new();
    for rr in all.iter().filter(|r| r.variant == "rr") {
        let same = |r: &&Summary| r.scenario == rr.scenario && r.value == rr.value;
        let stealers: Vec<&Summary> =
            all.iter().filter(same).filter(|r| THESIS_STEALERS.contains(&r.variant)).collect();
        let nlh = all.iter().filter(same).find(|r| r.variant == "nlh");
        if !stealers.is_empty() {
            points.push((rr, stealers, nlh));
        }
    }
    if points.is_empty() {
        return None;
    }
    let mut policies: Vec<&'static str> = Vec::new();
    for (_, st, _) in &points {
        for s in st {
            if !policies.contains(&s.variant) {
                policies.push(s.variant);
            }
        }
    }
    let secs = |r: &Summary| r.runs.iter().map(|x| x.secs).collect::<Vec<f64>>();
    let units = |r: &Summary| r.runs.iter().map(|x| x.units_makespan() as f64).collect::<Vec<f64>>();
    let cvs = |r: &Summary| r.cv;
    // Point estimates.
    let mean_gain = |f: &dyn Fn(&Summary) -> f64| {
        let g: Vec<f64> = points.iter().flat_map(|(rr, st, _)| st.iter().map(move |s| gain(f(rr), f(s)))).collect();
        g.iter().sum::<f64>() / g.len() as f64
    };
    let units_gain = mean_gain(&|r| r.units_makespan);
    let wall_gain = mean_gain(&|r| r.median_s);
    let cv_points: Vec<(&Summary, &Summary)> =
        points.iter().filter_map(|(rr, _, n)| n.map(|n| (*rr, n))).filter(|(rr, _)| rr.cv > 0.0).collect();
    let cv_gain_of = |pairs: &[(f64, f64)]| pairs.iter().map(|(a, b)| gain(*a, *b)).sum::<f64>() / pairs.len() as f64;
    // Bootstrap: resample the runs of every summary independently.
    let mut rng = SplitMix(BOOTSTRAP_SEED);
    let mut buf = Vec::new();
    let (mut ru, mut rw, mut rc) = (Vec::new(), Vec::new(), Vec::new());
    let series: Vec<(Vec<f64>, Vec<f64>)> = points.iter().map(|(rr, _, _)| (units(rr), secs(rr))).collect();
    for _ in 0..BOOTSTRAP_REPS {
        let (mut gu, mut gw, mut n) = (0.0, 0.0, 0usize);
        for ((_, st, _), (rru, rrw)) in points.iter().zip(&series) {
            let bu = resample_median(rru, &mut rng, &mut buf);
            let bw = resample_median(rrw, &mut rng, &mut buf);
            for s in st {
                gu += gain(bu, resample_median(&units(s), &mut rng, &mut buf));
                gw += gain(bw, resample_median(&secs(s), &mut rng, &mut buf));
                n += 1;
            }
        }
        ru.push(gu / n as f64);
        rw.push(gw / n as f64);
        if !cv_points.is_empty() {
            let pairs: Vec<(f64, f64)> = cv_points
                .iter()
                .map(|(rr, nl)| {
                    let ra: Vec<f64> = (0..rr.runs.len()).map(|_| rr.runs[rng.index(rr.runs.len())].secs).collect();
                    let na: Vec<f64> = (0..nl.runs.len()).map(|_| nl.runs[rng.index(nl.runs.len())].secs).collect();
                    (cv(&ra), cv(&na))
                })
                // A resample of identical runs has no spread to reduce.
                .filter(|(a, _)| *a > 1e-6)
                .collect();
            if !pairs.is_empty() {
                rc.push(cv_gain_of(&pairs));
            }
        }
    }
    let units_ci = percentile_interval(&mut ru);
    let wall_ci = percentile_interval(&mut rw);
    let cv_gain = if cv_points.is_empty() || rc.is_empty() {
        None
    } else {
        let pairs: Vec<(f64, f64)> = cv_points.iter().map(|(a, b)| (cvs(a), cvs(b))).collect();
        Some((cv_gain_of(&pairs), percentile_interval(&mut rc)))
    };
    let target = THESIS_STEAL_GAIN * 100.0;
    let met = |x: f64, t: f64| if x >= t { "met" } else { "missed" };
    let inside = wall_ci.0 <= units_gain && units_gain <= wall_ci.1;
    let mut line = format!(
        "verdict: stealing ({}) vs rr, mean over {} point(s): units {:+.1}% [{:.1}, {:.1}], wall {:+.1}% [{:.1}, {:.1}] \
         (thesis 38.88%: units {}, wall {}; units gain {} the wall interval)",
        policies.join(","),
        points.len(),
        units_gain,
        units_ci.0,
        units_ci.1,
        wall_gain,
        wall_ci.0,
        wall_ci.1,
        met(units_gain, target),
        met(wall_gain, target),
        if inside { "inside" } else { "outside" }
    );
    match cv_gain {
        Some((g, (lo, hi))) => {
            let _ = write!(
                line,
                "; nlh CV reduction vs rr {:+.1}% [{:.1}, {:.1}] (thesis 40.59%: {})",
                g,
                lo,
                hi,
                met(g, THESIS_NLH_CV_GAIN * 100.0)
            );
        }
        None => line.push_str("; nlh CV vs rr: not measured (needs nlh and rr with a nonzero CV)"),
    }
    let words =
        verdict_words(&policies, points.len(), (units_gain, units_ci), (wall_gain, wall_ci), cv_gain, &cv_points);
    Some(Verdict { points: points.len(), policies, units_gain, units_ci, wall_gain, wall_ci, cv_gain, line, words })
}

/// The verdict in words: what was compared, which direction is good, and
/// how far the measured intervals are from the thesis' figures.
fn verdict_words(
    policies: &[&str],
    npoints: usize,
    (units_gain, units_ci): (f64, (f64, f64)),
    (wall_gain, wall_ci): (f64, (f64, f64)),
    cv_gain: Option<(f64, (f64, f64))>,
    cv_points: &[(&Summary, &Summary)],
) -> String {
    let target = THESIS_STEAL_GAIN * 100.0;
    let dir = |g: f64, less: &'static str, more: &'static str| if g >= 0.0 { less } else { more };
    let judge = |g: f64, (lo, hi): (f64, f64), t: f64| {
        if lo > t {
            format!("above the thesis' {t:.2} % even at the interval's low end: met")
        } else if hi < t {
            format!("below the thesis' {t:.2} % even at the interval's high end: missed")
        } else {
            format!(
                "the interval holds the thesis' {t:.2} %, so these runs cannot tell the two apart ({} by the point estimate)",
                if g >= t { "met" } else { "missed" }
            )
        }
    };
    let mut w = String::new();
    let _ = writeln!(
        w,
        "Stealing against round-robin (the thesis: its stealing policies {target:.2} % faster than round-robin).\n  \
         Here the thesis' stealing policies ({}) needed on average {:.1} % {} work units than round-robin over {npoints} \
         scenario(s) (95 % interval {:.1} to {:.1} %): {}.\n  \
         Wall time: {:.1} % {} ({:.1} to {:.1} %); {}.",
        policies.join(", "),
        units_gain.abs(),
        dir(units_gain, "fewer", "more"),
        units_ci.0,
        units_ci.1,
        judge(units_gain, units_ci, target),
        wall_gain.abs(),
        dir(wall_gain, "less", "more"),
        wall_ci.0,
        wall_ci.1,
        if wall_ci.0 <= units_gain && units_gain <= wall_ci.1 {
            "it agrees with the units"
        } else {
            "it disagrees with the units (their gain lies outside the wall-time interval): believe the units"
        }
    );
    match cv_gain {
        Some((g, ci)) => {
            let each: Vec<String> = cv_points
                .iter()
                .map(|(rr, nl)| format!("{} rr {:.1} %, nlh {:.1} %", rr.scenario, rr.cv * 100.0, nl.cv * 100.0))
                .collect();
            let _ = write!(
                w,
                "NLH's stability (the thesis: NLH's run-to-run spread of wall time {:.2} % smaller than round-robin's).\n  \
                 The spread is the coefficient of variation (standard deviation / mean of the runs' wall times): {}.\n  \
                 On average NLH's was {:.1} % {} than round-robin's (95 % interval {:.1} to {:.1} %, positive = smaller): {}.\n  \
                 A spread of wall times measures the machine as much as the scheduler: on a loaded machine it says little.",
                THESIS_NLH_CV_GAIN * 100.0,
                each.join("; "),
                g.abs(),
                dir(g, "smaller", "larger"),
                ci.0,
                ci.1,
                judge(g, ci, THESIS_NLH_CV_GAIN * 100.0)
            );
        }
        None => w.push_str("NLH's stability: not measured (needs nlh and rr, and rr's wall times must vary)."),
    }
    w
}

pub const SUMMARY_HEADER: &str = "scenario,param,value,policy,runs,median_s,cv,throughput,local_steals,remote_steals,\
median_ci_low,median_ci_high,cv_ci_low,cv_ci_high,units_makespan,units_ci_low,units_ci_high,units_bound,cpu_s,thieves";
pub const RUNS_HEADER: &str =
    "scenario,param,value,policy,run,secs,fibers,local_steals,remote_steals,units_makespan,units_per_worker,cpu_s_per_worker,heavy_workers";

pub fn write_csvs(dir: &Path, all: &[Summary]) -> std::io::Result<()> {
    let mut s = format!("{SUMMARY_HEADER}\n");
    let mut r = format!("{RUNS_HEADER}\n");
    let join = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(";");
    for x in all {
        let _ = writeln!(
            s,
            "{},{},{},{},{},{:.6},{:.6},{:.3},{},{},{:.6},{:.6},{:.6},{:.6},{:.1},{:.1},{:.1},{},{:.4},{}",
            x.scenario,
            x.param,
            x.value,
            x.variant,
            x.runs.len(),
            x.median_s,
            x.cv,
            x.throughput,
            x.local_steals,
            x.remote_steals,
            x.median_ci.0,
            x.median_ci.1,
            x.cv_ci.0,
            x.cv_ci.1,
            x.units_makespan,
            x.units_ci.0,
            x.units_ci.1,
            x.units_bound,
            x.cpu_s,
            x.thieves
        );
        for (i, run) in x.runs.iter().enumerate() {
            let _ = writeln!(
                r,
                "{},{},{},{},{},{:.6},{},{},{},{},{},{},{}",
                x.scenario,
                x.param,
                x.value,
                x.variant,
                i,
                run.secs,
                run.fibers,
                run.local_steals,
                run.remote_steals,
                run.units_makespan(),
                join(&mut run.units.iter().map(|u| u.to_string())),
                join(&mut run.cpu_s.iter().map(|c| format!("{c:.4}"))),
                join(&mut run.heavy_workers.iter().map(|w| w.to_string()))
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
            let path =
                dir.join(format!("{}_{}_{}.svg", names[k], scenario, if k == 0 { "time" } else { "throughput" }));
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
            panel(
                &areas[i],
                &format!("total steals, {b}"),
                param,
                "steals (median)",
                rows,
                variants,
                &|r: &Summary| (r.local_steals + r.remote_steals) as f64,
            )?;
            panel(
                &areas[panels.len() + i],
                &format!("remote-steal ratio, {b}"),
                param,
                "remote / all steals",
                rows,
                variants,
                &|r: &Summary| remote_ratio(r),
            )?;
        }
        root.present()?;
        drop(areas);
        drop(root);
        files.push(path);
        Ok(files)
    }
    /// Wall time and unit makespan side by side: one row per panel group
    /// (e.g. balanced / imbalanced), the left panel the median wall time,
    /// the right one the median unit makespan with the best possible
    /// makespan as a dashed black line.
    pub fn units_wall(
        path: &Path,
        xdesc: &str,
        groups: &[(String, Vec<&Summary>)],
        variants: &[&'static str],
    ) -> DrawResult {
        let root = SVGBackend::new(path, (1280, 420 * groups.len().max(1) as u32)).into_drawing_area();
        root.fill(&WHITE)?;
        let areas = root.split_evenly((groups.len().max(1), 2));
        for (i, (name, rows)) in groups.iter().enumerate() {
            panel(
                &areas[2 * i],
                &format!("median wall time, {name}"),
                xdesc,
                "seconds",
                rows,
                variants,
                &|r: &Summary| r.median_s,
            )?;
            let area = &areas[2 * i + 1];
            panel(
                area,
                &format!("median unit makespan, {name}"),
                xdesc,
                "work units",
                rows,
                variants,
                &|r: &Summary| r.units_makespan.max(r.units_bound as f64),
            )?;
            // The bound: drawn over the right panel with the same scale.
            let xs: Vec<f64> = rows.iter().map(|r| r.value as f64).collect();
            let (x0, x1) = xs.iter().fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            let (x0, x1) = if x0 == x1 { (x0 - 1.0, x1 + 1.0) } else { (x0, x1) };
            let ymax =
                rows.iter().map(|r| r.units_makespan.max(r.units_bound as f64)).fold(0.0f64, f64::max).max(1e-9) * 1.1;
            let mut chart = ChartBuilder::on(area)
                .margin(8)
                .x_label_area_size(35)
                .y_label_area_size(60)
                .caption(" ", ("sans-serif", 16))
                .build_cartesian_2d(x0..x1, 0.0..ymax)?;
            let mut pts: Vec<(f64, f64)> = Vec::new();
            for r in rows.iter() {
                if !pts.iter().any(|p| p.0 == r.value as f64) {
                    pts.push((r.value as f64, r.units_bound as f64));
                }
            }
            pts.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart.draw_series(DashedLineSeries::new(pts, 6, 4, BLACK.stroke_width(1)))?;
        }
        root.present()?;
        Ok(())
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
            let mut v: Vec<usize> =
                std::iter::successors(Some(1usize), |x| Some(x * 2)).take_while(|&x| x <= max).collect();
            if v.last() != Some(&max) {
                v.push(max);
            }
            v
        }
    }
}

/// One point to run: where it shows up and its parameters.
#[derive(Debug, Clone)]
pub struct Point {
    pub scenario: String,
    pub param: &'static str,
    pub value: usize,
    pub p: Params,
}

fn balance_name(imb: bool) -> &'static str {
    if imb {
        "imbalanced"
    } else {
        "balanced"
    }
}

/// The default scenarios, inside the thesis' parameter space where
/// stealing matters: a long queue of single multiplications without
/// thieves (32 per worker) and a longer one with one thief per worker
/// (256 singles per worker); imbalanced unless `--balanced`/`--both`.
fn default_points(settings: &Settings, workers: usize) -> Vec<Point> {
    let b = settings.base;
    let mut out = Vec::new();
    for &imb in &settings.balance {
        for (name, mults, thieves) in [("queue", 32 * workers, 0), ("queue+thieves", 256 * workers, workers)] {
            out.push(Point {
                scenario: format!("{name}/{}", balance_name(imb)),
                param: "mults",
                value: mults,
                p: Params { mults, thieves, imbalanced: imb, ..b },
            });
        }
    }
    out
}

fn all_points(settings: &Settings, workers: usize) -> Vec<Point> {
    let b = settings.base;
    let mut pts = Vec::new();
    if settings.sweeps.is_empty() {
        if settings.default_scenarios {
            pts = default_points(settings, workers);
        } else {
            for &imb in &settings.balance {
                pts.push(Point {
                    scenario: format!("default/{}", balance_name(imb)),
                    param: "mults",
                    value: b.mults,
                    p: Params { imbalanced: imb, ..b },
                });
            }
        }
    }
    for &s in &settings.sweeps {
        for &imb in &settings.balance {
            for value in sweep_values(s, settings) {
                let mut p = Params { imbalanced: imb, ..b };
                match s {
                    Sweep::Queue => p.mults = value,
                    Sweep::Heavy => p.thieves = value,
                    Sweep::Workers => p.workers = Some(value),
                }
                pts.push(Point {
                    scenario: format!("{}/{}", s.scenario(), balance_name(imb)),
                    param: s.param(),
                    value,
                    p,
                });
            }
        }
    }
    pts
}

/// The unit bound of a point on `topology` (worker nodes as the runtime lays them out).
fn point_bound(nodes: &[usize], p: &Params) -> u64 {
    let slow: Vec<bool> = nodes.iter().map(|&n| n == 0).collect();
    units_bound(&slow, p.mults, p.thieves, p.heavy_mults as u64, p.imbalanced)
}

/// Run every variant at one point; returns the summaries in variant order.
fn run_point(
    settings: &Settings,
    pt: &Point,
    nodes: &[usize],
    progress: &mut Progress,
) -> Result<Vec<Summary>, String> {
    let bound = point_bound(nodes, &pt.p);
    let mut out = Vec::new();
    for v in &settings.variants {
        let mut runs = Vec::new();
        for run in 0..settings.runs {
            let r = run_once(&settings.topology, v, pt.p, run as u64 + 1)?;
            progress.tick(
                &format!(
                    "{} {}={} {} run {}/{}: {:.3}s, {} units (bound {bound})",
                    pt.scenario,
                    pt.param,
                    pt.value,
                    v.name,
                    run + 1,
                    settings.runs,
                    r.secs,
                    r.units_makespan()
                ),
                progress.weight(pt, v),
            );
            runs.push(r);
        }
        out.push(summarize(&pt.scenario, pt.param, pt.value, v.name, runs).with_point(bound, pt.p.thieves));
    }
    Ok(out)
}

/// The cost of the work, measured on this machine before the runs: one
/// multiplication fiber while every worker multiplies at once (so a busy
/// machine shows up in it), and what a run costs beside its multiplications
/// (runtime start-up, matrix generation, wake-ups, shutdown).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct WorkCost {
    /// Seconds per single-multiplication fiber on a worker, every worker busy.
    pub mult_s: f64,
    /// Seconds a run costs beside its multiplications.
    pub overhead_s: f64,
}

/// Measure [`WorkCost`] from balanced round-robin runs of 2 and of 10
/// multiplications per worker, alternating (at least 3 pairs and 0.3 s, at
/// most 12 pairs): the slope between the two medians is the cost of one
/// multiplication, the rest of a run is the overhead. The runtime is built
/// as every run builds it.
pub fn measure_work(topology: &Topology, workers: Option<usize>, nw: usize, size: usize) -> Result<WorkCost, String> {
    const SHORT: usize = 2;
    const LONG: usize = 10;
    let rr = Variant { name: "rr", policy: Policy::RoundRobin, opts: PolicyOptions::default() };
    let p = |k: usize| Params {
        size,
        heavy_mults: 1,
        mults: k * nw.max(1),
        thieves: 0,
        workers,
        imbalanced: false,
        deterministic: false,
    };
    let (mut short, mut long) = (Vec::new(), Vec::new());
    let t_all = Instant::now();
    for pair in 0..12u64 {
        if pair >= 3 && t_all.elapsed() >= Duration::from_millis(300) {
            break;
        }
        for (k, out) in [(SHORT, &mut short), (LONG, &mut long)] {
            let t0 = Instant::now();
            run_once(topology, &rr, p(k), 1000 + pair)?;
            out.push(t0.elapsed().as_secs_f64());
        }
    }
    let (s, l) = (median_f(&mut short), median_f(&mut long));
    let mult_s = ((l - s) / (LONG - SHORT) as f64).max(l / LONG as f64 * 0.1).max(1e-9);
    Ok(WorkCost { mult_s, overhead_s: (s - SHORT as f64 * mult_s).max(0.0) })
}

/// The running time of one run of `v` at `p`, from the simulator's schedule
/// (one seed): the unit makespan it predicts, or the total work over the
/// CPUs when there are more workers than CPUs, times the measured cost.
fn estimate_run_s(topology: &Topology, v: &Variant, p: Params, cost: &WorkCost, cpus: usize) -> Result<f64, String> {
    let mult_ns = (cost.mult_s * 1e9).max(1.0) as u64;
    let cal = Calibration { mult_ns, spawn_ns: CostModel::default().spawn_ns, wake_ns: CostModel::default().wake_ns };
    let sim = simulate_units(topology, v, p, &cal, 1)?;
    let r = sim.first().ok_or("the simulator returned no run")?;
    let total: u64 = r.units.iter().sum();
    let par = r.units.len().clamp(1, cpus.max(1));
    let units = (r.units_makespan() as f64).max(total as f64 / par as f64);
    Ok(units * cost.mult_s + cost.overhead_s)
}

/// Progress on stderr, with the time left from the estimate of every run
/// scaled by how the estimate has held so far.
struct Progress {
    done: usize,
    total: usize,
    t0: Instant,
    /// Estimated seconds of every (scenario, value, policy) run.
    weights: Vec<((String, usize, &'static str), f64)>,
    est_total: f64,
    est_done: f64,
    tty: bool,
}

impl Progress {
    fn weight(&self, pt: &Point, v: &Variant) -> f64 {
        self.weights
            .iter()
            .find(|((sc, val, name), _)| *sc == pt.scenario && *val == pt.value && *name == v.name)
            .map_or(0.0, |(_, w)| *w)
    }

    fn tick(&mut self, what: &str, weight: f64) {
        self.done += 1;
        self.est_done += weight;
        let el = self.t0.elapsed().as_secs_f64();
        // How fast the work goes against the estimate, applied to what is left.
        let pace = if self.est_done > 0.0 { el / self.est_done } else { 1.0 };
        let left = (self.est_total - self.est_done).max(0.0) * pace;
        let line = format!("[{}/{} {:.0}s, ~{:.0}s left] {what}", self.done, self.total, el, left);
        let mut err = std::io::stderr();
        if self.tty {
            let _ = write!(err, "\r\x1b[2K{line}");
            if self.done == self.total {
                let _ = writeln!(err);
            }
        } else {
            let _ = writeln!(err, "{line}");
        }
    }
}

/// `/proc/loadavg`'s three load averages, or a note why not.
pub fn load_average() -> String {
    match fs::read_to_string("/proc/loadavg") {
        Ok(s) => s.split_whitespace().take(3).collect::<Vec<_>>().join(" "),
        Err(e) => format!("unknown (/proc/loadavg: {e})"),
    }
}

/// Everything one invocation measured (read by `tests/thesis_bench.rs`).
#[allow(dead_code)]
#[derive(Debug, Clone)]
pub struct Report {
    pub summaries: Vec<Summary>,
    pub verdict: Option<Verdict>,
    pub calibration: Option<Calibration>,
    /// (scenario, value, policy, real median units, simulated median units,
    /// real median steals, simulated median steals)
    pub sim_vs_real: Vec<(String, usize, &'static str, f64, f64, u64, u64)>,
    /// The measured cost the estimate came from.
    pub work_cost: WorkCost,
    /// The running time estimated before the runs, and the real one, seconds.
    pub estimate_s: f64,
    pub elapsed_s: f64,
    /// The short answer as printed: one table per point.
    pub answer: String,
}

pub fn run_cli(args: &[String]) -> Result<(), CliError> {
    run_report(args).map(|_| ())
}

/// [`run_cli`], returning what it printed as data.
pub fn run_report(args: &[String]) -> Result<Report, CliError> {
    let settings = parse_args(args)?;
    let t_start = Instant::now();
    let load_start = load_average();
    let fail = |e: String| CliError::Usage(format!("benchmark run failed: {e}"));
    // The worker layout, from a runtime built as the runs build theirs.
    let probe = build_runtime(&settings.topology, &all_variants()[0], settings.base.workers).map_err(fail)?;
    let nodes = worker_nodes(&probe);
    probe.shutdown();
    let points = all_points(&settings, nodes.len());
    let b = settings.base;
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some(note) = &settings.topology_note {
        println!("thesis_bench: {note}");
    }
    println!(
        "thesis_bench: topology {} ({} nodes, {} PUs{}), workers {}, size {}, heavy-mults {}, runs {}, spawn order {}, policies {}",
        settings.topology.description(),
        settings.topology.num_nodes(),
        settings.topology.num_pus(),
        if settings.topology.has_distance_matrix() { "" } else { ", default 10/20 distances" },
        b.workers.map_or(format!("one per PU ({})", nodes.len()), |w| w.to_string()),
        b.size,
        b.heavy_mults,
        settings.runs,
        if b.deterministic { "deterministic (thieves wait for the main thread's last spawn)" } else { "thesis (racy)" },
        settings.variants.iter().map(|v| v.name).collect::<Vec<_>>().join(",")
    );
    if settings.verbose {
        if settings.default_scenarios && settings.balance == [true] {
            println!(
                "  default scenarios: long queues without and with thieves, imbalanced (--both adds the balanced ones, \
                 where with one worker per node round-robin's split is already the best possible one)"
            );
        }
        println!(
            "  points: {}",
            points
                .iter()
                .map(|p| format!("{} {}={} thieves={}", p.scenario, p.param, p.value, p.p.thieves))
                .collect::<Vec<_>>()
                .join("; ")
        );
    }
    println!("thesis_bench: machine load (1, 5, 15 min averages) at start: {load_start}, on {cpus} CPU(s)");
    // The estimate: the work measured now, the schedule of every run from the simulator.
    let work_cost = measure_work(&settings.topology, b.workers, nodes.len(), b.size).map_err(fail)?;
    let mut weights = Vec::new();
    for pt in &points {
        for v in &settings.variants {
            let w = estimate_run_s(&settings.topology, v, pt.p, &work_cost, cpus).map_err(fail)?;
            weights.push(((pt.scenario.clone(), pt.value, v.name), w));
        }
    }
    let runs_s: f64 = weights.iter().map(|(_, w)| w).sum::<f64>() * settings.runs as f64;
    // The simulator's calibration after the runs: 31 wake-ups after 2 ms
    // sleeps, 5 multiplications on one worker.
    let sim_s = if settings.sim && settings.sweeps.is_empty() { 31.0 * 0.0025 + 5.0 * work_cost.mult_s } else { 0.0 };
    let estimate_s = t_start.elapsed().as_secs_f64() + runs_s + sim_s;
    println!(
        "thesis_bench: estimated time {} ({} runs; one {}x{} multiplication measured now at {:.2} ms with every worker busy, \
         {:.1} ms per run beside it; the schedules from the simulator)",
        fmt_duration(estimate_s),
        points.len() * settings.variants.len() * settings.runs,
        b.size,
        b.size,
        work_cost.mult_s * 1e3,
        work_cost.overhead_s * 1e3
    );
    let mut progress = Progress {
        done: 0,
        total: points.len() * settings.variants.len() * settings.runs,
        t0: Instant::now(),
        weights,
        est_total: runs_s,
        est_done: 0.0,
        tty: std::io::IsTerminal::is_terminal(&std::io::stderr()),
    };
    let mut all = Vec::new();
    let mut answer = String::new();
    if settings.verbose {
        println!("\n{TABLE_LEGEND}");
    }
    for pt in &points {
        let rows = run_point(&settings, pt, &nodes, &mut progress).map_err(fail)?;
        if settings.verbose {
            print_table(&rows);
        }
        answer.push_str(&answer_table(&rows, &describe_point(&pt.p, nodes.len())));
        all.extend(rows);
    }
    // Simulator calibration and comparison (default scenarios or a single point).
    let mut calibration = None;
    let mut sim_vs_real = Vec::new();
    if settings.sim && settings.sweeps.is_empty() {
        let cal = calibrate(&settings.topology, b.workers, b.size).map_err(fail)?;
        if settings.verbose {
            println!(
                "\nsimulator calibrated on this runtime: one multiplication {:.3} ms, spawn {} ns, wake-up of a parked worker {:.1} us \
                 (simulator defaults: spawn {} ns, wake {:.1} us)",
                cal.mult_ns as f64 * 1e-6,
                cal.spawn_ns,
                cal.wake_ns as f64 * 1e-3,
                CostModel::default().spawn_ns,
                CostModel::default().wake_ns as f64 * 1e-3
            );
            println!(
                "  {:<36} {:<15} {:>11} {:>10} {:>11} {:>10}",
                "scenario", "policy", "real units", "sim units", "real steals", "sim steals"
            );
        }
        for pt in &points {
            for v in &settings.variants {
                let Some(real) =
                    all.iter().find(|r| r.scenario == pt.scenario && r.value == pt.value && r.variant == v.name)
                else {
                    continue;
                };
                let sim = simulate_units(&settings.topology, v, pt.p, &cal, settings.runs).map_err(fail)?;
                let su = median_f(&mut sim.iter().map(|r| r.units_makespan() as f64).collect::<Vec<_>>());
                let ss = median_u(&mut sim.iter().map(|r| r.local_steals + r.remote_steals).collect::<Vec<_>>());
                let rs = real.local_steals + real.remote_steals;
                if settings.verbose {
                    println!(
                        "  {:<36} {:<15} {:>11.1} {:>10.1} {:>11} {:>10}",
                        format!("{} {}={}", pt.scenario, pt.param, pt.value),
                        v.name,
                        real.units_makespan,
                        su,
                        rs,
                        ss
                    );
                }
                sim_vs_real.push((pt.scenario.clone(), pt.value, v.name, real.units_makespan, su, rs, ss));
            }
        }
        calibration = Some(cal);
    }
    let verdict = verdict(&all);
    let load_end = load_average();
    println!(
        "\nThe answer. A work unit is one {0}x{0} matrix multiplication, 3 units when it runs on node 0 of an imbalanced\n\
         scenario (the thesis slows node 0 down 3x). A run's work units are the most that any one worker executed: fewer\n\
         is better, and no schedule of the same fibers can do better than the best possible one. Units count work, not\n\
         time: the machine's load moves them far less than wall times (though a worker that gets less CPU steals less, so\n\
         under load the stealing policies' units drift toward round-robin's). Trust the unit columns; read wall times only\n\
         from a quiet machine. better / worse: the confidence intervals of the two medians over the runs do not overlap;\n\
         inside the noise: they do.\n",
        b.size
    );
    match &verdict {
        Some(v) => println!("{}\n", v.words),
        None => println!(
            "verdict: not computed (needs rr and at least one of {} at the same point)\n",
            THESIS_STEALERS.join(", ")
        ),
    }
    print!("{answer}");
    if let (Some(v), true) = (&verdict, settings.verbose) {
        println!("\n{}", v.line);
    }
    let elapsed_s = t_start.elapsed().as_secs_f64();
    println!(
        "\nthesis_bench: machine load (1, 5, 15 min averages) at start {load_start}, at end {load_end}, on {cpus} CPU(s); \
         the benchmark's own {} workers count about {} towards it{}",
        nodes.len(),
        nodes.len(),
        if load_is_high(&load_end, nodes.len() as f64 + 1.0) {
            ": other programs competed for the CPUs, so the wall times above are noise"
        } else {
            ""
        }
    );
    println!(
        "thesis_bench: done in {} (estimated {}: {:+.0} %){}",
        fmt_duration(elapsed_s),
        fmt_duration(estimate_s),
        (elapsed_s - estimate_s) / estimate_s.max(1e-9) * 100.0,
        if settings.verbose { "" } else { "; --verbose for the detailed tables, --out DIR for CSV files and figures" }
    );
    if let Some(dir) = &settings.out {
        let io = |e: std::io::Error| CliError::Usage(format!("--out {}: {e}", dir.display()));
        write_csvs(dir, &all).map_err(io)?;
        let mut files = vec![dir.join("summary.csv"), dir.join("runs.csv")];
        if let Some(v) = &verdict {
            fs::write(dir.join("verdict.txt"), format!("{}\n", v.line)).map_err(io)?;
            files.push(dir.join("verdict.txt"));
        }
        let names: Vec<&'static str> = settings.variants.iter().map(|v| v.name).collect();
        let plot_err =
            |e: Box<dyn std::error::Error>| CliError::Usage(format!("--out {}: plotting failed: {e}", dir.display()));
        for &s in &settings.sweeps {
            let f = plot::figures(dir, s.figures(), s.scenario(), s.param(), &all, &names).map_err(plot_err)?;
            files.extend(f);
            let groups: Vec<(String, Vec<&Summary>)> = ["imbalanced", "balanced"]
                .iter()
                .map(|bal| {
                    let sc = format!("{}/{bal}", s.scenario());
                    (bal.to_string(), all.iter().filter(|r| r.scenario == sc).collect::<Vec<_>>())
                })
                .filter(|(_, rows)| !rows.is_empty())
                .collect();
            let path = dir.join(format!("{}_{}_units_wall.svg", s.figures()[0], s.scenario()));
            plot::units_wall(&path, s.param(), &groups, &names).map_err(plot_err)?;
            files.push(path);
        }
        if settings.sweeps.is_empty() {
            // Default points: one row per scenario, x = the policy's index.
            let by_index: Vec<Summary> = all
                .iter()
                .map(|r| Summary { value: names.iter().position(|n| *n == r.variant).unwrap_or(0), ..r.clone() })
                .collect();
            let mut groups: Vec<(String, Vec<&Summary>)> = Vec::new();
            for r in &by_index {
                match groups.iter_mut().find(|(k, _)| *k == r.scenario) {
                    Some((_, v)) => v.push(r),
                    None => groups.push((r.scenario.clone(), vec![r])),
                }
            }
            let xdesc: Vec<String> = names.iter().enumerate().map(|(i, n)| format!("{i} {n}")).collect();
            let path = dir.join("default_units_wall.svg");
            plot::units_wall(&path, &format!("policy ({})", xdesc.join(", ")), &groups, &names).map_err(plot_err)?;
            files.push(path);
        }
        println!("\nwrote {}", files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", "));
    }
    Ok(Report { summaries: all, verdict, calibration, sim_vs_real, work_cost, estimate_s, elapsed_s, answer })
}
