//! Shared helpers for the property, fault-injection and tamper suites: a family of states that
//! covers every field class, oracles computed independently of the engine, adversarial
//! summarizers and faulty store/summarizer wrappers.
#![allow(dead_code)]

pub mod faulty;
pub mod fixtures;
pub mod states;
pub mod strategies;
pub mod summarizers;

use compaction::{Compacted, ContentHash, Effect, EffectLog, EffectStatus};
use serde::Serialize;

/// Canonical JSON as the engine defines it: through `serde_json::Value` (sorted map keys).
pub fn canonical<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(&serde_json::to_value(value).expect("to_value")).expect("to_string")
}

/// The fingerprint the engine must report for a protected value.
pub fn fingerprint<T: Serialize + ?Sized>(value: &T) -> ContentHash {
    ContentHash::of(canonical(value).as_bytes())
}

/// An effect record as the guarantees speak of it: everything but the payload.
pub type Record = (String, String, String, EffectStatus, Vec<String>);

/// The records of a log, in order.
pub fn records(log: &EffectLog) -> Vec<Record> {
    log.iter().map(record).collect()
}

/// One record.
pub fn record(e: &Effect) -> Record {
    (
        e.action.clone(),
        e.target.clone(),
        e.idempotency_key.clone(),
        e.status,
        e.depends_on.clone(),
    )
}

/// Re-computes the seal of a checkpoint, as a forger who knows the format would: the seal is
/// the SHA-256 of the checkpoint's JSON without its trailing `seal` field. Used to reach the
/// checks behind the seal (per-value fingerprints).
pub fn reseal_bytes(bytes: &[u8]) -> Option<Vec<u8>> {
    let needle = b",\"seal\":\"";
    let at = bytes.windows(needle.len()).rposition(|w| w == needle)?;
    let mut body = bytes[..at].to_vec();
    body.push(b'}');
    let seal = ContentHash::of(&body);
    body.pop();
    body.extend_from_slice(format!(",\"seal\":\"{}\"}}", seal.to_hex()).as_bytes());
    Some(body)
}

/// Serializes a checkpoint.
pub fn checkpoint_bytes<S>(compacted: &Compacted<S>) -> Vec<u8> {
    serde_json::to_vec(compacted).expect("a checkpoint serializes")
}

/// Proptest's case count: `PROPTEST_CASES` when set, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
