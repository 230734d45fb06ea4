//! Rules that need more than one file or a particular setup, and all-errors-at-once.

use crate::support::{Dir, agent};

#[test]
fn five_mistakes_in_one_file_are_all_reported_with_their_lines() {
    let tools = "    - name: erp-cliente
      type: api
      connection: erp_main
      auth: { scheme: bearer }
      operations:
        - name: BuscarCliente
          description: Find.
          writes: 0
          request: { method: PUT, path: clientes }
        - name: crear
          description: Create.
          writes: true
          request: { method: POST, path: /x }
";
    let dir = Dir::new().file("agents/five.yml", &agent("five", tools));
    let errors = dir.errors();
    assert_eq!(errors.len(), 5, "{errors:#?}");
    let lines: Vec<&str> = errors
        .iter()
        .map(|e| e.split(':').nth(1).unwrap())
        .collect();
    assert_eq!(lines, ["14", "16", "17", "17", "20"]);
    assert!(errors[0].contains("`BuscarCliente` is not snake_case"));
    assert!(errors[1].contains("expected `true` or `false`, found an integer"));
    assert!(errors.iter().any(|e| e.contains("`PUT` is not allowed")));
    assert!(
        errors
            .iter()
            .any(|e| e.contains("`clientes` must start with `/`"))
    );
    assert!(errors[4].contains("a write must declare `mode: propose`"));
}

#[test]
fn errors_span_files_and_are_sorted() {
    let dir = Dir::new()
        .file(
            "agents/b.yml",
            &agent("b", "    - type: builtin\n      name: nope\n"),
        )
        .file(
            "agents/a.yml",
            &agent("a", "    - type: builtin\n      name: nope\n"),
        )
        .file(
            "connections/crm.yml",
            "url: http://crm.example.com/mcp\nauth: { type: bearer, credential: crm.t }\n",
        );
    let errors = dir.errors();
    assert_eq!(errors.len(), 3);
    assert!(errors[0].starts_with("agents/a.yml:10:"));
    assert!(errors[1].starts_with("agents/b.yml:10:"));
    assert!(errors[2].starts_with("connections/crm.yml:1:1: url: credentials require https"));
}

#[test]
fn collisions_are_refused_whichever_is_declared_first() {
    let api = "    - name: ask\n      type: api\n      connection: erp_main\n      auth: { scheme: bearer }\n      operations:\n        - name: human\n          description: Ask.\n          writes: false\n          request: { method: GET, path: /x }\n";
    let builtin = "    - type: builtin\n      name: ask_human\n";
    for tools in [format!("{api}{builtin}"), format!("{builtin}{api}")] {
        let errors = Dir::new()
            .file("agents/c.yml", &agent("c", &tools))
            .errors();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(
            errors[0].contains("tool `ask_human` collides with the tool declared at"),
            "{}",
            errors[0]
        );
    }
}

#[test]
fn placeholders_must_name_parameters() {
    let tools = "    - name: erp\n      type: api\n      connection: erp_main\n      auth: { scheme: bearer }\n      operations:\n        - name: get\n          description: Get.\n          writes: false\n          parameters: { id: { type: string, required: true } }\n          request: { method: GET, path: '/x/{id}/{other}' }\n";
    let errors = Dir::new().file("agents/p.yml", &agent("p", tools)).errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("`{other}` names no parameter of this operation"));
}

#[test]
fn schema_limits_are_inclusive() {
    // Levels: root 1, properties 2, x 3, properties 4, x 5, properties 6, x 7, items 8.
    let leaf = |items: serde_json::Value| serde_json::json!({"type": "object", "properties": {"x": {"type": "object", "properties": {"x": {"type": "object", "properties": {"x": {"type": "array", "items": items}}}}}}});
    let tool = |schema: &serde_json::Value| {
        format!(
            "    - name: s\n      type: mcp\n      connection: soporte_mcp\n      path: /mcp\n      auth: {{ scheme: bearer }}\n      tools:\n        - name: t\n          description: T.\n          writes: false\n          input_schema: {schema}\n"
        )
    };
    let eight = leaf(serde_json::json!({"type": "string"}));
    assert_eq!(
        Dir::new()
            .file("agents/s.yml", &agent("s", &tool(&eight)))
            .errors(),
        Vec::<String>::new()
    );
    let nine = leaf(serde_json::json!({"type": "string", "enum": ["a"]}));
    let errors = Dir::new()
        .file("agents/s.yml", &agent("s", &tool(&nine)))
        .errors();
    assert_eq!(errors.len(), 1);
    assert!(errors[0].contains("9 levels deep; the limit is 8"));
}

