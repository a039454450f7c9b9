//! The model behind the library's own HTTP clients (feature `http`): the scripted model's reply
//! goes out from a loopback server (the facade's test server, `compaction-fixtures`) in the
//! run's wire, Anthropic's Messages API (whole or streamed) or OpenAI's chat completions, and
//! comes back through `AnthropicClient::send` / `stream` or `OpenAiClient::chat` /
//! `chat_stream`. In the fault
//! window the server first answers what the fault plan says: a 429 or 529 with any
//! `retry-after` (huge, negative, not a number), a 401 that echoes the API key, a stream cut at
//! any byte, an `error` event mid-stream that echoes the key, malformed SSE or JSON.
//!
//! What reaches the checks: the reply the client assembled (the driver pushes it), or the
//! client's error (its `Display` and `Debug`, which must not hold the key).

use crate::agent::SimAgent;
use crate::faults::{Decision, Faults, Op};
use compaction::anthropic::AnthropicClient;
use compaction::openai::OpenAiClient;
use compaction::session::{Session, SessionRequest};
use compaction::Message;
use compaction_fixtures::openai_server::{anthropic_sse, FakeOpenAi, Reply};
use serde_json::{json, Value};
use std::time::Duration;

/// A reply as the client returned it, ready for `Session::push_response`.
pub enum WireReply {
    /// Anthropic's.
    Anthropic(Box<compaction::anthropic::AnthropicResponse>),
    /// OpenAI's chat completion.
    OpenAi(Box<compaction::openai::async_openai::types::chat::CreateChatCompletionResponse>),
}

impl WireReply {
    /// Pushes it into `session` (the conversion is the library's).
    pub fn push(
        self,
        session: &mut Session<SimAgent>,
    ) -> Result<(), compaction::session::SessionError> {
        match self {
            WireReply::Anthropic(reply) => session.push_response(*reply),
            WireReply::OpenAi(reply) => session.push_response(*reply),
        }
    }
}

/// A client's error, as text: what the checks read for a leaked key.
#[derive(Debug, Clone)]
pub struct WireError {
    /// `Display`.
    pub display: String,
    /// `Debug`.
    pub debug: String,
}

impl WireError {
    fn of(error: &(impl std::fmt::Display + std::fmt::Debug)) -> Self {
        WireError {
            display: error.to_string(),
            debug: format!("{error:?}"),
        }
    }
}

/// The run's model server and its two clients.
pub struct ModelServer {
    server: FakeOpenAi,
    anthropic: AnthropicClient,
    openai: OpenAiClient,
    /// The API key the clients send (and the server echoes in its errors).
    pub key: String,
}

impl ModelServer {
    /// A server on a free loopback port, and clients with a key of the run's own.
    pub fn start(seed: u64) -> Result<Self, String> {
        let server = FakeOpenAi::start([]).map_err(|e| format!("the model server: {e}"))?;
        let key = format!(
            "sk-sim-{:016x}{:016x}",
            seed,
            crate::rng::mix(seed ^ 0x4b45)
        );
        // Short waits: a retry the server asks for within 5 ms is made, a longer one ends the
        // call at once (the documented `max_backoff` rule), so a run never sleeps long.
        let anthropic = AnthropicClient::new(key.clone())
            .base_url(server.root_url())
            .max_retries(2)
            .max_backoff(Duration::from_millis(5))
            .timeout(Duration::from_secs(30));
        let openai = OpenAiClient::new(key.clone())
            .base_url(server.base_url())
            .max_retries(2)
            .max_backoff(Duration::from_millis(5))
            .timeout(Duration::from_secs(30));
        watch_logs(&key);
        Ok(ModelServer {
            server,
            anthropic,
            openai,
            key,
        })
    }

    /// `Debug` of both clients (which must not hold the key).
    pub fn clients_debug(&self) -> String {
        format!("{:?} {:?}", self.anthropic, self.openai)
    }

