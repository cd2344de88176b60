//! `select`: wait on several channel operations at once and complete
//! exactly one of them (Go's `select`, crossbeam-channel's `select!` and
//! `Select`). Use the [`select!`](crate::select) macro, or the [`Select`]
//! builder when the set of operations is only known at run time.
//!
//! ```
//! use std::time::Duration;
//! use numafiber::{fiber, select, sync::channel, Runtime};
//! let rt = Runtime::builder().workers(2).build().unwrap();
//! let got = rt.block_on(|| {
//!     let (tx1, rx1) = channel::bounded::<u32>(0);
//!     let (_tx2, rx2) = channel::bounded::<&str>(0);
//!     fiber::spawn(move || tx1.send(7).unwrap());
//!     select! {
//!         recv(rx1) -> v => v.unwrap(),
//!         recv(rx2) -> _ => 0,
//!         default(Duration::from_secs(10)) => 0,
//!     }
//! });
//! assert_eq!(got, 7);
//! ```
//!
//! # Semantics
//!
//! - A receive is *ready* when a message is buffered, a sender waits, or
//!   the channel is over (every sender gone, or closed): then it completes
//!   with `Err(RecvError)`. A send is ready when there is room, a receiver
//!   waits, or every receiver is gone (or the channel closed): then it
//!   completes with the value back in `Err(SendError(v))`.
//! - When several operations are ready, one is chosen **uniformly at
//!   random** (as Go; crossbeam does the same), so no arm starves. A
//!   parked select is as random: where several of its operations wait on
//!   one channel, the one the other side meets first is a random one.
//! - Otherwise the caller parks (a fiber parks, its worker runs others; a
//!   thread blocks) until one becomes ready, the deadline of a
//!   `default(timeout)` / [`Select::select_deadline`] arm passes, or, with a
//!   plain `default` arm, returns at once.
//! - A send arm's value is evaluated and moved in *before* selecting (as
//!   Go; crossbeam evaluates it only if that arm is chosen). If another
//!   arm is chosen the value is dropped.
//!
//! # Protocol
//!
//! One round of a blocking select:
//!
//! 1. *Try.* Every operation is tried without waiting, in a random order
//!    (this is where a ready operation is chosen). The select has no
//!    queued entry during this step, so a try that meets a blocked select
//!    of another fiber (a partner) claims that one's token: one CAS.
//! 2. *Register.* The select's token is reset to `WAITING` and one entry
//!    per operation is queued on its channel, in the random order of
//!    step 1 (a granter takes the first entry it meets, so where arms
//!    share a channel the queue order is the choice: it is random too)
//!    (`Slot::SelRecv` with a
//!    pointer to the arm's hand-off cell, or `Slot::SelSend` with the
//!    value), each under that channel's internal lock. If a channel shows
//!    under its lock that the operation could complete now (a value, room,
//!    a waiting partner whose token is still `WAITING` and which is not
//!    an entry of this same select, or the end), the
//!    round is aborted and step 1 runs again: the select never holds its
//!    own token while it claims another's, so two selects cannot each wait
//!    for the other.
//! 3. *Wait.* A granter (a `send`, `recv`, or another select's try) that
//!    finds an entry of this select claims the token with a CAS
//!    `WAITING -> arm i` under that channel's lock, and only then fills the
//!    cell or takes the value, pops the entry and signals it. A CAS that
//!    fails means the select was won elsewhere: the granter skips the
//!    entry (it is stale; the select removes it). So exactly one entry is
//!    granted per round. The select parks until its token is claimed, the
//!    deadline passes, a channel it waits on is closed (`close` wakes every
//!    waiter) or the caller cannot suspend.
//! 4. *Leave.* The select CASes `WAITING -> ABORTED`; if that fails, arm
//!    `i` won. It removes every entry it still has queued (each under its
//!    channel's lock; only the winner's was popped) and takes the winner's
//!    channel's lock once more before reading the cell: the granter's
//!    fill and signal happened in that critical section, and after it the
//!    granter no longer touches the select's memory (see `queue::Waker`).
//!    Aborted rounds (deadline, close) go back to step 1, which sees the
//!    closed channel as ready, or returns the timeout.
//!
//! The token and the cells live in the [`Select`] (cells boxed per arm),
//! which is borrowed mutably for the whole wait, so they stay put while an
//! entry points at them; the entries are removed before the wait returns,
//! also when it unwinds (a drop guard runs step 4 and hands a value that
//! was granted during the unwind back to its channel). The loom model
//! `select_claim_vs_abort` checks steps 3 and 4, and
//! `select_send_arm_vs_close` a send arm parked across a close (its value
//! sits in the queue then, so "is the channel over" must look at the
//! queued entry too).
//!
//! # Where it parks
//!
//! In step 3, through the same park calls as every other wait of
//! `crate::sync` (`park_caller`, `park_caller_until`): a fiber parks on
//! its task, a thread on its thread handle. Its deadlock-report reason is
//! "select over channels".

