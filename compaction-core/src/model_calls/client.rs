//! What the model clients ([`AnthropicClient`](crate::anthropic::AnthropicClient),
//! [`OpenAiClient`](crate::openai::OpenAiClient)) share: their settings (key, server, timeout,
//! retries, hosts allowed plain http) and the builder step that changes one, the connection
//! pool those settings build, the key kept out of any text an error carries (`error_text`), and
//! a call run on the transport's own runtime. Each client keeps its public setters (their docs
//! name its errors), its wire's settings and its own error type.

use crate::integrations::error_text::ErrorText;
use crate::integrations::http::client::HttpsClient;
use crate::integrations::http::summary::{runtime, AbortOnDrop};
use std::future::Future;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Everything one call needs, shared with the task that sends it. `W` is the wire's own part
/// (Anthropic's beta flags; nothing for OpenAI).
#[derive(Clone)]
pub(crate) struct Settings<W> {
    /// The key as given (empty: none). Set by `ClientCore::new` only: no setter changes it.
    pub(crate) api_key: String,
    /// What every error text of this client goes through, made from the key once per client.
    error_text: ErrorText,
    pub(crate) base_url: String,
    pub(crate) timeout: Duration,
    pub(crate) max_retries: u32,
    pub(crate) max_backoff: Duration,
    pub(crate) insecure_http_hosts: Vec<String>,
    /// Read by Anthropic's client only (OpenAI's has no settings of its own).
    #[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
    pub(crate) wire: W,
}

impl<W> Settings<W> {
    /// What every error text of this client goes through: the key (a server may echo what it
    /// was sent) replaced, then the text cut.
    pub(crate) fn error_text(&self) -> &ErrorText {
        &self.error_text
    }

    /// The fields every client's `Debug` shows (never the key itself).
    pub(crate) fn debug_fields(&self, f: &mut std::fmt::DebugStruct<'_, '_>) {
        let key = (!self.api_key.is_empty()).then_some("<set>");
        f.field("base_url", &self.base_url)
            .field("api_key", &key)
            .field("timeout", &self.timeout)
            .field("max_retries", &self.max_retries)
            .field("max_backoff", &self.max_backoff);
    }
}

/// A client's settings and the connection pool built from them. Cheap to clone: clones share
/// the pool.
#[derive(Clone)]
pub(crate) struct ClientCore<W> {
    pub(crate) settings: Arc<Settings<W>>,
    http: Arc<OnceLock<Result<HttpsClient, String>>>,
}

impl<W: Clone> ClientCore<W> {
    /// A client of `base_url` with `api_key`: a 10-minute timeout per call (a long reply takes
    /// minutes), 3 retries, waits of at most 30 s.
    pub(crate) fn new(api_key: String, base_url: &str, wire: W) -> Self {
        ClientCore {
            settings: Arc::new(Settings {
                error_text: ErrorText::new([&api_key]),
                api_key,
                base_url: base_url.to_owned(),
                timeout: Duration::from_secs(600),
                max_retries: 3,
                max_backoff: Duration::from_secs(30),
                insecure_http_hosts: Vec::new(),
                wire,
            }),
            http: Arc::default(),
        }
    }

    /// These settings changed by `change`.
    pub(crate) fn with(mut self, change: impl FnOnce(&mut Settings<W>)) -> Self {
        change(Arc::make_mut(&mut self.settings));
        // A connection pool built for older settings (its timeout) is not reused.
        self.http = Arc::default();
        self
    }

    pub(crate) fn base_url(self, url: impl Into<String>) -> Self {
        let url = url.into().trim_end_matches('/').to_owned();
        self.with(|s| s.base_url = url)
    }

    pub(crate) fn allow_insecure_http_to(self, host: impl Into<String>) -> Self {
        let host = host.into();
        self.with(|s| s.insecure_http_hosts.push(host))
    }

    pub(crate) fn timeout(self, timeout: Duration) -> Self {
        self.with(|s| s.timeout = timeout)
    }

    pub(crate) fn max_retries(self, retries: u32) -> Self {
        self.with(|s| s.max_retries = retries)
    }

    pub(crate) fn max_backoff(self, wait: Duration) -> Self {
        self.with(|s| s.max_backoff = wait)
    }
}

impl<W> ClientCore<W> {
    /// The connection pool, built at the first call with the settings' timeout.
    pub(crate) fn connection(&self) -> Result<HttpsClient, String> {
        let timeout = self.settings.timeout;
        self.http.get_or_init(|| HttpsClient::new(timeout)).clone()
    }
}

/// Runs `call` on the transport's runtime, so the future resolves under any executor; dropping
/// it cancels the call. `transport` makes the client's error for a runtime that cannot start
/// or a task that ended without an answer; a panic in the call resumes here.
pub(crate) async fn on_runtime<T, E>(
    call: impl Future<Output = Result<T, E>> + Send + 'static,
    transport: impl Fn(String) -> E,
) -> Result<T, E>
where
    T: Send + 'static,
    E: Send + 'static,
{
    let runtime = runtime().map_err(&transport)?;
    let mut task = AbortOnDrop(runtime.spawn(call));
    match (&mut task.0).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(transport(format!("the call's task ended: {e}"))),
    }
}
