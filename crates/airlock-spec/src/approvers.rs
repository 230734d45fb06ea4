//! `approvers:` beside `approval:` on an api or inline mcp declaration (docs/rules.md
//! POLICY-61): how many distinct people must approve a call, who may decide it, and whether its
//! caller may approve it.
//!
//! Guarantees: a quorum is 1 to 10; deciders are principal names (no space, as every principal
//! name); `forbid_self` defaults to on when more than one approval is needed. Every problem is
//! reported at its key, all at once.

use crate::diag::Diag;
use crate::fields::Fields;

/// Who approves a call of the declaration's tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Approvers {
    /// Distinct deciders whose approvals make the call approved (default 1).
    pub quorum: u32,
    /// The principals who may decide the call; empty: whoever may decide on that surface.
    pub deciders: Vec<String>,
    /// The call's own principal may not approve it.
    pub forbid_self: bool,
    /// Who else may decide a call nobody decided in time (POLICY-63).
    pub escalate: Option<Escalation>,
    /// Roles the quorum needs filled, each by a different person (POLICY-65); the quorum is
    /// then their number.
    pub slots: Vec<Slot>,
    /// The slots are stages: each is filled only once the ones before it are.
    pub stages: bool,
}

/// A role among a call's approvers, filled by one of its deciders.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    /// The role's name (`finance`).
    pub name: String,
    /// Who may fill it.
    pub deciders: Vec<String>,
}

/// `escalate: {after, to}`: after `after` without a decision, the principals in `to` may
/// decide the call too, and the outbox tells its routes once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Escalation {
    /// How long a call waits before it is escalated.
    pub after: std::time::Duration,
    /// The principals who may decide it from then on.
    pub to: Vec<String>,
}

impl Default for Approvers {
    fn default() -> Self {
        Self {
            quorum: 1,
            deciders: Vec::new(),
            forbid_self: false,
            escalate: None,
            slots: Vec::new(),
            stages: false,
        }
    }
}

impl Approvers {
    /// Whether deciding a call takes more than one person's plain approval.
    #[must_use]
    pub fn is_plain(&self) -> bool {
        *self == Self::default()
    }
}

/// The most approvals a quorum may ask for.
const MAX_QUORUM: u64 = 10;

/// Reads `approvers: {quorum, deciders, forbid_self}`; the default when absent or wrong (the
/// problem is reported).
pub(crate) fn approvers(f: &Fields<'_>, d: &mut Diag) -> Approvers {
    let Some(node) = f.get("approvers") else {
        return Approvers::default();
    };
    let keys = [
        "quorum",
        "deciders",
        "forbid_self",
        "escalate",
        "slots",
        "stages",
    ];
    let Some(a) = Fields::open(node, &f.key("approvers"), &keys, d) else {
        return Approvers::default();
    };
    let slots = slots(&a, d);
    if slots.len() as u64 > MAX_QUORUM {
        d.push(
            a.key_at("slots"),
            &a.key("slots"),
            format!("at most {MAX_QUORUM} slots (each is one approval)"),
        );
    }
    let quorum = match a.opt_u64("quorum", d) {
        None if !slots.is_empty() => u32::try_from(slots.len()).unwrap_or(1),
        None => 1,
        Some(n @ 1..=MAX_QUORUM) => u32::try_from(n).unwrap_or(1),
        Some(_) => {
            d.push(
                a.key_at("quorum"),
                &a.key("quorum"),
                format!("expected 1 to {MAX_QUORUM} approvals"),
            );
            1
        }
    };
    let deciders = a.opt_str_list("deciders", d).unwrap_or_default();
    for (name, at) in &deciders {
        if name.is_empty() || name.contains(char::is_whitespace) {
            d.push(
                *at,
                &a.key("deciders"),
                format!("`{name}` is not a principal name (no spaces)"),
            );
        }
    }
    // One person votes once: a name written twice counts once.
    let distinct: std::collections::HashSet<&str> =
        deciders.iter().map(|(name, _)| name.as_str()).collect();
    if !deciders.is_empty() && (distinct.len() as u64) < u64::from(quorum) {
        d.push(
            a.key_at("deciders"),
            &a.key("deciders"),
            format!(
                "{} decider(s) can never make a quorum of {quorum}",
                distinct.len()
            ),
        );
    }
    if !slots.is_empty() && usize::try_from(quorum).ok() != Some(slots.len()) {
        d.push(
            a.key_at("quorum"),
            &a.key("quorum"),
            format!("with `slots` the quorum is their number, {}", slots.len()),
        );
    }
    let stages = a.opt_bool("stages", d).ok().flatten().unwrap_or(false);
    if stages && slots.is_empty() {
        d.push(
            a.key_at("stages"),
            &a.key("stages"),
            "`stages` orders `slots`: give them",
        );
    }
    let forbid_self = a
        .opt_bool("forbid_self", d)
        .ok()
        .flatten()
        .unwrap_or(quorum > 1);
    Approvers {
        quorum,
        deciders: deciders.into_iter().map(|(name, _)| name).collect(),
        forbid_self,
        escalate: escalation(&a, d),
        slots,
        stages,
    }
}

/// Reads `slots: [{name, deciders}]`: distinct names, each with at least one decider.
fn slots(a: &Fields<'_>, d: &mut Diag) -> Vec<Slot> {
    let Some(items) = a.opt_list("slots", d) else {
        return Vec::new();
    };
    let mut out: Vec<Slot> = Vec::new();
    for (path, node) in items {
        let Some(s) = Fields::open(node, &path, &["name", "deciders"], d) else {
            continue;
        };
        let name = s.required("name", d).and_then(|_| s.opt_str("name", d));
        let deciders = s
            .required("deciders", d)
            .and_then(|_| s.opt_str_list("deciders", d));
        let (Some(name), Some(deciders)) = (name, deciders) else {
            continue;
        };
        if let Some((bad, at)) = deciders
            .iter()
            .find(|(n, _)| n.is_empty() || n.contains(char::is_whitespace))
        {
            let problem = format!("`{bad}` is not a principal name (no spaces)");
            d.push(*at, &s.key("deciders"), problem);
            continue;
        }
        if deciders.is_empty() || out.iter().any(|o| o.name == name) {
            d.push(
                s.key_at("name"),
                &s.key("name"),
                format!("a slot `{name}` needs a name of its own and at least one decider"),
            );
            continue;
        }
        out.push(Slot {
            name,
            deciders: deciders.into_iter().map(|(n, _)| n).collect(),
        });
    }
    out
}

/// Reads `escalate: {after, to}`: both required, `to` a non-empty list of principal names.
fn escalation(a: &Fields<'_>, d: &mut Diag) -> Option<Escalation> {
    let node = a.get("escalate")?;
    let e = Fields::open(node, &a.key("escalate"), &["after", "to"], d)?;
    let after = e
        .required("after", d)
        .and_then(|n| crate::values::duration(n, &e.key("after"), d));
    let to = e.required("to", d).and_then(|_| e.opt_str_list("to", d));
    let to: Vec<String> = to?.into_iter().map(|(name, _)| name).collect();
    if to.is_empty()
        || to
            .iter()
            .any(|n| n.is_empty() || n.contains(char::is_whitespace))
    {
        d.push(
            e.key_at("to"),
            &e.key("to"),
            "expected a list of principal names (no spaces)",
        );
        return None;
    }
    Some(Escalation { after: after?, to })
}
