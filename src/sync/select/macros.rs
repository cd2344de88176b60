//! The `select!` macro and the hidden macros it expands through.

/// Wait on several channel operations and run the arm of the one that
/// completes: crossbeam-channel's `select!` syntax, Go's `select`.
///
/// ```text
/// select! {
///     recv(rx) -> msg => expr,          // msg: Result<T, RecvError>
///     send(tx, value) -> res => expr,   // res: Result<(), SendError<T>>
///     default => expr,                  // none ready: do not wait
///     default(timeout) => expr,         // none ready by then: Duration or Instant
/// }
/// ```
///
/// At most one `default` arm. Without one, `select!` waits as long as it
/// takes. With no arm at all, `select! {}` waits forever (Go's
/// `select {}`): its type is `!`, it is a cancellation point (a
/// [`cancel`](crate::fiber::JoinHandle::cancel) unwinds it), and the
/// deadlock report names it as a select with no arms. `rx` / `tx` may be a channel end or a reference to one; each is
/// evaluated once, and so is each send's value, before selecting (as Go).
/// When several operations are ready, one is chosen at random. Bodies are
/// expressions followed by a comma, or blocks; the macro's value is the
/// chosen body's. See [`sync::select`](crate::sync::select) for the
/// semantics and [`Select`](crate::sync::Select) for the builder behind it.
///
/// ```
/// use std::time::{Duration, Instant};
/// use numafiber::{select, sync::channel};
/// let (tx, rx) = channel::bounded::<u8>(1);
/// // Room in the channel: the send is ready, the receive is not.
/// let r = select! {
///     send(tx, 1) -> res => { res.unwrap(); "sent" }
///     recv(rx) -> _ => "received",
/// };
/// assert_eq!(r, "sent");
/// let r = select! {
///     send(tx, 2) -> _ => "sent",   // full now
///     default(Instant::now() + Duration::from_millis(1)) => "deadline",
/// };
/// assert_eq!(r, "deadline");
/// let r = select! { recv(rx) -> v => v.unwrap(), default => 0 };
/// assert_eq!(r, 1);
/// ```
#[macro_export]
macro_rules! select {
    ($($tokens:tt)*) => {
        $crate::__select_parse!([] [] $($tokens)*)
    };
}

/// Parses `select!`'s arms into `(recv r p body)`, `(send s v p body)`
/// and one default; each captured piece is then passed on as one token
/// tree.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_parse {
    ([$($arms:tt)*] [$($default:tt)*]) => {
        $crate::__select_register!(__sel [$($arms)*] [] [$($default)*])
    };
    ([$($arms:tt)*] [$($default:tt)*] , $($rest:tt)*) => {
        $crate::__select_parse!([$($arms)*] [$($default)*] $($rest)*)
    };
    ([$($arms:tt)*] [$($default:tt)*] recv($r:expr) -> $p:pat => $body:block $($rest:tt)*) => {
        $crate::__select_parse!([$($arms)* (recv $r $p $body)] [$($default)*] $($rest)*)
    };
    ([$($arms:tt)*] [$($default:tt)*] recv($r:expr) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_parse!([$($arms)* (recv $r $p $body)] [$($default)*] $($rest)*)
    };
    ([$($arms:tt)*] [$($default:tt)*] recv($r:expr) -> $p:pat => $body:expr) => {
        $crate::__select_parse!([$($arms)* (recv $r $p $body)] [$($default)*])
    };
    ([$($arms:tt)*] [$($default:tt)*] send($s:expr, $v:expr) -> $p:pat => $body:block $($rest:tt)*) => {
        $crate::__select_parse!([$($arms)* (send $s $v $p $body)] [$($default)*] $($rest)*)
    };
    ([$($arms:tt)*] [$($default:tt)*] send($s:expr, $v:expr) -> $p:pat => $body:expr, $($rest:tt)*) => {
        $crate::__select_parse!([$($arms)* (send $s $v $p $body)] [$($default)*] $($rest)*)
    };
    ([$($arms:tt)*] [$($default:tt)*] send($s:expr, $v:expr) -> $p:pat => $body:expr) => {
        $crate::__select_parse!([$($arms)* (send $s $v $p $body)] [$($default)*])
    };
    ([$($arms:tt)*] [] default => $body:block $($rest:tt)*) => {
        $crate::__select_parse!([$($arms)*] [(now $body)] $($rest)*)
    };
    ([$($arms:tt)*] [] default => $body:expr, $($rest:tt)*) => {
        $crate::__select_parse!([$($arms)*] [(now $body)] $($rest)*)
    };
    ([$($arms:tt)*] [] default => $body:expr) => {
        $crate::__select_parse!([$($arms)*] [(now $body)])
    };
    ([$($arms:tt)*] [] default($t:expr) => $body:block $($rest:tt)*) => {
        $crate::__select_parse!([$($arms)*] [(until $t $body)] $($rest)*)
    };
    ([$($arms:tt)*] [] default($t:expr) => $body:expr, $($rest:tt)*) => {
        $crate::__select_parse!([$($arms)*] [(until $t $body)] $($rest)*)
    };
    ([$($arms:tt)*] [] default($t:expr) => $body:expr) => {
        $crate::__select_parse!([$($arms)*] [(until $t $body)])
    };
    ([$($arms:tt)*] [$($default:tt)+] default $($rest:tt)*) => {
        ::std::compile_error!("select!: more than one `default` arm")
    };
    ([$($arms:tt)*] [$($default:tt)*] $($rest:tt)+) => {
        ::std::compile_error!(
            "select!: expected `recv(rx) -> pat => body`, `send(tx, value) -> pat => body`, \
             `default => body` or `default(timeout or deadline) => body`"
        )
    };
}

