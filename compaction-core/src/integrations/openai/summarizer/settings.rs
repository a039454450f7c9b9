//! What one [`OpenAiSummarizer`](super::OpenAiSummarizer) sends with: model, server, key,
//! limits, prompt and counter, shared with the tasks that send its requests.

use crate::tokens::TokenCounter;
use std::sync::Arc;
use std::time::Duration;

/// Everything a request needs, shared with the task that sends it.
#[derive(Clone)]
pub(super) struct Settings {
    pub(super) model: String,
    pub(super) base_url: String,
    pub(super) api_key: Option<String>,
    pub(super) timeout: Duration,
    pub(super) max_retries: u32,
    pub(super) max_backoff: Duration,
    pub(super) instructions: String,
    pub(super) counter: Arc<dyn TokenCounter>,
}