#[test]
fn loading_inline_mcp_tools_is_offline() {
    // A name that cannot resolve: if loading touched DNS or the network it would fail or hang;
    // the binary crate proves the absence of network syscalls with strace.
    let toml = "[connections.soporte_mcp]\nbase_url = \"https://tenant.airlock-test.invalid\"\ncredential = \"s.k\"\n";
    let tools = "    - name: s\n      type: mcp\n      connection: soporte_mcp\n      path: /mcp\n      auth: { scheme: bearer }\n      tools:\n        - name: t\n          description: T.\n          writes: false\n          input_schema: { type: object }\n";
    let dir = Dir::new()
        .file("airlock.toml", toml)
        .file("agents/s.yml", &agent("s", tools));
    let deployment = dir.load().unwrap();
    assert_eq!(deployment.agent_scope("s").unwrap().tools().len(), 1);
}

/// DECL-77: `offers` is a strict boolean, `false` unless written, on every tool of the server.
#[test]
fn decl_77_offers_is_false_unless_declared_true() {
    let toml = "[connections.soporte_mcp]\nbase_url = \"https://tenant.airlock-test.invalid\"\n";
    let tools = |offers: &str| {
        format!(
            "    - name: s\n      type: mcp\n      connection: soporte_mcp\n      path: /mcp\n{offers}      tools:\n        - name: t\n          description: T.\n          writes: false\n          input_schema: {{ type: object }}\n        - name: u\n          description: U.\n          writes: false\n          input_schema: {{ type: object }}\n"
        )
    };
    let offers = |written: &str| {
        let dir = Dir::new()
            .file("airlock.toml", toml)
            .file("agents/s.yml", &agent("s", &tools(written)));
        let deployment = dir.load().unwrap();
        let scope = deployment.agent_scope("s").unwrap();
        let flags: Vec<bool> = scope
            .tools()
            .iter()
            .map(|t| match &t.source {
                airlock_spec::ToolSource::McpInline(tool) => tool.offers,
                other => panic!("{other:?}"),
            })
            .collect();
        flags
    };
    assert_eq!(offers(""), [false, false]);
    assert_eq!(offers("      offers: true\n"), [true, true]);
    let errors = Dir::new()
        .file("airlock.toml", toml)
        .file(
            "agents/s.yml",
            &agent("s", &tools("      offers: \"true\"\n")),
        )
        .errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("offers: expected `true` or `false`"),
        "{errors:?}"
    );
}

