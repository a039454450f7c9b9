//! `resolve` and `gc`: the blobs behind pointers, read and collected (`verify` is in
//! `verify.rs`).

use crate::backends;
use crate::fail::{Exit, Failure, Outcome};
use crate::output::{count, json_safe, print_json, printable, printable_lines, progress};
use crate::target::{Access, Database};
use compaction::sqlite::{GcError, GcOptions};
use compaction::{block_on, Pointer, StoreError};
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
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
        Err(other) => return Err(backends::failure(&other)),
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
            json_safe(&serde_json::to_string_pretty(&value).unwrap_or_default())
        ),
        // Not JSON, on a terminal: text with every control and bidi character escaped.
        None if std::io::stdout().is_terminal() => writeln!(
            stdout,
            "{}",
            printable_lines(&String::from_utf8_lossy(&bytes))
        ),
        // Not JSON, into a pipe or a file: the bytes as they are.
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
