//! Ported corolib program (tutorial p1401, "async_operation, exception"):
//! coroutine1 awaits coroutine2, which awaits coroutine3, which awaits
//! coroutine4 twice; coroutine4 awaits coroutine5, which starts an
//! asynchronous operation and awaits its completion. A "completion flow" on
//! the main thread completes the first operation with an error (-1) and the
//! second with 10.
//!
//! In numafiber the operation is a `sync::oneshot` (`set_error` is the error
//! path), `throw` is `std::panic::panic_any(OpFailed(..))`, and `catch` is
//! `JoinHandle::join()` + `JoinError::into_panic()` + `downcast`. A panic
//! hook filters out the expected `OpFailed` payloads so that they do not
//! print "thread panicked" lines; other panics still do.
//!
//! One difference from corolib: there, `eventHandler(-1)` resumes the
//! coroutine *inside* the completion call, so an exception escaping the
//! coroutine is thrown out of `eventHandler` into the completion flow. Here
//! the fiber runs on a worker: the completer's `set_error` just returns, and
//! the panic travels to whoever joins the fiber.
//!
//! `cargo run --example exception_flow`
//!
//! Output (one iteration):
//! ```text
//! iteration 0
//!   coroutine5: start operation 1
//!   completionflow: operation 1 completes with -1
//!   coroutine5: operation 1 failed: throw OpFailed(-1)
//!   coroutine4: caught OpFailed(-1), returns 0
//!   coroutine5: start operation 2
//!   completionflow: operation 2 completes with 10
//!   coroutine5: operation 2 gave 10, returns 11
//!   coroutine4: returns 11
//!   coroutine1: v = 14
//! ```

use std::panic::resume_unwind;
use std::sync::{mpsc, Arc, Mutex, Once};

use numafiber::sync::{self, oneshot::Promise};
use numafiber::{fiber, Runtime};

/// The "exception" of a failed operation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct OpFailed(pub i32);

type Log = Arc<Mutex<Vec<String>>>;

struct Ctx {
    log: Log,
    /// corolib's `eventHandler`: where started operations wait for their
    /// completion (here, the main thread's completion flow).
    ops: mpsc::Sender<(u32, Promise<i32>)>,
    next_op: Mutex<u32>,
}

impl Ctx {
    fn say(&self, s: String) {
        self.log.lock().unwrap().push(s);
    }
}

/// Keep the default panic hook for everything but the expected payloads.
pub fn quiet_expected_panics() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if info.payload().downcast_ref::<OpFailed>().is_none() {
                default(info);
            }
        }));
    });
}

fn coroutine5(ctx: &Ctx) -> i32 {
    let (promise, future) = sync::oneshot::<i32>();
    let id = {
        let mut n = ctx.next_op.lock().unwrap();
        *n += 1;
        *n
    };
    ctx.say(format!("  coroutine5: start operation {id}"));
    ctx.ops.send((id, promise)).expect("the completion flow runs");
    match future.wait() {
        // co_await op
        Ok(v) => {
            ctx.say(format!("  coroutine5: operation {id} gave {v}, returns {}", v + 1));
            v + 1
        }
        Err(e) => {
            let code = e.into_error().and_then(|e| e.to_string().parse().ok()).unwrap_or(i32::MIN);
            ctx.say(format!("  coroutine5: operation {id} failed: throw OpFailed({code})"));
            std::panic::panic_any(OpFailed(code)) // throw
        }
    }
}

fn coroutine4(ctx: &Arc<Ctx>) -> i32 {
    let c = ctx.clone();
    match fiber::spawn(move || coroutine5(&c)).join() {
        Ok(v) => {
            ctx.say(format!("  coroutine4: returns {v}"));
            v
        }
        // catch (const OpFailed& e)
        Err(e) => match e.into_panic().map(|p| p.downcast::<OpFailed>()) {
            Some(Ok(f)) => {
                ctx.say(format!("  coroutine4: caught {f:?}, returns 0"));
                0
            }
            Some(Err(other)) => resume_unwind(other), // not ours: rethrow
            None => panic!("coroutine5 was cancelled"),
        },
    }
}

fn coroutine3(ctx: &Arc<Ctx>) -> i32 {
    let a = fiber::await_fiber(fiber::spawn({
        let c = ctx.clone();
        move || coroutine4(&c)
    }));
    let b = fiber::await_fiber(fiber::spawn({
        let c = ctx.clone();
        move || coroutine4(&c)
    }));
    a + b + 1
}

fn coroutine2(ctx: &Arc<Ctx>) -> i32 {
    let c = ctx.clone();
    fiber::await_fiber(fiber::spawn(move || coroutine3(&c))) + 1
}

fn coroutine1(ctx: &Arc<Ctx>) -> i32 {
    let c = ctx.clone();
    let v = fiber::await_fiber(fiber::spawn(move || coroutine2(&c))) + 1;
    ctx.say(format!("  coroutine1: v = {v}"));
    v
}

/// Run the program for `iterations`; the completions are `completions`
/// (negative: an error). Returns its output.
pub fn run(rt: &Runtime, iterations: usize, completions: &[i32]) -> String {
    quiet_expected_panics();
    let mut out = String::new();
    for it in 0..iterations {
        let log: Log = Arc::new(Mutex::new(vec![format!("iteration {it}")]));
        let (tx, rx) = mpsc::channel();
        let ctx = Arc::new(Ctx { log: log.clone(), ops: tx, next_op: Mutex::new(0) });
        // corolib: async_task<int> a = coroutine1(); then completionflow()
        // on this thread, then a.get_result().
        let a = rt.spawn(move || coroutine1(&ctx));
        for &c in completions {
            let (id, promise) = rx.recv().expect("an operation was started");
            log.lock().unwrap().push(format!("  completionflow: operation {id} completes with {c}"));
            if c >= 0 {
                promise.set(c);
            } else {
                promise.set_error(c.to_string());
            }
        }
        a.join().expect("coroutine1 returns");
        for l in log.lock().unwrap().iter() {
            out.push_str(l);
            out.push('\n');
        }
    }
    out
}

#[allow(dead_code)]
fn main() {
    let rt = Runtime::builder().workers(2).build().expect("runtime");
    print!("{}", run(&rt, 3, &[-1, 10]));
}