/// DECL-81: `served_as` names the tool exactly (the upstream keeps `name`), checked as any final
/// tool name, and unique in the scope.
#[test]
fn decl_81_served_as_names_the_tool_exactly() {
    let toml = "[connections.soporte_mcp]\nbase_url = \"https://tenant.airlock-test.invalid\"\n";
    let tools = |served: &str| {
        format!(
            "    - name: s\n      type: mcp\n      connection: soporte_mcp\n      path: /mcp\n      tools:\n        - name: Greet Me\n          served_as: {served}\n          description: T.\n          writes: false\n          input_schema: {{ type: object }}\n        - name: u\n          description: U.\n          writes: false\n          input_schema: {{ type: object }}\n"
        )
    };
    let dir = Dir::new()
        .file("airlock.toml", toml)
        .file("agents/s.yml", &agent("s", &tools("greet")));
    let deployment = dir.load().unwrap();
    let scope = deployment.agent_scope("s").unwrap();
    let names: Vec<(String, String)> = scope
        .tools()
        .iter()
        .map(|t| match &t.source {
            airlock_spec::ToolSource::McpInline(tool) => {
                (t.definition.name.to_string(), tool.remote_name.clone())
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(
        names.contains(&("greet".into(), "Greet Me".into())),
        "{names:?}"
    );
    assert!(names.contains(&("s_u".into(), "u".into())), "{names:?}");
    for bad in ["\"has space\"", "s_u"] {
        let errors = Dir::new()
            .file("airlock.toml", toml)
            .file("agents/s.yml", &agent("s", &tools(bad)))
            .errors();
        assert_eq!(errors.len(), 1, "{bad}: {errors:?}");
    }
}

/// DECL-82: `requires_tasks: true` marks a tool its server runs only as a task; a session-era
/// server, never offered one, cannot have such a tool.
#[test]
fn decl_82_requires_tasks_marks_a_task_only_tool_of_a_modern_server() {
    let toml = "[connections.soporte_mcp]\nbase_url = \"https://tenant.airlock-test.invalid\"\n";
    let tools = |protocol: &str| {
        format!(
            "    - name: s\n      type: mcp\n      connection: soporte_mcp\n      path: /mcp\n{protocol}      tools:\n        - name: job\n          requires_tasks: true\n          description: T.\n          writes: false\n          input_schema: {{ type: object }}\n        - name: u\n          description: U.\n          writes: false\n          input_schema: {{ type: object }}\n"
        )
    };
    let dir = Dir::new().file("airlock.toml", toml).file(
        "agents/s.yml",
        &agent("s", &tools("      protocol: 2026-07-28\n")),
    );
    let deployment = dir.load().unwrap();
    let scope = deployment.agent_scope("s").unwrap();
    let required: Vec<(String, bool)> = scope
        .tools()
        .iter()
        .map(|t| match &t.source {
            airlock_spec::ToolSource::McpInline(tool) => {
                (t.definition.name.to_string(), tool.requires_tasks)
            }
            other => panic!("{other:?}"),
        })
        .collect();
    assert!(required.contains(&("s_job".into(), true)), "{required:?}");
    assert!(required.contains(&("s_u".into(), false)), "{required:?}");
    let errors = Dir::new()
        .file("airlock.toml", toml)
        .file("agents/s.yml", &agent("s", &tools("")))
        .errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains("requires_tasks"), "{errors:?}");
}

#[test]
fn airlock_toml_problems_are_all_reported() {
    let toml = "listen = \"nowhere\"\napproval_ttl = \"1 week\"\nsurprise = 1\n[egress]\nallow = [\"10.0.0.0/8\", \"bad host!\"]\nports = [0]\n";
    let errors = Dir::new().file("airlock.toml", toml).errors();
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert!(errors[0].starts_with("airlock.toml:1:1: listen: `nowhere` is not an address"));
    assert!(errors[1].starts_with("airlock.toml:2:16: approval_ttl: expected a duration"));
    assert!(errors[2].starts_with("airlock.toml:3:1: surprise: unknown key `surprise`"));
    assert!(errors[3].contains("egress.allow[1]: `bad host!` is neither a CIDR"));
    assert!(errors[4].contains("egress.ports[0]: expected a port number"));
}

#[test]
fn airlock_toml_defaults() {
    let dir = Dir::new().file("airlock.toml", "");
    let d = dir.load().unwrap();
    assert_eq!(d.config.listen.to_string(), "127.0.0.1:8080");
    assert_eq!(
        d.config.approval_ttl,
        std::time::Duration::from_secs(7 * 86_400)
    );
    assert_eq!(
        d.config.database_url,
        format!("sqlite://{}", dir.path().join("airlock.sqlite").display())
    );
    assert!(
        d.config.mcp.tokens.is_empty(),
        "no MCP principal unless configured"
    );
    assert!(d.config.egress.allow_cidrs.is_empty() && d.config.egress.allow_hosts.is_empty());
    assert_eq!(d.config.egress.body_cap, 5 * 1024 * 1024);
    assert_eq!(d.config.server, airlock_spec::ServerLimits::default());
}

/// OPS-12, OPS-13: `[server]` bounds are read, and a bound that would refuse everything (zero)
/// or is not a number is an error at file:line:key, every one reported.
#[test]
fn server_limits_are_read_and_zero_is_refused() {
    let good = "[server]\nheader_timeout = \"2s\"\nmax_connections = 3\nmax_in_flight = 4\nmax_in_flight_per_principal = 5\n";
    let d = Dir::new().file("airlock.toml", good).load().unwrap();
    assert_eq!(
        d.config.server,
        airlock_spec::ServerLimits {
            header_timeout: std::time::Duration::from_secs(2),
            max_connections: 3,
            max_in_flight: 4,
            max_in_flight_per_principal: 5,
        }
    );
    let bad = "[server]\nheader_timeout = \"0s\"\nmax_connections = 0\nmax_in_flight = \"many\"\nmax_in_flight_per_principal = 0\nbacklog = 9\n";
    let errors = Dir::new().file("airlock.toml", bad).errors();
    assert_eq!(errors.len(), 5, "{errors:#?}");
    assert!(
        errors[0].starts_with("airlock.toml:2:1: server.header_timeout: must be longer than 0s"),
        "{errors:#?}"
    );
    assert!(
        errors[1].starts_with("airlock.toml:3:1: server.max_connections: must be at least 1"),
        "{errors:#?}"
    );
    assert!(
        errors[2]
            .starts_with("airlock.toml:4:1: server.max_in_flight: expected a non-negative integer"),
        "{errors:#?}"
    );
    assert!(
        errors[3].starts_with(
            "airlock.toml:5:1: server.max_in_flight_per_principal: must be at least 1"
        ),
        "{errors:#?}"
    );
    assert!(
        errors[4].contains("server.backlog: unknown key"),
        "{errors:#?}"
    );
}

#[test]
fn token_scopes_are_read_and_bad_ones_all_reported() {
    let good = "[[mcp.tokens]]\ncredential = \"a.b\"\nprincipal = \"p\"\nscopes = [\"gateway\", \"agent:support\"]\n";
    let d = Dir::new().file("airlock.toml", good).load().unwrap();
    assert_eq!(
        d.config.mcp.tokens[0].scopes,
        Some(vec![
            airlock_spec::ScopeId::Gateway,
            airlock_spec::ScopeId::Agent("support".into())
        ])
    );
    let bad = "[[mcp.tokens]]\ncredential = \"a.b\"\nprincipal = \"p\"\nscopes = [\"everything\", \"agent:Bad Name\"]\n[[admin.tokens]]\ncredential = \"a.c\"\nprincipal = \"q\"\nscopes = [\"gateway\"]\n";
    let errors = Dir::new().file("airlock.toml", bad).errors();
    assert_eq!(errors.len(), 3, "{errors:#?}");
    assert!(
        errors[0]
            .starts_with("airlock.toml:4:11: mcp.tokens[0].scopes: unknown scope `everything`"),
        "{errors:#?}"
    );
    assert!(
        errors[1].starts_with("airlock.toml:4:25: mcp.tokens[0].scopes: agent name `Bad Name`"),
        "{errors:#?}"
    );
    assert!(
        errors[2].contains("admin.tokens[0].scopes") && errors[2].contains("unknown key"),
        "{errors:#?}"
    );
    let empty = "[[mcp.tokens]]\ncredential = \"a.b\"\nprincipal = \"p\"\nscopes = []\n";
    let errors = Dir::new().file("airlock.toml", empty).errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0]
            .starts_with("airlock.toml:4:1: mcp.tokens[0].scopes: an empty list grants nothing"),
        "{errors:#?}"
    );
}

