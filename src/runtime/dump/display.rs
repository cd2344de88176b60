//! How a dump reads: the `Display` of a dump, its nodes, workers and
//! fibers (one block per fiber, in the spirit of Go's goroutine dump), and
//! the duration and size formats they share with the stall report.

use std::fmt;
use std::time::Duration;

use super::*;

/// A duration printed the way a person reads it.
pub(crate) struct Secs(pub(crate) Duration);

impl fmt::Display for Secs {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0.as_secs_f64();
        if s >= 1.0 {
            write!(f, "{s:.2} s")
        } else if s >= 1e-3 {
            write!(f, "{:.0} ms", s * 1e3)
        } else {
            write!(f, "{:.0} us", s * 1e6)
        }
    }
}

/// Bytes in KiB/MiB.
struct Bytes(usize);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 >= 1 << 20 {
            write!(f, "{:.1} MiB", self.0 as f64 / (1u64 << 20) as f64)
        } else {
            write!(f, "{} KiB", self.0 >> 10)
        }
    }
}

impl fmt::Display for Dump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let count = |s| self.fibers.iter().filter(|x| x.state == s).count();
        writeln!(
            f,
            "numafiber dump of runtime {:?}: {} fibers listed ({} running, {} runnable, {} parked), {} runnable not listed; {} workers, {} node{}; taken in {}{}",
            self.runtime,
            self.fibers.len(),
            count(FiberState::Running),
            count(FiberState::Runnable),
            count(FiberState::Parked),
            self.not_listed,
            self.workers.len(),
            self.nodes.len(),
            if self.nodes.len() == 1 { "" } else { "s" },
            Secs(self.took),
            if self.shut_down { " (the runtime is shut down)" } else { "" },
        )?;
        writeln!(f)?;
        for n in &self.nodes {
            writeln!(f, "{n}")?;
        }
        for w in &self.workers {
            writeln!(f, "{w}")?;
        }
        for x in &self.fibers {
            writeln!(f)?;
            write!(f, "{x}")?;
        }
        Ok(())
    }
}

impl fmt::Display for NodeDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "node {}: workers {:?}; NLH workload {}, placements {}",
            self.node, self.workers, self.workload, self.placements
        )
    }
}

impl fmt::Display for WorkerDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "worker {} (node {}, cpu {}): ", self.index, self.node, self.cpu)?;
        match (self.activity, self.running) {
            (WorkerActivity::Running, Some(id)) => {
                write!(f, "running fiber {id}")?;
                if let Some(d) = self.running_for {
                    write!(f, " for {}", Secs(d))?;
                }
            }
            (WorkerActivity::Running, None) => f.write_str("running a fiber")?,
            (WorkerActivity::Searching, _) => f.write_str("searching")?,
            (WorkerActivity::Parked, _) => f.write_str("parked")?,
        }
        if self.held {
            f.write_str(" [held]")?;
        }
        write!(
            f,
            "; deque {}, slots {}, inbox {}, pinned {}, timers {}",
            self.deque, self.slots, self.inbox, self.pinned, self.timers
        )
    }
}

impl fmt::Display for FiberDump {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fiber {}", self.id)?;
        if let Some(n) = &self.name {
            write!(f, " {n:?}")?;
        }
        write!(f, " [{}", self.state)?;
        if let Some(w) = &self.wait {
            write!(f, ": {w}")?;
        }
        if let Some(d) = self.running_for {
            write!(f, ", {}", Secs(d))?;
        }
        writeln!(f, "]:")?;
        if let Some(l) = self.wait_site {
            writeln!(f, "    waiting at {l}")?;
        }
        if let Some(l) = self.spawn_site {
            writeln!(f, "    spawned at {l}")?;
        }
        if let Some(b) = self.backtrace() {
            writeln!(f, "    backtrace of the wait:")?;
            trace::write_trimmed(f, b, "    ")?;
        }
        write!(f, "    worker {} (node {})", self.worker, self.node)?;
        match (self.stack_node, self.stack_touched) {
            (Some(n), Some(b)) => write!(f, "; stack on node {n}, {} touched", Bytes(b))?,
            (None, Some(b)) => write!(f, "; stack {} touched", Bytes(b))?,
            _ => f.write_str("; no stack yet")?,
        }
        if let Some(a) = self.age {
            write!(f, "; age {}", Secs(a))?;
        }
        writeln!(f, "; migrated {} local, {} remote", self.migrated.0, self.migrated.1)
    }
}
