//! Collect: the visitor that receives a state's fields by class and checks every call against
//! the schema. Protected values are put in canonical form here; the rest stays borrowed.

use crate::compactable::{child_path, push_segment, PointerFn, Segment, Shape, Visitor};
use crate::{
    CompactionError, ContentHash, EffectLog, EffectRecords, FieldClass, Schema, Summarizable,
};
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io;

/// A serializable value behind a trait object (serde's `Serialize` is not object safe).
pub(crate) trait JsonValue {
    fn write_json(&self, out: &mut dyn io::Write) -> serde_json::Result<()>;
    /// Whether the compact JSON is certainly longer than `cap` bytes (a lower-bound walk: no
    /// writing, no escaping, stops at the cap).
    fn json_exceeds(&self, cap: usize) -> bool;
}

impl<T: Serialize> JsonValue for T {
    fn write_json(&self, out: &mut dyn io::Write) -> serde_json::Result<()> {
        serde_json::to_writer(out, self)
    }
    fn json_exceeds(&self, cap: usize) -> bool {
        crate::json_len::exceeds(self, cap)
    }
}

/// A summarizable value behind a trait object. Only `Summarizable` types can become one, and
/// only the `*_summarizable` visitor methods create one.
pub(crate) trait SummaryText {
    fn summary_text(&self) -> Cow<'_, str>;
}

impl<T: Summarizable> SummaryText for T {
    fn summary_text(&self) -> Cow<'_, str> {
        self.summary_source()
    }
}

/// A field as the traversal handed it over: protected values already in canonical form, the
/// rest still borrowed.
pub(crate) enum Collected<'a> {
    Protected {
        pin: bool,
        json: String,
        fingerprint: ContentHash,
    },
    Value {
        value: &'a dyn JsonValue,
        pointer: Option<String>,
        summary: Option<&'a dyn SummaryText>,
    },
    Effects {
        idempotent: bool,
        log: &'a EffectLog,
    },
}

pub(crate) struct CollectedField<'a> {
    pub path: String,
    pub class: FieldClass,
    pub value: Collected<'a>,
}

/// The visitor the engine hands to `Compactable::visit`. It checks every call against the
/// schema, so a hand-written traversal cannot route a protected value anywhere it should not go.
pub(crate) struct Collector<'a> {
    schema: &'static Schema,
    path: String,
    marks: Vec<usize>,
    pub fields: Vec<CollectedField<'a>>,
    pub shapes: Vec<(String, Shape)>,
    pub error: Option<CompactionError>,
    visited: HashSet<String>,
    /// Records that replace `#[effect]` fields' own, by concrete path (the ledger's, from
    /// `Compactor::compact_with_ledger`).
    effect_views: Option<&'a HashMap<String, EffectLog>>,
}

/// What a visitor call claims about a field.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Claim {
    Protected { pin: bool },
    Derivable { summarize: bool },
    Redundant { summarize: bool },
    Effect { idempotent: bool },
}

impl<'a> Collector<'a> {
    pub fn new(schema: &'static Schema) -> Self {
        Collector {
            schema,
            path: String::new(),
            marks: Vec::new(),
            fields: Vec::new(),
            shapes: Vec::new(),
            error: None,
            visited: HashSet::new(),
            effect_views: None,
        }
    }

    /// Collects the `#[effect]` fields at these concrete paths with these records instead of
    /// the state's own.
    pub fn with_effect_views(mut self, views: Option<&'a HashMap<String, EffectLog>>) -> Self {
        self.effect_views = views;
        self
    }

    fn fail(&mut self, error: CompactionError) {
        if self.error.is_none() {
            self.error = Some(error);
        }
    }

    /// Checks a visitor call against the schema and returns the field's path and class.
    fn admit(&mut self, name: &str, claim: Claim) -> Option<(String, FieldClass)> {
        let path = child_path(&self.path, name);
        let declared = self.schema.field_for_instance(&path).map(|f| f.class);
        let summarizing = matches!(
            claim,
            Claim::Derivable { summarize: true } | Claim::Redundant { summarize: true }
        );
        let ok = match (declared, claim) {
            (Some(FieldClass::Protected { pin }), Claim::Protected { pin: p }) => pin == p,
            (Some(FieldClass::Derivable { summarize, .. }), Claim::Derivable { summarize: s }) => {
                summarize || !s
            }
            (Some(FieldClass::Redundant { summarize }), Claim::Redundant { summarize: s }) => {
                summarize || !s
            }
            (Some(FieldClass::Effect { idempotent }), Claim::Effect { idempotent: i }) => {
                idempotent == i
            }
            _ => false,
        };
        if ok {
            self.visited.insert(crate::schema::schema_path(&path));
            return declared.map(|class| (path, class));
        }
        // Anything not declared summarizable is treated as protected: refuse before any
        // summarizer could see it.
        let error = if summarizing && !declared.is_some_and(|c| c.may_summarize()) {
            CompactionError::ProtectedToSummarizer { field: path }
        } else {
            let reason = match declared {
                Some(class) => format!(
                    "declared {}, visited as {}",
                    class.name(),
                    claim_name(claim)
                ),
                None => format!("not in the schema, visited as {}", claim_name(claim)),
            };
            CompactionError::SchemaMismatch {
                field: path,
                reason,
            }
        };
        self.fail(error);
        None
    }