/// Binds each arm's channel end (and a send's value) once, in arm order,
/// in nested blocks (each arm's bindings are its own), then builds the
/// `Select`, selects and dispatches.
#[doc(hidden)]
#[macro_export]
macro_rules! __select_register {
    ($sel:ident [] [] []) => {
        $crate::sync::select::__select_forever()
    };
    ($sel:ident [] [] [(now $body:tt)]) => {{
        $body
    }};
    ($sel:ident [] [] [(until $t:tt $body:tt)]) => {{
        match $crate::sync::select::Deadline::deadline($t) {
            ::std::option::Option::Some(d) => $crate::sync::select::__sleep_until(d),
            // A deadline beyond what `Instant` can hold never comes.
            ::std::option::Option::None => $crate::sync::select::__select_forever(),
        }
        $body
    }};
    ($sel:ident [(recv $r:tt $p:tt $body:tt) $($rest:tt)*] [$($done:tt)*] [$($default:tt)*]) => {{
        let __chan: &$crate::sync::channel::Receiver<_> = &$r;
        $crate::__select_register!($sel [$($rest)*] [$($done)* (recv __chan $p $body)] [$($default)*])
    }};
    ($sel:ident [(send $s:tt $v:tt $p:tt $body:tt) $($rest:tt)*] [$($done:tt)*] [$($default:tt)*]) => {{
        let __chan: &$crate::sync::channel::Sender<_> = &$s;
        let __value = $v;
        $crate::__select_register!($sel [$($rest)*] [$($done)* (send __chan __value $p $body)] [$($default)*])
    }};
    ($sel:ident [] [$($done:tt)+] [$($default:tt)*]) => {{
        let mut $sel = $crate::sync::Select::new();
        $crate::__select_add!($sel $($done)+);
        $crate::__select_go!($sel [$($done)+] [$($default)*])
    }};
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_add {
    ($sel:ident) => {};
    ($sel:ident (recv $c:ident $p:tt $body:tt) $($rest:tt)*) => {
        $sel.recv($c);
        $crate::__select_add!($sel $($rest)*)
    };
    ($sel:ident (send $c:ident $v:ident $p:tt $body:tt) $($rest:tt)*) => {
        $sel.send($c, $v);
        $crate::__select_add!($sel $($rest)*)
    };
}

#[doc(hidden)]
#[macro_export]
macro_rules! __select_go {
    ($sel:ident [$($done:tt)*] []) => {{
        let __op = $sel.select();
        $crate::__select_dispatch!(__op 0usize $($done)*)
    }};
    ($sel:ident [$($done:tt)*] [(now $body:tt)]) => {{
        // Bound, so that it is dropped before the `Select` it borrows.
        let __r = $sel.try_select();
        match __r {
            ::std::result::Result::Ok(__op) => $crate::__select_dispatch!(__op 0usize $($done)*),
            ::std::result::Result::Err(_) => $body,
        }
    }};
    ($sel:ident [$($done:tt)*] [(until $t:tt $body:tt)]) => {{
        let __r = $sel.select_until($crate::sync::select::Deadline::deadline($t));
        match __r {
            ::std::result::Result::Ok(__op) => $crate::__select_dispatch!(__op 0usize $($done)*),
            ::std::result::Result::Err(_) => $body,
        }
    }};
}

/// Runs the body of the chosen arm (arm `k` has index `k`).
#[doc(hidden)]
#[macro_export]
macro_rules! __select_dispatch {
    ($op:ident $i:tt) => {
        ::std::unreachable!("select!: the chosen index belongs to an arm")
    };
    ($op:ident $i:tt (recv $c:ident $p:tt $body:tt) $($rest:tt)*) => {
        if $op.index() == $i {
            let $p = $op.recv($c);
            $body
        } else {
            $crate::__select_dispatch!($op ($i + 1) $($rest)*)
        }
    };
    ($op:ident $i:tt (send $c:ident $v:ident $p:tt $body:tt) $($rest:tt)*) => {
        if $op.index() == $i {
            let $p = $op.send($c);
            $body
        } else {
            $crate::__select_dispatch!($op ($i + 1) $($rest)*)
        }
    };
}