mod arms;
mod macros;

use std::fmt;
use std::time::{Duration, Instant};

use crate::sync::channel::{Receiver, RecvError, SendError, Sender};
use crate::sync::queue::Handoff;

use arms::{Arm, RecvArm, SendArm};
pub(crate) use arms::{Token, TokenRef};

/// A set of channel operations to wait on (crossbeam-channel's `Select`).
/// Add operations with [`recv`](Self::recv) and [`send`](Self::send)
/// (each returns the operation's index), then call [`select`](Self::select)
/// (wait), [`try_select`](Self::try_select) (do not wait),
/// [`select_timeout`](Self::select_timeout) or
/// [`select_deadline`](Self::select_deadline). The chosen operation has
/// already happened when these return; collect its result with
/// [`SelectedOperation::recv`] / [`SelectedOperation::send`]. Works from
/// fibers and from plain threads. See the [module docs](self) for the
/// semantics (random choice among ready operations, as Go).
///
/// A `Select` may be used for several selections: receive operations stay
/// in it; a send operation is spent once its value was sent.
///
/// ```
/// use numafiber::sync::{channel, Select};
/// let (tx1, rx1) = channel::unbounded::<i32>();
/// let (tx2, rx2) = channel::unbounded::<&str>();
/// tx2.send("hello").unwrap();
/// let mut sel = Select::new();
/// let a = sel.recv(&rx1);
/// let b = sel.recv(&rx2);
/// let op = sel.select();
/// assert_eq!(op.index(), b);
/// assert_eq!(op.recv(&rx2), Ok("hello"));
/// # let _ = (a, tx1);
/// ```
pub struct Select<'a> {
    arms: Vec<Box<dyn Arm + 'a>>,
    token: Token,
    order: Vec<usize>,
}

/// The operation a [`Select`] completed: its [`index`](Self::index), and
/// its result through [`recv`](Self::recv) or [`send`](Self::send) with the
/// same channel end that was added. Dropping it without collecting a
/// received value puts the value back at the front of its channel (it is
/// never lost).
///
/// ```
/// use numafiber::sync::{channel, Select};
/// let (tx, rx) = channel::bounded(1);
/// let mut sel = Select::new();
/// let i = sel.send(&tx, 5);
/// let op = sel.select();
/// assert_eq!(op.index(), i);
/// assert_eq!(op.send(&tx), Ok(()));
/// assert_eq!(rx.recv(), Ok(5));
/// ```
#[must_use = "collect the operation's result with `recv` or `send`"]
pub struct SelectedOperation<'s, 'a> {
    sel: &'s mut Select<'a>,
    index: usize,
    collected: bool,
}

/// [`Select::try_select`] found no operation ready.
///
/// ```
/// let (_tx, rx) = numafiber::sync::channel::unbounded::<u8>();
/// let mut sel = numafiber::sync::Select::new();
/// sel.recv(&rx);
/// assert!(sel.try_select().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TrySelectError;

/// [`Select::select_timeout`] or [`Select::select_deadline`] ran out of
/// time before an operation was ready.
///
/// ```
/// use std::time::Duration;
/// let (_tx, rx) = numafiber::sync::channel::unbounded::<u8>();
/// let mut sel = numafiber::sync::Select::new();
/// sel.recv(&rx);
/// assert!(sel.select_timeout(Duration::from_millis(1)).is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SelectTimeoutError;

