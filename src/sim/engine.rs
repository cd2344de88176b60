//! The simulator's engine: a discrete-event model of the workers, their
//! deques, steals and parking, driven by the same `policy::Scheduler` as
//! the runtime.

use super::*;

/// splitmix64: the simulator's own seeded stream (cost jitter, DAGs).
#[derive(Debug, Clone)]
pub(crate) struct SplitMix(u64);

impl SplitMix {
    pub(crate) fn new(seed: u64) -> SplitMix {
        SplitMix(seed)
    }
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in `[0, 1)`.
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Every this many loop iterations the inbox is served first (as
/// `worker::FAIRNESS_TICKS`).
const FAIRNESS_TICKS: u32 = 61;
/// Crossbeam's `Injector::steal_batch_and_pop` takes at most this many.
const INBOX_BATCH: usize = 33;
const NONE: usize = usize::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Next {
    /// One iteration of the worker loop.
    Loop,
    /// Continue fiber `f` at its program counter.
    Resume(usize),
    /// A steal round found nothing: re-check, then park.
    ParkCheck,
    /// Parked: no event pending.
    Parked,
    /// Handling its current event.
    Active,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Waiter {
    Main,
    Fiber(usize),
}

struct SimWorker {
    node: usize,
    deque: VecDeque<usize>,
    inbox: VecDeque<usize>,
    run_next: Option<usize>,
    tick: u32,
    busy: bool,
    searching: bool,
    next: Next,
    stats: SimWorkerStats,
}

struct FiberState {
    pc: usize,
    home: usize,
    last_worker: usize,
    spawned: bool,
    done: bool,
    completions: u32,
    waiters: Vec<Waiter>,
}

#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Worker(usize),
    Main,
}

struct Probe<'a>(&'a [SimWorker]);

impl LoadProbe for Probe<'_> {
    fn queue_len(&self, w: usize) -> usize {
        self.0[w].deque.len() + self.0[w].inbox.len()
    }
}

pub(super) struct Sim<'a> {
    sched: Scheduler,
    thieves: Vec<ThiefState>,
    cfg: &'a SimConfig,
    wl: &'a Workload,
    workers: Vec<SimWorker>,
    fibers: Vec<FiberState>,
    /// Footprint-weighted homes are read from `wl`.
    main_pc: usize,
    main_done: bool,
    main_node: usize,
    main_cpu: usize,
    now: u64,
    seq: u64,
    events: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    sleepers: usize,
    searching: usize,
    wake_rr: usize,
    rng: SplitMix,
    /// Scratch for one steal round (the simulation's only victim list).
    victims: Vec<usize>,
    round_cost: u64,
    remote_penalty: f64,
    spawned: u64,
    completed: u64,
    stolen: u64,
    last_completion: u64,
    processed: u64,
    trace: Option<Vec<Decision>>,
}

