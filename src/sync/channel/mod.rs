//! Multi-producer multi-consumer channels whose blocking operations park
//! the calling fiber (or thread): [`bounded`] (capacity 0 = rendezvous) and
//! [`unbounded`].
//!
//! The channel is *closed* for receivers when the last [`Sender`] is
//! dropped (after the buffered messages are received, `recv` returns
//! [`RecvError`]) and for senders when the last [`Receiver`] is dropped
//! (`send` returns the value in a [`SendError`]). Either end can also
//! [`close`](Sender::close) it explicitly while both ends live (Go's
//! `close(ch)`): messages sent before are still received, later sends fail.
//!
//! Every blocking call has a `_timeout(Duration)` and a `_deadline(Instant)`
//! form.
//!
//! ```
//! use numafiber::{fiber, sync::channel, Runtime};
//! let rt = Runtime::builder().workers(2).build().unwrap();
//! let total = rt.block_on(|| {
//!     let (tx, rx) = channel::bounded(4);
//!     fiber::spawn(move || for i in 1..=10u64 { tx.send(i).unwrap(); });
//!     rx.iter().sum::<u64>() // ends when the sender is dropped
//! });
//! assert_eq!(total, 55);
//! ```
//!
//! # Protocol
//!
//! State (buffer, sender and receiver counts) and waiters live in one
//! wait queue, the core every primitive of [`crate::sync`] sits on. Every
//! hand-off to a waiter takes the internal lock once, on the side that finds
//! the waiter:
//!
//! - A blocked *sender* queues its value with its entry; a receiver that
//!   frees room (or, at capacity 0, meets it) takes the value out of the
//!   entry (or moves it into the buffer) and grants the sender: a send
//!   returns only once its value is in the buffer or taken. The woken
//!   sender just returns.
//! - A blocked *receiver* queues a pointer to a hand-off cell on its own
//!   stack (`queue::Handoff`); a send that finds it moves the value into
//!   that cell and grants it, under the lock, in FIFO order of the
//!   receivers. The woken receiver returns the value from its cell without
//!   locking again. Receivers are only ever granted with a value, and a
//!   value goes to a waiting receiver only while the buffer is empty, so
//!   the order of values is kept. Why the cell is alive whenever a sender
//!   writes it, including timeouts, close and forced unwinds, is argued at
//!   `queue::Handoff`.
//! - Leaving without a grant (timeout, close, shutdown): the waiter removes
//!   its own entry under the lock; a sender gets its value back. If the
//!   entry is already gone, it was granted first and the wait succeeds
//!   (the receiver's value is in its cell). A receiver unwound by the
//!   shutdown after its grant puts the value back: to the next waiting
//!   receiver, or the front of the buffer. No value is lost or duplicated.
//!
//! Closing (the last sender or receiver dropped, or `close()`) sets a flag
//! and wakes every waiter (without granting), which leaves the queue and
//! re-checks. After an explicit `close()` no blocked sender is granted any
//! more (a receiver takes only what is in the buffer), so a send either
//! completed before the close or fails.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod error;
mod never;
mod select_ops;

pub use error::{RecvError, RecvTimeoutError, SendError, TryRecvError, TrySendError};
pub use never::{never, never_sender};

use crate::runtime::task::wait_kind;
use crate::sync::queue::{Entry, Handoff, HandoffPtr, Me, Outcome, Reason, WaitQueue};
use crate::sync::select::TokenRef;

enum Slot<T> {
    /// A blocked receiver: where a sender puts the value for it.
    Recv(HandoffPtr<T>),
    /// A blocked sender with its value; `Taken` once a receiver took it.
    Send(T),
    Taken,
    /// A blocked `select`'s receive arm: its cell, and its selection
    /// token (`super::select`): granted only by whoever claims the token.
    SelRecv(HandoffPtr<T>, TokenRef),
    /// A blocked `select`'s send arm with its value.
    SelSend(T, TokenRef),
}

