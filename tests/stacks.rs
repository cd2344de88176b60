//! Fiber stacks: a million
//! fibers with default settings, small stacks, overflow reports on slab
//! stacks, `/proc/self/maps` staying O(slabs), the forced fallback path
//! (`NUMAFIBER_NO_GUARD_INSTALL=1`, as on kernels without
//! `MADV_GUARD_INSTALL`), and the stack defects of the reliability issue.
//!
//! Scenarios that need a process of their own (memory figures, rlimits,
//! aborts, the forced fallback) re-run this test binary as a child with
//! `STACKS_CHILD=<test name>`; each prints its figures to stderr
//! (`cargo test --release --test stacks -- --nocapture`). The
//! million-fiber scenarios need several GB and are ignored in a plain
//! `cargo test`: `cargo test --release --test stacks -- --ignored` runs them
//! (CI does).

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::{fiber, sync, BuildErrorKind, Runtime, SpawnErrorKind, Topology};

const CHILD: &str = "STACKS_CHILD";
const FALLBACK: &str = "NUMAFIBER_NO_GUARD_INSTALL";

/// In the child for `name`?
fn is_child(name: &str) -> bool {
    std::env::var(CHILD).is_ok_and(|v| v == name)
}

/// Re-run test `name` of this binary in a child process with `env`.
fn child(name: &str, env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(std::env::current_exe().unwrap());
    // --include-ignored: the scale scenarios are ignored in a plain run.
    c.args(["--exact", name, "--nocapture", "--test-threads=1", "--include-ignored"]).env(CHILD, name);
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

/// Run `name` in a child and require that it passed; returns its stderr.
fn child_ok(name: &str, env: &[(&str, &str)]) -> String {
    let out = child(name, env);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    let stdout = String::from_utf8_lossy(&out.stdout);
    eprint!("{stderr}");
    assert!(out.status.success(), "child {name} {env:?} failed ({}):\n{stdout}\n{stderr}", out.status);
    assert!(stdout.contains("1 passed"), "child {name} ran its test: {stdout}");
    stderr
}

fn status_kib(key: &str) -> usize {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn map_count() -> usize {
    std::fs::read_to_string("/proc/self/maps").unwrap().lines().count()
}

fn parks(rt: &Runtime) -> u64 {
    rt.stats().workers.iter().map(|w| w.parks).sum()
}

/// Wait for `cond`, failing after `secs` seconds with `what`.
fn wait_for(secs: u64, what: impl Fn() -> String, cond: impl Fn() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < Duration::from_secs(secs), "timed out: {}", what());
        std::thread::sleep(Duration::from_millis(10));
    }
}

struct Counted(Arc<AtomicUsize>);
impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_add(1, Relaxed);
    }
}

// ---------------------------------------------------------------------------
// A million parked fibers, default settings.

