//! The irregular dynamic program of NABBIT Eq. (2) (Smith-Waterman with a
//! general gap penalty, Θ(n³) work), blocked B×B, with five executions
//! that share one block kernel: serial, NABBIT static graph, NABBIT
//! dynamic graph, wavefront, and divide-and-conquer with K parts per
//! dimension. Shared by `examples/smith_waterman.rs` and `tests/graph.rs`.
//!
//! ```text
//! E(i,j) = max_{k<i} M(k,j) + γ(i-k)
//! F(i,j) = max_{k<j} M(i,k) + γ(j-k)
//! M(i,j) = max( M(i-1,j-1) + s(i,j), E(i,j), F(i,j) )     (M(-1,·) = M(·,-1) = 0)
//! ```
#![allow(dead_code)]

use std::sync::{Arc, OnceLock};

use numafiber::fiber;
use numafiber::graph::{DynamicExecutor, DynamicGraph, StaticGraph};

/// Below any reachable score; adding a gap penalty cannot overflow.
pub const NEG: i32 = i32::MIN / 4;

/// Inputs of one instance.
pub struct Problem {
    pub n: usize,
    a: Vec<u8>,
    b: Vec<u8>,
    /// γ(z) for z in 0..=n.
    gamma: Vec<i32>,
    /// grev[x] = γ(n - x): γ(i - k) = grev[n - i + k], ascending in k.
    grev: Vec<i32>,
}

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Problem {
    /// Random sequences over a 4-letter alphabet; an irregular (non-affine)
    /// gap penalty.
    pub fn random(n: usize, seed: u64) -> Problem {
        let mut st = seed;
        let a = (0..n).map(|_| (splitmix(&mut st) % 4) as u8).collect();
        let b = (0..n).map(|_| (splitmix(&mut st) % 4) as u8).collect();
        let gamma: Vec<i32> = (0..=n)
            .map(|z| -(3 + (usize::BITS - z.leading_zeros()) as i32 + (z / 16) as i32 + (splitmix(&mut st) % 3) as i32))
            .collect();
        let grev = (0..=n).map(|x| gamma[n - x]).collect();
        Problem { n, a, b, gamma, grev }
    }
    #[inline]
    fn s(&self, i: usize, j: usize) -> i32 {
        if self.a[i] == self.b[j] {
            2
        } else {
            -1
        }
    }
    /// γ(i - k) for k = k0, k0+1, ... (for `len` values).
    #[inline]
    fn gammas(&self, i: usize, k0: usize, len: usize) -> &[i32] {
        let x = self.n - i + k0;
        &self.grev[x..x + len]
    }
}

/// max_t vals[t] + g[t]
#[inline]
fn max_plus(vals: &[i32], g: &[i32]) -> i32 {
    vals.iter().zip(g).map(|(a, b)| a + b).fold(NEG, i32::max)
}

/// Unblocked reference, straight from Eq. (2). Row-major n×n.
pub fn reference(p: &Problem) -> Vec<i32> {
    let n = p.n;
    let mut m = vec![0i32; n * n];
    for i in 0..n {
        for j in 0..n {
            let diag = if i > 0 && j > 0 { m[(i - 1) * n + j - 1] } else { 0 };
            let mut best = diag + p.s(i, j);
            for k in 0..i {
                best = best.max(m[k * n + j] + p.gamma[i - k]);
            }
            for k in 0..j {
                best = best.max(m[i * n + k] + p.gamma[j - k]);
            }
            m[i * n + j] = best;
        }
    }
    m
}

/// The blocked matrix: each block once row-major and once column-major,
/// so that both the row scans (F) and the column scans (E) are contiguous.
/// Written once per block (OnceLock), read by later blocks.
pub struct Blocks {
    pub n: usize,
    pub b: usize,
    pub nb: usize,
    rows: Vec<OnceLock<Box<[i32]>>>,
    cols: Vec<OnceLock<Box<[i32]>>>,
}

