//! The definitions digest and tool names, as properties.

use airlock_spec::{Deployment, ToolDefinition, ToolName, definitions_digest};
use proptest::prelude::*;
use serde_json::json;

use crate::support::{Dir, agent};

fn def(name: &str, description: &str, schema: serde_json::Value) -> ToolDefinition {
    ToolDefinition {
        name: ToolName::try_from(name).unwrap(),
        description: description.to_owned(),
        input_schema: schema,
    }
}

proptest! {
    #[test]
    fn digest_ignores_order_and_sees_every_change(
        names in proptest::collection::btree_set("[a-z]{1,10}", 1..6),
        shift in 0usize..6,
        changed in 0usize..6,
    ) {
        let names: Vec<String> = names.into_iter().collect();
        let defs: Vec<ToolDefinition> = names.iter().map(|n| def(n, &format!("tool {n}"), json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "integer"}}}))).collect();
        let mut rotated = defs.clone();
        rotated.rotate_left(shift % defs.len());
        // Same schema with keys written in another order.
        for d in &mut rotated {
            d.input_schema = json!({"properties": {"b": {"type": "integer"}, "a": {"type": "string"}}, "type": "object"});
        }
        prop_assert_eq!(definitions_digest(&defs), definitions_digest(&rotated));
        let i = changed % defs.len();
        let mut described = defs.clone();
        described[i].description.push('!');
        prop_assert_ne!(definitions_digest(&defs), definitions_digest(&described));
        let mut schema = defs.clone();
        schema[i].input_schema["properties"]["a"]["type"] = json!("number");
        prop_assert_ne!(definitions_digest(&defs), definitions_digest(&schema));
    }

    #[test]
    fn every_accepted_tool_name_matches_the_rule(remote in "\\PC{0,140}", slug in "[a-z][a-z0-9-]{0,34}") {
        let tools = format!(
            "    - name: {slug}\n      type: mcp\n      connection: soporte_mcp\n      path: /mcp\n      auth: {{ scheme: bearer }}\n      tools:\n        - name: {}\n          description: T.\n          writes: false\n          input_schema: {{ type: object }}\n",
            serde_json::to_string(&remote).unwrap()
        );
        let dir = Dir::new().file("agents/p.yml", &agent("p", &tools));
        if let Ok(d) = dir.load() {
            for tool in d.agent_scope("p").unwrap().tools() {
                let name = tool.definition.name.as_str();
                prop_assert!(!name.is_empty() && name.len() <= 64);
                prop_assert!(name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-'), "{}", name);
            }
        }
    }
}

#[test]
fn digest_does_not_depend_on_file_or_tool_order() {
    let api = "    - name: erp\n      type: api\n      connection: erp_main\n      auth: { scheme: bearer }\n      operations:\n        - name: get\n          description: Get.\n          writes: false\n          request: { method: GET, path: /x }\n";
    let builtin = "    - type: builtin\n      name: fetch\n";
    let one = Dir::new().file("agents/a.yml", &agent("a", &format!("{api}{builtin}")));
    let two = Dir::new().file("agents/a.yml", &agent("a", &format!("{builtin}{api}")));
    let digest = |d: Deployment| d.agent_scope("a").unwrap().digest();
    assert_eq!(digest(one.load().unwrap()), digest(two.load().unwrap()));
    let three = Dir::new().file(
        "agents/a.yml",
        &agent("a", &format!("{}{builtin}", api.replace("Get.", "Get it."))),
    );
    assert_ne!(digest(one.load().unwrap()), digest(three.load().unwrap()));
}