/// The granting predicates: a plain waiter is always grantable; a select's
/// entry only if this caller wins its token (a CAS, under this queue's
/// lock; `grant_first_where_then` pops exactly the entry for which it
/// returned `true`). An entry whose select was claimed elsewhere is
/// skipped; its select removes it.
fn claim_recv<T>(s: &Slot<T>) -> bool {
    match s {
        Slot::Recv(_) => true,
        Slot::SelRecv(_, t) => t.claim(),
        _ => false,
    }
}
fn claim_send<T>(s: &Slot<T>) -> bool {
    match s {
        Slot::Send(_) => true,
        Slot::SelSend(_, t) => t.claim(),
        _ => false,
    }
}
/// A waiter that could still be granted (without claiming it), other
/// than an entry of the select `me` (a select never pairs with itself).
fn live_recv<T>(s: &Slot<T>, me: &TokenRef) -> bool {
    match s {
        Slot::Recv(_) => true,
        Slot::SelRecv(_, t) => !t.same_select(me) && t.is_waiting(),
        _ => false,
    }
}
fn live_send<T>(s: &Slot<T>, me: &TokenRef) -> bool {
    match s {
        Slot::Send(_) => true,
        Slot::SelSend(_, t) => !t.same_select(me) && t.is_waiting(),
        _ => false,
    }
}

struct State<T> {
    buf: VecDeque<T>,
    /// `None`: unbounded.
    cap: Option<usize>,
    senders: usize,
    receivers: usize,
    /// Blocked senders / receivers in the wait queue. Counted so that
    /// looking for a waiter of the other kind is O(1) when there is none
    /// (a queue of a million blocked receivers is not scanned per recv).
    send_waiters: usize,
    recv_waiters: usize,
    /// `close()` was called: sends fail, blocked senders give their
    /// values back, receivers drain the buffer and then see the end.
    closed: bool,
}

impl<T> State<T> {
    /// A send can never succeed: every receiver is gone, or closed.
    fn send_disconnected(&self) -> bool {
        self.receivers == 0 || self.closed
    }
    /// Once the buffer is empty, no value can come any more.
    fn recv_disconnected(&self) -> bool {
        self.senders == 0 || self.closed
    }
    fn grant_send(q: &mut Locked<'_, T>) -> Option<Entry<Slot<T>>> {
        if q.state.send_waiters == 0 {
            return None;
        }
        let e = q.grant_first_where(claim_send)?;
        q.state.send_waiters -= 1;
        Some(e)
    }
    /// Hand `v` to the first blocked receiver, if any: moved into its
    /// cell, then granted (all under the lock). `Err(v)` if none waits.
    fn hand_to_receiver(q: &mut Locked<'_, T>, v: T) -> Result<Entry<Slot<T>>, T> {
        if q.state.recv_waiters == 0 {
            return Err(v);
        }
        let mut v = Some(v);
        let e = q.grant_first_where_then(claim_recv, |p| {
            if let (Slot::Recv(h) | Slot::SelRecv(h, _), Some(v)) = (p, v.take()) {
                // SAFETY: under the lock, on the entry just popped for
                // granting and before its signal (`HandoffPtr::put`).
                unsafe { h.put(v) };
            }
        });
        match (e, v) {
            (Some(e), None) => {
                q.state.recv_waiters -= 1;
                Ok(e)
            }
            (None, Some(v)) => Err(v),
            _ => unreachable!("`fill` moves the value exactly when a receiver's entry is popped"),
        }
    }
}

struct Chan<T> {
    q: WaitQueue<State<T>, Slot<T>>,
    /// Every sender is gone (mirrors `senders == 0`, readable unlocked).
    no_senders: AtomicBool,
    /// Every receiver is gone.
    no_receivers: AtomicBool,
    /// `close()` was called (mirrors `State::closed`, readable unlocked).
    closed: AtomicBool,
}

type Locked<'a, T> = crate::sync::queue::Locked<'a, State<T>, Slot<T>>;

/// The sending half; clone it for more producers.
///
/// ```
/// let (tx, rx) = numafiber::sync::channel::unbounded();
/// let tx2 = tx.clone();
/// tx.send(1).unwrap();
/// tx2.send(2).unwrap();
/// assert_eq!(rx.try_recv(), Ok(1));
/// ```
pub struct Sender<T> {
    chan: Arc<Chan<T>>,
}

