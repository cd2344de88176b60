//! A fiber on the smallest allowed stack may panic with `RUST_BACKTRACE=1`
//! (the backtrace is symbolised on the fiber's stack) without overflowing.
//! The check runs in a child process so the environment variable is its own.

use numafiber::{fiber, Runtime, Topology};

#[test]
fn panic_with_backtrace_on_min_stack() {
    if std::env::var_os("NUMAFIBER_BT_CHILD").is_some() {
        let rt = Runtime::builder()
            .workers(1)
            .topology(Topology::uniform(1, 1))
            .stack_size(fiber::MIN_STACK_SIZE)
            .build()
            .unwrap();
        let e = rt.spawn(|| -> u32 { panic!("deliberate panic with a backtrace") }).join().unwrap_err();
        assert_eq!(e.panic_message(), Some("deliberate panic with a backtrace"));
        println!("child-ok");
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "panic_with_backtrace_on_min_stack", "--nocapture", "--test-threads=1"])
        .env("NUMAFIBER_BT_CHILD", "1")
        .env("RUST_BACKTRACE", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed ({}): {stderr}", out.status);
    assert!(stdout.contains("child-ok"), "{stdout}");
    assert!(stderr.contains("deliberate panic with a backtrace"), "the panic message was printed: {stderr}");
    assert!(stderr.contains("stack backtrace"), "a backtrace was printed: {stderr}");
}
