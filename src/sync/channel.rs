//! Multi-producer multi-consumer channels whose blocking operations park
//! the calling fiber (or thread): [`bounded`] (capacity 0 = rendezvous) and
//! [`unbounded`].
//!
//! The channel is *closed* for receivers when the last [`Sender`] is
//! dropped (after the buffered messages are received, `recv` returns
//! [`RecvError`]) and for senders when the last [`Receiver`] is dropped
//! (`send` returns the value in a [`SendError`]).
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
//! Closing sets a flag and wakes every waiter (without granting), which
//! leaves the queue and re-checks.

use std::collections::VecDeque;
use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering::*};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::queue::{Entry, Handoff, HandoffPtr, Me, Outcome, Reason, WaitQueue};
use crate::runtime::task::wait_kind;

enum Slot<T> {
    /// A blocked receiver: where a sender puts the value for it.
    Recv(HandoffPtr<T>),
    /// A blocked sender with its value; `Taken` once a receiver took it.
    Send(T),
    Taken,
}

fn is_recv<T>(s: &Slot<T>) -> bool {
    matches!(s, Slot::Recv(_))
}
fn is_send<T>(s: &Slot<T>) -> bool {
    matches!(s, Slot::Send(_))
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
}

impl<T> State<T> {
    fn grant_send(q: &mut Locked<'_, T>) -> Option<Entry<Slot<T>>> {
        if q.state.send_waiters == 0 {
            return None;
        }
        let e = q.grant_first_where(is_send)?;
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
        let e = q.grant_first_where_then(is_recv, |p| {
            if let (Slot::Recv(h), Some(v)) = (p, v.take()) {
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
}

type Locked<'a, T> = super::queue::Locked<'a, State<T>, Slot<T>>;

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
        q: WaitQueue::new(State { buf: VecDeque::new(), cap, senders: 1, receivers: 1, send_waiters: 0, recv_waiters: 0 }),
        no_senders: AtomicBool::new(false),
        no_receivers: AtomicBool::new(false),
    });
    (Sender { chan: chan.clone() }, Receiver { chan })
}

/// `send` failed because every receiver is gone; the value comes back.
///
/// ```
/// let (tx, rx) = numafiber::sync::channel::unbounded();
/// drop(rx);
/// assert_eq!(tx.send(5).unwrap_err().0, 5);
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
pub struct SendError<T>(pub T);

/// `recv` failed because the channel is empty and every sender is gone.
///
/// ```
/// let (tx, rx) = numafiber::sync::channel::unbounded::<u8>();
/// drop(tx);
/// assert_eq!(rx.recv(), Err(numafiber::sync::channel::RecvError));
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub struct RecvError;

/// Why `try_recv` returned no message.
///
/// ```
/// use numafiber::sync::channel::{unbounded, TryRecvError};
/// let (tx, rx) = unbounded::<u8>();
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
/// drop(tx);
/// assert_eq!(rx.try_recv(), Err(TryRecvError::Disconnected));
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum TryRecvError {
    /// No message now; senders remain.
    Empty,
    /// No message and every sender is gone.
    Disconnected,
}

/// Why `recv_timeout` returned no message.
///
/// ```
/// use std::time::Duration;
/// use numafiber::sync::channel::{unbounded, RecvTimeoutError};
/// let (_tx, rx) = unbounded::<u8>();
/// assert_eq!(rx.recv_timeout(Duration::from_millis(1)), Err(RecvTimeoutError::Timeout));
/// ```
#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum RecvTimeoutError {
    /// The time ran out; senders remain.
    Timeout,
    /// No message and every sender is gone.
    Disconnected,
}

/// Why `try_send` did not send; the value comes back.
///
/// ```
/// use numafiber::sync::channel::{bounded, TrySendError};
/// let (tx, _rx) = bounded(1);
/// tx.try_send(1).unwrap();
/// assert_eq!(tx.try_send(2), Err(TrySendError::Full(2)));
/// ```
#[derive(PartialEq, Eq, Clone, Copy)]
pub enum TrySendError<T> {
    /// The channel is full (or, at capacity 0, no receiver waits).
    Full(T),
    /// Every receiver is gone.
    Disconnected(T),
}