/// The receiving half; clone it for more consumers (each message goes to
/// one of them). It is an [`Iterator`] that ends when the channel closes.
///
/// ```
/// let (tx, rx) = numafiber::sync::channel::unbounded();
/// tx.send("a").unwrap();
/// drop(tx);
/// assert_eq!(rx.iter().collect::<Vec<_>>(), ["a"]);
/// ```
pub struct Receiver<T> {
    chan: Arc<Chan<T>>,
}

/// A channel with room for `cap` messages; `send` parks while it is full.
/// With `cap == 0` it is a *rendezvous* channel: `send` parks until a
/// receiver takes the value.
///
/// ```
/// use numafiber::{fiber, sync::channel, Runtime};
/// let rt = Runtime::builder().workers(2).build().unwrap();
/// rt.block_on(|| {
///     let (tx, rx) = channel::bounded(0);
///     let h = fiber::spawn(move || tx.send(7).unwrap()); // waits for the recv
///     assert_eq!(rx.recv(), Ok(7));
///     fiber::await_fiber(h);
/// });
/// ```
pub fn bounded<T>(cap: usize) -> (Sender<T>, Receiver<T>) {
    new(Some(cap))
}

/// A channel without a capacity limit: `send` never parks.
///
/// ```
/// let (tx, rx) = numafiber::sync::channel::unbounded();
/// for i in 0..1000 { tx.send(i).unwrap(); }
/// assert_eq!(rx.len(), 1000);
/// ```
pub fn unbounded<T>() -> (Sender<T>, Receiver<T>) {
    new(None)
}

fn new<T>(cap: Option<usize>) -> (Sender<T>, Receiver<T>) {
    let chan = Arc::new(Chan {
        q: WaitQueue::new(State {
            buf: VecDeque::new(),
            cap,
            senders: 1,
            receivers: 1,
            send_waiters: 0,
            recv_waiters: 0,
            closed: false,
        }),
        no_senders: AtomicBool::new(false),
        no_receivers: AtomicBool::new(false),
        closed: AtomicBool::new(false),
    });
    (Sender { chan: chan.clone() }, Receiver { chan })
}

impl<T> Chan<T> {
    /// Close the channel (either end's `close`): under the lock set the
    /// flag, then wake every waiter without granting; each leaves its
    /// queue and re-checks (a blocked sender gets its value back, a
    /// receiver drains the buffer first). `false` if it was closed already.
    fn close(&self) -> bool {
        let nodes = {
            let mut q = self.q.lock();
            if q.state.closed {
                return false;
            }
            q.state.closed = true;
            self.closed.store(true, Release);
            q.nodes()
        };
        for n in nodes {
            n.wake();
        }
        true
    }

    fn is_closed(&self) -> bool {
        self.closed.load(Acquire)
    }

    /// A value handed to a receiver that is unwound before it returns it:
    /// pass it to the next waiting receiver, or put it back at the front
    /// of the buffer (it is older than anything there: values go to
    /// waiting receivers only while the buffer is empty).
    fn put_back(&self, v: T) {
        let w = {
            let mut q = self.q.lock();
            match State::hand_to_receiver(&mut q, v) {
                Ok(w) => Some(w),
                Err(v) => {
                    q.state.buf.push_front(v);
                    None
                }
            }
        };
        if let Some(w) = w {
            w.node.wake();
        }
    }

    /// Try to place `v` without waiting. `Err(v)` when it must wait.
    /// Returns a receiver to wake.
    fn offer(&self, q: &mut Locked<'_, T>, v: T) -> Result<Option<Entry<Slot<T>>>, T> {
        let v = match State::hand_to_receiver(q, v) {
            Ok(r) => return Ok(Some(r)),
            Err(v) => v,
        };
        if q.state.cap.is_none_or(|c| q.state.buf.len() < c) {
            q.state.buf.push_back(v);
            return Ok(None);
        }
        Err(v)
    }

