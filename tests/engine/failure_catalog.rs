//! The failure catalog: one test per failure the design notes (`shared/seeds/`) observed. Each
//! runs against an adversarial summarizer that does what the notes saw summarizers do, and
//! asserts the failure cannot happen, or that compaction refuses with the specific error.

use compaction::{
    Compactable, CompactionError, Compactor, Effect, EffectError, EffectLog, EffectStatus,
    FieldOutcome, FnReacquire, FnSummarizer, MemoryStore, Reacquire, Summarizable, SummarizerError,
    SummaryRequest, TokenCounter, Tokenizer,
};
use serde::{Deserialize, Serialize};
use std::sync::{Arc, Mutex};

#[derive(Summarizable, Serialize, Deserialize, Debug, Clone, PartialEq)]
enum Subgoal {
    Pending(String),
    Blocked { task: String, on: String },
    Done(String),
}

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct AgentState {
    #[protected(pin)]
    constraints: Vec<String>,
    #[protected]
    plan_step: u32,
    #[protected]
    config_path: String,
    #[protected]
    request_ids: Vec<String>,
    #[protected]
    tokens_used: u64,
    #[protected]
    ruled_out: Vec<String>,
    #[protected]
    subgoals: Vec<Subgoal>,
    #[derivable(pointer = "file://{config_path}", summarize)]
    config_contents: String,
    #[redundant(summarize)]
    transcript: String,
    #[redundant]
    tool_output: Vec<String>,
    #[effect(idempotent = false)]
    effects: EffectLog,
}

fn config() -> String {
    let mut text = String::from("[limits]\nmax_conn = 100\nunique_key = \"tenant_id\"\n");
    for i in 0..60 {
        text.push_str(&format!(
            "tenant_{i} = {{ pool = {i}, region = \"eu-west\" }}\n"
        ));
    }
    text
}

fn state() -> AgentState {
    let mut s = AgentState {
        constraints: vec![
            "do not modify anything under /etc/prod/ (read-only)".into(),
            "never re-run migration mig-0007; it already ran".into(),
            "the target library pins numpy<2.0".into(),
        ],
        plan_step: 6,
        config_path: "/srv/app/conf.d/limits.toml".into(),
        request_ids: vec!["req-7f3a9c2e1b4d".into(), "req-7f3a9c2e1b4b".into()],
        tokens_used: 118_000,
        ruled_out: vec![
            "branch arm64-cross: fails on ARM (C-extension ABI mismatch), reverted".into(),
        ],
        subgoals: vec![
            Subgoal::Done("write config".into()),
            Subgoal::Blocked {
                task: "rotate prod keys".into(),
                on: "human approval".into(),
            },
            Subgoal::Pending("notify on-call".into()),
        ],
        config_contents: config(),
        transcript: "assistant: inspected /srv/app/conf.d/limits.toml and updated max_conn. "
            .repeat(200),
        tool_output: (0..300)
            .map(|i| format!("$ ls /srv/app -> file_{i}.log"))
            .collect(),
        effects: EffectLog::new(),
    };
    let e = &mut s.effects;
    e.record(Effect::new(
        "write",
        "file:///srv/app/conf.d/limits.toml",
        "write-1",
    ))
    .unwrap();
    e.begin("write-1").unwrap();
    e.commit("write-1").unwrap();
    e.record(Effect::new(
        "apply_migration",
        "db://app/tenants",
        "mig-0007",
    ))
    .unwrap();
    e.begin("mig-0007").unwrap();
    e.commit("mig-0007").unwrap();
    // Notify depends on the write's output and has not been attempted.
    e.record(Effect::new("notify", "mail://on-call", "notify-1").depends_on("write-1"))
        .unwrap();
    // A charge that timed out: the outcome is unknown.
    e.record(Effect::new("charge", "payments://cust/42", "charge-42"))
        .unwrap();
    e.begin("charge-42").unwrap();
    s
}

/// Does what the design notes saw: paraphrases paths and identifiers, rounds numbers, turns
/// "do not" into a preference, collapses blocked to pending, drops "not yet", calls timeouts
/// failures. Records every request so tests can prove what it was (never) shown.
#[derive(Clone, Default)]
struct Adversary {
    seen: Arc<Mutex<Vec<(String, String)>>>,
}