impl fmt::Display for TrySelectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no operation of the select was ready")
    }
}
impl std::error::Error for TrySelectError {}
impl fmt::Display for SelectTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no operation of the select became ready before its deadline")
    }
}
impl std::error::Error for SelectTimeoutError {}

impl fmt::Debug for Select<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Select").field("operations", &self.arms.len()).finish()
    }
}
impl fmt::Debug for SelectedOperation<'_, '_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SelectedOperation").field("index", &self.index).finish()
    }
}

impl Default for Select<'_> {
    fn default() -> Self {
        Select::new()
    }
}

/// A deadline for [`select!`](crate::select)'s `default(..)` arm: a
/// `Duration` from now (crossbeam's form) or an `Instant`.
///
/// ```
/// use std::time::{Duration, Instant};
/// use numafiber::sync::select::Deadline;
/// assert!(Duration::from_secs(1).deadline().is_some());
/// let t = Instant::now();
/// assert_eq!(t.deadline(), Some(t));
/// ```
pub trait Deadline {
    /// The instant meant; `None` when it lies beyond what `Instant` can
    /// represent (wait without a deadline then).
    fn deadline(self) -> Option<Instant>;
}

impl Deadline for Duration {
    fn deadline(self) -> Option<Instant> {
        Instant::now().checked_add(self)
    }
}

impl Deadline for Instant {
    fn deadline(self) -> Option<Instant> {
        Some(self)
    }
}

