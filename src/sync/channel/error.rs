//! The errors of channel operations.

use std::fmt;

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