impl Adversary {
    fn summarizer(&self) -> impl compaction::Summarizer + 'static {
        let seen = self.seen.clone();
        FnSummarizer::new(move |req: SummaryRequest<'_>| {
            seen.lock()
                .unwrap()
                .push((req.field.to_owned(), req.text.to_owned()));
            let paraphrase = req
                .text
                .replace("/srv/app/conf.d/limits.toml", "the config file")
                .replace("118000", "about 120k")
                .replace("118,000", "about 120k")
                .replace("do not modify", "user prefers careful changes to")
                .replace("Blocked", "Pending")
                .replace("not yet", "")
                .replace("timeout", "failed");
            let short: String = paraphrase
                .split_whitespace()
                .take(req.target_tokens / 3)
                .collect::<Vec<_>>()
                .join(" ");
            Ok(if short.is_empty() {
                "Earlier, several files were inspected and a configuration was updated."
                    .chars()
                    .take(req.target_tokens)
                    .collect()
            } else {
                short
            })
        })
    }

    fn saw(&self, needle: &str) -> bool {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .any(|(_, text)| text.contains(needle))
    }
}

fn compactor(budget: usize, adversary: &Adversary, store: &MemoryStore) -> Compactor {
    Compactor::builder()
        .budget(budget)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(adversary.summarizer())
        .store(store.clone())
        .build()
        .unwrap()
}

fn files() -> impl Reacquire {
    FnReacquire::new(|_field: &str, pointer: &str| match pointer {
        "file:///srv/app/conf.d/limits.toml" => Ok(serde_json::json!(config())),
        other => Err(format!("no such file: {other}").into()),
    })
}

/// Compacts under pressure (everything evictable leaves) and rehydrates.
fn squeeze(
    budget: usize,
) -> (
    AgentState,
    compaction::Compacted<AgentState>,
    AgentState,
    Adversary,
    Compactor,
) {
    let adversary = Adversary::default();
    let store = MemoryStore::new();
    let compactor = compactor(budget, &adversary, &store);
    let original = state();
    let compacted = compactor.compact_blocking(&original).unwrap();
    assert!(compacted.tokens() <= budget);
    let restored = compactor.rehydrate_blocking(&compacted, &files()).unwrap();
    (original, compacted, restored, adversary, compactor)
}

const TIGHT: usize = 1_400;

