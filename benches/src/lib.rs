//! Nothing to link: this package holds the criterion benchmarks (the `.rs`
//! files beside `Cargo.toml`) and the programs (`examples/`) that measure
//! numafiber against its peers. See `README.md` beside this file.