impl Blocks {
    pub fn new(n: usize, b: usize) -> Blocks {
        let nb = n.div_ceil(b);
        Blocks {
            n,
            b,
            nb,
            rows: (0..nb * nb).map(|_| OnceLock::new()).collect(),
            cols: (0..nb * nb).map(|_| OnceLock::new()).collect(),
        }
    }
    fn dim(&self, bi: usize) -> usize {
        self.b.min(self.n - bi * self.b)
    }
    fn row_major(&self, bi: usize, bj: usize) -> &[i32] {
        self.rows[bi * self.nb + bj].get().expect("block computed before its dependents")
    }
    fn col_major(&self, bi: usize, bj: usize) -> &[i32] {
        self.cols[bi * self.nb + bj].get().expect("block computed before its dependents")
    }
    /// M(i, j) from a finished block.
    pub fn get(&self, i: usize, j: usize) -> i32 {
        let (bi, bj) = (i / self.b, j / self.b);
        self.row_major(bi, bj)[(i % self.b) * self.dim(bj) + j % self.b]
    }
    /// M(n-1, n-1).
    pub fn corner(&self) -> i32 {
        self.get(self.n - 1, self.n - 1)
    }
    /// The whole matrix, row-major.
    pub fn to_matrix(&self) -> Vec<i32> {
        let n = self.n;
        (0..n * n).map(|x| self.get(x / n, x % n)).collect()
    }
}

/// Compute block (bi, bj); blocks above and to the left must be done.
pub fn compute_block(p: &Problem, st: &Blocks, bi: usize, bj: usize) {
    let (r0, c0) = (bi * st.b, bj * st.b);
    let (h, w) = (st.dim(bi), st.dim(bj));
    let mut m = vec![0i32; h * w]; // row-major
    let mut mt = vec![0i32; h * w]; // column-major
    for i in 0..h {
        let gi = r0 + i;
        for j in 0..w {
            let gj = c0 + j;
            let diag = if gi > 0 && gj > 0 {
                if i > 0 && j > 0 {
                    m[(i - 1) * w + j - 1]
                } else {
                    st.get(gi - 1, gj - 1)
                }
            } else {
                0
            };
            let mut best = diag + p.s(gi, gj);
            // E: column gj, rows k < gi: blocks above, then this block.
            for bk in 0..bi {
                let hk = st.dim(bk);
                let col = &st.col_major(bk, bj)[j * hk..(j + 1) * hk];
                best = best.max(max_plus(col, p.gammas(gi, bk * st.b, hk)));
            }
            best = best.max(max_plus(&mt[j * h..j * h + i], p.gammas(gi, r0, i)));
            // F: row gi, columns k < gj: blocks to the left, then this block.
            for bk in 0..bj {
                let wk = st.dim(bk);
                let row = &st.row_major(bi, bk)[i * wk..(i + 1) * wk];
                best = best.max(max_plus(row, p.gammas(gj, bk * st.b, wk)));
            }
            best = best.max(max_plus(&m[i * w..i * w + j], p.gammas(gj, c0, j)));
            m[i * w + j] = best;
            mt[j * h + i] = best;
        }
    }
    let k = bi * st.nb + bj;
    let _ = st.rows[k].set(m.into_boxed_slice());
    let _ = st.cols[k].set(mt.into_boxed_slice());
}

/// Serial: blocks in row-major order.
pub fn serial(p: &Problem, b: usize) -> Blocks {
    let st = Blocks::new(p.n, b);
    for bi in 0..st.nb {
        for bj in 0..st.nb {
            compute_block(p, &st, bi, bj);
        }
    }
    st
}

