//! Per-worker pools of guarded fiber stacks.
//!
//! A fiber owns no stack until it first runs; the worker that first resumes
//! it takes one from its pool (or maps a new one), and the worker on which it
//! finishes takes it back. Stacks are corosensei `DefaultStack`s: an `mmap`
//! with a `PROT_NONE` guard page below the usable range.

use std::io;

use corosensei::stack::DefaultStack;

/// Smallest stack a fiber may ask for. A panic that prints a backtrace
/// (`RUST_BACKTRACE=1`) runs the symboliser on the fiber's stack and needs
/// more than 16 KiB (measured: a 16 KiB fiber overflows, 32 KiB does not).
pub const MIN_STACK_SIZE: usize = 32 * 1024;

/// Default stack size of a fiber.
pub const DEFAULT_STACK_SIZE: usize = 64 * 1024;

/// How many free stacks of one size a worker keeps.
const MAX_POOLED: usize = 1024;

#[derive(Default)]
pub(crate) struct StackPool {
    classes: Vec<(usize, Vec<DefaultStack>)>,
    /// Stacks mapped by this pool (for tests and stats).
    pub(crate) mapped: u64,
    /// Stacks unmapped by this pool.
    pub(crate) unmapped: u64,
}

impl StackPool {
    pub(crate) fn get(&mut self, size: usize) -> io::Result<DefaultStack> {
        if let Some((_, v)) = self.classes.iter_mut().find(|(s, _)| *s == size) {
            if let Some(s) = v.pop() {
                return Ok(s);
            }
        }
        let s = DefaultStack::new(size)?;
        self.mapped += 1;
        Ok(s)
    }

    pub(crate) fn put(&mut self, size: usize, stack: DefaultStack) {
        let idx = match self.classes.iter().position(|(s, _)| *s == size) {
            Some(i) => i,
            None => {
                self.classes.push((size, Vec::new()));
                self.classes.len() - 1
            }
        };
        let v = &mut self.classes[idx].1;
        if v.len() < MAX_POOLED {
            v.push(stack);
        } else {
            drop(stack);
            self.unmapped += 1;
        }
    }

    pub(crate) fn pooled(&self) -> usize {
        self.classes.iter().map(|(_, v)| v.len()).sum()
    }
}

impl Drop for StackPool {
    fn drop(&mut self) {
        self.unmapped += self.pooled() as u64;
    }
}
