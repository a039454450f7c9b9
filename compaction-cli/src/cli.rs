//! The command line's grammar: every command, argument and flag, with the help text users read.

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::time::Duration;

const AFTER_HELP: &str = "\
DATABASE is the path of a SQLite file written by `SqliteStore` / `SqliteLedger`, or (in a build \
with the `postgres` feature) a postgres://user@host/db URL with --namespace NAME: every command \
works on either.

Exit codes:
  0  success
  1  problems found (verify), or the command refused (reconcile on a settled key or a recent
     claim, gc on an unreadable checkpoint, resolve of a blob that fails verification)
  2  usage error (bad arguments, malformed pointer, a handle without --agent, an offset past
     the end)
  3  cannot open the database (missing, not a compaction database, newer schema, locked)
  4  not found (no such agent, effect key, blob or handle)

verify checks keyed checkpoint seals when COMPACTION_SEAL_KEYS holds the agents' keys as \
ID=HEX[,ID=HEX...] (an environment variable, so no secret shows in the process list).

Every read command takes --json and prints one JSON object (shapes in compaction-cli/README.md).";

/// Inspect and operate a compaction database: checkpoints, effects, blobs.
#[derive(Debug, Parser)]
#[command(name = "compaction", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The database argument every command takes.
#[derive(Debug, Args)]
pub struct Target {
    /// The database: a SQLite file path, or a postgres:// URL (with --namespace).
    #[arg(value_name = "DATABASE")]
    pub database: String,
    /// The namespace (tenant) inside a PostgreSQL database.
    #[arg(long, env = "COMPACTION_NAMESPACE", value_name = "NAME")]
    pub namespace: Option<String>,
}

impl Target {
    /// The database it names.
    pub fn open(&self) -> Result<crate::target::Database, crate::fail::Failure> {
        crate::target::Database::locate(&self.database, self.namespace.as_deref())
    }
}

/// The `--json` flag of read commands.
#[derive(Debug, Args, Clone, Copy)]
pub struct Format {
    /// Print one JSON object instead of text (a stable shape, see compaction-cli/README.md).
    #[arg(long)]
    pub json: bool,
}

