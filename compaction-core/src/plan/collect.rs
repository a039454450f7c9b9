//! Collect: the visitor that receives a state's fields by class and checks every call against
//! the schema. Protected values are put in canonical form here; the rest stays borrowed. What it
//! hands the planner is in `collected.rs` (apart, so the planner never imports the visitor
//! contract: one level less between the compactor and the effect types).

use crate::conversation::transcript::Transcript;
use crate::effects::record::{EffectLog, EffectRecords};
use crate::error::CompactionError;
use crate::plan::collected::{
    Collected, CollectedField, CollectedTranscript, Collection, SummaryText,
};
use crate::planner::policy::TranscriptPolicy;
use crate::state::compactable::{Compactable, PointerFn, Visitor};
use crate::state::instance::check_instance;
use crate::state::path::{child_path, push_segment, Segment, Shape};
use crate::state::schema::{FieldClass, Schema};
use crate::state::summarizable::Summarizable;
use crate::store::canonical::{canonical_json, check_round_trip};
use crate::store::ContentHash;
use serde::Serialize;
use std::collections::HashMap;

/// Runs the state's traversal through a [`Collector`]; the first disagreement with the schema
/// (or value that cannot be serialized) refuses the whole compaction. `effect_views` replaces
/// the records of `#[effect]` fields, by concrete path (the ledger's, from
/// `Compactor::compact_with_ledger`).
pub(crate) fn collect<'a, S: Compactable>(
    state: &'a S,
    effect_views: Option<&'a HashMap<String, EffectLog>>,
) -> Result<Collection<'a>, CompactionError> {
    let mut collector = Collector::new(S::schema()).with_effect_views(effect_views);
    state.visit(&mut collector);
    collector.check_complete();
    if let Some(error) = collector.error.take() {
        return Err(error);
    }
    Ok(Collection {
        fields: collector.fields,
        shapes: collector.shapes,
        transcripts: collector.transcripts,
    })
}

/// The visitor the engine hands to `Compactable::visit`. It checks every call against the
/// schema, so a hand-written traversal cannot route a protected value anywhere it should not go.
struct Collector<'a> {
    schema: &'static Schema,
    path: String,
    marks: Vec<usize>,
    fields: Vec<CollectedField<'a>>,
    shapes: Vec<(String, Shape)>,
    transcripts: Vec<CollectedTranscript<'a>>,
    error: Option<CompactionError>,
    /// Records that replace `#[effect]` fields' own, by concrete path (the ledger's, from
    /// `Compactor::compact_with_ledger`).
    effect_views: Option<&'a HashMap<String, EffectLog>>,
    /// The priority key of the current path (see [`CollectedField::rank`]): one entry per
    /// segment entered.
    rank: Vec<usize>,
    /// The next field ordinal (traversal order).
    ordinal: usize,
}

/// What a visitor call claims about a field.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Claim {
    Protected { pin: bool },
    Derivable { summarize: bool },
    Redundant { summarize: bool },
    Effect { idempotent: bool },
    Transcript { keep_recent: usize, pin_user: bool },
}

impl<'a> Collector<'a> {
    fn new(schema: &'static Schema) -> Self {
        Collector {
            schema,
            path: String::new(),
            marks: Vec::new(),
            fields: Vec::new(),
            shapes: Vec::new(),
            transcripts: Vec::new(),
            error: None,
            effect_views: None,
            rank: Vec::new(),
            ordinal: 0,
        }
    }

    /// The priority key of a field collected now, at the current path.
    fn next_rank(&mut self) -> Vec<usize> {
        let mut rank = self.rank.clone();
        rank.push(self.ordinal);
        self.ordinal += 1;
        rank
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
            (
                Some(FieldClass::Transcript {
                    keep_recent,
                    pin_user,
                }),
                Claim::Transcript {
                    keep_recent: k,
                    pin_user: p,
                },
            ) => keep_recent == k && pin_user == p,
            _ => false,
        };
        if ok {
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

    /// Fails when the visited fields are not exactly those the schema and the recorded shapes
    /// call for: a field never visited (also inside an element of a `Vec` or `Option`), an
    /// element visited beyond its list's length, or a field visited twice.
    fn check_complete(&mut self) {
        if self.error.is_some() {
            return;
        }
        let fields = self.fields.iter().map(|f| f.path.as_str());
        let visited = fields.chain(self.transcripts.iter().map(|t| t.path.as_str()));
        if let Err(m) = check_instance(self.schema, &self.shapes, visited) {
            self.fail(CompactionError::SchemaMismatch {
                field: m.path,
                reason: m.reason,
            });
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
            // A value kept verbatim must come back from its JSON: refuse, whatever the plan
            // would do with it, rather than compact what cannot be restored.
            if let Err(e) = check_round_trip(value) {
                self.fail(CompactionError::Serialize {
                    field: path,
                    message: e.to_string(),
                });
                return;
            }
            let pointer = pointer.map(|build| {
                let mut p = String::new();
                build(&mut p);
                p
            });
            let rank = self.next_rank();
            self.fields.push(CollectedField {
                path,
                rank,
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
        Claim::Transcript { .. } => "transcript",
    }
}

impl<'a> Visitor<'a> for Collector<'a> {
    fn protected<T: Serialize>(&mut self, name: &'static str, pin: bool, value: &'a T) {
        let Some((path, class)) = self.admit(name, Claim::Protected { pin }) else {
            return;
        };
        match canonical_json(value) {
            Ok(json) => {
                let fingerprint = ContentHash::of(json.as_bytes());
                let rank = self.next_rank();
                self.fields.push(CollectedField {
                    path,
                    rank,
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
            let rank = self.next_rank();
            self.fields.push(CollectedField {
                path,
                rank,
                class,
                value: Collected::Effects {
                    idempotent,
                    log: view.unwrap_or_else(|| value.effect_log()),
                },
            });
        }
    }

    fn transcript(
        &mut self,
        name: &'static str,
        keep_recent: usize,
        pin_user: bool,
        value: &'a Transcript,
    ) {
        let claim = Claim::Transcript {
            keep_recent,
            pin_user,
        };
        if let Some((path, _)) = self.admit(name, claim) {
            self.transcripts.push(CollectedTranscript {
                path,
                policy: TranscriptPolicy {
                    keep_recent,
                    pin_user,
                },
                transcript: value,
            });
        }
    }

    fn enter(&mut self, segment: Segment) {
        self.marks.push(self.path.len());
        push_segment(&mut self.path, segment);
        // Rule 5, newer before older: the elements of a `Vec` of nested state rank from the
        // last to the first; everything else ranks in traversal order.
        self.rank.push(match segment {
            Segment::Field(_) => {
                self.ordinal += 1;
                self.ordinal - 1
            }
            Segment::Index(i) => usize::MAX - i,
        });
    }

    fn leave(&mut self) {
        if let Some(len) = self.marks.pop() {
            self.path.truncate(len);
            self.rank.pop();
        }
    }

    fn shape(&mut self, name: &'static str, shape: Shape) {
        self.shapes.push((child_path(&self.path, name), shape));
    }
}