/// 1,000,000 fibers parked at once on one `Event` with default settings
/// (`Runtime::new()`), then every one released and counted. With guard
/// markers (the default) all of them are parked at the same time and the
/// memory figures are printed and checked; on the fallback path (budget of
/// mapped stacks) the event is set once the spawns are done and the fibers
/// beyond the budget start as stacks are freed.
fn million_on_an_event() {
    const N: usize = 1_000_000;
    let guard_install = fiber::stack_usage().guard_install;
    let maps0 = map_count();
    let rss0 = status_kib("VmRSS:");
    let rt = Runtime::new().unwrap();
    let ev = Arc::new(sync::Event::new());
    let released = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    for _ in 0..N {
        let (ev, released) = (ev.clone(), released.clone());
        drop(rt.spawn(move || {
            ev.wait();
            released.fetch_add(1, Relaxed);
        }));
    }
    let spawned = t0.elapsed();
    let budget = fiber::stack_usage().fallback_budget;
    if guard_install {
        wait_for(300, || format!("{} of {N} parked", parks(&rt)), || parks(&rt) >= N as u64);
        let parked = t0.elapsed();
        let rss1 = status_kib("VmRSS:");
        let maps1 = map_count();
        let u = fiber::stack_usage();
        let per_fiber = (rss1 - rss0) as f64 * 1024.0 / N as f64;
        eprintln!(
            "{N} fibers parked at once (default settings, {} workers): spawned in {spawned:?}, all parked \
             after {parked:?}; RSS {rss0} -> {rss1} KiB = {per_fiber:.0} bytes per parked fiber; \
             VmPTE {} KiB; /proc/self/maps {maps0} -> {maps1} lines; {} slabs, {} GiB of address space",
            rt.workers(),
            status_kib("VmPTE:"),
            u.slabs,
            u.slab_bytes >> 30
        );
        assert_eq!(released.load(Relaxed), 0);
        assert!(maps1 < maps0 + 1_000, "/proc/self/maps grew from {maps0} to {maps1} lines: O(fibers), not O(slabs)");
        assert!(per_fiber <= 8.0 * 1024.0, "RSS per parked fiber {per_fiber:.0} bytes (target <= 8 KiB)");
    } else {
        wait_for(300, || format!("{} parked", parks(&rt)), || parks(&rt) >= 1_000);
        let u = fiber::stack_usage();
        eprintln!(
            "fallback: {} of {N} fibers parked, {} stacks mapped of a budget of {budget}",
            parks(&rt),
            u.guarded_stacks
        );
        assert!(u.guarded_stacks <= budget);
    }
    let t1 = Instant::now();
    ev.set();
    wait_for(300, || format!("{} of {N} released", released.load(Relaxed)), || released.load(Relaxed) == N);
    let release = t1.elapsed();
    if !guard_install {
        assert!(fiber::stack_usage().guarded_stacks <= budget);
    }
    let t2 = Instant::now();
    rt.shutdown();
    eprintln!(
        "{N} fibers released and counted in {release:?}; shutdown {:?}; total {:?}; VmHWM {} KiB",
        t2.elapsed(),
        t0.elapsed(),
        status_kib("VmHWM:")
    );
    assert_eq!(released.load(Relaxed), N);
}

#[test]
#[ignore = "scale: a million fibers, several GB of memory; run with --ignored (CI does)"]
fn a_million_fibers_parked_on_an_event_with_default_settings() {
    if is_child("a_million_fibers_parked_on_an_event_with_default_settings") {
        return million_on_an_event();
    }
    // A process of its own, so that its memory figures are its own.
    let err = child_ok("a_million_fibers_parked_on_an_event_with_default_settings", &[]);
    assert!(err.contains("released and counted"), "{err}");
}

#[test]
#[ignore = "scale: a million fibers, several GB of memory; run with --ignored (CI does)"]
fn forced_fallback_runs_a_million_fibers_on_an_event() {
    if is_child("forced_fallback_runs_a_million_fibers_on_an_event") {
        assert!(!fiber::stack_usage().guard_install, "{FALLBACK}=1 forces the fallback");
        return million_on_an_event();
    }
    let err = child_ok("forced_fallback_runs_a_million_fibers_on_an_event", &[(FALLBACK, "1")]);
    assert!(err.contains("fallback:") && err.contains("released and counted"), "{err}");
}

// ---------------------------------------------------------------------------
// 200,000 yielding fibers spawned from one fiber.

fn yielders_from_one_fiber() {
    const N: usize = 200_000;
    let rt = Runtime::builder().workers(2).build().unwrap();
    let done = Arc::new(AtomicUsize::new(0));
    let d = done.clone();
    let t0 = Instant::now();
    let joined = rt.block_on(move || {
        let hs: Vec<_> = (0..N)
            .map(|i| {
                let d = d.clone();
                fiber::spawn(move || {
                    fiber::yield_now();
                    d.fetch_add(1, Relaxed);
                    i
                })
            })
            .collect();
        let mut own_index = 0;
        for (i, h) in hs.into_iter().enumerate() {
            own_index += usize::from(fiber::await_fiber(h) == i);
        }
        own_index
    });
    let u = fiber::stack_usage();
    eprintln!(
        "{N} yielding fibers spawned from one fiber on 2 workers: {:?}; guard_install {}; {} fallback stacks (budget {})",
        t0.elapsed(),
        u.guard_install,
        u.guarded_stacks,
        u.fallback_budget
    );
    assert_eq!(joined, N, "every fiber returned its own index");
    assert_eq!(done.load(Relaxed), N);
    assert!(u.guarded_stacks <= u.fallback_budget);
}

