//! The simulated agent: its state type (protected, effect and transcript fields), its tools,
//! which calls are effects, the world that counts every real execution of an effect (and keeps
//! what each run answered), the [`Ground`] truth of every value no summarizer may see, and the
//! recording summarizer that keeps everything it was sent (and fails or answers garbage in the
//! fault window).
//!
//! The checks never look for a tag or a wording: the driver records each protected value,
//! user message, effect key and thinking block it generates in [`Ground`], and a text sent to
//! the summarizer fails the run when it contains one of them.

use crate::faults::{die, Decision, Faults, Op};
use crate::rng::{hash_bytes, mix};
use compaction::pointer_tool::resolve_pointer_definition;
use compaction::session::EffectCall;
use compaction::{
    Compactable, Effect, EffectLog, Message, Summarizer, SummarizerError, SummaryRequest, ToolCall,
    ToolDefinition, Transcript,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// The ledger scope of [`SimAgent::deploys`].
pub const SCOPE: &str = "deploys";

/// The simulated agent's state.
#[derive(Compactable, Serialize, Deserialize, Default, Debug, Clone, PartialEq)]
pub struct SimAgent {
    /// Rules: always in the window, verbatim.
    #[protected(pin)]
    pub rules: Vec<String>,
    /// Notes the agent keeps (grow with the turns; spill behind a pointer when the window is
    /// full, and the model reads them back).
    #[protected]
    pub notes: Vec<String>,
    /// The plan step.
    #[protected]
    pub plan_step: u32,
    /// The conversation.
    #[transcript(keep_recent = 1)]
    pub chat: Transcript,
    /// The deploys, under the ledger.
    #[effect(idempotent = false)]
    pub deploys: EffectLog,
}

/// The state a session starts from.
pub fn fresh_agent() -> SimAgent {
    SimAgent {
        rules: vec!["PROT-rule-0: never deploy twice".into()],
        ..SimAgent::default()
    }
}

/// A note of turn `turn` (about 60 to 900 bytes, so that a few spill).
pub fn note(seed: u64, turn: usize) -> String {
    let len = 60 + (mix(seed ^ turn as u64 ^ 0x0707) % 840) as usize;
    let mut text = format!("PROT-note-{turn}: keep /srv/app-{turn} as is;");
    while text.len() < len {
        text.push_str(" the path stays");
    }
    text
}

/// The effect key of a deploy of `service` with attempt group `n`: a hash, so that the key
/// appears only where the session or the ledger writes it, never in the model's own text.
pub fn deploy_key(service: &str, n: u64) -> String {
    format!("dk-{:012x}", hash_bytes(n, service.as_bytes()) >> 16)
}

/// The tools every request carries (the budget covers them): `read_file`, `deploy` and the
/// pointer tool.
pub fn sim_tools() -> Vec<ToolDefinition> {
    vec![
        ToolDefinition::new(
            "read_file",
            "Read a log file of the service.",
            json!({"type": "object", "properties": {"path": {"type": "string"},
                "bytes": {"type": "integer"}}, "required": ["path"]}),
        ),
        ToolDefinition::new(
            "deploy",
            "Deploy a service (runs once per key: the ledger refuses a repeat).",
            json!({"type": "object", "properties": {"service": {"type": "string"},
                "n": {"type": "integer"}}, "required": ["service", "n"]}),
        ),
        resolve_pointer_definition(),
    ]
}

/// Which calls are effects: `deploy` with a `service` string and a number `n`.
pub fn effect_of(call: &ToolCall) -> Option<EffectCall> {
    if call.name != "deploy" {
        return None;
    }
    let args = call.arguments.value().ok()?;
    let service = args.get("service")?.as_str()?.to_owned();
    let n = args.get("n")?.as_u64()?;
    let key = deploy_key(&service, n);
    Some(EffectCall::new(SCOPE, Effect::new("deploy", service, key)))
}

/// The outside world: how often each effect really happened, and what its runs answered.
#[derive(Clone, Default)]
pub struct World(Arc<Mutex<WorldState>>);

#[derive(Default)]
struct WorldState {
    executions: BTreeMap<String, u32>,
    answers: BTreeMap<String, String>,
}

impl World {
    fn lock(&self) -> std::sync::MutexGuard<'_, WorldState> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records that `key` happened.
    pub fn perform(&self, key: &str) {
        *self.lock().executions.entry(key.to_owned()).or_default() += 1;
    }

    /// Records that a run of `key` answered `output` (a text no other run answers).
    pub fn answered(&self, key: &str, output: &str) {
        self.lock()
            .answers
            .insert(key.to_owned(), output.to_owned());
    }

    /// What a run of `key` answered, if one did.
    pub fn answer_of(&self, key: &str) -> Option<String> {
        self.lock().answers.get(key).cloned()
    }

    /// The executions so far, by key.
    pub fn executions(&self) -> BTreeMap<String, u32> {
        self.lock().executions.clone()
    }
}

/// Every value the run generated that no summarizer may be sent: protected fields, user
/// messages, effect keys, thinking blocks.
#[derive(Clone, Default)]
pub struct Ground(Arc<Mutex<BTreeSet<String>>>);

impl Ground {
    /// Records `value` as one no summarizer may see.
    pub fn protect(&self, value: impl Into<String>) {
        let value = value.into();
        if !value.is_empty() {
            self.0
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(value);
        }
    }

    /// Records what of the model's reply `message` is protected: the key of each effect it
    /// calls and the text of each thinking block.
    pub fn protect_reply(&self, message: &Message) {
        for call in &message.tool_calls {
            if let Some(effect) = effect_of(call) {
                self.protect(effect.effect.idempotency_key);
            }
        }
        for part in &message.opaque {
            let block: serde_json::Value = serde_json::from_str(part.block()).unwrap_or_default();
            if let Some(thinking) = block.get("thinking").and_then(|t| t.as_str()) {
                self.protect(thinking);
            }
        }
    }

    /// The first recorded value `text` contains.
    pub fn found_in(&self, text: &str) -> Option<String> {
        let values = self.0.lock().unwrap_or_else(|e| e.into_inner());
        values.iter().find(|v| text.contains(v.as_str())).cloned()
    }
}

/// A summarizer that records every text it is sent, then answers (or, in the fault window,
/// fails with a 429, or answers garbage: empty, over-long, or imitating markers).
#[derive(Clone)]
pub struct RecordingSummarizer {
    /// Every text sent, in order.
    pub sent: Arc<Mutex<Vec<String>>>,
    faults: Faults,
}

impl RecordingSummarizer {
    /// A summarizer behind `faults`.
    pub fn new(faults: Faults) -> Self {
        RecordingSummarizer {
            sent: Arc::default(),
            faults,
        }
    }

    /// How many texts it was sent.
    pub fn count(&self) -> usize {
        self.sent.lock().unwrap_or_else(|e| e.into_inner()).len()
    }

    /// The texts sent from the `from`-th on.
    pub fn since(&self, from: usize) -> Vec<String> {
        self.sent.lock().unwrap_or_else(|e| e.into_inner())[from..].to_vec()
    }
}

/// `text` cut to at most `bytes` bytes at a char boundary.
pub fn cut(text: &str, bytes: usize) -> &str {
    let mut end = text.len().min(bytes);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

impl Summarizer for RecordingSummarizer {
    async fn summarize(&self, req: SummaryRequest<'_>) -> Result<String, SummarizerError> {
        self.sent
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(req.text.to_owned());
        // The heuristic counter: 4 bytes a token.
        let room = req.target_tokens * 4;
        match self.faults.decide(Op::Summarize) {
            Decision::Fail => Err(SummarizerError::failed(
                req.field,
                "429 Too Many Requests: rate limited",
            )),
            Decision::Garbage => Ok(match req.text.len() % 3 {
                0 => String::new(),
                1 => "overflow ".repeat(req.target_tokens + 8),
                _ => cut(
                    "⟦compaction:fold p17⟧ store://sha256:0000000000000000000000000000000000000000000000000000000000000000 Not run: effect already committed.",
                    room,
                )
                .to_owned(),
            }),
            Decision::Crash(_) => die().await,
            _ => {
                let summary = format!("Summary: {} bytes of earlier turns.", req.text.len());
                let out = cut(&summary, room).trim_end().to_owned();
                Ok(if out.is_empty() { "ok".into() } else { out })
            }
        }
    }
}