impl<'a> Select<'a> {
    /// An empty set of operations.
    ///
    /// ```
    /// let sel = numafiber::sync::Select::new();
    /// # drop(sel);
    /// ```
    pub fn new() -> Select<'a> {
        Select { arms: Vec::new(), token: Token::new(), order: Vec::new() }
    }

    /// Add a receive on `rx`; returns the operation's index.
    ///
    /// ```
    /// let (_tx, rx) = numafiber::sync::channel::unbounded::<u8>();
    /// let mut sel = numafiber::sync::Select::new();
    /// assert_eq!(sel.recv(&rx), 0);
    /// assert_eq!(sel.recv(&rx), 1);
    /// ```
    pub fn recv<T>(&mut self, rx: &'a Receiver<T>) -> usize {
        self.arms.push(Box::new(RecvArm { rx, cell: Handoff::new(), id: None, out: None }));
        self.arms.len() - 1
    }

    /// Add a send of `value` on `tx`; returns the operation's index. The
    /// value is moved in now; it is dropped with the `Select` if the send
    /// is never chosen.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded();
    /// let mut sel = numafiber::sync::Select::new();
    /// let i = sel.send(&tx, "x");
    /// assert_eq!(sel.select().index(), i);
    /// assert_eq!(rx.recv(), Ok("x"));
    /// ```
    pub fn send<T>(&mut self, tx: &'a Sender<T>, value: T) -> usize {
        self.arms.push(Box::new(SendArm { tx, value: Some(value), id: None, out: None }));
        self.arms.len() - 1
    }

    /// Wait until one operation is ready and complete it (a random one if
    /// several are).
    ///
    /// A fiber being destroyed by its runtime's shutdown cannot wait: if
    /// nothing is ready it gets operation 0, failed (`recv` gives
    /// `RecvError`, `send` the value back), as a lone `recv`/`send` does.
    ///
    /// # Panics
    /// If no operation was added (it could never return; crossbeam panics
    /// the same way).
    ///
    /// ```
    /// use numafiber::{fiber, sync::{channel, Select}, Runtime};
    /// let rt = Runtime::builder().workers(2).build().unwrap();
    /// rt.block_on(|| {
    ///     let (tx, rx) = channel::bounded(0);
    ///     fiber::spawn(move || tx.send(3).unwrap());
    ///     let mut sel = Select::new();
    ///     sel.recv(&rx);
    ///     assert_eq!(sel.select().recv(&rx), Ok(3));
    /// });
    /// ```
    #[track_caller]
    pub fn select(&mut self) -> SelectedOperation<'_, 'a> {
        assert!(
            !self.arms.is_empty(),
            "Select::select with no operations would wait forever: add a recv or send first"
        );
        let i = self.run(true, None).expect("a blocking select without a deadline returns an operation");
        SelectedOperation { sel: self, index: i, collected: false }
    }

    /// Complete a ready operation without waiting, or `Err(TrySelectError)`.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded();
    /// let mut sel = numafiber::sync::Select::new();
    /// sel.recv(&rx);
    /// assert!(sel.try_select().is_err());
    /// tx.send(1).unwrap();
    /// assert_eq!(sel.try_select().unwrap().recv(&rx), Ok(1));
    /// ```
    pub fn try_select(&mut self) -> Result<SelectedOperation<'_, 'a>, TrySelectError> {
        match self.run(false, None) {
            Some(i) => Ok(SelectedOperation { sel: self, index: i, collected: false }),
            None => Err(TrySelectError),
        }
    }

    /// [`select`](Self::select) waiting at most `dur`.
    ///
    /// ```
    /// use std::time::Duration;
    /// let (tx, rx) = numafiber::sync::channel::bounded::<u8>(0);
    /// let mut sel = numafiber::sync::Select::new();
    /// sel.recv(&rx);
    /// assert!(sel.select_timeout(Duration::from_millis(2)).is_err());
    /// # drop(tx);
    /// ```
    #[track_caller]
    pub fn select_timeout(&mut self, dur: Duration) -> Result<SelectedOperation<'_, 'a>, SelectTimeoutError> {
        self.select_until(dur.deadline())
    }

    /// [`select`](Self::select) waiting until `deadline` at the latest (a
    /// deadline in the past still completes an operation that is ready).
    /// With no operation added it just waits for the deadline.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use numafiber::sync::{channel, Select};
    /// let (tx, rx) = channel::unbounded();
    /// tx.send(1).unwrap();
    /// let mut sel = Select::new();
    /// sel.recv(&rx);
    /// let past = Instant::now();
    /// assert_eq!(sel.select_deadline(past).unwrap().recv(&rx), Ok(1));
    /// assert!(sel.select_deadline(Instant::now() + Duration::from_millis(1)).is_err());
    /// ```
    #[track_caller]
    pub fn select_deadline(&mut self, deadline: Instant) -> Result<SelectedOperation<'_, 'a>, SelectTimeoutError> {
        self.select_until(Some(deadline))
    }

    /// `select_deadline` for the macro's `default(..)` arm; `None`: no
    /// deadline (a `Duration` too long for an `Instant`).
    #[doc(hidden)]
    #[track_caller]
    pub fn select_until(&mut self, deadline: Option<Instant>) -> Result<SelectedOperation<'_, 'a>, SelectTimeoutError> {
        if self.arms.is_empty() {
            match deadline {
                Some(d) => __sleep_until(d),
                // A deadline beyond what `Instant` can hold never comes:
                // wait forever, as `select! {}`.
                None => __select_forever(),
            }
            return Err(SelectTimeoutError);
        }
        match self.run(true, deadline) {
            Some(i) => Ok(SelectedOperation { sel: self, index: i, collected: false }),
            None => Err(SelectTimeoutError),
        }
    }

    /// Shuffle the try order (Fisher-Yates with a per-thread xorshift).
    fn shuffle(&mut self) {
        self.order.clear();
        self.order.extend(0..self.arms.len());
        for i in (1..self.order.len()).rev() {
            let j = (next_random() % (i as u64 + 1)) as usize;
            self.order.swap(i, j);
        }
    }

    /// The rounds of the module docs' protocol; the index of the completed
    /// operation, or `None` (nothing ready and `!block`, or the deadline
    /// passed).
    #[track_caller]
    fn run(&mut self, block: bool, deadline: Option<Instant>) -> Option<usize> {
        loop {
            // 1. Try, in a random order.
            self.shuffle();
            for k in 0..self.order.len() {
                let i = self.order[k];
                if self.arms[i].try_now() {
                    return Some(i);
                }
            }
            if !block || deadline.is_some_and(|d| Instant::now() >= d) {
                return None;
            }
            if crate::runtime::current_cannot_suspend() {
                if deadline.is_some() {
                    return None;
                }
                self.arms[0].fail();
                return Some(0);
            }
            // 2.-4. Register (in the random order of this round's try),
            // wait, leave.
            if let Some(i) = Round::new(&mut self.arms, &self.token).wait(&self.order, deadline) {
                return Some(i);
            }
        }
    }
}

