//! `[[access]]` in `airlock.toml`: which principals and groups may see and call which tools,
//! and approval overrides for them (docs/rules.md POLICY-43 … POLICY-49).
//!
//! Guarantees: every rule names someone (`principals`, `groups` or both) and at least one tool
//! pattern; a pattern uses only tool-name characters and the wildcards `*` and `?`; a scope is
//! `gateway` or `agent:<name>` of a deployed agent (checked once the agents are loaded,
//! [`check_scopes`]). Without any rule nothing is filtered (today's behaviour); with one, a
//! caller sees and calls only what some rule grants it, in every scope. An approval override
//! is the `approval` of the last matching rule in file order that sets one.

use std::collections::BTreeMap;

use crate::agent::AgentSpec;
use crate::diag::Diag;
use crate::fields::Fields;
use crate::policy::Approval;
use crate::scope::ScopeId;
use crate::tree::{Node, Pos};

/// The principal pattern that matches every authenticated principal.
pub const EVERYONE: &str = "*";

/// The keys of one `[[access]]` rule.
const RULE_KEYS: [&str; 5] = ["principals", "groups", "scopes", "tools", "approval"];

/// One `[[access]]` rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessRule {
    /// `principals`: principal names it applies to; `*` is every principal.
    pub principals: Vec<String>,
    /// `groups`: groups it applies to (a token's `groups`, or its groups claim).
    pub groups: Vec<String>,
    /// `scopes`: the endpoints it applies to; `None` (the key absent): every scope.
    pub scopes: Option<Vec<ScopeId>>,
    /// `tools`: name patterns (`*` any run of characters, `?` one) of the tools it grants.
    pub tools: Vec<String>,
    /// `approval`: replaces the declared approval of the tools it grants, when set.
    pub approval: Option<Approval>,
    /// Where each scope was written, to report one naming no deployed agent.
    scope_places: Vec<Pos>,
}

/// Who is asking: the authenticated principal and its groups.
#[derive(Debug, Clone, Copy)]
pub struct Principal<'a> {
    /// The principal's name.
    pub name: &'a str,
    /// The groups it belongs to.
    pub groups: &'a [String],
}

/// What the policy says about one tool for one principal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// No rule grants it: not listed, and a call is refused.
    Refused,
    /// Granted; `approval` replaces the declared approval when set.
    Granted {
        /// The override of the last matching rule that sets one.
        approval: Option<Approval>,
    },
}

/// The `[[access]]` rules in file order. Empty: no policy, every tool of a scope its token
/// reaches is visible to every caller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct AccessPolicy {
    /// The rules, in file order.
    pub rules: Vec<AccessRule>,
}

impl AccessPolicy {
    /// Whether there is no rule (nothing is filtered).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// The verdict on `tool` of `scope` for `who`. Without rules every tool is granted with
    /// its declared approval.
    #[must_use]
    pub fn verdict(&self, scope: &ScopeId, who: Principal<'_>, tool: &str) -> Verdict {
        if self.is_empty() {
            return Verdict::Granted { approval: None };
        }
        let mut matching = self
            .rules
            .iter()
            .filter(|r| r.applies(scope, who) && r.tools.iter().any(|p| glob(p, tool)))
            .peekable();
        if matching.peek().is_none() {
            return Verdict::Refused;
        }
        let approval = matching.filter_map(|r| r.approval).next_back();
        Verdict::Granted { approval }
    }
}

impl AccessRule {
    fn applies(&self, scope: &ScopeId, who: Principal<'_>) -> bool {
        let named = self
            .principals
            .iter()
            .any(|p| p == EVERYONE || p == who.name);
        let grouped = self.groups.iter().any(|g| who.groups.contains(g));
        let in_scope = self.scopes.as_ref().is_none_or(|s| s.contains(scope));
        (named || grouped) && in_scope
    }
}

