//! Rules shared by the tool declarations of agent manifests: `writes`/`mode`, rate limits,
//! approval, and the final-name check.

use crate::diag::Diag;
use crate::fields::Fields;
use crate::names::ToolName;
use crate::policy::{Approval, Mode};
use crate::tool::{Policy, RateLimit, ToolDefinition, ToolSource, ToolSpec};
use crate::tree::{Node, Pos};
use crate::values::duration;

/// A tool as declared, with where it was declared (for collision messages).
#[derive(Debug, Clone)]
pub(crate) struct Declared {
    pub(crate) spec: ToolSpec,
    pub(crate) at: Pos,
    pub(crate) path: String,
    /// Where its `connection` key is, for a tool that names one (every operation of an api
    /// entry shares its entry's key).
    pub(crate) connection_at: Option<(Pos, String)>,
    /// Its entry's `auth` key, for a tool that names a connection (DECL-86, DECL-87).
    pub(crate) auth_key: Option<AuthKey>,
}

/// Where a tool's `auth` is written, or where it would be (the entry) when it is absent.
#[derive(Debug, Clone)]
pub(crate) struct AuthKey {
    pub(crate) at: Pos,
    pub(crate) path: String,
    /// Whether the entry has the key: an absent `auth` on a credentialed connection would
    /// send the call without its credential, silently (DECL-86).
    pub(crate) written: bool,
}

/// Marks `tools` as declared under the `connection` and `auth` keys of `f`.
pub(crate) fn under_connection(f: &Fields<'_>, mut tools: Vec<Declared>) -> Vec<Declared> {
    let at = (f.key_at("connection"), f.key("connection"));
    let auth = AuthKey {
        at: f.key_at("auth"),
        path: f.key("auth"),
        written: f.has("auth"),
    };
    for tool in &mut tools {
        tool.connection_at = Some(at.clone());
        tool.auth_key = Some(auth.clone());
    }
    tools
}

/// Reads `writes` and `mode` (DECL-20): `writes` is required and exactly `true` or `false`;
/// `true` only with `mode: propose`; `mode` only on writes.
pub(crate) fn writes_and_mode(f: &Fields<'_>, d: &mut Diag) -> Option<(bool, Mode)> {
    let Ok(writes) = f.opt_bool("writes", d) else {
        return None;
    };
    let Some(writes) = writes else {
        d.push(f.key_at("writes"), &f.key("writes"), "`writes` is required: declare `writes: false` for a read, or `writes: true` with `mode: propose`");
        return None;
    };
    let mode = f.opt_str("mode", d);
    match (writes, mode.as_deref()) {
        (false, None) => Some((false, Mode::Execute)),
        (false, Some(_)) => {
            d.push(
                f.key_at("mode"),
                &f.key("mode"),
                "`mode` applies only to writes: remove it, or declare `writes: true`",
            );
            None
        }
        (true, Some("propose")) => Some((true, Mode::Propose)),
        (true, Some(other)) => {
            d.push(
                f.key_at("mode"),
                &f.key("mode"),
                format!("`mode: {other}` is not supported; the only mode is `propose`"),
            );
            None
        }
        (true, None) => {
            d.push(f.key_at("writes"), &f.key("writes"), "a write must declare `mode: propose`: airlock never executes a tenant write directly, it returns it as a proposal");
            None
        }
    }
}

/// Reads `rate_limit: {requests, per, per_principal: {requests, per}}` (POLICY-16): the
/// declaration's one budget, and optionally each principal's budget on top of it.
pub(crate) fn rate_limits(f: &Fields<'_>, d: &mut Diag) -> (Option<RateLimit>, Option<RateLimit>) {
    let Some(node) = f.get("rate_limit") else {
        return (None, None);
    };
    let keys = ["requests", "per", "per_principal"];
    let Some(r) = Fields::open(node, &f.key("rate_limit"), &keys, d) else {
        return (None, None);
    };
    let shared = rate(&r, d);
    let per_principal = r
        .get("per_principal")
        .and_then(|n| Fields::open(n, &r.key("per_principal"), &["requests", "per"], d))
        .and_then(|p| rate(&p, d));
    (shared, per_principal)
}

