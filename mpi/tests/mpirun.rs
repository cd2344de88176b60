//! The crate's tests, run under `mpirun`: started by `cargo test`, this
//! binary re-executes itself as `mpirun -np 2` and `-np 4 --oversubscribe`
//! (or the rank counts in `NUMAFIBER_MPI_NP`, e.g. `2,4`), and the ranks
//! run every test in the same order (collectives must match). Without
//! `mpirun` on the PATH it says so and passes (the core crate's build
//! never needs MPI). One failing rank makes the job fail; a watchdog turns
//! a hang into a failure.

use std::process::{Command, ExitCode};
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::{fiber, Runtime};
use numafiber_mpi::{Comm, Error, Mpi, SystemOperation, ANY};

/// One test: every rank runs it with the same arguments.
type Test = fn(&Mpi, &Comm);

/// Seconds a whole rank may take before the watchdog fails it.
const WATCHDOG_SECS: u64 = 240;
/// The watchdog with NUMAFIBER_MPI_BLOCKING set (the exchange hangs).
const BLOCKING_WATCHDOG_SECS: u64 = 20;

fn main() -> ExitCode {
    if std::env::var_os("OMPI_COMM_WORLD_RANK").is_none() && std::env::var_os("PMI_RANK").is_none() {
        return launch();
    }
    std::thread::spawn(|| {
        let secs =
            if std::env::var_os("NUMAFIBER_MPI_BLOCKING").is_some() { BLOCKING_WATCHDOG_SECS } else { WATCHDOG_SECS };
        std::thread::sleep(Duration::from_secs(secs));
        eprintln!("mpirun test: watchdog: a test hung for {secs} s");
        std::process::exit(3);
    });
    let mpi = numafiber_mpi::init().expect("MPI with MPI_THREAD_MULTIPLE");
    let world = mpi.world();
    let tests: &[(&str, Test)] = &[
        ("init_twice_is_an_error", init_twice_is_an_error),
        ("out_of_order_exchange_64_fibers_2_workers", out_of_order_exchange),
        ("point_to_point_ring", point_to_point_ring),
        ("wait_any_and_wait_all", wait_any_and_wait_all),
        ("probe_and_recv_vec", probe_and_recv_vec),
        ("parked_recv_leaves_the_worker_free", parked_recv_leaves_the_worker_free),
        ("cancel_parked_recv", cancel_parked_recv),
        ("cancel_collective_wait", cancel_collective_wait),
        ("recv_timeout_and_wait_until", recv_timeout_and_wait_until),
        ("bad_rank_and_truncation_are_errors", bad_rank_and_truncation_are_errors),
        ("collectives", collectives),
        ("all_waiting_on_mpi_is_no_deadlock", all_waiting_on_mpi_is_no_deadlock),
        ("plain_thread_waits", plain_thread_waits),
        ("waiters_outlive_the_pollers_runtime", waiters_outlive_the_pollers_runtime),
        ("workers_land_on_the_ranks_pus", workers_land_on_the_ranks_pus),
    ];
    let filter = std::env::var("NUMAFIBER_MPI_TEST").ok();
    let mut ran = 0;
    for (name, t) in tests {
        if filter.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let t0 = Instant::now();
        t(&mpi, &world);
        world.barrier().expect("barrier between tests");
        assert_eq!(mpi.pending(), 0, "{name}: requests left pending");
        if world.rank() == 0 {
            println!("test {name} (np {}) ... ok ({:.2?})", world.size(), t0.elapsed());
        }
        ran += 1;
    }
    // After MPI_Finalize every operation is an error value, not an abort.
    drop(mpi);
    assert!(matches!(world.barrier(), Err(Error::Finalized { .. })));
    assert!(matches!(world.send(&[1u8], 0, 0), Err(Error::Finalized { .. })));
    if world.rank() == 0 {
        println!("np {}: {ran} passed, 0 failed", world.size());
    }
    ExitCode::SUCCESS
}

