//! What one Messages API call needs (key, server, timeout, retries, beta flags), its headers,
//! and the scrubbing of the key from any text an error carries.

use std::time::Duration;

/// The API version every request names.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// Everything one call needs, shared with the task that sends it.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) api_key: String,
    pub(crate) base_url: String,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) max_backoff: Duration,
    pub(crate) betas: Vec<String>,
    pub(crate) insecure_http_hosts: Vec<String>,
}

impl Settings {
    /// The headers of every request (`content-type` aside).
    pub(crate) fn headers(&self) -> Vec<(&'static str, String)> {
        let mut headers = vec![
            ("x-api-key", self.api_key.clone()),
            ("anthropic-version", ANTHROPIC_VERSION.to_owned()),
        ];
        if !self.betas.is_empty() {
            headers.push(("anthropic-beta", self.betas.join(",")));
        }
        headers
    }

    /// `text` without the key (a server may echo what it was sent).
    pub(crate) fn scrub(&self, text: &str) -> String {
        if self.api_key.is_empty() {
            return text.to_owned();
        }
        text.replace(&self.api_key, "<api key>")
    }
}
