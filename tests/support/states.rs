//! The state family: every field class, nested, `Vec<nested>` and `Option<nested>`, plus
//! oracles (protected values, derivable pointers) written by hand, independent of the engine.

use super::canonical;
use compaction::{Compactable, EffectLog, FnReacquire, Reacquire, ReacquireError};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// A nested element with a protected id, a protected number and redundant notes.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Leaf {
    #[protected]
    pub id: String,
    #[protected]
    pub qty: u64,
    #[redundant]
    pub notes: Vec<String>,
}

/// A nested element with a pinned field, a derivable summarizable document and a nested leaf.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct Mid {
    #[protected(pin)]
    pub tag: String,
    #[derivable(pointer = "doc://{tag}/x", summarize)]
    pub doc: String,
    #[nested]
    pub leaf: Leaf,
}

/// Every class at the top level, and nested state in each of its three shapes.
#[derive(Compactable, Serialize, Deserialize, Debug, Clone, PartialEq, Default)]
pub struct PropState {
    #[protected(pin)]
    pub constraints: Vec<String>,
    #[protected]
    pub config_path: String,
    #[protected]
    pub plan_step: u32,
    #[protected]
    pub amounts: BTreeMap<String, i64>,
    #[protected]
    pub blocked_on: Option<String>,
    #[derivable(pointer = "file://{config_path}")]
    pub config: String,
    #[derivable(pointer = "ci://runs/{plan_step}?p={config_path}", summarize)]
    pub ci_log: String,
    #[redundant(summarize)]
    pub transcript: String,
    #[redundant]
    pub tool_output: Vec<String>,
    #[effect(idempotent = false)]
    pub migrations: EffectLog,
    #[effect(idempotent = true)]
    pub reads: EffectLog,
    #[nested]
    pub sub: Leaf,
    #[nested]
    pub subs: Vec<Leaf>,
    #[nested]
    pub maybe: Option<Mid>,
}

fn leaf_protected(out: &mut BTreeMap<String, Value>, base: &str, leaf: &Leaf) {
    out.insert(format!("{base}.id"), Value::from(leaf.id.clone()));
    out.insert(format!("{base}.qty"), Value::from(leaf.qty));
}

/// Every protected value by concrete path, as canonical JSON.
pub fn protected_values(s: &PropState) -> BTreeMap<String, String> {
    let mut out: BTreeMap<String, Value> = BTreeMap::new();
    out.insert(
        "constraints".into(),
        serde_json::to_value(&s.constraints).unwrap(),
    );
    out.insert("config_path".into(), Value::from(s.config_path.clone()));
    out.insert("plan_step".into(), Value::from(s.plan_step));
    out.insert("amounts".into(), serde_json::to_value(&s.amounts).unwrap());
    out.insert(
        "blocked_on".into(),
        serde_json::to_value(&s.blocked_on).unwrap(),
    );
    leaf_protected(&mut out, "sub", &s.sub);
    for (i, leaf) in s.subs.iter().enumerate() {
        leaf_protected(&mut out, &format!("subs[{i}]"), leaf);
    }
    if let Some(mid) = &s.maybe {
        out.insert("maybe.tag".into(), Value::from(mid.tag.clone()));
        leaf_protected(&mut out, "maybe.leaf", &mid.leaf);
    }
    out.into_iter().map(|(k, v)| (k, canonical(&v))).collect()
}

/// Pinned protected values by path (they must appear verbatim in every window).
pub fn pinned_values(s: &PropState) -> Vec<(String, String)> {
    let mut out = vec![("constraints".to_owned(), canonical(&s.constraints))];
    if let Some(mid) = &s.maybe {
        out.push(("maybe.tag".into(), canonical(&mid.tag)));
    }
    out
}

/// Derivable fields: path -> (the pointer its template must produce, its value).
pub fn derivable_values(s: &PropState) -> BTreeMap<String, (String, Value)> {
    let mut out = BTreeMap::new();
    out.insert(
        "config".to_owned(),
        (
            format!("file://{}", s.config_path),
            Value::from(s.config.clone()),
        ),
    );
    out.insert(
        "ci_log".to_owned(),
        (
            format!("ci://runs/{}?p={}", s.plan_step, s.config_path),
            Value::from(s.ci_log.clone()),
        ),
    );
    if let Some(mid) = &s.maybe {
        out.insert(
            "maybe.doc".to_owned(),
            (format!("doc://{}/x", mid.tag), Value::from(mid.doc.clone())),
        );
    }
    out
}

/// A `Reacquire` that knows the original values and refuses any pointer other than the one the
/// field's template must have produced from the protected values.
pub fn oracle_reacquirer(s: &PropState) -> impl Reacquire {
    let table = derivable_values(s);
    FnReacquire::new(
        move |field: &str, pointer: &str| -> Result<Value, ReacquireError> {
            match table.get(field) {
                Some((expected, value)) if expected == pointer => Ok(value.clone()),
                Some((expected, _)) => {
                    Err(format!("`{field}`: pointer {pointer:?}, expected {expected:?}").into())
                }
                None => Err(format!("`{field}` is not a derivable field").into()),
            }
        },
    )
}