impl<'a> Sim<'a> {
    pub(super) fn new(topo: &Topology, cfg: &'a SimConfig, wl: &'a Workload) -> Result<Sim<'a>, SimError> {
        let n = cfg.workers.unwrap_or_else(|| topo.num_pus().max(1));
        let plan = topo.plan_workers(n, false).map_err(|e| SimError { msg: e.to_string() })?;
        let worker_node: Vec<usize> = plan.iter().map(|s| s.node).collect();
        let sched = Scheduler::new(cfg.policy, cfg.options, worker_node.clone(), topo);
        let mut trace = cfg.trace.then(Vec::new);
        let thieves = (0..n)
            .map(|w| {
                let seed = cfg.seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ w as u64;
                if let Some(t) = trace.as_mut() {
                    t.push(Decision::ThiefState { worker: w, seed });
                }
                sched.new_thief_state(w, seed)
            })
            .collect();
        let main_cpu = cfg
            .main_cpu
            .unwrap_or_else(|| topo.nodes().iter().rev().find_map(|nd| nd.cpus.first().copied()).unwrap_or(0));
        let main_node = sched.node_of_cpu(main_cpu).unwrap_or(0);
        let workers = worker_node
            .iter()
            .enumerate()
            .map(|(w, &node)| SimWorker {
                node,
                deque: VecDeque::new(),
                inbox: VecDeque::new(),
                run_next: None,
                tick: 0,
                busy: false,
                searching: false,
                next: Next::Parked,
                stats: SimWorkerStats { worker: w, node, ..SimWorkerStats::default() },
            })
            .collect();
        let fibers = (0..wl.fibers().len())
            .map(|_| FiberState {
                pc: 0,
                home: NONE,
                last_worker: NONE,
                spawned: false,
                done: false,
                completions: 0,
                waiters: Vec::new(),
            })
            .collect();
        let sleepers = n;
        Ok(Sim {
            sched,
            thieves,
            cfg,
            wl,
            workers,
            fibers,
            main_pc: 0,
            main_done: false,
            main_node,
            main_cpu,
            now: 0,
            seq: 0,
            events: BinaryHeap::new(),
            sleepers,
            searching: 0,
            wake_rr: 0,
            rng: SplitMix::new(cfg.seed ^ 0xD1B5_4A32_D192_ED03),
            victims: Vec::new(),
            round_cost: 0,
            remote_penalty: 0.0,
            spawned: 0,
            completed: 0,
            stolen: 0,
            last_completion: 0,
            processed: 0,
            trace,
        })
    }

    fn log(&mut self, d: impl FnOnce(&Sim) -> Decision) {
        if self.trace.is_some() {
            let d = d(self);
            if let Some(t) = &mut self.trace {
                t.push(d);
            }
        }
    }

    fn queue_lens(&self) -> Vec<usize> {
        let p = Probe(&self.workers);
        (0..self.workers.len()).map(|w| p.queue_len(w)).collect()
    }

    fn schedule(&mut self, at: u64, ev: Ev) {
        self.seq += 1;
        self.events.push(Reverse((at, self.seq, ev)));
    }

    fn schedule_worker(&mut self, w: usize, at: u64, next: Next) {
        debug_assert!(matches!(self.workers[w].next, Next::Parked | Next::Active) && at >= self.now);
        self.workers[w].next = next;
        self.schedule(at, Ev::Worker(w));
    }

    fn dist(&self, a: usize, b: usize) -> f64 {
        f64::from(self.sched.distance(a, b)) / 10.0
    }

    fn scaled(&self, ns: u64, a: usize, b: usize) -> u64 {
        (ns as f64 * self.dist(a, b)).round() as u64
    }

    pub(super) fn run(&mut self) -> Result<(), SimError> {
        // Every worker starts parked (an empty runtime sleeps); main runs.
        self.schedule(0, Ev::Main);
        while let Some(Reverse((t, _, ev))) = self.events.pop() {
            self.now = t;
            self.processed += 1;
            match ev {
                Ev::Main => self.main_step(),
                Ev::Worker(w) => self.worker_event(w),
            }
            if self.main_done && self.completed == self.spawned && self.spawned as usize == self.fibers.len() {
                break;
            }
        }
        if !self.main_done || (self.completed as usize) < self.fibers.len() {
            let stuck: Vec<usize> = (0..self.fibers.len()).filter(|&i| !self.fibers[i].done).take(8).collect();
            return Err(SimError {
                msg: format!(
                    "deadlock at {} ns: main {}, {} of {} fibers completed (unfinished, first few: {stuck:?})",
                    self.now,
                    if self.main_done { "done" } else { "waiting" },
                    self.completed,
                    self.fibers.len()
                ),
            });
        }
        Ok(())
    }

    pub(super) fn finish(self) -> SimResult {
        let nodes = self.sched.num_nodes();
        let mut executed_per_node = vec![0; nodes];
        for w in &self.workers {
            executed_per_node[w.node] += w.stats.executed;
        }
        let sum = |f: fn(&SimWorkerStats) -> u64| self.workers.iter().map(|w| f(&w.stats)).sum::<u64>();
        SimResult {
            makespan_ns: self.now.max(self.last_completion),
            spawned: self.spawned,
            completed: self.completed,
            completions: self.fibers.iter().map(|f| f.completions).collect(),
            local_steals: sum(|s| s.local_steals),
            remote_steals: sum(|s| s.remote_steals),
            failed_steals: sum(|s| s.failed_steals),
            stolen_fibers: self.stolen,
            remote_penalty_ns: self.remote_penalty.round() as u64,
            executed_per_node,
            placements: (0..nodes).map(|n| self.sched.placements(n)).collect(),
            node_workload: (0..nodes).map(|n| self.sched.node_workload(n)).collect(),
            worker_node: self.workers.iter().map(|w| w.node).collect(),
            workers: self.workers.iter().map(|w| w.stats.clone()).collect(),
            events: self.processed,
            trace: self.trace,
        }
    }
}

