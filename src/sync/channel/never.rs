//! Channel ends that are never ready: Go's nil channel in a `select`.

use super::{bounded, Receiver, Sender};

/// A receiver on which nothing ever arrives: a `recv` on it waits forever
/// (until its own [`close`](Receiver::close)), and in a
/// [`select!`](crate::select) its arm is never chosen. This is Go's nil
/// channel (`var c chan T`), the usual way to switch a `select` arm off:
/// pick the real receiver or `never()` before the `select!`. Like
/// crossbeam-channel's `never`.
///
/// Its channel has one sender that never sends and never goes away, so
/// the receiver never sees the end either: a fiber waiting only on it is
/// reported by the deadlock detector as waiting for a channel receive.
///
/// ```
/// use std::time::Duration;
/// use numafiber::{select, sync::channel};
/// let (tx, rx) = channel::unbounded::<u32>();
/// let off = channel::never::<u32>();
/// tx.send(1).unwrap();
/// for switched_on in [false, true] {
///     // Go: `var c chan u32; if switched_on { c = rx }; select { case v := <-c: ... }`
///     let c = if switched_on { &rx } else { &off };
///     let got = select! {
///         recv(c) -> v => v.ok(),
///         default(Duration::from_millis(1)) => None,
///     };
///     assert_eq!(got, if switched_on { Some(1) } else { None });
/// }
/// ```
pub fn never<T>() -> Receiver<T> {
    let (tx, rx) = bounded(0);
    // A sender that no value ever comes from and that is never dropped.
    rx.chan.q.lock().state.senders += 1;
    drop(tx);
    rx
}

/// A sender whose sends are never taken: a `send` on it waits forever
/// (until its own [`close`](Sender::close)), and a
/// [`select!`](crate::select) send arm on it is never chosen. Go's nil
/// channel in a send arm (`case c <- v:` with `c == nil`). The value of
/// such an arm is moved into the select and dropped with it, as the
/// value of any arm that is not chosen.
///
/// ```
/// use std::time::Duration;
/// use numafiber::{select, sync::channel};
/// let (tx, rx) = channel::bounded::<u32>(1);
/// let off = channel::never_sender::<u32>();
/// for switched_on in [false, true] {
///     let c = if switched_on { &tx } else { &off };
///     let sent = select! {
///         send(c, 7) -> r => r.is_ok(),
///         default(Duration::from_millis(1)) => false,
///     };
///     assert_eq!(sent, switched_on);
/// }
/// assert_eq!(rx.try_recv(), Ok(7));
/// ```
pub fn never_sender<T>() -> Sender<T> {
    let (tx, rx) = bounded(0);
    // A receiver that never receives and is never dropped.
    tx.chan.q.lock().state.receivers += 1;
    drop(rx);
    tx
}
