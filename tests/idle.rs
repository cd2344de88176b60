//! An idle runtime parks its workers: it must use under 1 % of a core.
//! (Alone in its own test binary so no other test's threads add CPU time.)

use std::time::Duration;

use numafiber::{fiber, Policy, Runtime, Topology};

fn cpu_time() -> Duration {
    let mut ru = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    // SAFETY: getrusage writes a rusage into the pointer we pass.
    let r = unsafe { libc::getrusage(libc::RUSAGE_SELF, ru.as_mut_ptr()) };
    assert_eq!(r, 0);
    // SAFETY: initialised by getrusage above.
    let ru = unsafe { ru.assume_init() };
    let tv = |t: libc::timeval| Duration::new(t.tv_sec as u64, t.tv_usec as u32 * 1000);
    tv(ru.ru_utime) + tv(ru.ru_stime)
}

/// Context switches so far of this process's stall monitor thread (its
/// name, as the kernel keeps it, is cut to 15 bytes), or `None` when there
/// is none.
fn monitor_switches() -> Option<u64> {
    for e in std::fs::read_dir("/proc/self/task").ok()? {
        let dir = e.ok()?.path();
        if std::fs::read_to_string(dir.join("comm")).ok()?.trim() != "numafiber-monit" {
            continue;
        }
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        let n = status
            .lines()
            .filter(|l| l.starts_with("voluntary_ctxt_switches") || l.starts_with("nonvoluntary_ctxt_switches"))
            .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
            .sum();
        return Some(n);
    }
    None
}

#[test]
fn idle_runtime_uses_under_one_percent_of_a_core() {
    for policy in [Policy::RoundRobin, Policy::RandomSteal, Policy::Nlh] {
        let rt = Runtime::builder().workers(2).topology(Topology::uniform(1, 2)).policy(policy).build().unwrap();
        // Some work first, then a fiber parked on a long timer: the worker
        // holding the timer must sleep until it, not poll.
        rt.block_on(|| (0..1000).map(|i| fiber::spawn(move || i)).map(fiber::await_fiber).sum::<u64>());
        let _sleeper = rt.spawn(|| fiber::sleep(Duration::from_secs(600)));
        std::thread::sleep(Duration::from_millis(100));
        // Read before the window opens: reading /proc costs this process
        // a few hundred microseconds, which is not the runtime's.
        let monitor_before = monitor_switches().expect("the stall monitor runs by default");
        let before = cpu_time();
        let window = Duration::from_secs(1);
        std::thread::sleep(window);
        let used = cpu_time() - before;
        // The monitor parks once every worker has slept through one of its
        // periods (12.5 ms by default): it would switch 80 times a second
        // if it kept sampling.
        let monitor_woke = monitor_switches().expect("the stall monitor runs by default") - monitor_before;
        eprintln!("{policy:?}: the stall monitor switched {monitor_woke} times in {window:?}");
        assert!(
            monitor_woke <= 2,
            "{policy:?}: the stall monitor of an idle runtime switched {monitor_woke} times in {window:?}"
        );
        eprintln!("{policy:?}: idle runtime used {used:?} of CPU in {window:?}");
        assert!(used < window / 100, "{policy:?}: idle runtime used {used:?} in {window:?} (>= 1 % of a core)");
        rt.shutdown();
    }
}
