//! Arbitrary bytes as a checkpoint: deserialization and rehydrate return `Ok` or a typed
//! error, never panic. Every parsed checkpoint is also re-sealed and rehydrated, so the checks
//! behind the seal (fingerprints, spilled records, rebuild) are fuzzed too.
#![no_main]

use compaction::{Compacted, CompactionError};
use compaction_fuzz::{fixture, reacquirer, reseal, PropState};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let fx = fixture();
    let Ok(compacted) = serde_json::from_slice::<Compacted<PropState>>(data) else {
        return;
    };
    let reacquire = reacquirer();
    let direct = fx.compactor.rehydrate_blocking(&compacted, &reacquire);
    if let Ok(state) = &direct {
        // Only an intact seal gets through; the state then compacts again.
        assert!(compacted.verify_seal());
        let _ = fx.compactor.compact_blocking(state);
    }
    if let Some(resealed) = reseal(&compacted) {
        // (The seal now matches, but `verify_seal` still refuses another format version.)
        match fx.compactor.rehydrate_blocking(&resealed, &reacquire) {
            Ok(state) => {
                // Whatever a forged but well-formed checkpoint rebuilds into compacts again.
                let _ = fx.compactor.compact_blocking(&state);
            }
            Err(CompactionError::Integrity { .. })
            | Err(CompactionError::Store(_))
            | Err(CompactionError::Reacquire { .. })
            | Err(CompactionError::Rebuild(_))
            | Err(CompactionError::WrongStateType { .. }) => {}
            Err(other) => panic!("unexpected error kind from rehydrate: {other:?}"),
        }
    }
});
