//! `history`'s refused claims. A ledger records no refusal: a `begin` on a committed or unknown
//! key is refused by the state machine and writes nothing, so no history holds it. What does
//! hold it is the session's record: when `Session::run_effect` answers a call, the tool result
//! it pushes carries what it did (`Message::effect_answer`: ran, or not run and why), saved
//! and sealed with the checkpoint. This module reads those records from the agents' latest
//! checkpoints, for the calls linked to the effect's key and scope, and says which claims were
//! refused and why. Never the answer's words: a tool's output can imitate the session's.
//! An answer the request shows as a marker (paged or tombstoned in place) is read back whole
//! from the store (its handle names the blob). Calls whose answer is not in the request
//! (folded, or not answered yet) are counted as unreadable; answers without a record (written
//! by the agent itself, or saved by a version that kept none) are counted as unrecorded:
//! whether their claim was refused is unknown.

use crate::backend::{AnyCheckpoint, Store};
use crate::output::printable;
use crate::target::{Access, Database};
use compaction::transcript::Marker;
use compaction::{CompactionError, Message, Role};
use serde_json::{json, Value};

/// One call of the effect that the ledger refused to claim.
pub struct RefusedCall {
    agent_id: String,
    /// The index of the calling message in the request the checkpoint holds.
    message: usize,
    call_id: String,
    tool: String,
    /// `already_committed`, `outcome_unknown` or `refused` (`EffectAnswer::as_str`).
    reason: &'static str,
    /// The answer, whole: read back from the store when the request shows a marker for it.
    answer: String,
    /// Whether the request shows a marker in the answer's place (a page or a tombstone) and
    /// `answer` was read back from the blob its handle names.
    read_back: bool,
}

/// What the conversations show of an effect's claims.
pub enum Refusals {
    /// The checkpoints could not be read (no store in the database, a backend failure).
    Unavailable(String),
    /// Read.
    Read {
        /// Calls of the effect found in the agents' latest checkpoints.
        calls: usize,
        /// Of them, calls whose answer is not in the request (folded, or not answered yet):
        /// whether their claim was refused cannot be told.
        unreadable: usize,
        /// Of them, calls whose answer carries no record of the session (answered outside
        /// `run_effect`, or saved by a version that kept none): whether their claim was
        /// refused is unknown, and never guessed from the answer's words.
        unrecorded: usize,
        /// Checkpoints skipped because they fail verification or do not parse.
        skipped_checkpoints: usize,
        /// The refused claims.
        refused: Vec<RefusedCall>,
    },
}

impl Refusals {
    /// The claims of `key` in `scope` in every agent's latest checkpoint of `db`.
    pub fn find(db: &Database, scope: &str, key: &str) -> Refusals {
        match db.store(Access::Read) {
            Ok(store) => Self::read(&store, scope, key)
                .unwrap_or_else(|failure| Refusals::Unavailable(failure.message)),
            Err(failure) => Refusals::Unavailable(failure.message),
        }
    }

    fn read(store: &Store, scope: &str, key: &str) -> Result<Refusals, crate::fail::Failure> {
        let (mut calls, mut unreadable, mut unrecorded) = (0, 0, 0);
        let (mut skipped, mut refused) = (0, Vec::new());
        for info in store.list_checkpoints()? {
            let compacted = match store.load_checkpoint(&info.agent_id) {
                Ok(Some(compacted)) if compacted.verify_seal() => compacted,
                Ok(None) => continue,
                Ok(Some(_)) | Err(CompactionError::Integrity { .. }) => {
                    skipped += 1;
                    continue;
                }
                Err(CompactionError::Store(e)) => return Err(crate::backends::failure(&e)),
                Err(_) => {
                    skipped += 1;
                    continue;
                }
            };
            if compacted.request_tokens().is_none() {
                continue; // no transcript
            }
            let messages = compacted.messages();
            for (index, message) in messages.iter().enumerate() {
                for call in &message.tool_calls {
                    let linked = call.effect.as_deref() == Some(key)
                        && call.effect_scope.as_deref().unwrap_or("") == scope;
                    if !linked {
                        continue;
                    }
                    calls += 1;
                    let Some(answer) = answer_to(&messages[index + 1..], &call.id) else {
                        unreadable += 1;
                        continue;
                    };
                    let Some(record) = answer.effect_answer() else {
                        unrecorded += 1;
                        continue;
                    };
                    if !record.ran() {
                        let whole = answer_behind_marker(store, &compacted, &answer.content);
                        refused.push(RefusedCall {
                            agent_id: info.agent_id.clone(),
                            message: index,
                            call_id: call.id.clone(),
                            tool: call.name.clone(),
                            reason: record.as_str(),
                            read_back: whole.is_some(),
                            answer: whole.unwrap_or_else(|| answer.content.clone()),
                        });
                    }
                }
            }
        }
        Ok(Refusals::Read {
            calls,
            unreadable,
            unrecorded,
            skipped_checkpoints: skipped,
            refused,
        })
    }

