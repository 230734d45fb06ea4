//! `approval: caller` (docs/rules.md POLICY-38..POLICY-40): accepted where a person at an MCP
//! client can be asked, refused with file, line and key where none ever can.

use airlock_spec::{Approval, ScopeId};

use crate::support::{Dir, TOML, agent};

#[test]
fn a_builtin_and_an_api_file_take_approval_caller() {
    let toml = format!("{TOML}[builtins.fetch]\napproval = \"caller\"\n");
    let tools = "    - type: builtin\n      name: fetch\n      approval: caller\n";
    let dir = Dir::new()
        .file("airlock.toml", &toml)
        .file("agents/a.yml", &agent("a", tools));
    let deployment = dir.load().unwrap();
    let gateway = deployment.gateway_scope();
    assert_eq!(
        gateway.get("fetch").unwrap().policy.approval,
        Approval::Caller
    );
    let scope = deployment.agent_scope("a").unwrap();
    assert_eq!(scope.id, ScopeId::Agent("a".to_owned()));
    assert_eq!(
        scope.get("fetch").unwrap().policy.approval,
        Approval::Caller
    );
}

#[test]
fn a_sub_agent_refuses_approval_caller_at_its_key() {
    let tools = "    - type: agent\n      agent: helper\n      approval: caller\n";
    let errors = Dir::new()
        .file("agents/a.yml", &agent("a", tools))
        .file(
            "agents/helper.yml",
            &agent("helper", "    - type: builtin\n      name: fetch\n"),
        )
        .errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("agents/a.yml:11:7: spec.tools[0].approval: `approval: caller`"),
        "{errors:?}"
    );
    assert!(
        errors[0].contains("a sub-agent is called only inside an agent run"),
        "{errors:?}"
    );
}

#[test]
fn ask_human_refuses_approval_caller_in_a_manifest_and_in_airlock_toml() {
    let tools = "    - type: builtin\n      name: ask_human\n      approval: caller\n";
    let toml = format!("{TOML}[builtins.ask_human]\napproval = \"caller\"\n");
    let errors = Dir::new()
        .file("airlock.toml", &toml)
        .file("agents/a.yml", &agent("a", tools))
        .errors();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors.iter().any(|e| e.starts_with("agents/a.yml:11:7: spec.tools[0].approval: `approval: caller`")),
        "{errors:?}"
    );
    assert!(
        errors.iter().any(|e| e.starts_with("airlock.toml:")
            && e.contains("builtins.ask_human.approval: `approval: caller`")),
        "{errors:?}"
    );
}