    /// Fails when a field the schema declares unconditionally was never visited.
    pub fn check_complete(&mut self) {
        if self.error.is_some() {
            return;
        }
        let missing = self
            .schema
            .fields()
            .iter()
            .find(|f| !f.conditional && !self.visited.contains(&f.path));
        if let Some(field) = missing {
            let error = CompactionError::SchemaMismatch {
                field: field.path.clone(),
                reason: "declared in the schema but never visited".into(),
            };
            self.fail(error);
        }
    }

    fn value<T: Serialize>(
        &mut self,
        name: &'static str,
        claim: Claim,
        value: &'a T,
        pointer: Option<PointerFn<'_>>,
        summary: Option<&'a dyn SummaryText>,
    ) {
        if let Some((path, class)) = self.admit(name, claim) {
            let pointer = pointer.map(|build| {
                let mut p = String::new();
                build(&mut p);
                p
            });
            self.fields.push(CollectedField {
                path,
                class,
                value: Collected::Value {
                    value,
                    pointer,
                    summary,
                },
            });
        }
    }
}

fn claim_name(claim: Claim) -> &'static str {
    match claim {
        Claim::Protected { pin: true } => "protected(pin)",
        Claim::Protected { pin: false } => "protected",
        Claim::Derivable { summarize: true } => "derivable(summarize)",
        Claim::Derivable { summarize: false } => "derivable",
        Claim::Redundant { summarize: true } => "redundant(summarize)",
        Claim::Redundant { summarize: false } => "redundant",
        Claim::Effect { .. } => "effect",
    }
}

/// Canonical JSON: through `serde_json::Value`, so map keys are sorted and a value that
/// round-trips through rehydration serializes to the same bytes again (a `HashMap` would not).
pub(crate) fn canonical_json<T: Serialize + ?Sized>(value: &T) -> serde_json::Result<String> {
    serde_json::to_string(&serde_json::to_value(value)?)
}

impl<'a> Visitor<'a> for Collector<'a> {
    fn protected<T: Serialize>(&mut self, name: &'static str, pin: bool, value: &'a T) {
        let Some((path, class)) = self.admit(name, Claim::Protected { pin }) else {
            return;
        };
        match canonical_json(value) {
            Ok(json) => {
                let fingerprint = ContentHash::of(json.as_bytes());
                self.fields.push(CollectedField {
                    path,
                    class,
                    value: Collected::Protected {
                        pin,
                        json,
                        fingerprint,
                    },
                });
            }
            Err(e) => self.fail(CompactionError::Serialize {
                field: path,
                message: e.to_string(),
            }),
        }
    }

    fn derivable<T: Serialize>(
        &mut self,
        name: &'static str,
        pointer: PointerFn<'_>,
        value: &'a T,
    ) {
        self.value(
            name,
            Claim::Derivable { summarize: false },
            value,
            Some(pointer),
            None,
        );
    }

    fn derivable_summarizable<T: Summarizable>(
        &mut self,
        name: &'static str,
        pointer: PointerFn<'_>,
        value: &'a T,
    ) {
        let summary: &'a dyn SummaryText = value;
        self.value(
            name,
            Claim::Derivable { summarize: true },
            value,
            Some(pointer),
            Some(summary),
        );
    }

    fn redundant<T: Serialize>(&mut self, name: &'static str, value: &'a T) {
        self.value(
            name,
            Claim::Redundant { summarize: false },
            value,
            None,
            None,
        );
    }

    fn redundant_summarizable<T: Summarizable>(&mut self, name: &'static str, value: &'a T) {
        let summary: &'a dyn SummaryText = value;
        self.value(
            name,
            Claim::Redundant { summarize: true },
            value,
            None,
            Some(summary),
        );
    }

    fn effect<E: EffectRecords>(&mut self, name: &'static str, idempotent: bool, value: &'a E) {
        if let Some((path, class)) = self.admit(name, Claim::Effect { idempotent }) {
            let view = self.effect_views.and_then(|views| views.get(&path));
            self.fields.push(CollectedField {
                path,
                class,
                value: Collected::Effects {
                    idempotent,
                    log: view.unwrap_or_else(|| value.effect_log()),
                },
            });
        }
    }

    fn enter(&mut self, segment: Segment) {
        self.marks.push(self.path.len());
        push_segment(&mut self.path, segment);
    }

    fn leave(&mut self) {
        if let Some(len) = self.marks.pop() {
            self.path.truncate(len);
        }
    }

    fn shape(&mut self, name: &'static str, shape: Shape) {
        self.shapes.push((child_path(&self.path, name), shape));
    }
}
