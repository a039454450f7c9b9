//! Keyed checkpoint seals: an HMAC-SHA256 under the author's secret key next to the plain
//! SHA-256 seal, so whoever can write a checkpoint's storage but holds no key cannot forge one.
//!
//! The plain seal detects damage; anyone who can change the bytes can recompute it. The keyed
//! seal names the key that made it (`key`), so several keys can verify (rotation) while one
//! signs.

use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;
use std::fmt;

/// The shortest secret accepted, in bytes. HMAC-SHA256 is meant for keys of 32 random bytes;
/// 16 still leaves no room for guessing, anything shorter is refused.
const MIN_SECRET_BYTES: usize = 16;

/// The longest key id, in bytes: ids are stored in every checkpoint and shown to operators.
const MAX_ID_BYTES: usize = 64;

/// A seal key that cannot be used: a bad id, a short secret, bad hex, or a key set that cannot
/// work (two keys with one id, verifying keys without a signing one). It never contains the
/// secret. Converts into `CompactionError::Config`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SealKeyError(String);

/// Separates keyed seals from any other use of the same key (and from future formats).
const DOMAIN: &[u8] = b"compaction keyed checkpoint seal v1\0";

/// A secret key that seals checkpoints (HMAC-SHA256), with the id stored beside each seal it
/// makes so the right key verifies it after a rotation.
///
/// Its `Debug` shows the id only: the secret is never printed or logged.
///
/// ```
/// use compaction::{Compactor, SealKey};
///
/// // In production, read 32 random bytes from a secret manager, never from the source.
/// let key = SealKey::new("2026-11", [7u8; 32])?;
/// assert_eq!(key.id(), "2026-11");
/// assert!(!format!("{key:?}").contains("7, 7"));
/// let compactor = Compactor::builder().budget(500).seal_key(key).build()?;
/// # let _ = compactor;
/// # Ok::<(), compaction::CompactionError>(())
/// ```
#[derive(Clone)]
pub struct SealKey {
    id: String,
    mac: Hmac<Sha256>,
    /// The key's MAC of [`FINGERPRINT_PROBE`]: tells two keys of one id apart (a different
    /// secret gives a different fingerprint) without keeping the secret. Never stored.
    fingerprint: [u8; 32],
}

/// What a key's fingerprint is the MAC of. A seal is the MAC of [`DOMAIN`] and more, which
/// never starts with a NUL byte, so a fingerprint is never a valid seal.
const FINGERPRINT_PROBE: &[u8] = b"\0compaction: seal key fingerprint v1";

impl SealKey {
    /// A key named `id` (1 to 64 printable characters, stored in every checkpoint it seals)
    /// with `secret` (at least 16 bytes; use 32 random bytes). Anything else is
    /// [`SealKeyError`].
    pub fn new(id: impl Into<String>, secret: impl AsRef<[u8]>) -> Result<Self, SealKeyError> {
        let id = id.into();
        let secret = secret.as_ref();
        if id.is_empty() || id.len() > MAX_ID_BYTES || id.chars().any(char::is_control) {
            return Err(SealKeyError(format!(
                "a seal key id must be 1 to {MAX_ID_BYTES} bytes of printable text, got {} bytes",
                id.len()
            )));
        }
        if secret.len() < MIN_SECRET_BYTES {
            return Err(SealKeyError(format!(
                "the secret of seal key `{id}` is {} bytes; use at least {MIN_SECRET_BYTES} \
                 (32 random bytes is the norm for HMAC-SHA256)",
                secret.len()
            )));
        }
        let mac = Hmac::<Sha256>::new_from_slice(secret)
            .map_err(|_| SealKeyError(format!("seal key `{id}` is unusable")))?;
        let mut fingerprint = [0u8; 32];
        let mut probe = mac.clone();
        probe.update(FINGERPRINT_PROBE);
        fingerprint.copy_from_slice(&probe.finalize().into_bytes());
        Ok(SealKey {
            id,
            mac,
            fingerprint,
        })
    }

    /// A key whose secret is given as hex (as secret managers and environment variables
    /// usually hold it); see [`new`](Self::new).
    pub fn from_hex(id: impl Into<String>, secret_hex: &str) -> Result<Self, SealKeyError> {
        let id = id.into();
        let secret = decode_hex(secret_hex.trim()).ok_or_else(|| {
            SealKeyError(format!(
                "the secret of seal key `{id}` is not an even number of hex digits"
            ))
        })?;
        SealKey::new(id, secret)
    }

    /// The key's id, as stored beside the seals it makes.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The MAC of `input` under this key, bound to the key's id.
    fn mac_of(&self, input: &[u8]) -> Hmac<Sha256> {
        let mut mac = self.mac.clone();
        mac.update(DOMAIN);
        mac.update(&(self.id.len() as u64).to_be_bytes());
        mac.update(self.id.as_bytes());
        mac.update(input);
        mac
    }
}