    /// Sends `request` through the run's client; the server answers `reply` (the scripted
    /// model's), after what the fault plan puts first.
    pub async fn call(
        &self,
        faults: &Faults,
        request: &SessionRequest,
        reply: &Message,
        anthropic: bool,
    ) -> Result<WireReply, WireError> {
        let stream = faults.draw(2) == 0;
        let good = match (anthropic, stream) {
            (true, true) => Reply::Sse(anthropic_stream(reply)),
            (true, false) => Reply::Raw(anthropic_json(reply).to_string()),
            (false, true) => Reply::Sse(openai_stream(reply)),
            (false, false) => Reply::Message(openai_message(reply)),
        };
        self.server.clear_script();
        if let Some(fault) = self.fault(faults, reply, anthropic, stream) {
            self.server.push([fault]);
        }
        self.server.push([good.clone(), good]);
        if anthropic {
            let wire = request
                .anthropic_request("sim-model", 1024)
                .map_err(|e| WireError::of(&e))?;
            let answer = if stream {
                self.anthropic.stream(&wire).await
            } else {
                self.anthropic.send(&wire).await
            };
            answer
                .map(|r| WireReply::Anthropic(Box::new(r)))
                .map_err(|e| WireError::of(&e))
        } else {
            let wire = request.openai_chat_request("sim-model");
            let answer = if stream {
                self.openai.chat_stream(&wire).await
            } else {
                self.openai.chat(&wire).await
            };
            answer
                .map(|r| WireReply::OpenAi(Box::new(r)))
                .map_err(|e| WireError::of(&e))
        }
    }

    /// What the server answers first, if the fault plan says so.
    fn fault(
        &self,
        faults: &Faults,
        reply: &Message,
        anthropic: bool,
        stream: bool,
    ) -> Option<Reply> {
        if faults.decide(Op::ModelCall) != Decision::Fail {
            return None;
        }
        let key = &self.key;
        let waits = [
            "0",
            "1",
            "1e300",
            "-1",
            "NaN",
            "inf",
            "99999999999",
            "soon",
            "",
        ];
        let wait = waits[faults.draw(waits.len() as u64) as usize].to_owned();
        Some(match faults.draw(8) {
            0 => Reply::StatusWith {
                status: 429,
                body: r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#
                    .into(),
                headers: vec![("retry-after".into(), wait)],
            },
            1 => Reply::StatusWith {
                status: 429,
                body: r#"{"error":{"message":"Rate limit reached","type":"rate_limit_error"}}"#
                    .into(),
                headers: vec![("retry-after-ms".into(), wait)],
            },
            2 => Reply::StatusWith {
                status: if anthropic { 529 } else { 503 },
                body:
                    r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
                        .into(),
                headers: vec![("retry-after".into(), wait)],
            },
            3 => Reply::StatusWith {
                status: 401,
                body: json!({"type": "error", "error": {"type": "authentication_error",
                    "message": format!("invalid x-api-key: {key}")}})
                .to_string(),
                headers: vec![],
            },
            4 if stream => {
                let whole = match anthropic {
                    true => anthropic_stream(reply),
                    false => openai_stream(reply),
                };
                let mut at = faults.draw(whole.len() as u64) as usize;
                while !whole.is_char_boundary(at) {
                    at -= 1;
                }
                Reply::Sse(whole[..at].to_owned())
            }
            5 if stream && !anthropic => {
                let start = openai_stream(&Message::assistant(""));
                let first = start.split("\n\n").next().unwrap_or_default();
                Reply::Sse(format!(
                    "{first}\n\ndata: {}\n\n",
                    json!({"error": {"type": "server_error",
                        "message": format!("upstream rejected {key} at byte {}", key.len())}})
                ))
            }
            5 if stream => {
                let start = anthropic_stream(&Message::assistant(""));
                let first = start.split("\n\n").next().unwrap_or_default();
                Reply::Sse(format!(
                    "{first}\n\nevent: error\ndata: {}\n\n",
                    json!({"type": "error", "error": {"type": "overloaded_error",
                        "message": format!("upstream rejected {key} at byte {}", key.len())}})
                ))
            }
            6 if stream && anthropic => Reply::Sse(format!(
                "event: message_start\ndata: {{\"type\":\n\n: {key}\n\ndata: ]]\n\n"
            )),
            6 if stream => Reply::Sse(format!("data: {{\"id\":\n\n: {key}\n\ndata: ]]\n\n")),
            _ => Reply::Raw(format!("{{\"id\": \"msg\", \"content\": [ {key}")),
        })
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        unwatch(&self.key);
    }
}

/// The content blocks of `reply` in Anthropic's shape: its thinking blocks as recorded, its
/// text, its tool calls.
fn anthropic_blocks(reply: &Message) -> Vec<Value> {
    let mut blocks: Vec<Value> = reply
        .opaque
        .iter()
        .filter_map(|p| serde_json::from_str(p.block()).ok())
        .collect();
    if !reply.content.is_empty() {
        blocks.push(json!({"type": "text", "text": reply.content}));
    }
    for call in &reply.tool_calls {
        let input = call.arguments.value().unwrap_or_else(|_| json!({}));
        blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input}));
    }
    blocks
}

