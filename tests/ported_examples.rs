//! The ported corolib-style examples in `examples/`: each example's logic
//! is included here (`#[path]`) and its output checked.

#[path = "../examples/corolib_clientserver.rs"]
mod corolib_clientserver;
#[path = "../examples/exception_flow.rs"]
mod exception_flow;
#[path = "../examples/fork_join_sum.rs"]
mod fork_join_sum;
#[path = "../examples/pipeline.rs"]
mod pipeline;
#[path = "../examples/producer_consumer.rs"]
mod producer_consumer;
#[path = "../examples/repeated_when_any.rs"]
mod repeated_when_any;
#[path = "../examples/when_all.rs"]
mod when_all;
#[path = "../examples/when_any.rs"]
mod when_any;

use numafiber::{Policy, Runtime, Topology};

fn rt() -> Runtime {
    Runtime::builder()
        .workers(2)
        .topology(Topology::uniform(1, 2))
        .policy(Policy::RandomSteal)
        .build()
        .expect("runtime")
}

#[test]
fn producer_consumer_output() {
    let out = producer_consumer::run(&rt(), 4, 250, 3, 8);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "producers 4 x 250 items, consumers 3, buffer 8");
    assert!(lines[1].starts_with("consumed 1000 items, sum 499500, max buffer "), "{out}");
    let max: usize = lines[1].rsplit(' ').next().unwrap().parse().unwrap();
    assert!((1..=8).contains(&max), "the buffer never exceeds its capacity: {out}");
}

#[test]
fn when_all_output() {
    let out = when_all::run(&rt(), &[27, 97, 871, 6171]);
    assert_eq!(
        out,
        "collatz steps of 27: 111\ncollatz steps of 97: 118\ncollatz steps of 871: 178\n\
         collatz steps of 6171: 261\ntotal 668\n"
    );
}

#[test]
fn fork_join_sum_matches_serial() {
    let out = fork_join_sum::run(&rt(), 1_000_000);
    assert_eq!(out, "sum of squares 0..1000000 = 333332833333500000 (serial 333332833333500000): ok\n");
    // Odd sizes and tiny ones too.
    for n in [0, 1, 1023, 1025, 77_777] {
        assert!(fork_join_sum::run(&rt(), n).ends_with(": ok\n"), "n = {n}");
    }
}

#[test]
fn pipeline_output() {
    assert_eq!(
        pipeline::run(&rt(), 90, 4),
        "generated 90 fibonacci numbers, 30 even, sum of even 889989708002357094\n"
    );
    // Rendezvous channels give the same answer.
    assert_eq!(
        pipeline::run(&rt(), 90, 0),
        "generated 90 fibonacci numbers, 30 even, sum of even 889989708002357094\n"
    );
}

#[test]
fn when_any_output() {
    let out = when_any::run(&rt(), &[400, 300, 5, 500]);
    assert_eq!(out, "winner: mirror 2 (delay 5 ms)\nlosers stopped early: 3\n");
}

#[test]
fn repeated_when_any_output() {
    let out = repeated_when_any::run(&rt(), &[[2, 0, 1], [0, 1, 2], [1, 2, 0]]);
    assert_eq!(
        out,
        "iteration 0: release order [2, 0, 1]\n  when_any -> task 2 returned 3\n  when_any -> task 0 returned 1\n  \
         when_any -> task 1 returned 2\n  sum + 1 = 7\n\
         iteration 1: release order [0, 1, 2]\n  when_any -> task 0 returned 1\n  when_any -> task 1 returned 2\n  \
         when_any -> task 2 returned 3\n  sum + 1 = 7\n\
         iteration 2: release order [1, 2, 0]\n  when_any -> task 1 returned 2\n  when_any -> task 2 returned 3\n  \
         when_any -> task 0 returned 1\n  sum + 1 = 7\n"
    );
    // Eager start, corolib's order, on one worker.
    let one = Runtime::builder().workers(1).build().expect("runtime");
    assert_eq!(
        repeated_when_any::eager_order(&one),
        [
            "coroutine3: start task 0",
            "task 0: co_await are",
            "coroutine3: start task 1",
            "task 1: co_await are",
            "coroutine3: start task 2",
            "task 2: co_await are"
        ]
    );
}

#[test]
fn exception_flow_output() {
    let one = "  coroutine5: start operation 1\n  completionflow: operation 1 completes with -1\n  \
               coroutine5: operation 1 failed: throw OpFailed(-1)\n  coroutine4: caught OpFailed(-1), returns 0\n  \
               coroutine5: start operation 2\n  completionflow: operation 2 completes with 10\n  \
               coroutine5: operation 2 gave 10, returns 11\n  coroutine4: returns 11\n  coroutine1: v = 14\n";
    let out = exception_flow::run(&rt(), 3, &[-1, 10]);
    assert_eq!(out, format!("iteration 0\n{one}iteration 1\n{one}iteration 2\n{one}"));
    // Both fail: caught twice, v = 0 + 0 + 1 + 1 + 1.
    let out = exception_flow::run(&rt(), 1, &[-5, -7]);
    assert!(out.contains("caught OpFailed(-5)") && out.contains("caught OpFailed(-7)"), "{out}");
    assert!(out.ends_with("coroutine1: v = 3\n"), "{out}");
}

#[test]
fn corolib_clientserver_output() {
    // 3 client fibers x 5 rounds against the server on 127.0.0.1:0.
    let out = corolib_clientserver::run(&rt(), 3, 5).expect("client-server run");
    let mut want = String::from("server listening, expecting 15 connections\n");
    let mut bytes = 0;
    for c in 0..3 {
        for i in 0..5 {
            let sent = format!("client {c}: This is string {i} to echo");
            let got = sent.to_uppercase();
            bytes += got.len() + 1; // the answer's newline
            want += &format!("client {c} round {i}: sent {sent:?} got {got:?}\n");
        }
    }
    want += &format!("server: 15 connections, 15 requests, {bytes} bytes answered\n");
    assert_eq!(out, want);
}
