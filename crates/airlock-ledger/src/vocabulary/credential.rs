//! Which credential an attempt of a call carried (docs/rules.md LEDGER-84): kept on the row,
//! written by the commit that finishes the attempt, part of the row's audited content.
//!
//! Guarantees: it names a credential (connection, principal, kind, issuer and a keyed digest of
//! the token) and never holds the token itself.

use serde::{Deserialize, Serialize};

/// Which principal's own credential one attempt of a call carried; never the token.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CredentialUse {
    /// The connection.
    pub connection: String,
    /// Whose credential.
    pub principal: String,
    /// `secret`, `oauth`, `token_exchange` or `jwt_bearer`.
    pub kind: String,
    /// Who issued the token, if anyone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issuer: Option<String>,
    /// The token's keyed digest.
    pub digest: String,
}