/// One registration round (steps 2-4). Its drop runs step 4 if the wait
/// did not finish normally (an unwind through the park): no entry stays
/// queued pointing at a cell or token that is about to go away.
struct Round<'s, 'a> {
    arms: &'s mut [Box<dyn Arm + 'a>],
    token: &'s Token,
    finished: bool,
}

impl<'s, 'a> Round<'s, 'a> {
    fn new(arms: &'s mut [Box<dyn Arm + 'a>], token: &'s Token) -> Round<'s, 'a> {
        token.reset();
        Round { arms, token, finished: false }
    }

    /// Register every arm, in `order`, and park until claimed, the
    /// deadline, a close, or the caller cannot suspend. `Some(i)`: arm `i`
    /// was granted and its outcome is stored; `None`: the round was
    /// aborted (try again).
    ///
    /// The order is the round's random try order: a granter takes the
    /// first entry of a select it meets in its queue (FIFO), so where
    /// several arms wait in one queue the order they were queued in is the
    /// choice among them, and it must be as random as the choice among
    /// ready arms.
    #[track_caller]
    fn wait(mut self, order: &[usize], deadline: Option<Instant>) -> Option<usize> {
        let mut ready_now = false;
        for &i in order {
            if self.token.selected().is_some() {
                break; // claimed through an arm queued already
            }
            if !self.arms[i].register(self.token.at(i)) {
                ready_now = true;
                break;
            }
        }
        if !ready_now {
            let obj = self.arms[0].chan() as usize as u64;
            crate::runtime::set_wait_reason(crate::runtime::task::wait_kind::SELECT, obj);
            loop {
                if self.token.selected().is_some() {
                    break;
                }
                if crate::runtime::current_cannot_suspend()
                    || self.arms.iter().any(|a| a.gone())
                    || deadline.is_some_and(|d| Instant::now() >= d)
                {
                    break;
                }
                match deadline {
                    None => crate::runtime::park(),
                    Some(d) => crate::runtime::park_until(d),
                }
            }
            crate::runtime::set_wait_reason(crate::runtime::task::wait_kind::NONE, 0);
        }
        self.finished = true;
        let won = self.leave();
        if let Some(i) = won {
            self.arms[i].complete_granted();
        }
        won
    }

    /// Step 4: end the round and remove every queued entry; the arm that
    /// won, if a granter claimed the token first.
    fn leave(&mut self) -> Option<usize> {
        let won = self.token.abort();
        for (i, a) in self.arms.iter_mut().enumerate() {
            let granted = a.unregister();
            debug_assert!(!granted || won == Some(i), "only the claimed arm's entry is granted");
        }
        won
    }
}

impl Drop for Round<'_, '_> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        // Unwinding out of the park: leave, and give a value that was
        // granted meanwhile back to its channel.
        if let Some(i) = self.leave() {
            self.arms[i].give_back_granted();
        }
    }
}