#[test]
fn two_hundred_thousand_yielding_fibers_spawned_from_one_fiber() {
    yielders_from_one_fiber();
}

#[test]
fn forced_fallback_runs_two_hundred_thousand_yielding_fibers() {
    if is_child("forced_fallback_runs_two_hundred_thousand_yielding_fibers") {
        assert!(!fiber::stack_usage().guard_install);
        return yielders_from_one_fiber();
    }
    child_ok("forced_fallback_runs_two_hundred_thousand_yielding_fibers", &[(FALLBACK, "1")]);
}

// ---------------------------------------------------------------------------
// 16 KiB stacks.

/// 200,000 fibers on 16 KiB stacks alive at once: half released through an
/// event, half force-unwound by the shutdown (destructors counted), some
/// panicking (the panic report runs on the worker's side stack).
#[test]
fn two_hundred_thousand_fibers_with_16_kib_stacks() {
    const N: usize = 200_000;
    let rt = Runtime::builder().workers(2).stack_size(16 * 1024).build().unwrap();
    let (go, stay) = (Arc::new(sync::Event::new()), Arc::new(sync::Event::new()));
    let released = Arc::new(AtomicUsize::new(0));
    let dropped = Arc::new(AtomicUsize::new(0));
    let t0 = Instant::now();
    for i in 0..N {
        let ev = if i % 2 == 0 { go.clone() } else { stay.clone() };
        let (released, c) = (released.clone(), Counted(dropped.clone()));
        drop(rt.spawn(move || {
            let _c = c;
            ev.wait();
            released.fetch_add(1, Relaxed);
        }));
    }
    wait_for(300, || format!("{} of {N} parked", parks(&rt)), || parks(&rt) >= N as u64);
    go.set();
    wait_for(300, || format!("{} released", released.load(Relaxed)), || released.load(Relaxed) == N / 2);
    // Panics on 16 KiB stacks (the message and its report).
    let hs: Vec<_> = (0..10).map(|i| rt.spawn(move || -> u32 { panic!("small-stack panic {i}") })).collect();
    for (i, h) in hs.into_iter().enumerate() {
        assert_eq!(h.join().unwrap_err().panic_message(), Some(format!("small-stack panic {i}").as_str()));
    }
    rt.shutdown(); // unwinds the N / 2 fibers still parked, on their 16 KiB stacks
    eprintln!("{N} fibers on 16 KiB stacks: {:?} including shutdown", t0.elapsed());
    assert_eq!(released.load(Relaxed), N / 2);
    assert_eq!(dropped.load(Relaxed), N, "every fiber's destructors ran exactly once");
    drop(stay);
}

// ---------------------------------------------------------------------------
// Overflow of a slab stack.

#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64, buf: &mut [u8; 512]) -> u64 {
    let mut local = [0u8; 512];
    local[(depth % 512) as usize] = buf[(depth % 7) as usize].wrapping_add(1);
    std::hint::black_box(&mut local);
    recurse(depth + 1, &mut local) + local[3] as u64
}

fn overflow_child(stack: Option<usize>) {
    let rt = Runtime::builder().workers(2).build().unwrap();
    // Neighbours on the same slab, parked: the overflow must name the
    // fiber that ran into its guard, not one of them.
    let ev = Arc::new(sync::Event::new());
    for _ in 0..100 {
        let ev = ev.clone();
        drop(rt.spawn(move || ev.wait()));
    }
    let mut b = fiber::Builder::new().name("slab-deep");
    if let Some(s) = stack {
        b = b.stack_size(s);
    }
    // The fiber prints its id itself, before it recurses: a line printed by
    // this thread after the spawn could be cut short by the abort.
    let h = b
        .spawn_on(&rt, || {
            eprintln!("overflowing fiber id {}", fiber::current().unwrap().id);
            recurse(0, &mut [0u8; 512])
        })
        .unwrap();
    let _ = h.join();
    println!("child did not overflow");
}

