//! A user's own program (issue 23.5): its own async-openai client, built and used beside
//! compaction's `OpenAiSummarizer`, without installing a rustls crypto provider by hand.
//! `.ci/run` builds and runs it once per way a user depends on async-openai (see Cargo.toml).

use async_openai::config::OpenAIConfig;
use compaction::openai::OpenAiSummarizer;
use compaction::{Summarizer, SummaryRequest};
use compaction_fixtures::openai_server::{FakeOpenAi, Reply};

#[tokio::main]
async fn main() {
    // The user's client first: with `rustls-no-provider` unified in from compaction, building
    // it panicked ("No rustls crypto provider is configured").
    let server = FakeOpenAi::start([Reply::summary("ok")]).expect("a loopback server");
    let config = OpenAIConfig::new()
        .with_api_base(server.base_url())
        .with_api_key("sk-user");
    let client = async_openai::Client::with_config(config);
    // And its HTTPS works: a client asked for an https URL on a closed port must fail to
    // connect, not panic for want of a provider.
    let https = async_openai::Client::with_config(
        OpenAIConfig::new().with_api_base("https://127.0.0.1:9/v1"),
    );
    let _ = https.models().list().await.map(|_| ()).unwrap_err();
    let _ = client;
    // Then compaction's summarizer in the same process, on the same server.
    let summarizer = OpenAiSummarizer::new("m")
        .base_url(server.base_url())
        .api_key("sk-user");
    let summary = summarizer
        .summarize(SummaryRequest {
            field: "log",
            text: "step 1 ok",
            target_tokens: 20,
        })
        .await
        .expect("a summary");
    assert_eq!(summary, "ok");
    println!("tls-user: the user's client and compaction's summarizer both work");
}