/// One mpirun job: rank count, mpirun's options, environment.
type Job = (String, Vec<&'static str>, Vec<(&'static str, &'static str)>);

/// Re-run this binary under `mpirun` for each rank count.
fn launch() -> ExitCode {
    let exe = std::env::current_exe().expect("own path");
    if Command::new("mpirun").arg("--version").output().is_err() {
        println!("mpirun not found: the MPI tests are skipped (scripts/mpi-test.sh installs Open MPI)");
        println!("0 passed, 0 failed, 1 skipped");
        return ExitCode::SUCCESS;
    }
    let mut jobs: Vec<Job> = Vec::new();
    let nps = std::env::var("NUMAFIBER_MPI_NP").unwrap_or_else(|_| "2,4".into());
    for np in nps.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        jobs.push((np.to_string(), vec!["--oversubscribe"], vec![]));
    }
    // One rank per core, bound (the one-rank-per-NUMA-node recipe's
    // mechanism on a machine of one node): each rank's workers must land
    // on its own PUs.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    if std::env::var_os("NUMAFIBER_MPI_NP").is_none() && cpus >= 2 {
        jobs.push((
            "2".into(),
            vec!["--map-by", "core", "--bind-to", "core"],
            vec![("NUMAFIBER_MPI_BIND", "core"), ("NUMAFIBER_MPI_TEST", "workers_land")],
        ));
    }
    let (mut passed, mut failed) = (0, 0);
    for (np, args, envs) in jobs {
        let status = Command::new("mpirun")
            .args(["-np", &np])
            .args(&args)
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
            .envs(envs)
            .arg(&exe)
            .status()
            .expect("run mpirun");
        if status.success() {
            passed += 1;
        } else {
            eprintln!("mpirun -np {np} {}: {status}", args.join(" "));
            failed += 1;
        }
    }
    println!("mpirun jobs: {passed} passed, {failed} failed");
    if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn rt(workers: usize) -> Runtime {
    Runtime::builder().workers(workers).build().expect("runtime")
}

/// This rank's partner in pairwise tests (`None` for the odd one out).
fn partner(w: &Comm) -> Option<i32> {
    let p = w.rank() ^ 1;
    (p < w.size()).then_some(p)
}

fn init_twice_is_an_error(_: &Mpi, _: &Comm) {
    assert_eq!(numafiber_mpi::init().unwrap_err(), numafiber_mpi::InitError::AlreadyInitialized);
}

/// Each rank of a pair runs 64 fibers on 2 workers. On the even rank fiber
/// `i` sends a 256 KiB message with tag `i`, then receives tag `i`; on the
/// odd rank fiber `i` receives tag `63 - i` first, then sends it back. The
/// messages are above Open MPI's eager limits, so a send completes only
/// once matched: with one blocking thread per worker, the even rank's two
/// threads sit in sends of tags 0 and 1 while the odd rank's sit in
/// receives of tags 63 and 62, and nobody moves. Parked fibers complete it.
fn out_of_order_exchange(_: &Mpi, w: &Comm) {
    let Some(peer) = partner(w) else { return };
    const FIBERS: i32 = 64;
    const LEN: usize = 32 * 1024; // u64s: 256 KiB
    let even = w.rank() % 2 == 0;
    // NUMAFIBER_MPI_BLOCKING=1: the same exchange with MPI's blocking calls
    // (what a fiber without this crate would do); it hangs, and the
    // watchdog fails the job. Shows that the test can fail.
    let blocking = std::env::var_os("NUMAFIBER_MPI_BLOCKING").is_some();
    let w = w.clone();
    let sum = rt(2).block_on(move || {
        let hs: Vec<_> = (0..FIBERS)
            .map(|i| {
                let w = w.clone();
                fiber::spawn(move || {
                    let tag = if even { i } else { FIBERS - 1 - i };
                    let mut buf = vec![0u64; LEN];
                    if blocking {
                        blocking_exchange(even, &mut buf, peer, tag);
                    } else if even {
                        w.send(&vec![tag as u64; LEN], peer, tag).unwrap();
                        w.recv(&mut buf, peer, tag).unwrap();
                    } else {
                        w.recv(&mut buf, peer, tag).unwrap();
                        w.send(&buf, peer, tag).unwrap();
                    }
                    assert!(buf.iter().all(|&v| v == tag as u64), "tag {tag}: wrong contents");
                    buf[0]
                })
            })
            .collect();
        hs.into_iter().map(fiber::await_fiber).sum::<u64>()
    });
    assert_eq!(sum, (0..FIBERS as u64).sum::<u64>());
}

