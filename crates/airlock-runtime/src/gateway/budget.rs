//! A call's shares of its declaration's limits (docs/rules.md POLICY-57 … POLICY-60), taken
//! from its arguments before it is recorded; the ledger judges and reserves them in the commit
//! that records the call (LEDGER-74).
//!
//! Guarantees: a limit's key names the declaration, the limit and whose budget it keeps, so
//! the calls of every tool of one declaration share it (as `rate_limit` does), and two
//! principals never share a `by: principal` budget; an argument a limit reads that is there but
//! is not what the limit counts (a list, a non-negative number) refuses the call as
//! `bad_arguments`, and one that is absent leaves that limit out of the call.

use airlock_ledger::{BudgetShare, OverLimit};
use airlock_spec::{Limit, LimitBy, LimitOver, Measure, ScopeId, ToolSource, ToolSpec};
use serde_json::Value;

use super::{CallContext, RunCall};
use crate::error::{ToolError, ToolErrorKind};

/// Millionths: shares and caps are stored as whole millionths of the limit's unit.
const MICROS: f64 = 1_000_000.0;

/// The shares `arguments` ask of `spec`'s limits, for the call in `ctx` (of `run`, if any).
///
/// # Errors
/// `bad_arguments` naming the limit, when an argument it reads is not what it counts.
pub(crate) fn shares(
    spec: &ToolSpec,
    ctx: &CallContext,
    run: Option<&RunCall>,
    arguments: &Value,
) -> Result<Vec<BudgetShare>, ToolError> {
    let declaration = declaration(spec);
    let mut out = Vec::with_capacity(spec.policy.limits.len());
    for limit in &spec.policy.limits {
        let Some(share) = share(limit, arguments)? else {
            continue;
        };
        let (whose, label) = whose(limit, ctx, run);
        let cap = micros(limit.max);
        out.push(BudgetShare {
            // The scope too: two manifests' declarations of one name keep budgets of their own.
            key: format!("{}/{declaration}/{}{whose}", ctx.scope, limit.name),
            label,
            unit: match &limit.measure {
                Measure::Amount { unit, .. } => unit.clone(),
                Measure::Calls | Measure::Count(_) => None,
            },
            // Anything past the cap is over it: stored no larger, so sums never overflow.
            share: share.min(cap.saturating_add(1)),
            cap,
            window: limit.per,
            over: match limit.over {
                LimitOver::Deny => OverLimit::Deny,
                LimitOver::Approval => OverLimit::Approval,
            },
        });
    }
    Ok(out)
}

/// Why `edited` cannot replace `proposed` as a call's arguments (docs/rules.md DECIDE-21): an
/// argument a limit reads is not what it counts, or the edit changes a share the proposed
/// arguments reserved when the call was recorded, which is never judged again.
pub(crate) fn edit_refusal(spec: &ToolSpec, proposed: &Value, edited: &Value) -> Option<ToolError> {
    spec.policy.limits.iter().find_map(|limit| {
        let now = match share(limit, edited) {
            Ok(now) => now,
            Err(e) => return Some(e),
        };
        (share(limit, proposed).ok() != Some(now)).then(|| {
            ToolError::new(
                ToolErrorKind::BadArguments,
                format!(
                    "the edit changes what limit `{}` counts, which was judged when the call was \
                     recorded: deny the call and let it be made again with these arguments",
                    limit.name
                ),
            )
        })
    })
}

/// The declaration a tool's limits belong to: its calls share them.
fn declaration(spec: &ToolSpec) -> String {
    match &spec.source {
        ToolSource::Api(op) => format!("api:{}", op.slug),
        ToolSource::McpInline(tool) => format!("mcp:{}", tool.slug),
        ToolSource::Integration(action) => format!("integration:{}", action.request.slug),
        ToolSource::Connection(tool) => format!("connection:{}", tool.namespace),
        ToolSource::Agent(_) | ToolSource::Builtin(_) | ToolSource::Local => {
            format!("tool:{}", spec.definition.name.as_str())
        }
    }
}

/// Whose budget the call draws on: the key's suffix and how a person reads the limit.
fn whose(limit: &Limit, ctx: &CallContext, run: Option<&RunCall>) -> (String, String) {
    let value = match limit.by {
        LimitBy::Tool => return (String::new(), limit.name.clone()),
        // A principal's name has no space, so no principal shares the unnamed callers' budget.
        LimitBy::Principal => ctx
            .principal
            .clone()
            .unwrap_or_else(|| "(no principal)".into()),
        LimitBy::Run => run.map_or_else(|| ctx.session.to_string(), |r| r.run.to_string()),
        LimitBy::Agent => match &ctx.scope {
            ScopeId::Gateway => "gateway".to_owned(),
            ScopeId::Agent(name) => name.clone(),
        },
    };
    let by = limit.by.as_str();
    (
        format!("/{by}:{value}"),
        format!("{} per {by} {value}", limit.name),
    )
}

/// The call's share of `limit`, in millionths; `None` when the argument it reads is absent.
fn share(limit: &Limit, arguments: &Value) -> Result<Option<i64>, ToolError> {
    let refuse = |pointer: &str, what: &str| {
        ToolError::new(
            ToolErrorKind::BadArguments,
            format!(
                "limit `{}` reads {pointer}, which must be {what}",
                limit.name
            ),
        )
    };
    match &limit.measure {
        Measure::Calls => Ok(Some(micros(1.0))),
        Measure::Count(pointer) => match arguments.pointer(pointer) {
            None => Ok(None),
            Some(Value::Array(items)) => Ok(Some(micros(items.len() as f64))),
            Some(_) => Err(refuse(pointer, "a list")),
        },
        Measure::Amount { pointer, .. } => match arguments.pointer(pointer) {
            None => Ok(None),
            Some(Value::Number(n)) => match n.as_f64() {
                Some(x) if x >= 0.0 && x.is_finite() => Ok(Some(micros(x))),
                _ => Err(refuse(pointer, "a number not below zero")),
            },
            Some(_) => Err(refuse(pointer, "a number not below zero")),
        },
    }
}

#[allow(clippy::cast_possible_truncation)]
fn micros(x: f64) -> i64 {
    // Saturates far beyond any real cap: a share that large is over every limit.
    (x * MICROS).round().min(i64::MAX as f64) as i64
}
