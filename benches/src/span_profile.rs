//! A host-side profile built from the `tracing` spans that burn-fusion, cubecl-runtime and
//! cubecl-cuda emit (their `tracing` features are on in this build): how long each span was
//! entered, on which thread, and a timeline of one call. It answers "where does the host time
//! of a synchronized call go" on the GPU machine, which has no profiler.
//!
//! [`install`] sets the process's global subscriber once; nothing is recorded outside
//! [`record`], so the cost elsewhere is one atomic load per span.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

use tracing::span::{Attributes, Id};
use tracing::{Subscriber, subscriber::Interest};
use tracing_subscriber::layer::{Context, Layer, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;

static ACTIVE: AtomicBool = AtomicBool::new(false);
static STATE: Mutex<Vec<SpanRecord>> = Mutex::new(Vec::new());
static ORIGIN: OnceLock<Instant> = OnceLock::new();

/// One entered-and-exited span.
#[derive(Clone, Debug)]
pub struct SpanRecord {
    /// `target::name` of the span.
    pub name: String,
    /// The thread that entered it.
    pub thread: String,
    /// Microseconds from the start of [`record`] to the enter.
    pub start_us: f64,
    /// Microseconds between enter and exit.
    pub duration_us: f64,
}

/// When a span was entered, kept in the span's extensions until it exits.
struct Entered(Instant);

/// The `kernel.name` field of CubeCL's launch spans, shown with the span's name.
struct KernelName(String);

struct KernelNameVisitor(Option<String>);

impl tracing::field::Visit for KernelNameVisitor {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "kernel.name" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}

struct Profiler;

impl<S: Subscriber + for<'a> LookupSpan<'a>> Layer<S> for Profiler {
    fn register_callsite(&self, _: &'static tracing::Metadata<'static>) -> Interest {
        Interest::always()
    }

    fn on_new_span(&self, attributes: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        if !ACTIVE.load(Ordering::Relaxed) {
            return;
        }
        let mut visitor = KernelNameVisitor(None);
        attributes.record(&mut visitor);
        if let (Some(name), Some(span)) = (visitor.0, ctx.span(id)) {
            span.extensions_mut().insert(KernelName(name));
        }
    }

    fn on_enter(&self, id: &Id, ctx: Context<'_, S>) {
        if !ACTIVE.load(Ordering::Relaxed) {
            return;
        }
        if let Some(span) = ctx.span(id) {
            span.extensions_mut().replace(Entered(Instant::now()));
        }
    }

    fn on_exit(&self, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut extensions = span.extensions_mut();
        let Some(Entered(start)) = extensions.remove::<Entered>() else {
            return;
        };
        let kernel = extensions.get_mut::<KernelName>().map(|k| k.0.clone());
        drop(extensions);
        let end = Instant::now();
        let origin = *ORIGIN.get_or_init(Instant::now);
        let metadata = span.metadata();
        let thread = std::thread::current();
        let record = SpanRecord {
            name: match kernel {
                Some(kernel) => format!("{}::{} {kernel}", metadata.target(), metadata.name()),
                None => format!("{}::{}", metadata.target(), metadata.name()),
            },
            thread: thread
                .name()
                .map(str::to_string)
                .unwrap_or_else(|| format!("{:?}", thread.id())),
            start_us: start.saturating_duration_since(origin).as_secs_f64() * 1e6,
            duration_us: end.duration_since(start).as_secs_f64() * 1e6,
        };
        STATE.lock().unwrap().push(record);
    }
}

/// Installs the profiling subscriber as the global default. Returns false when another global
/// subscriber was installed first (then [`record`] records nothing).
pub fn install() -> bool {
    let subscriber = tracing_subscriber::registry().with(Profiler);
    tracing::subscriber::set_global_default(subscriber).is_ok()
}

/// Runs `f` with recording on; returns the spans entered meanwhile, on every thread, in the
/// order they exited.
pub fn record(f: impl FnOnce()) -> Vec<SpanRecord> {
    STATE.lock().unwrap().clear();
    let _ = ORIGIN.set(Instant::now());
    let origin = *ORIGIN.get().expect("set above");
    let offset = origin.elapsed().as_secs_f64() * 1e6;
    ACTIVE.store(true, Ordering::Relaxed);
    f();
    ACTIVE.store(false, Ordering::Relaxed);
    let mut records = std::mem::take(&mut *STATE.lock().unwrap());
    for r in &mut records {
        r.start_us -= offset;
    }
    records
}

/// Per span name: calls, and total and mean microseconds, divided by `calls` (the number of
/// calls of the profiled step), largest total first.
pub fn summary(records: &[SpanRecord], calls: usize) -> String {
    let mut totals: HashMap<(&str, &str), (usize, f64)> = HashMap::new();
    for r in records {
        let entry = totals.entry((&r.name, &r.thread)).or_default();
        entry.0 += 1;
        entry.1 += r.duration_us;
    }
    let mut rows: Vec<_> = totals.into_iter().collect();
    rows.sort_by(|a, b| b.1.1.total_cmp(&a.1.1));
    let calls = calls.max(1) as f64;
    let mut out = String::from("span\tthread\tcount_per_call\tus_per_call\n");
    for ((name, thread), (count, total)) in rows {
        let _ = writeln!(
            out,
            "{name}\t{thread}\t{:.1}\t{:.1}",
            count as f64 / calls,
            total / calls
        );
    }
    out
}

/// The spans in the order they were entered: start and duration in microseconds, the thread,
/// and the name; at most `limit` rows.
pub fn timeline(records: &[SpanRecord], limit: usize) -> String {
    let mut sorted: Vec<&SpanRecord> = records.iter().collect();
    sorted.sort_by(|a, b| a.start_us.total_cmp(&b.start_us));
    let mut out = String::from("start_us\tduration_us\tthread\tspan\n");
    for r in sorted.into_iter().take(limit) {
        let _ = writeln!(
            out,
            "{:.1}\t{:.1}\t{}\t{}",
            r.start_us, r.duration_us, r.thread, r.name
        );
    }
    out
}
