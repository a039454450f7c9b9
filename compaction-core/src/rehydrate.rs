//! Rehydration: from a compacted window back to a full state. Everything the store holds comes
//! back byte-identical and verified (protected values, effect records and payloads, summarized
//! values); evicted derivable ones through the author's [`Reacquire`] (or, when the caller opts
//! in with [`RehydrateOptions`], as `Default`, reported); tombstoned redundant ones as `Default`.

use crate::checkpoint::Compacted;
use crate::effects::record::{Effect, EffectLog};
use crate::error::CompactionError;
use crate::future::BoxFuture;
use crate::state::compactable::{Compactable, Part, Parts};
use crate::state::instance::check_instance;
use crate::state::path::RebuildError;
use crate::store::{get_verified, ContentHash, DynStore, Pointer};
use crate::window::{Form, IndexedRecord, KeptPayload, Section, SummaryValue};
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
        _pointer: &str,
    ) -> Result<serde_json::Value, ReacquireError> {
        // The pointer is not repeated: it is built from protected values, and this message is
        // the `Reacquire` error's (and a `DefaultedField`'s) reason, which ends up in logs.
        Err(format!("no Reacquire configured to re-acquire `{field}`").into())
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

/// How rehydration treats an evicted `#[derivable]` field it cannot re-acquire. The default is
/// strict: the re-acquisition's failure is a `CompactionError::Reacquire`.
///
/// ```
/// use compaction::{Compactable, Compactor, NoReacquire, RehydrateOptions, Tokenizer};
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Compactable, Serialize, Deserialize, Default, Debug, PartialEq)]
/// struct State {
///     #[protected]
///     path: String,
///     #[derivable(pointer = "file://{path}")]
///     contents: String,
/// }
///
/// let compactor = Compactor::builder().budget(120).token_counter(Tokenizer::O200kBase).build()?;
/// let state = State { path: "/srv/app.toml".into(), contents: "x = 1\n".repeat(500) };
/// let compacted = compactor.compact_blocking(&state)?;
///
/// // Strict by default: nothing can re-read the file, so rehydrate refuses.
/// assert!(compactor.rehydrate_blocking(&compacted, &NoReacquire).is_err());
///
/// // Opted in: the field comes back empty, and the result says so.
/// let options = RehydrateOptions::default().default_unreacquirable(true);
/// let rehydrated = compactor.rehydrate_with_blocking(&compacted, &NoReacquire, options)?;
/// assert_eq!(rehydrated.state.path, "/srv/app.toml");
/// assert_eq!(rehydrated.state.contents, "");
/// assert_eq!(rehydrated.defaulted[0].field, "contents");
/// assert_eq!(rehydrated.defaulted[0].pointer, "file:///srv/app.toml");
/// # Ok::<(), compaction::CompactionError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RehydrateOptions {
    default_unreacquirable: bool,
}

impl RehydrateOptions {
    /// When re-acquiring an evicted `#[derivable]` field fails, bring it back as `Default`
    /// and name it in [`Rehydrated::defaulted`] instead of failing (off by default). For
    /// fields the author re-reads on demand; everything the store holds is still restored
    /// and verified, and a tampered checkpoint or store is still an error.
    pub fn default_unreacquirable(mut self, allow: bool) -> Self {
        self.default_unreacquirable = allow;
        self
    }
}

/// A rehydrated state, and the fields that did not come back as they were.
#[derive(Debug)]
pub struct Rehydrated<S> {
    /// The state.
    pub state: S,
    /// Evicted `#[derivable]` fields that could not be re-acquired and are `Default` in
    /// [`state`](Self::state) (only with
    /// [`default_unreacquirable`](RehydrateOptions::default_unreacquirable)).
    pub defaulted: Vec<DefaultedField>,
}

/// An evicted `#[derivable]` field that came back as `Default`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DefaultedField {
    /// The field's concrete path.
    pub field: String,
    /// The pointer it was to be re-acquired from.
    pub pointer: String,
    /// Why re-acquiring it failed (the author's error).
    pub reason: String,
}

