//! Typed values shared by several declaration formats: durations and credential paths (each
//! recorded as a reference where boot or a call resolves it).

use std::time::Duration;

use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::CredentialPath;
use crate::refs::Referenced;
use crate::tree::{Node, NodeValue};

/// Reads a duration written as `<number><unit>` with unit `ms`, `s`, `m`, `h` or `d`.
pub(crate) fn duration(node: &Node, path: &str, d: &mut Diag) -> Option<Duration> {
    let parsed = match &node.value {
        NodeValue::Str(text) => parse_duration(text),
        _ => None,
    };
    if parsed.is_none() {
        d.push(
            node.at,
            path,
            "expected a duration such as `30s`, `15m`, `12h` or `7d`",
        );
    }
    parsed
}

/// A duration as declarations write it (`30s`, `15m`, `12h`, `7d`, or a unit word such as
/// `minute`); `None` when it is not one.
pub fn parse_duration(text: &str) -> Option<Duration> {
    // Rate limits read naturally as "per minute"; a unit word is one of that unit.
    match text {
        "second" => return Some(Duration::from_secs(1)),
        "minute" => return Some(Duration::from_secs(60)),
        "hour" => return Some(Duration::from_secs(3600)),
        "day" => return Some(Duration::from_secs(86_400)),
        _ => {}
    }
    let split = text.find(|c: char| !c.is_ascii_digit())?;
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().ok()?;
    let secs = match unit {
        "ms" => return Some(Duration::from_millis(n)),
        "s" => n,
        "m" => n.checked_mul(60)?,
        "h" => n.checked_mul(3600)?,
        "d" => n.checked_mul(86_400)?,
        _ => return None,
    };
    Some(Duration::from_secs(secs))
}

/// Reads a credential path.
pub(crate) fn credential_path(node: &Node, path: &str, d: &mut Diag) -> Option<CredentialPath> {
    let Some(text) = node.as_str() else {
        d.push(
            node.at,
            path,
            format!(
                "expected a credential path such as `crm.mcp_token`, found {}",
                node.kind()
            ),
        );
        return None;
    };
    CredentialPath::try_from(text)
        .map_err(|reason| d.push(node.at, path, reason))
        .ok()
}

/// Records the `credential` key of `f`, for the offline check that it resolves.
pub(crate) fn refer_credential(f: &Fields<'_>, credential: Option<&CredentialPath>, d: &mut Diag) {
    if let Some(path) = credential {
        d.refer(
            f.key_at("credential"),
            &f.key("credential"),
            Referenced::Credential(path.clone()),
        );
    }
}

/// The credential path at `key`, when present, referenced so `airlock check` finds it missing.
pub(crate) fn credential_at(f: &Fields<'_>, key: &str, d: &mut Diag) -> Option<CredentialPath> {
    let path = f
        .get(key)
        .and_then(|n| credential_path(n, &f.key(key), d))?;
    d.refer(
        f.key_at(key),
        &f.key(key),
        Referenced::Credential(path.clone()),
    );
    Some(path)
}

/// A required http(s) URL that secrets travel to (so https unless loopback), referenced so
/// `airlock check` applies the egress rules to it.
pub(crate) fn secret_url(f: &Fields<'_>, key: &str, d: &mut Diag) -> Option<String> {
    let url = f.req_str(key, d)?;
    match crate::urls::check_credential_url(&url, true) {
        Ok(()) => {
            d.refer(
                f.key_at(key),
                &f.key(key),
                Referenced::Url(url.clone(), crate::Reach::Operator),
            );
            Some(url)
        }
        Err(reason) => {
            d.push(f.key_at(key), &f.key(key), reason);
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("7d"), Some(Duration::from_secs(604_800)));
        assert_eq!(parse_duration("250ms"), Some(Duration::from_millis(250)));
        assert_eq!(parse_duration("30s"), Some(Duration::from_secs(30)));
        assert_eq!(parse_duration("7"), None);
        assert_eq!(parse_duration("d"), None);
        assert_eq!(parse_duration("1w"), None);
        assert_eq!(parse_duration("minute"), Some(Duration::from_secs(60)));
    }
}
