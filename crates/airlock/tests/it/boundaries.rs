//! The operator's egress allow list is the operator's (docs/rules.md EGRESS-38), end to end: with
//! `[egress] allow = ["127.0.0.1/32"]` for its own loopback model, a tenant's `type: api` tool
//! and a catalog integration on a loopback API refuse to load until the operator vouches for
//! them, and a `base_url` a run's caller supplies is blocked at the call, while the model on
//! loopback answers. A supplied connection is never swapped for airlock.toml's (AGENT-63).

use std::net::SocketAddr;

use airlock_testkit::{Cue, FakeCall, FakeModel, ModelReply, RawServer};
use serde_json::json;

use crate::runs::CALLER;
use crate::serve::ADMIN;
use crate::support::{Server, cli, deployment_with, http};

/// Agent `desk` on the fake model at `model`, with three tools whose destinations are all the
/// loopback API at `api`: `erp_total` (a `type: api` on `[connections.erp]`), `tickets_search`
/// (catalog integration `tickets`) and `crm_total` (a `type: api` on the per-run connection
/// `crm`). With `vouched`, the operator vouches for `erp` and `tickets`; never for `crm`.
fn desk(model: &str, api: u16, vouched: bool) -> tempfile::TempDir {
    let (erp_vouched, integrations) = if vouched {
        (
            "use_egress_allow = true\n",
            "allow_integrations = [\"tickets\"]\n",
        )
    } else {
        ("", "")
    };
    let toml = format!(
        "listen = \"127.0.0.1:0\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.caller\"\nprincipal = \"carol\"\nscopes = [\"agent:desk\"]\n\
         [[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n{integrations}\
         [credentials]\nfile = \"creds.yml\"\n\
         [connections.erp]\n{erp_vouched}base_url = \"http://127.0.0.1:{api}/api\"\ncredential = \"erp.token\"\n\
         [connections.crm]\nper_run = true\n"
    );
    let creds = format!(
        "airlock:\n  caller: {CALLER}\n  admin: {ADMIN}\nopenai:\n  key: {}\nerp:\n  token: erp-token\ntickets:\n  token: tickets-token\n",
        FakeModel::KEY
    );
    let dir = deployment_with(&toml, &creds);
    let catalog = dir.path().join("catalog/tickets");
    std::fs::create_dir_all(&catalog).unwrap();
    let integration = format!(
        "base_url: http://127.0.0.1:{api}/api\n\
         auth: {{ scheme: bearer, credential: tickets.token }}\n\
         actions:\n\
         \x20 - name: search\n    description: Search tickets.\n\
         \x20   request: {{ method: GET, path: /tickets }}\n"
    );
    std::fs::write(catalog.join("integration.yaml"), integration).unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    let api_tool = |name: &str, connection: &str| {
        format!(
            "\x20   - name: {name}\n      type: api\n      connection: {connection}\n      auth: {{ scheme: bearer }}\n      operations:\n\
             \x20       - name: total\n          description: The total.\n          writes: false\n\
             \x20         request: {{ method: GET, path: /total }}\n"
        )
    };
    let manifest = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: desk\n  description: Desk.\n\
         spec:\n  model:\n    provider: openai\n    model: gpt-test\n    endpoint: {model}\n    credential: openai.key\n\
         \x20 prompts:\n    system: Help.\n  tools:\n{}{}\
         \x20   - type: integration\n      integration: tickets\n      actions: [search]\n",
        api_tool("erp", "erp"),
        api_tool("crm", "crm"),
    );
    std::fs::write(agents.join("desk.yml"), manifest).unwrap();
    dir
}

#[tokio::test]
async fn tenant_destinations_on_loopback_are_refused_while_the_operators_model_works() {
    let api = RawServer::start(None, Cue::Status(200)).await;
    let model = FakeModel::openai(vec![
        ModelReply::calls(vec![
            FakeCall::new("c1", "erp_total", &json!({})),
            FakeCall::new("c2", "tickets_search", &json!({})),
            FakeCall::new("c3", "crm_total", &json!({})),
        ]),
        ModelReply::text(&["Two of three."]),
    ])
    .await;

    // Not vouched for: the tenant API and the integration do not load (check, hence serve).
    let refused = desk(&model.endpoint(), api.port, false);
    let out = cli(refused.path(), &["check"]);
    assert_eq!(out.status.code(), Some(1), "{}", crate::text(&out));
    let said = String::from_utf8_lossy(&out.stderr);
    assert!(said.starts_with("2 problems in "), "{said}");
    assert!(said.contains("connections.erp.base_url"), "{said}");
    assert!(said.contains("catalog/tickets/integration.yaml"), "{said}");
    assert!(said.contains("use_egress_allow = true"), "{said}");

    // Vouched for: they run; the URL the run's caller supplies for `crm` is still refused.
    let dir = desk(&model.endpoint(), api.port, true);
    let server = Server::start(dir.path(), &[]);
    let addr: SocketAddr = server.addr.parse().unwrap();
    let body = json!({
        "input": "totals?",
        "connections": {"crm": {
            "base_url": format!("http://127.0.0.1:{}/api", api.port),
            "credential": "crm-token"
        }}
    });
    let (status, run, _) = http(
        addr,
        "POST",
        "/v1/agents/desk/run",
        Some(CALLER),
        Some(body),
    )
    .await;
    assert_eq!(
        (status, &run["status"]),
        (200, &json!("completed")),
        "{run}"
    );
    assert_eq!(run["answer"], "Two of three.", "{run}");
    let calls = run["invocations"].as_array().expect("invocations");
    let states: Vec<_> = calls.iter().map(|c| (&c["tool"], &c["state"])).collect();
    assert_eq!(
        states,
        [
            (&json!("erp_total"), &json!("succeeded")),
            (&json!("tickets_search"), &json!("succeeded")),
            (&json!("crm_total"), &json!("failed")),
        ],
        "{run}"
    );
    let path = format!("/v1/invocations/{}", calls[2]["id"].as_str().unwrap());
    let (_, row, _) = http(addr, "GET", &path, Some(ADMIN), None).await;
    assert_eq!(row["result"]["error"]["kind"], "blocked", "{row}");
    assert_eq!(
        api.seen(),
        ["/api/total", "/api/tickets"],
        "only the vouched two"
    );
    assert_eq!(
        model.requests(),
        2,
        "the operator's loopback model answered twice"
    );
}

