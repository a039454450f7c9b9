//! The store conformance suite: random blobs are put and read back byte for byte; a second put
//! of the same content is not an error; a blob under a hash that is not its own is refused and
//! not stored; a missing hash is `NotFound`; and a stored blob changed behind the store's back
//! (one flipped byte, a truncation, an empty value: the backend's own tamper hook writes it) is
//! `Integrity` on the next read, never wrong bytes. Named entries (`put_entry`/`get_entry`,
//! the summary cache's) read back what was last put under their name, byte for byte, whatever
//! the name's characters; a name never put reads as `None`.

use compaction::{ContentHash, Store, StoreError};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use std::any::Any;

/// Writes raw bytes under a hash, bypassing every check.
pub type Overwrite = Box<dyn Fn(&ContentHash, &[u8])>;

/// A store under test with its tamper hook: `overwrite(hash, bytes)` stores `bytes` under
/// `hash` without any check (raw SQL for a database), as an attacker or a bad disk would.
pub struct Fixture<S> {
    pub store: S,
    pub overwrite: Overwrite,
    pub keep: Box<dyn Any>,
}

impl<S> Fixture<S> {
    pub fn new(
        store: S,
        overwrite: impl Fn(&ContentHash, &[u8]) + 'static,
        keep: impl Any,
    ) -> Self {
        Fixture {
            store,
            overwrite: Box::new(overwrite),
            keep: Box::new(keep),
        }
    }
}

/// How a stored blob is damaged.
#[derive(Debug, Clone)]
pub enum Damage {
    /// XOR one byte (index modulo the length) with a non-zero mask.
    Flip(usize, u8),
    /// Keep only the first part (modulo the length).
    Truncate(usize),
    /// Append bytes.
    Extend(Vec<u8>),
}

impl Damage {
    fn apply(&self, bytes: &[u8]) -> Vec<u8> {
        let mut out = bytes.to_vec();
        match self {
            Damage::Flip(at, mask) if !out.is_empty() => out[at % bytes.len()] ^= mask,
            Damage::Truncate(at) if !out.is_empty() => out.truncate(at % bytes.len()),
            Damage::Flip(..) | Damage::Truncate(_) => out.push(0),
            Damage::Extend(more) => out.extend_from_slice(more),
        }
        out
    }
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        (any::<usize>(), 1u8..).prop_map(|(at, mask)| Damage::Flip(at, mask)),
        any::<usize>().prop_map(Damage::Truncate),
        prop::collection::vec(any::<u8>(), 1..8).prop_map(Damage::Extend),
    ]
}

fn fail(what: &str, e: StoreError) -> TestCaseError {
    TestCaseError::fail(format!("{what}: {e}"))
}

/// One case: `blobs` are stored and checked, then `victim` (an index into them) is damaged.
pub async fn run<S: Store>(
    fixture: &Fixture<S>,
    blobs: &[Vec<u8>],
    victim: usize,
    damage: &Damage,
) -> Result<(), TestCaseError> {
    let store = &fixture.store;
    let mut hashes = Vec::new();
    for bytes in blobs {
        let hash = ContentHash::of(bytes);
        store.put(&hash, bytes).await.map_err(|e| fail("put", e))?;
        store
            .put(&hash, bytes)
            .await
            .map_err(|e| fail("second put", e))?;
        hashes.push(hash);
    }
    for (hash, bytes) in hashes.iter().zip(blobs) {
        let got = store.get(hash).await.map_err(|e| fail("get", e))?;
        prop_assert_eq!(&got, bytes);
    }

    let absent = ContentHash::of(b"conformance: never stored \x00\x01");
    prop_assume!(!hashes.contains(&absent));
    let missing = store.get(&absent).await;
    prop_assert!(
        matches!(missing, Err(StoreError::NotFound { hash }) if hash == absent),
        "missing: {:?}",
        missing
    );
    // Bytes under a hash that is not theirs are refused, and nothing is stored.
    let wrong = store.put(&absent, b"other bytes").await;
    prop_assert!(
        matches!(wrong, Err(StoreError::Integrity { .. })),
        "{:?}",
        wrong
    );
    let after = store.get(&absent).await;
    prop_assert!(
        matches!(after, Err(StoreError::NotFound { .. })),
        "after a refused put: {:?}",
        after.map(|b| b.len())
    );

    if blobs.is_empty() {
        return Ok(());
    }
    let index = victim % blobs.len();
    let (hash, original) = (hashes[index], &blobs[index]);
    let damaged = damage.apply(original);
    prop_assume!(damaged != *original);
    (fixture.overwrite)(&hash, &damaged);
    let read = store.get(&hash).await;
    prop_assert!(
        matches!(read, Err(StoreError::Integrity { hash: h }) if h == hash),
        "tampered blob read as {:?}",
        read.map(|b| b.len())
    );
    // What lets the engine skip hashing its reads again: every backend here says so, and the
    // read above is the proof.
    prop_assert!(store.verifies_reads(), "a built-in store checks its reads");
    // The other blobs are untouched.
    for (i, (hash, bytes)) in hashes.iter().zip(blobs).enumerate() {
        if blobs[i] != *original {
            let got = store
                .get(hash)
                .await
                .map_err(|e| fail("get after tamper", e))?;
            prop_assert_eq!(&got, bytes);
        }
    }
    Ok(())
}

