//! Nothing to link: this package holds the benchmarks (`benches/`) and the
//! programs (`examples/`) that measure numafiber against its peers. See
//! `README.md` beside this file.
