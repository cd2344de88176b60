//! The grouped form of a dump: fibers folded by state, wait kind and call
//! sites, with counts, largest groups first.

use std::collections::HashMap;
use std::fmt;
use std::panic::Location;

use super::{Dump, FiberState, WaitKind};

/// Most groups printed; the rest are summed on one line.
pub(crate) const MAX_GROUPS: usize = 60;

/// [`Dump::grouped`]: fibers by state, wait and call site, with counts.
///
/// Each line reads `COUNT fibers STATE[: WAIT] [waiting at SITE]
/// [spawned at SITE]`, largest group first; at most 60 groups
/// are printed, so the form stays under 70 lines for any number of fibers.
pub struct Grouped<'a> {
    dump: &'a Dump,
}

type Site = Option<&'static Location<'static>>;

/// A group's key with its sites by address (`Grouped::groups`).
type PtrKey = (FiberState, Option<WaitKind>, usize, usize);

#[derive(PartialEq, Eq, Hash, Clone, Copy)]
struct Key {
    state: FiberState,
    wait: Option<WaitKind>,
    wait_site: Site,
    spawn_site: Site,
}

impl<'a> Grouped<'a> {
    pub(super) fn new(dump: &'a Dump) -> Grouped<'a> {
        Grouped { dump }
    }

    /// The groups, largest first: (count, state, wait kind, wait site,
    /// spawn site).
    fn groups(&self) -> Vec<(usize, Key)> {
        // Counted by the sites' addresses first (cheap to hash, and
        // neighbours in id order mostly share a key), then merged by value:
        // one call site may have more than one `Location`.
        let ptr = |s: Site| s.map_or(0, |l| l as *const Location<'static> as usize);
        let mut by_ptr: HashMap<PtrKey, (usize, Key)> = HashMap::new();
        let mut last: Option<(PtrKey, usize)> = None;
        for f in &self.dump.fibers {
            let wait = f.wait.map(|w| w.kind);
            let p = (f.state, wait, ptr(f.wait_site), ptr(f.spawn_site));
            match &mut last {
                Some((q, n)) if *q == p => *n += 1,
                _ => {
                    if let Some(e) = last.take().and_then(|(q, n)| Some((by_ptr.get_mut(&q)?, n))) {
                        e.0 .0 += e.1;
                    }
                    by_ptr
                        .entry(p)
                        .or_insert((0, Key { state: f.state, wait, wait_site: f.wait_site, spawn_site: f.spawn_site }));
                    last = Some((p, 1));
                }
            }
        }
        if let Some(e) = last.and_then(|(q, n)| Some((by_ptr.get_mut(&q)?, n))) {
            e.0 .0 += e.1;
        }
        let mut m: HashMap<Key, usize> = HashMap::new();
        for (n, k) in by_ptr.into_values() {
            *m.entry(k).or_insert(0) += n;
        }
        let mut v: Vec<(usize, Key)> = m.into_iter().map(|(k, n)| (n, k)).collect();
        v.sort_by(|a, b| {
            b.0.cmp(&a.0)
                .then(a.1.state.cmp(&b.1.state))
                .then(a.1.wait.cmp(&b.1.wait))
                .then(site_key(a.1.wait_site).cmp(&site_key(b.1.wait_site)))
                .then(site_key(a.1.spawn_site).cmp(&site_key(b.1.spawn_site)))
        });
        v
    }

    /// Number of groups (before the cut at 60).
    pub fn len(&self) -> usize {
        self.groups().len()
    }

    /// No fiber listed.
    pub fn is_empty(&self) -> bool {
        self.dump.fibers.is_empty()
    }
}

fn site_key(s: Site) -> (&'static str, u32, u32) {
    s.map_or(("", 0, 0), |l| (l.file(), l.line(), l.column()))
}

impl fmt::Display for Grouped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = self.dump;
        let groups = self.groups();
        writeln!(
            f,
            "numafiber: {} fibers listed in {} groups, {} runnable not listed; workers: {}",
            d.fibers.len(),
            groups.len(),
            d.not_listed,
            d.workers
                .iter()
                .map(|w| match w.running {
                    Some(id) if w.held => format!("{}: fiber {id} [held]", w.index),
                    Some(id) => format!("{}: fiber {id}", w.index),
                    None => format!(
                        "{}: {}",
                        w.index,
                        if w.activity == super::WorkerActivity::Parked { "parked" } else { "searching" }
                    ),
                })
                .collect::<Vec<_>>()
                .join(", ")
        )?;
        for (n, k) in groups.iter().take(MAX_GROUPS) {
            write!(f, "  {n:>8} {}", k.state)?;
            if let Some(w) = k.wait {
                write!(f, ": {w}")?;
            }
            if let Some(l) = k.wait_site {
                write!(f, ", waiting at {l}")?;
            }
            match k.spawn_site {
                Some(l) => write!(f, ", spawned at {l}")?,
                None => write!(f, ", spawned by the runtime")?,
            }
            writeln!(f)?;
        }
        if groups.len() > MAX_GROUPS {
            let rest: usize = groups[MAX_GROUPS..].iter().map(|g| g.0).sum();
            writeln!(f, "  {rest:>8} fibers in {} smaller groups", groups.len() - MAX_GROUPS)?;
        }
        Ok(())
    }
}
