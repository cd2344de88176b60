//! Every public waiting call records its caller's line as the wait site a
//! dump shows (`#[track_caller]` all the way down), one test per family:
//! the sync primitives' untimed and timed waits, the fiber calls, sockets.
//! Each fiber waits on the line that spawns it, so its wait site and spawn
//! site are the same line of this file.

use std::collections::BTreeMap;
use std::io::Read;
use std::sync::Arc;
use std::time::{Duration, Instant};

use numafiber::runtime::{Dump, FiberState};
use numafiber::sync::{
    channel, oneshot, AutoResetEvent, Barrier, Condvar, CondvarAny, Event, Mutex, RwLock, Select, Semaphore, WaitGroup,
};
use numafiber::{fiber, Runtime};

const LONG: Duration = Duration::from_secs(60);

/// Fibers spawned on `rt` and the line each waits at.
struct Sites<'a> {
    rt: &'a Runtime,
    lines: BTreeMap<&'static str, u32>,
}

impl<'a> Sites<'a> {
    fn new(rt: &'a Runtime) -> Sites<'a> {
        Sites { rt, lines: BTreeMap::new() }
    }

    /// Spawn `f` named `name`; it must wait at the caller's line.
    #[track_caller]
    fn spawn(&mut self, name: &'static str, f: impl FnOnce() + Send + 'static) {
        let line = std::panic::Location::caller().line();
        drop(fiber::Builder::new().name(name).spawn_on(self.rt, f).unwrap());
        self.lines.insert(name, line);
    }

    /// Wait until every fiber is parked, then check each one's wait site.
    fn check(self) -> Dump {
        let t = Instant::now();
        let d = loop {
            let d = self.rt.dump();
            let parked =
                self.lines.keys().all(|n| d.fibers().any(|f| f.name() == Some(*n) && f.state() == FiberState::Parked));
            if parked {
                break d;
            }
            assert!(t.elapsed() < Duration::from_secs(20), "not all parked:\n{d}");
            std::thread::sleep(Duration::from_millis(2));
        };
        let mut wrong = Vec::new();
        for (name, line) in &self.lines {
            let f = d.fibers().find(|f| f.name() == Some(*name)).unwrap();
            match f.wait_site() {
                Some(s) if (s.file(), s.line()) == (file!(), *line) => {}
                s => wrong.push(format!("{name}: waits at {s:?}, expected {}:{line}", file!())),
            }
        }
        assert!(wrong.is_empty(), "wrong wait sites:\n{}\n\n{d}", wrong.join("\n"));
        d
    }
}

/// Drop a result of any type (some are `Copy`).
fn ignore<T>(_: T) {}

fn runtime() -> Runtime {
    Runtime::builder().workers(2).build().unwrap()
}

#[test]
fn sync_waits_name_the_callers_line() {
    let rt = runtime();
    let mut s = Sites::new(&rt);
    let mutex = Arc::new(Mutex::new(()));
    let held = mutex.lock();
    let rw = Arc::new(RwLock::new(()));
    let written = rw.write();
    let ev = Arc::new(Event::new());
    let auto = Arc::new(AutoResetEvent::new());
    let sem = Arc::new(Semaphore::new(0));
    let barrier = Arc::new(Barrier::new(3));
    let wg = Arc::new(WaitGroup::new());
    wg.add(1);
    let cv = Arc::new((Mutex::new(()), Condvar::new()));
    let cva = Arc::new((Mutex::new(()), CondvarAny::new()));

    let m = mutex.clone();
    s.spawn("lock", move || ignore(m.lock()));
    let m = mutex.clone();
    s.spawn("try_lock_for", move || ignore(m.try_lock_for(LONG)));
    let m = mutex.clone();
    s.spawn("try_lock_until", move || ignore(m.try_lock_until(Instant::now() + LONG)));
    let r = rw.clone();
    s.spawn("read", move || ignore(r.read()));
    let e = ev.clone();
    s.spawn("event_wait", move || e.wait());
    let e = ev.clone();
    s.spawn("event_wait_timeout", move || ignore(e.wait_timeout(LONG)));
    let e = ev.clone();
    s.spawn("event_wait_until", move || ignore(e.wait_until(Instant::now() + LONG)));
    let a = auto.clone();
    s.spawn("auto_wait", move || a.wait());
    let a = auto.clone();
    s.spawn("auto_wait_timeout", move || ignore(a.wait_timeout(LONG)));
    let a = auto.clone();
    s.spawn("auto_wait_until", move || ignore(a.wait_until(Instant::now() + LONG)));
    let x = sem.clone();
    s.spawn("acquire", move || ignore(x.acquire()));
    let x = sem.clone();
    s.spawn("acquire_until", move || ignore(x.acquire_until(Instant::now() + LONG)));
    let b = barrier.clone();
    s.spawn("barrier", move || ignore(b.wait()));
    let w = wg.clone();
    s.spawn("waitgroup", move || w.wait());
    let c = cv.clone();
    s.spawn("condvar_wait", move || ignore(c.1.wait(c.0.lock())));
    let c = cv.clone();
    s.spawn("condvar_wait_timeout", move || ignore(c.1.wait_timeout(c.0.lock(), LONG)));
    let c = cv.clone();
    s.spawn("condvar_wait_until", move || ignore(c.1.wait_until(c.0.lock(), Instant::now() + LONG)));
    let c = cv.clone();
    s.spawn("condvar_wait_while", move || ignore(c.1.wait_while(c.0.lock(), |_| true)));
    let c = cva.clone();
    s.spawn("condvar_any_wait_while", move || ignore(c.1.wait_while(&c.0, c.0.lock(), |_| true)));
    let r = rw.clone();
    s.spawn("write", move || ignore(r.write()));
    let c = cva.clone();
    s.spawn("condvar_any_wait", move || ignore(c.1.wait(&c.0, c.0.lock())));
    let c = cva.clone();
    s.spawn("condvar_any_wait_timeout", move || ignore(c.1.wait_timeout(&c.0, c.0.lock(), LONG)));
    let c = cva.clone();
    s.spawn("condvar_any_wait_until", move || ignore(c.1.wait_until(&c.0, c.0.lock(), Instant::now() + LONG)));
    s.check();
    drop(rt); // the shutdown destroys the parked fibers
    drop((held, written));
}

#[test]
fn channel_and_future_waits_name_the_callers_line() {
    let rt = runtime();
    let mut s = Sites::new(&rt);
    let (tx, rx) = channel::bounded::<u32>(1);
    tx.send(0).unwrap(); // full
    let (keep, empty) = channel::bounded::<u32>(1);
    let (t, r) = (tx.clone(), empty.clone());
    s.spawn("send", move || ignore(t.send(1)));
    let t = tx.clone();
    s.spawn("send_timeout", move || ignore(t.send_timeout(1, LONG)));
    let t = tx.clone();
    s.spawn("send_deadline", move || ignore(t.send_deadline(1, Instant::now() + LONG)));
    s.spawn("recv", move || ignore(r.recv()));
    let r = empty.clone();
    s.spawn("recv_timeout", move || ignore(r.recv_timeout(LONG)));
    let r = empty.clone();
    s.spawn("recv_deadline", move || ignore(r.recv_deadline(Instant::now() + LONG)));
    let r = empty.clone();
    s.spawn("select", move || ignore(Select::new().tap_recv(&r).select().recv(&r)));
    let r = empty.clone();
    s.spawn("select_timeout", move || ignore(Select::new().tap_recv(&r).select_timeout(LONG).map(|o| o.recv(&r))));
    let (_p1, f1) = oneshot::<u32>();
    s.spawn("oneshot_wait", move || ignore(f1.wait()));
    let (_p2, mut f2) = oneshot::<u32>();
    s.spawn("oneshot_wait_timeout", move || ignore(f2.wait_timeout(LONG)));
    let (_p3, f3) = oneshot::<u32>();
    s.spawn("oneshot_wait_for", move || ignore(f3.wait_for(LONG)));
    let (_p4, f4) = oneshot::<u32>();
    s.spawn("oneshot_wait_until", move || ignore(f4.wait_until(Instant::now() + LONG)));
    let (_p5, f5) = oneshot::<u32>();
    let shared = f5.share();
    let sh = shared.clone();
    s.spawn("shared_wait", move || ignore(sh.wait()));
    let sh = shared.clone();
    s.spawn("shared_wait_timeout", move || ignore(sh.wait_timeout(LONG)));
    let sh = shared.clone();
    s.spawn("shared_wait_for", move || ignore(sh.wait_for(LONG)));
    let sh = shared.clone();
    s.spawn("shared_wait_until", move || ignore(sh.wait_until(Instant::now() + LONG)));
    s.check();
    drop(rt);
    drop((rx, keep, _p1, _p2, _p3, _p4, _p5));
}

/// `Select::recv` returns the arm's index; this returns the selector.
trait TapRecv<'a> {
    fn tap_recv(self, rx: &'a channel::Receiver<u32>) -> Self;
}

impl<'a> TapRecv<'a> for Select<'a> {
    fn tap_recv(mut self, rx: &'a channel::Receiver<u32>) -> Self {
        self.recv(rx);
        self
    }
}

