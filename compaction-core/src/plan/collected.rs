//! What collection hands the planner: each field as its traversal handed it over, checked
//! against the schema (protected values in canonical form, the rest still borrowed).

use crate::conversation::transcript::Transcript;
use crate::effects::record::{EffectLog, EffectStatus};
use crate::error::CompactionError;
use crate::plan::json_size::JsonValue;
use crate::planner::policy::TranscriptPolicy;
use crate::state::path::Shape;
use crate::state::schema::FieldClass;
use crate::state::summarizable::Summarizable;
use crate::store::ContentHash;
use std::borrow::Cow;

/// A state's fields as its traversal handed them over, checked against its schema.
pub(crate) struct Collection<'a> {
    pub(super) fields: Vec<CollectedField<'a>>,
    pub shapes: Vec<(String, Shape)>,
    /// `#[transcript]` fields: planned by the transcript planner, not in the window.
    pub transcripts: Vec<CollectedTranscript<'a>>,
}

/// A `#[transcript]` field as the traversal handed it over.
pub(crate) struct CollectedTranscript<'a> {
    pub path: String,
    pub policy: TranscriptPolicy,
    pub transcript: &'a Transcript,
}

impl Collection<'_> {
    /// `UnknownEffect` for the first effect whose outcome is unknown.
    pub fn refuse_unknown_effects(&self) -> Result<(), CompactionError> {
        for field in &self.fields {
            if let Collected::Effects { log, .. } = &field.value {
                if let Some(e) = log.with_status(EffectStatus::Unknown).next() {
                    return Err(CompactionError::UnknownEffect {
                        field: field.path.clone(),
                        key: e.idempotency_key.clone(),
                    });
                }
            }
        }
        Ok(())
    }

    /// Every `#[effect]` field's concrete path and log, in traversal order: what the
    /// transcript planner looks effects up in, by scope and key.
    pub fn effect_logs(&self) -> impl Iterator<Item = (&str, &EffectLog)> + '_ {
        self.fields.iter().filter_map(|field| match &field.value {
            Collected::Effects { log, .. } => Some((field.path.as_str(), *log)),
            _ => None,
        })
    }
}

/// A summarizable value behind a trait object. Only `Summarizable` types can become one, and
/// only the `*_summarizable` visitor methods create one.
pub(crate) trait SummaryText {
    fn summary_text(&self) -> Cow<'_, str>;
    /// Whether the text is the value's compact JSON (the default source), known without
    /// comparing.
    fn text_is_json(&self) -> bool;
}

impl<T: Summarizable> SummaryText for T {
    fn summary_text(&self) -> Cow<'_, str> {
        self.summary_source()
    }
    fn text_is_json(&self) -> bool {
        self.summary_source_is_json()
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
    /// Priority key: a field with a smaller rank comes back into the window first and leaves
    /// it last. Traversal order, except that later elements of a `Vec` of nested state rank
    /// before earlier ones (newer before older).
    pub rank: Vec<usize>,
    pub class: FieldClass,
    pub value: Collected<'a>,
}