fn check_overflow_report(name: &str, env: &[(&str, &str)], bytes: usize) {
    let out = child(name, env);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "exit {:?}; stderr: {stderr}", out.status);
    let id = stderr
        .lines()
        .find_map(|l| l.strip_prefix("overflowing fiber id "))
        .unwrap_or_else(|| panic!("no id line: {stderr}"))
        .trim()
        .to_string();
    let want = format!("fiber {id} 'slab-deep' has overflowed its stack ({bytes} bytes)");
    assert!(stderr.contains(&want), "wanted {want:?} in: {stderr}");
    assert!(stderr.contains("stack_size("), "says how to ask for more: {stderr}");
}

#[test]
fn slab_stack_overflow_names_the_fiber() {
    if is_child("slab_stack_overflow_names_the_fiber") {
        assert!(fiber::stack_usage().guard_install || std::env::var_os(FALLBACK).is_some());
        return overflow_child(None);
    }
    check_overflow_report("slab_stack_overflow_names_the_fiber", &[], fiber::DEFAULT_STACK_SIZE);
    check_overflow_report("slab_stack_overflow_names_the_fiber", &[(FALLBACK, "1")], fiber::DEFAULT_STACK_SIZE);
}

#[test]
fn small_slab_stack_overflow_names_the_fiber() {
    if is_child("small_slab_stack_overflow_names_the_fiber") {
        return overflow_child(Some(16 * 1024));
    }
    check_overflow_report("small_slab_stack_overflow_names_the_fiber", &[], 16 * 1024);
}

// ---------------------------------------------------------------------------
// Issue 12 regressions.

/// Item 1: on unguarded stacks, a huge stack size wrapped the slab length
/// (canaries written at wild addresses). Now a typed error at spawn and at
/// build.
#[test]
fn unguarded_huge_stack_size_is_a_typed_error() {
    #[allow(deprecated)]
    // SAFETY: no fiber runs on these stacks.
    let rt =
        unsafe { Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).unguarded_stacks() }.build().unwrap();
    for size in [(1usize << 58) + 1024, usize::MAX, usize::MAX - 1023] {
        let e = fiber::Builder::new().stack_size(size).spawn_on(&rt, || ()).unwrap_err();
        assert!(matches!(e.kind(), SpawnErrorKind::StackTooLarge { requested, .. } if *requested == size), "{e}");
        assert!(e.to_string().contains("stack_size(n) with n <="), "{e}");
    }
    assert_eq!(rt.block_on(|| 7), 7, "the runtime is fine");
    #[allow(deprecated)]
    // SAFETY: never built.
    let e =
        unsafe { Runtime::builder().workers(1).stack_size((1 << 58) + 1024).unguarded_stacks() }.build().unwrap_err();
    assert!(matches!(e.kind(), BuildErrorKind::StackTooLarge { .. }), "{e}");
}

/// Item 7: a stack size near `usize::MAX` aborted the process ("integer
/// overflow while calculating stack size"). Typed errors now.
#[test]
fn stack_size_near_usize_max_is_a_typed_error() {
    for size in [usize::MAX, usize::MAX - 4095, usize::MAX / 2 + 1, fiber::MAX_STACK_SIZE + 1] {
        let e = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).stack_size(size).build().unwrap_err();
        assert_eq!(e.kind(), &BuildErrorKind::StackTooLarge { requested: size, maximum: fiber::MAX_STACK_SIZE }, "{e}");
        assert!(e.to_string().contains("above the maximum"), "{e}");
    }
    let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
    for size in [usize::MAX, usize::MAX - 4095, fiber::MAX_STACK_SIZE + 1] {
        let e = fiber::Builder::new().stack_size(size).spawn_on(&rt, || ()).unwrap_err();
        assert_eq!(e.kind(), &SpawnErrorKind::StackTooLarge { requested: size, maximum: fiber::MAX_STACK_SIZE });
    }
    let e = rt.block_on(|| fiber::Builder::new().stack_size(usize::MAX).spawn(|| ()).unwrap_err());
    assert!(matches!(e.kind(), SpawnErrorKind::StackTooLarge { .. }), "{e}");
    assert_eq!(rt.block_on(|| fiber::await_fiber(fiber::spawn(|| 3))), 3);
}

