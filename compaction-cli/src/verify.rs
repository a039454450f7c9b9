//! `verify`: every stored byte, every checkpoint and pointer, every effect against its history
//! and every summary cache entry against its key; every problem listed, exit 1 when there is
//! one.

use crate::backend::{Ledger, Store};
use crate::backends;
use crate::fail::{Exit, Failure, Outcome};
use crate::output::{count, print_json, printable, progress};
use crate::target::{Access, Database};
use compaction::{
    block_on, history_problem, summary_cache_problem, CompactionError, Compactor, ContentHash,
    EffectLog, SealKey, StoreError,
};
use serde_json::json;
use std::collections::{BTreeMap, HashMap};

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
    entries: usize,
    /// Checkpoints whose keyed seal was not checked (no keys given): agent and key id.
    keyed_unchecked: Vec<(String, String)>,
}

/// `compaction verify DB`.
pub fn verify(db: &Database, as_json: bool) -> Outcome {
    let store = db.store(Access::Read)?;
    let mut problems = Vec::new();
    let mut checked = Checked::default();
    let keys = seal_keys()?;
    let blob_ok = verify_blobs(&store, &mut problems, &mut checked)?;
    verify_checkpoints(
        &store,
        &blob_ok,
        keys.as_deref(),
        &mut problems,
        &mut checked,
    )?;
    verify_entries(&store, &mut problems, &mut checked)?;
    let ledger = db.ledger(Access::Read)?;
    match ledger.try_load_all() {
        Ok(scopes) => {
            checked.effects = scopes.values().map(|log| log.len()).sum();
            audit_effects(&ledger, &scopes, &mut problems)?;
        }
        // A damaged ledger is a problem `verify` reports, not a failure to run it.
        Err(e) => match crate::backends::corrupt(&*e) {
            Some(context) => problems.push(Problem {
                kind: "effect",
                subject: "effect ledger".into(),
                detail: context,
            }),
            None => return Err(backends::failure(&*e)),
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
                "cache_entries": checked.entries,
            },
            "not_checked": {
                "keyed_seals": checked.keyed_unchecked.iter().map(|(agent, key)| json!({
                    "checkpoint": agent, "key": key,
                })).collect::<Vec<_>>(),
                "why": (!checked.keyed_unchecked.is_empty())
                    .then(|| format!("{KEYS_ENV} is not set")),
            },
            "problems": problems.iter().map(|p| json!({
                "kind": p.kind, "subject": p.subject, "detail": p.detail,
            })).collect::<Vec<_>>(),
        }));
    } else {
        say!(
            "checked {}, {} ({}), {}, {}",
            count(checked.blobs, "blob"),
            count(checked.checkpoints, "checkpoint"),
            count(checked.pointers, "pointer"),
            count(checked.effects, "effect"),
            count(checked.entries, "summary cache entry")
        );
        if !checked.keyed_unchecked.is_empty() {
            // Only the plain seal (a checksum anyone can recompute) was checked on these: say
            // so, rather than let "no problems" read as "the keyed seals hold".
            let mut keys: Vec<&str> = checked
                .keyed_unchecked
                .iter()
                .map(|(_, key)| key.as_str())
                .collect();
            keys.sort_unstable();
            keys.dedup();
            let keys: Vec<String> = keys.iter().map(|k| format!("`{}`", printable(k))).collect();
            say!(
                "not checked: the keyed seals of {} (keys {}): {KEYS_ENV} is not set; set it to \
                 ID=HEX[,ID=HEX..] with the agents' seal keys to check them",
                count(checked.keyed_unchecked.len(), "checkpoint"),
                keys.join(", ")
            );
        }
        if problems.is_empty() {
            say!("no problems found");
        } else {
            say!("{}:", count(problems.len(), "problem"));
            for p in &problems {
                say!("  {}: {}", printable(&p.subject), printable(&p.detail));
            }
        }
    }
    Ok(if problems.is_empty() {
        Exit::Ok
    } else {
        Exit::Problems
    })
}

/// Every effect's status against its history: a status no recorded event led to was written
/// outside the ledger (a committed charge set back to `not_started`, its events deleted).
fn audit_effects(
    ledger: &Ledger,
    scopes: &BTreeMap<String, EffectLog>,
    problems: &mut Vec<Problem>,
) -> Result<(), Failure> {
    let total = scopes.values().map(|log| log.len()).sum();
    let bar = progress("effects", total);
    for (scope, log) in scopes {
        for effect in log {
            bar.inc(1);
            let key = &effect.idempotency_key;
            let history: Vec<_> = ledger
                .history(scope, key)?
                .into_iter()
                .map(|a| a.transition)
                .collect();
            if let Some(detail) = history_problem(effect.status, &history) {
                let subject = if scope.is_empty() {
                    format!("effect `{key}`")
                } else {
                    format!("effect `{key}` (scope {scope})")
                };
                problems.push(Problem {
                    kind: "effect",
                    subject,
                    detail,
                });
            }
        }
    }
    bar.finish_and_clear();
    Ok(())
}

