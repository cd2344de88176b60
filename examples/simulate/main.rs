//! The policy simulator's command line: the thesis benchmark (and three
//! more workloads) on machines we do not have, with `thesis_bench`'s table,
//! CSV columns and figures. See `cli.rs` and `--help`.
//!
//! ```text
//! cargo run --release --example simulate -- --topology uniform:8x16 --distances epyc --imbalanced --mults 512
//! cargo run --release --example simulate -- --topology uniform:2x1 --imbalanced --size 200 --runs 3
//! cargo run --release --example simulate -- --topology uniform:8x16 --distances epyc --sweep all --out sim-out
//! cargo run --release --example simulate -- --workload producer --sweep nodes
//! ```

#[path = "../thesis_bench/bench.rs"]
#[allow(dead_code)]
mod bench;
mod cli;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match cli::run_cli(&args) {
        Ok(()) => {}
        Err(bench::CliError::Help) => println!("{}", cli::USAGE),
        Err(bench::CliError::Usage(msg)) => {
            eprintln!("simulate: {msg}\n{}", cli::USAGE_LINE);
            std::process::exit(2);
        }
    }
}