/// Every rank sends to the next and receives from the previous, with
/// blocking send/recv in separate fibers and with sendrecv.
fn point_to_point_ring(_: &Mpi, w: &Comm) {
    let w = w.clone();
    rt(2).block_on(move || {
        let (me, n) = (w.rank(), w.size());
        let (next, prev) = ((me + 1) % n, (me + n - 1) % n);
        let w2 = w.clone();
        let r = fiber::spawn(move || {
            let mut b = [0i32; 3];
            let st = w2.recv(&mut b, prev, 1).unwrap();
            (b, st)
        });
        w.send(&[me, me, me], next, 1).unwrap();
        let (b, st) = fiber::await_fiber(r);
        assert_eq!((b, st.source, st.tag, st.count), ([prev; 3], prev, 1, 3));
        let mut got = [0.0f64; 2];
        let st = w.sendrecv(&[me as f64, 0.5], next, 2, &mut got, ANY, ANY).unwrap();
        assert_eq!((got, st.source, st.tag), ([prev as f64, 0.5], prev, 2));
    });
}

fn wait_any_and_wait_all(_: &Mpi, w: &Comm) {
    let w = w.clone();
    rt(2).block_on(move || {
        let (me, n) = (w.rank(), w.size());
        let mut recvs: Vec<_> = (0..n).filter(|&r| r != me).map(|r| w.irecv(vec![0i32; 2], r, 10).unwrap()).collect();
        let sends: Vec<_> = (0..n).filter(|&r| r != me).map(|r| w.isend(vec![me, r], r, 10).unwrap()).collect();
        let mut seen = Vec::new();
        while let Some((_, r)) = numafiber_mpi::wait_any(&mut recvs) {
            let (buf, st) = r.unwrap();
            assert_eq!(buf, vec![st.source, me]);
            seen.push(st.source);
        }
        seen.sort();
        assert_eq!(seen, (0..n).filter(|&r| r != me).collect::<Vec<_>>());
        for r in numafiber_mpi::wait_all(sends) {
            r.unwrap();
        }
        assert!(numafiber_mpi::wait_any::<Vec<i32>>(&mut Vec::new()).is_none());
    });
}

fn probe_and_recv_vec(_: &Mpi, w: &Comm) {
    let Some(peer) = partner(w) else { return };
    let w = w.clone();
    rt(2).block_on(move || {
        w.send(&vec![7u16; 100 + w.rank() as usize], peer, 20).unwrap();
        let st = w.probe::<u16>(peer, 20).unwrap();
        assert_eq!((st.source, st.count), (peer, 100 + peer as usize));
        let mut b = vec![0u16; st.count];
        w.recv(&mut b, st.source, st.tag).unwrap();
        w.send(&[1u8, 2, 3], peer, 21).unwrap();
        let (v, st) = w.recv_vec::<u8>(ANY, 21).unwrap();
        assert_eq!((v, st.source), (vec![1, 2, 3], peer));
        let none = w.probe_until::<u8>(ANY, 22, Some(Instant::now() + Duration::from_millis(20))).unwrap();
        assert!(none.is_none());
    });
}

/// On one worker, a fiber parked in a receive leaves the worker to the
/// others: a counting fiber finishes while the receive still waits.
fn parked_recv_leaves_the_worker_free(_: &Mpi, w: &Comm) {
    let Some(peer) = partner(w) else { return };
    let w = w.clone();
    rt(1).block_on(move || {
        let w2 = w.clone();
        let r = fiber::spawn(move || {
            let mut b = [0u8];
            w2.recv(&mut b, peer, 30).unwrap();
            b[0]
        });
        let counted = Arc::new(AtomicUsize::new(0));
        let c2 = counted.clone();
        let counter = fiber::spawn(move || {
            for _ in 0..10 {
                fiber::sleep(Duration::from_millis(2));
                c2.fetch_add(1, SeqCst);
            }
        });
        fiber::await_fiber(counter);
        assert_eq!(counted.load(SeqCst), 10);
        assert!(!r.is_finished(), "the receive cannot have completed: nothing was sent yet");
        // Both ranks are past their counters: now send.
        w.barrier().unwrap();
        w.send(&[5u8], peer, 30).unwrap();
        assert_eq!(fiber::await_fiber(r), 5);
    });
}

/// A fiber parked in a receive is cancelled: the receive is cancelled
/// (`MPI_Cancel`) and completes before the fiber unwinds; a later message
/// with the same tag goes to the next receive, not to the cancelled one.
fn cancel_parked_recv(mpi: &Mpi, w: &Comm) {
    let Some(peer) = partner(w) else {
        w.barrier().unwrap();
        return;
    };
    let w = w.clone();
    rt(2).block_on(move || {
        let w2 = w.clone();
        let h = fiber::spawn(move || {
            let mut b = vec![0u32; 16];
            w2.recv(&mut b, peer, 40).unwrap();
            unreachable!("nothing was sent before the cancellation");
        });
        while numafiber_mpi::pending() == 0 {
            fiber::yield_now();
        }
        fiber::sleep(Duration::from_millis(5));
        h.cancel();
        assert!(h.join().unwrap_err().is_cancelled());
        assert_eq!(numafiber_mpi::pending(), 0, "the cancelled receive completed before the fiber unwound");
        w.barrier().unwrap();
        w.send(&[9u32], peer, 40).unwrap();
        let mut b = [0u32];
        w.recv(&mut b, peer, 40).unwrap();
        assert_eq!(b[0], 9);
    });
    assert_eq!(mpi.pending(), 0);
}

