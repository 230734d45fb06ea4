//! Response rules: no redirects, identity encoding only, text only, and a body cap counted while
//! streaming.
//!
//! Guarantees: a 3xx is an error naming the status; any `Content-Encoding` other than `identity`
//! is an error (nothing is ever decompressed); only `text/*`, `application/json` and
//! `application/*+json` bodies pass, and a body without a content type passes only if it is
//! UTF-8; a declared length over the cap fails before reading, and a streamed body fails as soon
//! as it passes the cap — an error, never a truncation.

use bytes::{Bytes, BytesMut};
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, StatusCode};

use crate::EgressError;
use crate::error::sanitize;

/// What the head says about the body that follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BodyRule {
    /// A text content type: read it as is.
    Text,
    /// No content type: the body must be UTF-8 (checked after reading).
    MustBeUtf8,
}

/// Checks the status line and headers of a response before any body byte is read.
pub(crate) fn check_head(
    status: StatusCode,
    headers: &HeaderMap,
    expect_body: bool,
    cap: u64,
) -> Result<BodyRule, EgressError> {
    if status.is_redirection() {
        return Err(EgressError::Redirect {
            status: status.as_u16(),
        });
    }
    for value in headers.get_all(CONTENT_ENCODING) {
        let value = value.as_bytes();
        // A list such as "gzip, identity" still applies gzip: every coding must be identity.
        let identity_only = value
            .split(|&b| b == b',')
            .all(|c| c.trim_ascii().eq_ignore_ascii_case(b"identity"));
        if !identity_only {
            return Err(EgressError::Encoding {
                encoding: sanitize(value),
            });
        }
    }
    let rule = match headers.get(CONTENT_TYPE) {
        None => BodyRule::MustBeUtf8,
        Some(ct) if is_text(ct.as_bytes()) => BodyRule::Text,
        Some(ct) => {
            return Err(EgressError::NotText {
                content_type: sanitize(ct.as_bytes()),
            });
        }
    };
    if expect_body {
        let declared = headers
            .get(CONTENT_LENGTH)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        if declared.is_some_and(|len| len > cap) {
            return Err(EgressError::TooLarge { limit: cap });
        }
    }
    Ok(rule)
}

/// True for `text/*`, `application/json` and `application/*+json`, parameters ignored.
pub(crate) fn is_text(content_type: &[u8]) -> bool {
    let essence = content_type
        .split(|&b| b == b';')
        .next()
        .unwrap_or_default()
        .trim_ascii()
        .to_ascii_lowercase();
    let Some((kind, subtype)) = std::str::from_utf8(&essence)
        .ok()
        .and_then(|s| s.split_once('/'))
    else {
        return false;
    };
    if subtype.is_empty() || kind.is_empty() {
        return false;
    }
    match kind {
        "text" => true,
        "application" => subtype == "json" || (subtype.ends_with("+json") && subtype.len() > 5),
        _ => false,
    }
}

/// Reads the body, counting bytes as they arrive; past `cap` it stops with an error.
pub(crate) async fn read_capped(
    mut response: reqwest::Response,
    rule: BodyRule,
    cap: u64,
    host: &str,
) -> Result<Bytes, EgressError> {
    let mut body = BytesMut::new();
    loop {
        // The head arrived, so the request did: a break now loses the answer, not the request.
        let chunk = response
            .chunk()
            .await
            .map_err(|e| EgressError::ConnectionLost {
                host: host.to_owned(),
                source: Box::new(e.without_url()),
            })?;
        let Some(chunk) = chunk else { break };
        let total = u64::try_from(body.len() + chunk.len()).unwrap_or(u64::MAX);
        if total > cap {
            return Err(EgressError::TooLarge { limit: cap });
        }
        body.extend_from_slice(&chunk);
    }
    if rule == BodyRule::MustBeUtf8 && std::str::from_utf8(&body).is_err() {
        return Err(EgressError::NotText {
            content_type: "no content type and a body that is not UTF-8".into(),
        });
    }
    Ok(body.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_types() {
        for ok in [
            "text/plain",
            "TEXT/HTML; charset=x",
            "application/json",
            "application/problem+json",
            "text/event-stream",
        ] {
            assert!(is_text(ok.as_bytes()), "{ok}");
        }
        for no in [
            "application/octet-stream",
            "application/+json",
            "image/png",
            "text",
            "/json",
            "application/jsonx",
            "",
        ] {
            assert!(!is_text(no.as_bytes()), "{no}");
        }
    }
}