fn stop_reason(reply: &Message) -> &'static str {
    if reply.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    }
}

fn anthropic_json(reply: &Message) -> Value {
    json!({
        "id": "msg_sim", "type": "message", "role": "assistant", "model": "sim-model",
        "content": anthropic_blocks(reply), "stop_reason": stop_reason(reply),
        "stop_sequence": null, "usage": {"input_tokens": 1, "output_tokens": 1},
    })
}

/// `reply` as Anthropic's event stream (the facade's test server's rendering).
fn anthropic_stream(reply: &Message) -> String {
    anthropic_sse(&anthropic_json(reply))
}

/// `reply` as an OpenAI chat completion's message (no thinking: the chat wire has none).
fn openai_message(reply: &Message) -> Value {
    let calls: Vec<Value> = reply
        .tool_calls
        .iter()
        .map(|c| {
            json!({"id": c.id, "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_text()}})
        })
        .collect();
    let mut message = json!({
        "role": "assistant",
        "content": (!reply.content.is_empty()).then_some(reply.content.as_str()),
    });
    if !calls.is_empty() {
        message["tool_calls"] = json!(calls);
    }
    message
}

/// `reply` as OpenAI's chat completion chunks (streaming guide: a first chunk with the role
/// and content, each tool call's start then its arguments, a last chunk with the finish
/// reason, `data: [DONE]`).
fn openai_stream(reply: &Message) -> String {
    let chunk = |delta: Value, finish: Option<&str>| {
        let chunk = json!({"id": "chatcmpl-sim", "object": "chat.completion.chunk",
            "created": 1, "model": "sim-model",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]});
        format!("data: {chunk}\n\n")
    };
    let content = (!reply.content.is_empty()).then_some(reply.content.as_str());
    let mut out = chunk(json!({"role": "assistant", "content": content}), None);
    for (index, call) in reply.tool_calls.iter().enumerate() {
        out.push_str(&chunk(
            json!({"tool_calls": [{"index": index, "id": call.id, "type": "function",
                "function": {"name": call.name, "arguments": ""}}]}),
            None,
        ));
        out.push_str(&chunk(
            json!({"tool_calls": [{"index": index,
                "function": {"arguments": call.arguments_text()}}]}),
            None,
        ));
    }
    let finish = match reply.tool_calls.is_empty() {
        true => "stop",
        false => "tool_calls",
    };
    out.push_str(&chunk(json!({}), Some(finish)));
    out.push_str("data: [DONE]\n\n");
    out
}

/// The API keys of the runs in this process, and every log line that held one.
static KEYS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());
static LEAKS: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A `log` logger that keeps every line (any level, any crate: the transports, hyper, rustls,
/// tokio-postgres) holding a run's API key.
struct KeyWatch;

impl log::Log for KeyWatch {
    fn enabled(&self, _: &log::Metadata<'_>) -> bool {
        true
    }

    fn log(&self, record: &log::Record<'_>) {
        let line = format!("{} {}", record.target(), record.args());
        let keys = KEYS.lock().unwrap_or_else(|e| e.into_inner());
        if keys.iter().any(|k| line.contains(k.as_str())) {
            LEAKS.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        }
    }

    fn flush(&self) {}
}

/// Watches every log line of this process for `key` (the logger is installed once, at TRACE).
pub fn watch_logs(key: &str) {
    static INSTALL: std::sync::Once = std::sync::Once::new();
    INSTALL.call_once(|| {
        if log::set_boxed_logger(Box::new(KeyWatch)).is_ok() {
            log::set_max_level(log::LevelFilter::Trace);
        }
    });
    KEYS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(key.to_owned());
}

/// Stops watching for `key` (its run ended): every line is checked against the keys of the runs
/// alive, not of every run the process made.
fn unwatch(key: &str) {
    KEYS.lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|k| k != key);
    LEAKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .retain(|line| !line.contains(key));
}

/// A log line that held `key`, if any.
pub fn leaked_in_logs(key: &str) -> Option<String> {
    let leaks = LEAKS.lock().unwrap_or_else(|e| e.into_inner());
    leaks.iter().find(|l| l.contains(key)).cloned()
}