#[test]
fn duplicate_yaml_keys_are_refused() {
    let errors = Dir::new()
        .file(
            "connections/crm.yml",
            "url: https://a.example.com/mcp\nurl: https://b.example.com/mcp\n",
        )
        .errors();
    assert_eq!(
        errors,
        [
            "connections/crm.yml:2:1: duplicate key `url` (first at line 1); a second value would silently replace the first"
        ]
    );
}

#[test]
fn headers_the_guard_owns_cannot_carry_a_credential() {
    for header in ["Upgrade", "TE", "Keep-Alive", "Proxy-Foo", "Mcp-Session-Id"] {
        let errors = Dir::new()
            .file(
                "connections/crm.yml",
                &format!("url: https://crm.example.com/mcp\nauth:\n  type: header\n  header: {header}\n  credential: crm.key\n"),
            )
            .errors();
        assert_eq!(errors.len(), 1, "{header}: {errors:?}");
        assert!(
            errors[0].contains(&format!("`{header}` is a reserved header")),
            "{}",
            errors[0]
        );
    }
    // The one proxy header a credential may travel in.
    let ok = Dir::new().file(
        "connections/crm.yml",
        "url: https://crm.example.com/mcp\nauth:\n  type: header\n  header: Proxy-Authorization\n  credential: crm.key\n",
    );
    assert!(ok.load().is_ok(), "{:?}", ok.errors());
}

/// DECL-32, LEDGER-17: airlock sends the call's own `Idempotency-Key`, so no declaration may
/// put a credential there (an api auth header or a connection's), whatever its case.
#[test]
fn the_idempotency_key_header_is_airlocks() {
    let api = "    - name: erp\n      type: api\n      connection: erp_main\n      auth: { scheme: header, header: idempotency-KEY }\n      operations:\n        - name: get\n          description: Get.\n          writes: false\n          request: { method: GET, path: /x }\n";
    let errors = Dir::new().file("agents/k.yml", &agent("k", api)).errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("agents/k.yml:12:31: spec.tools[0].auth.header:")
            && errors[0].contains("`idempotency-KEY` is a reserved header"),
        "{}",
        errors[0]
    );
    let connection = "url: https://crm.example.com/mcp\nauth:\n  type: header\n  header: Idempotency-Key\n  credential: crm.key\n";
    let errors = Dir::new().file("connections/crm.yml", connection).errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].starts_with("connections/crm.yml:4:"),
        "{}",
        errors[0]
    );
}

