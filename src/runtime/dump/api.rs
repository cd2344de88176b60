//! The public calls of dumps and the stall monitor: the `Builder`
//! settings, `Runtime::dump` and `Handle::dump` (kept here, beside what
//! they start and read).

use std::sync::Arc;

use super::Dump;
use crate::runtime::error::{BuildError, BuildErrorKind};
use crate::runtime::monitor::{self, StallReport};
use crate::runtime::{Builder, Handle, Runtime};

impl Builder {
    /// How long a fiber may run without giving control back to its worker
    /// before the stall monitor moves the fibers queued behind it to other
    /// workers, and reports it if something waited on it (default
    /// [`DEFAULT_STALL_THRESHOLD`](crate::runtime::DEFAULT_STALL_THRESHOLD),
    /// 50 ms); `None` turns the monitor off.
    ///
    /// The monitor is a thread per runtime that samples each worker's
    /// switch counter every quarter threshold (nothing is added to the
    /// switch path) and parks while every worker sleeps. A fiber over the
    /// threshold holds its worker: an idle worker is woken to take the
    /// fibers queued behind it, without a word. It is reported through
    /// [`on_stall`](Self::on_stall), once per incident, only when it hurt
    /// ([`StallCause`](crate::runtime::StallCause)): fibers queued behind
    /// it waited a threshold while another worker slept and could not take
    /// them (pinned to that worker, or out of the policy's reach), a timer
    /// of its worker was overdue by a threshold, or fibers waiting on
    /// sockets went unpolled that long. Long slices that nothing waited on
    /// (fork-join and task-graph code computes that long by design) are
    /// counted and said once, at shutdown
    /// ([`StallCause::LongSlices`](crate::runtime::StallCause::LongSlices)).
    /// Module `runtime::monitor` has the rules.
    ///
    /// # Which threshold
    ///
    /// The threshold is both how soon queued fibers are rescued and how
    /// late a stall may be reported; the monitor wakes four times per
    /// threshold while a worker runs. Lower is not better below a few
    /// milliseconds: the monitor sees a worker's switch counter, not its
    /// CPU, so a worker thread the OS preempts (its time slice is a few
    /// milliseconds, longer on a loaded machine), a page fault storm or a
    /// first touch of a stack looks like a fiber that does not give control
    /// back, and with a threshold of a millisecond or two even fibers that
    /// run for microseconds get reported now and then, and every report
    /// runs the hook. Tens of milliseconds (the default) catch the fibers
    /// that hurt latency (a blocking call, a loop that never yields)
    /// without that noise; a latency-bound server may go down to about
    /// 10 ms; a batch job may raise it or turn the monitor off. Zero is a
    /// [`BuildErrorKind::ZeroStallThreshold`](crate::BuildErrorKind::ZeroStallThreshold)
    /// error at [`build`](Self::build).
    ///
    /// ```
    /// use std::time::Duration;
    /// let rt = numafiber::Runtime::builder().workers(1).stall_threshold(Some(Duration::from_millis(20))).build()?;
    /// let quiet = numafiber::Runtime::builder().workers(1).stall_threshold(None).build()?;
    /// # Ok::<(), numafiber::BuildError>(())
    /// ```
    pub fn stall_threshold(mut self, threshold: Option<std::time::Duration>) -> Builder {
        self.stall_threshold = threshold;
        self
    }

    /// What the stall monitor does with a [`StallReport`] (default: print
    /// it to stderr). Runs on the monitor thread: once per stall (a long
    /// slice something waited on, [`StallReport::cause`]), and once at
    /// shutdown for the long slices that were not stalls, if there were
    /// any. It may take a [`Runtime::dump`] through a [`Handle`]. A panic
    /// of the hook is caught: the first is said on stderr, and the monitor
    /// carries on (reports, and moving fibers off held workers).
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder()
    ///     .workers(1)
    ///     .on_stall(|r| eprintln!("slow fiber {:?} on worker {}", r.fiber_id(), r.worker()))
    ///     .build()?;
    /// # Ok::<(), numafiber::BuildError>(())
    /// ```
    pub fn on_stall(mut self, hook: impl Fn(&StallReport) + Send + Sync + 'static) -> Builder {
        self.on_stall = Some(monitor::StallHook(Arc::new(hook)));
        self
    }