#[test]
fn lost_identity_the_config_path_stays_exact() {
    let (original, compacted, restored, adversary, _) = squeeze(floor_budget());
    let window = compacted.render();
    assert!(window.contains(r#"config_path = "/srv/app/conf.d/limits.toml""#));
    assert_eq!(restored.config_path, original.config_path);
    // The file left the window behind a pointer built from the exact path, never a paraphrase.
    match compacted.report().outcome("config_contents") {
        Some(FieldOutcome::Evicted { pointer }) => {
            assert_eq!(pointer, "file:///srv/app/conf.d/limits.toml")
        }
        Some(FieldOutcome::Summarized { .. }) => {
            assert!(window.contains("origin=file:///srv/app/conf.d/limits.toml"))
        }
        other => panic!("expected the config contents to leave the window, got {other:?}"),
    }
    assert!(adversary
        .seen
        .lock()
        .unwrap()
        .iter()
        .all(|(field, _)| field != "config_path"));
    assert_eq!(restored.config_contents, config());
}

#[test]
fn lost_idempotency_guard_a_committed_migration_is_not_reapplied() {
    let (_, compacted, mut restored, _, _) = squeeze(TIGHT);
    assert!(
        compacted
            .render()
            .contains(r#""idempotency_key":"mig-0007","status":"committed""#)
            || compacted.render().contains("committed")
    );
    assert!(matches!(
        restored.effects.begin("mig-0007"),
        Err(EffectError::AlreadyCommitted { .. })
    ));
}

#[test]
fn lost_negative_result_the_ruled_out_branch_survives() {
    let (original, _, restored, adversary, _) = squeeze(TIGHT);
    assert_eq!(restored.ruled_out, original.ruled_out);
    assert!(!adversary.saw("arm64-cross"));
}

#[test]
fn irrecoverable_constraint_numpy_pin_stays_in_the_window() {
    // Even at the floor, a pinned constraint is in the window itself, not behind a pointer.
    let (_, compacted, restored, _, _) = squeeze(floor_budget());
    assert!(compacted
        .render()
        .contains("the target library pins numpy<2.0"));
    assert!(restored.constraints.iter().any(|c| c.contains("numpy<2.0")));
}

#[test]
fn constraint_drift_etc_prod_is_never_paraphrased() {
    let (_, compacted, restored, adversary, _) = squeeze(TIGHT);
    assert!(compacted
        .render()
        .contains("do not modify anything under /etc/prod/ (read-only)"));
    assert!(!compacted.render().contains("user prefers careful changes"));
    assert!(!adversary.saw("/etc/prod"));
    assert_eq!(restored.constraints, state().constraints);
}

#[test]
fn state_qualifier_loss_blocked_stays_blocked() {
    let (_, compacted, restored, adversary, compactor) = squeeze(TIGHT);
    assert!(restored.subgoals.contains(&Subgoal::Blocked {
        task: "rotate prod keys".into(),
        on: "human approval".into()
    }));
    assert!(!adversary.saw("human approval"));
    // The qualifier is in the window itself, or behind a pointer whose bytes carry it.
    // Canonical JSON: object keys sorted.
    let blocked = r#"{"Blocked":{"on":"human approval","task":"rotate prod keys"}}"#;
    match compacted.report().outcome("subgoals") {
        Some(FieldOutcome::Kept) => assert!(compacted.render().contains(blocked)),
        Some(FieldOutcome::Spilled { pointer }) => {
            let bytes = compactor.resolve_blocking(pointer).unwrap();
            assert!(String::from_utf8(bytes).unwrap().contains(blocked));
        }
        other => panic!("protected subgoals must be kept or spilled, got {other:?}"),
    }
}

#[test]
fn confirmation_collapse_notify_stays_not_started() {
    let (_, compacted, restored, _, _) = squeeze(floor_budget());
    // A live obligation never leaves the window, whatever the pressure.
    assert!(compacted
        .render()
        .contains(r#""idempotency_key":"notify-1","status":"not_started""#));
    assert_eq!(
        restored.effects.status("notify-1"),
        Some(EffectStatus::NotStarted)
    );
}

#[test]
fn negation_loss_the_prohibition_is_verbatim() {
    let (_, compacted, _, adversary, _) = squeeze(floor_budget());
    assert!(compacted
        .render()
        .contains("never re-run migration mig-0007; it already ran"));
    assert!(!adversary.saw("never re-run"));
}

#[test]
fn ordering_flattening_depends_on_edges_survive() {
    let (_, compacted, restored, _, _) = squeeze(floor_budget());
    assert!(compacted.render().contains(r#""depends_on":["write-1"]"#));
    assert_eq!(
        restored.effects.get("notify-1").unwrap().depends_on,
        vec!["write-1".to_string()]
    );
}

#[test]
fn ambiguous_outcome_erasure_a_timeout_stays_unknown() {
    let (_, compacted, mut restored, _, _) = squeeze(floor_budget());
    assert!(compacted
        .render()
        .contains(r#""idempotency_key":"charge-42","status":"unknown""#));
    assert_eq!(
        restored.effects.status("charge-42"),
        Some(EffectStatus::Unknown)
    );
    assert!(matches!(
        restored.effects.begin("charge-42"),
        Err(EffectError::OutcomeUnknown { .. })
    ));
    // Strict mode refuses to compact at all while an outcome is unknown.
    let strict = Compactor::builder()
        .budget(32_000)
        .refuse_on_unknown_effects(true)
        .build()
        .unwrap();
    match strict.compact_blocking(&state()) {
        Err(CompactionError::UnknownEffect { field, key }) => {
            assert_eq!((field.as_str(), key.as_str()), ("effects", "charge-42"));
        }
        other => panic!("expected UnknownEffect, got {other:?}"),
    }
}

#[test]
fn plan_index_amnesia_the_step_is_exact_even_when_spilled() {
    let (_, compacted, restored, _, compactor) = squeeze(floor_budget());
    assert_eq!(restored.plan_step, 6);
    if let Some(FieldOutcome::Spilled { pointer }) = compacted.report().outcome("plan_step") {
        assert!(compacted.render().contains(&pointer.to_string()));
        assert_eq!(
            compactor.resolve_blocking(pointer.to_string()).unwrap(),
            b"6"
        );
    } else {
        assert!(compacted.render().contains("plan_step = 6"));
    }
}

#[test]
fn identifier_drift_request_ids_and_counts_are_byte_identical() {
    for budget in [floor_budget(), TIGHT, 32_000] {
        let (original, compacted, restored, adversary, _) = squeeze(budget);
        assert_eq!(restored.request_ids, original.request_ids);
        assert_eq!(restored.tokens_used, 118_000);
        assert!(!adversary.saw("req-7f3a9c2e1b4d"));
        let fingerprints = &compacted.report().fingerprints;
        assert!(fingerprints.contains_key("request_ids"));
        assert!(fingerprints.contains_key("tokens_used"));
    }
}

#[test]
fn double_execution_after_eviction_payload_spilled_record_stays() {
    let mut s = state();
    s.effects
        .set_payload(
            "write-1",
            serde_json::json!({"bytes_written": "x".repeat(20_000)}),
        )
        .unwrap();
    let adversary = Adversary::default();
    let store = MemoryStore::new();
    let compactor = compactor(TIGHT, &adversary, &store);
    let compacted = compactor.compact_blocking(&s).unwrap();
    assert!(matches!(
        compacted.report().outcome("effects.payloads"),
        Some(FieldOutcome::Spilled { .. })
    ));
    assert!(!compacted.render().contains(&"x".repeat(100)));
    let mut restored = compactor.rehydrate_blocking(&compacted, &files()).unwrap();
    // Out of the window, not lost: the payload comes back from the store.
    assert_eq!(
        restored.effects.get("write-1").unwrap().payload,
        s.effects.get("write-1").unwrap().payload
    );
    assert!(matches!(
        restored.effects.begin("write-1"),
        Err(EffectError::AlreadyCommitted { .. })
    ));
}

#[test]
fn constraint_decay_under_repeated_compaction_cannot_happen() {
    let adversary = Adversary::default();
    let store = MemoryStore::new();
    let compactor = Compactor::builder()
        .budget(TIGHT)
        .token_counter(Tokenizer::O200kBase)
        .summarizer(adversary.summarizer())
        .store(store)
        .build()
        .unwrap();
    let mut current = state();
    let first = compactor.compact_blocking(&current).unwrap();
    let fingerprints = first.report().fingerprints.clone();
    for round in 0..1_000 {
        let compacted = compactor.compact_blocking(&current).unwrap();
        assert_eq!(
            compacted.report().fingerprints,
            fingerprints,
            "round {round}"
        );
        current = compactor.rehydrate_blocking(&compacted, &files()).unwrap();
    }
    assert_eq!(current.constraints, state().constraints);
    assert_eq!(current.effects, state().effects);
}

#[test]
fn protected_set_over_budget_refuses_and_leaves_state_untouched() {
    let original = state();
    let before = original.clone();
    let compactor = Compactor::builder().budget(120).build().unwrap();
    match compactor.compact_blocking(&original) {
        Err(CompactionError::ProtectedOverBudget {
            fields,
            required_tokens,
            budget,
            evicted,
        }) => {
            assert_eq!(budget, 120);
            assert!(required_tokens > 120);
            assert!(fields
                .iter()
                .any(|f| f.field == "constraints" && f.tokens > 0));
            assert!(evicted.contains(&"tool_output".to_string()));
        }
        other => panic!("expected ProtectedOverBudget, got {other:?}"),
    }
    assert_eq!(original, before);
}

/// The smallest budget that still compacts: everything evictable is out.
fn floor_budget() -> usize {
    let compactor = Compactor::builder().budget(50).build().unwrap();
    match compactor.compact_blocking(&state()) {
        Err(CompactionError::ProtectedOverBudget {
            required_tokens, ..
        }) => required_tokens,
        other => panic!("expected the floor, got {other:?}"),
    }
}

#[test]
fn at_the_floor_everything_evictable_left_and_nothing_protected_was_summarized() {
    let (_, compacted, _, adversary, _) = squeeze(floor_budget());
    let report = compacted.report();
    assert_eq!(
        report.outcome("tool_output"),
        Some(&FieldOutcome::Tombstoned)
    );
    for (field, _) in adversary.seen.lock().unwrap().iter() {
        assert!(
            field == "config_contents" || field == "transcript",
            "{field} reached the summarizer"
        );
    }
    assert!(Tokenizer::O200kBase.count(compacted.render()) <= floor_budget());
}

/// A hand-written impl that routes a protected field to the summarizing visitor method: refused
/// before the summarizer sees anything.
struct Sneaky {
    secret: String,
}

impl Compactable for Sneaky {
    fn schema() -> &'static compaction::Schema {
        static SCHEMA: std::sync::OnceLock<compaction::Schema> = std::sync::OnceLock::new();
        SCHEMA.get_or_init(|| {
            compaction::Schema::builder("Sneaky")
                .field(
                    "secret",
                    compaction::FieldClass::Protected { pin: true },
                    "String",
                )
                .build()
        })
    }
    fn visit<'a, V: compaction::Visitor<'a>>(&'a self, visitor: &mut V) {
        visitor.redundant_summarizable("secret", &self.secret);
    }
    fn rebuild(parts: &mut compaction::Parts) -> Result<Self, compaction::RebuildError> {
        Ok(Sneaky {
            secret: parts.protected("secret")?,
        })
    }
}

#[test]
fn a_protected_field_routed_to_the_summarizer_is_refused() {
    let adversary = Adversary::default();
    let compactor = compactor(20, &adversary, &MemoryStore::new());
    let sneaky = Sneaky {
        secret: "do not modify /etc/prod".repeat(50),
    };
    match compactor.compact_blocking(&sneaky) {
        Err(CompactionError::ProtectedToSummarizer { field }) => assert_eq!(field, "secret"),
        other => panic!("expected ProtectedToSummarizer, got {other:?}"),
    }
    assert!(adversary.seen.lock().unwrap().is_empty());
}

#[test]
fn a_misbehaving_summarizer_is_a_typed_error_never_a_cut() {
    for (name, output) in [("empty", String::new()), ("long", "word ".repeat(5_000))] {
        let compactor = Compactor::builder()
            .budget(TIGHT)
            .summarizer(FnSummarizer::new(move |_req: SummaryRequest<'_>| {
                Ok(output.clone())
            }))
            .build()
            .unwrap();
        let original = state();
        match compactor.compact_blocking(&original) {
            Err(CompactionError::Summarizer(SummarizerError::Empty { .. })) if name == "empty" => {}
            Err(CompactionError::Summarizer(SummarizerError::OverLong { .. }))
                if name == "long" => {}
            other => panic!("{name}: expected a Summarizer error, got {other:?}"),
        }
        assert_eq!(original, state());
    }
    let failing = Compactor::builder()
        .budget(TIGHT)
        .summarizer(FnSummarizer::new(|req: SummaryRequest<'_>| {
            Err(SummarizerError::failed(req.field, "model timed out"))
        }))
        .build()
        .unwrap();
    assert!(matches!(
        failing.compact_blocking(&state()),
        Err(CompactionError::Summarizer(SummarizerError::Failed { .. }))
    ));
    // Without a summarizer nothing is summarized: summarize-enabled fields are evicted instead.
    let plain = Compactor::builder().budget(TIGHT).build().unwrap();
    let compacted = plain.compact_blocking(&state()).unwrap();
    assert!(compacted
        .report()
        .fields
        .iter()
        .all(|f| !matches!(f.outcome, FieldOutcome::Summarized { .. })));
    let restored = plain.rehydrate_blocking(&compacted, &files()).unwrap();
    assert_eq!(restored.constraints, state().constraints);
    assert_eq!(restored.config_contents, config());
}

#[test]
fn evict_on_summarizer_error_falls_back_to_eviction_never_to_a_cut() {
    let calls = Arc::new(Mutex::new(0usize));
    let counted = calls.clone();
    let compactor = Compactor::builder()
        .budget(TIGHT)
        .summarizer(FnSummarizer::new(move |req: SummaryRequest<'_>| {
            *counted.lock().unwrap() += 1;
            Err(SummarizerError::failed(req.field, "model timed out"))
        }))
        .evict_on_summarizer_error(true)
        .build()
        .unwrap();
    let original = state();
    let compacted = compactor.compact_blocking(&original).unwrap();
    assert!(*calls.lock().unwrap() > 0, "the summarizer was asked");
    assert!(compacted.tokens() <= TIGHT);
    let report = compacted.report();
    assert_eq!(
        report.outcome("transcript"),
        Some(&FieldOutcome::Tombstoned)
    );
    assert!(report
        .fields
        .iter()
        .all(|f| !matches!(f.outcome, FieldOutcome::Summarized { .. })));
    assert!(compacted
        .render()
        .contains("[EVICTED transcript recover=no]"));
    let restored = compactor.rehydrate_blocking(&compacted, &files()).unwrap();
    assert_eq!(restored.constraints, original.constraints);
    assert_eq!(restored.transcript, String::new());
}