/// Agent `desk` whose one tool `erp_total` (a GET, `approval: always`) goes through
/// `[connections.erp]`, vouched for by the operator and pointing at `toml_api`.
fn gated_erp(model: &str, toml_api: u16) -> tempfile::TempDir {
    let toml = format!(
        "listen = \"127.0.0.1:0\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.caller\"\nprincipal = \"carol\"\nscopes = [\"agent:desk\"]\n\
         [[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n\
         [credentials]\nfile = \"creds.yml\"\n\
         [connections.erp]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{toml_api}/api\"\ncredential = \"erp.token\"\n"
    );
    let creds = format!(
        "airlock:\n  caller: {CALLER}\n  admin: {ADMIN}\nopenai:\n  key: {}\nerp:\n  token: erp-token\n",
        FakeModel::KEY
    );
    let dir = deployment_with(&toml, &creds);
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    let manifest = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: desk\n  description: Desk.\n\
         spec:\n  model:\n    provider: openai\n    model: gpt-test\n    endpoint: {model}\n    credential: openai.key\n\
         \x20 prompts:\n    system: Help.\n  tools:\n\
         \x20   - name: erp\n      type: api\n      connection: erp\n      auth: {{ scheme: bearer }}\n      approval: always\n      operations:\n\
         \x20       - name: total\n          description: The total.\n          writes: false\n\
         \x20         request: {{ method: GET, path: /total }}\n"
    );
    std::fs::write(agents.join("desk.yml"), manifest).unwrap();
    dir
}

/// AGENT-63 through the surfaces: a run given its `erp` connection by its caller parks on a
/// gated call; `serve` is killed and started again, and an admin approves. The new process
/// never held the supplied connection, so the run fails naming it — and neither upstream is
/// asked anything: airlock.toml's `erp` least of all.
#[tokio::test]
async fn a_killed_and_restarted_run_never_calls_the_deployments_connection() {
    let supplied = RawServer::start(None, Cue::Status(200)).await;
    let configured = RawServer::start(None, Cue::Status(200)).await;
    let model = FakeModel::openai(vec![
        ModelReply::calls(vec![FakeCall::new("c1", "erp_total", &json!({}))]),
        ModelReply::text(&["Done."]),
    ])
    .await;
    let dir = gated_erp(&model.endpoint(), configured.port);
    let mut server = Server::start(dir.path(), &[]);
    let body = json!({
        "input": "the total?",
        "connections": {"erp": {
            "base_url": format!("http://127.0.0.1:{}/api", supplied.port),
            "credential": "supplied-token"
        }}
    });
    let addr: SocketAddr = server.addr.parse().unwrap();
    let (status, parked, _) = http(
        addr,
        "POST",
        "/v1/agents/desk/run",
        Some(CALLER),
        Some(body),
    )
    .await;
    assert_eq!(
        (status, &parked["status"]),
        (200, &json!("parked")),
        "{parked}"
    );
    server.child.kill().unwrap();
    server.child.wait().unwrap();

    let server = Server::start(dir.path(), &[]);
    let addr: SocketAddr = server.addr.parse().unwrap();
    let waiting = parked["waiting"][0].as_str().unwrap();
    let path = format!("/v1/invocations/{waiting}/approve");
    let (status, approved, _) = http(addr, "POST", &path, Some(ADMIN), Some(json!({}))).await;
    assert_eq!(status, 200, "{approved}");
    let run = parked["run_id"].as_str().unwrap();
    let failed = crate::runs::until_status(addr, run, "failed").await;
    let why = failed["error"].as_str().unwrap_or_default();
    assert!(
        why.contains("`erp`") && why.contains("no longer held"),
        "{failed}"
    );
    assert!(supplied.seen().is_empty(), "{:?}", supplied.seen());
    assert!(
        configured.seen().is_empty(),
        "airlock.toml's erp: {:?}",
        configured.seen()
    );
    assert_eq!(model.requests(), 1, "the model is not asked again");
}