/// Rebuilds the full state from a compacted one, reading spilled parts from `store` (what
/// `Compactor::rehydrate` runs). Only for a checkpoint that passed
/// [`check_restorable`](crate::checkpoint::check_restorable) into `S`: its seals are what make
/// the entries read here trustworthy.
pub(crate) async fn rehydrate<S: Compactable>(
    store: &dyn DynStore,
    compacted: &Compacted<S>,
    reacquirer: &dyn DynReacquire,
    options: RehydrateOptions,
) -> Result<Rehydrated<S>, CompactionError> {
    // Before any work: the shapes must be consistent with the parts present, so a checkpoint
    // claiming millions of elements it does not hold is refused here, not rebuilt into.
    // The transcript is held apart from the window's entries.
    let entries = compacted.entries.iter().map(|e| e.path.as_str());
    let held = entries.chain(compacted.transcript.iter().map(|t| t.path.as_str()));
    check_instance(S::schema(), &compacted.shapes, held).map_err(|m| RebuildError {
        path: m.path,
        reason: m.reason,
    })?;
    let mut defaulted = Vec::new();
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
            Form::Summary {
                value: Some(value),
                source,
                ..
            } => Part::Json(summarized_value(store, path, source, value).await?),
            // Checkpoints written before summarized values were stored.
            Form::Summary { origin, .. } if entry.section == Section::Derivable => {
                let pointer = origin.as_deref().unwrap_or_default();
                let reacquired = reacquire(reacquirer, path, pointer).await;
                or_default(reacquired, options, path, pointer, &mut defaulted)?
            }
            Form::Evicted { pointer } => {
                let reacquired = reacquire(reacquirer, path, pointer).await;
                or_default(reacquired, options, path, pointer, &mut defaulted)?
            }
            Form::Summary { .. } | Form::Tombstone => Part::Default,
            Form::Effects {
                total,
                records,
                spilled,
                payloads,
                payloads_evicted,
                payloads_spilled,
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
                let mut restored = payloads.clone();
                if let Some(pointer) = payloads_spilled {
                    let bytes = fetch(store, path, &pointer.hash()).await?;
                    let more: Vec<KeptPayload> =
                        serde_json::from_slice(&bytes).map_err(|_| integrity(path))?;
                    if more.len() != *payloads_evicted {
                        return Err(integrity(path));
                    }
                    restored.extend(more);
                }
                for payload in restored {
                    match effects.get_mut(payload.index) {
                        // A record's payload is restored once: a second one is a forgery.
                        Some(e) if e.idempotency_key == payload.key && e.payload.is_none() => {
                            e.payload = Some(payload.value)
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
        let json = rehydrate_transcript_json(store, transcript).await?;
        parts.insert(path, Part::Json(json));
    }
    let state = S::rebuild(&mut parts)?;
    Ok(Rehydrated { state, defaulted })
}

/// A re-acquired value, or (opted in) `Default` for a field that could not be re-acquired,
/// named in `defaulted`.
fn or_default(
    reacquired: Result<String, CompactionError>,
    options: RehydrateOptions,
    field: &str,
    pointer: &str,
    defaulted: &mut Vec<DefaultedField>,
) -> Result<Part, CompactionError> {
    match reacquired {
        Ok(json) => Ok(Part::Json(json)),
        Err(CompactionError::Reacquire { source, .. }) if options.default_unreacquirable => {
            defaulted.push(DefaultedField {
                field: field.to_owned(),
                pointer: pointer.to_owned(),
                reason: source.to_string(),
            });
            Ok(Part::Default)
        }
        Err(e) => Err(e),
    }
}

/// A summarized field's exact value (JSON), from its stored source or the copy beside it.
async fn summarized_value(
    store: &dyn DynStore,
    path: &str,
    source: &Pointer,
    value: &SummaryValue,
) -> Result<String, CompactionError> {
    let pointer = match value {
        SummaryValue::Source | SummaryValue::SourceText => source,
        SummaryValue::Stored(pointer) => pointer,
    };
    let bytes = fetch(store, path, &pointer.hash()).await?;
    let text = String::from_utf8(bytes).map_err(|_| integrity(path))?;
    match value {
        SummaryValue::SourceText => serde_json::to_string(&text).map_err(|_| integrity(path)),
        _ => Ok(text),
    }
}

/// The transcript field's exact value: its planned messages with every tombstone, page, user
/// run and fold replaced from the store (verified), as JSON for the rebuild.
async fn rehydrate_transcript_json(
    store: &dyn DynStore,
    transcript: &crate::checkpoint::CompactedTranscript,
) -> Result<String, CompactionError> {
    let path = transcript.path.as_str();
    let rebuilt = transcript
        .memory
        .handles
        .rehydrate_messages(&transcript.messages, store)
        .await
        .map_err(|e| match e.into_store_error() {
            Some(source) => CompactionError::from_store(source, Some(path)),
            None => integrity(path),
        })?;
    serde_json::to_string(&rebuilt).map_err(|e| CompactionError::Serialize {
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
