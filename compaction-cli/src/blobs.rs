//! `resolve`, `verify` and `gc`: the blobs behind pointers, checked and collected.

use crate::backend::Store;
use crate::fail::{Exit, Failure, Outcome};
use crate::output::{count, print_json, progress};
use crate::target::{Access, Database};
use compaction::sqlite::{GcError, GcOptions, SqliteStore};
use compaction::{
    block_on, CompactionError, Compactor, ContentHash, Pointer, SealKey, Store as _, StoreError,
};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::Write;
use std::time::Duration;

/// `compaction resolve DB POINTER`.
pub fn resolve(db: &Database, pointer: &str, as_json: bool) -> Outcome {
    let pointer = Pointer::parse(pointer).map_err(|e| {
        Failure::new(Exit::Usage, e.to_string())
            .hint("copy the pointer from the window or from `compaction show --budget`")
    })?;
    let store = db.store(Access::Read)?;
    let bytes = match store.get(&pointer.hash()) {
        Ok(bytes) => bytes,
        Err(StoreError::NotFound { .. }) => {
            return Err(Failure::new(
                Exit::NotFound,
                format!("no blob for {pointer} in `{}`", db.name()),
            )
            .hint("it was never stored here, or removed by gc; `compaction verify` lists pointers that do not resolve"))
        }
        Err(StoreError::Integrity { .. }) => {
            return Err(Failure::new(
                Exit::Problems,
                format!(
                    "the blob for {pointer} in `{}` fails verification: its bytes do not hash to \
                     its address",
                    db.name()
                ),
            )
            .hint("the stored value was altered or corrupted; restore the file from a backup"))
        }
        Err(other) => return Err(Failure::store(&other)),
    };
    let parsed: Option<Value> = serde_json::from_slice(&bytes).ok();
    if as_json {
        let mut object =
            json!({ "pointer": pointer.to_string(), "size": bytes.len(), "verified": true });
        let (key, value) = match (&parsed, std::str::from_utf8(&bytes)) {
            (Some(value), _) => ("json", value.clone()),
            (None, Ok(text)) => ("text", Value::from(text)),
            (None, Err(_)) => ("hex", Value::from(hex(&bytes))),
        };
        object[key] = value;
        print_json(&object);
        return Ok(Exit::Ok);
    }
    let mut stdout = std::io::stdout().lock();
    let written = match parsed {
        Some(value) => writeln!(
            stdout,
            "{}",
            serde_json::to_string_pretty(&value).unwrap_or_default()
        ),
        // Not JSON: the bytes as they are (text, or binary for a pipe).
        None => stdout.write_all(&bytes),
    };
    written
        .and_then(|()| stdout.flush())
        .map_err(|e| Failure::new(Exit::Problems, format!("writing to stdout: {e}")))?;
    Ok(Exit::Ok)
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One thing `verify` found wrong.
struct Problem {
    kind: &'static str,
    subject: String,
    detail: String,
}

/// What `verify` looked at.
#[derive(Default)]
struct Checked {
    blobs: usize,
    checkpoints: usize,
    pointers: usize,
    effects: usize,
}

/// `compaction verify DB`.
pub fn verify(db: &Database, as_json: bool) -> Outcome {
    let store = db.store(Access::Read)?;
    let mut problems = Vec::new();
    let mut checked = Checked::default();
    let keys = seal_keys()?;
    // PostgreSQL has no blob listing: its blobs are re-hashed as the checkpoints' pointers
    // are read (every read is verified), orphans are not visited.
    let blob_ok = match store.as_sqlite() {
        Some(sqlite) => verify_blobs(sqlite, &mut problems, &mut checked)?,
        None => HashMap::new(),
    };
    verify_checkpoints(&store, &blob_ok, keys.as_ref(), &mut problems, &mut checked)?;
    let ledger = db.ledger(Access::Read)?;
    match ledger.try_load_all() {
        Ok(scopes) => checked.effects = scopes.values().map(|log| log.len()).sum(),
        Err(e) => match corrupt_sqlite(&*e) {
            Some(backend) => problems.push(Problem {
                kind: "effect",
                subject: "effect ledger".into(),
                detail: backend.context().to_string(),
            }),
            None => return Err(Failure::backend(&*e)),
        },
    }
    if as_json {
        print_json(&json!({
            "ok": problems.is_empty(),
            "checked": {
                "blobs": checked.blobs,
                "checkpoints": checked.checkpoints,
                "pointers": checked.pointers,
                "effects": checked.effects,
            },
            "problems": problems.iter().map(|p| json!({
                "kind": p.kind, "subject": p.subject, "detail": p.detail,
            })).collect::<Vec<_>>(),
        }));
    } else {
        say!(
            "checked {}, {} ({}), {}",
            count(checked.blobs, "blob"),
            count(checked.checkpoints, "checkpoint"),
            count(checked.pointers, "pointer"),
            count(checked.effects, "effect")
        );
        if problems.is_empty() {
            say!("no problems found");
        } else {
            say!("{}:", count(problems.len(), "problem"));
            for p in &problems {
                say!("  {}: {}", p.subject, p.detail);
            }
        }
    }
    Ok(if problems.is_empty() {
        Exit::Ok
    } else {
        Exit::Problems
    })
}

/// The environment variable holding the seal keys `verify` checks keyed seals with: never an
/// argument, so no secret shows in the process list or the shell history.
const KEYS_ENV: &str = "COMPACTION_SEAL_KEYS";

/// The keys of `COMPACTION_SEAL_KEYS` (`ID=HEX[,ID=HEX..]`), as a compactor that verifies with
/// them; `None` when it is not set.
fn seal_keys() -> Result<Option<Compactor>, Failure> {
    let Ok(spec) = std::env::var(KEYS_ENV) else {
        return Ok(None);
    };
    let bad = |message: String| {
        Failure::new(Exit::Usage, format!("{KEYS_ENV}: {message}"))
            .hint("give the keys as ID=HEX, separated by commas (the agents' seal keys)")
    };
    let mut builder = Compactor::builder().budget(1);
    for (i, entry) in spec
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .enumerate()
    {
        let (id, hex) = entry
            .split_once('=')
            .ok_or_else(|| bad(format!("entry {} has no `=`", i + 1)))?;
        let key = SealKey::from_hex(id, hex).map_err(|e| bad(e.to_string()))?;
        builder = if i == 0 {
            builder.seal_key(key)
        } else {
            builder.verify_key(key)
        };
    }
    builder.build().map(Some).map_err(|e| bad(e.to_string()))
}

/// Re-hashes every blob (through the store's own verified read); returns each address's result.
fn verify_blobs(
    store: &SqliteStore,
    problems: &mut Vec<Problem>,
    checked: &mut Checked,
) -> Result<HashMap<ContentHash, bool>, Failure> {
    let blobs = store.blobs().map_err(|e| Failure::store(&e))?;
    let bar = progress("blobs", blobs.len());
    let mut results = HashMap::new();
    for blob in &blobs {
        bar.inc(1);
        checked.blobs += 1;
        let Some(hash) = blob.hash() else {
            problems.push(Problem {
                kind: "blob",
                subject: format!("blob row `{}`", blob.address),
                detail: "its address is not a SHA-256 hex digest (no pointer can reach it)".into(),
            });
            continue;
        };
        let ok = match block_on(store.get(&hash)) {
            Ok(_) => true,
            Err(StoreError::Integrity { .. }) => {
                problems.push(Problem {
                    kind: "blob",
                    subject: format!("blob {hash}"),
                    detail: "stored bytes do not hash to their address (altered or corrupt)".into(),
                });
                false
            }
            // Removed since it was listed (a concurrent gc): nothing left to check.
            Err(StoreError::NotFound { .. }) => continue,
            Err(other) => return Err(Failure::store(&other)),
        };
        results.insert(hash, ok);
    }
    bar.finish_and_clear();
    Ok(results)
}

/// The SQLite error of kind `Corrupt` in `error`'s chain of sources, if any: a damaged ledger
/// is a problem `verify` reports, not a failure to run it.
fn corrupt_sqlite<'e>(
    error: &'e (dyn std::error::Error + 'static),
) -> Option<&'e compaction::SqliteError> {
    let mut cause = Some(error);
    while let Some(e) = cause {
        match e.downcast_ref::<compaction::SqliteError>() {
            Some(sqlite) if sqlite.kind() == compaction::SqliteErrorKind::Corrupt => {
                return Some(sqlite)
            }
            _ => cause = e.source(),
        }
    }
    None
}