impl<T> fmt::Debug for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SendError { .. }")
    }
}
impl<T> fmt::Display for SendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sending on a channel whose receivers are all dropped")
    }
}
impl<T> std::error::Error for SendError<T> {}
impl<T> fmt::Debug for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("Full(..)"),
            TrySendError::Disconnected(_) => f.write_str("Disconnected(..)"),
        }
    }
}
impl<T> fmt::Display for TrySendError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TrySendError::Full(_) => f.write_str("sending on a full channel"),
            TrySendError::Disconnected(_) => f.write_str("sending on a channel whose receivers are all dropped"),
        }
    }
}
impl<T> std::error::Error for TrySendError<T> {}
impl fmt::Display for RecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("receiving on an empty channel whose senders are all dropped")
    }
}
impl std::error::Error for RecvError {}
impl fmt::Display for TryRecvError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TryRecvError::Empty => f.write_str("receiving on an empty channel"),
            TryRecvError::Disconnected => RecvError.fmt(f),
        }
    }
}
impl std::error::Error for TryRecvError {}
impl fmt::Display for RecvTimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RecvTimeoutError::Timeout => f.write_str("timed out waiting on a channel"),
            RecvTimeoutError::Disconnected => RecvError.fmt(f),
        }
    }
}
impl std::error::Error for RecvTimeoutError {}

impl<T> Chan<T> {
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
            if room {
                if let Some(mut e) = State::grant_send(q) {
                    if let Slot::Send(sv) = std::mem::replace(&mut e.payload, Slot::Taken) {
                        q.state.buf.push_back(sv);
                    }
                    woken = Some(e);
                }
            }
            return Some((v, woken));
        }
        let mut e = State::grant_send(q)?;
        match std::mem::replace(&mut e.payload, Slot::Taken) {
            Slot::Send(v) => Some((v, Some(e))),
            Slot::Recv(_) | Slot::Taken => unreachable!("selected a sender with its value"),
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
    pub fn send_timeout(&self, v: T, dur: Duration) -> Result<(), TrySendError<T>> {
        self.send_until(v, Some(Instant::now().checked_add(dur).unwrap_or_else(far_future)))
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
        if q.state.receivers == 0 {
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

    fn send_until(&self, v: T, deadline: Option<Instant>) -> Result<(), TrySendError<T>> {
        let (id, node) = {
            let mut q = self.chan.q.lock();
            if q.state.receivers == 0 {
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
            || chan.no_receivers.load(Acquire),
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
    pub fn recv_timeout(&self, dur: Duration) -> Result<T, RecvTimeoutError> {
        self.recv_until(Some(Instant::now().checked_add(dur).unwrap_or_else(far_future)))
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
            None if q.state.senders == 0 => Err(TryRecvError::Disconnected),
            None => Err(TryRecvError::Empty),
        }
    }

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
                if q.state.senders == 0 || me.cannot_suspend() {
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
                let Some(v) = (unsafe { cell.take() }) else { return };
                let w = {
                    let mut q = chan.q.lock();
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
            };
            let out = chan.q.park_or_leave(
                id,
                &node,
                deadline,
                Reason::new(wait_kind::CHAN_RECV, chan),
                |q| q.state.recv_waiters -= 1,
                pass_on,
                || chan.no_senders.load(Acquire),
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
    fn next(&mut self) -> Option<T> {
        self.rx.recv().ok()
    }
}

impl<T> Iterator for TryIter<'_, T> {
    type Item = T;
    fn next(&mut self) -> Option<T> {
        self.rx.try_recv_now().ok()
    }
}

impl<T> Iterator for Receiver<T> {
    type Item = T;
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
