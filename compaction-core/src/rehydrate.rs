//! Rehydration: from a compacted window back to a full state. Protected values come back
//! byte-identical (fingerprint-verified), derivable ones through the author's [`Reacquire`],
//! redundant ones as `Default`, effect records verbatim.

use crate::compacted::{Compacted, FORMAT};
use crate::effects::record::{Effect, EffectLog};
use crate::error::CompactionError;
use crate::future::BoxFuture;
use crate::render::{Form, IndexedRecord, Section};
use crate::state::compactable::{Compactable, Part, Parts};
use crate::state::instance::check_instance;
use crate::state::path::RebuildError;
use crate::store::seal::SealKeys;
use crate::store::{get_verified, ContentHash, DynStore};
use crate::transcript::rehydrate::{rehydrate_transcript, required_blobs};
use std::collections::HashMap;
use std::future::Future;

/// The author's error when re-acquiring a value.
pub type ReacquireError = Box<dyn std::error::Error + Send + Sync>;

/// Re-acquires an evicted `#[derivable]` field from the environment through its pointer
/// (re-read the file, re-query the API). Returns the field's value as JSON.
///
/// ```
/// use compaction::{Reacquire, ReacquireError};
///
/// struct Files;
/// impl Reacquire for Files {
///     async fn reacquire(&self, field: &str, pointer: &str) -> Result<serde_json::Value, ReacquireError> {
///         let path = pointer.strip_prefix("file://").ok_or("not a file pointer")?;
///         Ok(serde_json::Value::String(std::fs::read_to_string(path)?))
///     }
/// }
/// ```
pub trait Reacquire: Send + Sync {
    /// The current value of `field` (its concrete path), found through `pointer`.
    fn reacquire(
        &self,
        field: &str,
        pointer: &str,
    ) -> impl Future<Output = Result<serde_json::Value, ReacquireError>> + Send;
}

/// A `Reacquire` for states with no derivable field to re-acquire: every call is an error.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoReacquire;

impl Reacquire for NoReacquire {
    async fn reacquire(
        &self,
        field: &str,
        pointer: &str,
    ) -> Result<serde_json::Value, ReacquireError> {
        Err(format!("no Reacquire configured to re-acquire `{field}` from `{pointer}`").into())
    }
}

/// Adapts a synchronous closure `(field, pointer) -> Result<Value, ReacquireError>`.
pub struct FnReacquire<F>(F);

impl<F> FnReacquire<F>
where
    F: Fn(&str, &str) -> Result<serde_json::Value, ReacquireError> + Send + Sync,
{
    /// Wraps `f`.
    pub fn new(f: F) -> Self {
        FnReacquire(f)
    }
}

impl<F> Reacquire for FnReacquire<F>
where
    F: Fn(&str, &str) -> Result<serde_json::Value, ReacquireError> + Send + Sync,
{
    async fn reacquire(
        &self,
        field: &str,
        pointer: &str,
    ) -> Result<serde_json::Value, ReacquireError> {
        (self.0)(field, pointer)
    }
}

/// Object-safe form of [`Reacquire`].
pub(crate) trait DynReacquire: Send + Sync {
    fn reacquire_dyn<'a>(
        &'a self,
        field: &'a str,
        pointer: &'a str,
    ) -> BoxFuture<'a, Result<serde_json::Value, ReacquireError>>;
}

impl<T: Reacquire> DynReacquire for T {
    fn reacquire_dyn<'a>(
        &'a self,
        field: &'a str,
        pointer: &'a str,
    ) -> BoxFuture<'a, Result<serde_json::Value, ReacquireError>> {
        Box::pin(self.reacquire(field, pointer))
    }
}

/// Format, plain seal, then keyed seal under `keys` (what `Compactor::verify_checkpoint`
/// runs): `CheckpointFormat` for another format, `Integrity { field: "<checkpoint>" }` for any
/// seal that does not verify.
pub(crate) fn check_checkpoint<S>(
    compacted: &Compacted<S>,
    keys: &SealKeys,
) -> Result<(), CompactionError> {
    if compacted.format != FORMAT {
        return Err(CompactionError::CheckpointFormat {
            found: compacted.format,
            supported: FORMAT,
        });
    }
    if !compacted.seals_verify(keys) {
        return Err(CompactionError::Integrity {
            field: "<checkpoint>".into(),
        });
    }
    Ok(())
}

