//! A deterministic generator for a realistic, large agent state (issue 5).
//!
//! Seeded xorshift, no `rand`: the same `Sizes` always give byte-identical states, so runs on
//! different machines and days measure the same input.
#![allow(dead_code)]

use compaction::{Compactable, Effect, EffectLog, EffectStatus, Summarizable};
use serde::{Deserialize, Serialize};
use std::fmt::Write;

/// A document the agent read (a file, a web page): derivable, re-read through its pointer.
#[derive(Summarizable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Document {
    /// Where it came from.
    pub path: String,
    /// Its text.
    pub body: String,
}

/// The benchmark state: every class, at realistic sizes.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct AgentState {
    /// Hard rules the user stated once; must never move.
    #[protected(pin)]
    pub constraints: Vec<String>,
    /// The task's identity.
    #[protected(pin)]
    pub task_id: String,
    /// Where the plan stands.
    #[protected]
    pub plan_step: u32,
    /// The config file the agent edits.
    #[protected]
    pub config_path: String,
    /// Request ids, commit hashes, ticket numbers seen so far.
    #[protected]
    pub identifiers: Vec<String>,
    /// Decisions taken, with their reasons.
    #[protected]
    pub decisions: Vec<String>,
    /// What was tried and did not work.
    #[protected]
    pub negative_results: Vec<String>,
    /// The config file's contents: re-read from disk.
    #[derivable(pointer = "file://{config_path}")]
    pub config_contents: String,
    /// Documents read so far: summarized, or re-fetched through the index.
    #[derivable(pointer = "https://docs.example/tasks/{task_id}/documents", summarize)]
    pub documents: Vec<Document>,
    /// Raw tool outputs: thrown away first.
    #[redundant]
    pub tool_outputs: Vec<String>,
    /// Migrations, e-mails, charges: exact status, never re-run.
    #[effect(idempotent = false)]
    pub effects: EffectLog,
}

/// How big the generated state is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Multiplier of the protected fields (1 is about 10 KB).
    pub protected_scale: usize,
    /// Number of tool outputs.
    pub outputs: usize,
    /// Average bytes per tool output.
    pub output_bytes: usize,
    /// Number of documents.
    pub documents: usize,
    /// Average bytes per document.
    pub document_bytes: usize,
    /// Number of effect records.
    pub effects: usize,
    /// How many of them are live (not started or unknown); the rest are committed.
    pub live_effects: usize,
}

impl Sizes {
    /// The issue's realistic state: ~10 KB protected, 2,000 outputs (~8 MB), 200 documents
    /// (~2 MB), 5,000 effect records of which 6 are live.
    pub const REALISTIC: Sizes = Sizes {
        protected_scale: 1,
        outputs: 2_000,
        output_bytes: 4_000,
        documents: 200,
        document_bytes: 10_000,
        effects: 5_000,
        live_effects: 6,
    };

    /// A tiny state for smoke runs (CI).
    pub const TINY: Sizes = Sizes {
        protected_scale: 1,
        outputs: 20,
        output_bytes: 4_000,
        documents: 4,
        document_bytes: 10_000,
        effects: 50,
        live_effects: 6,
    };

    /// `REALISTIC`, or `TINY` when `COMPACTION_BENCH_TINY` is set (CI smoke runs).
    pub fn from_env() -> Sizes {
        if std::env::var_os("COMPACTION_BENCH_TINY").is_some() {
            Sizes::TINY
        } else {
            Sizes::REALISTIC
        }
    }
}

/// xorshift64*: small, fast, deterministic.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed (0 is mapped to a fixed non-zero seed).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    /// One element of `items`.
    pub fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// `n` lowercase hex digits.
    pub fn hex(&mut self, n: usize) -> String {
        let mut s = String::with_capacity(n);
        while s.len() < n {
            let _ = write!(s, "{:016x}", self.next_u64());
        }
        s.truncate(n);
        s
    }
}