/// Item 2: pooled stacks were outside the mapping budget: two bursts of
/// 20,000 fibers, or 32,688 fibers one at a time with distinct stack sizes,
/// exhausted `vm.max_map_count` (then even `std::thread::spawn` failed).
fn pools_scenario() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let maps0 = map_count();
    let sizes = rt.block_on(|| {
        // 40,000 fibers one at a time, each with a stack size of its own.
        for i in 0..40_000usize {
            let size = 16 * 1024 + i * 4096;
            let h = fiber::Builder::new().stack_size(size).spawn(move || i).unwrap();
            assert_eq!(fiber::await_fiber(h), i);
        }
        // Two bursts of 20,000 alive at once.
        for _ in 0..2 {
            let hs: Vec<_> = (0..20_000)
                .map(|i| {
                    fiber::spawn(move || {
                        fiber::yield_now();
                        i
                    })
                })
                .collect();
            let sum: usize = hs.into_iter().map(fiber::await_fiber).sum();
            assert_eq!(sum, 20_000 * 19_999 / 2);
        }
        40_000
    });
    let u = fiber::stack_usage();
    let maps1 = map_count();
    eprintln!("{sizes} distinct stack sizes one at a time + 2 bursts of 20,000: maps {maps0} -> {maps1}; {u:?}");
    assert!(u.guarded_stacks <= u.fallback_budget, "{u:?}");
    if u.guard_install {
        assert!(u.slabs < 500, "slabs stay few: {u:?}");
        assert!(maps1 < maps0 + 1_000, "maps {maps0} -> {maps1}");
    }
    // The process can still make threads and mappings.
    std::thread::spawn(|| ()).join().unwrap();
    assert_eq!(rt.block_on(|| fiber::await_fiber(fiber::spawn(|| 1))), 1);
}

#[test]
fn pools_stay_within_the_mapping_budget() {
    if is_child("pools_stay_within_the_mapping_budget") {
        return pools_scenario();
    }
    child_ok("pools_stay_within_the_mapping_budget", &[]);
    child_ok("pools_stay_within_the_mapping_budget", &[(FALLBACK, "1")]);
}

/// Item 6: each fiber whose stack could not be mapped kept a budget slot;
/// after 30,720 such failures every spawn was refused with 0 fibers alive.
/// Here 40,000 stack allocations fail (an address-space limit below the
/// stack size), then 1,000 ordinary fibers run alive at once.
fn failed_allocations_scenario() {
    let rt = Runtime::builder().workers(2).build().unwrap();
    let huge = 4usize << 30;
    let limit = (status_kib("VmSize:") as u64 + 512 * 1024) * 1024;
    let rl = libc::rlimit { rlim_cur: limit, rlim_max: libc::RLIM_INFINITY };
    // SAFETY: setrlimit with a valid struct; this is a child process.
    assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_AS, &rl) }, 0);
    let failed = rt.block_on(move || {
        let mut failed = 0;
        for _ in 0..40_000 {
            let h = fiber::Builder::new().stack_size(huge).spawn(|| ()).unwrap();
            let e = h.join().unwrap_err();
            assert!(e.to_string().contains("stack could not be allocated"), "{e}");
            failed += 1;
        }
        failed
    });
    let ev = Arc::new(sync::Event::new());
    let done = Arc::new(AtomicUsize::new(0));
    let hs: Vec<_> = (0..1_000)
        .map(|_| {
            let (ev, done) = (ev.clone(), done.clone());
            fiber::Builder::new()
                .stack_size(16 * 1024)
                .spawn_on(&rt, move || {
                    ev.wait();
                    done.fetch_add(1, Relaxed);
                })
                .unwrap()
        })
        .collect();
    wait_for(120, || format!("{} parked", parks(&rt)), || parks(&rt) >= 1_000);
    ev.set();
    for h in hs {
        h.join().unwrap();
    }
    eprintln!("{failed} failed stack allocations, then 1,000 fibers alive at once: {:?}", fiber::stack_usage());
    assert_eq!(done.load(Relaxed), 1_000);
}

