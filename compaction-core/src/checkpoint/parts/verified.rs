//! The parts this process verified: a part read back unchanged is compared with the bytes
//! verified before, not hashed again (loading verifies each part once per process).

use crate::store::ContentHash;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

/// Whether `bytes` are the part `hash` names: checked once per process for bytes that stay the
/// same (a part verified before and read back unchanged is compared, not hashed again).
pub(crate) fn check_part(hash: &ContentHash, bytes: &[u8]) -> bool {
    if VERIFIED.lock().is_ok_and(|v| v.holds(hash, bytes)) {
        return true;
    }
    if ContentHash::of(bytes) != *hash {
        return false;
    }
    if let Ok(mut verified) = VERIFIED.lock() {
        verified.insert(*hash, bytes);
    }
    true
}

/// How many bytes of verified parts a process remembers.
const VERIFIED_BYTES: usize = 32 << 20;

/// The parts this process verified, oldest first out.
static VERIFIED: Mutex<Verified> = Mutex::new(Verified {
    by_hash: None,
    order: VecDeque::new(),
    bytes: 0,
});

struct Verified {
    by_hash: Option<HashMap<ContentHash, Arc<[u8]>>>,
    order: VecDeque<ContentHash>,
    bytes: usize,
}

impl Verified {
    fn holds(&self, hash: &ContentHash, bytes: &[u8]) -> bool {
        self.by_hash
            .as_ref()
            .and_then(|map| map.get(hash))
            .is_some_and(|held| &held[..] == bytes)
    }

    fn insert(&mut self, hash: ContentHash, bytes: &[u8]) {
        if bytes.len() > VERIFIED_BYTES / 4 {
            return;
        }
        let map = self.by_hash.get_or_insert_with(HashMap::new);
        if map.insert(hash, bytes.into()).is_none() {
            self.order.push_back(hash);
            self.bytes += bytes.len();
        }
        while self.bytes > VERIFIED_BYTES {
            let Some(oldest) = self.order.pop_front() else {
                break;
            };
            if let Some(gone) = map.remove(&oldest) {
                self.bytes -= gone.len();
            }
        }
    }
}