const WORDS: &[&str] = &[
    "the",
    "migration",
    "table",
    "user",
    "session",
    "request",
    "failed",
    "because",
    "of",
    "a",
    "missing",
    "index",
    "on",
    "column",
    "and",
    "retry",
    "should",
    "not",
    "be",
    "attempted",
    "until",
    "approval",
    "config",
    "value",
    "is",
    "read-only",
    "deploy",
    "pipeline",
    "cache",
    "timeout",
    "after",
    "seconds",
    "connection",
    "pool",
    "exhausted",
    "warning",
    "deprecated",
    "function",
    "returns",
    "error",
    "handler",
    "schema",
    "version",
    "rollback",
    "committed",
    "pending",
    "blocked",
    "service",
    "latency",
    "p99",
    "increased",
    "when",
    "load",
    "spikes",
    "we",
    "need",
    "to",
    "check",
    "whether",
    "this",
    "with",
    "for",
    "in",
    "that",
    "it",
    "from",
];
const DIRS: &[&str] = &[
    "src",
    "src/api",
    "src/db",
    "src/handlers",
    "tests",
    "migrations",
    "config",
    "scripts",
    "web/components",
    "internal/auth",
];
const STEMS: &[&str] = &[
    "user_session",
    "billing",
    "invoice",
    "migrate",
    "router",
    "pool",
    "schema",
    "auth_token",
    "rate_limit",
    "webhook",
    "ledger",
    "report",
];
const EXTS: &[&str] = &["rs", "py", "ts", "sql", "toml", "yaml", "go"];
const CODE: &[&str] = &[
    "    let conn = pool.get().await?;",
    "    if rows.is_empty() { return Err(Error::NotFound); }",
    "def apply(conn, version):",
    "    return {\"status\": \"ok\", \"rows\": len(rows)}",
    "SELECT id, email FROM users WHERE created_at > $1 ORDER BY id LIMIT 500;",
    "ALTER TABLE invoices ADD COLUMN settled_at TIMESTAMPTZ NULL;",
    "    for item in items.iter().filter(|i| i.active) {",
    "export async function fetchUser(id: string): Promise<User> {",
    "    assert_eq!(report.total, 118_000);",
];

fn sentence(rng: &mut Rng, out: &mut String) {
    let n = 6 + rng.below(14);
    for i in 0..n {
        let w = rng.pick(WORDS);
        if i == 0 {
            let mut c = w.chars();
            if let Some(f) = c.next() {
                out.extend(f.to_uppercase());
                out.push_str(c.as_str());
            }
        } else {
            out.push(' ');
            out.push_str(w);
        }
    }
    out.push_str(if rng.below(5) == 0 { "? " } else { ". " });
}

fn file_path(rng: &mut Rng) -> String {
    format!("{}/{}.{}", rng.pick(DIRS), rng.pick(STEMS), rng.pick(EXTS))
}

/// One line of realistic tool output (a listing, a log, a grep hit, JSON, prose).
fn tool_line(rng: &mut Rng, kind: usize, out: &mut String) {
    match kind {
        0 => {
            let _ = writeln!(
                out,
                "-rw-r--r--  1 agent staff {:>7} Mar {:>2} {:02}:{:02} {}",
                rng.below(90_000),
                1 + rng.below(28),
                rng.below(24),
                rng.below(60),
                file_path(rng)
            );
        }
        1 => {
            let _ = writeln!(
                out,
                "test {}::tests::{}_{} ... {}",
                rng.pick(STEMS),
                rng.pick(WORDS),
                rng.below(500),
                if rng.below(12) == 0 { "FAILED" } else { "ok" }
            );
        }
        2 => {
            let _ = writeln!(
                out,
                "{}:{}:{}",
                file_path(rng),
                1 + rng.below(900),
                rng.pick(CODE)
            );
        }
        3 => {
            let _ = writeln!(
                out,
                r#"{{"id":"req_{}","status":"{}","latency_ms":{},"items":[{{"sku":"{}","qty":{}}}]}}"#,
                rng.hex(16),
                rng.pick(&["ok", "pending", "error"]),
                rng.below(2_000),
                rng.hex(8).to_uppercase(),
                rng.below(40)
            );
        }
        _ => {
            sentence(rng, out);
            sentence(rng, out);
            out.push('\n');
        }
    }
}

/// About `bytes` bytes of realistic tool output.
pub fn tool_output(rng: &mut Rng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 200);
    let _ = writeln!(
        out,
        "$ {} {}",
        rng.pick(&["ls -la", "cargo test", "rg", "curl -s", "cat"]),
        rng.pick(DIRS)
    );
    let kind = rng.below(5);
    while out.len() < bytes {
        // Mostly one kind per output, like a real command, with some noise.
        let k = if rng.below(4) == 0 {
            rng.below(5)
        } else {
            kind
        };
        tool_line(rng, k, &mut out);
    }
    out
}

/// About `bytes` bytes of document text: prose with code blocks.
pub fn document_text(rng: &mut Rng, bytes: usize) -> String {
    let mut out = String::with_capacity(bytes + 200);
    let _ = writeln!(out, "# {} {}\n", rng.pick(STEMS), rng.pick(WORDS));
    while out.len() < bytes {
        if rng.below(4) == 0 {
            out.push_str("```\n");
            for _ in 0..3 + rng.below(5) {
                out.push_str(rng.pick(CODE));
                out.push('\n');
            }
            out.push_str("```\n");
        } else {
            for _ in 0..2 + rng.below(4) {
                sentence(rng, &mut out);
            }
            out.push_str("\n\n");
        }
    }
    out
}

/// Realistic text for token counting: tool outputs and documents mixed, about `bytes` bytes.
pub fn realistic_text(seed: u64, bytes: usize) -> String {
    let mut rng = Rng::new(seed);
    let mut out = String::with_capacity(bytes + 10_000);
    while out.len() < bytes {
        if rng.below(5) == 0 {
            out.push_str(&document_text(&mut rng, 10_000));
        } else {
            out.push_str(&tool_output(&mut rng, 4_000));
        }
    }
    out
}