#[test]
fn no_declared_tool_may_take_the_await_tools_name() {
    let api = "    - name: airlock\n      type: api\n      connection: erp_main\n      auth: { scheme: bearer }\n      operations:\n        - name: await_decision\n          description: Wait.\n          writes: false\n          request: { method: GET, path: /x }\n";
    let errors = Dir::new().file("agents/w.yml", &agent("w", api)).errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("tool `airlock_await_decision` collides with airlock's own await tool"),
        "{}",
        errors[0]
    );
}

/// One load reports everything: an invalid `airlock.toml` does not hide an agent's problems,
/// and an agent whose header is invalid still has its tools checked.
#[test]
fn a_bad_header_or_config_hides_no_other_error() {
    let api = "    - name: ask\n      type: api\n      connection: erp_main\n      auth: { scheme: bearer }\n      operations:\n        - name: human\n          description: Ask.\n          writes: false\n          request: { method: GET, path: /x }\n";
    let colliding = format!("{api}    - type: builtin\n      name: ask_human\n");
    // The file is `other.yml` but the agent says `c`: a header error, plus the collision.
    let errors = Dir::new()
        .file("agents/other.yml", &agent("c", &colliding))
        .errors();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(
        errors[0].contains("differs from the file name"),
        "{errors:#?}"
    );
    assert!(
        errors[1].contains("tool `ask_human` collides"),
        "{errors:#?}"
    );

    let errors = Dir::new()
        .file("airlock.toml", "listen = \"nowhere\"\n")
        .file("agents/c.yml", &agent("c", &colliding))
        .errors();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert!(errors[0].starts_with("agents/c.yml:"), "{errors:#?}");
    assert!(
        errors[0].contains("tool `ask_human` collides"),
        "{errors:#?}"
    );
    assert!(
        errors[1].starts_with("airlock.toml:1:1: listen"),
        "{errors:#?}"
    );
}

#[test]
fn an_undeclared_connection_is_reported_once_at_its_key() {
    let op = |name: &str| {
        format!(
            "        - name: {name}\n          description: Get.\n          writes: false\n          request: {{ method: GET, path: /x }}\n"
        )
    };
    let api = format!(
        "    - name: erp\n      type: api\n      connection: nowhere\n      auth: {{ scheme: bearer }}\n      operations:\n{}{}",
        op("one"),
        op("two")
    );
    let errors = Dir::new().file("agents/u.yml", &agent("u", &api)).errors();
    assert_eq!(
        errors,
        [
            "agents/u.yml:11:7: spec.tools[0].connection: connection `nowhere` is not declared in airlock.toml `[connections]`"
        ]
    );
}

#[test]
fn an_api_operations_parameters_obey_the_schema_limits() {
    let long = "x".repeat(17 * 1024);
    let api = format!(
        "    - name: erp\n      type: api\n      connection: erp_main\n      auth: {{ scheme: bearer }}\n      operations:\n        - name: get\n          description: Get.\n          writes: false\n          parameters: {{ id: {{ type: string, description: {long} }} }}\n          request: {{ method: GET, path: /x }}\n"
    );
    let errors = Dir::new().file("agents/l.yml", &agent("l", &api)).errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(
        errors[0].contains("spec.tools[0].operations[0].parameters: the input schema is")
            && errors[0].contains("bytes as compact JSON; the limit is 16384"),
        "{}",
        errors[0]
    );
}

/// An api declaration with `rate_limit` written as `limit` (one mapping, inline).
fn rate_limited_api(limit: &str) -> String {
    format!(
        "    - name: erp\n      type: api\n      connection: erp_main\n      auth: {{ scheme: bearer }}\n      rate_limit: {limit}\n      operations:\n        - name: get\n          description: Get.\n          writes: false\n          request: {{ method: GET, path: /x }}\n"
    )
}

/// POLICY-16: `rate_limit.per_principal` is each principal's budget on top of the
/// declaration's, read with the same rules.
#[test]
fn a_rate_limit_may_add_a_per_principal_budget() {
    let dir = Dir::new().file(
        "agents/r.yml",
        &agent(
            "r",
            &rate_limited_api(
                "{ requests: 100, per: 1m, per_principal: { requests: 10, per: minute } }",
            ),
        ),
    );
    let deployment = dir.load().unwrap();
    let scope = deployment.agent_scope("r").unwrap();
    let policy = &scope.get("erp_get").unwrap().policy;
    let minute = std::time::Duration::from_secs(60);
    assert_eq!(
        policy.rate_limit.map(|r| (r.requests, r.per)),
        Some((100, minute))
    );
    assert_eq!(
        policy.per_principal_rate_limit.map(|r| (r.requests, r.per)),
        Some((10, minute))
    );
}

