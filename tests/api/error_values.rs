//! What an error's message (`Display`, what `{}` and tracing's `%error` print) may carry. It
//! names what an operator acts on: field paths, effect keys and scopes, agent ids, store
//! addresses (docs/errors-async-logging.md, "Logging"). It never carries a protected value,
//! and so never a derivable pointer, which is built from protected values
//! (`file://{config_path}`): that stays in the error's `pointer` field for the code that needs it.

use crate::common;

use common::MigrationState;
use compaction::{
    CompactionError, Compactor, Effect, EffectLog, FnReacquire, MemoryLedger, NoReacquire,
    RehydrateOptions, Tokenizer,
};

/// A protected value no message may repeat.
const SECRET_PATH: &str = "/srv/tenants/cus_Qz9931x/secret.toml";

/// Every message of `error` and its sources, joined.
fn messages(error: &(dyn std::error::Error + 'static)) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(inner) = source {
        text.push_str(" | ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}

/// A state whose derivable `config_contents` is evicted behind `file://<SECRET_PATH>`.
fn evicting() -> (Compactor, compaction::Compacted<MigrationState>) {
    let state = MigrationState {
        plan_step: 3,
        config_path: SECRET_PATH.into(),
        config_contents: "x = 1\n".repeat(2_000),
        ..Default::default()
    };
    let compactor = Compactor::builder()
        .budget(300)
        .token_counter(Tokenizer::O200kBase)
        .build()
        .unwrap();
    let compacted = compactor.compact_blocking(&state).unwrap();
    assert!(
        compacted.render().contains(SECRET_PATH),
        "the pointer is in the window, for the model"
    );
    (compactor, compacted)
}

#[test]
fn a_failed_reacquire_names_the_field_not_the_pointer() {
    let (compactor, compacted) = evicting();
    let pointer = format!("file://{SECRET_PATH}");

    // Our own `NoReacquire`, and an author's error that says nothing of the pointer.
    let by_author = FnReacquire::new(|_: &str, _: &str| Err("permission denied".into()));
    for error in [
        compactor
            .rehydrate_blocking(&compacted, &NoReacquire)
            .unwrap_err(),
        compactor
            .rehydrate_blocking(&compacted, &by_author)
            .unwrap_err(),
    ] {
        let CompactionError::Reacquire {
            field,
            pointer: carried,
            ..
        } = &error
        else {
            panic!("expected Reacquire, got {error:?}");
        };
        assert_eq!(field, "config_contents");
        assert_eq!(
            carried, &pointer,
            "the code that acts on it gets the pointer"
        );
        let shown = messages(&error);
        assert!(shown.contains("config_contents"), "{shown}");
        assert!(
            !shown.contains("Qz9931x"),
            "a protected value in a message: {shown}"
        );
    }

    // Opted in to defaults: the reason is the error's message, the pointer its own field.
    let options = RehydrateOptions::default().default_unreacquirable(true);
    let rehydrated = compactor
        .rehydrate_with_blocking(&compacted, &NoReacquire, options)
        .unwrap();
    let defaulted = &rehydrated.defaulted[0];
    assert_eq!(defaulted.pointer, pointer);
    assert!(
        !defaulted.reason.contains("Qz9931x"),
        "{}",
        defaulted.reason
    );
}

/// Effect keys are what an operator reconciles: the messages name them (documented next to the
/// logging promise), and the error's kind is there for logs that must not.
#[test]
fn effect_refusals_name_their_key_for_the_operator() {
    let mut agent = MigrationState::default();
    agent
        .migrations
        .record(Effect::new("apply_migration", "db://users", "mig-0042"))
        .unwrap();
    let compactor = Compactor::builder().budget(4_000).build().unwrap();
    let error = compactor
        .compact_with_ledger_blocking(&agent, &MemoryLedger::new())
        .unwrap_err();
    assert!(matches!(error, CompactionError::EffectNotInLedger { .. }));
    assert!(error.to_string().contains("mig-0042"), "{error}");
    assert_eq!(error.kind(), "effect_not_in_ledger");
    assert!(!error.kind().contains("mig"));

    let mut log = EffectLog::new();
    log.record(Effect::new("apply_migration", "db://users", "mig-0043"))
        .unwrap();
    log.begin("mig-0043").unwrap();
    let error = log.begin("mig-0043").unwrap_err();
    assert!(error.to_string().contains("mig-0043"), "{error}");
}