/// Reads the required `requests` (at least 1) and `per` of a rate.
fn rate(r: &Fields<'_>, d: &mut Diag) -> Option<RateLimit> {
    let requests = r
        .required("requests", d)
        .and_then(|_| r.opt_u64("requests", d));
    let per = r
        .required("per", d)
        .and_then(|n| duration(n, &r.key("per"), d));
    let requests = match requests.map(u32::try_from) {
        Some(Ok(n)) if n > 0 => n,
        Some(_) => {
            d.push(
                r.key_at("requests"),
                &r.key("requests"),
                "expected at least 1 request per window",
            );
            return None;
        }
        None => return None,
    };
    match per? {
        per if per.is_zero() => {
            d.push(
                r.key_at("per"),
                &r.key("per"),
                "the window must be longer than zero",
            );
            None
        }
        per => Some(RateLimit { requests, per }),
    }
}

/// Reads the keys every api/mcp declaration shares: `description` (type only; the model sees
/// the operations' descriptions), `approval` and `rate_limit`.
pub(crate) fn shared_policy(f: &Fields<'_>, d: &mut Diag) -> Policy {
    f.opt_str("description", d);
    let approval = approval(f, d).unwrap_or_default();
    let (rate_limit, per_principal_rate_limit) = rate_limits(f, d);
    Policy {
        approval,
        rate_limit,
        per_principal_rate_limit,
        limits: crate::limits::limits(f, d),
        approvers: crate::approvers::approvers(f, d),
        ..Policy::default()
    }
}

/// `confirm:` is read on catalog integrations only (docs/rules.md POLICY-13); on a `type: api`
/// or `type: mcp` tool it is accepted, whatever its value, and named in a warning so the
/// operator knows it does nothing there.
pub(crate) fn unread_confirm(f: &Fields<'_>, ty: &str, d: &mut Diag) {
    if f.has("confirm") {
        d.warn(
            f.key_at("confirm"),
            &f.key("confirm"),
            format!("`confirm` is not read on `type: {ty}` tools (only catalog integrations read it); it is ignored here — use `approval` to have a person approve calls"),
        );
    }
}

/// Reads an optional `approval` word (default `never`).
pub(crate) fn approval(f: &Fields<'_>, d: &mut Diag) -> Option<Approval> {
    f.word::<Approval>("approval", d)
        .ok()
        .map(Option::unwrap_or_default)
}

/// Refuses `approval: caller` where no person at an MCP client can ever be asked: `why` names
/// the tool and says why (docs/rules.md POLICY-39, POLICY-40). The error is at the `approval`
/// key; `None` when refused.
pub(crate) fn no_caller_approval(
    f: &Fields<'_>,
    approval: Approval,
    why: &str,
    d: &mut Diag,
) -> Option<Approval> {
    if approval != Approval::Caller {
        return Some(approval);
    }
    d.push(
        f.key_at("approval"),
        &f.key("approval"),
        format!("`approval: caller` asks the person at the MCP client that made the call, and {why}: use `always` or `once`"),
    );
    None
}

/// Builds a declared tool after checking its final name (`^[a-zA-Z0-9_-]{1,64}$`).
pub(crate) fn declare(
    name: &str,
    description: String,
    input_schema: serde_json::Value,
    source: ToolSource,
    policy: Policy,
    (at, path): (Pos, &str),
    d: &mut Diag,
) -> Option<Declared> {
    let name = ToolName::try_from(name)
        .map_err(|reason| d.push(at, path, format!("final tool name: {reason}")))
        .ok()?;
    let definition = ToolDefinition {
        name,
        description,
        input_schema,
    };
    Some(Declared {
        spec: ToolSpec {
            definition,
            source,
            policy,
        },
        at,
        path: path.to_owned(),
        connection_at: None,
        auth_key: None,
    })
}

/// Reads a required, non-empty `description`.
pub(crate) fn description(f: &Fields<'_>, d: &mut Diag) -> Option<String> {
    let text = f.req_str("description", d)?;
    if text.trim().is_empty() {
        d.push(
            f.key_at("description"),
            &f.key("description"),
            "`description` cannot be empty: the model reads it to choose the tool",
        );
        return None;
    }
    Some(text)
}

/// The node of a required list that must not be empty.
pub(crate) fn non_empty_list<'n>(
    f: &Fields<'n>,
    key: &str,
    what: &str,
    d: &mut Diag,
) -> Vec<(String, &'n Node)> {
    if f.required(key, d).is_none() {
        return Vec::new();
    }
    let items = f.opt_list(key, d).unwrap_or_default();
    if items.is_empty()
        && f.get(key)
            .is_some_and(|n| matches!(n.value, crate::tree::NodeValue::Seq(_)))
    {
        d.push(
            f.key_at(key),
            &f.key(key),
            format!("`{key}` needs at least one {what}"),
        );
    }
    items
}