impl fmt::Debug for SealKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SealKey")
            .field("id", &self.id)
            .field("secret", &"<redacted>")
            .finish()
    }
}

fn decode_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) || !hex.is_ascii() {
        return None;
    }
    hex.as_bytes()
        .chunks(2)
        .map(|pair| {
            let hi = (pair[0] as char).to_digit(16)?;
            let lo = (pair[1] as char).to_digit(16)?;
            Some((hi * 16 + lo) as u8)
        })
        .collect()
}

/// A keyed seal as a checkpoint stores it: the id of the key and the HMAC in hex.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct KeyedSeal {
    pub(crate) key: String,
    pub(crate) hmac: String,
}

/// A keyed seal this process made, and the fingerprint of the key that made it (kept beside a
/// checkpoint's remembered seal input, never stored).
#[derive(Clone)]
pub(crate) struct SignedHere {
    pub(crate) seal: KeyedSeal,
    fingerprint: [u8; 32],
}

/// The keys a compactor seals and verifies with: at most one signs, every one verifies.
#[derive(Clone, Default)]
pub(crate) struct SealKeys {
    signing: Option<SealKey>,
    retired: Vec<SealKey>,
    accept_unkeyed: bool,
}

impl SealKeys {
    pub(crate) fn set_signing(&mut self, key: SealKey) {
        self.signing = Some(key);
    }

    pub(crate) fn add_retired(&mut self, key: SealKey) {
        self.retired.push(key);
    }

    pub(crate) fn set_accept_unkeyed(&mut self, accept: bool) {
        self.accept_unkeyed = accept;
    }

    /// Whether there is a signing key (so checkpoints are keyed and verified with keys).
    pub(crate) fn signs(&self) -> bool {
        self.signing.is_some()
    }

    /// Whether checkpoints older than the protections are accepted for a migration: without a
    /// keyed seal, or keyed and bound to no agent (`accept_unkeyed_checkpoints`).
    pub(crate) fn accepts_unkeyed(&self) -> bool {
        self.accept_unkeyed
    }

    /// Refuses a set that cannot work: verifying keys without a signing one (the compactor
    /// would write checkpoints it refuses to read back), or two keys sharing an id.
    pub(crate) fn check(&self) -> Result<(), SealKeyError> {
        if self.signing.is_none() && !self.retired.is_empty() {
            return Err(SealKeyError(
                "verify_key without seal_key: name the key that signs new checkpoints with \
                 .seal_key(..)"
                    .into(),
            ));
        }
        let ids: Vec<&str> = self.all().map(SealKey::id).collect();
        for (i, id) in ids.iter().enumerate() {
            if ids[..i].contains(id) {
                return Err(SealKeyError(format!(
                    "two seal keys share the id `{id}`: each key needs its own id"
                )));
            }
        }
        Ok(())
    }

    fn all(&self) -> impl Iterator<Item = &SealKey> {
        self.signing.iter().chain(&self.retired)
    }

    /// The ids of every key, the signing one first (for `Debug`).
    pub(crate) fn ids(&self) -> Vec<&str> {
        self.all().map(SealKey::id).collect()
    }

    /// The keyed seal of `input` under the signing key; `None` without one.
    pub(crate) fn sign(&self, input: &[u8]) -> Option<SignedHere> {
        let key = self.signing.as_ref()?;
        let tag = key.mac_of(input).finalize().into_bytes();
        Some(SignedHere {
            seal: KeyedSeal {
                key: key.id.clone(),
                hmac: tag.iter().map(|b| format!("{b:02x}")).collect(),
            },
            fingerprint: key.fingerprint,
        })
    }

    /// Whether `seal` is the keyed seal `signed` says a key of these made in this process, over
    /// the input the checkpoint remembers: HMAC is deterministic, so the same key (its id and
    /// fingerprint) over the same bytes gives the same seal, and [`verify`](Self::verify) would
    /// say yes without computing it again. `false` sends the caller to `verify`.
    pub(crate) fn made(&self, seal: Option<&KeyedSeal>, signed: &SignedHere) -> bool {
        self.signing.is_some()
            && seal == Some(&signed.seal)
            && self
                .all()
                .any(|k| k.id == signed.seal.key && k.fingerprint == signed.fingerprint)
    }

    /// Whether `seal` is a valid keyed seal of `input` under one of these keys. Without keys,
    /// anything passes (there is nothing to check against); with keys, a missing seal passes
    /// only when the author opted in to unkeyed checkpoints.
    pub(crate) fn verify(&self, input: &[u8], seal: Option<&KeyedSeal>) -> bool {
        if self.signing.is_none() {
            return true;
        }
        let Some(seal) = seal else {
            return self.accept_unkeyed;
        };
        let (Some(key), Some(tag)) = (
            self.all().find(|k| k.id == seal.key),
            decode_hex(&seal.hmac),
        ) else {
            return false;
        };
        key.mac_of(input).verify_slice(&tag).is_ok()
    }
}
