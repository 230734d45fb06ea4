//! The reqwest clients the guard drives, and how their errors are classified.
//!
//! Guarantees: every client built here ignores environment and system proxies, follows no
//! redirect, retries nothing, sends `Accept-Encoding: identity`, decompresses nothing (no reqwest
//! compression feature is enabled), and resolves names only through its pins: its DNS resolver
//! refuses every name, so a name without a pin can never fall back to system DNS.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use http::header::{ACCEPT_ENCODING, HeaderMap};
use reqwest::dns::{Name, Resolve as ReqwestResolve, Resolving};

use crate::EgressError;
use crate::error::BoxError;

/// The DNS resolver of every guarded reqwest client: refuses everything, so only names pinned
/// with `resolve_to_addrs` (checked addresses) can be reached.
#[derive(Debug, Clone, Copy)]
struct RefuseAll;

impl ReqwestResolve for RefuseAll {
    fn resolve(&self, name: Name) -> Resolving {
        let err: BoxError = format!(
            "{:?} was not checked and pinned for this call",
            name.as_str()
        )
        .into();
        Box::pin(std::future::ready(Err(err)))
    }
}

/// The pins of one client: the exact host string of the URL and its checked socket addresses.
pub(crate) struct Pins<'a> {
    pub(crate) name: &'a str,
    pub(crate) addrs: &'a [SocketAddr],
}

/// Builds a guarded reqwest client. `timeout` bounds each request (used for clients handed out
/// whole, where the guard cannot wrap every request in the call deadline itself).
pub(crate) fn build_client(
    tls: &rustls::ClientConfig,
    pins: Option<Pins<'_>>,
    timeout: Option<Duration>,
) -> Result<reqwest::Client, EgressError> {
    let mut headers = HeaderMap::new();
    headers.insert(ACCEPT_ENCODING, HeaderValue::from_static("identity"));
    let mut builder = reqwest::Client::builder()
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .retry(reqwest::retry::never())
        .default_headers(headers)
        .dns_resolver(Arc::new(RefuseAll))
        // One rustls config built at startup: a fresh client then costs microseconds.
        .tls_backend_preconfigured(tls.clone())
        .pool_idle_timeout(Duration::from_secs(60));
    if let Some(pins) = pins {
        builder = builder.resolve_to_addrs(pins.name, pins.addrs);
    }
    if let Some(timeout) = timeout {
        builder = builder.timeout(timeout);
    }
    builder.build().map_err(|e| EgressError::Tls {
        host: String::new(),
        source: Box::new(e),
    })
}

/// The default TLS configuration: the platform's roots, aws-lc-rs, HTTP/2 and HTTP/1.1 by ALPN.
pub(crate) fn default_tls() -> Result<rustls::ClientConfig, EgressError> {
    use rustls_platform_verifier::BuilderVerifierExt;
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let tls_error = |e: rustls::Error| EgressError::Tls {
        host: String::new(),
        source: Box::new(e),
    };
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(tls_error)?
        .with_platform_verifier()
        .map_err(tls_error)?
        .with_no_client_auth();
    with_alpn(&mut config);
    Ok(config)
}

/// Sets ALPN on a preconfigured rustls config (reqwest does not touch a preconfigured one).
pub(crate) fn with_alpn(config: &mut rustls::ClientConfig) {
    if config.alpn_protocols.is_empty() {
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    }
}

/// Classifies a reqwest error without its URL (which may carry a key in its query). Only a
/// failure while connecting proves nothing was sent; any later break may follow a request the
/// upstream received (EGRESS-30).
pub(crate) fn classify_error(err: reqwest::Error, host: &str) -> EgressError {
    let err = err.without_url();
    let host = host.to_owned();
    if !err.is_connect() {
        EgressError::ConnectionLost {
            host,
            source: Box::new(err),
        }
    } else if is_tls(&err) {
        EgressError::Tls {
            host,
            source: Box::new(err),
        }
    } else {
        EgressError::Connect {
            host,
            source: Box::new(err),
        }
    }
}

/// True when a rustls error is somewhere in the chain. `io::Error::source` skips the error it
/// wraps, so the wrapped error is checked through `get_ref` as well.
fn is_tls(err: &(dyn std::error::Error + 'static)) -> bool {
    let mut current: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = current {
        if e.is::<rustls::Error>() {
            return true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>()
            && let Some(inner) = io.get_ref()
            && is_tls(inner)
        {
            return true;
        }
        current = e.source();
    }
    false
}