    /// Take a message without waiting; grants a blocked sender when that
    /// frees room for it (or hands its value over directly).
    fn take(&self, q: &mut Locked<'_, T>) -> Option<(T, Option<Entry<Slot<T>>>)> {
        if let Some(v) = q.state.buf.pop_front() {
            let room = q.state.cap.is_none_or(|c| q.state.buf.len() < c);
            let mut woken = None;
            // After close a blocked sender's value is not taken: its send
            // fails (it did not complete before the close).
            if room && !q.state.closed {
                if let Some(mut e) = State::grant_send(q) {
                    if let Slot::Send(sv) | Slot::SelSend(sv, _) = std::mem::replace(&mut e.payload, Slot::Taken) {
                        q.state.buf.push_back(sv);
                    }
                    woken = Some(e);
                }
            }
            return Some((v, woken));
        }
        if q.state.closed {
            return None;
        }
        let mut e = State::grant_send(q)?;
        match std::mem::replace(&mut e.payload, Slot::Taken) {
            Slot::Send(v) | Slot::SelSend(v, _) => Some((v, Some(e))),
            _ => unreachable!("selected a sender with its value"),
        }
    }
}

impl<T> Sender<T> {
    /// Send `v`, parking while the channel is full (or, at capacity 0,
    /// until a receiver takes it). Fails, returning `v`, when every
    /// receiver is gone (also while parked), or when the calling fiber is
    /// being destroyed by the runtime's shutdown.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::bounded(1);
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.recv(), Ok(1));
    /// ```
    #[track_caller]
    pub fn send(&self, v: T) -> Result<(), SendError<T>> {
        self.send_until(v, None).map_err(|e| match e {
            TrySendError::Full(v) | TrySendError::Disconnected(v) => SendError(v),
        })
    }

    /// [`send`](Sender::send) waiting at most `dur`; `Full(v)` on timeout.
    ///
    /// ```
    /// use std::time::Duration;
    /// use numafiber::sync::channel::{bounded, TrySendError};
    /// let (tx, _rx) = bounded(0);
    /// assert_eq!(tx.send_timeout(1, Duration::from_millis(1)), Err(TrySendError::Full(1)));
    /// ```
    #[track_caller]
    pub fn send_timeout(&self, v: T, dur: Duration) -> Result<(), TrySendError<T>> {
        self.send_until(v, Some(Instant::now().checked_add(dur).unwrap_or_else(far_future)))
    }

    /// [`send`](Sender::send) waiting until `deadline` at the latest;
    /// `Full(v)` when it passes first (crossbeam's `send_deadline`, Boost
    /// `push_wait_until`). A deadline in the past still sends if that needs
    /// no waiting.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use numafiber::sync::channel::{bounded, TrySendError};
    /// let (tx, rx) = bounded(1);
    /// let deadline = Instant::now() + Duration::from_millis(2);
    /// assert_eq!(tx.send_deadline(1, deadline), Ok(()));
    /// assert_eq!(tx.send_deadline(2, deadline), Err(TrySendError::Full(2)));
    /// assert_eq!(rx.recv(), Ok(1));
    /// ```
    #[track_caller]
    pub fn send_deadline(&self, v: T, deadline: Instant) -> Result<(), TrySendError<T>> {
        self.send_until(v, Some(deadline))
    }

    /// Close the channel (Go's `close(ch)`, Boost `channel::close`), from
    /// this end while other senders and receivers may still exist.
    /// Messages sent before the close are still received; after them,
    /// receivers see the end ([`RecvError`], `Disconnected`, the iterator
    /// stops). Every later send fails with the value back, and so do sends
    /// blocked at the moment of the close (their values were not sent).
    /// Returns `false` if the channel was already closed (closing twice is
    /// harmless). [`Receiver::close`] does the same from the other end.
    ///
    /// ```
    /// use numafiber::sync::channel::{unbounded, RecvError};
    /// let (tx, rx) = unbounded();
    /// tx.send(1).unwrap();
    /// assert!(tx.close());
    /// assert!(!tx.close(), "already closed");
    /// assert_eq!(tx.send(2).unwrap_err().0, 2);
    /// assert_eq!(rx.recv(), Ok(1)); // sent before the close
    /// assert_eq!(rx.recv(), Err(RecvError));
    /// ```
    pub fn close(&self) -> bool {
        self.chan.close()
    }

    /// Whether [`close`](Sender::close) (or [`Receiver::close`]) was called.
    /// Dropping every receiver does not count as a close.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::bounded::<u8>(1);
    /// assert!(!tx.is_closed());
    /// rx.close();
    /// assert!(tx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }

    /// Send without waiting.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::bounded(1);
    /// assert!(tx.try_send(1).is_ok());
    /// assert!(tx.try_send(2).is_err());
    /// drop(rx);
    /// ```
    pub fn try_send(&self, v: T) -> Result<(), TrySendError<T>> {
        let mut q = self.chan.q.lock();
        if q.state.send_disconnected() {
            return Err(TrySendError::Disconnected(v));
        }
        match self.chan.offer(&mut q, v) {
            Ok(w) => {
                drop(q);
                if let Some(w) = w {
                    w.node.wake();
                }
                Ok(())
            }
            Err(v) => Err(TrySendError::Full(v)),
        }
    }

    #[track_caller]
    fn send_until(&self, v: T, deadline: Option<Instant>) -> Result<(), TrySendError<T>> {
        let (id, node) = {
            let mut q = self.chan.q.lock();
            if q.state.send_disconnected() {
                return Err(TrySendError::Disconnected(v));
            }
            let v = match self.chan.offer(&mut q, v) {
                Ok(w) => {
                    drop(q);
                    if let Some(w) = w {
                        w.node.wake();
                    }
                    return Ok(());
                }
                Err(v) => v,
            };
            let me = Me::current();
            if me.cannot_suspend() {
                return Err(TrySendError::Disconnected(v));
            }
            q.state.send_waiters += 1;
            q.push_as(me, Slot::Send(v)) // senders do not spin: see SPIN_YIELDS
        };
        let chan = &*self.chan;
        let out = chan.q.park_or_leave(
            id,
            &node,
            deadline,
            Reason::new(wait_kind::CHAN_SEND, chan),
            |q| q.state.send_waiters -= 1,
            || {},
            || chan.no_receivers.load(Acquire) || chan.closed.load(Acquire),
        );
        match out {
            Outcome::Signalled => Ok(()),
            Outcome::TimedOut(Slot::Send(v)) => Err(TrySendError::Full(v)),
            Outcome::Cancelled(Slot::Send(v)) => Err(TrySendError::Disconnected(v)),
            _ => unreachable!("a sender's entry holds its value"),
        }
    }

    /// Messages buffered now.
    ///
    /// ```
    /// let (tx, _rx) = numafiber::sync::channel::unbounded();
    /// tx.send(()).unwrap();
    /// assert_eq!(tx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.chan.q.lock().state.buf.len()
    }

    /// No message is buffered now.
    ///
    /// ```
    /// let (tx, _rx) = numafiber::sync::channel::unbounded::<()>();
    /// assert!(tx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The capacity (`None` for unbounded channels).
    ///
    /// ```
    /// let (tx, _rx) = numafiber::sync::channel::bounded::<u8>(3);
    /// assert_eq!(tx.capacity(), Some(3));
    /// ```
    pub fn capacity(&self) -> Option<usize> {
        self.chan.q.lock().state.cap
    }
}