/// Verifies every checkpoint's seal and that every pointer it holds resolves to good bytes.
fn verify_checkpoints(
    store: &Store,
    blob_ok: &HashMap<ContentHash, bool>,
    keys: Option<&Compactor>,
    problems: &mut Vec<Problem>,
    checked: &mut Checked,
) -> Result<(), Failure> {
    let infos = store.list_checkpoints()?;
    let bar = progress("checkpoints", infos.len());
    for info in &infos {
        bar.inc(1);
        let subject = format!("checkpoint `{}`", info.agent_id);
        let compacted = match store.load_checkpoint(&info.agent_id) {
            Ok(Some(compacted)) => compacted,
            Ok(None) => continue,
            Err(CompactionError::Integrity { .. }) => {
                checked.checkpoints += 1;
                problems.push(Problem {
                    kind: "checkpoint",
                    subject,
                    detail: "stored bytes do not parse as a checkpoint (altered or corrupt)".into(),
                });
                continue;
            }
            Err(CompactionError::Store(e)) => return Err(Failure::store(&e)),
            Err(other) => return Err(Failure::new(Exit::Problems, other.to_string())),
        };
        checked.checkpoints += 1;
        if !compacted.verify_seal() {
            problems.push(Problem {
                kind: "checkpoint",
                subject: subject.clone(),
                detail: "stored bytes do not match their checksum and seal (altered in storage)"
                    .into(),
            });
        } else if let Some(keys) = keys {
            if keys.verify_checkpoint(&compacted).is_err() {
                let detail = match compacted.seal_key_id() {
                    Some(id) => format!(
                        "its keyed seal (key `{id}`) does not verify under {KEYS_ENV}: forged, \
                         or sealed with a key not given"
                    ),
                    None => format!("it has no keyed seal, and {KEYS_ENV} is set"),
                };
                problems.push(Problem {
                    kind: "checkpoint",
                    subject: subject.clone(),
                    detail,
                });
            }
        }
        for pointer in compacted.pointers() {
            checked.pointers += 1;
            let hash = pointer.hash();
            let ok = match blob_ok.get(&hash) {
                Some(ok) => Ok(*ok),
                None => match store.get(&hash) {
                    Ok(_) => Ok(true),
                    Err(StoreError::Integrity { .. }) => Ok(false),
                    Err(e) => Err(e),
                },
            };
            let detail = match ok {
                Ok(true) => continue,
                Ok(false) => format!("points at {pointer}, whose bytes fail verification"),
                Err(StoreError::NotFound { .. }) => {
                    format!("points at {pointer}, which is not in the store")
                }
                Err(other) => return Err(Failure::store(&other)),
            };
            problems.push(Problem {
                kind: "pointer",
                subject: subject.clone(),
                detail,
            });
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// `compaction gc DB [--dry-run] [--min-age D]`.
pub fn gc(db: &Database, dry_run: bool, min_age: Duration, as_json: bool) -> Outcome {
    let access = if dry_run { Access::Read } else { Access::Write };
    let store = db.store(access)?;
    let store = store.sqlite("gc")?;
    let options = GcOptions::new().dry_run(dry_run).min_age(min_age);
    let mut bar = None;
    let report = store
        .collect_garbage_with_progress(&options, &mut |done, total| {
            let bar = bar.get_or_insert_with(|| progress("gc", total));
            if bar.length() != Some(total as u64) {
                bar.set_length(total as u64);
            }
            bar.set_position(done as u64);
        })
        .map_err(|e| match e {
            GcError::UnreadableCheckpoint { .. } => Failure::new(Exit::Problems, e.to_string()),
            GcError::Store(e) => Failure::store(&e),
            other => Failure::new(Exit::Problems, other.to_string()),
        })?;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    if as_json {
        print_json(&json!({
            "dry_run": report.dry_run,
            "removed": report.removed.iter().map(|b| json!({
                "address": b.address, "size": b.size,
            })).collect::<Vec<_>>(),
            "freed_bytes": report.freed_bytes,
            "kept_referenced": report.kept_referenced,
            "kept_recent": report.kept_recent,
            "checkpoints": report.checkpoints,
            "min_age_seconds": min_age.as_secs(),
        }));
        return Ok(Exit::Ok);
    }
    let verb = if report.dry_run {
        "would remove"
    } else {
        "removed"
    };
    say!(
        "{verb} {}, {} bytes; kept {} referenced by {} and {} stored less than {}s ago",
        count(report.removed.len(), "blob"),
        report.freed_bytes,
        report.kept_referenced,
        count(report.checkpoints, "checkpoint"),
        report.kept_recent,
        min_age.as_secs()
    );
    for blob in &report.removed {
        say!("  sha256:{}  {} bytes", blob.address, blob.size);
    }
    Ok(Exit::Ok)
}
