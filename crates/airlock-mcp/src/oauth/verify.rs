//! One access token checked against one key: the header's algorithm before anything else, then
//! the signature, `iss` and `aud` (by `jsonwebtoken`), then `exp` and `nbf` by airlock's own
//! clock, then the claims airlock reads (AUTH-3..AUTH-8).

use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::jwk::{AlgorithmParameters, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey, Header, Validation};
use serde_json::{Map, Value};

use super::{OAuthSettings, TokenError};

/// The longest principal accepted, in characters: it is recorded on every call.
const MAX_PRINCIPAL_CHARS: usize = 256;

/// The token's header, if its `alg` is one of `allowed`. The `alg` is read from the raw JSON
/// first, so `none` or an HMAC algorithm is an [`TokenError::Algorithm`], not a parse error.
pub(super) fn header(token: &str, allowed: &[Algorithm]) -> Result<Header, TokenError> {
    let encoded = token.split('.').next().ok_or(TokenError::Malformed)?;
    if token.split('.').count() != 3 {
        return Err(TokenError::Malformed);
    }
    let raw: Value = URL_SAFE_NO_PAD
        .decode(encoded)
        .ok()
        .and_then(|bytes| serde_json::from_slice(&bytes).ok())
        .ok_or(TokenError::Malformed)?;
    let alg = raw
        .get("alg")
        .and_then(Value::as_str)
        .and_then(|a| a.parse::<Algorithm>().ok());
    if !alg.is_some_and(|a| allowed.contains(&a)) {
        return Err(TokenError::Algorithm);
    }
    jsonwebtoken::decode_header(token).map_err(|_| TokenError::Malformed)
}

/// The token's claims, once the signature verifies with `key` and `iss`, `aud`, `exp` and
/// `nbf` hold at `now`.
pub(super) fn claims(
    token: &str,
    header: &Header,
    key: &Jwk,
    settings: &OAuthSettings,
    audiences: &[String],
    now: SystemTime,
) -> Result<Map<String, Value>, TokenError> {
    let decoding = decoding_key(key, header.alg)?;
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&settings.issuer]);
    validation.set_audience(audiences);
    validation.set_required_spec_claims(&["iss", "aud", "exp"]);
    // Time is checked below, by the injected clock, not by the library's own.
    validation.validate_exp = false;
    validation.validate_nbf = false;
    let data =
        jsonwebtoken::decode::<Map<String, Value>>(token, &decoding, &validation).map_err(|e| {
            match e.into_kind() {
                ErrorKind::InvalidSignature => TokenError::Signature,
                ErrorKind::InvalidIssuer => TokenError::Issuer,
                ErrorKind::InvalidAudience => TokenError::Audience,
                ErrorKind::InvalidAlgorithm => TokenError::Algorithm,
                ErrorKind::MissingRequiredClaim(claim) | ErrorKind::InvalidClaimFormat(claim) => {
                    TokenError::Claim(claim)
                }
                _ => TokenError::Malformed,
            }
        })?;
    check_time(&data.claims, settings.leeway.as_secs(), now)?;
    Ok(data.claims)
}

/// The key as a verifier for `alg`: a symmetric key, a key of another family, a key for
/// another algorithm or for encryption is never used.
fn decoding_key(key: &Jwk, alg: Algorithm) -> Result<DecodingKey, TokenError> {
    if matches!(
        key.algorithm,
        AlgorithmParameters::OctetKey(_) | AlgorithmParameters::Other(_)
    ) || key
        .common
        .public_key_use
        .as_ref()
        .is_some_and(|u| *u != PublicKeyUse::Signature)
    {
        return Err(TokenError::Algorithm);
    }
    if let Some(declared) = key.common.key_algorithm
        && declared.to_string().parse::<Algorithm>().ok() != Some(alg)
    {
        return Err(TokenError::Algorithm);
    }
    let decoding = DecodingKey::from_jwk(key).map_err(|_| TokenError::UnknownKid)?;
    if decoding.family() != alg.family() {
        return Err(TokenError::Algorithm);
    }
    Ok(decoding)
}

