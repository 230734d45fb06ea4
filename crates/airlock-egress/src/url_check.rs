//! URL checks: the raw text before parsing, the parsed URL after, and the structural join.
//!
//! Guarantees: a URL is refused before parsing when it holds a character ≤ 0x20, DEL or `\`, does
//! not start with `http://` or `https://` (any case), or has a `/` right after `://` — because the
//! WHATWG parser silently rewrites such inputs. After parsing, the *parsed* host is judged, never
//! the raw text; userinfo, port 0 and ports outside the operator's list are refused. A join builds
//! the URL with the path and query setters and checks the origin did not change.

use std::net::IpAddr;

use url::{Host, Url};

use crate::name::{self, HostName};
use crate::{EgressError, EgressPolicy};

/// Refuses URL text the WHATWG parser would silently rewrite.
///
/// # Errors
/// [`EgressError::BlockedScheme`] for a scheme other than `http`/`https`, otherwise
/// [`EgressError::BlockedUrl`].
pub fn precheck(raw: &str) -> Result<(), EgressError> {
    if raw.bytes().any(|b| b <= 0x20 || b == 0x7f) {
        return Err(EgressError::url("control character or space in the URL"));
    }
    if raw.contains('\\') {
        return Err(EgressError::url("backslash in the URL"));
    }
    let bytes = raw.as_bytes();
    let after_scheme = if starts_with_ignore_case(bytes, b"https://") {
        8
    } else if starts_with_ignore_case(bytes, b"http://") {
        7
    } else {
        let scheme = raw.split(':').next().unwrap_or_default();
        return Err(EgressError::BlockedScheme {
            reason: format!(
                "{:?} is not http:// or https://",
                crate::error::sanitize(scheme.as_bytes())
            ),
        });
    };
    if bytes.get(after_scheme) == Some(&b'/') {
        return Err(EgressError::url("a '/' right after '://'"));
    }
    Ok(())
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// The host of a checked URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum TargetHost {
    /// A name that passed the name rules; `operator_allowed` when it is on the allow list.
    Name {
        name: HostName,
        operator_allowed: bool,
    },
    /// An IP literal (not yet judged: that happens with the other addresses).
    Ip(IpAddr),
}

/// A URL that passed every check that needs no DNS.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) url: Url,
    pub(crate) host: TargetHost,
    pub(crate) port: u16,
}

impl Target {
    /// The host for messages and spans (never the whole URL, which may hold a key in its query).
    pub(crate) fn host_label(&self) -> String {
        self.url.host_str().unwrap_or_default().to_owned()
    }

    /// The exact string reqwest will look up for this URL (`url.host_str()`, trailing dot kept):
    /// pins must be registered under it, or reqwest falls back to its resolver.
    pub(crate) fn pin_name(&self) -> &str {
        self.url.host_str().unwrap_or_default()
    }

    /// The name a call resolves once: `a.example.com` and `a.example.com.` are one name in DNS,
    /// so both spellings share one lookup (and one answer) within a call.
    pub(crate) fn lookup_name(&self) -> &str {
        self.pin_name().trim_end_matches('.')
    }
}

/// Pre-checks, parses and checks a URL against everything but DNS and the address table.
pub(crate) fn parse_target(policy: &EgressPolicy, raw: &str) -> Result<Target, EgressError> {
    precheck(raw)?;
    let url = Url::parse(raw).map_err(|e| EgressError::url(format!("not a valid URL ({e})")))?;
    check_parsed(policy, url)
}

/// The checks on a parsed URL (also used on the result of a join).
pub(crate) fn check_parsed(policy: &EgressPolicy, url: Url) -> Result<Target, EgressError> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(EgressError::BlockedScheme {
            reason: format!("{:?} is not http or https", url.scheme()),
        });
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(EgressError::url("userinfo in the URL"));
    }
    let host = match url.host() {
        Some(Host::Domain(domain)) => {
            let (name, operator_allowed) = name::check_host(policy, domain)?;
            TargetHost::Name {
                name,
                operator_allowed,
            }
        }
        Some(Host::Ipv4(v4)) => TargetHost::Ip(IpAddr::V4(v4)),
        Some(Host::Ipv6(v6)) => TargetHost::Ip(IpAddr::V6(v6)),
        None => return Err(EgressError::url("no host")),
    };
    let port = url
        .port_or_known_default()
        .ok_or_else(|| EgressError::url("no port"))?;
    if port == 0 {
        return Err(EgressError::url("port 0"));
    }
    if !policy.port_allowed(port) {
        return Err(EgressError::url(format!("port {port} is not allowed")));
    }
    Ok(Target { url, host, port })
}

/// Joins a base URL with a declared path structurally, and checks the origin did not change.
///
/// The path must start with exactly one `/` and may carry a `?query`. It is appended to the
/// base's own path through [`Url::set_path`] and [`Url::set_query`], never by string
/// concatenation or [`Url::join`], which read `//host`, `\` or an absolute URL as a new origin.
///
/// # Errors
/// [`EgressError::BlockedUrl`] when the path is malformed or the origin would change.
pub fn join(base: &Url, path: &str) -> Result<Url, EgressError> {
    if path.bytes().any(|b| b <= 0x20 || b == 0x7f) {
        return Err(EgressError::url("control character or space in the path"));
    }
    if path.contains('\\') {
        return Err(EgressError::url("backslash in the path"));
    }
    if !path.starts_with('/') || path.starts_with("//") {
        return Err(EgressError::url("the path must start with exactly one '/'"));
    }
    if base.query().is_some() || base.fragment().is_some() {
        return Err(EgressError::url("the base URL carries a query or fragment"));
    }
    let (declared_path, query) = match path.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (path, None),
    };
    let mut url = base.clone();
    let prefix = base.path().trim_end_matches('/');
    url.set_path(&format!("{prefix}{declared_path}"));
    url.set_query(query);
    // Check the origin on the URL as built and as it will be read back from its serialization.
    let reparsed = Url::parse(url.as_str())
        .map_err(|_| EgressError::url("the joined URL does not parse back"))?;
    if url.origin() != base.origin() || reparsed.origin() != base.origin() {
        return Err(EgressError::url("the join changes the origin"));
    }
    if !reparsed.username().is_empty() || reparsed.password().is_some() {
        return Err(EgressError::url("the join adds userinfo"));
    }
    Ok(reparsed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn precheck_refuses_what_the_parser_rewrites() {
        for raw in [
            "http:\\\\a.com/",
            "http:a.com",
            "https:/a.com",
            " http://a.com",
            "http:///a.com",
        ] {
            assert!(precheck(raw).is_err(), "{raw}");
        }
        assert_eq!(
            precheck("ftp://a.com/").unwrap_err().kind(),
            "blocked_scheme"
        );
        assert!(precheck("HTTPS://A.COM/").is_ok());
    }

    #[test]
    fn join_keeps_the_base_path_and_query_apart() {
        let base = Url::parse("https://api.example.com/v1/").unwrap();
        let url = join(&base, "/items?x=1&y=%20").unwrap();
        assert_eq!(url.as_str(), "https://api.example.com/v1/items?x=1&y=%20");
        let url = join(&base, "/a#b").unwrap();
        assert_eq!(url.host_str(), Some("api.example.com"));
        assert!(url.fragment().is_none());
    }

    #[test]
    fn join_refuses_base_with_query() {
        let base = Url::parse("https://api.example.com/?k=1").unwrap();
        assert!(join(&base, "/x").is_err());
    }
}
