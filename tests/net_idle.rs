//! An idle runtime with 200 open, idle connections (400 fibers parked on
//! reads, both ends) uses under 1 % of a core: the driver sleeps in
//! `epoll_wait`, the other workers on their futexes, nobody spins. (Alone in
//! its own test binary so no other test's threads add CPU time.)

use std::io::{Read, Write};
use std::time::Duration;

use numafiber::net::{TcpListener, TcpStream};
use numafiber::{fiber, Policy, Runtime};

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

#[test]
fn idle_runtime_with_200_idle_connections_uses_under_one_percent_of_a_core() {
    for policy in [Policy::RoundRobin, Policy::Nlh] {
        let rt = Runtime::builder().workers(2).policy(policy).build().unwrap();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let server = rt.spawn(move || {
            for _ in 0..200 {
                let (mut s, _) = l.accept().unwrap();
                fiber::spawn(move || {
                    let mut b = [0u8; 1];
                    s.write_all(b"+").unwrap();
                    let _ = s.read(&mut b); // idle until shutdown
                });
            }
        });
        let clients: Vec<_> = (0..200)
            .map(|_| {
                rt.spawn(move || {
                    let mut c = TcpStream::connect(addr).unwrap();
                    let mut b = [0u8; 1];
                    c.read_exact(&mut b).unwrap(); // every connection is up
                    let _ = c.read(&mut b); // idle until shutdown
                })
            })
            .collect();
        server.join().unwrap();
        // A pending timer as well: the driver's epoll_wait timeout.
        let _sleeper = rt.spawn(|| fiber::sleep(Duration::from_secs(600)));
        while rt.stats().workers.iter().map(|w| w.parks).sum::<u64>() < 401 {
            std::thread::sleep(Duration::from_millis(10));
        }
        std::thread::sleep(Duration::from_millis(200));
        let before = cpu_time();
        let window = Duration::from_secs(2);
        std::thread::sleep(window);
        let used = cpu_time() - before;
        eprintln!("{policy:?}: idle runtime with 200 idle connections used {used:?} of CPU in {window:?}");
        assert!(used < window / 100, "{policy:?}: used {used:?} in {window:?} (>= 1 % of a core)");
        drop(rt);
        for c in clients {
            assert!(c.join().unwrap_err().is_cancelled());
        }
    }
}
