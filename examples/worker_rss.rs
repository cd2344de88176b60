//! Resident memory per worker thread: build a runtime of N workers, make
//! every worker steal (4 x N short fibers spawned from one fiber), let it
//! settle, and print the growth of `VmRSS` divided by N.
//!
//! ```text
//! cargo build --release --example worker_rss
//! target/release/examples/worker_rss 1024                 # detected topology, Nlh
//! target/release/examples/worker_rss 1024 uniform:4x256 random
//! ```
//!
//! Arguments: worker count (default 256), topology description
//! (`Topology::parse`, default: this machine), policy name (default `nlh`).
//! Run one N per process: memory freed by one runtime stays in the
//! allocator and would hide the next one's growth. Output, one line:
//! `workers N  topology T  policy P  rss_before_kib B  rss_after_kib A  per_worker_kib X`.

use numafiber::{fiber, Policy, Runtime, Topology};

/// `VmRSS` of this process, in KiB.
fn rss_kib() -> u64 {
    let s = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmRSS line")
}

fn main() {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map(|s| s.parse().expect("worker count")).unwrap_or(256);
    let topo = match args.next() {
        Some(d) => Topology::parse(&d).unwrap_or_else(|e| panic!("topology: {e}")),
        None => Topology::detect().expect("detect topology"),
    };
    let policy: Policy = args.next().map(|s| s.parse().expect("policy")).unwrap_or_default();
    let desc = topo.description().to_string();
    // Pay one-time costs (thread-local set-up, first runtime) before the
    // baseline.
    Runtime::builder().workers(1).topology(topo.clone()).build().expect("warm-up runtime").block_on(|| ());
    std::thread::sleep(std::time::Duration::from_millis(100));
    let before = rss_kib();
    let rt = Runtime::builder().workers(n).topology(topo).policy(policy).build().expect("runtime");
    let total = rt.block_on(move || {
        let hs: Vec<_> = (0..4 * n as u64).map(|i| fiber::spawn(move || std::hint::black_box(i))).collect();
        hs.into_iter().map(|h| h.join().unwrap()).sum::<u64>()
    });
    let m = 4 * n as u64;
    assert_eq!(total, m * (m - 1) / 2);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let after = rss_kib();
    let st = rt.stats();
    let steals = st.local_steals + st.remote_steals + st.failed_steals;
    println!(
        "workers {n}  topology {desc}  policy {policy}  rss_before_kib {before}  rss_after_kib {after}  per_worker_kib {:.1}  steal_attempts {steals}",
        after.saturating_sub(before) as f64 / n as f64
    );
    drop(rt);
}