/// One case of the named entries: each `(name, first, second)` is put twice and reads back the
/// second; names that differ in any character are separate entries.
pub async fn run_entries<S: Store>(
    store: &S,
    entries: &[(String, Vec<u8>, Vec<u8>)],
) -> Result<(), TestCaseError> {
    let mut expected = std::collections::BTreeMap::new();
    for (name, first, second) in entries {
        store
            .put_entry(name, first)
            .await
            .map_err(|e| fail("put_entry", e))?;
        let got = store
            .get_entry(name)
            .await
            .map_err(|e| fail("get_entry", e))?;
        prop_assert_eq!(got.as_ref(), Some(first), "entry {:?}", name);
        store
            .put_entry(name, second)
            .await
            .map_err(|e| fail("second put_entry", e))?;
        expected.insert(name.clone(), second.clone());
    }
    for (name, bytes) in &expected {
        let got = store
            .get_entry(name)
            .await
            .map_err(|e| fail("get_entry", e))?;
        prop_assert_eq!(got.as_ref(), Some(bytes), "entry {:?}", name);
    }
    let absent = "conformance: never put \u{1F980} ' \" %_";
    prop_assume!(!expected.contains_key(absent));
    let missing = store
        .get_entry(absent)
        .await
        .map_err(|e| fail("get_entry of a missing name", e))?;
    prop_assert_eq!(missing, None);
    Ok(())
}

/// Entry names that stress a backend's quoting and matching: SQL wildcards and quotes,
/// unicode, case and prefix variants of one another, pointer lookalikes.
fn entry_name() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z/_%'-]{1,12}",
        "\\PC{1,40}",
        prop::sample::select(
            &[
                "summary-cache/a",
                "summary-cache/A",
                "summary-cache/a ",
                "summary-cache/%",
                "summary-cache/_",
                "store://sha256:00",
                "'; DROP TABLE entries; --",
                "é",
                "e\u{301}",
            ][..]
        )
        .prop_map(str::to_owned),
    ]
}

/// The entries suite on `compaction::block_on`: `cases()` random sets of up to 6 entries
/// (binary values up to 2 KiB, empty ones too), a fresh store for each.
pub fn check_entries<S: Store>(make: impl Fn() -> Fixture<S>) {
    let value = || prop::collection::vec(any::<u8>(), 0..2048);
    let entries = prop::collection::vec((entry_name(), value(), value()), 0..6);
    super::run_cases("store entries", entries, |entries| {
        let fixture = make();
        compaction::block_on(run_entries(&fixture.store, &entries))
    });
}

/// The suite on `compaction::block_on`.
pub fn check<S: Store>(make: impl Fn() -> Fixture<S>) {
    check_on(make, |future| compaction::block_on(future))
}

/// The suite with the caller's executor: `cases()` random sets of up to 6 blobs (empty,
/// binary, up to 4 KiB), a fresh store for each.
pub fn check_on<S: Store>(
    make: impl Fn() -> Fixture<S>,
    block_on: impl for<'a> Fn(super::ledger::TestFuture<'a>) -> Result<(), TestCaseError>,
) {
    let blobs = prop::collection::vec(prop::collection::vec(any::<u8>(), 0..4096), 0..6);
    let cases = (blobs, any::<usize>(), damage());
    super::run_cases("store", cases, |(blobs, victim, damage)| {
        let fixture = make();
        block_on(Box::pin(run(&fixture, &blobs, victim, &damage)))
    });
}
