//! Anthropic's part of a call's settings (its beta flags) and the headers every request
//! carries; what every client shares is `model_calls/client.rs`.

/// The API version every request names.
const ANTHROPIC_VERSION: &str = "2023-06-01";

/// A Messages API call's settings.
pub(crate) type Settings = crate::model_calls::client::Settings<Betas>;

/// The `anthropic-beta` flags every request names.
#[derive(Debug, Clone, Default)]
pub(crate) struct Betas(pub(crate) Vec<String>);

/// The headers of every request (`content-type` aside).
pub(crate) fn headers(settings: &Settings) -> Vec<(&'static str, String)> {
    let mut headers = vec![
        ("x-api-key", settings.api_key.clone()),
        ("anthropic-version", ANTHROPIC_VERSION.to_owned()),
    ];
    if !settings.wire.0.is_empty() {
        headers.push(("anthropic-beta", settings.wire.0.join(",")));
    }
    headers
}