/// A fiber cancelled while in a barrier unwinds once the barrier completes
/// (MPI cannot cancel a collective), not before, and leaves nothing pending.
fn cancel_collective_wait(_: &Mpi, w: &Comm) {
    let w = w.clone();
    rt(2).block_on(move || {
        if w.rank() == 0 {
            fiber::sleep(Duration::from_millis(50));
            w.barrier().unwrap();
        } else {
            let w2 = w.clone();
            let h = fiber::spawn(move || {
                w2.barrier().unwrap();
                fiber::yield_now();
            });
            fiber::sleep(Duration::from_millis(10));
            h.cancel();
            assert!(h.join().unwrap_err().is_cancelled());
            // It unwound only once the barrier completed (rank 0 joined).
            assert_eq!(numafiber_mpi::pending(), 0);
        }
    });
}

fn recv_timeout_and_wait_until(_: &Mpi, w: &Comm) {
    let w = w.clone();
    rt(2).block_on(move || {
        let t = Instant::now();
        let mut b = [0u8; 4];
        let e = w.recv_timeout(&mut b, ANY, 50, Duration::from_millis(30)).unwrap_err();
        assert!(e.is_timeout(), "{e}");
        assert!(t.elapsed() >= Duration::from_millis(30));
        let r = w.irecv(vec![0u8; 4], ANY, 51).unwrap();
        assert!(!r.wait_until(Instant::now() + Duration::from_millis(20)));
        assert!(matches!(r.cancel(), Err(Error::Cancelled { .. })));
        // A message that arrives in time is received.
        if let Some(peer) = partner(&w) {
            w.send(&[1u8, 2, 3, 4], peer, 52).unwrap();
            let st = w.recv_timeout(&mut b, peer, 52, Duration::from_secs(30)).unwrap();
            assert_eq!((b, st.count), ([1, 2, 3, 4], 4));
        }
    });
}

/// A bad rank, a negative tag and a truncated message are error values on
/// the rank that made them; the other ranks' fibers go on.
fn bad_rank_and_truncation_are_errors(_: &Mpi, w: &Comm) {
    let w = w.clone();
    rt(2).block_on(move || {
        let n = w.size();
        let e = w.send(&[1u8], n, 0).unwrap_err();
        assert!(matches!(e, Error::BadRank { rank, size, .. } if rank == n && size == n), "{e}");
        assert!(e.to_string().contains("not in this communicator"), "{e}");
        assert!(matches!(w.recv(&mut [0u8], -3, 0), Err(Error::BadRank { rank: -3, .. })));
        assert!(matches!(w.isend(vec![0u8], 0, -1), Err(Error::BadTag { tag: -1, .. })));
        assert!(matches!(w.broadcast(&mut [0u8], n + 1), Err(Error::BadRank { .. })));
        assert!(matches!(w.all_reduce(&[1i32, 2], &mut [0i32], SystemOperation::sum()), Err(Error::BadLength { .. })));
        if let Some(peer) = partner(&w) {
            w.send(&[1u32; 8], peer, 60).unwrap();
            let mut small = [0u32; 4];
            let e = w.recv(&mut small, peer, 60).unwrap_err();
            assert!(e.is_truncated(), "{e}");
        }
    });
}

