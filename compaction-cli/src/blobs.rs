//! `gc`: the blobs no checkpoint needs, collected (`resolve` reads a blob back, in
//! `resolve.rs`; `verify` checks them all, in `verify.rs`).

use crate::backends;
use crate::fail::{Exit, Failure, Outcome};
use crate::output::{count, print_json, printable, progress};
use crate::target::{Access, Database};
use compaction::block_on;
use compaction::sqlite::{GcError, GcOptions};
use serde_json::json;
use std::time::Duration;

/// `compaction gc DB [--dry-run] [--min-age D]`: the library's garbage collection, on any
/// backend ([the rules](compaction::sqlite::GcOptions)).
pub fn gc(db: &Database, dry_run: bool, min_age: Duration, as_json: bool) -> Outcome {
    let access = if dry_run { Access::Read } else { Access::Write };
    let store = db.store(access)?;
    let options = GcOptions::new().dry_run(dry_run).min_age(min_age);
    let mut bar = None;
    let report = block_on(store.admin().collect_garbage(&options, &mut |done, total| {
        let bar = bar.get_or_insert_with(|| progress("gc", total));
        if bar.length() != Some(total as u64) {
            bar.set_length(total as u64);
        }
        bar.set_position(done as u64);
    }))
    .map_err(|e| match e {
        GcError::UnreadableCheckpoint { .. } => Failure::new(Exit::Problems, e.to_string()),
        GcError::Store(e) => backends::failure(&e),
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
            "removed_entries": report.removed_entries.iter().map(|e| json!({
                "name": e.name, "size": e.size,
            })).collect::<Vec<_>>(),
            "freed_entry_bytes": report.freed_entry_bytes,
            "kept_entries": report.kept_entries,
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
        say!("  sha256:{}  {} bytes", printable(&blob.address), blob.size);
    }
    say!(
        "summary cache: {verb} {}, {} bytes; kept {}",
        count(report.removed_entries.len(), "entry"),
        report.freed_entry_bytes,
        report.kept_entries
    );
    for entry in &report.removed_entries {
        say!("  {}  {} bytes", printable(&entry.name), entry.size);
    }
    Ok(Exit::Ok)
}