    /// Print a dump of this runtime to stderr whenever the process gets
    /// `signal` (Go dumps its goroutines on `SIGQUIT`): the grouped form,
    /// then every fiber. The handler only writes a byte to a pipe; a
    /// helper thread takes and prints the dump. The handler is
    /// signal-hook's, as for [`signal::signal`](crate::signal::signal), so
    /// it chains: a dump on `SIGINT` and
    /// [`signal::ctrl_c`](crate::signal::ctrl_c) both see each Ctrl-C,
    /// whichever was set up first, and a handler installed before either
    /// (not by signal-hook) is still called. The signal's default action
    /// is gone from then on (for `SIGQUIT`: the core dump).
    ///
    /// # Errors (at [`build`](Self::build))
    /// - a signal that cannot be caught (`SIGKILL`, `SIGSTOP`, a number
    ///   out of range): [`BuildErrorKind::Signal`](crate::BuildErrorKind::Signal);
    /// - `SIGSEGV`, `SIGBUS`, `SIGILL` or `SIGFPE`, which the program's own
    ///   faults raise (on `SIGSEGV` and `SIGBUS` the fiber stack-overflow
    ///   report runs): [`BuildErrorKind::FaultSignal`](crate::BuildErrorKind::FaultSignal).
    ///   Use `SIGQUIT` (Ctrl-\\ in a terminal), `SIGUSR1` or `SIGUSR2`.
    ///
    /// ```
    /// use numafiber::{BuildErrorKind, Runtime};
    /// let rt = Runtime::builder().workers(1).dump_on_signal(libc::SIGUSR2).build()?;
    /// let e = Runtime::builder().workers(1).dump_on_signal(libc::SIGSEGV).build().unwrap_err();
    /// assert!(matches!(e.kind(), BuildErrorKind::FaultSignal { .. }));
    /// # Ok::<(), numafiber::BuildError>(())
    /// ```
    pub fn dump_on_signal(mut self, signal: i32) -> Builder {
        self.dump_signal = Some(signal);
        self
    }

    /// Bad monitor or signal settings (at `build`, before any thread).
    pub(in crate::runtime) fn check_insight(&self) -> Result<(), BuildError> {
        if self.stall_threshold == Some(std::time::Duration::ZERO) {
            return Err(BuildError::new(BuildErrorKind::ZeroStallThreshold));
        }
        if let Some(sig) = self.dump_signal {
            if !(1..=64).contains(&sig) || sig == libc::SIGKILL || sig == libc::SIGSTOP {
                return Err(BuildError::new(BuildErrorKind::Signal {
                    signal: sig,
                    reason: "not a signal a handler can catch".into(),
                }));
            }
            if let Some(name) = super::signal::fault_signal(sig) {
                return Err(BuildError::new(BuildErrorKind::FaultSignal { signal: sig, name }));
            }
        }
        Ok(())
    }

    /// The last step of `build`: the signal watcher and the stall monitor
    /// of the started runtime `rt` (dropped, so shut down, on an error),
    /// with the builder's settings.
    pub(in crate::runtime) fn start_insight(
        rt: Runtime,
        name: &str,
        dump_signal: Option<i32>,
        stall_threshold: Option<std::time::Duration>,
        on_stall: Option<monitor::StallHook>,
    ) -> Result<Runtime, BuildError> {
        let _ = rt.shared.insight.name.set(name.to_owned());
        if let Some(sig) = dump_signal {
            if let Err(e) = super::signal::watch(&rt.shared, sig) {
                drop(rt);
                return Err(BuildError::new(BuildErrorKind::Signal { signal: sig, reason: e.to_string() }));
            }
        }
        if let Some(threshold) = stall_threshold {
            // The coarse clock runs from now on (fibers' ages).
            rt.shared.insight.tick();
            let hook = on_stall.unwrap_or_else(monitor::StallHook::stderr);
            if let Err(e) = monitor::start(&rt.shared, threshold, hook) {
                drop(rt);
                return Err(BuildError::new(BuildErrorKind::ThreadSpawn(e.to_string())));
            }
        }
        Ok(rt)
    }
}

