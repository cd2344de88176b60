//! The note that examples printing timings add to their output.

/// Say on stderr that the timings printed measure this machine at this
/// moment, with its load average: on a loaded machine they are noise, and
/// only programs measured side by side in one run compare.
pub fn print() {
    let load = std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "unknown".to_string());
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!(
        "note: these timings measure this machine now (load average {load} on {cpus} CPU(s)); \
         on a loaded machine they are noise"
    );
}