/// Every command.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Every checkpoint: agent, state type, saved at, tokens/budget, what was kept, spilled,
    /// summarized and evicted; for a session's agent (a `#[transcript]`), how many messages
    /// were folded, tombstoned and spilled.
    Agents {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        format: Format,
    },
    /// The rendered window of an agent's latest checkpoint, or, when its state has a
    /// `#[transcript]`, every message the model received (the window first; stubs, tombstones
    /// and folds with their handles), control characters escaped. With --budget, where the
    /// window's tokens go. Says when the ledger's status of an effect has moved on from the
    /// checkpoint's.
    Show {
        #[command(flatten)]
        target: Target,
        /// The agent id the checkpoint was saved under.
        agent: String,
        /// Instead of the window: a bar chart of tokens per class and per field (largest first)
        /// and the pointers of everything that left the window.
        #[arg(long)]
        budget: bool,
        #[command(flatten)]
        format: Format,
    },
    /// The effect ledger's records, in record order.
    Effects {
        #[command(flatten)]
        target: Target,
        /// Only effects with this status (`unknown` is the to-do list after a crash).
        #[arg(long, value_enum)]
        status: Option<StatusArg>,
        /// Only effects of this scope (an `#[effect]` field's path or its `scope = ".."`; the
        /// default scope is the empty string).
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
        #[command(flatten)]
        format: Format,
    },
    /// Every recorded status transition of one effect, oldest first, with who and why; then
    /// the claims that were refused (the key committed or unknown), read from the sessions'
    /// answers in the agents' checkpoints, since a ledger records no refusal.
    History {
        #[command(flatten)]
        target: Target,
        /// The effect's idempotency key.
        key: String,
        /// The key's scope, when it is in more than one.
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
        #[command(flatten)]
        format: Format,
    },
    /// Settle an effect whose outcome is unknown, after checking the outside world.
    Reconcile {
        #[command(flatten)]
        target: Target,
        /// The effect's idempotency key.
        key: String,
        /// What the outside world shows: `committed` (it happened) or `not-started` (it did
        /// not; the agent may run it again).
        #[arg(long, value_enum)]
        to: SettleArg,
        /// Why: what you checked. Kept in the effect's history.
        #[arg(long)]
        note: String,
        /// Who settles it (default: $USER).
        #[arg(long, env = "USER", value_name = "NAME")]
        by: Option<String>,
        /// The key's scope, when it is in more than one.
        #[arg(long, value_name = "SCOPE")]
        scope: Option<String>,
        /// Also overwrite a status that is not `unknown` (committed or not started), or settle a
        /// claim more recent than --min-claim-age.
        #[arg(long)]
        force: bool,
        /// An `unknown` key claimed less than this long ago may still be running: settling it
        /// needs --force (e.g. `90s`, `30m`, `1h`).
        #[arg(long, default_value = "10m", value_parser = parse_duration)]
        min_claim_age: Duration,
    },
    /// Print the bytes behind a store:// pointer, or behind a handle (`p4`) an agent's newest
    /// request shows (with --agent), verified against their hash (pretty JSON when they are
    /// JSON). With --offset or --max-bytes: one part of the text, cut as the pointer tool cuts
    /// it (never inside a character), and where the next part starts (on stderr; in the JSON's
    /// `next_offset`).
    Resolve {
        #[command(flatten)]
        target: Target,
        /// store://sha256:<64 hex digits>, or a handle such as p4 (with --agent)
        pointer: String,
        /// The agent whose newest checkpoint shows the handle (its handle table maps it to
        /// the full address).
        #[arg(long, value_name = "AGENT")]
        agent: Option<String>,
        /// Print the part of the text that starts at this byte (rounded down to a character's
        /// start), as the pointer tool's `offset`.
        #[arg(long, value_name = "BYTES")]
        offset: Option<usize>,
        /// The most bytes of a part (default 16384, the pointer tool's; at least 4).
        #[arg(long, value_name = "BYTES", value_parser = parse_max_bytes)]
        max_bytes: Option<usize>,
        #[command(flatten)]
        format: Format,
    },
    /// Re-hash every blob, verify every checkpoint and that every pointer it holds resolves,
    /// read every effect; list every problem (exit 1 when there is one).
    Verify {
        #[command(flatten)]
        target: Target,
        #[command(flatten)]
        format: Format,
    },
    /// Remove blobs no checkpoint refers to (never one a saved checkpoint needs, even while
    /// agents write); report what was removed and the space freed.
    Gc {
        #[command(flatten)]
        target: Target,
        /// Report what would be removed; remove nothing.
        #[arg(long)]
        dry_run: bool,
        /// Keep unreferenced blobs stored less than this long ago (e.g. `90s`, `30m`, `1h`,
        /// `0s`): an agent stores its blobs before it saves the checkpoint that refers to them.
        #[arg(long, default_value = "1h", value_parser = parse_duration)]
        min_age: Duration,
        #[command(flatten)]
        format: Format,
    },
}

/// A status to filter effects by.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum StatusArg {
    /// `not_started`
    NotStarted,
    /// `committed`
    Committed,
    /// `unknown`
    Unknown,
}

/// The outcome an operator settles an effect to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SettleArg {
    /// It happened.
    Committed,
    /// It did not happen.
    NotStarted,
}

/// A part's size: a number of bytes, at least 4 (one character always fits, as in the pointer
/// tool).
fn parse_max_bytes(text: &str) -> Result<usize, String> {
    match text.trim().parse::<usize>() {
        Ok(bytes) if bytes >= 4 => Ok(bytes),
        Ok(_) => Err("at least 4 bytes (one UTF-8 character always fits in a part)".into()),
        Err(_) => Err(format!("`{text}` is not a number of bytes")),
    }
}

/// `90s`, `30m`, `2h`, `1d` or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let number: u64 = number
        .parse()
        .map_err(|_| format!("`{text}` is not a duration (e.g. 90s, 30m, 1h, 1d)"))?;
    let seconds = match unit {
        "" | "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(format!("unknown unit `{unit}` (use s, m, h or d)")),
    };
    Ok(Duration::from_secs(number.saturating_mul(seconds)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units_and_refuse_garbage() {
        assert_eq!(parse_duration("90"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("30m"), Ok(Duration::from_secs(1800)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("1d"), Ok(Duration::from_secs(86_400)));
        assert!(parse_duration("1w").is_err());
        assert!(parse_duration("h").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn the_grammar_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
