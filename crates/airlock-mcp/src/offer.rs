//! The port for what an endpoint scope offers beside tools: the resources, resource templates,
//! prompts and completion of the upstream servers behind it (docs/rules.md MCP-54..MCP-62).
//!
//! Guarantees: airlock's own vocabulary, as [`crate::ToolHost`]'s — entries and results cross
//! as JSON objects in their MCP wire form, never as SDK types. Every method has a default that
//! offers nothing, so a host without upstream catalogs (tests, tools-only hosts) implements it
//! with an empty `impl`. What a caller is shown and may read is the host's decision: the
//! endpoint serves exactly what it answers.

use airlock_spec::ScopeId;
use futures::future::BoxFuture;

use crate::catalog::Entry;
use crate::host::{Caller, HostError};

/// Which of the capabilities beside tools a scope declares: only those it has something for.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Offers {
    /// Some resource or resource template.
    pub resources: bool,
    /// Some prompt.
    pub prompts: bool,
    /// Some upstream that completes its prompts' or templates' arguments.
    pub completions: bool,
}

/// One of the lists a scope serves beside `tools/list`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Listed {
    /// `resources/list`.
    Resources,
    /// `resources/templates/list`.
    Templates,
    /// `prompts/list`.
    Prompts,
}

/// What a scope offers beside tools, and what reaches it. Implemented by the runtime.
pub trait OfferHost {
    /// The capabilities `scope` has entries for (declared to every caller alike, as `tools`).
    fn offers(&self, scope: &ScopeId) -> Offers {
        let _ = scope;
        Offers::default()
    }

    /// The entries of `list` that `caller` may see in `scope`, as served (names and URIs
    /// already namespaced).
    ///
    /// # Errors
    /// An unknown scope.
    fn list_offered(
        &self,
        scope: &ScopeId,
        caller: &Caller,
        list: Listed,
    ) -> Result<Vec<Entry>, HostError> {
        let _ = (scope, caller, list);
        Ok(Vec::new())
    }

    /// Reads the resource `uri` (a served URI) for `caller`: a listed resource, or a URI one
    /// of the listed templates matches. Anything else is [`HostError::ResourceNotFound`].
    fn read_resource<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        uri: &'a str,
    ) -> BoxFuture<'a, Result<Entry, HostError>> {
        let _ = (scope, caller);
        Box::pin(async move { Err(HostError::ResourceNotFound(uri.to_owned())) })
    }

    /// `prompts/get` with `params` as the client sent them (the served prompt name).
    fn get_prompt<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        params: Entry,
    ) -> BoxFuture<'a, Result<Entry, HostError>> {
        let _ = (scope, caller);
        let name = params
            .get("name")
            .and_then(|n| n.as_str())
            .unwrap_or_default();
        let unknown = HostError::InvalidParams(format!("unknown prompt: {name}"));
        Box::pin(async move { Err(unknown) })
    }

    /// `completion/complete` with `params` as the client sent them (a served prompt name or
    /// template URI in `ref`).
    fn complete<'a>(
        &'a self,
        scope: &'a ScopeId,
        caller: &'a Caller,
        params: Entry,
    ) -> BoxFuture<'a, Result<Entry, HostError>> {
        let _ = (scope, caller, params);
        Box::pin(async move { Err(HostError::InvalidParams("nothing to complete".into())) })
    }
}
