//! Catalog integrations (docs/rules.md DECL-44..DECL-49): strict validation of
//! `catalog/<slug>/integration.yaml`, and `type: integration` references that warn and skip.

use airlock_spec::{ApiAuth, Method, Pagination, ToolSource};

use crate::support::{Dir, agent};

const TICKETS: &str = "\
base_url: https://tickets.example.com/api
auth: { scheme: bearer, credential: tickets.token }
headers: { X-Client: airlock }
actions:
  - name: search
    description: Search tickets.
    parameters:
      q: { type: string, required: true }
    request: { method: GET, path: /tickets, query: { q: \"{q}\" } }
    pagination: { style: cursor, param: cursor, next: meta.next, max_pages: 3 }
    response: { select: data }
  - name: close
    description: Close a ticket.
    parameters:
      id: { type: string, required: true }
      note: { type: string }
    request:
      method: PATCH
      path: /tickets/{id}
      headers: { X-Reason: \"{note}\" }
      body: { state: closed, note: \"{note}\" }
    confirm: true
";

fn uses(actions: &str) -> String {
    agent(
        "desk",
        &format!(
            "    - type: integration\n      integration: tickets\n      actions: [{actions}]\n"
        ),
    )
}

#[test]
fn an_integration_loads_and_an_agent_enables_its_actions() {
    let dir = Dir::new()
        .file("catalog/tickets/integration.yaml", TICKETS)
        .file("agents/desk.yml", &uses("search, close"));
    let deployment = dir.load().unwrap();
    assert!(deployment.warnings.is_empty(), "{:?}", deployment.warnings);
    let tools = &deployment.agents["desk"].tools;
    let names: Vec<&str> = tools.iter().map(|t| t.definition.name.as_str()).collect();
    assert_eq!(names, ["tickets_search", "tickets_close"]);
    let ToolSource::Integration(search) = &tools[0].source else {
        panic!("{:?}", tools[0].source);
    };
    assert_eq!(search.base_url, "https://tickets.example.com/api");
    assert_eq!(search.request.auth, ApiAuth::Bearer);
    assert_eq!(
        search.pagination,
        Some(Pagination::Cursor {
            param: "cursor".into(),
            next: "meta.next".into(),
            max_pages: 3
        })
    );
    assert!(!tools[0].policy.confirm && !tools[0].policy.writes);
    let ToolSource::Integration(close) = &tools[1].source else {
        panic!();
    };
    assert_eq!(close.request.method, Method::Patch);
    assert_eq!(
        close.headers,
        [
            ("X-Client".to_owned(), "airlock".to_owned()),
            ("X-Reason".to_owned(), "{note}".to_owned())
        ]
    );
    assert!(tools[1].policy.confirm && tools[1].policy.writes);
}

#[test]
fn a_catalog_file_reports_every_mistake_with_file_line_and_key() {
    let bad = "\
base_url: ftp://tickets.example.com
auth: { scheme: token, credential: tickets.token }
actions:
  - name: Search
    description: Search.
    request: { method: TRACE, path: tickets }
  - name: delete
    description: Delete.
    request: { method: DELETE, path: /t, headers: { Authorization: x } }
    pagination: { style: offset, param: p, max_pages: 0 }
  - name: remove
    description: Remove.
    unknown: 1
    request: { method: DELETE, path: \"/t/{id}\" }
";
    let errors = Dir::new()
        .file("catalog/tickets/integration.yaml", bad)
        .errors();
    let expect = [
        "catalog/tickets/integration.yaml:1:1: base_url: `ftp://tickets.example.com` is not an http(s) URL",
        "catalog/tickets/integration.yaml:2:9: auth.scheme: `token` is not an auth scheme",
        "catalog/tickets/integration.yaml:4:5: actions[0].name: `Search` is not snake_case",
        "integration.yaml:6:16: actions[0].request.method: `TRACE` is not allowed",
        "actions[0].request.path: `tickets` must start with `/`",
        "actions[1].request.headers.Authorization: `Authorization` cannot be set here",
        "actions[1].pagination.max_pages: expected 1 to 100 pages",
        "actions[1].pagination.style: `offset` is not a pagination style",
        "actions[1].pagination: a paginated action needs `response.select`",
        "actions[1].confirm: a DELETE action must declare `confirm: true`",
        "actions[2].unknown",
        "`{id}` names no parameter of this operation",
    ];
    for needle in expect {
        assert!(
            errors.iter().any(|e| e.contains(needle)),
            "no error contains {needle:?}: {errors:#?}"
        );
    }
}

#[test]
fn a_catalog_entry_must_be_a_directory_with_its_file() {
    let errors = Dir::new().file("catalog/tickets.yaml", TICKETS).errors();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].starts_with(
        "catalog/tickets.yaml:1:1: each catalog entry is a directory holding integration.yaml"
    ));
}

#[test]
fn a_mis_declared_reference_warns_and_is_skipped() {
    let tools = "    - type: integration
      integration: nowhere
      actions: [search]
    - type: integration
      integration: tickets
      actions: [search, reopen]
    - type: integration
      integration: tickets
      action: [close]
";
    let dir = Dir::new()
        .file("catalog/tickets/integration.yaml", TICKETS)
        .file("agents/desk.yml", &agent("desk", tools));
    let deployment = dir.load().unwrap();
    let names: Vec<&str> = deployment.agents["desk"]
        .tools
        .iter()
        .map(|t| t.definition.name.as_str())
        .collect();
    assert_eq!(names, ["tickets_search"]);
    let warnings: Vec<String> = deployment
        .warnings
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(warnings.len(), 4, "{warnings:#?}");
    assert!(warnings[0].starts_with("agents/desk.yml:10:7: spec.tools[0].integration: integration `nowhere` is not in the catalog"), "{warnings:#?}");
    assert!(warnings[1].starts_with("agents/desk.yml:14:25: spec.tools[1].actions: integration `tickets` has no action `reopen`; it is skipped"));
    assert!(warnings[2].starts_with("agents/desk.yml:15:7: spec.tools[2].actions: `actions` is required; this integration entry is skipped"));
    assert!(
        warnings[3].contains("spec.tools[2].action: unknown key"),
        "{warnings:#?}"
    );
    assert!(warnings[3].ends_with("this integration entry is skipped"));
}
