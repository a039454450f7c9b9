//! Everything under "Must work" in the derive's contract, as tests that run: `#[cfg]`-gated
//! fields, the `#[compaction(crate = "...")]` override, derives inside a function body, two
//! derives in one module, bounds only where needed, and `#[derive(Summarizable)]` on plain
//! structs and enums used in `summarize` fields. (The compile-only twins live in `tests/ui/pass`.)

use compaction::{Compactable, Compactor, EffectLog, FieldClass, NoReacquire, Summarizable};
use serde::{Deserialize, Serialize};

fn round_trip<S: Compactable + PartialEq + std::fmt::Debug + Sync>(state: &S) -> S {
    let compactor = Compactor::builder().budget(1_000_000).build().unwrap();
    let compacted = compactor.compact_blocking(state).unwrap();
    compactor
        .rehydrate_blocking(&compacted, &NoReacquire)
        .unwrap()
}

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
struct Gated {
    #[protected]
    goal: String,
    #[cfg(any())]
    #[protected]
    compiled_out: DoesNotExist,
    #[cfg(any())]
    unclassified_but_compiled_out: String,
    // `all()` with no predicate is always true: the point of the case.
    #[allow(clippy::non_minimal_cfg)]
    #[cfg(all())]
    #[redundant]
    compiled_in: Vec<String>,
    #[cfg(not(any()))]
    #[nested]
    inner: Option<Inner>,
}

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
struct Inner {
    #[protected]
    id: u32,
}

#[test]
fn cfg_gated_fields_follow_the_compiler() {
    let paths: Vec<&str> = Gated::schema()
        .fields()
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(paths, ["goal", "compiled_in", "inner.id"]);
    let state = Gated {
        goal: "g".into(),
        compiled_in: vec!["x".into()],
        inner: Some(Inner { id: 3 }),
    };
    assert_eq!(round_trip(&state), state);
}

mod renamed {
    // Only the renamed crate is named here; the derive must use the override for every path.
    use serde::{Deserialize, Serialize};

    #[derive(agent_compaction::Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
    #[compaction(crate = "agent_compaction")]
    pub struct State {
        #[protected]
        pub goal: String,
        #[redundant(summarize)]
        pub notes: Vec<Note>,
        #[effect(idempotent = true)]
        pub log: agent_compaction::EffectLog,
        #[nested]
        pub inner: Vec<Inner>,
    }

    #[derive(agent_compaction::Summarizable, Serialize, Deserialize, Debug, PartialEq, Default)]
    #[compaction(crate = "agent_compaction")]
    pub struct Note {
        pub text: String,
    }

    #[derive(agent_compaction::Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
    #[compaction(crate = "::agent_compaction")]
    pub struct Inner {
        #[protected]
        pub id: u32,
    }
}

#[test]
fn crate_override_for_a_renamed_dependency() {
    let schema = renamed::State::schema();
    assert_eq!(schema.type_name(), "State");
    assert_eq!(
        schema.field("log").unwrap().class,
        FieldClass::Effect { idempotent: true }
    );
    assert!(schema.field("inner[].id").unwrap().conditional);
    let state = renamed::State {
        goal: "g".into(),
        notes: vec![renamed::Note { text: "n".into() }],
        log: EffectLog::new(),
        inner: vec![renamed::Inner { id: 1 }, renamed::Inner { id: 2 }],
    };
    assert_eq!(round_trip(&state), state);
}

#[test]
fn derives_inside_function_bodies() {
    #[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
    struct Local {
        #[protected]
        goal: String,
        #[redundant]
        scratch: Vec<String>,
    }

    fn shadowing() -> &'static compaction::Schema {
        #[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
        struct Local {
            #[protected(pin)]
            pinned: u8,
        }
        Local::schema()
    }

    assert_eq!(Local::schema().fields().len(), 2);
    assert_eq!(
        shadowing().field("pinned").unwrap().class,
        FieldClass::Protected { pin: true }
    );
    let state = Local {
        goal: "g".into(),
        scratch: vec!["s".into()],
    };
    assert_eq!(round_trip(&state), state);
}

// Two derives in one module, one nested in the other: nothing they generate collides.
#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
struct First {
    #[protected]
    goal: String,
    #[effect(idempotent = false)]
    log: EffectLog,
}

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
struct Second {
    #[protected]
    goal: String,
    #[nested]
    first: First,
}

#[test]
fn two_derives_in_one_module() {
    assert_eq!(First::schema().type_name(), "First");
    assert_eq!(Second::schema().type_name(), "Second");
    assert_eq!(
        Second::schema().field("first.log").unwrap().class,
        FieldClass::Effect { idempotent: false }
    );
    let state = Second {
        goal: "b".into(),
        first: First {
            goal: "a".into(),
            log: EffectLog::new(),
        },
    };
    assert_eq!(round_trip(&state), state);
}

/// Implements nothing at all: a parameter no field mentions needs no bound.
#[derive(Debug, PartialEq)]
struct NotData;

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
struct Bounded<T, P: 'static> {
    #[protected]
    id: T,
    #[redundant]
    #[serde(skip)]
    marker: std::marker::PhantomData<fn() -> P>,
}

#[test]
fn generic_bounds_only_where_needed() {
    let state = Bounded::<u32, NotData> {
        id: 7,
        marker: std::marker::PhantomData,
    };
    assert_eq!(round_trip(&state), state);
    assert_eq!(Bounded::<u32, NotData>::schema().fields().len(), 2);
}

#[derive(Summarizable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct ToolCall {
    tool: String,
    exit: Option<i32>,
}

#[derive(Summarizable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
enum Verdict {
    #[default]
    Pending,
    Passed {
        tests: u32,
    },
    Failed(String),
}

#[derive(Summarizable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Batch<T> {
    items: Vec<T>,
}

/// Compactable, but with no protected, effect or nested field: it may be evicted whole.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Scratch {
    #[redundant]
    lines: Vec<String>,
}

#[derive(Compactable, Serialize, Deserialize, Debug, PartialEq, Default)]
struct Run {
    #[protected]
    run: u32,
    #[redundant(summarize)]
    calls: Vec<ToolCall>,
    #[derivable(pointer = "https://ci.example/runs/{run}", summarize)]
    verdict: Verdict,
    #[redundant(summarize)]
    batch: Batch<String>,
    #[redundant]
    scratch: Scratch,
}

#[test]
fn summarizable_structs_and_enums_in_summarize_fields() {
    assert_eq!(
        ToolCall {
            tool: "ls".into(),
            exit: Some(0)
        }
        .summary_source(),
        r#"{"tool":"ls","exit":0}"#
    );
    assert_eq!(
        Verdict::Passed { tests: 3 }.summary_source(),
        r#"{"Passed":{"tests":3}}"#
    );
    assert_eq!(Verdict::Pending.summary_source(), r#""Pending""#);
    assert_eq!(
        Batch {
            items: vec!["a".to_string()]
        }
        .summary_source(),
        r#"{"items":["a"]}"#
    );
    let schema = Run::schema();
    assert!(schema.field("verdict").unwrap().class.may_summarize());
    assert!(!schema.field("scratch").unwrap().class.may_summarize());
    let state = Run {
        run: 9,
        calls: vec![ToolCall {
            tool: "cargo test".into(),
            exit: Some(1),
        }],
        verdict: Verdict::Failed("2 failed".into()),
        batch: Batch {
            items: vec!["x".into()],
        },
        scratch: Scratch {
            lines: vec!["tmp".into()],
        },
    };
    assert_eq!(round_trip(&state), state);
}
