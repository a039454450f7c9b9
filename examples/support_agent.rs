//! A support agent compacting its context with a real model: protected customer ids, a refund
//! effect log, the conversation as a `Transcript`, and `OpenAiSummarizer` for what may be
//! summarized. It prints the messages it would send to the chat API.
//!
//! Run: `cargo run --example support_agent --features openai`
//!
//! With `OPENAI_BASE_URL` set (and `OPENAI_API_KEY`, `OPENAI_MODEL` as your server needs) it
//! talks to that server: OpenAI, or any compatible one such as a local llama.cpp
//! (`OPENAI_BASE_URL=http://localhost:8080/v1`) or vLLM. Without it, it starts the loopback test
//! server of this repository and says so.
//!
//! Copy this as the skeleton of your agent: replace the simulated turns with your model calls,
//! send `compacted.messages()` as the request, and drop the fake server.

use compaction::openai::OpenAiSummarizer;
use compaction::{
    Compactable, Compactor, Effect, EffectLog, EffectStatus, MemoryStore, Message, Tokenizer,
    ToolCall, Transcript,
};
use compaction_fixtures::openai_server::FakeOpenAi;
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Compactable, Serialize, Deserialize, Debug, Clone, Default)]
struct SupportAgent {
    /// Policy the agent must follow on every turn: always in the window, verbatim.
    #[protected(pin)]
    policy: Vec<String>,
    /// Exact ids the next tool call needs: verbatim, or spilled behind a verified pointer.
    #[protected]
    ticket: String,
    #[protected]
    customer_ids: Vec<String>,
    /// The knowledge-base article can be fetched again: summarized, with its pointer.
    #[derivable(pointer = "kb://articles/refunds?ticket={ticket}", summarize)]
    kb_article: String,
    /// Raw tool output: summarized or evicted.
    #[redundant(summarize)]
    tool_log: String,
    /// Refunds issued, with their exact status: never summarized.
    #[effect(idempotent = false)]
    refunds: EffectLog,
    /// The conversation: the last 2 user turns are the last to go (verbatim while older turns
    /// give the room), older turns folded by the model.
    #[transcript(keep_recent = 2)]
    chat: Transcript,
}

/// The summarizer: your server when `OPENAI_BASE_URL` is set, else the loopback test server.
fn summarizer() -> Result<(OpenAiSummarizer, Option<FakeOpenAi>), std::io::Error> {
    let model = std::env::var("OPENAI_MODEL").unwrap_or_else(|_| "gpt-4o-mini".to_owned());
    let summarizer = OpenAiSummarizer::new(model)
        .timeout(Duration::from_secs(60))
        .max_retries(3);
    if std::env::var_os("OPENAI_BASE_URL").is_some() {
        println!("summarizing with the server at OPENAI_BASE_URL");
        return Ok((summarizer, None));
    }
    let fake = FakeOpenAi::start([])?;
    println!(
        "OPENAI_BASE_URL is not set: summarizing with the loopback test server at {}",
        fake.base_url()
    );
    Ok((summarizer.base_url(fake.base_url()), Some(fake)))
}

/// A simulated session: order lookups with large results, one refund done, one in doubt.
fn session() -> Result<SupportAgent, Box<dyn std::error::Error>> {
    let mut agent = SupportAgent {
        policy: vec![
            "Refunds above 500 EUR need a human approval.".into(),
            "Never refund the same order twice.".into(),
        ],
        ticket: "T-48213".into(),
        customer_ids: vec!["cus_9f2Lx81".into(), "cus_A07qq3Z".into()],
        kb_article: "Refunds: check the order, the payment state and the policy. ".repeat(80),
        tool_log: "GET /orders?customer=cus_9f2Lx81 -> 200 (12 orders)\n".repeat(60),
        ..SupportAgent::default()
    };
    agent
        .chat
        .push(Message::system("You are the support agent of Acme Shop."));
    for (turn, order) in ["ord-1001", "ord-1002", "ord-1003", "ord-1004"]
        .iter()
        .enumerate()
    {
        agent.chat.push(Message::user(format!(
            "Order {order} arrived broken, please refund it (customer cus_9f2Lx81)."
        )));
        let lookup = format!("lookup-{turn}");
        agent.chat.push(Message::assistant_with_tools(
            format!("Looking up {order}."),
            vec![ToolCall::new(
                &lookup,
                "get_order",
                serde_json::json!({ "order": order }),
            )],
        ));
        let details = format!("{{\"order\":\"{order}\",\"total_eur\":89.90,\"items\":[..]}}\n");
        agent
            .chat
            .push(Message::tool_result(&lookup, details.repeat(10)));
        // The refund is an effect: recorded before the call, its status kept exactly.
        let key = format!("refund-{order}");
        agent.refunds.record(
            Effect::new("refund", *order, &key).with_payload(serde_json::json!({"eur": 89.90})),
        )?;
        agent.refunds.begin(&key)?;
        let refund = format!("refund-call-{turn}");
        agent.chat.push(Message::assistant_with_tools(
            format!("Refunding {order}."),
            vec![ToolCall::new(
                &refund,
                "issue_refund",
                serde_json::json!({ "order": order }),
            )
            .with_effect(&key)],
        ));
        if turn == 3 {
            // The payment provider timed out: the refund may or may not have happened.
            agent.refunds.reconcile(&key, EffectStatus::Unknown)?;
            agent.chat.push(Message::tool_result(
                &refund,
                "error: timeout from payment provider",
            ));
        } else {
            agent.refunds.commit(&key)?;
            agent.chat.push(Message::tool_result(&refund, "refunded"));
            agent
                .chat
                .push(Message::assistant(format!("{order} is refunded.")));
        }
    }
    Ok(agent)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let agent = session()?;
    let (summarizer, fake) = summarizer()?;
    let compactor = Compactor::builder()
        .budget(2_000) // tokens the request may take in the model's context
        .token_counter(Tokenizer::O200kBase)
        .store(MemoryStore::new()) // spilled values and summary sources; SqliteStore to persist
        .summarizer(summarizer)
        .build()?;

    let compacted = compactor.compact(&agent).await?;
    let messages: Vec<Message> = compacted.messages();
    println!("{}", serde_json::to_string_pretty(&messages)?);
    println!(
        "{} messages, {} of {} tokens (counted the chat way)",
        messages.len(),
        compacted.request_tokens().unwrap_or(compacted.tokens()),
        compacted.budget()
    );
    if let Some(fake) = &fake {
        println!(
            "{} summarizer requests reached the test server",
            fake.request_count()
        );
    }

    // What the model must still see: every customer id, and the refund in doubt, exactly.
    let sent = serde_json::to_string(&messages)?;
    for id in &agent.customer_ids {
        assert!(
            sent.contains(id.as_str()),
            "customer id {id} is in the request"
        );
    }
    assert!(sent.contains("refund-ord-1004") && sent.contains("unknown"));
    Ok(())
}
