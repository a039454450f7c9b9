//! Where an API key may go: over `https://` to any host; over plain `http://` only to a
//! loopback host, written as such (`127.0.0.0/8`, `::1`, `localhost`), or to a host the
//! caller opted in by name (`allow_insecure_http_to`).

use hyper::http::uri::Scheme;
use hyper::Uri;
use std::net::IpAddr;

/// The headers that carry a key: a request with one of them is checked.
const SECRET_HEADERS: [&str; 2] = ["authorization", "x-api-key"];

/// Whether `headers` carry a key.
pub(crate) fn carries_key(headers: &[(&'static str, String)]) -> bool {
    headers
        .iter()
        .any(|(name, _)| SECRET_HEADERS.contains(&name.to_ascii_lowercase().as_str()))
}

/// The host a key would reach in the clear at `url`, unless that is allowed: `None` for an
/// `https://` URL, a loopback host or one in `allowed`. A URL that does not parse is `None`
/// too: the request cannot be built from it either, so nothing is sent.
pub(crate) fn insecure_host(url: &str, allowed: &[String]) -> Option<String> {
    let uri: Uri = url.parse().ok()?;
    if uri.scheme() == Some(&Scheme::HTTPS) {
        return None;
    }
    // The host the connector dials: userinfo (`http://127.0.0.1@evil`) is not it.
    let host = normalize(uri.host().unwrap_or_default());
    if is_loopback(&host) || allowed.iter().any(|a| normalize(a) == host) {
        return None;
    }
    Some(host)
}

/// A host as compared: lowercase, without IPv6 brackets or a trailing dot.
pub(crate) fn normalize(host: &str) -> String {
    let host = host.trim();
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.trim_end_matches('.').to_ascii_lowercase()
}

/// Loopback by its written form only: `localhost`, or an IP address in `127.0.0.0/8` or `::1`
/// (an IPv4-mapped loopback too). A name that resolves to loopback (`127.1`, a hosts entry)
/// is not trusted by its resolution, which this check cannot see.
fn is_loopback(host: &str) -> bool {
    if host == "localhost" {
        return true;
    }
    match host.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => ip.is_loopback(),
        Ok(IpAddr::V6(ip)) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
        Err(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_https_loopback_or_named_hosts_pass() {
        let none: &[String] = &[];
        for url in [
            "https://api.openai.com/v1",
            "HTTPS://example.invalid",
            "http://127.0.0.1:8080/v1",
            "http://127.255.0.9/",
            "http://localhost:11434/v1",
            "http://LOCALHOST./v1",
            "http://[::1]:8080/v1",
            "http://[::ffff:127.0.0.1]/v1",
        ] {
            assert_eq!(insecure_host(url, none), None, "{url}");
        }
        for (url, host) in [
            ("http://example.invalid/v1", "example.invalid"),
            ("http://10.0.0.5:8000", "10.0.0.5"),
            (
                "http://127.0.0.1.example.invalid/",
                "127.0.0.1.example.invalid",
            ),
            (
                "http://localhost.example.invalid/",
                "localhost.example.invalid",
            ),
            ("http://127.0.0.1@example.invalid/", "example.invalid"),
            ("http://[fe80::1]/", "fe80::1"),
            ("http://127.1/", "127.1"),
        ] {
            assert_eq!(insecure_host(url, none).as_deref(), Some(host), "{url}");
        }
        let allowed = vec!["[FE80::1]".to_owned(), "GPU-box.internal.".to_owned()];
        assert_eq!(insecure_host("http://[fe80::1]:9/", &allowed), None);
        assert_eq!(insecure_host("http://gpu-box.internal/v1", &allowed), None);
        assert!(insecure_host("http://other.internal/v1", &allowed).is_some());
    }

    #[test]
    fn keys_are_found_by_header_name() {
        assert!(carries_key(&[("authorization", "Bearer k".into())]));
        assert!(carries_key(&[("x-api-key", "k".into())]));
        assert!(!carries_key(&[("anthropic-version", "2023-06-01".into())]));
    }
}