// The worker loop, spawning, waking and stealing: each function names the
// runtime code it mirrors.
impl Sim<'_> {
    /// The `main` thread's program (`rt.spawn` / `JoinHandle::join`).
    fn main_step(&mut self) {
        let ops = self.wl.main();
        while self.main_pc < ops.len() {
            let op = ops[self.main_pc];
            self.main_pc += 1;
            match op {
                Op::Compute(work) => {
                    let d = work.cost_on(self.main_node).round() as u64;
                    self.schedule(self.now + d, Ev::Main);
                    return;
                }
                Op::Spawn(c) => {
                    let cost = self.spawn(None, c, None);
                    self.schedule(self.now + cost, Ev::Main);
                    return;
                }
                Op::Await(x) => {
                    if !self.fibers[x].done {
                        self.fibers[x].waiters.push(Waiter::Main);
                        return;
                    }
                }
            }
        }
        self.main_done = true;
    }

    fn worker_event(&mut self, w: usize) {
        let next = std::mem::replace(&mut self.workers[w].next, Next::Active);
        match next {
            Next::Loop => self.worker_loop(w),
            Next::Resume(f) => self.run_ops(w, f),
            Next::ParkCheck => {
                if self.workers[w].searching {
                    self.workers[w].searching = false;
                    self.searching -= 1;
                }
                self.park_idle(w);
            }
            Next::Parked | Next::Active => unreachable!("a parked worker has no event"),
        }
    }

    /// `WorkerLocal::set_busy`: tell the policy only on a change.
    fn set_busy(&mut self, w: usize, busy: bool) {
        if self.workers[w].busy != busy {
            self.workers[w].busy = busy;
            self.sched.set_own_status(w, &self.thieves[w], busy);
            self.log(|_| Decision::SetOwnStatus { worker: w, busy });
        }
    }

    /// `WorkerLocal::run`, one iteration.
    fn worker_loop(&mut self, w: usize) {
        if let Some(f) = self.next_local(w) {
            self.set_busy(w, true);
            self.start(w, f, self.now);
            return;
        }
        match self.steal(w) {
            Some((f, at)) => self.start(w, f, at),
            None if self.sched.steals() && self.workers.len() > 1 => {
                // The round took time; `park_idle` re-checks after it.
                let at = self.now + self.round_cost;
                self.schedule_worker(w, at, Next::ParkCheck);
            }
            None => self.park_idle(w),
        }
    }

    /// `WorkerLocal::next_local`: run_next, deque (newest), inbox batch.
    fn next_local(&mut self, w: usize) -> Option<usize> {
        let me = &mut self.workers[w];
        if let Some(f) = me.run_next.take() {
            return Some(f);
        }
        me.tick = me.tick.wrapping_add(1);
        if me.tick % FAIRNESS_TICKS == 0 {
            if let Some(f) = me.inbox.pop_front() {
                return Some(f);
            }
        }
        if let Some(f) = me.deque.pop_back() {
            return Some(f);
        }
        if !me.inbox.is_empty() {
            // Injector::steal_batch_and_pop: half (up to 33), run the first.
            let k = me.inbox.len().div_ceil(2).min(INBOX_BATCH);
            let first = me.inbox.pop_front();
            for _ in 1..k {
                let f = me.inbox.pop_front().expect("k <= len");
                me.deque.push_back(f);
            }
            return first;
        }
        None
    }

    /// Run fiber `f` on `w` from time `at` (after the switch cost).
    fn start(&mut self, w: usize, f: usize, at: u64) {
        let node = self.workers[w].node;
        let fs = &mut self.fibers[f];
        if fs.home == NONE {
            fs.home = node;
        }
        fs.last_worker = w;
        self.schedule_worker(w, at + self.cfg.cost.switch_ns, Next::Resume(f));
    }

    /// Run `f`'s program from its pc until it must wait or take time.
    fn run_ops(&mut self, w: usize, f: usize) {
        let wl = self.wl;
        let ops = &wl.fibers()[f].ops;
        loop {
            let pc = self.fibers[f].pc;
            if pc == ops.len() {
                self.fiber_done(w, f);
                self.worker_loop(w);
                return;
            }
            self.fibers[f].pc += 1;
            match ops[pc] {
                Op::Compute(work) => {
                    let d = self.compute_ns(w, f, work);
                    self.workers[w].stats.busy_ns += d;
                    let nominal = work.cost_on(self.workers[w].node).round() as u64;
                    self.workers[w].stats.nominal_ns += nominal;
                    self.schedule_worker(w, self.now + d, Next::Resume(f));
                    return;
                }
                Op::Spawn(c) => {
                    let cost = self.spawn(Some(w), c, Some(f));
                    if self.workers[w].run_next.is_some() {
                        // Work-first: the parent went to the deque; the
                        // loop runs the child next.
                        self.schedule_worker(w, self.now + cost, Next::Loop);
                    } else {
                        self.schedule_worker(w, self.now + cost, Next::Resume(f));
                    }
                    return;
                }
                Op::Await(x) => {
                    if !self.fibers[x].done {
                        // `await_fiber` parks the fiber; the worker loops.
                        self.fibers[x].waiters.push(Waiter::Fiber(f));
                        self.worker_loop(w);
                        return;
                    }
                }
            }
        }
    }

    /// Cost of one compute step of `f` on `w`, with the memory penalty.
    fn compute_ns(&mut self, w: usize, f: usize, work: Work) -> u64 {
        let node = self.workers[w].node;
        let spec = &self.wl.fibers()[f];
        let mut weight = spec.footprint as f64;
        let mut acc = weight * self.dist(node, self.fibers[f].home);
        for &i in &spec.inputs {
            let b = self.wl.fibers()[i].footprint as f64;
            let h = self.fibers[i].home;
            let d = if h == NONE { 1.0 } else { self.dist(node, h) };
            acc += b * d;
            weight += b;
        }
        let mean_d = if weight > 0.0 { acc / weight } else { 1.0 };
        let s = self.cfg.cost.memory_share.clamp(0.0, 1.0);
        let jitter = 1.0 + self.cfg.cost.jitter * (2.0 * self.rng.unit() - 1.0);
        let base = work.cost_on(node) * jitter;
        let t = base * ((1.0 - s) + s * mean_d);
        self.remote_penalty += (t - base).max(0.0);
        t.round().max(0.0) as u64
    }

    /// `fiber::spawn` / `Runtime::spawn` for fiber `c`; returns the
    /// spawner's cost. `spawner`: the worker, `None` for `main`.
    fn spawn(&mut self, spawner: Option<usize>, c: usize, parent: Option<usize>) -> u64 {
        debug_assert!(!self.fibers[c].spawned, "checked by Workload::new");
        self.fibers[c].spawned = true;
        self.spawned += 1;
        let cost = self.cfg.cost.spawn_ns;
        if let (Some(me), Some(p), true) = (spawner, parent, self.sched.options().work_first) {
            // Work-first (fiber::spawn_with): record_placement(me), child
            // to run_next, parent handed off to the own deque.
            self.sched.record_placement(me);
            self.log(|_| Decision::RecordPlacement { worker: me });
            self.workers[me].run_next = Some(c);
            self.workers[me].deque.push_back(p);
            self.notify_idle();
            return cost;
        }
        let target = self.place(spawner);
        let from_node = spawner.map_or(self.main_node, |s| self.workers[s].node);
        if spawner == Some(target) {
            self.workers[target].deque.push_back(c);
            self.notify_idle();
            cost
        } else {
            self.workers[target].inbox.push_back(c);
            self.notify_worker(target);
            cost + self.scaled(self.cfg.cost.remote_push_ns, from_node, self.workers[target].node)
        }
    }

    /// The placement call, as `fiber::spawn_with` makes it. A `main`
    /// thread under NLH with `spawner_node_from_cpu` cannot use `place`
    /// (it would ask the *real* cpu), so it calls `place_nlh` with the
    /// node of the simulated [`SimConfig::main_cpu`], which is what
    /// `Scheduler::spawner_node` computes from `sched_getcpu`.
    fn place(&mut self, spawner: Option<usize>) -> usize {
        let sim_cpu_node =
            spawner.is_none() && self.sched.policy() == Policy::Nlh && self.sched.options().spawner_node_from_cpu;
        if sim_cpu_node {
            let local = self.sched.node_of_cpu(self.main_cpu).unwrap_or(0);
            let chosen = self.sched.place_nlh(local, None, &Probe(&self.workers));
            self.log(|s| Decision::PlaceNlh { local_node: local, queue_lens: s.queue_lens(), chosen });
            chosen
        } else {
            let lens = self.trace.is_some().then(|| self.queue_lens());
            let chosen = self.sched.place(spawner, &Probe(&self.workers));
            if let Some(queue_lens) = lens {
                self.log(|_| Decision::Place { spawner, queue_lens, chosen });
            }
            chosen
        }
    }

    /// A fiber returned on worker `w` (`run_task`, `Return` arm): wake its
    /// joiners on this worker, then `fiber_left_node`.
    fn fiber_done(&mut self, w: usize, f: usize) {
        let node = self.workers[w].node;
        let fs = &mut self.fibers[f];
        fs.done = true;
        fs.completions += 1;
        let waiters = std::mem::take(&mut fs.waiters);
        self.completed += 1;
        self.last_completion = self.now;
        self.workers[w].stats.executed += 1;
        for waiter in waiters {
            match waiter {
                Waiter::Main => {
                    // A thread blocked in join: unparked.
                    self.schedule(self.now + self.cfg.cost.wake_ns, Ev::Main);
                }
                Waiter::Fiber(p) => {
                    // Shared::reschedule from a worker: to its own deque.
                    let from = self.workers[self.fibers[p].last_worker].node;
                    self.sched.fiber_moved(from, node, 1);
                    self.log(|_| Decision::FiberMoved { from, to: node, count: 1 });
                    self.workers[w].deque.push_back(p);
                    self.notify_idle();
                }
            }
        }
        self.sched.fiber_left_node(node);
        self.log(|_| Decision::FiberLeftNode { node });
    }

    /// `WorkerLocal::steal`: one round over the policy's victims. Returns
    /// the fiber to run and when; sets `round_cost` either way.
    fn steal(&mut self, w: usize) -> Option<(usize, u64)> {
        self.round_cost = 0;
        if !self.sched.steals() || self.workers.len() < 2 {
            return None;
        }
        self.set_busy(w, false);
        if !self.workers[w].searching {
            self.workers[w].searching = true;
            self.searching += 1;
        }
        // The walk is fixed when `victims` returns (node order and starts
        // drawn up front), so collecting it first gives the worker loop's
        // lazy order; one buffer for the whole simulation, not per worker.
        let mut victims = std::mem::take(&mut self.victims);
        victims.clear();
        victims.extend(self.sched.victims(w, &mut self.thieves[w]));
        self.log(|_| Decision::Victims { thief: w, victims: victims.clone() });
        let my_node = self.workers[w].node;
        let mut cost = 0u64;
        let mut found = None;
        for &v in &victims {
            let vnode = self.workers[v].node;
            let got = self.take_from(w, v);
            match got {
                Some((first, k)) => {
                    let st = &mut self.workers[w].stats;
                    if vnode == my_node {
                        st.local_steals += 1;
                    } else {
                        st.remote_steals += 1;
                    }
                    self.stolen += k as u64;
                    self.sched.record_steal(w, &mut self.thieves[w], v, true);
                    self.log(|_| Decision::RecordSteal { thief: w, victim: v, success: true });
                    self.sched.fiber_moved(vnode, my_node, k);
                    self.log(|_| Decision::FiberMoved { from: vnode, to: my_node, count: k });
                    cost += self.scaled(
                        self.cfg.cost.steal_ns + self.cfg.cost.steal_per_fiber_ns * k as u64,
                        my_node,
                        vnode,
                    );
                    found = Some(first);
                    break;
                }
                None => {
                    self.workers[w].stats.failed_steals += 1;
                    self.sched.record_steal(w, &mut self.thieves[w], v, false);
                    self.log(|_| Decision::RecordSteal { thief: w, victim: v, success: false });
                    cost += self.scaled(self.cfg.cost.steal_probe_ns, my_node, vnode);
                }
            }
        }
        self.victims = victims;
        self.round_cost = cost;
        let first = found?;
        self.workers[w].searching = false;
        self.searching -= 1;
        self.set_busy(w, true);
        if !self.workers[w].deque.is_empty() {
            self.notify_idle();
        }
        Some((first, self.now + cost))
    }

    /// `WorkerLocal::steal_from`: a chunk of `v`'s deque (oldest first),
    /// else of its inbox; the first is run, the rest go to the thief's
    /// deque. Returns the first and how many were taken.
    fn take_from(&mut self, w: usize, v: usize) -> Option<(usize, usize)> {
        let chunk = self.cfg.chunk;
        let (from_inbox, len) = match (self.workers[v].deque.len(), self.workers[v].inbox.len()) {
            (0, 0) => return None,
            (0, l) => (true, l),
            (l, _) => (false, l),
        };
        let k = chunk.limit(len).max(1);
        let taken: Vec<usize> = {
            let q = if from_inbox { &mut self.workers[v].inbox } else { &mut self.workers[v].deque };
            q.drain(..k).collect()
        };
        self.workers[w].deque.extend(taken[1..].iter().copied());
        Some((taken[0], k))
    }

    /// `park_idle`: re-check for visible work, else sleep.
    fn park_idle(&mut self, w: usize) {
        if self.has_visible_work(w) {
            self.schedule_worker(w, self.now, Next::Loop);
            return;
        }
        self.workers[w].next = Next::Parked;
        self.sleepers += 1;
    }

    fn has_visible_work(&self, w: usize) -> bool {
        let me = &self.workers[w];
        if !me.deque.is_empty() || !me.inbox.is_empty() || me.run_next.is_some() {
            return true;
        }
        self.sched.steals()
            && self.workers.iter().enumerate().any(|(i, o)| i != w && (!o.deque.is_empty() || !o.inbox.is_empty()))
    }

    /// `Shared::notify_worker`: after a push to `target`'s inbox.
    fn notify_worker(&mut self, target: usize) {
        if self.is_asleep(target) {
            self.claim(target);
            return;
        }
        if self.sched.steals() {
            self.notify_idle_after_fence();
        }
    }

    /// `Shared::notify_idle`: after a push to the caller's own deque.
    fn notify_idle(&mut self) {
        if self.sched.steals() && self.sleepers != 0 {
            self.notify_idle_after_fence();
        }
    }

    fn notify_idle_after_fence(&mut self) {
        if self.searching != 0 || self.sleepers == 0 {
            return;
        }
        let n = self.workers.len();
        let start = self.wake_rr;
        self.wake_rr = self.wake_rr.wrapping_add(1);
        for i in 0..n {
            let t = (start + i) % n;
            if self.is_asleep(t) {
                self.claim(t);
                return;
            }
        }
    }

    fn is_asleep(&self, w: usize) -> bool {
        self.workers[w].next == Next::Parked
    }

    /// `Shared::claim`: wake a sleeper; it loops after the wake latency.
    fn claim(&mut self, t: usize) {
        self.sleepers -= 1;
        let at = self.now + self.cfg.cost.wake_ns;
        self.schedule_worker(t, at, Next::Loop);
    }
}