#[test]
fn bad_rate_limits_are_refused_at_their_key() {
    let cases = [
        (
            "{ requests: 5, per: 1m, per_principal: { requests: 0, per: 1m } }",
            "spec.tools[0].rate_limit.per_principal.requests: expected at least 1",
        ),
        (
            "{ requests: 5, per: 1m, per_principal: { requests: 2 } }",
            "spec.tools[0].rate_limit.per_principal.per: `per` is required",
        ),
        (
            "{ requests: 5, per: 1m, per_principal: { requests: 2, per: 1m, burst: 3 } }",
            "spec.tools[0].rate_limit.per_principal.burst",
        ),
        (
            "{ requests: 5, per: 1m, per_principal: 3 }",
            "spec.tools[0].rate_limit.per_principal",
        ),
        (
            "{ requests: 5, per: 0s }",
            "spec.tools[0].rate_limit.per: the window must be longer than zero",
        ),
        (
            "{ requests: 5, per: 1m, per_user: { requests: 2, per: 1m } }",
            "spec.tools[0].rate_limit.per_user",
        ),
    ];
    for (limit, expected) in cases {
        let errors = Dir::new()
            .file("agents/r.yml", &agent("r", &rate_limited_api(limit)))
            .errors();
        assert_eq!(errors.len(), 1, "{limit}: {errors:?}");
        assert!(
            errors[0].starts_with("agents/r.yml:13:") && errors[0].contains(expected),
            "{limit}: {}",
            errors[0]
        );
    }
}

/// An api declaration with `limits` written as `limits` (a flow list of mappings).
fn limited_api(limits: &str) -> String {
    format!(
        "    - name: pay\n      type: api\n      connection: erp_main\n      auth: {{ scheme: bearer }}\n      limits: {limits}\n      operations:\n        - name: send\n          description: Send.\n          writes: false\n          request: {{ method: GET, path: /x }}\n"
    )
}

/// POLICY-57: `limits:` are read — calls, counts and amounts, by whom, what over them gets.
#[test]
fn limits_are_read_with_their_measure_window_and_owner() {
    let limits = "[ { name: daily, sum: /amount, unit: EUR, max: 500.5, per: 1d, by: principal, over: approval }, { name: sends, max: 50, per: 1h }, { name: recipients, count: /to, max: 10, per: 1d, by: run } ]";
    let dir = Dir::new().file("agents/r.yml", &agent("r", &limited_api(limits)));
    let deployment = dir.load().unwrap();
    let scope = deployment.agent_scope("r").unwrap();
    let limits = &scope.get("pay_send").unwrap().policy.limits;
    let day = std::time::Duration::from_secs(86_400);
    assert_eq!(limits.len(), 3);
    assert_eq!(limits[0].name, "daily");
    assert_eq!(
        limits[0].measure,
        airlock_spec::Measure::Amount {
            pointer: "/amount".into(),
            unit: Some("EUR".into())
        }
    );
    assert_eq!((limits[0].max, limits[0].per), (500.5, day));
    assert_eq!(limits[0].by, airlock_spec::LimitBy::Principal);
    assert_eq!(limits[0].over, airlock_spec::LimitOver::Approval);
    assert_eq!(limits[1].measure, airlock_spec::Measure::Calls);
    assert_eq!(
        (limits[1].by, limits[1].over),
        (airlock_spec::LimitBy::Tool, airlock_spec::LimitOver::Deny)
    );
    assert_eq!(
        limits[2].measure,
        airlock_spec::Measure::Count("/to".into())
    );
}

