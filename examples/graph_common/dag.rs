//! The random task graph of NABBIT Sec. VI, as a static and a dynamic
//! graph. Shared by `examples/random_dag.rs` and `tests/graph.rs`.
//!
//! Sink A0 has key 0. For k = 0..U-1, if A_k exists: pick d_k uniformly in
//! [1, Δi], draw d_k keys uniformly from [k+1, U], drop duplicates, and
//! make A_k depend on each (creating it). Every node computes k^W mod p by
//! repeated multiplication (serially, or split in halves with
//! `fiber::join` down to W = 25) and adds its predecessors' outputs.
#![allow(dead_code)]

use std::sync::Arc;

use numafiber::fiber;
use numafiber::graph::{DynamicGraph, NodeId, StaticGraph};

/// A fixed 32-bit prime.
pub const P: u64 = 4_294_967_291;

/// One random DAG: `deps[k]` are the keys A_k depends on (`None`: no node).
pub struct Dag {
    pub u: usize,
    pub deps: Vec<Option<Vec<u32>>>,
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Dag {
    pub fn generate(delta_i: usize, u: usize, seed: u64) -> Dag {
        let mut st = seed;
        let mut deps: Vec<Option<Vec<u32>>> = vec![None; u + 1];
        deps[0] = Some(Vec::new());
        for k in 0..u {
            if deps[k].is_none() {
                continue;
            }
            let d = 1 + (splitmix(&mut st) % delta_i as u64) as usize;
            let mut s: Vec<u32> = (0..d).map(|_| (k as u64 + 1 + splitmix(&mut st) % (u - k) as u64) as u32).collect();
            s.sort_unstable();
            s.dedup();
            for &x in &s {
                if deps[x as usize].is_none() {
                    deps[x as usize] = Some(Vec::new());
                }
            }
            deps[k] = Some(s);
        }
        Dag { u, deps }
    }
    pub fn nodes(&self) -> usize {
        self.deps.iter().flatten().count()
    }
    pub fn edges(&self) -> usize {
        self.deps.iter().flatten().map(Vec::len).sum()
    }
    /// Nodes on the longest path (M).
    pub fn longest_path(&self) -> usize {
        // Keys only depend on larger keys: process from U down.
        let mut depth = vec![0usize; self.u + 1];
        let mut best = 0;
        for k in (0..=self.u).rev() {
            if let Some(d) = &self.deps[k] {
                depth[k] = 1 + d.iter().map(|&x| depth[x as usize]).max().unwrap_or(0);
                best = best.max(depth[k]);
            }
        }
        best
    }
}

/// k^w mod P by repeated multiplication.
pub fn work_serial(k: u64, w: u64) -> u64 {
    let mut x = 1u64;
    for _ in 0..w {
        x = x * (k % P + 1) % P;
    }
    x
}

/// The same value, with the multiplications split in halves in parallel.
pub fn work_parallel(k: u64, w: u64) -> u64 {
    if w <= 25 {
        return work_serial(k, w);
    }
    let (a, b) = fiber::join(|| work_parallel(k, w / 2), || work_parallel(k, w - w / 2));
    a * b % P
}

pub fn node_value(k: u64, w: u64, par: bool, preds: impl Iterator<Item = u64>) -> u64 {
    let own = if par { work_parallel(k, w) } else { work_serial(k, w) };
    preds.fold(own, |acc, v| (acc + v) % P)
}

/// The static version: node ids per key (`ids[k]`) and the graph.
pub fn build_static(dag: &Dag, w: u64, par: bool) -> (StaticGraph<u64>, Vec<Option<NodeId>>) {
    let mut g = StaticGraph::new();
    let mut ids = vec![None; dag.u + 1];
    for (k, d) in dag.deps.iter().enumerate() {
        if d.is_some() {
            ids[k] = Some(g.add_node(move |inp| node_value(k as u64, w, par, inp.values().copied())));
        }
    }
    for (k, d) in dag.deps.iter().enumerate() {
        if let Some(d) = d {
            for &x in d {
                g.add_dep(ids[k].unwrap(), ids[x as usize].unwrap()).expect("valid ids");
            }
        }
    }
    (g, ids)
}

/// The dynamic version: `init` returns the generated dependencies.
pub struct DagGraph {
    pub deps: Arc<Vec<Option<Vec<u32>>>>,
    pub w: u64,
    pub par: bool,
}

impl DynamicGraph for DagGraph {
    type Key = u32;
    type Output = u64;
    fn init(&self, k: &u32, deps: &mut Vec<u32>) {
        if let Some(d) = &self.deps[*k as usize] {
            deps.extend_from_slice(d);
        }
    }
    fn compute(&self, k: &u32, preds: &[(u32, &u64)]) -> u64 {
        node_value(*k as u64, self.w, self.par, preds.iter().map(|(_, v)| **v))
    }
}