/// Every summary cache entry against its key ([`summary_cache_problem`]).
fn verify_entries(
    store: &Store,
    problems: &mut Vec<Problem>,
    checked: &mut Checked,
) -> Result<(), Failure> {
    let entries = block_on(store.admin().entries()).map_err(|e| backends::failure(&e))?;
    for entry in entries {
        // Other named entries are not the cache's: nothing to check them against.
        if !entry.name.starts_with("summary-cache/") {
            continue;
        }
        let Some(bytes) = store
            .entry(&entry.name)
            .map_err(|e| backends::failure(&e))?
        else {
            continue; // removed since it was listed
        };
        checked.entries += 1;
        if let Some(detail) = summary_cache_problem(&entry.name, &bytes) {
            problems.push(Problem {
                kind: "cache",
                subject: format!("summary cache entry `{}`", entry.name),
                detail: format!("{detail}: it can never be used (gc removes it)"),
            });
        }
    }
    Ok(())
}

/// The environment variable holding the seal keys `verify` checks keyed seals with: never an
/// argument, so no secret shows in the process list or the shell history.
const KEYS_ENV: &str = "COMPACTION_SEAL_KEYS";

/// The keys of `COMPACTION_SEAL_KEYS` (`ID=HEX[,ID=HEX..]`), the first one first; `None` when
/// it is not set.
fn seal_keys() -> Result<Option<Vec<SealKey>>, Failure> {
    let Ok(spec) = std::env::var(KEYS_ENV) else {
        return Ok(None);
    };
    let bad = |message: String| {
        Failure::new(Exit::Usage, format!("{KEYS_ENV}: {message}"))
            .hint("give the keys as ID=HEX, separated by commas (the agents' seal keys)")
    };
    let mut keys = Vec::new();
    for (i, entry) in spec
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .enumerate()
    {
        let (id, hex) = entry
            .split_once('=')
            .ok_or_else(|| bad(format!("entry {} has no `=`", i + 1)))?;
        keys.push(SealKey::from_hex(id, hex).map_err(|e| bad(e.to_string()))?);
    }
    // Checked once here (two keys sharing an id), so building per agent below cannot fail.
    verifier(&keys, "", "").map_err(|e| bad(e.to_string()))?;
    Ok(Some(keys))
}

/// A compactor that verifies `agent`'s checkpoints in `namespace` with `keys`: their keyed
/// seals, and that each is bound to the agent whose row holds it.
fn verifier(keys: &[SealKey], agent: &str, namespace: &str) -> Result<Compactor, CompactionError> {
    let mut builder = Compactor::builder()
        .budget(1)
        .agent_id(agent)
        .namespace(namespace);
    for (i, key) in keys.iter().enumerate() {
        builder = if i == 0 {
            builder.seal_key(key.clone())
        } else {
            builder.verify_key(key.clone())
        };
    }
    builder.build()
}

/// Re-hashes every blob (through the store's own verified read); returns each address's result.
fn verify_blobs(
    store: &Store,
    problems: &mut Vec<Problem>,
    checked: &mut Checked,
) -> Result<HashMap<ContentHash, bool>, Failure> {
    let blobs = block_on(store.admin().blobs()).map_err(|e| backends::failure(&e))?;
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
        let ok = match store.get(&hash) {
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
            Err(other) => return Err(backends::failure(&other)),
        };
        results.insert(hash, ok);
    }
    bar.finish_and_clear();
    Ok(results)
}

/// Verifies every checkpoint's seal and that every pointer it holds resolves to good bytes.
fn verify_checkpoints(
    store: &Store,
    blob_ok: &HashMap<ContentHash, bool>,
    keys: Option<&[SealKey]>,
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
            Err(foreign @ CompactionError::ForeignCheckpoint { .. }) => {
                checked.checkpoints += 1;
                problems.push(Problem {
                    kind: "checkpoint",
                    subject,
                    detail: format!("another agent's checkpoint in this row: {foreign}"),
                });
                continue;
            }
            Err(CompactionError::Store(e)) => return Err(backends::failure(&e)),
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
        } else if let (None, Some(id)) = (keys, compacted.seal_key_id()) {
            checked
                .keyed_unchecked
                .push((info.agent_id.clone(), id.to_owned()));
        } else if let Some(keys) = keys {
            let verifier = verifier(keys, &info.agent_id, store.namespace())
                .map_err(|e| Failure::new(Exit::Usage, e.to_string()))?;
            if let Err(refused) = verifier.verify_checkpoint(&compacted) {
                let detail = match (&refused, compacted.seal_key_id()) {
                    (CompactionError::ForeignCheckpoint { .. }, _) => refused.to_string(),
                    (_, Some(id)) => format!(
                        "its keyed seal (key `{id}`) does not verify under {KEYS_ENV}: forged, \
                         or sealed with a key not given"
                    ),
                    (_, None) => format!("it has no keyed seal, and {KEYS_ENV} is set"),
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
                Err(other) => return Err(backends::failure(&other)),
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