fn collectives(_: &Mpi, w: &Comm) {
    let w = w.clone();
    rt(2).block_on(move || {
        let (me, n) = (w.rank(), w.size());
        let nu = n as usize;
        w.barrier().unwrap();
        w.ibarrier().unwrap().wait().unwrap();
        let mut b = [if me == 1 % n { 77u64 } else { 0 }; 3];
        w.broadcast(&mut b, 1 % n).unwrap();
        assert_eq!(b, [77; 3]);
        let mut sum = [0i64; 2];
        w.reduce(&[me as i64, 1], (me == 0).then_some(&mut sum[..]), SystemOperation::sum(), 0).unwrap();
        if me == 0 {
            assert_eq!(sum, [(0..n as i64).sum(), n as i64]);
        }
        let mut max = [0i32];
        w.all_reduce(&[me], &mut max, SystemOperation::max()).unwrap();
        assert_eq!(max[0], n - 1);
        let mut all = vec![0i32; 2 * nu];
        let root = n - 1;
        w.gather(&[me, -me], (me == root).then_some(&mut all[..]), root).unwrap();
        if me == root {
            assert_eq!(all, (0..n).flat_map(|r| [r, -r]).collect::<Vec<_>>());
        }
        let mut everyone = vec![0i32; nu];
        w.all_gather(&[me * 10], &mut everyone).unwrap();
        assert_eq!(everyone, (0..n).map(|r| r * 10).collect::<Vec<_>>());
        let src: Vec<i32> = (0..n).map(|r| r + 100).collect();
        let mut mine = [0i32];
        w.scatter((me == 0).then_some(&src[..]), &mut mine, 0).unwrap();
        assert_eq!(mine[0], me + 100);
        let send: Vec<i32> = (0..n).map(|r| me * 1000 + r).collect();
        let mut recv = vec![0i32; nu];
        w.all_to_all(&send, &mut recv).unwrap();
        assert_eq!(recv, (0..n).map(|r| r * 1000 + me).collect::<Vec<_>>());
        // Concurrent collectives from several fibers, a communicator each.
        let comms: Vec<Comm> = (0..4).map(|_| w.dup().unwrap()).collect();
        assert!(comms.iter().all(|c| c.rank() == me && c.size() == n));
        let hs: Vec<_> = comms
            .into_iter()
            .enumerate()
            .map(|(k, c)| {
                fiber::spawn(move || {
                    let mut s = [0i32];
                    for _ in 0..10 {
                        c.all_reduce(&[k as i32], &mut s, SystemOperation::sum()).unwrap();
                        c.barrier().unwrap();
                    }
                    s[0]
                })
            })
            .collect();
        for (k, h) in hs.into_iter().enumerate() {
            assert_eq!(fiber::await_fiber(h), k as i32 * n);
        }
        // Collectives from several fibers, one at a time (MPI needs them in
        // the same order on every rank).
        for _ in 0..8 {
            let w = w.clone();
            let h = fiber::spawn(move || {
                let mut s = [0i32];
                w.all_reduce(&[1], &mut s, SystemOperation::sum()).unwrap();
                s[0]
            });
            assert_eq!(fiber::await_fiber(h), n);
        }
    });
}

/// On the odd rank of a pair, the `block_on` fiber is the only fiber, and
/// it waits on MPI until the even rank's dump is taken: the deadlock
/// detector must not fire. On the even rank the dump, taken while the main
/// fiber waits in a recv, names that recv's call site.
fn all_waiting_on_mpi_is_no_deadlock(_: &Mpi, w: &Comm) {
    let Some(peer) = partner(w) else { return };
    let w = w.clone();
    let even = w.rank() % 2 == 0;
    rt(2).block_on(move || {
        let mut b = [0u8];
        if even {
            let line = line!() + 12;
            let me = fiber::current().unwrap().id;
            let w2 = w.clone();
            let dumper = fiber::spawn(move || {
                fiber::sleep(Duration::from_millis(200));
                let d = Runtime::dump_current();
                let f = d.fibers().find(|f| f.id() == me).expect("the waiting fiber is in the dump");
                assert!(f.wait().is_some(), "it is waiting");
                let site = f.wait_site().expect("a parked fiber has a wait site");
                w2.send(&[0u8], peer, 72).unwrap(); // go: only now may the peer send
                (site.file().to_string(), site.line())
            });
            w.recv(&mut b, peer, 70).unwrap();
            let (file, l) = fiber::await_fiber(dumper);
            assert!(file.ends_with("mpirun.rs") && l == line, "wait site {file}:{l}, not the recv at line {line}");
        } else {
            w.recv(&mut b, peer, 72).unwrap(); // the only fiber, waiting on MPI
            w.send(&[1u8], peer, 70).unwrap();
        }
    });
}

