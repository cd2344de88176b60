//! A fiber that overflows its stack gets a clear message naming it, its
//! stack size and how to ask for more, then the process aborts (like Rust's
//! report for threads). Runs the scenario in a child process.

use std::os::unix::process::ExitStatusExt;

use numafiber::{fiber, Runtime, Topology};

#[inline(never)]
#[allow(unconditional_recursion)]
fn recurse(depth: u64, buf: &mut [u8; 512]) -> u64 {
    let mut local = [0u8; 512];
    local[(depth % 512) as usize] = buf[(depth % 7) as usize].wrapping_add(1);
    std::hint::black_box(&mut local);
    recurse(depth + 1, &mut local) + local[3] as u64
}

#[test]
fn fiber_stack_overflow_is_reported_clearly() {
    if std::env::var_os("NUMAFIBER_OVERFLOW_CHILD").is_some() {
        let rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
        let h = fiber::Builder::new()
            .name("deep-recursion")
            .stack_size(64 * 1024)
            .spawn_on(&rt, || recurse(0, &mut [0u8; 512]))
            .unwrap();
        let _ = h.join();
        println!("child did not overflow");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "fiber_stack_overflow_is_reported_clearly", "--nocapture", "--test-threads=1"])
        .env("NUMAFIBER_OVERFLOW_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.signal(), Some(libc::SIGABRT), "exit {:?}; stderr: {stderr}", out.status);
    assert!(stderr.contains("fiber "), "{stderr}");
    assert!(stderr.contains("'deep-recursion' has overflowed its stack (65536 bytes)"), "{stderr}");
    assert!(stderr.contains("stack_size("), "says how to ask for more: {stderr}");
}

#[test]
fn thread_stack_overflow_still_reported_by_rust() {
    // Our handler chains to Rust's for faults that are not fiber guard pages.
    if std::env::var_os("NUMAFIBER_THREAD_OVERFLOW_CHILD").is_some() {
        let _rt = Runtime::builder().workers(1).topology(Topology::uniform(1, 1)).build().unwrap();
        std::thread::Builder::new()
            .name("plain-thread".into())
            .stack_size(128 * 1024)
            .spawn(|| recurse(0, &mut [0u8; 512]))
            .unwrap()
            .join()
            .ok();
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "thread_stack_overflow_still_reported_by_rust", "--nocapture", "--test-threads=1"])
        .env("NUMAFIBER_THREAD_OVERFLOW_CHILD", "1")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.signal().is_some(), "{:?}", out.status);
    assert!(stderr.contains("thread 'plain-thread'") && stderr.contains("has overflowed its stack"), "{stderr}");
}
