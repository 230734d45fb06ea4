//! airlock declarations: the validated model of a deployment directory.
//!
//! This crate reads files and nothing else: no network, no database, no async runtime.
//! Everything that leaves it has been validated; declaration shapes stay private.

mod canonical;
mod policy;

pub use canonical::{canonical_json, sha256_hex};
pub use policy::{Approval, Effect, Mode, SourceKind, UnknownWord};