/// Rebuilds the full state from a compacted one, reading spilled parts from `store` (what
/// `Compactor::rehydrate` runs), once its format and seals checked out under `keys`.
pub(crate) async fn rehydrate<S: Compactable>(
    store: &dyn DynStore,
    compacted: &Compacted<S>,
    keys: &SealKeys,
    reacquirer: &dyn DynReacquire,
) -> Result<S, CompactionError> {
    check_checkpoint(compacted, keys)?;
    let expected = S::schema().type_name();
    if compacted.state_type != expected {
        return Err(CompactionError::WrongStateType {
            expected: expected.into(),
            found: compacted.state_type.clone(),
        });
    }
    compacted.schema.check::<S>()?;
    // Before any work: the shapes must be consistent with the parts present, so a checkpoint
    // claiming millions of elements it does not hold is refused here, not rebuilt into.
    // The transcript is held apart from the window's entries.
    let entries = compacted.entries.iter().map(|e| e.path.as_str());
    let held = entries.chain(compacted.transcript.iter().map(|t| t.path.as_str()));
    check_instance(S::schema(), &compacted.shapes, held).map_err(|m| RebuildError {
        path: m.path,
        reason: m.reason,
    })?;
    let mut parts = Parts::new();
    for (path, shape) in &compacted.shapes {
        parts.insert_shape(path, *shape);
    }
    for entry in &compacted.entries {
        let path = entry.path.as_str();
        let part = match &entry.form {
            Form::Protected {
                json, fingerprint, ..
            } => {
                if !fingerprint.matches(json.as_bytes()) {
                    return Err(integrity(path));
                }
                Part::Json(json.clone())
            }
            Form::ProtectedSpilled { pointer } => {
                let bytes = fetch(store, path, &pointer.hash()).await?;
                Part::Json(String::from_utf8(bytes).map_err(|_| integrity(path))?)
            }
            Form::Value { json } => Part::Json(json.clone()),
            Form::Summary { origin, .. } if entry.section == Section::Derivable => {
                let pointer = origin.as_deref().unwrap_or_default();
                Part::Json(reacquire(reacquirer, path, pointer).await?)
            }
            Form::Evicted { pointer } => Part::Json(reacquire(reacquirer, path, pointer).await?),
            Form::Summary { .. } | Form::Tombstone => Part::Default,
            Form::Effects {
                total,
                records,
                spilled,
                payloads,
                ..
            } => {
                let mut all = records.clone();
                if let Some(spilled) = spilled {
                    let bytes = fetch(store, path, &spilled.pointer.hash()).await?;
                    let more: Vec<IndexedRecord> =
                        serde_json::from_slice(&bytes).map_err(|_| integrity(path))?;
                    if more.len() != spilled.count {
                        return Err(integrity(path));
                    }
                    all.extend(more);
                }
                all.sort_by_key(|r| r.index);
                let in_order = all.iter().enumerate().all(|(i, r)| r.index == i);
                if all.len() != *total || !in_order {
                    return Err(integrity(path));
                }
                let mut effects: Vec<Effect> = all.into_iter().map(|r| r.record).collect();
                for payload in payloads {
                    match effects.get_mut(payload.index) {
                        Some(e) if e.idempotency_key == payload.key => {
                            e.payload = Some(payload.value.clone())
                        }
                        _ => return Err(integrity(path)),
                    }
                }
                Part::Effects(EffectLog::from_effects(effects).map_err(|_| integrity(path))?)
            }
        };
        parts.insert(path, part);
    }
    if let Some(transcript) = &compacted.transcript {
        let path = transcript.path.as_str();
        let json = rehydrate_transcript_json(store, path, &transcript.messages).await?;
        parts.insert(path, Part::Json(json));
    }
    Ok(S::rebuild(&mut parts)?)
}

/// The transcript field's exact value: its planned messages with every stub, tombstone and
/// fold replaced from the store (verified), as JSON for the rebuild.
async fn rehydrate_transcript_json(
    store: &dyn DynStore,
    path: &str,
    messages: &[crate::transcript::conversation::Message],
) -> Result<String, CompactionError> {
    let mut blobs = HashMap::new();
    for pointer in required_blobs(messages).map_err(|_| integrity(path))? {
        let hash = pointer.hash();
        blobs.insert(hash, fetch(store, path, &hash).await?);
    }
    let transcript = rehydrate_transcript(messages, &blobs).map_err(|_| integrity(path))?;
    serde_json::to_string(&transcript).map_err(|e| CompactionError::Serialize {
        field: path.to_owned(),
        message: e.to_string(),
    })
}

async fn fetch(
    store: &dyn DynStore,
    field: &str,
    hash: &ContentHash,
) -> Result<Vec<u8>, CompactionError> {
    get_verified(store, hash)
        .await
        .map_err(|e| CompactionError::from_store(e, Some(field)))
}

async fn reacquire(
    reacquirer: &dyn DynReacquire,
    field: &str,
    pointer: &str,
) -> Result<String, CompactionError> {
    let value = reacquirer
        .reacquire_dyn(field, pointer)
        .await
        .map_err(|source| CompactionError::Reacquire {
            field: field.into(),
            pointer: pointer.into(),
            source,
        })?;
    Ok(value.to_string())
}

fn integrity(field: &str) -> CompactionError {
    CompactionError::Integrity {
        field: field.into(),
    }
}
