//! `apis/<slug>.yml`: deployment-level tenant APIs in the gateway scope (DECL-40 to DECL-42).

use airlock_spec::ScopeId;

use crate::support::Dir;

const BILLING: &str = "name: billing
connection: erp_main
auth: { scheme: bearer }
approval: once
operations:
  - name: get_invoice
    description: One invoice.
    writes: false
    parameters: { id: { type: string, required: true } }
    request: { method: GET, path: '/invoices/{id}' }
  - name: refund
    description: Refund an invoice.
    writes: true
    mode: propose
    approval: always
    request: { method: POST, path: /refunds }
";

#[test]
fn an_api_file_serves_its_operations_in_the_gateway_scope() {
    let dir = Dir::new().file("apis/billing.yml", BILLING);
    let deployment = dir.load().unwrap();
    let scope = deployment.gateway_scope();
    assert_eq!(scope.id, ScopeId::Gateway);
    let tools: Vec<(String, String, bool)> = scope
        .tools()
        .iter()
        .map(|t| {
            let p = &t.policy;
            (
                t.definition.name.to_string(),
                p.approval.to_string(),
                p.writes,
            )
        })
        .collect();
    assert_eq!(
        tools,
        [
            ("billing_get_invoice".into(), "once".into(), false),
            ("billing_refund".into(), "always".into(), true),
        ]
    );
}

#[test]
fn an_api_file_follows_the_inline_rules_with_file_line_key() {
    let bad = "name: billing\ntype: api\nconnection: nowhere\nauth: { scheme: bearer }\nbase_url: https://x.example.com\noperations:\n  - name: get\n    description: Get.\n    writes: maybe\n    colour: red\n    approval: sometimes\n    request: { method: GET, path: /x }\n";
    let errors = Dir::new().file("apis/billing.yml", bad).errors();
    let expected = [
        "apis/billing.yml:5:1: base_url: `base_url` is not allowed",
        "apis/billing.yml:9:5: operations[0].writes: expected `true` or `false`",
        "apis/billing.yml:10:5: operations[0].colour: unknown key",
        "apis/billing.yml:11:5: operations[0].approval: ",
    ];
    for line in expected {
        assert!(
            errors.iter().any(|e| e.starts_with(line)),
            "{line} not in {errors:#?}"
        );
    }
    let elsewhere = Dir::new()
        .file("apis/billing.yml", &BILLING.replace("erp_main", "nowhere"))
        .errors();
    assert_eq!(
        elsewhere,
        [
            "apis/billing.yml:2:1: connection: connection `nowhere` is not declared in airlock.toml `[connections]`"
        ]
    );
    let typed = Dir::new()
        .file("apis/billing.yml", &format!("type: mcp\n{BILLING}"))
        .errors();
    assert!(
        typed[0].starts_with("apis/billing.yml:1:1: type: "),
        "{typed:?}"
    );
    let renamed = Dir::new().file("apis/pay.yml", BILLING).errors();
    assert!(
        renamed[0].contains("`billing` differs from the file name"),
        "{renamed:?}"
    );
}

#[test]
fn a_gateway_collision_is_a_load_error_naming_both() {
    let ask = "name: ask\nconnection: erp_main\nauth: { scheme: bearer }\noperations:\n  - name: human\n    description: Ask.\n    writes: false\n    request: { method: GET, path: /x }\n";
    let errors = Dir::new()
        .file(
            "airlock.toml",
            &format!("{}\n[builtins.ask_human]\n", crate::support::TOML),
        )
        .file("apis/ask.yml", ask)
        .errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("apis/ask.yml:5:5: operations[0].name: tool `ask_human` collides with the builtin enabled in airlock.toml `[builtins.ask_human]`"),
        "{errors:?}"
    );
    // Slugs `a-b` + `c` and `a` + `b_c` both make `a_b_c`.
    let one = "name: a-b\nconnection: erp_main\nauth: { scheme: bearer }\noperations:\n  - name: c\n    description: C.\n    writes: false\n    request: { method: GET, path: /x }\n";
    let two = "name: a\nconnection: erp_main\nauth: { scheme: bearer }\noperations:\n  - name: b_c\n    description: C.\n    writes: false\n    request: { method: GET, path: /y }\n";
    let errors = Dir::new()
        .file("apis/a-b.yml", one)
        .file("apis/a.yml", two)
        .errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("tool `a_b_c` collides with the tool declared at apis/a"),
        "{errors:?}"
    );
    let twice = BILLING.replace("name: refund", "name: get_invoice");
    let errors = Dir::new().file("apis/billing.yml", &twice).errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("apis/billing.yml:11:5: operations[1].name: tool `billing_get_invoice` collides with the tool declared at operations[0].name (line 6); every tool name of the gateway scope must be unique"),
        "{errors:?}"
    );
    let awaits = "name: airlock\nconnection: erp_main\nauth: { scheme: bearer }\noperations:\n  - name: await_decision\n    description: A.\n    writes: false\n    request: { method: GET, path: /x }\n";
    let errors = Dir::new().file("apis/airlock.yml", awaits).errors();
    assert!(
        errors[0].contains("collides with airlock's own await tool"),
        "{errors:?}"
    );
}