/// Whether `name` matches `pattern`: `*` any run of characters (none included), `?` exactly
/// one, anything else itself. Iterative with one backtrack point, so linear in practice.
#[must_use]
pub fn glob(pattern: &str, name: &str) -> bool {
    let (p, n): (Vec<char>, Vec<char>) = (pattern.chars().collect(), name.chars().collect());
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match p.get(pi) {
            Some('*') => {
                star = Some((pi, ni));
                pi += 1;
            }
            Some(c) if *c == '?' || *c == n[ni] => {
                pi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sp, sn)) => {
                    pi = sp + 1;
                    ni = sn + 1;
                    star = Some((sp, sn + 1));
                }
                None => return false,
            },
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Reads `[[access]]` (an array of tables), pushing every problem.
pub(crate) fn read_access(node: Option<&Node>, d: &mut Diag) -> AccessPolicy {
    let Some(node) = node else {
        return AccessPolicy::default();
    };
    let Some(items) = as_list(node, d) else {
        return AccessPolicy::default();
    };
    let rules = items
        .iter()
        .enumerate()
        .filter_map(|(i, item)| read_rule(item, &format!("access[{i}]"), d))
        .collect();
    AccessPolicy { rules }
}

fn as_list<'n>(node: &'n Node, d: &mut Diag) -> Option<&'n [Node]> {
    match &node.value {
        crate::tree::NodeValue::Seq(items) => Some(items),
        _ => {
            d.push(
                node.at,
                "access",
                format!(
                    "expected an array of tables (`[[access]]`), found {}",
                    node.kind()
                ),
            );
            None
        }
    }
}

fn read_rule(node: &Node, path: &str, d: &mut Diag) -> Option<AccessRule> {
    let f = Fields::open(node, path, &RULE_KEYS, d)?;
    let names = |key: &str, d: &mut Diag| names(&f, key, d);
    let principals = names("principals", d);
    let groups = names("groups", d);
    if principals.is_empty() && groups.is_empty() {
        d.push(
            f.at(),
            path,
            "a rule must name `principals` (\"*\" for everyone), `groups`, or both",
        );
    }
    let (scopes, scope_places) = scopes(&f, d);
    let tools = patterns(&f, d).unwrap_or_default();
    let approval = f.word::<Approval>("approval", d).ok().flatten();
    Some(AccessRule {
        principals,
        groups,
        scopes,
        tools,
        approval,
        scope_places,
    })
}

/// A list of non-empty names.
fn names(f: &Fields<'_>, key: &str, d: &mut Diag) -> Vec<String> {
    let list = f.opt_str_list(key, d).unwrap_or_default();
    for (i, (name, at)) in list.iter().enumerate() {
        if name.trim().is_empty() {
            d.push(*at, &format!("{}[{i}]", f.key(key)), "an empty name");
        }
    }
    list.into_iter().map(|(name, _)| name).collect()
}

fn scopes(f: &Fields<'_>, d: &mut Diag) -> (Option<Vec<ScopeId>>, Vec<Pos>) {
    let Some(list) = f.opt_str_list("scopes", d) else {
        return (None, Vec::new());
    };
    if list.is_empty() {
        d.push(
            f.key_at("scopes"),
            &f.key("scopes"),
            "an empty list applies nowhere; name the scopes, or remove the key for every scope",
        );
    }
    let mut scopes = Vec::new();
    let mut places = Vec::new();
    for (text, at) in list {
        match text.parse::<ScopeId>() {
            Ok(scope) => {
                scopes.push(scope);
                places.push(at);
            }
            Err(reason) => d.push(at, &f.key("scopes"), reason.to_string()),
        }
    }
    (Some(scopes), places)
}