impl Runtime {
    /// A [`Dump`] of every fiber and worker, taken while the runtime runs:
    /// see [`Dump`] for how to read it and what is a snapshot.
    ///
    /// ```
    /// use numafiber::{fiber, Runtime};
    /// let rt = Runtime::builder().workers(1).build().unwrap();
    /// let d = rt.block_on(|| {
    ///     let h = fiber::Builder::new().name("napper").spawn(|| fiber::sleep(std::time::Duration::from_millis(50))).unwrap();
    ///     fiber::yield_now(); // let it start and park
    ///     let d = Runtime::dump_current();
    ///     h.join().unwrap();
    ///     d
    /// });
    /// let napper = d.fibers().find(|f| f.name() == Some("napper")).unwrap();
    /// assert_eq!(napper.wait().unwrap().kind(), numafiber::runtime::WaitKind::Sleep);
    /// ```
    pub fn dump(&self) -> Dump {
        super::capture(&self.shared)
    }

    /// [`Runtime::dump`] of the runtime running the calling fiber
    /// (`Handle::current().dump()`).
    ///
    /// # Panics
    /// Outside a fiber.
    pub fn dump_current() -> Dump {
        Handle::current().dump()
    }

    /// Capture a backtrace each time a fiber of this runtime begins to
    /// wait, shown by [`Runtime::dump`] for parked fibers
    /// ([`FiberDump::backtrace`](crate::runtime::FiberDump::backtrace)).
    /// Off by default: each capture costs tens of microseconds, so turn it
    /// on to find out where fibers are stuck, not in production. Off, a wait
    /// pays one load and a branch. Fibers already parked when it is turned
    /// on have no backtrace until they wait again. Symbols need debug
    /// information in the binary (`debug = 1` or more in the Cargo profile;
    /// the release profile's default has none: frames then show addresses).
    ///
    /// ```
    /// use numafiber::{sync::Event, Runtime};
    /// use std::sync::Arc;
    /// let rt = Runtime::builder().workers(1).build()?;
    /// rt.set_park_backtraces(true);
    /// let ev = Arc::new(Event::new());
    /// let e = ev.clone();
    /// let h = rt.spawn(move || e.wait());
    /// let d = loop {
    ///     let d = rt.dump();
    ///     if d.fibers().any(|f| f.backtrace().is_some()) {
    ///         break d;
    ///     }
    ///     std::thread::yield_now();
    /// };
    /// println!("{d}"); // the waiting fiber's block ends with its backtrace
    /// ev.set();
    /// h.join().unwrap();
    /// # Ok::<(), numafiber::BuildError>(())
    /// ```
    pub fn set_park_backtraces(&self, on: bool) {
        self.shared.insight.traces.set(on);
    }
}

impl Handle {
    /// A [`Dump`] of every fiber and worker of the runtime, taken while it
    /// runs (how to read it: [`Dump`]). After shutdown the dump lists the
    /// fibers still registered and no running ones.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(1).build().unwrap();
    /// let h = rt.handle();
    /// let d = std::thread::spawn(move || h.dump()).join().unwrap();
    /// assert_eq!(d.workers().count(), 1);
    /// ```
    pub fn dump(&self) -> Dump {
        super::capture(&self.shared)
    }

    /// [`Runtime::set_park_backtraces`] through a handle.
    ///
    /// ```
    /// let rt = numafiber::Runtime::builder().workers(1).build()?;
    /// rt.handle().set_park_backtraces(true);
    /// # Ok::<(), numafiber::BuildError>(())
    /// ```
    pub fn set_park_backtraces(&self, on: bool) {
        self.shared.insight.traces.set(on);
    }
}
