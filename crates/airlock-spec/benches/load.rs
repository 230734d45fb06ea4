//! Bench binary: load a deployment of 1,000 agent manifests with 20 tools each.
//! Run with `cargo bench -p airlock-spec --bench load`. Target: under 2 s.

#![allow(clippy::unwrap_used, missing_docs)]

use std::fmt::Write as _;
use std::time::Instant;

use airlock_spec::Deployment;

fn manifest(i: usize) -> String {
    let mut text = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: agent-{i}\nspec:\n  model: {{ provider: openai, model: gpt-4o-mini }}\n  prompts: {{ system: You help. }}\n  tools:\n    - name: erp\n      type: api\n      connection: erp_main\n      auth: {{ scheme: bearer }}\n      operations:\n"
    );
    for op in 0..10 {
        write!(
            text,
            "        - name: op_{op}\n          description: Operation {op}.\n          writes: false\n          parameters:\n            id: {{ type: string, required: true }}\n            limit: {{ type: integer, default: 25 }}\n          request: {{ method: GET, path: '/items/{{id}}', query: {{ limit: '{{limit}}' }} }}\n"
        )
        .unwrap();
    }
    text.push_str("    - name: soporte\n      type: mcp\n      connection: soporte_mcp\n      path: /mcp\n      auth: { scheme: bearer }\n      tools:\n");
    for t in 0..10 {
        write!(
            text,
            "        - name: tool_{t}\n          description: Tool {t}.\n          writes: false\n          input_schema: {{ type: object, properties: {{ q: {{ type: string }} }}, required: [q] }}\n"
        )
        .unwrap();
    }
    text
}

fn main() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("airlock.toml"),
        "[connections.erp_main]\nbase_url = \"https://erp.example.com\"\ncredential = \"erp.token\"\n[connections.soporte_mcp]\nbase_url = \"https://soporte.example.com\"\ncredential = \"soporte.token\"\n",
    )
    .unwrap();
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    for i in 0..1000 {
        std::fs::write(
            dir.path().join(format!("agents/agent-{i}.yml")),
            manifest(i),
        )
        .unwrap();
    }
    let mut best = f64::MAX;
    for _ in 0..5 {
        let start = Instant::now();
        let d = Deployment::load(dir.path()).unwrap();
        let secs = start.elapsed().as_secs_f64();
        assert_eq!(d.agents.len(), 1000);
        assert_eq!(d.agent_scope("agent-7").unwrap().tools().len(), 20);
        best = best.min(secs);
    }
    println!(
        "load 1000 manifests x 20 tools: best of 5 = {:.3} s (target < 2 s)",
        best
    );
}
