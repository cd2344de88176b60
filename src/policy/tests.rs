//! Scheduler-level tests: the pure functions wired to topology, atomics and
//! per-thief state, driven without threads.
use super::*;