/// The protected fields at `scale` (1 is about 10 KB).
fn protected(rng: &mut Rng, scale: usize, state: &mut AgentState) {
    state.task_id = format!("task-{}", rng.hex(12));
    state.plan_step = 17;
    state.config_path = "/srv/app/config/production.toml".into();
    for i in 0..8 * scale {
        state.constraints.push(match i % 4 {
            0 => format!("never write under /etc/prod (rule {i})"),
            1 => format!("keep numpy<2.0 in requirements (rule {i})"),
            2 => format!(
                "do not send customer e-mail before approval ticket OPS-{} is closed",
                4000 + i
            ),
            _ => format!("migrations run one at a time, in order; rule {i}"),
        });
    }
    for i in 0..40 * scale {
        state.identifiers.push(match i % 3 {
            0 => format!("request req_{}", rng.hex(16)),
            1 => format!("commit {}", rng.hex(40)),
            _ => format!(
                "ticket OPS-{} amount {}",
                4000 + i,
                100_000 + rng.below(50_000)
            ),
        });
    }
    for _ in 0..25 * scale {
        let mut s = String::new();
        sentence(rng, &mut s);
        sentence(rng, &mut s);
        state
            .decisions
            .push(format!("{}(file {})", s, file_path(rng)));
    }
    for _ in 0..25 * scale {
        let mut s = String::from("Tried: ");
        sentence(rng, &mut s);
        s.push_str("Result: did not work. ");
        sentence(rng, &mut s);
        state.negative_results.push(s);
    }
}

const ACTIONS: &[&str] = &[
    "apply_migration",
    "send_email",
    "charge_card",
    "create_ticket",
    "deploy",
];

/// Effect records: all committed but the last `live` (half not started, half unknown).
fn effects(rng: &mut Rng, n: usize, live: usize) -> EffectLog {
    let mut all = Vec::with_capacity(n);
    for i in 0..n {
        let status = if i + live < n {
            EffectStatus::Committed
        } else if (n - i).is_multiple_of(2) {
            EffectStatus::NotStarted
        } else {
            EffectStatus::Unknown
        };
        let action = rng.pick(ACTIONS);
        let mut e = Effect::new(
            action,
            format!("db://app/{}_{}", rng.pick(STEMS), i % 97),
            format!("eff-{i:06}"),
        )
        .with_status(status);
        if i > 0 && rng.below(3) == 0 {
            e = e.depends_on(format!("eff-{:06}", i - 1));
        }
        if i % 50 == 0 {
            e = e.with_payload(
                serde_json::json!({ "rows": rng.below(10_000), "ms": rng.below(900) }),
            );
        }
        all.push(e);
    }
    EffectLog::from_effects(all).expect("unique keys")
}

/// The state for `sizes`, always the same for the same sizes.
pub fn state(sizes: Sizes) -> AgentState {
    let mut rng = Rng::new(0x5EED_0005);
    let mut s = AgentState::default();
    protected(&mut rng, sizes.protected_scale, &mut s);
    s.config_contents = document_text(&mut rng, 3_000);
    s.documents = (0..sizes.documents)
        .map(|i| Document {
            path: format!("docs/{i:03}-{}.md", rng.pick(STEMS)),
            body: document_text(&mut rng, sizes.document_bytes),
        })
        .collect();
    // Separate streams, so growing the outputs leaves everything else byte-identical.
    let mut out_rng = Rng::new(0x0DD5_0005);
    s.tool_outputs = (0..sizes.outputs)
        .map(|_| {
            let bytes = sizes.output_bytes / 2 + out_rng.below(sizes.output_bytes);
            tool_output(&mut out_rng, bytes)
        })
        .collect();
    let mut eff_rng = Rng::new(0xEFF0_0005);
    s.effects = effects(&mut eff_rng, sizes.effects, sizes.live_effects);
    s
}

/// Serialized sizes of the state's parts, for the bench's header line.
pub fn describe(s: &AgentState) -> String {
    let len = |v: &dyn JsonLen| v.json_len();
    let protected = len(&s.constraints)
        + len(&s.task_id)
        + len(&s.plan_step)
        + len(&s.config_path)
        + len(&s.identifiers)
        + len(&s.decisions)
        + len(&s.negative_results);
    format!(
        "protected {} B, tool_outputs {} x = {} B, documents {} x = {} B, effects {} records = {} B, whole state {} B",
        protected,
        s.tool_outputs.len(),
        len(&s.tool_outputs),
        s.documents.len(),
        len(&s.documents),
        s.effects.len(),
        len(&s.effects),
        len(s)
    )
}

trait JsonLen {
    fn json_len(&self) -> usize;
}

impl<T: Serialize> JsonLen for T {
    fn json_len(&self) -> usize {
        serde_json::to_vec(self).map(|v| v.len()).unwrap_or(0)
    }
}