/// NABBIT, static graph: one node per block, depending on the blocks above
/// and to the left (transitivity covers the rest of the row and column).
pub fn nabbit_static(p: &Arc<Problem>, b: usize) -> Arc<Blocks> {
    let st = Arc::new(Blocks::new(p.n, b));
    let nb = st.nb;
    let mut g = StaticGraph::new();
    let mut ids = Vec::with_capacity(nb * nb);
    for bi in 0..nb {
        for bj in 0..nb {
            let (p, st) = (p.clone(), st.clone());
            ids.push(g.add_node(move |_| compute_block(&p, &st, bi, bj)));
        }
    }
    for bi in 0..nb {
        for bj in 0..nb {
            let me = ids[bi * nb + bj];
            if bi > 0 {
                g.add_dep(me, ids[(bi - 1) * nb + bj]).expect("valid block ids");
            }
            if bj > 0 {
                g.add_dep(me, ids[bi * nb + bj - 1]).expect("valid block ids");
            }
        }
    }
    g.execute().expect("the block graph is acyclic and computes do not panic");
    st
}

/// NABBIT, dynamic graph: keys are block coordinates, discovered backwards
/// from the last block.
pub struct SwGraph {
    pub p: Arc<Problem>,
    pub st: Arc<Blocks>,
}

impl DynamicGraph for SwGraph {
    type Key = (u32, u32);
    type Output = ();
    fn init(&self, &(bi, bj): &(u32, u32), deps: &mut Vec<(u32, u32)>) {
        if bi > 0 {
            deps.push((bi - 1, bj));
        }
        if bj > 0 {
            deps.push((bi, bj - 1));
        }
    }
    fn compute(&self, &(bi, bj): &(u32, u32), _: &[((u32, u32), &())]) {
        compute_block(&self.p, &self.st, bi as usize, bj as usize);
    }
}

pub fn nabbit_dynamic(p: &Arc<Problem>, b: usize) -> Arc<Blocks> {
    let st = Arc::new(Blocks::new(p.n, b));
    let last = (st.nb - 1) as u32;
    let ex = DynamicExecutor::new(SwGraph { p: p.clone(), st: st.clone() });
    ex.execute((last, last)).expect("the block graph is acyclic and computes do not panic");
    st
}

/// Run `f(i)` for i in lo..hi in parallel (binary fork-join tree).
fn par_for(lo: usize, hi: usize, f: &(dyn Fn(usize) + Sync)) {
    if hi - lo == 1 {
        f(lo);
    } else if hi > lo {
        let mid = lo + (hi - lo) / 2;
        fiber::join(|| par_for(lo, mid, f), || par_for(mid, hi, f));
    }
}

/// Wavefront: block antidiagonals in order, each one's blocks in parallel.
pub fn wavefront(p: &Problem, b: usize) -> Blocks {
    let st = Blocks::new(p.n, b);
    let nb = st.nb;
    for d in 0..2 * nb - 1 {
        let lo = d.saturating_sub(nb - 1);
        let hi = d.min(nb - 1) + 1;
        par_for(lo, hi, &|bi| compute_block(p, &st, bi, d - bi));
    }
    st
}

/// Divide and conquer: split the block grid into K×K parts, run the parts'
/// antidiagonals in order, the parts of one antidiagonal in parallel,
/// recursively. K=2: upper-left; lower-left ‖ upper-right; lower-right.
pub fn divide_conquer(p: &Problem, b: usize, k: usize) -> Blocks {
    let st = Blocks::new(p.n, b);
    dc(p, &st, k, 0, st.nb, 0, st.nb);
    st
}

fn splits(lo: usize, hi: usize, k: usize) -> Vec<usize> {
    let parts = k.min(hi - lo);
    (0..=parts).map(|x| lo + (hi - lo) * x / parts).collect()
}

fn dc(p: &Problem, st: &Blocks, k: usize, r0: usize, r1: usize, c0: usize, c1: usize) {
    if r1 - r0 == 1 && c1 - c0 == 1 {
        compute_block(p, st, r0, c0);
        return;
    }
    let rs = splits(r0, r1, k);
    let cs = splits(c0, c1, k);
    let (kr, kc) = (rs.len() - 1, cs.len() - 1);
    for d in 0..kr + kc - 1 {
        let lo = d.saturating_sub(kc - 1);
        let hi = d.min(kr - 1) + 1;
        par_for(lo, hi, &|x| {
            let y = d - x;
            dc(p, st, k, rs[x], rs[x + 1], cs[y], cs[y + 1]);
        });
    }
}