fn check_time(claims: &Map<String, Value>, leeway: u64, now: SystemTime) -> Result<(), TokenError> {
    let now = now.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let exp = seconds(claims, "exp")?.ok_or_else(|| TokenError::Claim("exp".to_owned()))?;
    if now > exp.saturating_add(leeway) {
        return Err(TokenError::Expired);
    }
    if let Some(nbf) = seconds(claims, "nbf")?
        && now.saturating_add(leeway) < nbf
    {
        return Err(TokenError::NotYetValid);
    }
    Ok(())
}

/// A NumericDate claim in whole seconds (a fraction is dropped, a negative time is 0).
fn seconds(claims: &Map<String, Value>, name: &str) -> Result<Option<u64>, TokenError> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => Ok(Some(n.as_u64().unwrap_or_else(|| {
            // Truncation is the point: a NumericDate may carry a fraction.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let whole = n.as_f64().map_or(0, |f| f.max(0.0) as u64);
            whole
        }))),
        Some(_) => Err(TokenError::Claim(name.to_owned())),
    }
}

/// The principal: the claim `name`, a non-empty string of printable characters.
pub(super) fn principal(claims: &Map<String, Value>, name: &str) -> Result<String, TokenError> {
    claims
        .get(name)
        .and_then(Value::as_str)
        .filter(|p| {
            !p.trim().is_empty()
                && p.chars().count() <= MAX_PRINCIPAL_CHARS
                && !p.chars().any(char::is_control)
        })
        .map(str::to_owned)
        .ok_or_else(|| TokenError::Claim(name.to_owned()))
}

/// The groups: the claim `name` as one string or a list of strings; none when absent.
pub(super) fn groups(claims: &Map<String, Value>, name: &str) -> Result<Vec<String>, TokenError> {
    match claims.get(name) {
        None => Ok(Vec::new()),
        Some(Value::String(group)) => Ok(vec![group.clone()]),
        Some(Value::Array(items)) => items
            .iter()
            .map(|g| g.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| TokenError::Claim(name.to_owned())),
        Some(_) => Err(TokenError::Claim(name.to_owned())),
    }
}

/// The token's scopes: `scope` (space-separated, RFC 9068) or `scp` (a list or a string).
pub(super) fn scopes(claims: &Map<String, Value>) -> Vec<&str> {
    match claims.get("scope").or_else(|| claims.get("scp")) {
        Some(Value::String(s)) => s.split_ascii_whitespace().collect(),
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn map(v: Value) -> Map<String, Value> {
        match v {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    }

    #[test]
    fn groups_are_a_string_or_a_list_of_strings() {
        assert_eq!(
            groups(&map(json!({"g": "ops"})), "g"),
            Ok(vec!["ops".into()])
        );
        assert_eq!(
            groups(&map(json!({"g": ["a", "b"]})), "g"),
            Ok(vec!["a".into(), "b".into()])
        );
        assert_eq!(groups(&map(json!({})), "g"), Ok(vec![]));
        assert_eq!(
            groups(&map(json!({"g": [1]})), "g"),
            Err(TokenError::Claim("g".into()))
        );
    }

    #[test]
    fn scopes_come_from_scope_or_scp() {
        assert_eq!(scopes(&map(json!({"scope": "a  b"}))), ["a", "b"]);
        assert_eq!(scopes(&map(json!({"scp": ["c"]}))), ["c"]);
        assert!(scopes(&map(json!({"scope": 3}))).is_empty());
    }

    #[test]
    fn a_principal_is_printable_and_bounded() {
        assert_eq!(
            principal(&map(json!({"sub": "ada"})), "sub"),
            Ok("ada".into())
        );
        for bad in [json!(""), json!("a\nb"), json!(7), json!("x".repeat(257))] {
            assert!(principal(&map(json!({"sub": bad})), "sub").is_err());
        }
    }

    #[test]
    fn exp_and_nbf_allow_the_leeway_only() {
        let at = |s: u64| UNIX_EPOCH + std::time::Duration::from_secs(s);
        let c = map(json!({"exp": 1000, "nbf": 500}));
        assert_eq!(check_time(&c, 30, at(1030)), Ok(()));
        assert_eq!(check_time(&c, 30, at(1031)), Err(TokenError::Expired));
        assert_eq!(check_time(&c, 30, at(470)), Ok(()));
        assert_eq!(check_time(&c, 30, at(469)), Err(TokenError::NotYetValid));
        assert_eq!(
            check_time(&map(json!({"exp": "soon"})), 30, at(0)),
            Err(TokenError::Claim("exp".into()))
        );
    }
}
