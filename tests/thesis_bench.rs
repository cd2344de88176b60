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
        "--quick", "--runs", "1", "--sweep", "queue", "--topology", "uniform:2x1", "--size", "96", "--out", d,
    ]))
    .expect("benchmark runs");
    let summary = std::fs::read_to_string(dir.join("summary.csv")).unwrap();
    let mut lines = summary.lines();
    assert_eq!(
        lines.next(),
        Some("scenario,param,value,policy,runs,median_s,cv,throughput,local_steals,remote_steals")
    );
    let rows: Vec<Vec<String>> = lines.map(|l| l.split(',').map(str::to_string).collect()).collect();
    assert!(!rows.is_empty());
    for r in &rows {
        assert_eq!(r.len(), 10, "{r:?}");
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
    ];
    for (a, want) in cases {
        match bench::run_cli(&args(a)) {
            Err(bench::CliError::Usage(m)) => assert!(m.contains(want), "{a:?}: {m}"),
            other => panic!("{a:?}: expected a usage error, got {other:?}"),
        }
    }
}
