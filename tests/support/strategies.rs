//! Proptest strategies for the state family: lookalike identifiers, unicode, render-breaking
//! text, empty and huge values, effect logs with lookalike keys, every status and ordering
//! edges.

use super::states::{Leaf, Mid, PropState};
use compaction::{Effect, EffectLog, EffectStatus};
use proptest::prelude::*;

/// Identifiers that look alike: the drift a paraphrasing summarizer causes.
pub const LOOKALIKES: &[&str] = &[
    "mig-0001",
    "mig-O001",
    "mig-00O1",
    "mig-l001",
    "MIG-0001",
    "mig–0001",
    "req-7f3a",
    "req-7f3а",
    "/etc/prod",
    "/etc/prod/",
    "/etc/pr0d",
    "numpy<2.0",
    "numpy<2",
    "numpy<=2.0",
    "118000",
    "118,000",
    "about 120k",
    "do not",
    "do  not",
    "not yet",
    "",
];

/// Text that stresses rendering and escaping: quotes, escapes, braces, control characters,
/// pointer lookalikes and render markers.
pub const NASTY: &[&str] = &[
    "\"quoted\" \\ back\\slash",
    "line\nbreak\r\n\ttab",
    "{{not a template}} {x}",
    "store://sha256:0000000000000000000000000000000000000000000000000000000000000000",
    "[SPILLED verbatim -> store://sha256:deadbeef]",
    "<<< END COMPACTED STATE >>>",
    "## protected (verbatim)",
    "\u{0}\u{1}\u{7f}",
    "\u{202e}rtl\u{200b}zero-width",
    "é́ combining",
    "日本語のテキスト",
    "🦀🔥👩‍👩‍👧",
];

pub fn text() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z0-9 ._/-]{0,24}",
        2 => prop::sample::select(LOOKALIKES).prop_map(str::to_owned),
        2 => prop::sample::select(NASTY).prop_map(str::to_owned),
        1 => "\\PC{0,16}",
        1 => Just(String::new()),
        // Huge: 2 KB to 24 KB.
        1 => (prop::sample::select(&["log line ok\n", "é🦀", "x", "{\"k\":1}"][..]), 200usize..2000)
            .prop_map(|(unit, n)| unit.repeat(n)),
    ]
}

pub fn short_text() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9/._-]{0,12}",
        2 => prop::sample::select(LOOKALIKES).prop_map(str::to_owned),
        1 => prop::sample::select(NASTY).prop_map(str::to_owned),
    ]
}

pub fn leaf() -> impl Strategy<Value = Leaf> {
    (
        short_text(),
        any::<u64>(),
        prop::collection::vec(text(), 0..3),
    )
        .prop_map(|(id, qty, notes)| Leaf { id, qty, notes })
}

pub fn mid() -> impl Strategy<Value = Mid> {
    (short_text(), text(), leaf()).prop_map(|(tag, doc, leaf)| Mid { tag, doc, leaf })
}

pub fn status() -> impl Strategy<Value = EffectStatus> {
    prop_oneof![
        1 => Just(EffectStatus::NotStarted),
        3 => Just(EffectStatus::Committed),
        1 => Just(EffectStatus::Unknown),
    ]
}

/// A log of up to `max` effects with unique (lookalike) keys, random statuses, ordering edges
/// to earlier effects and optional payloads.
pub fn effect_log(max: usize) -> impl Strategy<Value = EffectLog> {
    prop::collection::vec(
        (
            short_text(),
            short_text(),
            prop::sample::select(LOOKALIKES),
            status(),
            prop::collection::vec(any::<prop::sample::Index>(), 0..3),
            prop::option::of(text()),
        ),
        0..max,
    )
    .prop_map(|specs| {
        let mut log = EffectLog::new();
        let mut keys: Vec<String> = Vec::new();
        for (i, (action, target, key, status, deps, payload)) in specs.into_iter().enumerate() {
            let key = format!("{key}#{i}");
            let mut e = Effect::new(action, target, key.clone()).with_status(status);
            if !keys.is_empty() {
                for d in deps {
                    e = e.depends_on(d.get(&keys).clone());
                }
            }
            if let Some(p) = payload {
                e = e.with_payload(serde_json::json!({ "out": p }));
            }
            log.record(e).expect("unique keys");
            keys.push(key);
        }
        log
    })
}

prop_compose! {
    pub fn state()(
        constraints in prop::collection::vec(short_text(), 0..4),
        config_path in short_text(),
        plan_step in any::<u32>(),
        amounts in prop::collection::btree_map(short_text(), any::<i64>(), 0..6),
        blocked_on in prop::option::of(text()),
        config in text(),
        ci_log in text(),
        transcript in text(),
        tool_output in prop::collection::vec(text(), 0..4),
        migrations in effect_log(10),
        reads in effect_log(3),
        sub in leaf(),
        subs in prop::collection::vec(leaf(), 0..3),
        maybe in prop::option::of(mid()),
    ) -> PropState {
        PropState {
            constraints, config_path, plan_step, amounts, blocked_on, config, ci_log, transcript,
            tool_output, migrations, reads, sub, subs, maybe,
        }
    }
}
