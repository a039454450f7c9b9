//! The checks a checkpoint passes before its window or state is used: its format, its plain
//! seal, its keyed seal under the compactor's keys, and the agent it is bound to
//! (`Compactor::verify_checkpoint`, run first by every rehydration and by the pointer tool).

use crate::checkpoint::compacted::{format_supported, Compacted, FORMAT};
use crate::checkpoint::fingerprint::SchemaFingerprint;
use crate::checkpoint::owner::Owner;
use crate::checkpoint::seal::{SealKeyError, SealKeys};
use crate::error::CompactionError;
use crate::state::compactable::Compactable;

/// Format, plain seal, keyed seal under `keys`, then the binding against `owner` (what
/// `Compactor::verify_checkpoint` runs): `CheckpointFormat` for another format,
/// `Integrity { field: "<checkpoint>" }` for any seal that does not verify, `ForeignCheckpoint`
/// for a checkpoint bound to another agent or namespace (see `Owner::check`).
pub(crate) fn check_checkpoint<S>(
    compacted: &Compacted<S>,
    keys: &SealKeys,
    owner: &Owner,
) -> Result<(), CompactionError> {
    if !format_supported(compacted.format, compacted.transcript.is_some()) {
        return Err(CompactionError::CheckpointFormat {
            found: compacted.format,
            supported: FORMAT,
        });
    }
    if !compacted.seals_verify(keys) {
        return Err(CompactionError::checkpoint_integrity());
    }
    owner.check(compacted.binding(), keys)
}

/// Everything [`check_checkpoint`] checks, then that the checkpoint was written by `S` as this
/// build defines it (what every rehydration runs first): `WrongStateType` for another type
/// (name, module or generic arguments), `SchemaChanged` for `S` with other fields.
pub(crate) fn check_restorable<S: Compactable>(
    compacted: &Compacted<S>,
    keys: &SealKeys,
    owner: &Owner,
) -> Result<(), CompactionError> {
    check_checkpoint(compacted, keys, owner)?;
    let schema = S::schema();
    if compacted.state_type != schema.type_name() {
        return Err(CompactionError::WrongStateType {
            expected: schema.type_name().into(),
            found: compacted.state_type.clone(),
        });
    }
    let expected = SchemaFingerprint::of::<S>(schema);
    let found = &compacted.schema;
    if found.concrete_type != expected.concrete_type {
        return Err(CompactionError::WrongStateType {
            expected: expected.concrete_type,
            found: found.concrete_type.clone(),
        });
    }
    match found.field_difference(&expected) {
        None => Ok(()),
        Some(difference) => Err(CompactionError::SchemaChanged {
            state_type: expected.concrete_type,
            difference,
        }),
    }
}

/// An unusable seal key is a configuration error.
impl From<SealKeyError> for CompactionError {
    fn from(e: SealKeyError) -> Self {
        CompactionError::Config(e.to_string())
    }
}
