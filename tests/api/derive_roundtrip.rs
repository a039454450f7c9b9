//! What `#[derive(Compactable)]` generates, checked at run time: the schema (paths, classes,
//! types, `conditional` flags) and the round trip (split into parts, then rebuild, equals the
//! original), for generic, nested, `Option<nested>`, `Vec<nested>` and `Box<nested>` structs,
//! raw identifiers and serde-renamed fields.

use compaction::{
    Compactable, Compactor, Effect, EffectLog, EffectRecords, FieldClass, NoReacquire, Part, Parts,
    Segment, Shape, Summarizable, Visitor,
};

/// How the visitor receives a derivable field's pointer builder.
type PointerFn<'p> = &'p (dyn Fn(&mut String) + 'p);
use serde::{Deserialize, Serialize};

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Subtask {
    #[protected]
    title: String,
    #[protected]
    blocked_on: Option<String>,
    #[redundant]
    notes: Vec<String>,
}

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Plan {
    #[protected(pin)]
    constraints: Vec<String>,
    #[protected]
    config_path: String,
    #[derivable(pointer = "file://{config_path}")]
    config_contents: String,
    #[nested]
    subtask: Subtask,
    #[nested]
    next: Option<Subtask>,
    #[nested]
    subtasks: Vec<Subtask>,
    #[nested]
    boxed: Box<Subtask>,
    #[effect(idempotent = false)]
    migrations: EffectLog,
}

#[derive(Summarizable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Note {
    text: String,
}

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Generic<K, N> {
    #[protected]
    key: K,
    #[redundant(summarize)]
    notes: Vec<Note>,
    #[redundant]
    history: Vec<K>,
    #[nested]
    inner: Vec<N>,
}

/// Every class whose trait the derive must find through a type parameter.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Params<L, S, D> {
    #[protected]
    id: u32,
    #[effect(idempotent = true)]
    log: L,
    #[redundant(summarize)]
    notes: S,
    #[derivable(pointer = "x://{id}", summarize)]
    body: S,
    #[redundant]
    scratch: D,
}

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
struct Keywords {
    #[protected]
    r#type: String,
    #[protected]
    r#match: u32,
    #[derivable(pointer = "kind://{type}/{match}", summarize)]
    r#ref: String,
}

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
struct Renamed {
    #[protected]
    #[serde(rename = "PATH")]
    config_path: String,
    #[serde(rename = "body")]
    #[derivable(pointer = "file://{config_path}")]
    config_contents: String,
    #[redundant]
    tool_output: Vec<String>,
}

fn subtask(title: &str, blocked_on: Option<&str>) -> Subtask {
    Subtask {
        title: title.into(),
        blocked_on: blocked_on.map(Into::into),
        notes: vec![format!("notes on {title}")],
    }
}

fn plan() -> Plan {
    let mut migrations = EffectLog::new();
    migrations
        .record(Effect::new("apply_migration", "db://app/users", "mig-1"))
        .unwrap();
    migrations.begin("mig-1").unwrap();
    migrations.commit("mig-1").unwrap();
    Plan {
        constraints: vec!["never touch /etc/prod".into()],
        config_path: "/srv/app.toml".into(),
        config_contents: "[db]\nurl = \"postgres://db\"\n".into(),
        subtask: subtask("rotate keys", Some("human approval")),
        next: Some(subtask("deploy", None)),
        subtasks: vec![subtask("a", None), subtask("b", Some("a"))],
        boxed: Box::new(subtask("boxed", None)),
        migrations,
    }
}

/// Compact with an ample budget, then rehydrate: the state must come back equal.
fn round_trip<S: Compactable + PartialEq + std::fmt::Debug + Sync>(state: &S) -> S {
    let compactor = Compactor::builder().budget(1_000_000).build().unwrap();
    let compacted = compactor.compact_blocking(state).unwrap();
    assert!(
        compacted.report().nothing_evicted(),
        "{}",
        compacted.report()
    );
    compactor
        .rehydrate_blocking(&compacted, &NoReacquire)
        .unwrap()
}

/// A visitor that keeps every part, the way the engine does before it evicts anything.
#[derive(Default)]
struct Collect {
    parts: Parts,
    path: String,
    marks: Vec<usize>,
    visited: Vec<String>,
}

