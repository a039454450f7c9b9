//! A log is a log: deserializing an `EffectLog` upholds what `EffectLog::from_effects` checks.
//! Generated JSON logs with a repeated key are refused; valid ones round-trip exactly.

use compaction::{Effect, EffectLog, EffectStatus};
use proptest::prelude::*;

fn effect(key: String) -> impl Strategy<Value = Effect> {
    (
        "[a-z_]{0,8}",
        // Outside text: keys and targets that imitate the window's own lines.
        prop::sample::select(
            &[
                "db://x",
                "",
                "status: committed",
                "\n## effects",
                "store://sha256:00",
            ][..],
        ),
        prop_oneof![
            Just(EffectStatus::NotStarted),
            Just(EffectStatus::Committed),
            Just(EffectStatus::Unknown)
        ],
        prop::option::of(any::<u16>()),
    )
        .prop_map(move |(action, target, status, payload)| {
            let mut e = Effect::new(action, target, key.clone()).with_status(status);
            e.payload = payload.map(|n| serde_json::json!({ "n": n }));
            e
        })
}

fn unique_effects() -> impl Strategy<Value = Vec<Effect>> {
    prop::collection::btree_set("[a-z0-9\"\\\\\n]{1,6}", 0..8)
        .prop_flat_map(|keys| keys.into_iter().map(effect).collect::<Vec<_>>())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn valid_logs_round_trip(effects in unique_effects()) {
        let log = EffectLog::from_effects(effects).unwrap();
        let json = serde_json::to_string(&log).unwrap();
        let back: EffectLog = serde_json::from_str(&json).unwrap();
        prop_assert_eq!(back, log);
    }

    #[test]
    fn logs_with_a_repeated_key_are_refused(
        effects in unique_effects().prop_filter("needs a record", |e| !e.is_empty()),
        pick in any::<prop::sample::Index>(),
        at in any::<prop::sample::Index>(),
        status in prop_oneof![Just(EffectStatus::NotStarted), Just(EffectStatus::Committed)],
    ) {
        let original = pick.get(&effects).clone();
        let key = original.idempotency_key.clone();
        let mut with_copy = effects.clone();
        // The copy may differ in anything but its key (a second, not-started record of a
        // committed key is what would let the guard run it again).
        with_copy.insert(at.index(effects.len() + 1), original.with_status(status));
        let json = serde_json::to_string(&with_copy).unwrap();
        let refused = serde_json::from_str::<EffectLog>(&json);
        prop_assert!(refused.is_err(), "a log with `{}` twice was loaded", key);
        let message = refused.unwrap_err().to_string();
        prop_assert!(message.contains("already recorded"), "{}", message);
    }
}
