//! The thesis benchmark in its smallest configuration: CSV, rows, steals,
//! SVG figures, and bad input.

#[path = "../examples/thesis_bench/bench.rs"]
#[allow(dead_code)]
mod bench;

use std::path::PathBuf;

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn tmpdir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("numafiber-tb-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    d
}

#[test]
fn smallest_run_writes_wellformed_csv_and_figures() {
    let dir = tmpdir("quick");
    let d = dir.to_str().unwrap();
    bench::run_cli(&args(&[
        "--quick",
        "--runs",
        "1",
        "--sweep",
        "queue",
        "--topology",
        "uniform:2x1",
        "--size",
        "96",
        "--out",
        d,
    ]))
    .expect("benchmark runs");
    let summary = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    let mut lines = summary.lines();
    let header = lines.next().unwrap();
    // The old columns first, unchanged, then the new ones.
    assert!(
        header.starts_with("scenario,param,value,policy,runs,median_s,cv,throughput,local_steals,remote_steals,"),
        "{header}"
    );
    let cols: Vec<&str> = header.split(',').collect();
    let col =
        |name: &str| cols.iter().position(|c| *c == name).unwrap_or_else(|| panic!("no column {name} in {header}"));
    let rows: Vec<Vec<String>> = lines.map(|l| l.split(',').map(str::to_string).collect()).collect();
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r.len(), cols.len(), "{r:?}");
        let f =
            |name: &str| -> f64 { r[col(name)].parse().unwrap_or_else(|e| panic!("{name} {:?}: {e}", r[col(name)])) };
        // Intervals contain their point estimates; the unit makespan is
        // never below the best possible one.
        assert!(f("median_ci_low") <= f("median_s") && f("median_s") <= f("median_ci_high"), "{r:?}");
        assert!(f("cv_ci_low") >= 0.0 && f("cv_ci_low") <= f("cv_ci_high"), "{r:?}");
        assert!(f("units_ci_low") <= f("units_makespan") && f("units_makespan") <= f("units_ci_high"), "{r:?}");
        assert!(f("units_bound") > 0.0 && f("units_makespan") >= f("units_bound"), "{r:?}");
        assert!(f("cpu_s") > 0.0, "{r:?}");
        assert_eq!(r[1], "mults");
        r[2].parse::<usize>().unwrap();
        assert_eq!(r[4], "1");
        for f in &r[5..8] {
            let x: f64 = f.parse().unwrap();
            assert!(x.is_finite() && x >= 0.0, "{r:?}");
        }
        r[8].parse::<u64>().unwrap();
        r[9].parse::<u64>().unwrap();
    }
    for v in bench::all_variants() {
        assert!(rows.iter().any(|r| r[3] == v.name), "no row for {}", v.name);
    }
    // RoundRobin never steals; the stealing policies do on the imbalanced
    // scenario.
    for r in rows.iter().filter(|r| r[3] == "rr") {
        assert_eq!((r[8].as_str(), r[9].as_str()), ("0", "0"), "{r:?}");
    }
    let stolen: u64 = rows
        .iter()
        .filter(|r| r[0] == "queue_length/imbalanced" && r[3] != "rr")
        .map(|r| r[8].parse::<u64>().unwrap() + r[9].parse::<u64>().unwrap())
        .sum();
    assert!(stolen > 0, "no steals on the imbalanced scenario");
    let runs = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    assert_eq!(runs.lines().count(), rows.len() + 1);
    // Per run: units per worker add up to the fiber set's work (2 workers).
    let mut rl = runs.lines();
    let rh: Vec<&str> = rl.next().unwrap().split(',').collect();
    let rc = |name: &str| rh.iter().position(|c| *c == name).unwrap();
    for line in rl {
        let r: Vec<&str> = line.split(',').collect();
        let per: Vec<u64> = r[rc("units_per_worker")].split(';').map(|u| u.parse().unwrap()).collect();
        assert_eq!(per.len(), 2, "{line}");
        assert_eq!(*per.iter().max().unwrap(), r[rc("units_makespan")].parse::<u64>().unwrap(), "{line}");
        assert_eq!(r[rc("cpu_s_per_worker")].split(';').count(), 2, "{line}");
    }
    let f = "fig5_1_queue_length_units_wall.svg";
    let svg = std::fs::read_to_string(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
    assert!(svg.starts_with("<svg") && svg.contains("unit makespan") && svg.contains("wall time"), "{f}");
    for f in ["fig5_1_queue_length_time.svg", "fig5_2_queue_length_throughput.svg", "fig5_3_queue_length_steals.svg"] {
        let m = std::fs::metadata(dir.join(f)).unwrap_or_else(|e| panic!("{f}: {e}"));
        assert!(m.len() > 1000, "{f} is {} bytes", m.len());
        let svg = std::fs::read_to_string(dir.join(f)).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("nlh"), "{f}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_is_a_usage_error() {
    let cases: &[(&[&str], &str)] = &[
        (&["--policy", "fastest"], "unknown policy"),
        (&["--topology", "mesh:3"], "--topology"),
        (&["--topology", "xml:/nonexistent.xml"], "--topology"),
        (&["--size", "0"], "--size 0"),
        (&["--mults", "0"], "--mults 0"),
        (&["--runs", "x"], "not a number"),
        (&["--out", "/proc/numafiber-cannot-write-here"], "cannot write"),
        (&["--frobnicate"], "unknown argument"),
        (&["--sweep", "sideways"], "unknown sweep"),
        (&["--runs", "1001"], "at most 1000"),
        (&["--size", "100000"], "at most 4096"),
    ];
    for (a, want) in cases {
        match bench::run_cli(&args(a)) {
            Err(bench::CliError::Usage(m)) => assert!(m.contains(want), "{a:?}: {m}"),
            other => panic!("{a:?}: expected a usage error, got {other:?}"),
        }
    }
}

/// The bound is the exact optimum of small cases worked by hand.
#[test]
fn units_bound_matches_hand_computed_optima() {
    // The old defaults: 32 singles, 2 heavies of 100 on 2x1 imbalanced: one heavy
    // each, 24 singles on the fast worker, 8 (x3) on the slow one: 124.
    assert_eq!(bench::units_bound(&[true, false], 32, 2, 100, true), 124);
    // 64 singles, no thieves: T + T/3 >= 64 -> 48 (16 slow, 48 fast).
    assert_eq!(bench::units_bound(&[true, false], 64, 0, 100, true), 48);
    // Balanced: an even split.
    assert_eq!(bench::units_bound(&[true, false], 64, 0, 100, false), 32);
    assert_eq!(bench::units_bound(&[true, false], 63, 0, 100, false), 32);
    // A heavy cannot be split: 3 heavies on 2 workers take 2 x 100.
    assert_eq!(bench::units_bound(&[false, false], 0, 3, 100, false), 200);
    // Heavies go to the slow node, where they lose nothing.
    assert_eq!(bench::units_bound(&[true, false], 128, 2, 100, true), 196);
    assert_eq!(bench::units_bound(&[], 5, 1, 100, false), 0);
}

/// Order-statistic interval of the median: ranks 2 and 9 of 10 (97.9 %).
#[test]
fn median_interval_uses_order_statistics() {
    let xs: Vec<f64> = (1..=10).map(f64::from).collect();
    let (lo, hi, cov) = bench::median_ci(&xs);
    assert_eq!((lo, hi), (2.0, 9.0));
    assert!((cov - (1.0 - 2.0 * 11.0 / 1024.0)).abs() < 1e-12, "{cov}");
    // Three runs: min and max, 75 %.
    assert_eq!(bench::median_ci(&[3.0, 1.0, 2.0]), (1.0, 3.0, 0.75));
}

/// The default scenarios and the verdict line, on the smallest sizes:
/// the verdict compares the thesis' stealing policies with rr in units and
/// wall time and NLH's CV with rr's, against 38.88 % and 40.59 %.
#[test]
fn default_scenarios_print_a_verdict() {
    let dir = tmpdir("verdict");
    let d = dir.to_str().unwrap();
    let rep = bench::run_report(&args(&[
        "--topology",
        "uniform:2x1",
        "--imbalanced",
        "--size",
        "48",
        "--heavy-mults",
        "20",
        "--runs",
        "3",
        "--policy",
        "rr,numa,nlh",
        "--deterministic",
        "--out",
        d,
    ]))
    .expect("benchmark runs");
    let scen: Vec<&str> = rep.summaries.iter().map(|s| s.scenario.as_str()).collect();
    assert!(scen.contains(&"queue/imbalanced") && scen.contains(&"queue+thieves/imbalanced"), "{scen:?}");
    for s in &rep.summaries {
        assert_eq!(s.runs.len(), 3);
        // RoundRobin's placement is fixed with the deterministic spawn
        // order: 64 singles alternate, 32 x 3 units on node 0.
        if s.variant == "rr" && s.scenario == "queue/imbalanced" {
            assert!(s.runs.iter().all(|r| r.units_makespan() == 96), "{:?}", s.runs);
            assert_eq!(s.units_bound, 48);
        }
        if s.thieves > 0 {
            assert!(
                s.runs.iter().all(|r| r.heavy_workers.len() == 2 && r.heavy_workers.iter().all(|&w| w < 2)),
                "{:?}",
                s.runs
            );
        }
    }
    let v = rep.verdict.expect("a verdict");
    assert_eq!(v.points, 2);
    assert_eq!(v.policies, vec!["numa", "nlh"]);
    assert!(v.units_ci.0 <= v.units_gain && v.units_gain <= v.units_ci.1, "{v:?}");
    assert!(v.wall_ci.0 <= v.wall_gain && v.wall_gain <= v.wall_ci.1, "{v:?}");
    assert!(v.cv_gain.is_some(), "{v:?}");
    assert!(v.line.starts_with("verdict: stealing (numa,nlh) vs rr"), "{}", v.line);
    for want in ["units", "wall", "38.88%", "40.59%", "nlh CV"] {
        assert!(v.line.contains(want), "{want} missing: {}", v.line);
    }
    // The same verdict in words: what was compared, which way is good, the thesis' figures.
    for want in ["work units than round-robin", "38.88 %", "40.59 %", "coefficient of variation", "positive = smaller"]
    {
        assert!(v.words.contains(want), "{want} missing: {}", v.words);
    }
    assert!(["met", "missed", "cannot tell"].iter().any(|w| v.words.contains(w)), "{}", v.words);
    // The short answer: one row per policy and point, each non-baseline row
    // judged against round-robin on units and on wall time.
    for s in &rep.summaries {
        let row = rep
            .answer
            .lines()
            .find(|l| l.split_whitespace().next() == Some(s.variant) && l.contains(&format!("{:.1}", s.units_makespan)))
            .unwrap_or_else(|| panic!("no answer row for {} {}:\n{}", s.scenario, s.variant, rep.answer));
        let judged = ["better", "worse", "inside the noise"].iter().map(|w| row.matches(w).count()).sum::<usize>();
        assert_eq!(judged, if s.variant == "rr" { 0 } else { 2 }, "{row}");
    }
    assert!(rep.answer.contains("best possible schedule 48 units"), "{}", rep.answer);
    // The estimate came from a measured multiplication, not a constant.
    assert!(rep.work_cost.mult_s > 0.0 && rep.work_cost.mult_s.is_finite(), "{:?}", rep.work_cost);
    assert!(
        rep.estimate_s > 0.0 && rep.estimate_s.is_finite() && rep.elapsed_s > 0.0,
        "{} {}",
        rep.estimate_s,
        rep.elapsed_s
    );
    let file = std::fs::read_to_string(dir.join("verdict.txt")).unwrap();
    assert_eq!(file.trim_end(), v.line);
    let cal = rep.calibration.expect("calibrated");
    assert!(cal.mult_ns > 0 && cal.wake_ns > 0, "{cal:?}");
    assert_eq!(rep.sim_vs_real.len(), 2 * 3);
    let svg = std::fs::read_to_string(dir.join("default_units_wall.svg")).unwrap();
    assert!(svg.contains("unit makespan"));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Better / worse / inside the noise: from the overlap of the two medians'
/// intervals, and the direction of the medians (smaller is better).
#[test]
fn comparison_with_round_robin_follows_the_intervals() {
    use bench::Compared;
    assert_eq!(Compared::of(96.0, (96.0, 96.0), 50.0, (48.0, 51.0)), Compared::Better);
    assert_eq!(Compared::of(50.0, (48.0, 51.0), 96.0, (96.0, 96.0)), Compared::Worse);
    assert_eq!(Compared::of(0.72, (0.71, 0.74), 0.70, (0.58, 0.85)), Compared::Noise);
    // Touching intervals cannot tell the two apart either.
    assert_eq!(Compared::of(1.0, (0.9, 1.1), 1.2, (1.1, 1.3)), Compared::Noise);
    assert_eq!(Compared::Noise.word(), "inside the noise");
}
