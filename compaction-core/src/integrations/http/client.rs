//! `HttpsClient`: POST a JSON body over HTTP/1.1 (TLS by rustls on `ring`, the operating
//! system's trust store) and read the whole answer, or its body piece by piece as it streams
//! (`Streaming`), within one timeout.

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
/// The largest streamed answer read: a long reply's events are many times its text.
// Streaming is the Messages client's only (`openai` alone builds this transport without it).
#[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
const MAX_STREAM_BYTES: usize = 64 << 20;

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

    /// POSTs `body` as JSON to `url` with `headers` and returns once the answer's head is in:
    /// its body is read with [`Streaming::next`], all within the client's timeout.
    #[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
    pub(crate) async fn post_stream(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<Streaming, Transport> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        let request = build(url, headers, body)?;
        let response = tokio::time::timeout_at(deadline, self.client.request(request))
            .await
            .map_err(|_| Transport::Timeout)?
            .map_err(|e| sent_error(&e))?;
        let (parts, body) = response.into_parts();
        Ok(Streaming {
            status: parts.status.as_u16(),
            headers: parts.headers,
            body,
            deadline,
            read: 0,
        })
    }

    /// POSTs `body` as JSON to `url` with `headers`, and reads the answer whole. Runs on a tokio
    /// runtime (the summarizers' own: see `summary::run`).
    pub(crate) async fn post_json(
        &self,
        url: &str,
        headers: &[(&'static str, String)],
        body: Vec<u8>,
    ) -> Result<Answer, Transport> {
        let request = build(url, headers, body)?;
        let exchange = async {
            let response = self
                .client
                .request(request)
                .await
                .map_err(|e| sent_error(&e))?;
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

/// An answer whose body is read as it arrives.
#[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
pub(crate) struct Streaming {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    body: hyper::body::Incoming,
    /// When the exchange's timeout runs out.
    deadline: tokio::time::Instant,
    read: usize,
}

#[cfg_attr(not(feature = "anthropic"), allow(dead_code))]
impl Streaming {
    /// The body's next bytes, `None` at its end.
    pub(crate) async fn next(&mut self) -> Result<Option<Bytes>, Transport> {
        loop {
            let frame = tokio::time::timeout_at(self.deadline, self.body.frame())
                .await
                .map_err(|_| Transport::Timeout)?;
            let frame = match frame {
                None => return Ok(None),
                Some(frame) => frame.map_err(|e| {
                    Transport::Other(format!("reading the answer: {}", error_chain(&e)))
                })?,
            };
            // Trailers carry no data: read on.
            if let Ok(data) = frame.into_data() {
                self.read += data.len();
                if self.read > MAX_STREAM_BYTES {
                    let reason = format!("the answer is over {MAX_STREAM_BYTES} bytes");
                    return Err(Transport::Other(reason));
                }
                return Ok(Some(data));
            }
        }
    }

    /// The rest of the body, whole (an error answer's, at most [`MAX_ANSWER_BYTES`]).
    pub(crate) async fn rest(mut self) -> Result<Bytes, Transport> {
        let mut out = Vec::new();
        while let Some(data) = self.next().await? {
            out.extend_from_slice(&data);
            if out.len() > MAX_ANSWER_BYTES {
                break;
            }
        }
        Ok(Bytes::from(out))
    }
}

/// The request: `body` as JSON to `url`, with `headers`.
fn build(
    url: &str,
    headers: &[(&'static str, String)],
    body: Vec<u8>,
) -> Result<hyper::Request<Full<Bytes>>, Transport> {
    let mut request = hyper::Request::post(url).header(CONTENT_TYPE, "application/json");
    for (name, value) in headers {
        let value = HeaderValue::from_str(value)
            .map_err(|_| Transport::Other(format!("the `{name}` header is not valid")))?;
        request = request.header(HeaderName::from_static(name), value);
    }
    request
        .body(Full::new(Bytes::from(body)))
        .map_err(|e| Transport::Other(format!("cannot build the request: {e}")))
}

/// Why a request got no answer: no connection was made (nothing was sent), or anything else.
fn sent_error(e: &hyper_util::client::legacy::Error) -> Transport {
    let reason = error_chain(e);
    if e.is_connect() {
        Transport::Connect(reason)
    } else {
        Transport::Other(reason)
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
