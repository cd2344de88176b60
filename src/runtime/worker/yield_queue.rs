//! The worker's private yield queue: a FIFO ring of fibers that yielded
//! and stay `RUNNING` (see `../README.md`, "Where a runnable fiber can be").
//!
//! It is on the path of every `yield_now`, so it is a plain power-of-two
//! ring without a `RefCell` borrow flag, and a yield that takes the next
//! fiber is one `rotate` (take the front, put the yielder at the back)
//! instead of a `pop_front` plus a `push_back`.

use std::cell::UnsafeCell;

use crate::runtime::task::TaskRef;

/// Initial capacity (a power of two).
const INITIAL: usize = 8;

struct Ring {
    /// `buf.len()` is a power of two; slots `head .. head + len` (modulo
    /// the capacity) are `Some`, the others `None`.
    buf: Box<[Option<TaskRef>]>,
    head: usize,
    len: usize,
}

impl Ring {
    #[inline]
    fn mask(&self) -> usize {
        self.buf.len() - 1
    }

    #[inline]
    fn slot(&mut self, i: usize) -> &mut Option<TaskRef> {
        let i = i & self.mask();
        // SAFETY: `i & (len - 1) < len` for a power-of-two `len`.
        unsafe { self.buf.get_unchecked_mut(i) }
    }

    #[cold]
    fn grow(&mut self) {
        let cap = self.buf.len().checked_mul(2).expect("yield queue capacity overflows usize");
        let mut buf: Box<[Option<TaskRef>]> = (0..cap).map(|_| None).collect();
        for (k, slot) in buf.iter_mut().enumerate().take(self.len) {
            *slot = self.slot(self.head + k).take();
        }
        self.buf = buf;
        self.head = 0;
    }
}

/// FIFO of yielded fibers, owned by one worker thread.
pub(crate) struct YieldQueue {
    ring: UnsafeCell<Ring>,
}

impl YieldQueue {
    pub(crate) fn new() -> YieldQueue {
        YieldQueue { ring: UnsafeCell::new(Ring { buf: (0..INITIAL).map(|_| None).collect(), head: 0, len: 0 }) }
    }

    /// Exclusive access for the length of one method call.
    #[inline]
    #[allow(clippy::mut_from_ref)]
    fn ring(&self) -> &mut Ring {
        // SAFETY: `YieldQueue` is `!Sync` (it holds an `UnsafeCell`), so
        // only the owning worker thread calls these methods, and none of
        // them calls out (no user code, no `TaskRef` is dropped inside:
        // fibers go in and out by value), so no two of these references
        // are ever alive at once.
        unsafe { &mut *self.ring.get() }
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.ring().len == 0
    }

    #[inline]
    pub(crate) fn push_back(&self, t: TaskRef) {
        let r = self.ring();
        if r.len == r.buf.len() {
            r.grow();
        }
        let i = r.head + r.len;
        let old = r.slot(i).replace(t);
        debug_assert!(old.is_none());
        std::mem::forget(old); // `None`: nothing to drop, and no drop call here
        r.len += 1;
    }

    #[inline]
    pub(crate) fn pop_front(&self) -> Option<TaskRef> {
        let r = self.ring();
        if r.len == 0 {
            return None;
        }
        let t = r.slot(r.head).take();
        debug_assert!(t.is_some());
        r.head = (r.head + 1) & r.mask();
        r.len -= 1;
        t
    }

    /// `push_back(t)` then `pop_front()`, in one step: the fiber to run
    /// after `t` yielded (`t` itself if the queue is empty).
    #[inline]
    pub(crate) fn rotate(&self, t: TaskRef) -> TaskRef {
        let r = self.ring();
        let (head, len) = (r.head, r.len);
        if len == 0 {
            return t;
        }
        let mask = r.mask();
        let buf = r.buf.as_mut_ptr();
        // SAFETY: both indices are masked into the buffer. Slot `head` of
        // a non-empty ring is `Some` (we take it); slot `head + len` is
        // `None` (a free slot, or with `len == capacity` the front slot
        // just emptied), so writing over it drops nothing.
        let front = unsafe {
            let front = std::ptr::replace(buf.add(head), None);
            std::ptr::write(buf.add((head + len) & mask), Some(t));
            front
        };
        r.head = (head + 1) & mask;
        match front {
            Some(f) => f,
            None => unreachable!("yield queue: empty front slot in a non-empty ring"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::task::Task;

    use crate::runtime::task::packet::NopMain as Nop;

    fn task(id: u64) -> TaskRef {
        Task::new(id, None, crate::runtime::task::stack::DEFAULT_STACK_SIZE, None, Box::new(Nop))
    }

    /// FIFO order through growth, wrap-around and rotations, checked
    /// against `VecDeque`.
    #[test]
    fn behaves_like_a_vecdeque() {
        let q = YieldQueue::new();
        let mut model = std::collections::VecDeque::new();
        let mut next = 0u64;
        let mut rng = 0x9E37_79B9_7F4A_7C15u64;
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            match rng % 4 {
                0 | 1 => {
                    q.push_back(task(next));
                    model.push_back(next);
                    next += 1;
                }
                2 => assert_eq!(q.pop_front().map(|t| t.id), model.pop_front()),
                _ => {
                    let got = q.rotate(task(next)).id;
                    model.push_back(next);
                    next += 1;
                    assert_eq!(Some(got), model.pop_front());
                }
            }
            assert_eq!(q.is_empty(), model.is_empty());
        }
        while let Some(id) = model.pop_front() {
            assert_eq!(q.pop_front().map(|t| t.id), Some(id));
        }
        assert!(q.pop_front().is_none());
        assert!(q.is_empty());
    }

    /// Rotating a full ring (len == capacity) keeps every fiber.
    #[test]
    fn rotate_when_full() {
        let q = YieldQueue::new();
        for i in 0..INITIAL as u64 {
            q.push_back(task(i));
        }
        let out = q.rotate(task(100)).id;
        assert_eq!(out, 0);
        let rest: Vec<u64> = std::iter::from_fn(|| q.pop_front().map(|t| t.id)).collect();
        assert_eq!(rest, (1..INITIAL as u64).chain([100]).collect::<Vec<_>>());
    }
}