/// Yields a receiving fiber tries before it parks, on channels with a
/// buffer (measured: halves the fiber ping-pong time). Not on rendezvous
/// channels, and senders never spin: a spinning receiver is invisible to a
/// sender (it is not queued), so at capacity 0 spinning only delays the
/// meeting (measured: twice slower).
const SPIN_YIELDS: u32 = 1;

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86400 * 365 * 30)
}

impl<T> Receiver<T> {
    /// Receive a message, parking while the channel is empty. `Err` once
    /// the channel is empty and every sender is gone, or when the calling
    /// fiber is being destroyed by the runtime's shutdown.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded();
    /// std::thread::spawn(move || tx.send(3).unwrap());
    /// assert_eq!(rx.recv(), Ok(3));
    /// assert!(rx.recv().is_err());
    /// ```
    #[track_caller]
    pub fn recv(&self) -> Result<T, RecvError> {
        self.recv_until(None).map_err(|_| RecvError)
    }

    /// [`recv`](Receiver::recv) waiting at most `dur` (timed by the
    /// runtime's timer inside fibers).
    ///
    /// ```
    /// use std::time::Duration;
    /// let (tx, rx) = numafiber::sync::channel::bounded(1);
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.recv_timeout(Duration::from_millis(5)), Ok(1));
    /// ```
    #[track_caller]
    pub fn recv_timeout(&self, dur: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(Instant::now().checked_add(dur).unwrap_or_else(far_future)))
    }

    /// [`recv`](Receiver::recv) waiting until `deadline` at the latest
    /// (crossbeam's `recv_deadline`, Boost `pop_wait_until`). A deadline in
    /// the past still returns a message that is already there.
    ///
    /// ```
    /// use std::time::{Duration, Instant};
    /// use numafiber::sync::channel::{unbounded, RecvTimeoutError};
    /// let (tx, rx) = unbounded();
    /// tx.send(1).unwrap();
    /// let deadline = Instant::now() + Duration::from_millis(2);
    /// assert_eq!(rx.recv_deadline(deadline), Ok(1));
    /// assert_eq!(rx.recv_deadline(deadline), Err(RecvTimeoutError::Timeout));
    /// ```
    #[track_caller]
    pub fn recv_deadline(&self, deadline: Instant) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(deadline))
    }

    /// Close the channel from the receiving end: the same as
    /// [`Sender::close`] (sends fail from now on, blocked sends fail with
    /// their values back, messages already sent can still be received).
    /// Returns `false` if it was already closed.
    ///
    /// ```
    /// use numafiber::sync::channel::{bounded, TryRecvError};
    /// let (tx, rx) = bounded(2);
    /// tx.send('a').unwrap();
    /// rx.close();
    /// assert!(tx.send('b').is_err());
    /// assert_eq!(rx.try_recv(), Ok('a'));
    /// assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
    /// ```
    pub fn close(&self) -> bool {
        self.chan.close()
    }

    /// Whether the channel was closed by `close` on either end.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded::<u8>();
    /// tx.close();
    /// assert!(rx.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        self.chan.is_closed()
    }

    /// Receive without waiting.
    ///
    /// In a fiber, `Empty` first lets the worker's other fibers run (a
    /// yield), so a loop polling `try_recv` lets the sender run even on one
    /// worker.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded();
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.try_recv(), Ok(1));
    /// ```
    pub fn try_recv(&self) -> Result<T, TryRecvError> {
        let r = self.try_recv_now();
        if matches!(r, Err(TryRecvError::Empty)) {
            crate::runtime::yield_after_failed_try();
        }
        r
    }

    /// `try_recv` without the yield after `Empty` (`try_iter` ends there).
    fn try_recv_now(&self) -> Result<T, TryRecvError> {
        let mut q = self.chan.q.lock();
        match self.chan.take(&mut q) {
            Some((v, w)) => {
                drop(q);
                if let Some(w) = w {
                    w.node.wake();
                }
                Ok(v)
            }
            None if q.state.recv_disconnected() => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

    #[track_caller]
    fn recv_until(&self, deadline: Option<Instant>) -> Result<T, RecvTimeoutError> {
        let chan = &*self.chan;
        let mut spins = 0;
        loop {
            // Where a sender puts the value for us: on this stack frame,
            // which outlives our entry (`queue::Handoff`).
            let cell = Handoff::new();
            let (id, node) = {
                let mut q = chan.q.lock();
                if let Some((v, w)) = chan.take(&mut q) {
                    drop(q);
                    if let Some(w) = w {
                        w.node.wake();
                    }
                    return Ok(v);
                }
                let me = Me::current();
                if q.state.recv_disconnected() || me.cannot_suspend() {
                    return Err(RecvTimeoutError::Disconnected);
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Err(RecvTimeoutError::Timeout);
                }
                if spins < SPIN_YIELDS && q.state.cap != Some(0) && me.is_fiber() {
                    // A fiber: let the (likely) sender run first; a yield
                    // is cheaper than a park + wake-up.
                    spins += 1;
                    drop(q);
                    crate::runtime::yield_now();
                    continue;
                }
                q.state.recv_waiters += 1;
                q.push_as(me, Slot::Recv(cell.ptr()))
            };
            // Unwound (shutdown) after a send granted us: the value is in
            // our cell; pass it to the next waiting receiver, or put it
            // back at the front of the buffer (it is older than anything
            // there: values go to waiting receivers only while the buffer
            // is empty).
            let pass_on = || {
                // SAFETY: we own the cell and our wait ended (the guard
                // found our entry granted under the lock).
                if let Some(v) = unsafe { cell.take() } {
                    chan.put_back(v);
                }
            };
            let out = chan.q.park_or_leave(
                id,
                &node,
                deadline,
                Reason::new(wait_kind::CHAN_RECV, chan),
                |q| q.state.recv_waiters -= 1,
                pass_on,
                || chan.no_senders.load(Acquire) || chan.closed.load(Acquire),
            );
            if let Outcome::Signalled = out {
                // SAFETY: we own the cell and our wait ended (granted).
                if let Some(v) = unsafe { cell.take() } {
                    return Ok(v); // handed over: no second lock
                }
            }
            // Timed out, closed or cancelled: the loop re-checks.
        }
    }

    /// A blocking iterator over received messages (ends when closed).
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded();
    /// tx.send(1).unwrap(); tx.send(2).unwrap();
    /// drop(tx);
    /// assert_eq!(rx.iter().sum::<i32>(), 3);
    /// ```
    pub fn iter(&self) -> Iter<'_, T> {
        Iter { rx: self }
    }

    /// An iterator over the messages available now, without waiting.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded();
    /// tx.send(1).unwrap();
    /// assert_eq!(rx.try_iter().count(), 1);
    /// ```
    pub fn try_iter(&self) -> TryIter<'_, T> {
        TryIter { rx: self }
    }

    /// Messages buffered now.
    ///
    /// ```
    /// let (tx, rx) = numafiber::sync::channel::unbounded();
    /// tx.send(()).unwrap();
    /// assert_eq!(rx.len(), 1);
    /// ```
    pub fn len(&self) -> usize {
        self.chan.q.lock().state.buf.len()
    }

    /// No message is buffered now.
    ///
    /// ```
    /// let (_tx, rx) = numafiber::sync::channel::unbounded::<()>();
    /// assert!(rx.is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.q.lock().state.senders += 1;
        Sender { chan: self.chan.clone() }
    }
}