#[test]
fn fiber_waits_name_the_callers_line() {
    let rt = runtime();
    let mut s = Sites::new(&rt);
    let ev = Arc::new(Event::new());
    let waiter = |ev: &Arc<Event>| {
        let e = ev.clone();
        fiber::Builder::new().name("child").spawn_on(&rt, move || e.wait()).unwrap()
    };
    let h = waiter(&ev);
    s.spawn("join", move || ignore(h.join()));
    let h = waiter(&ev);
    s.spawn("await_fiber", move || fiber::await_fiber(h));
    let (a, b) = (waiter(&ev), waiter(&ev));
    s.spawn("when_any", move || ignore(fiber::when_any(vec![a, b])));
    let (a, b) = (waiter(&ev), waiter(&ev));
    s.spawn("when_all", move || ignore(fiber::when_all(vec![a, b])));
    let e = ev.clone();
    #[rustfmt::skip]
    s.spawn("join_next", move || { let mut set = fiber::JoinSet::new(); set.spawn(move || e.wait()); ignore(set.join_next()) });
    let e = ev.clone();
    s.spawn("scope", move || fiber::scope(|sc| ignore(sc.spawn(|| e.wait()))));
    s.spawn("sleep", || fiber::sleep(LONG));
    s.spawn("sleep_until", || fiber::sleep_until(Instant::now() + LONG));
    #[rustfmt::skip]
    s.spawn("park", || loop { fiber::park() });
    #[rustfmt::skip]
    s.spawn("park_timeout", || loop { fiber::park_timeout(LONG) });
    s.spawn("block_on_future", || fiber::block_on_future(std::future::pending::<()>()));
    s.check();
    drop(rt);
}

