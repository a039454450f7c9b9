//! Shared helpers for the property, fault-injection and tamper suites: the state family with
//! every field class and its oracles (from the shared `compaction-fixtures` crate, which the
//! benches and the fuzz targets use too), proptest strategies, adversarial summarizers and
//! faulty store/summarizer wrappers.
// Each test binary uses a part of what is shared.
#![allow(dead_code, unused_imports)]

pub mod capture;
pub mod faulty;
pub mod shards;
pub mod strategies;
pub mod summarizers;

/// The state family and its hand-written oracles.
pub mod states {
    pub use compaction_fixtures::every_class::{Leaf, Mid, PropState};
    pub use compaction_fixtures::oracles::{
        derivable_values, oracle_reacquirer, pinned_values, protected_values,
    };
}

/// A rich value of the family, and a compaction of it that spills every form.
pub mod fixtures {
    pub use compaction_fixtures::every_class::rich_state;
    pub use compaction_fixtures::spilling::{covers_every_form, spilling_compaction};
}

use compaction::{Effect, EffectLog, EffectStatus};
pub use compaction_fixtures::canonical::{canonical, fingerprint};
pub use compaction_fixtures::checkpoint::{checkpoint_bytes, reseal_bytes};

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

/// Proptest's case count: `PROPTEST_CASES` when set, else `default`.
pub fn cases(default: u32) -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}
