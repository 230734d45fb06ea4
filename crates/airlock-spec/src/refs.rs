//! What a deployment points at outside its own files — credential paths and URLs — each with
//! the place it was written, so a later offline check (credentials present, egress rules) can
//! report a problem at file:line:key like any load error. Collected while loading; never
//! resolved here (this crate reads no secret and knows no egress rule).

use std::path::PathBuf;

use crate::names::CredentialPath;

/// One credential path or URL of a valid deployment, with where it is declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reference {
    /// The file, relative to the deployment directory.
    pub file: PathBuf,
    /// 1-based line of the value.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
    /// Key path, e.g. `connections.erp.credential`.
    pub key: String,
    /// What is referenced.
    pub target: Referenced,
}

/// The referenced thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Referenced {
    /// A credential boot or a call resolves.
    Credential(CredentialPath),
    /// A model's API key: resolved only when a run of its agent starts, so an offline check
    /// warns about it rather than refusing the deployment.
    ModelCredential(CredentialPath),
    /// A URL the gateway connects to through the egress guard, with whose allowances.
    Url(String, Reach),
}

/// Which egress policy a referenced URL is judged by (docs/rules.md EGRESS-38).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reach {
    /// The operator's own destination, or one it vouched for: `[egress] allow` applies.
    Operator,
    /// A tenant's destination: public addresses only.
    Tenant,
    /// Catalog integration `<slug>`'s base URL: public addresses only, unless the slug is in
    /// `[egress] allow_integrations`.
    Integration(String),
}