/// POLICY-57: every mistake in every limit is named at its line and key, all at once.
#[test]
fn bad_limits_are_refused_at_their_key() {
    let cases = [
        (
            "[ { name: a, max: 0, per: 1d } ]",
            "limits[0].max: expected a number above zero",
        ),
        (
            "[ { name: a, max: 1e12, per: 1d } ]",
            "limits[0].max: expected a number above zero and at most",
        ),
        (
            "[ { name: a, max: 5, per: 4000d } ]",
            "limits[0].per: the window must be longer than zero and at most",
        ),
        (
            "[ { name: 'a/principal:x', max: 5, per: 1d } ]",
            "limits[0].name: a limit's name is",
        ),
        (
            "[ { name: a, max: 1.5, per: 1d } ]",
            "limits[0].max: calls and counts are whole",
        ),
        (
            "[ { name: a, max: 5, per: 0s } ]",
            "limits[0].per: the window must be longer than zero",
        ),
        (
            "[ { name: a, sum: amount, max: 5, per: 1d } ]",
            "limits[0].sum: expected a JSON pointer",
        ),
        (
            "[ { name: a, sum: /x, count: /y, max: 5, per: 1d } ]",
            "limits[0].sum: a limit adds up `count` or `sum`, not both",
        ),
        (
            "[ { name: a, unit: EUR, max: 5, per: 1d } ]",
            "limits[0].unit: `unit` goes with `sum`",
        ),
        ("[ { name: a, max: 5, per: 1d, by: team } ]", "limits[0].by"),
        (
            "[ { name: a, max: 5, per: 1d, over: warn } ]",
            "limits[0].over",
        ),
        (
            "[ { name: a, max: 5, per: 1d, burst: 2 } ]",
            "limits[0].burst",
        ),
        ("[ { max: 5, per: 1d } ]", "limits[0].name"),
        (
            "[ { name: a, max: 5, per: 1d }, { name: a, max: 6, per: 1d } ]",
            "limits[1].name: a second limit named `a`",
        ),
    ];
    for (limits, expected) in cases {
        let errors = Dir::new()
            .file("agents/r.yml", &agent("r", &limited_api(limits)))
            .errors();
        assert_eq!(errors.len(), 1, "{limits}: {errors:?}");
        assert!(
            errors[0].starts_with("agents/r.yml:13:") && errors[0].contains(expected),
            "{limits}: {}",
            errors[0]
        );
    }
    let both = "[ { name: a, max: 0, per: 0s }, { name: b, sum: x, max: 1, per: 1d } ]";
    let errors = Dir::new()
        .file("agents/r.yml", &agent("r", &limited_api(both)))
        .errors();
    assert_eq!(errors.len(), 3, "every mistake at once: {errors:?}");
}

/// docs/rules.md POLICY-43, POLICY-44: `[[access]]` rules and token groups are read, and every
/// mistake in them is reported with its line and key.
#[test]
fn access_rules_are_read_and_their_mistakes_all_reported() {
    let good = "[[mcp.tokens]]\ncredential = \"a.b\"\nprincipal = \"p\"\ngroups = [\"ops\"]\n\
                [[access]]\ngroups = [\"ops\"]\ntools = [\"crm__delete_*\"]\napproval = \"never\"\n";
    let loaded = Dir::new().file("airlock.toml", good).load().unwrap();
    assert_eq!(loaded.config.mcp.tokens[0].groups, ["ops"]);
    let rule = &loaded.config.access.rules[0];
    assert_eq!(rule.tools, ["crm__delete_*"]);
    assert_eq!(rule.approval, Some(airlock_spec::Approval::Never));
    let bad = "[[access]]\ntools = [\"crm/*\"]\n\
               [[access]]\nprincipals = [\"*\"]\nscopes = [\"agent:ghost\"]\ntools = []\nwho = 1\n\
               [[access]]\nprincipals = [\"*\"]\napproval = \"sometimes\"\n";
    let errors = Dir::new().file("airlock.toml", bad).errors();
    let expected = [
        "airlock.toml:1:1: access[0]: a rule must name `principals`",
        "airlock.toml:2:10: access[0].tools[0]: `crm/*` is not a tool name pattern",
        "airlock.toml:5:11: access[1].scopes: scope \"agent:ghost\" names no deployed agent",
        "airlock.toml:6:1: access[1].tools: an empty list grants nothing",
        "airlock.toml:7:1: access[1].who: unknown key",
        "airlock.toml:8:1: access[2].tools: `tools` is required",
        "airlock.toml:10:",
    ];
    assert_eq!(errors.len(), expected.len(), "{errors:#?}");
    for (error, start) in errors.iter().zip(expected) {
        assert!(error.starts_with(start), "{error} / {start}\n{errors:#?}");
    }
}