/// Outside any runtime a plain thread's wait drives progress itself.
fn plain_thread_waits(_: &Mpi, w: &Comm) {
    let Some(peer) = partner(w) else { return };
    let r = w.irecv(vec![0u16; 2], peer, 80).unwrap();
    w.send(&[3u16, 4], peer, 80).unwrap();
    assert_eq!(r.wait().unwrap().0, vec![3, 4]);
    // `test` in a loop makes progress by itself too.
    let r = w.irecv(vec![0u16; 2], peer, 81).unwrap();
    let s = w.isend(vec![5u16, 6], peer, 81).unwrap();
    while !(r.test() && s.test()) {
        std::thread::yield_now();
    }
    s.wait().unwrap();
    assert_eq!(r.wait().unwrap().0, vec![5, 6]);
}

/// The runtime's workers are one per PU of the rank's CPU affinity (as
/// `mpirun --bind-to` set it), each on one of those PUs; bound one rank per
/// core (`NUMAFIBER_MPI_BIND=core`), the ranks' PUs are disjoint.
fn workers_land_on_the_ranks_pus(_: &Mpi, w: &Comm) {
    let allowed = numafiber::topology::allowed_cpus();
    let rt = Runtime::new().expect("runtime");
    assert_eq!(rt.workers(), allowed.len(), "one worker per PU the rank may use ({allowed:?})");
    let n = rt.workers();
    let cpus: Vec<usize> = rt.block_on(move || {
        let hs: Vec<_> = (0..n)
            .map(|i| fiber::Builder::new().worker(i).pinned(true).spawn(numafiber::topology::current_cpu).unwrap())
            .collect();
        hs.into_iter().map(|h| fiber::await_fiber(h).expect("sched_getcpu")).collect()
    });
    for c in &cpus {
        assert!(allowed.contains(c), "a worker runs on cpu {c}, outside the rank's {allowed:?}");
    }
    let mut firsts = vec![0i32; w.size() as usize];
    w.all_gather(&[allowed[0] as i32], &mut firsts).unwrap();
    if std::env::var("NUMAFIBER_MPI_BIND").as_deref() == Ok("core") {
        assert_eq!(allowed.len(), 1, "bound to a core, the rank may use one PU");
        let mut d = firsts.clone();
        d.sort();
        d.dedup();
        assert_eq!(d.len(), firsts.len(), "ranks bound to distinct cores: {firsts:?}");
    }
}

/// `out_of_order_exchange` with `MPI_Send` / `MPI_Recv`, which hold the
/// worker thread while they wait.
fn blocking_exchange(even: bool, buf: &mut [u64], peer: i32, tag: i32) {
    use mpi::ffi;
    use mpi::raw::AsRaw;
    use mpi::traits::Equivalence;
    let n = buf.len() as i32;
    let dt = u64::equivalent_datatype().as_raw();
    let out = vec![tag as u64; buf.len()];
    // SAFETY: valid buffers of `n` u64s, the world communicator, MPI
    // initialised with MPI_THREAD_MULTIPLE.
    unsafe {
        let world = ffi::RSMPI_COMM_WORLD;
        let st = ffi::RSMPI_STATUS_IGNORE;
        if even {
            ffi::MPI_Send(out.as_ptr().cast(), n, dt, peer, tag, world);
            ffi::MPI_Recv(buf.as_mut_ptr().cast(), n, dt, peer, tag, world, st);
        } else {
            ffi::MPI_Recv(buf.as_mut_ptr().cast(), n, dt, peer, tag, world, st);
            ffi::MPI_Send(buf.as_ptr().cast(), n, dt, peer, tag, world);
        }
    }
}

/// The progress fiber runs on the runtime of the fiber that started the
/// first pending request. When that runtime shuts down with requests
/// pending, the waiters of another runtime start a new one there, and a
/// plain thread's wait drives progress itself.
fn waiters_outlive_the_pollers_runtime(_: &Mpi, w: &Comm) {
    let Some(peer) = partner(w) else {
        w.barrier().unwrap();
        return;
    };
    let rt_a = rt(1);
    let w1 = w.clone();
    let r1 = rt_a.block_on(move || w1.irecv(vec![0u8], peer, 91).unwrap()); // the poller is on rt_a
    let rt_b = rt(1);
    let w2 = w.clone();
    let hb = rt_b.spawn(move || {
        let mut b = [0u8];
        w2.recv(&mut b, peer, 90).unwrap();
        b[0]
    });
    std::thread::sleep(Duration::from_millis(20)); // hb parks, relying on rt_a's poller
    drop(rt_a);
    w.barrier().unwrap();
    w.send(&[90u8], peer, 90).unwrap();
    w.send(&[91u8], peer, 91).unwrap();
    assert_eq!(hb.join().unwrap(), 90);
    assert_eq!(r1.wait().unwrap().0, vec![91]);
}
