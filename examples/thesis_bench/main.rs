//! The thesis benchmark (section 5.1 of the thesis): the
//! project's main job. See `bench.rs` for the workload and `--help` for the
//! options.
//!
//! ```text
//! cargo run --release --example thesis_bench                  # all policies, detected machine
//! cargo run --release --example thesis_bench -- --topology uniform:2x1 --imbalanced
//! cargo run --release --example thesis_bench -- --sweep all --out bench-out
//! cargo run --release --example thesis_bench -- --quick --out /tmp/tb
//! ```

mod bench;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match bench::run_cli(&args) {
        Ok(()) => {}
        Err(bench::CliError::Help) => println!("{}", bench::USAGE),
        Err(bench::CliError::Usage(msg)) => {
            eprintln!("thesis_bench: {msg}\n{}", bench::USAGE_LINE);
            std::process::exit(2);
        }
    }
}