impl<'a> SelectedOperation<'_, 'a> {
    /// The index of the completed operation (as returned by
    /// [`Select::recv`] / [`Select::send`]).
    ///
    /// ```
    /// let (tx, _rx) = numafiber::sync::channel::unbounded();
    /// let mut sel = numafiber::sync::Select::new();
    /// let i = sel.send(&tx, ());
    /// assert_eq!(sel.select().index(), i);
    /// ```
    pub fn index(&self) -> usize {
        self.index
    }

    /// The result of the completed receive: the message, or `RecvError`
    /// when the channel was over.
    ///
    /// # Panics
    /// If `rx` is not the channel of the completed operation, or that
    /// operation was a send (crossbeam panics the same way).
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded::<u8>();
    /// drop(tx);
    /// let mut sel = numafiber::sync::Select::new();
    /// sel.recv(&rx);
    /// assert!(sel.select().recv(&rx).is_err(), "a closed channel is ready");
    /// ```
    pub fn recv<T: 'a>(mut self, rx: &Receiver<T>) -> Result<T, RecvError> {
        let arm = &mut self.sel.arms[self.index];
        assert!(
            !arm.is_send() && arm.chan() == rx.chan_addr(),
            "SelectedOperation::recv: pass the receiver of the selected operation (index {})",
            self.index
        );
        // SAFETY: the arm is a receive on the same channel allocation as
        // `rx` (checked above), so it was built by `Select::recv` from a
        // `&Receiver<U>` whose `Arc<Chan<U>>` is that allocation; both are
        // alive, so `Chan<U>` and `Chan<T>` are one object, and since
        // `Chan<T>` is invariant in `T`, `U` is `T` exactly: the box holds
        // a `RecvArm<'a, T>`.
        let arm = unsafe { &mut *(&mut **arm as *mut dyn Arm as *mut RecvArm<'a, T>) };
        self.collected = true;
        arm.out.take().expect("the selected operation stored its outcome")
    }

    /// The result of the completed send: `Ok(())`, or the value back in a
    /// `SendError` when the channel was over.
    ///
    /// # Panics
    /// If `tx` is not the channel of the completed operation, or that
    /// operation was a receive.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded();
    /// drop(rx);
    /// let mut sel = numafiber::sync::Select::new();
    /// sel.send(&tx, 9);
    /// assert_eq!(sel.select().send(&tx).unwrap_err().0, 9);
    /// ```
    pub fn send<T: 'a>(mut self, tx: &Sender<T>) -> Result<(), SendError<T>> {
        let arm = &mut self.sel.arms[self.index];
        assert!(
            arm.is_send() && arm.chan() == tx.chan_addr(),
            "SelectedOperation::send: pass the sender of the selected operation (index {})",
            self.index
        );
        // SAFETY: as in `recv`, for `Select::send`'s `SendArm<'a, T>`.
        let arm = unsafe { &mut *(&mut **arm as *mut dyn Arm as *mut SendArm<'a, T>) };
        self.collected = true;
        arm.out.take().expect("the selected operation stored its outcome")
    }
}

impl Drop for SelectedOperation<'_, '_> {
    fn drop(&mut self) {
        if !self.collected {
            self.sel.arms[self.index].discard_outcome();
        }
    }
}

/// A per-thread xorshift64* generator: the random order of a select's
/// tries (uniform enough for fairness; not for anything secret).
fn next_random() -> u64 {
    use std::cell::Cell;
    thread_local! {
        static STATE: Cell<u64> = const { Cell::new(0) };
    }
    STATE.with(|s| {
        let mut x = s.get();
        if x == 0 {
            // Seed from the clock and this thread's stack address.
            let t =
                std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
            x = (t ^ (s as *const Cell<u64> as u64).rotate_left(32)) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        s.set(x);
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    })
}
/// `select! {}`: wait forever (Go's `select {}`). A fiber parks (the
/// deadlock report calls it a select with no arms; a cancellation unwinds
/// it), a thread blocks. Not part of the public API.
///
/// # Panics
/// When the calling fiber cannot wait: it is being destroyed by its
/// runtime's shutdown, or it is unwinding a panic (a destructor that runs
/// `select! {}`); a panic while unwinding aborts the process, as any.
#[doc(hidden)]
#[track_caller]
pub fn __select_forever() -> ! {
    /// Clears the wait reason however the wait ends (a cancellation
    /// unwinds out of the park).
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            crate::runtime::set_wait_reason(crate::runtime::task::wait_kind::NONE, 0);
        }
    }
    let _clear = Clear;
    loop {
        assert!(
            !crate::runtime::current_cannot_suspend(),
            "select! with no arms cannot wait: the calling fiber is being destroyed by its runtime's shutdown, or is unwinding"
        );
        // Object 0: the select has no channel (`wait_kind::describe`).
        crate::runtime::set_wait_reason(crate::runtime::task::wait_kind::SELECT, 0);
        crate::runtime::park();
    }
}

/// Sleep the caller (fiber or thread) until `deadline`: the `default(..)`
/// arm of a `select!` with no operation. Not part of the public API.
#[doc(hidden)]
pub fn __sleep_until(deadline: Instant) {
    if let Some(d) = deadline.checked_duration_since(Instant::now()) {
        crate::runtime::sleep(d);
    }
}