impl<T> Clone for Receiver<T> {
    fn clone(&self) -> Self {
        self.chan.q.lock().state.receivers += 1;
        Receiver { chan: self.chan.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let nodes = {
            let mut q = self.chan.q.lock();
            q.state.senders -= 1;
            if q.state.senders > 0 {
                return;
            }
            self.chan.no_senders.store(true, Release);
            q.nodes()
        };
        for n in nodes {
            n.wake();
        }
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let (nodes, buf) = {
            let mut q = self.chan.q.lock();
            q.state.receivers -= 1;
            if q.state.receivers > 0 {
                return;
            }
            self.chan.no_receivers.store(true, Release);
            (q.nodes(), std::mem::take(&mut q.state.buf))
        };
        drop(buf); // user destructors run outside the internal lock
        for n in nodes {
            n.wake();
        }
    }
}

impl<T> fmt::Debug for Sender<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Sender { .. }")
    }
}
impl<T> fmt::Debug for Receiver<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Receiver { .. }")
    }
}

/// Blocking iterator of [`Receiver::iter`].
///
/// ```
/// let (tx, rx) = numafiber::sync::channel::unbounded();
/// tx.send(1).unwrap();
/// drop(tx);
/// for v in &rx { assert_eq!(v, 1); }
/// ```
#[derive(Debug)]
pub struct Iter<'a, T> {
    rx: &'a Receiver<T>,
}

/// Non-blocking iterator of [`Receiver::try_iter`].
///
/// ```
/// let (_tx, rx) = numafiber::sync::channel::unbounded::<u8>();
/// assert_eq!(rx.try_iter().next(), None);
/// ```
#[derive(Debug)]
pub struct TryIter<'a, T> {
    rx: &'a Receiver<T>,
}

impl<T> Iterator for Iter<'_, T> {
    type Item = T;
    #[track_caller]
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    #[track_caller]
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv_now().ok()
    }
}

impl<T> Iterator for Receiver<T> {
    type Item = T;
    #[track_caller]
    fn next(&mut self) -> Option<T> {
        self.recv().ok()
    }
}

impl<'a, T> IntoIterator for &'a Receiver<T> {
    type Item = T;
    type IntoIter = Iter<'a, T>;
    fn into_iter(self) -> Iter<'a, T> {
        self.iter()
    }
}
