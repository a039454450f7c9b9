//! A deterministic rich state, and a compaction of it that spills protected values, settled
//! effect records and summary sources.

use super::states::{Leaf, Mid, PropState};
use compaction::{
    Compacted, Compactor, Effect, EffectStatus, FieldOutcome, MemoryStore, Store, Summarizer,
    Tokenizer,
};

/// A state with something in every field.
pub fn rich_state() -> PropState {
    let mut s = PropState {
        constraints: vec!["never touch /etc/prod".into(), "numpy<2.0".into()],
        config_path: "/srv/app/config.toml".into(),
        plan_step: 6,
        amounts: [
            ("invoice-118000".to_owned(), 118_000i64),
            ("refund".to_owned(), -5),
        ]
        .into_iter()
        .collect(),
        blocked_on: Some("human approval (not yet given) for /etc/prod; ".repeat(12)),
        config: "[db]\nurl = \"postgres://db/app\"\n".repeat(8),
        ci_log: "step ok\n".repeat(300),
        transcript: "user: do not re-run mig-0002\n".repeat(100),
        tool_output: (0..30).map(|i| format!("ls output {i}: a b c")).collect(),
        sub: Leaf {
            id: "req-7f3a".into(),
            qty: 118_000,
            notes: vec!["looked at vault".into()],
        },
        subs: vec![
            Leaf {
                id: "mig-0001".into(),
                qty: 1,
                notes: vec!["é🦀".repeat(50)],
            },
            Leaf {
                id: "mig-O001".into(),
                qty: 2,
                notes: vec![],
            },
        ],
        maybe: Some(Mid {
            tag: "rotate-keys".into(),
            doc: "runbook: ".repeat(80),
            leaf: Leaf {
                id: "\"quoted\" \\ id\n".into(),
                qty: u64::MAX,
                notes: vec!["n".into()],
            },
        }),
        ..PropState::default()
    };
    for i in 0..8 {
        let key = format!("mig-{i:04}");
        let mut e = Effect::new("apply_migration", "db://app/users", &key)
            .with_payload(serde_json::json!({ "rows": i * 1000, "log": "ok ".repeat(20) }));
        if i > 0 {
            e = e.depends_on(format!("mig-{:04}", i - 1));
        }
        s.migrations.record(e).unwrap();
        if i < 6 {
            s.migrations.begin(&key).unwrap();
            s.migrations.commit(&key).unwrap();
        } else if i == 6 {
            s.migrations.begin(&key).unwrap();
        }
    }
    s.reads
        .record(Effect::new("read", "https://api/x", "r-1").with_status(EffectStatus::Committed))
        .unwrap();
    s
}

/// Whether a compaction spilled a protected value, spilled effect records and summarized a
/// field: the forms a tamper test must cover.
pub fn covers_every_form(c: &Compacted<PropState>) -> bool {
    let r = c.report();
    let spilled_protected = r.fields.iter().any(|f| {
        r.fingerprints.contains_key(&f.field) && matches!(f.outcome, FieldOutcome::Spilled { .. })
    });
    let spilled_records = matches!(r.outcome("migrations"), Some(FieldOutcome::Spilled { .. }));
    let summarized = r
        .fields
        .iter()
        .any(|f| matches!(f.outcome, FieldOutcome::Summarized { .. }));
    spilled_protected && spilled_records && summarized
}

/// Compacts `rich_state()` at the largest budget (searching down from 2,000 tokens) whose
/// window spills protected values and effect records and carries a summary.
pub fn spilling_compaction<St: Store + Clone + 'static, Su: Summarizer + Clone + 'static>(
    store: &St,
    summarizer: &Su,
) -> (Compactor, Compacted<PropState>) {
    let state = rich_state();
    for budget in (200..2_000).rev().step_by(25) {
        let compactor = Compactor::builder()
            .budget(budget)
            .token_counter(Tokenizer::O200kBase)
            .summarizer(summarizer.clone())
            .store(store.clone())
            .build()
            .unwrap();
        if let Ok(c) = compactor.compact_blocking(&state) {
            if covers_every_form(&c) {
                return (compactor, c);
            }
        }
    }
    panic!("no budget spills every form of rich_state()");
}

/// A fresh memory store.
pub fn memory() -> MemoryStore {
    MemoryStore::new()
}
