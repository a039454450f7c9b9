//! What the tests that read logs share: a `tracing` subscriber that keeps every span, record
//! and event as text ([`Capture`], installed with [`capturing`]), states whose every string
//! carries a unique marker ([`Marker`]), and a summarizer that keeps the summaries it made
//! ([`Recording`]).

use super::states::{Leaf, Mid, PropState};
use compaction::{Effect, EffectLog, Extractive, Summarizer, SummarizerError, SummaryRequest};
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

#[derive(Clone, Default)]
pub struct Capture {
    lines: Arc<Mutex<Vec<String>>>,
    next_id: Arc<AtomicU64>,
}

impl Capture {
    pub fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
    }

    pub fn text(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }
}

/// Runs `f` with every span, record and event of this thread kept in `capture`.
///
/// Through one global subscriber that routes each thread's to its capture, not a scoped one per
/// test: `tracing` caches each call site's interest when the site is first hit, and a site first
/// hit on another test's thread while this test's scoped subscriber was being registered kept
/// "never" for it (its events silently lost: the README's test command failed now and then).
/// A global subscriber is there before, and for, every registration.
pub fn capturing<T>(capture: &Capture, f: impl FnOnce() -> T) -> T {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        // Another test of the binary may have set one already: then this binary's captures
        // would see nothing, and their own checks (spans present) fail loudly.
        let _ = tracing::subscriber::set_global_default(Router);
    });
    // Sites registered before the global subscriber was set are asked again.
    tracing::callsite::rebuild_interest_cache();
    CURRENT.with(|c| *c.borrow_mut() = Some(capture.clone()));
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            CURRENT.with(|c| *c.borrow_mut() = None);
        }
    }
    let _reset = Reset;
    f()
}

thread_local! {
    static CURRENT: std::cell::RefCell<Option<Capture>> = const { std::cell::RefCell::new(None) };
}

/// The global subscriber: everything of a thread that is capturing goes to its capture; every
/// other thread's is dropped.
struct Router;

fn with_current<T>(f: impl FnOnce(&Capture) -> T) -> Option<T> {
    CURRENT.with(|c| c.borrow().as_ref().map(f))
}

impl Subscriber for Router {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        with_current(|c| c.new_span(span)).unwrap_or_else(|| Id::from_u64(u64::MAX))
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        with_current(|c| c.record(span, values));
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        with_current(|c| c.event(event));
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Writes each field as `name=value`: strings raw (so no escaping hides a value), everything
/// else through its `Debug` (which `%value` fields route to `Display`).
struct Line(String);

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        let _ = write!(self.0, " {}={}", field.name(), value);
    }
    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        let _ = write!(self.0, " {}={} ({:?})", field.name(), value, value);
    }
    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        let _ = write!(self.0, " {}={:?}", field.name(), value);
    }
}

impl Subscriber for Capture {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn max_level_hint(&self) -> Option<LevelFilter> {
        Some(LevelFilter::TRACE)
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let mut line = Line(format!("span#{id} {}", span.metadata().name()));
        span.record(&mut line);
        self.push(line.0);
        Id::from_u64(id)
    }
    fn record(&self, span: &Id, values: &Record<'_>) {
        let mut line = Line(format!("record#{}", span.into_u64()));
        values.record(&mut line);
        self.push(line.0);
    }
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, event: &Event<'_>) {
        let meta = event.metadata();
        let mut line = Line(format!("event {} {}", meta.level(), meta.target()));
        event.record(&mut line);
        self.push(line.0);
    }
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

/// Gives every string a unique marker at both ends and remembers the markers.
#[derive(Default)]
pub struct Marker {
    pub markers: Vec<String>,
}

impl Marker {
    pub fn mark(&mut self, text: &str) -> String {
        let marker = format!("Qz{}x", self.markers.len() + 1000);
        let marked = format!("{marker}{text}{marker}");
        self.markers.push(marker);
        marked
    }

    pub fn leaf(&mut self, leaf: &Leaf) -> Leaf {
        Leaf {
            id: self.mark(&leaf.id),
            qty: leaf.qty,
            notes: leaf.notes.iter().map(|n| self.mark(n)).collect(),
        }
    }

    pub fn log(&mut self, log: &EffectLog) -> EffectLog {
        let mut keys = BTreeMap::new();
        let mut marked = EffectLog::new();
        for effect in log.iter() {
            let key = self.mark(&effect.idempotency_key);
            keys.insert(effect.idempotency_key.clone(), key.clone());
            let mut copy = Effect::new(self.mark(&effect.action), self.mark(&effect.target), key)
                .with_status(effect.status);
            for dep in &effect.depends_on {
                copy = copy.depends_on(keys[dep].clone());
            }
            if effect.payload.is_some() {
                copy = copy.with_payload(serde_json::json!({ "out": self.mark("payload") }));
            }
            marked.record(copy).expect("marked keys stay unique");
        }
        marked
    }

    pub fn state(&mut self, s: &PropState) -> PropState {
        PropState {
            constraints: s.constraints.iter().map(|c| self.mark(c)).collect(),
            config_path: self.mark(&s.config_path),
            plan_step: s.plan_step,
            amounts: s.amounts.iter().map(|(k, v)| (self.mark(k), *v)).collect(),
            blocked_on: s.blocked_on.as_ref().map(|b| self.mark(b)),
            config: self.mark(&s.config),
            ci_log: self.mark(&s.ci_log),
            transcript: self.mark(&s.transcript),
            tool_output: s.tool_output.iter().map(|t| self.mark(t)).collect(),
            migrations: self.log(&s.migrations),
            reads: self.log(&s.reads),
            sub: self.leaf(&s.sub),
            subs: s.subs.iter().map(|l| self.leaf(l)).collect(),
            maybe: s.maybe.as_ref().map(|m| Mid {
                tag: self.mark(&m.tag),
                doc: self.mark(&m.doc),
                leaf: self.leaf(&m.leaf),
            }),
        }
    }
}

/// `Extractive` with an identity (so the cache is used), keeping every summary it returns.
#[derive(Clone, Default)]
pub struct Recording(pub Arc<Mutex<Vec<String>>>);

impl Summarizer for Recording {
    async fn summarize(&self, request: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        let summary = Extractive.summarize(request).await?;
        self.0.lock().unwrap().push(summary.clone());
        Ok(summary)
    }
    fn identity(&self) -> Option<String> {
        Some("recording-extractive/1".into())
    }
}
