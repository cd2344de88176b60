//! A stream's `recv(2)` and `send(2)` as plain system calls.
//!
//! Rule: the socket paths call the kernel through `syscall(2)`, not glibc's
//! `recv`/`send`. glibc makes those two POSIX cancellation points: around
//! every call it switches the thread to asynchronous cancellation and back,
//! two locked read-modify-writes per call, per request in a server. No
//! thread running Rust may be cancelled by `pthread_cancel` (std and this
//! crate assume so), so the switch buys nothing here. Errors and results are
//! the kernel's, as glibc returns them: `-1` and `errno`.

use std::io;
use std::os::fd::RawFd;

/// `recv(fd, buf, 0)`: bytes read, 0 at end of stream.
pub(crate) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the whole
    // call, which is what recvfrom(2) does with it.
    unsafe { transfer(libc::SYS_recvfrom, fd, buf.as_mut_ptr(), buf.len(), 0) }
}

/// `send(fd, buf, MSG_NOSIGNAL)`: bytes written. A peer that closed gives
/// `EPIPE` as an error, never `SIGPIPE` (as std's `TcpStream::write`).
pub(crate) fn send(fd: RawFd, buf: &[u8]) -> io::Result<usize> {
    // SAFETY: `buf` is valid for reads of `buf.len()` bytes for the whole
    // call, and sendto(2) only reads it.
    unsafe { transfer(libc::SYS_sendto, fd, buf.as_ptr().cast_mut(), buf.len(), libc::MSG_NOSIGNAL) }
}

/// `nr` (recvfrom or sendto) on `fd` with the buffer `[ptr, ptr + len)`,
/// `flags` and no peer address (both address arguments null / 0).
///
/// # Safety
/// `ptr` is valid for `len` bytes for the whole call, for writes if `nr`
/// writes the buffer.
#[inline(always)]
unsafe fn transfer(nr: libc::c_long, fd: RawFd, ptr: *mut u8, len: usize, flags: libc::c_int) -> io::Result<usize> {
    // SAFETY: the buffer as the caller promised; null address pointers ask
    // for no peer address (recvfrom(2), sendto(2)).
    let r = unsafe {
        libc::syscall(
            nr,
            fd as libc::c_long,
            ptr as libc::c_long,
            len as libc::c_long,
            flags as libc::c_long,
            0 as libc::c_long,
            0 as libc::c_long,
        )
    };
    result(r)
}

/// The byte count of a call that returned `r`, or `errno` as an error.
fn result(r: libc::c_long) -> io::Result<usize> {
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        // A byte count of a slice: non-negative and at most `isize::MAX`.
        usize::try_from(r).map_err(|_| io::Error::other("numafiber::net: the kernel returned an impossible byte count"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn round_trip_end_and_errors() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(send(a.as_raw_fd(), b"ping").unwrap(), 4);
        let mut buf = [0u8; 8];
        assert_eq!(recv(b.as_raw_fd(), &mut buf).unwrap(), 4);
        assert_eq!(&buf[..4], b"ping");
        drop(a);
        assert_eq!(recv(b.as_raw_fd(), &mut buf).unwrap(), 0, "end of stream");
        // The peer is gone: EPIPE, and no SIGPIPE kills the test process.
        let e = send(b.as_raw_fd(), b"x").unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EPIPE));
        // A bad fd is the kernel's EBADF, not a panic.
        assert_eq!(recv(-1, &mut buf).unwrap_err().raw_os_error(), Some(libc::EBADF));
    }

    #[test]
    fn would_block_is_reported() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        a.set_nonblocking(true).unwrap();
        let e = recv(a.as_raw_fd(), &mut [0u8; 4]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::WouldBlock);
    }
}