    /// `refused_claims` in `history --json`.
    pub fn to_json(&self) -> Value {
        match self {
            Refusals::Unavailable(why) => json!({
                "recorded_by_ledger": false,
                "unavailable": why,
                "claims": [],
            }),
            Refusals::Read {
                calls,
                unreadable,
                unrecorded,
                skipped_checkpoints,
                refused,
            } => json!({
                "recorded_by_ledger": false,
                "source": "session_records",
                "calls": calls,
                "unreadable_calls": unreadable,
                "unrecorded_calls": unrecorded,
                "skipped_checkpoints": skipped_checkpoints,
                "claims": refused.iter().map(|r| json!({
                    "agent_id": r.agent_id,
                    "message": r.message,
                    "call_id": r.call_id,
                    "tool": r.tool,
                    "reason": r.reason,
                    "answer": r.answer,
                    "answer_read_back": r.read_back,
                })).collect::<Vec<_>>(),
            }),
        }
    }

    /// The text `history` appends.
    pub fn to_text(&self) -> String {
        let mut out = String::from(
            "\nrefused claims: the ledger records none (a refused claim writes nothing); read \
             from the record each session keeps with its answers, in the agents' latest \
             checkpoints\n",
        );
        match self {
            Refusals::Unavailable(why) => {
                out.push_str(&format!("  not available: {}\n", printable(why)));
            }
            Refusals::Read {
                calls,
                unreadable,
                unrecorded,
                skipped_checkpoints,
                refused,
            } => {
                out.push_str(&format!(
                    "  {calls} calls of this effect in the conversations, {} refused, \
                     {unreadable} whose answer left the window",
                    refused.len()
                ));
                if *unrecorded > 0 {
                    out.push_str(&format!(
                        ", {unrecorded} whose answer carries no record of the session (answered \
                         outside run_effect, or saved by an older version): refused or not is \
                         unknown"
                    ));
                }
                if *skipped_checkpoints > 0 {
                    out.push_str(&format!(
                        ", {skipped_checkpoints} checkpoints skipped (they fail verification)"
                    ));
                }
                out.push('\n');
                if !refused.is_empty() {
                    let rows: Vec<Vec<String>> = refused
                        .iter()
                        .map(|r| {
                            vec![
                                format!("  {}", printable(&r.agent_id)),
                                format!("#{}", r.message),
                                printable(&r.call_id),
                                printable(&r.tool),
                                r.reason.to_string(),
                                printable(&shortened(&r.answer)),
                            ]
                        })
                        .collect();
                    out.push_str(&crate::output::table(
                        &["  AGENT", "MESSAGE", "CALL", "TOOL", "REASON", "ANSWER"],
                        &rows,
                    ));
                }
            }
        }
        out
    }
}

/// The first `ANSWER_CHARS` characters of an answer, for a table cell (`--json` has it whole).
fn shortened(answer: &str) -> String {
    const ANSWER_CHARS: usize = 160;
    match answer.char_indices().nth(ANSWER_CHARS) {
        Some((at, _)) => format!("{}...", &answer[..at]),
        None => answer.to_string(),
    }
}

/// The whole answer behind a marker compaction put in its place: a compaction point may page
/// (or tombstone) a refusal's answer like any tool result, and the request then shows the
/// marker, whose handle names the blob in this checkpoint's table. `None` when `content` is no
/// such marker (`Marker::of`, which never reads an escaped imitation as one), or its blob is
/// missing, fails verification, is not text or not the size the marker gives: the request's
/// text is shown then.
fn answer_behind_marker(store: &Store, compacted: &AnyCheckpoint, content: &str) -> Option<String> {
    let (handle, bytes) = match Marker::of(content)? {
        Marker::Paged { handle, bytes, .. } | Marker::Tombstone { handle, bytes } => {
            (handle, bytes)
        }
        _ => return None,
    };
    let pointer = compacted.handles()?.pointer(handle)?;
    let whole = store.get(&pointer.hash()).ok()?;
    (whole.len() == bytes).then_some(())?;
    String::from_utf8(whole).ok()
}

/// The tool result answering `call_id` among `later` messages.
fn answer_to<'a>(later: &'a [Message], call_id: &str) -> Option<&'a Message> {
    later
        .iter()
        .find(|m| m.role == Role::Tool && m.tool_call_id.as_deref() == Some(call_id))
}
