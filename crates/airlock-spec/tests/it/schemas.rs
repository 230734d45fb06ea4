//! Input schemas the validator refuses do not load (docs/rules.md DECL-37), and a `confirm:`
//! on an api or mcp tool loads with a warning naming its line (POLICY-13).

use crate::support::{Dir, agent};

fn mcp_tool(schema: &str) -> String {
    format!(
        "    - name: s\n      type: mcp\n      connection: soporte_mcp\n      path: /mcp\n      auth: {{ scheme: bearer }}\n      tools:\n        - name: t\n          description: T.\n          writes: false\n          input_schema: {schema}\n"
    )
}

#[test]
fn an_inline_schema_with_an_unknown_type_fails_the_load_at_its_key() {
    let tools = mcp_tool(r#"{"type": "object", "properties": {"a": {"type": "nonsense"}}}"#);
    let errors = Dir::new()
        .file("agents/s.yml", &agent("s", &tools))
        .errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with(
            "agents/s.yml:18:11: spec.tools[0].tools[0].input_schema: the input schema does not compile (at /properties/a/type): "
        ),
        "{errors:#?}"
    );
    assert!(errors[0].contains("nonsense"), "{errors:#?}");
}

#[test]
fn an_inline_schema_with_a_bad_pattern_fails_the_load() {
    let tools =
        mcp_tool(r#"{"type": "object", "properties": {"a": {"type": "string", "pattern": "(["}}}"#);
    let errors = Dir::new()
        .file("agents/s.yml", &agent("s", &tools))
        .errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with("agents/s.yml:18:11: spec.tools[0].tools[0].input_schema: the input schema does not compile (at /properties/a/pattern)"),
        "{errors:#?}"
    );
}

#[test]
fn api_parameters_whose_schema_does_not_compile_fail_the_load() {
    let tools = "    - name: erp\n      type: api\n      connection: erp_main\n      auth: { scheme: bearer }\n      operations:\n        - name: get\n          description: Get.\n          writes: false\n          parameters: { ids: { type: array, items: { type: nonsense } } }\n          request: { method: GET, path: /x }\n";
    let errors = Dir::new().file("agents/p.yml", &agent("p", tools)).errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].starts_with(
            "agents/p.yml:17:11: spec.tools[0].operations[0].parameters: the input schema does not compile"
        ),
        "{errors:#?}"
    );
}

#[test]
fn confirm_on_api_and_mcp_tools_loads_with_a_warning_naming_the_line() {
    let api = "    - name: erp\n      type: api\n      connection: erp_main\n      auth: { scheme: bearer }\n      confirm: true\n      operations:\n        - name: get\n          description: Get.\n          writes: false\n          confirm: { prompt: sure? }\n          request: { method: GET, path: /x }\n";
    let mcp = "    - name: s\n      type: mcp\n      connection: soporte_mcp\n      path: /mcp\n      auth: { scheme: bearer }\n      confirm: true\n      tools:\n        - name: t\n          description: T.\n          writes: false\n          confirm: true\n          input_schema: { type: object }\n";
    let dir = Dir::new().file("agents/c.yml", &agent("c", &format!("{api}{mcp}")));
    let deployment = dir.load().expect("confirm is a warning, not an error");
    assert_eq!(deployment.agent_scope("c").unwrap().tools().len(), 2);
    let warnings: Vec<String> = deployment
        .warnings
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(warnings.len(), 4, "{warnings:#?}");
    let expected = [
        "agents/c.yml:13:7: spec.tools[0].confirm: `confirm` is not read on `type: api` tools",
        "agents/c.yml:18:11: spec.tools[0].operations[0].confirm: `confirm` is not read on `type: api` tools",
        "agents/c.yml:25:7: spec.tools[1].confirm: `confirm` is not read on `type: mcp` tools",
        "agents/c.yml:30:11: spec.tools[1].tools[0].confirm: `confirm` is not read on `type: mcp` tools",
    ];
    for (warning, start) in warnings.iter().zip(expected) {
        assert!(warning.starts_with(start), "{warning}\n  expected {start}");
    }
}

#[test]
fn confirm_elsewhere_is_still_an_unknown_key() {
    let tools = "    - type: builtin\n      name: fetch\n      confirm: true\n";
    let errors = Dir::new().file("agents/b.yml", &agent("b", tools)).errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].contains("unknown key `confirm`"), "{errors:#?}");
}
