//! Rate limits of `type: api` and `type: mcp` declarations (POLICY-16): one budget per
//! declaration — (scope, declaration) — shared by every tool the declaration makes and by every
//! principal, so all callers together send the tenant's API at most the declared rate; and,
//! with `rate_limit.per_principal`, each principal's own budget on top. The budgets live in the
//! ledger ([`Rates::take_rate`](airlock_ledger::roles::Rates::take_rate)), so every process and
//! replica on one database spends from the same ones. A call over a limit is refused before it
//! runs, as `rate_limited` with a retry-after (POLICY-17), and spends nothing from its other
//! budget.

use std::time::Duration;

use airlock_ledger::{LedgerError, RateBudget, Store};
use airlock_spec::{RateLimit, ScopeId, ToolSource, ToolSpec};

use crate::ToolError;

/// Whether calls of `spec` spend from a budget.
pub(crate) fn is_limited(spec: &ToolSpec) -> bool {
    spec.policy.rate_limit.is_some() || spec.policy.per_principal_rate_limit.is_some()
}

/// Takes one call from the budgets of `spec` for `principal`: `None` when it may run now,
/// otherwise the refusal to store on its row.
pub(crate) async fn refusal(
    store: &dyn Store,
    scope: &ScopeId,
    spec: &ToolSpec,
    principal: Option<&str>,
) -> Result<Option<ToolError>, LedgerError> {
    let declaration = declaration(spec);
    let limits = limits(spec);
    if limits.is_empty() {
        return Ok(None);
    }
    let budgets = limits
        .iter()
        .map(|(limit, whose)| budget(scope, &declaration, *limit, *whose, principal))
        .collect();
    let Some(refused) = store.take_rate(budgets).await? else {
        return Ok(None);
    };
    let Some((limit, whose)) = limits.get(refused.budget) else {
        return Err(LedgerError::Invalid(format!(
            "the ledger refused budget {} of {}",
            refused.budget,
            limits.len()
        )));
    };
    Ok(Some(refused_error(
        &declaration,
        *limit,
        *whose,
        refused.retry_after,
    )))
}

/// Whose budget a limit is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Whose {
    /// Every caller's: the declaration's own.
    Everyone,
    /// The calling principal's alone.
    Principal,
}

/// The limits a call of `spec` is subject to.
fn limits(spec: &ToolSpec) -> Vec<(RateLimit, Whose)> {
    let policy = &spec.policy;
    [
        policy.rate_limit.map(|l| (l, Whose::Everyone)),
        policy
            .per_principal_rate_limit
            .map(|l| (l, Whose::Principal)),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The declaration a tool came from: its limit is shared by all its tools.
fn declaration(spec: &ToolSpec) -> String {
    match &spec.source {
        ToolSource::Api(op) => op.slug.clone(),
        ToolSource::Integration(action) => action.request.slug.clone(),
        ToolSource::McpInline(tool) => tool.slug.clone(),
        _ => spec.definition.name.to_string(),
    }
}

/// The ledger's budget for `limit`, keyed as a JSON array so no scope, declaration or
/// principal name can make two keys collide. Calls without a principal share one budget.
fn budget(
    scope: &ScopeId,
    declaration: &str,
    limit: RateLimit,
    whose: Whose,
    principal: Option<&str>,
) -> RateBudget {
    let scope = scope.to_string();
    let key = match whose {
        Whose::Everyone => serde_json::json!([scope, declaration]),
        Whose::Principal => serde_json::json!([scope, declaration, principal.unwrap_or_default()]),
    };
    RateBudget {
        key: key.to_string(),
        requests: limit.requests,
        per: limit.per,
    }
}

/// The stored refusal: which limit, and when to try again (at least a second, rounded up).
fn refused_error(declaration: &str, limit: RateLimit, whose: Whose, wait: Duration) -> ToolError {
    let whose = match whose {
        Whose::Everyone => "",
        Whose::Principal => " per principal",
    };
    let wait = Duration::from_secs(wait.as_secs() + u64::from(wait.subsec_nanos() > 0))
        .max(Duration::from_secs(1));
    ToolError::rate_limited(
        format!(
            "`{declaration}` allows {} calls per {} s{whose}; try again in {} s",
            limit.requests,
            limit.per.as_secs(),
            wait.as_secs()
        ),
        Some(wait),
    )
}