/// `tools`: required, not empty, each a name pattern.
fn patterns(f: &Fields<'_>, d: &mut Diag) -> Option<Vec<String>> {
    f.required("tools", d)?;
    let list = f.opt_str_list("tools", d)?;
    if list.is_empty() {
        d.push(
            f.key_at("tools"),
            &f.key("tools"),
            "an empty list grants nothing; name at least one tool pattern",
        );
    }
    for (i, (pattern, at)) in list.iter().enumerate() {
        let allowed = |c: char| c.is_ascii_alphanumeric() || "_-*?".contains(c);
        if pattern.is_empty() || !pattern.chars().all(allowed) {
            d.push(
                *at,
                &format!("{}[{i}]", f.key("tools")),
                format!(
                    "`{pattern}` is not a tool name pattern: letters, digits, `_`, `-`, and the wildcards `*` and `?`"
                ),
            );
        }
    }
    Some(list.into_iter().map(|(p, _)| p).collect())
}

/// Every `scopes` entry of the rules names a deployed agent (or the gateway).
pub(crate) fn check_scopes(
    policy: &AccessPolicy,
    agents: &BTreeMap<String, AgentSpec>,
    d: &mut Diag,
) {
    for (i, rule) in policy.rules.iter().enumerate() {
        let scopes = rule.scopes.iter().flatten();
        for (scope, at) in scopes.zip(&rule.scope_places) {
            if let ScopeId::Agent(name) = scope
                && !agents.contains_key(name)
            {
                d.push(
                    *at,
                    &format!("access[{i}].scopes"),
                    format!("scope \"{scope}\" names no deployed agent (agents/{name}.yml)"),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_runs_and_single_characters() {
        assert!(glob("crm__*", "crm__search"));
        assert!(glob("crm__delete_*", "crm__delete_contact"));
        assert!(!glob("crm__delete_*", "crm__search"));
        assert!(glob("*", ""));
        assert!(glob("a?c", "abc"));
        assert!(!glob("a?c", "ac"));
        assert!(glob("*_contact", "crm__delete_contact"));
        assert!(glob("a*b*c", "aXXbYYc"));
        assert!(!glob("a*b*c", "aXXbYY"));
        assert!(glob("fetch", "fetch"));
        assert!(!glob("fetch", "fetcher"));
    }

    fn rule(
        principals: &[&str],
        groups: &[&str],
        tools: &[&str],
        approval: Option<Approval>,
    ) -> AccessRule {
        AccessRule {
            principals: principals.iter().map(|s| (*s).to_owned()).collect(),
            groups: groups.iter().map(|s| (*s).to_owned()).collect(),
            scopes: None,
            tools: tools.iter().map(|s| (*s).to_owned()).collect(),
            approval,
            scope_places: Vec::new(),
        }
    }

    #[test]
    fn the_last_matching_override_wins_and_nothing_else_is_granted() {
        let policy = AccessPolicy {
            rules: vec![
                rule(&["*"], &[], &["crm__*"], None),
                rule(&["*"], &[], &["crm__delete_*"], Some(Approval::Always)),
                rule(&[], &["ops"], &["crm__delete_*"], Some(Approval::Never)),
            ],
        };
        let ops = ["ops".to_owned()];
        let ada = Principal {
            name: "ada",
            groups: &[],
        };
        let bob = Principal {
            name: "bob",
            groups: &ops,
        };
        let scope = ScopeId::Gateway;
        assert_eq!(
            policy.verdict(&scope, ada, "crm__delete_contact"),
            Verdict::Granted {
                approval: Some(Approval::Always)
            }
        );
        assert_eq!(
            policy.verdict(&scope, bob, "crm__delete_contact"),
            Verdict::Granted {
                approval: Some(Approval::Never)
            }
        );
        assert_eq!(
            policy.verdict(&scope, ada, "crm__search"),
            Verdict::Granted { approval: None }
        );
        assert_eq!(policy.verdict(&scope, ada, "fetch"), Verdict::Refused);
        assert_eq!(
            AccessPolicy::default().verdict(&scope, ada, "fetch"),
            Verdict::Granted { approval: None }
        );
    }
}
