//! `history`'s refused claims. A ledger records no refusal: a `begin` on a committed or unknown
//! key is refused by the state machine and writes nothing, so no history holds it. What does
//! hold it is the conversation: a `Session` answers such a call with a tool result in its own
//! words ("Not run: effect `KEY` ..."). This module reads those answers from the agents' latest
//! checkpoints, for the calls linked to the effect's key and scope, and says which claims were
//! refused and why. Calls folded or tombstoned away are not readable and are counted as such.

use crate::backend::Store;
use crate::output::printable;
use crate::target::{Access, Database};
use compaction::{CompactionError, Message};
use serde_json::{json, Value};

/// One call of the effect that the ledger refused to claim.
pub struct RefusedCall {
    agent_id: String,
    /// The index of the calling message in the request the checkpoint holds.
    message: usize,
    call_id: String,
    tool: String,
    /// `already_committed`, `outcome_unknown`, `refused` or `ledger_unreachable`.
    reason: &'static str,
    /// The answer, whole.
    answer: String,
}

/// What the conversations show of an effect's claims.
pub enum Refusals {
    /// The checkpoints could not be read (no store in the database, a backend failure).
    Unavailable(String),
    /// Read.
    Read {
        /// Calls of the effect found in the agents' latest checkpoints.
        calls: usize,
        /// Of them, calls whose answer is not in the request (folded, tombstoned, or not
        /// answered yet): whether their claim was refused cannot be told.
        unreadable: usize,
        /// Checkpoints skipped because they fail verification or do not parse.
        skipped_checkpoints: usize,
        /// The refused claims.
        refused: Vec<RefusedCall>,
    },
}

/// Why the session did not run the call, from its answer's words; `None`: the call ran.
fn reason(key: &str, answer: &str) -> Option<&'static str> {
    let own = format!("Not run: effect `{key}` (");
    if answer.starts_with(&own) {
        if answer.contains(") is already committed: it happened before") {
            return Some("already_committed");
        }
        if answer.contains(") was started before and its outcome is unknown") {
            return Some("outcome_unknown");
        }
    }
    if answer.starts_with(&format!(
        "Not run: the effect ledger refused effect `{key}`: "
    )) {
        return Some("refused");
    }
    if answer.starts_with(&format!(
        "Not run: the effect ledger could not be reached to claim effect `{key}`,"
    )) {
        return Some("ledger_unreachable");
    }
    None
}

/// Whether a message's content is one of the window's markers for content that left it.
fn left_the_window(content: &str) -> bool {
    content.starts_with("⟦compaction:")
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
        let (mut calls, mut unreadable, mut skipped, mut refused) = (0, 0, 0, Vec::new());
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
                    let answer = answer_to(&messages[index + 1..], &call.id);
                    let Some(answer) = answer.filter(|a| !left_the_window(a)) else {
                        unreadable += 1;
                        continue;
                    };
                    if let Some(reason) = reason(key, answer) {
                        refused.push(RefusedCall {
                            agent_id: info.agent_id.clone(),
                            message: index,
                            call_id: call.id.clone(),
                            tool: call.name.clone(),
                            reason,
                            answer: answer.to_string(),
                        });
                    }
                }
            }
        }
        Ok(Refusals::Read {
            calls,
            unreadable,
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
                skipped_checkpoints,
                refused,
            } => json!({
                "recorded_by_ledger": false,
                "source": "conversations",
                "calls": calls,
                "unreadable_calls": unreadable,
                "skipped_checkpoints": skipped_checkpoints,
                "claims": refused.iter().map(|r| json!({
                    "agent_id": r.agent_id,
                    "message": r.message,
                    "call_id": r.call_id,
                    "tool": r.tool,
                    "reason": r.reason,
                    "answer": r.answer,
                })).collect::<Vec<_>>(),
            }),
        }
    }

    /// The text `history` appends.
    pub fn to_text(&self) -> String {
        let mut out = String::from(
            "\nrefused claims: the ledger records none (a refused claim writes nothing); read \
             from the sessions' answers in the agents' latest checkpoints\n",
        );
        match self {
            Refusals::Unavailable(why) => {
                out.push_str(&format!("  not available: {}\n", printable(why)));
            }
            Refusals::Read {
                calls,
                unreadable,
                skipped_checkpoints,
                refused,
            } => {
                out.push_str(&format!(
                    "  {calls} calls of this effect in the conversations, {} refused, \
                     {unreadable} whose answer left the window",
                    refused.len()
                ));
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

/// The content of the tool result answering `call_id` among `later` messages.
fn answer_to<'a>(later: &'a [Message], call_id: &str) -> Option<&'a str> {
    later
        .iter()
        .find(|m| m.tool_call_id.as_deref() == Some(call_id))
        .map(|m| m.content.as_str())
}

#[cfg(test)]
mod tests {
    use super::reason;

    #[test]
    fn only_the_sessions_words_for_this_key_count_as_a_refusal() {
        let committed = "Not run: effect `k1` (deploy on prod) is already committed: it happened \
                         before, and running it again would do it twice.";
        assert_eq!(reason("k1", committed), Some("already_committed"));
        assert_eq!(reason("k2", committed), None, "another key's refusal");
        let unknown = "Not run: effect `k1` (deploy on prod) was started before and its outcome \
                       is unknown (it may or may not have happened).";
        assert_eq!(reason("k1", unknown), Some("outcome_unknown"));
        assert_eq!(
            reason(
                "k1",
                "Not run: the effect ledger refused effect `k1`: duplicate key."
            ),
            Some("refused")
        );
        assert_eq!(reason("k1", "deployed ok; Not run: effect `k1` ("), None);
    }
}
