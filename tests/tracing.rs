//! The `tracing` feature: a span per fiber with its id, name and spawn
//! site, entered while the fiber runs (a subscriber's per-thread stack of
//! entered spans always matches), and `park` / `resume` events inside it.
//!
//! ```text
//! cargo test --release --features tracing --test tracing
//! ```
#![cfg(feature = "tracing")]

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use numafiber::runtime::FiberState;
use numafiber::sync::Event;
use numafiber::{fiber, Runtime};
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event as TEvent, Metadata, Subscriber};

type Fields = HashMap<String, String>;

/// Records spans, events (with the span current on their thread) and
/// enter/exit mismatches.
#[derive(Default)]
struct Recorder {
    next: AtomicU64,
    spans: Mutex<HashMap<u64, Fields>>,
    events: Mutex<Vec<(Option<u64>, Fields)>>,
    mismatched: AtomicUsize,
}

thread_local! {
    static ENTERED: RefCell<Vec<u64>> = const { RefCell::new(Vec::new()) };
}

struct Collect<'a>(&'a mut Fields);

impl Visit for Collect<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        self.0.insert(field.name().to_string(), format!("{value:?}"));
    }
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_string(), value.to_string());
    }
}

struct Sub(&'static Recorder);

impl Subscriber for Sub {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, attrs: &Attributes<'_>) -> Id {
        let id = self.0.next.fetch_add(1, SeqCst) + 1;
        let mut f = Fields::new();
        f.insert("name".into(), attrs.metadata().name().into());
        attrs.record(&mut Collect(&mut f));
        self.0.spans.lock().unwrap().insert(id, f);
        Id::from_u64(id)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, e: &TEvent<'_>) {
        let mut f = Fields::new();
        e.record(&mut Collect(&mut f));
        let current = ENTERED.with(|s| s.borrow().last().copied());
        self.0.events.lock().unwrap().push((current, f));
    }
    fn enter(&self, id: &Id) {
        ENTERED.with(|s| s.borrow_mut().push(id.into_u64()));
    }
    fn exit(&self, id: &Id) {
        let top = ENTERED.with(|s| s.borrow_mut().pop());
        if top != Some(id.into_u64()) {
            self.0.mismatched.fetch_add(1, SeqCst);
        }
    }
}

#[test]
fn a_fiber_has_a_span_entered_while_it_runs_with_park_and_resume_events() {
    let rec: &'static Recorder = Box::leak(Box::default());
    tracing::subscriber::set_global_default(Sub(rec)).unwrap();

    let rt = Runtime::builder().workers(2).build().unwrap();
    let ev = Arc::new(Event::new());
    let e = ev.clone();
    let spawn_line = line!() + 1;
    let h = fiber::Builder::new().name("traced").spawn_on(&rt, move || e.wait()).unwrap();
    let id = h.id();
    // Some yielding fibers on both workers, to interleave with it.
    let others: Vec<_> = (0..8)
        .map(|_| {
            rt.spawn(|| {
                for _ in 0..50 {
                    fiber::yield_now();
                }
            })
        })
        .collect();
    let t = Instant::now();
    while !rt.dump().fibers().any(|f| f.id() == id && f.state() == FiberState::Parked) {
        assert!(t.elapsed() < Duration::from_secs(10), "not parked");
        std::thread::sleep(Duration::from_millis(1));
    }
    ev.set();
    h.join().unwrap();
    for o in others {
        o.join().unwrap();
    }
    drop(rt);

    let spans = rec.spans.lock().unwrap();
    let (&span, fields) = spans
        .iter()
        .find(|(_, f)| f.get("fiber.name").is_some_and(|n| n.contains("traced")))
        .unwrap_or_else(|| panic!("no span named traced: {spans:?}"));
    assert_eq!(fields["name"], "numafiber.fiber");
    assert_eq!(fields["fiber.id"], id.to_string());
    assert!(fields["spawn.file"].contains("tests/tracing.rs"), "{fields:?}");
    assert_eq!(fields["spawn.line"], spawn_line.to_string(), "{fields:?}");
    let events = rec.events.lock().unwrap();
    let mine: Vec<&Fields> = events.iter().filter(|(s, _)| *s == Some(span)).map(|(_, f)| f).collect();
    let park =
        mine.iter().find(|f| f["message"] == "park").unwrap_or_else(|| panic!("no park event in the span: {mine:?}"));
    assert!(park["wait"].contains("Event wait"), "{park:?}");
    assert_eq!(park["wait.line"], spawn_line.to_string(), "{park:?}");
    assert!(mine.iter().any(|f| f["message"] == "resume"), "no resume event in the span: {mine:?}");
    assert!(events.iter().any(|(s, f)| s.is_some() && f["message"] == "yield"), "the yielders' events");
    assert_eq!(rec.mismatched.load(SeqCst), 0, "a thread exited a span it had not entered last");
}