#[test]
fn socket_waits_name_the_callers_line() {
    use numafiber::net::{TcpListener, TcpStream, UdpSocket};
    let rt = runtime();
    let mut s = Sites::new(&rt);
    let listener = Arc::new(rt.block_on(|| TcpListener::bind("127.0.0.1:0")).unwrap());
    let addr = listener.local_addr().unwrap();
    let (l, l2) = (listener.clone(), listener.clone());
    // Two connected pairs; the server sides never write.
    let (mut client, server) = rt.block_on(move || {
        let c = TcpStream::connect(addr).unwrap();
        (c, l.accept().unwrap().0)
    });
    let (mut client2, server2) = rt.block_on(move || {
        let c = TcpStream::connect(addr).unwrap();
        (c, l2.accept().unwrap().0)
    });
    let udp = Arc::new(rt.block_on(|| UdpSocket::bind("127.0.0.1:0")).unwrap());
    let l = listener.clone();
    s.spawn("accept", move || ignore(l.accept()));
    s.spawn("read", move || ignore(client.read(&mut [0u8; 16])));
    s.spawn("read_exact", move || ignore(client2.read_exact(&mut [0u8; 16])));
    let u = udp.clone();
    s.spawn("recv_from", move || ignore(u.recv_from(&mut [0u8; 16])));
    let u = udp.clone();
    s.spawn("recv", move || ignore(u.recv(&mut [0u8; 16])));
    s.check();
    drop(rt);
    drop((server, server2));
}
