//! The smallest numafiber program: a runtime, a few fibers, their results.
//!
//! `cargo run --release --example hello`

use numafiber::{fiber, Runtime};

fn main() -> Result<(), numafiber::BuildError> {
    let rt = Runtime::new()?;
    let lines = rt.block_on(|| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                fiber::spawn(move || {
                    fiber::yield_now();
                    let me = fiber::current().expect("inside a fiber");
                    format!("hello from fiber {i} (id {}) on worker {} / node {}", me.id, me.worker, me.node)
                })
            })
            .collect();
        fiber::when_all(hs)
    });
    for l in lines {
        println!("{l}");
    }
    let s = rt.stats();
    println!("{} fibers spawned, {} completed, policy {:?}, topology {}", s.spawned, s.completed, s.policy, s.topology);
    Ok(())
}
