//! numafiber and tokio side by side, calling each other.
//!
//! ```text
//! cargo run --release -p numafiber-peers --example async_interop
//! ```
//!
//! 1. A fiber uses a tokio-based API: the async work runs on a tokio
//!    runtime beside numafiber (`tokio::runtime::Handle::spawn`), and the
//!    fiber waits for tokio's `JoinHandle` with `fiber::block_on_future`,
//!    which parks the fiber (its worker runs other fibers) until tokio's
//!    waker fires. Here: a `tokio::net` echo round trip and a
//!    `tokio::time::sleep`, which need tokio's reactor and timer and so
//!    must run on tokio's threads.
//! 2. Futures that only need a waker are polled by the fiber directly:
//!    a `tokio::sync::oneshot` receiver.
//! 3. Async code awaits a fiber: `numafiber::fiber::JoinHandle` is
//!    `IntoFuture<Output = Result<T, JoinError>>`, so a tokio task
//!    `.await`s work spawned on numafiber.
//!
//! Each step checks its result and the program exits non-zero if one is
//! wrong.

use std::time::Duration;

use numafiber::{fiber, Runtime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn main() {
    let tokio_rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("tokio runtime");
    let th = tokio_rt.handle().clone();
    let rt = Runtime::builder().workers(2).build().expect("numafiber runtime");
    let nf = rt.handle();

    // 1. A fiber calls into tokio (I/O and timers on tokio's threads).
    let th1 = th.clone();
    let echoed = rt.block_on(move || {
        let server = th1.spawn(async {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
            let addr = l.local_addr()?;
            let serve = tokio::spawn(async move {
                let (mut s, _) = l.accept().await?;
                let mut buf = [0u8; 5];
                s.read_exact(&mut buf).await?;
                s.write_all(&buf).await?;
                Ok::<_, std::io::Error>(())
            });
            tokio::time::sleep(Duration::from_millis(10)).await;
            let mut c = tokio::net::TcpStream::connect(addr).await?;
            c.write_all(b"hello").await?;
            let mut got = [0u8; 5];
            c.read_exact(&mut got).await?;
            serve.await.expect("the server task")?;
            Ok::<_, std::io::Error>(got)
        });
        // Parks this fiber until tokio's task is done.
        fiber::block_on_future(server).expect("the tokio task panicked").expect("tokio I/O")
    });
    assert_eq!(&echoed, b"hello");
    println!("1. a fiber waited for a tokio echo round trip: {:?}", std::str::from_utf8(&echoed).unwrap());

    // 2. A tokio oneshot, completed from a tokio task, received by a fiber.
    let th2 = th.clone();
    let v = rt.block_on(move || {
        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        th2.spawn(async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            let _ = tx.send(42);
        });
        fiber::block_on_future(rx).expect("the sender is kept until it sends")
    });
    assert_eq!(v, 42);
    println!("2. a fiber received {v} from a tokio oneshot");

    // 3. A tokio task awaits fibers.
    let sum = tokio_rt.block_on(async move {
        let hs: Vec<_> = (1..=4u64).map(|i| nf.spawn(move || (1..=i * 1000).sum::<u64>())).collect();
        let mut total = 0;
        for h in hs {
            total += h.await.expect("the fiber panicked");
        }
        total
    });
    let want: u64 = (1..=4u64).map(|i| (1..=i * 1000).sum::<u64>()).sum();
    assert_eq!(sum, want);
    println!("3. a tokio task awaited 4 fibers: sum {sum}");
}