#[test]
fn failed_stack_allocations_do_not_leak_budget_slots() {
    if is_child("failed_stack_allocations_do_not_leak_budget_slots") {
        return failed_allocations_scenario();
    }
    child_ok("failed_stack_allocations_do_not_leak_budget_slots", &[]);
    child_ok("failed_stack_allocations_do_not_leak_budget_slots", &[(FALLBACK, "1")]);
}

/// Item 12: every worker thread leaked its 64 KiB alternate signal stack
/// (490 runtimes x 2 workers left +62,720 KiB of address space).
#[test]
fn worker_signal_stacks_are_freed_at_exit() {
    if !is_child("worker_signal_stacks_are_freed_at_exit") {
        child_ok("worker_signal_stacks_are_freed_at_exit", &[]);
        return;
    }
    let cycle = || {
        let rt = Runtime::builder().workers(2).build().unwrap();
        assert_eq!(rt.block_on(|| fiber::await_fiber(fiber::spawn(|| 1))), 1);
    };
    for _ in 0..20 {
        cycle(); // warm up: thread-stack caches, allocator arenas
    }
    let (vm0, maps0) = (status_kib("VmSize:"), map_count());
    const RUNTIMES: usize = 300;
    for _ in 0..RUNTIMES {
        cycle();
    }
    let (vm1, maps1) = (status_kib("VmSize:"), map_count());
    let leak_would_be = RUNTIMES * 2 * 64;
    eprintln!("{RUNTIMES} runtimes x 2 workers: VmSize {vm0} -> {vm1} KiB (a leaked signal stack per worker would add {leak_would_be} KiB); maps {maps0} -> {maps1}");
    assert!(vm1 < vm0 + leak_would_be / 4, "VmSize {vm0} -> {vm1} KiB");
    assert!(maps1 < maps0 + RUNTIMES / 4, "maps {maps0} -> {maps1}");
}

// ---------------------------------------------------------------------------
// The fallback's true no-progress case.

/// Forced fallback: more fibers than the budget all wait on an event that
/// only the last of them to start would set. Nothing can proceed; `block_on`
/// reports it, naming the limit and the fix (instead of hanging, and
/// instead of refusing a spawn).
#[test]
fn fallback_no_progress_is_reported_with_the_limit_and_fix() {
    if !is_child("fallback_no_progress_is_reported_with_the_limit_and_fix") {
        let out = child("fallback_no_progress_is_reported_with_the_limit_and_fix", &[(FALLBACK, "1")]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        return;
    }
    let budget = fiber::stack_usage().fallback_budget;
    // Strict: the libtest harness keeps its main thread around, so the
    // default check cannot prove the deadlock here and would only warn.
    let rt = Runtime::builder().workers(2).stack_size(16 * 1024).strict_deadlock_detection(true).build().unwrap();
    let n = budget + 100;
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(move || {
            // The n-th fiber to start would set the event; with fewer
            // stacks than fibers, none is the n-th, whatever the order.
            let ev = Arc::new(sync::Event::new());
            let started = Arc::new(AtomicUsize::new(0));
            let hs: Vec<_> = (0..n)
                .map(|_| {
                    let (ev, started) = (ev.clone(), started.clone());
                    fiber::spawn(move || if started.fetch_add(1, SeqCst) + 1 == n { ev.set() } else { ev.wait() })
                })
                .collect();
            for h in hs {
                fiber::await_fiber(h);
            }
        })
    }));
    let p = r.expect_err("block_on reports the deadlock");
    let msg = p.downcast_ref::<String>().cloned().unwrap_or_default();
    eprintln!("report: {msg}");
    assert!(msg.contains("deadlock"), "{msg}");
    assert!(msg.contains("fibers cannot start") && msg.contains(&format!("{budget} stacks")), "{msg}");
    assert!(msg.contains("vm.max_map_count") && msg.contains("6.13"), "names the fix: {msg}");
    drop(rt);
}
