//! `HttpsClient`: POST a JSON body over HTTP/1.1 (TLS by rustls on `ring`, the operating
//! system's trust store) and read the whole answer, within one timeout.

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONTENT_TYPE};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use std::sync::Arc;
use std::time::Duration;

/// The largest answer read (a chat completion is a few KiB; an error page maybe more).
const MAX_ANSWER_BYTES: usize = 8 << 20;

/// One answer, read whole.
#[derive(Debug)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
}

/// Why no answer came back.
#[derive(Debug)]
pub(crate) enum Transport {
    /// No connection could be made (refused, unreachable, DNS, TLS handshake).
    Connect(String),
    /// The exchange took longer than the client's timeout.
    Timeout,
    /// Anything else: a malformed URL or header, a broken connection, an answer too large.
    Other(String),
}

/// An HTTP/1.1 client with its own TLS configuration and a per-request timeout (connection to
/// last byte). Cheap to clone: clones share the connection pool.
#[derive(Clone)]
pub(crate) struct HttpsClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    timeout: Duration,
}

impl HttpsClient {
    /// A client whose TLS uses `ring` and the platform's verifier (the OS trust store), given
    /// to this client only: the process-wide default provider is neither read nor installed.
    pub(crate) fn new(timeout: Duration) -> Result<HttpsClient, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier = rustls_platform_verifier::Verifier::new(Arc::clone(&provider))
            .map_err(|e| format!("cannot load the system's trust store: {e}"))?;
        let tls = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("cannot configure TLS: {e}"))?
            .dangerous() // not dangerous: the platform verifier checks certificates and names
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth();
        let connector = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls)
            .https_or_http()
            .enable_http1()
            .build();
        let client = Client::builder(TokioExecutor::new()).build(connector);
        Ok(HttpsClient { client, timeout })
    }

    /// The timeout of one exchange.
    pub(crate) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// POSTs `body` as JSON to `url` with `headers`, and reads the answer whole. Runs on a tokio
    /// runtime (the summarizers' own: see `summary::run`).
    pub(crate) async fn post_json(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<Answer, Transport> {
        let mut request = hyper::Request::post(url).header(CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            let value = HeaderValue::from_str(value)
                .map_err(|_| Transport::Other(format!("the `{name}` header is not valid")))?;
            request = request.header(HeaderName::from_static(name), value);
        }
        let request = request
            .body(Full::new(Bytes::from(body)))
            .map_err(|e| Transport::Other(format!("cannot build the request: {e}")))?;
        let exchange = async {
            let response = self.client.request(request).await.map_err(|e| {
                let reason = error_chain(&e);
                if e.is_connect() {
                    Transport::Connect(reason)
                } else {
                    Transport::Other(reason)
                }
            })?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_ANSWER_BYTES)
                .collect()
                .await
                .map_err(|e| Transport::Other(format!("reading the answer: {e}")))?
                .to_bytes();
            Ok(Answer {
                status: parts.status.as_u16(),
                headers: parts.headers,
                body,
            })
        };
        tokio::time::timeout(self.timeout, exchange)
            .await
            .unwrap_or(Err(Transport::Timeout))
    }
}

/// An error and its sources, joined (hyper's own message says only "client error (Connect)").
fn error_chain(error: &(dyn std::error::Error + 'static)) -> String {
    let mut out = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        out.push_str(": ");
        out.push_str(&cause.to_string());
        source = cause.source();
    }
    out
}
