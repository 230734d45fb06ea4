//! `[telemetry]` of `airlock.toml`: where traces are exported over OTLP/HTTP (docs/rules.md
//! DECL-60 … DECL-62). Absent means off. Header values are credential paths, never secrets
//! written in the file; the endpoint is checked like every other URL a credential may reach.

use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::CredentialPath;
use crate::refs::Referenced;
use crate::tree::{Node, NodeValue};
use crate::urls::check_credential_url;
use crate::values::credential_path;

/// Default `[telemetry] service_name`.
pub const DEFAULT_SERVICE_NAME: &str = "airlock";

/// `[telemetry]`: traces exported over OTLP/HTTP (protobuf) to one collector.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetrySettings {
    /// `endpoint`: the collector's OTLP/HTTP base URL; spans go to `<endpoint>/v1/traces`.
    pub endpoint: String,
    /// `service_name`: the `service.name` resource attribute (default `airlock`).
    pub service_name: String,
    /// `sample_ratio`: the share of new traces recorded, 0 to 1 (default 1); a trace continued
    /// from a caller's `traceparent` follows the caller's sampled flag.
    pub sample_ratio: f64,
    /// `[telemetry.headers]`: header name (lower-case) → credential path of its value.
    pub headers: Vec<(String, CredentialPath)>,
}

/// Reads `[telemetry]`; `None` when absent (telemetry off) or invalid (errors in `d`).
pub(crate) fn read_telemetry(node: Option<&Node>, d: &mut Diag) -> Option<TelemetrySettings> {
    let keys = ["endpoint", "service_name", "sample_ratio", "headers"];
    let f = Fields::open(node?, "telemetry", &keys, d)?;
    let headers = headers(f.get("headers"), d);
    let sample_ratio = sample_ratio(&f, d);
    let service_name = f
        .opt_str("service_name", d)
        .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_owned());
    if service_name.trim().is_empty() {
        d.push(
            f.key_at("service_name"),
            "telemetry.service_name",
            "must not be empty",
        );
    }
    let endpoint = f.req_str("endpoint", d)?;
    let endpoint = endpoint.trim_end_matches('/').to_owned();
    if let Err(reason) = check_endpoint(&endpoint, !headers.is_empty()) {
        d.push(f.key_at("endpoint"), "telemetry.endpoint", reason);
        return None;
    }
    Some(TelemetrySettings {
        endpoint,
        service_name,
        sample_ratio: sample_ratio?,
        headers,
    })
}

/// DECL-60: http(s), no user info, no query or fragment (the path is joined with `/v1/traces`),
/// and https when a header carries a credential (loopback exempt, as everywhere).
fn check_endpoint(url: &str, with_credential: bool) -> Result<(), String> {
    check_credential_url(url, with_credential)?;
    match url::Url::parse(url) {
        Ok(u) if u.query().is_none() && u.fragment().is_none() => Ok(()),
        _ => Err(format!(
            "`{url}` must be a base URL without query or fragment, such as `http://127.0.0.1:4318`"
        )),
    }
}

/// DECL-61: a number from 0 to 1.
fn sample_ratio(f: &Fields<'_>, d: &mut Diag) -> Option<f64> {
    let Some(node) = f.get("sample_ratio") else {
        return Some(1.0);
    };
    let ratio = match node.value {
        NodeValue::Float(x) => Some(x),
        #[allow(clippy::cast_precision_loss)] // 0 and 1 are the only integers accepted
        NodeValue::Int(n) => Some(n as f64),
        _ => None,
    }
    .filter(|x| (0.0..=1.0).contains(x));
    if ratio.is_none() {
        d.push(
            node.at,
            "telemetry.sample_ratio",
            "expected a number from 0 to 1, such as 0.25",
        );
    }
    ratio
}

/// DECL-62: header names are HTTP tokens; each value is a credential path.
fn headers(node: Option<&Node>, d: &mut Diag) -> Vec<(String, CredentialPath)> {
    let mut out = Vec::new();
    let Some(f) = node.and_then(|n| Fields::open_free(n, "telemetry.headers", d)) else {
        return out;
    };
    for entry in f.entries() {
        let path = f.key(&entry.key);
        let valid_name = !entry.key.is_empty()
            && entry
                .key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !valid_name {
            d.push(
                entry.key_at,
                &path,
                format!("`{}` is not an HTTP header name", entry.key),
            );
            continue;
        }
        if let Some(credential) = credential_path(&entry.value, &path, d) {
            d.refer(
                entry.value.at,
                &path,
                Referenced::Credential(credential.clone()),
            );
            out.push((entry.key.to_ascii_lowercase(), credential));
        }
    }
    out
}
