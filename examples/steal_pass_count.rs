//! N failed steal passes of one thief through the policy alone
//! (`Scheduler::victims` walked to the end, every attempt recorded as a
//! failure, the thief's own status flipped around each pass), for
//! instruction counts under callgrind (no timing):
//!
//! ```text
//! cargo build --release --example steal_pass_count
//! scripts/callgrind-ops.sh 100000 200000 target/release/examples/steal_pass_count {N} uniform:2x1 nlh
//! ```
//!
//! Arguments: passes, topology description (one worker per PU), policy.
//! Prints how many victims were tried.

use numafiber::policy::{PolicyOptions, Scheduler};
use numafiber::{Policy, Topology};

fn main() {
    let mut args = std::env::args().skip(1);
    let passes: u64 = args.next().and_then(|s| s.parse().ok()).unwrap_or(100_000);
    let topo = Topology::parse(&args.next().unwrap_or_else(|| "uniform:2x1".into())).expect("topology");
    let policy: Policy = args.next().map(|s| s.parse().expect("policy")).unwrap_or_default();
    let worker_node = topo.plan_workers(topo.num_pus(), false).expect("plan").iter().map(|s| s.node).collect();
    let s = Scheduler::new(policy, PolicyOptions::default(), worker_node, &topo);
    let mut st = s.new_thief_state(0, 1);
    let mut tried = 0u64;
    for _ in 0..passes {
        s.set_own_status(0, &st, false);
        let mut victims = s.victims(0, &mut st);
        while let Some(v) = victims.next() {
            tried += std::hint::black_box(v) as u64 & 1 | 1;
            victims.record_steal(v, false);
        }
        s.set_own_status(0, &st, true);
    }
    println!("{tried} victims tried");
}