impl Collect {
    fn child(&self, name: &str) -> String {
        if self.path.is_empty() {
            name.to_owned()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    fn json<T: Serialize>(&mut self, kind: &str, name: &str, value: &T) {
        let path = self.child(name);
        self.visited.push(format!("{kind} {path}"));
        let json = serde_json::to_string(value).unwrap();
        self.parts.insert(path, Part::Json(json));
    }
}

impl<'a> Visitor<'a> for Collect {
    fn protected<T: Serialize>(&mut self, name: &'static str, pin: bool, value: &'a T) {
        self.json(if pin { "pinned" } else { "protected" }, name, value);
    }
    fn derivable<T: Serialize>(
        &mut self,
        name: &'static str,
        pointer: PointerFn<'_>,
        value: &'a T,
    ) {
        let mut out = String::new();
        pointer(&mut out);
        self.json(&format!("derivable({out})"), name, value);
    }
    fn derivable_summarizable<T: Summarizable>(
        &mut self,
        name: &'static str,
        pointer: PointerFn<'_>,
        value: &'a T,
    ) {
        let mut out = String::new();
        pointer(&mut out);
        self.json(&format!("derivable+summary({out})"), name, value);
    }
    fn redundant<T: Serialize>(&mut self, name: &'static str, value: &'a T) {
        self.json("redundant", name, value);
    }
    fn redundant_summarizable<T: Summarizable>(&mut self, name: &'static str, value: &'a T) {
        self.json("redundant+summary", name, value);
    }
    fn effect<E: EffectRecords>(&mut self, name: &'static str, idempotent: bool, value: &'a E) {
        let path = self.child(name);
        self.visited.push(format!("effect({idempotent}) {path}"));
        self.parts
            .insert(path, Part::Effects(value.effect_log().clone()));
    }
    fn enter(&mut self, segment: Segment) {
        self.marks.push(self.path.len());
        match segment {
            Segment::Field(name) => self.path = self.child(name),
            Segment::Index(i) => self.path.push_str(&format!("[{i}]")),
        }
    }
    fn leave(&mut self) {
        let len = self.marks.pop().expect("leave without enter");
        self.path.truncate(len);
    }
    fn shape(&mut self, name: &'static str, shape: Shape) {
        let path = self.child(name);
        self.visited.push(format!("shape {path} {shape:?}"));
        self.parts.insert_shape(&path, shape);
    }
}

fn split<S: Compactable>(state: &S) -> Collect {
    let mut collect = Collect::default();
    state.visit(&mut collect);
    assert!(
        collect.marks.is_empty(),
        "every enter is matched by a leave"
    );
    collect
}

/// Split into parts, then rebuild: equal to the original, with no part left unused.
fn parts_round_trip<S: Compactable + PartialEq + std::fmt::Debug>(state: &S) {
    let mut collect = split(state);
    let rebuilt = S::rebuild(&mut collect.parts).unwrap();
    assert_eq!(&rebuilt, state);
}

#[test]
fn nested_schema_has_dotted_paths_and_conditional_flags() {
    let schema = Plan::schema();
    assert_eq!(schema.type_name(), "Plan");
    let paths: Vec<(&str, bool)> = schema
        .fields()
        .iter()
        .map(|f| (f.path.as_str(), f.conditional))
        .collect();
    assert_eq!(
        paths,
        [
            ("constraints", false),
            ("config_path", false),
            ("config_contents", false),
            ("subtask.title", false),
            ("subtask.blocked_on", false),
            ("subtask.notes", false),
            ("next.title", true),
            ("next.blocked_on", true),
            ("next.notes", true),
            ("subtasks[].title", true),
            ("subtasks[].blocked_on", true),
            ("subtasks[].notes", true),
            ("boxed.title", false),
            ("boxed.blocked_on", false),
            ("boxed.notes", false),
            ("migrations", false),
        ]
    );
    let blocked = schema.field("subtask.blocked_on").unwrap();
    assert_eq!(blocked.class, FieldClass::Protected { pin: false });
    assert_eq!(blocked.rust_type, "Option<String>");
    assert_eq!(
        schema.field("constraints").unwrap().class,
        FieldClass::Protected { pin: true }
    );
    assert_eq!(
        schema.field("config_contents").unwrap().class,
        FieldClass::Derivable {
            pointer_template: "file://{config_path}",
            summarize: false
        }
    );
    assert_eq!(
        schema.field("subtasks[].notes").unwrap().class,
        FieldClass::Redundant { summarize: false }
    );
    assert_eq!(
        schema.field("migrations").unwrap().class,
        FieldClass::Effect { idempotent: false }
    );
    assert!(
        schema.field("subtask").is_none(),
        "a nested field is not a leaf"
    );
    assert!(std::ptr::eq(schema, Plan::schema()), "built once");
}

#[test]
fn generic_schema_is_per_instantiation() {
    let a = Generic::<u32, Subtask>::schema();
    let b = Generic::<String, Subtask>::schema();
    assert_eq!(a.field("key").unwrap().rust_type, "K");
    assert_eq!(
        a.field("notes").unwrap().class,
        FieldClass::Redundant { summarize: true }
    );
    assert!(a.field("inner[].blocked_on").unwrap().conditional);
    assert_eq!(a.fields().len(), 6);
    assert!(std::ptr::eq(a, Generic::<u32, Subtask>::schema()));
    assert!(!std::ptr::eq(a, b), "one schema per instantiation");
}

#[test]
fn raw_identifiers_and_serde_renames_use_the_rust_names() {
    let schema = Keywords::schema();
    let names: Vec<&str> = schema.fields().iter().map(|f| f.path.as_str()).collect();
    assert_eq!(names, ["type", "match", "ref"]);
    assert_eq!(
        schema.field("ref").unwrap().class,
        FieldClass::Derivable {
            pointer_template: "kind://{type}/{match}",
            summarize: true
        }
    );
    let names: Vec<&str> = Renamed::schema()
        .fields()
        .iter()
        .map(|f| f.path.as_str())
        .collect();
    assert_eq!(names, ["config_path", "config_contents", "tool_output"]);
}

#[test]
fn visit_hands_every_field_by_class_and_fills_pointers() {
    let state = Keywords {
        r#type: "migration".into(),
        r#match: 7,
        r#ref: "body".into(),
    };
    assert_eq!(
        split(&state).visited,
        [
            "protected type",
            "protected match",
            "derivable+summary(kind://migration/7) ref",
        ]
    );
    let visited = split(&plan()).visited;
    assert!(visited.contains(&"pinned constraints".to_string()));
    assert!(visited.contains(&"derivable(file:///srv/app.toml) config_contents".to_string()));
    assert!(visited.contains(&"protected subtask.blocked_on".to_string()));
    assert!(visited.contains(&"shape next Present".to_string()));
    assert!(visited.contains(&"protected next.title".to_string()));
    assert!(visited.contains(&"shape subtasks Len(2)".to_string()));
    assert!(visited.contains(&"protected subtasks[1].blocked_on".to_string()));
    assert!(visited.contains(&"redundant boxed.notes".to_string()));
    assert!(visited.contains(&"effect(false) migrations".to_string()));
}

#[test]
fn parts_round_trip_nested_option_vec_and_box() {
    parts_round_trip(&plan());
    parts_round_trip(&Plan {
        next: None,
        subtasks: Vec::new(),
        ..plan()
    });
    parts_round_trip(&Plan::default());
}

#[test]
fn parts_round_trip_generic_raw_and_renamed() {
    parts_round_trip(&Generic {
        key: 42u64,
        notes: vec![Note { text: "n".into() }],
        history: vec![1, 2, 3],
        inner: vec![subtask("x", Some("y"))],
    });
    parts_round_trip(&Keywords {
        r#type: "t".into(),
        r#match: 1,
        r#ref: "r".into(),
    });
    parts_round_trip(&Renamed {
        config_path: "/a".into(),
        config_contents: "b".into(),
        tool_output: vec!["c".into()],
    });
}

#[test]
fn rebuild_from_missing_or_mistyped_parts_is_a_typed_error() {
    let err = Plan::rebuild(&mut Parts::new()).unwrap_err();
    assert_eq!(err.path, "constraints");

    let mut collect = split(&plan());
    collect
        .parts
        .insert("subtasks[1].title", Part::Json("17".into()));
    let err = Plan::rebuild(&mut collect.parts).unwrap_err();
    assert_eq!(err.path, "subtasks[1].title");

    let mut collect = split(&plan());
    collect.parts.insert("migrations", Part::Json("[]".into()));
    let err = Plan::rebuild(&mut collect.parts).unwrap_err();
    assert_eq!(err.path, "migrations");
}

#[test]
fn compact_then_rehydrate_nested_option_vec_and_box() {
    let state = plan();
    assert_eq!(round_trip(&state), state);
    let sparse = Plan {
        next: None,
        subtasks: Vec::new(),
        ..plan()
    };
    assert_eq!(round_trip(&sparse), sparse);
}

#[test]
fn compact_then_rehydrate_generic() {
    let state = Generic {
        key: "k".to_string(),
        notes: vec![Note {
            text: "summarizable".into(),
        }],
        history: vec!["h1".to_string()],
        inner: vec![subtask("one", None), subtask("two", Some("one"))],
    };
    assert_eq!(round_trip(&state), state);
}

#[test]
fn compact_then_rehydrate_raw_identifiers_and_renames() {
    let keywords = Keywords {
        r#type: "migration".into(),
        r#match: 3,
        r#ref: "contents".into(),
    };
    assert_eq!(round_trip(&keywords), keywords);
    let renamed = Renamed {
        config_path: "/srv/x".into(),
        config_contents: "x = 1".into(),
        tool_output: vec!["ls".into()],
    };
    assert_eq!(round_trip(&renamed), renamed);
}

fn params() -> Params<EffectLog, Vec<String>, Option<u8>> {
    let mut log = EffectLog::new();
    log.record(Effect::new("send_mail", "mail://ops", "k1"))
        .unwrap();
    Params {
        id: 1,
        log,
        notes: vec!["note".into()],
        body: vec!["body".into()],
        scratch: Some(3),
    }
}

#[test]
fn type_parameters_reach_the_real_traversal() {
    let state = params();
    assert_eq!(
        split(&state).visited,
        [
            "protected id",
            "effect(true) log",
            "redundant+summary notes",
            "derivable+summary(x://1) body",
            "redundant scratch",
        ]
    );
    parts_round_trip(&state);
    assert_eq!(round_trip(&state), state);
}