/// DECL-83: a connection declared `per_run = true` needs no placeholder URL or credential for
/// the tools naming it to load; giving it either is an error naming the key. EGRESS-38:
/// `use_egress_allow` is off unless written `true`.
#[test]
fn decl_83_a_per_run_connection_loads_without_a_placeholder() {
    let tools = "    - name: crm\n      type: api\n      connection: crm\n      auth: { scheme: bearer }\n      operations:\n        - name: total\n          description: The total.\n          writes: false\n          request: { method: GET, path: /total }\n";
    let toml = "[connections.crm]\nper_run = true\n[connections.erp]\nbase_url = \"https://erp.example.com\"\n[connections.lan]\nbase_url = \"https://lan.example.com\"\nuse_egress_allow = true\n";
    let dir = Dir::new()
        .file("airlock.toml", toml)
        .file("agents/s.yml", &agent("s", tools));
    let deployment = dir.load().unwrap();
    let config = &deployment.config;
    assert_eq!(deployment.agent_scope("s").unwrap().tools().len(), 1);
    assert!(config.per_run_connections.contains_key("crm"));
    assert!(!config.connections.contains_key("crm"));
    assert!(!config.connections["erp"].use_egress_allow);
    assert!(config.connections["lan"].use_egress_allow);

    let bad = "[connections.crm]\nper_run = true\nbase_url = \"https://crm.example.com\"\ncredential = \"crm.token\"\n";
    let errors = Dir::new().file("airlock.toml", bad).errors();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].contains("connections.crm.base_url"), "{errors:?}");
    assert!(
        errors[1].contains("connections.crm.credential"),
        "{errors:?}"
    );
    assert!(
        errors.iter().all(|e| e.contains("per_run = true")),
        "{errors:?}"
    );
}

/// An api declaration with `approvers` written as `approvers` (one mapping, inline).
fn approved_api(approvers: &str) -> String {
    format!(
        "    - name: pay\n      type: api\n      connection: erp_main\n      auth: {{ scheme: bearer }}\n      approval: always\n      approvers: {approvers}\n      operations:\n        - name: send\n          description: Send.\n          writes: false\n          request: {{ method: GET, path: /x }}\n"
    )
}

/// POLICY-61: `approvers` is read with its defaults (`forbid_self` on above one approval), and
/// each wrong value is refused at its key.
#[test]
fn approvers_are_read_and_bad_ones_refused_at_their_key() {
    let dir = Dir::new().file(
        "agents/r.yml",
        &agent("r", &approved_api("{ quorum: 2, deciders: [alice, bob] }")),
    );
    let deployment = dir.load().unwrap();
    let scope = deployment.agent_scope("r").unwrap();
    let approvers = &scope.get("pay_send").unwrap().policy.approvers;
    assert_eq!(
        (
            approvers.quorum,
            approvers.deciders.clone(),
            approvers.forbid_self
        ),
        (2, vec!["alice".to_owned(), "bob".to_owned()], true)
    );
    let dir = Dir::new().file(
        "agents/r.yml",
        &agent(
            "r",
            &approved_api("{ escalate: { after: 2h, to: [carol] } }"),
        ),
    );
    let deployment = dir.load().unwrap();
    let scope = deployment.agent_scope("r").unwrap();
    let escalate = scope
        .get("pay_send")
        .unwrap()
        .policy
        .approvers
        .escalate
        .clone();
    assert_eq!(
        escalate.map(|e| (e.after.as_secs(), e.to)),
        Some((7200, vec!["carol".to_owned()]))
    );
    let cases = [
        (
            "{ quorum: 0 }",
            "approvers.quorum: expected 1 to 10 approvals",
        ),
        (
            "{ quorum: 11 }",
            "approvers.quorum: expected 1 to 10 approvals",
        ),
        (
            "{ quorum: 3, deciders: [alice, bob] }",
            "approvers.deciders: 2 decider(s) can never make a quorum of 3",
        ),
        ("{ deciders: ['al ice'] }", "is not a principal name"),
        ("{ quorum: 2, who: [x] }", "approvers.who"),
        (
            "{ escalate: { after: 2h } }",
            "approvers.escalate.to: `to` is required",
        ),
        (
            "{ escalate: { after: 2h, to: [] } }",
            "approvers.escalate.to: expected a list",
        ),
        (
            "{ escalate: { after: soon, to: [carol] } }",
            "approvers.escalate.after",
        ),
        (
            "{ quorum: 3, slots: [{ name: a, deciders: [x] }, { name: b, deciders: [y] }] }",
            "with `slots` the quorum is their number, 2",
        ),
        (
            "{ slots: [{ name: a, deciders: [] }] }",
            "needs a name of its own",
        ),
        ("{ stages: true }", "`stages` orders `slots`"),
        (
            "{ quorum: 2, deciders: [alice, alice] }",
            "1 decider(s) can never make a quorum of 2",
        ),
        (
            "{ slots: [{ name: a, deciders: ['x y'] }] }",
            "is not a principal name",
        ),
    ];
    for (approvers, expected) in cases {
        let errors = Dir::new()
            .file("agents/r.yml", &agent("r", &approved_api(approvers)))
            .errors();
        assert_eq!(errors.len(), 1, "{approvers}: {errors:?}");
        assert!(errors[0].contains(expected), "{approvers}: {}", errors[0]);
    }
}
