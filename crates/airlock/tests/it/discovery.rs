//! Connection files against the testkit upstream on 127.0.0.1 (allowed by `[egress] allow`):
//! boot-time discovery (tools, policy, calls with the credential, fail-loud boot, the scope
//! digest), `airlock check --discover` and `airlock discover`'s pasteable block.

use std::path::Path;

use airlock::boot::boot;
use airlock_runtime::ledger::{Decision, InvocationState};
use airlock_runtime::{Outcome, OutcomeKind};
use airlock_spec::{Deployment, Scope, ScopeId};
use airlock_testkit::{Script, Server};
use serde_json::{Value, json};

use crate::airlock;
use crate::support::{call_context, deployment_with};

const SECRET: &str = "crm-secret-4f1c";

/// A deployment whose `connections/crm.yml` points at `url`.
fn deployment(url: &str, approval: &str) -> tempfile::TempDir {
    let toml = "listen = \"127.0.0.1:0\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n";
    let dir = deployment_with(toml, &format!("crm:\n  mcp_token: {SECRET}\n"));
    std::fs::create_dir(dir.path().join("connections")).unwrap();
    let crm = format!(
        "url: {url}\nauth:\n  type: bearer\n  credential: crm.mcp_token\napproval: {approval}\neffect: idempotent\n"
    );
    std::fs::write(dir.path().join("connections/crm.yml"), crm).unwrap();
    dir
}

async fn gateway_digest(dir: &Path) -> String {
    let booted = boot(dir).await.unwrap();
    booted.gateway.scope(&ScopeId::Gateway).unwrap().digest()
}

/// A URL on 127.0.0.1 where nothing listens.
async fn closed_url() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    format!("http://127.0.0.1:{port}/mcp")
}

#[tokio::test]
async fn connection_tools_join_the_gateway_scope_with_the_files_policy() {
    let upstream = Server::start(Script::default()).await;
    let dir = deployment(&upstream.loopback_url(), "once");
    let booted = boot(dir.path()).await.unwrap();
    let scope = booted.gateway.scope(&ScopeId::Gateway).unwrap();
    let crm: Vec<_> = scope
        .tools()
        .iter()
        .filter(|t| t.definition.name.to_string().starts_with("crm__"))
        .collect();
    let names: Vec<_> = crm.iter().map(|t| t.definition.name.to_string()).collect();
    assert_eq!(names, ["crm__search", "crm__create_note"]);
    for tool in &crm {
        assert_eq!(tool.policy.approval.to_string(), "once");
        assert_eq!(tool.policy.effect.to_string(), "idempotent");
    }
    assert_eq!(crm[0].definition.description, "Search the CRM.");
    assert_eq!(
        crm[0].definition.input_schema["properties"]["q"],
        json!({"type": "string"})
    );
    assert_eq!(crm[1].definition.input_schema, json!({"type": "object"}));
    // Discovery sent the credential too.
    assert_eq!(
        upstream.seen()[0].headers["authorization"],
        format!("Bearer {SECRET}").as_str()
    );
}

/// Calls `crm__echo` once through a booted gateway whose connection file says `policy` (the
/// value of `approval:` and any keys after it); returns the upstream and the outcome.
async fn call_echo(policy: &str) -> (Server, Outcome) {
    let upstream = Server::start(Script::default()).await;
    upstream.set_tools(vec![json!({"name": "echo", "description": "Echo."})]);
    let dir = deployment(&upstream.loopback_url(), policy);
    let gateway = boot(dir.path()).await.unwrap().gateway;
    let ctx = call_context(&gateway, ScopeId::Gateway, Some("bob"), "1").await;
    let outcome = gateway
        .call(&ctx, "crm__echo", json!({"ticket": "42"}))
        .await
        .unwrap();
    (upstream, outcome)
}

#[tokio::test]
async fn a_call_to_a_connection_tool_reaches_the_upstream_with_the_bearer_credential() {
    let (upstream, outcome) = call_echo("never").await;
    assert_eq!(outcome.kind(), OutcomeKind::Completed, "{outcome:?}");
    let result = airlock::result::result_json(outcome.invocation()).unwrap();
    assert_eq!(result["structured"], json!({"received": {"ticket": "42"}}));
    let call = upstream
        .seen()
        .into_iter()
        .find(|s| s.method == "tools/call")
        .unwrap();
    assert_eq!(call.body["params"]["name"], "echo", "the remote name");
    assert_eq!(call.body["params"]["arguments"], json!({"ticket": "42"}));
    assert_eq!(
        call.headers["authorization"],
        format!("Bearer {SECRET}").as_str()
    );
}

/// MCP-28: boot's discovery shook hands with the session-less upstream, so every call through
/// the gateway is one `tools/call`, with the credential and the negotiated revision.
#[tokio::test]
async fn calls_to_a_session_less_connection_are_one_request_each() {
    let (upstream, first) = call_echo("never").await;
    assert_eq!(first.kind(), OutcomeKind::Completed, "{first:?}");
    let methods = upstream.methods();
    let boot = ["initialize", "notifications/initialized", "tools/list"];
    assert_eq!(methods[..3], boot, "discovery at boot");
    assert_eq!(methods[3..], ["tools/call"], "{methods:?}");
    let seen = upstream.seen();
    let version = seen[0].body["params"]["protocolVersion"].as_str().unwrap();
    assert_eq!(seen[3].headers["mcp-protocol-version"], version);
    assert_eq!(
        seen[3].headers["authorization"],
        format!("Bearer {SECRET}").as_str()
    );
}

#[tokio::test]
async fn an_unreachable_connection_fails_boot_naming_it() {
    let dir = deployment(&closed_url().await, "never");
    let err = boot(dir.path()).await.err().unwrap();
    let message = format!("{err:#}");
    assert!(
        message.contains("connection crm: tools/list failed at boot — "),
        "{message}"
    );

    let out = tokio::process::Command::from(airlock())
        .arg("serve")
        .arg(dir.path())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("connection crm: tools/list failed at boot"),
        "{stderr}"
    );
}

/// The upstream's changes are accepted between boots (they are withheld until then, OPS-49).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scope_digest_is_stable_across_boots_and_follows_the_upstreams_tools() {
    let upstream = Server::start(Script::default()).await;
    let dir = deployment(&upstream.loopback_url(), "never");
    let first = gateway_digest(dir.path()).await;
    assert_eq!(first, gateway_digest(dir.path()).await);

    // Same names, another schema: the digest covers schemas, not only names.
    upstream.set_tools(vec![
        json!({"name": "search", "description": "Search the CRM.",
               "inputSchema": {"type": "object", "properties": {"q": {"type": "integer"}}}}),
        json!({"name": "create_note"}),
    ]);
    let accept = |dir: &Path| crate::support::cli(dir, &["tools", "accept", "crm"]);
    assert!(accept(dir.path()).status.success());
    let changed = gateway_digest(dir.path()).await;
    assert_ne!(first, changed);
    upstream.set_tools(vec![json!({"name": "search"})]);
    assert!(accept(dir.path()).status.success());
    assert_ne!(changed, gateway_digest(dir.path()).await);
}

#[tokio::test]
async fn check_discover_lists_each_connections_tools_and_plain_check_does_not() {
    let upstream = Server::start(Script::default()).await;
    let dir = deployment(&upstream.loopback_url(), "once");
    let run = |discover: bool| {
        let mut cmd = tokio::process::Command::from(airlock());
        cmd.arg("check");
        if discover {
            cmd.arg("--discover");
        }
        cmd.arg(dir.path()).output()
    };
    let out = run(true).await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}");
    assert!(
        stdout.contains("connection crm: 2 tools discovered at http://127.0.0.1:"),
        "{stdout}"
    );
    assert!(
        stdout.contains("  crm__search  Search the CRM."),
        "{stdout}"
    );
    assert!(
        stdout.contains("crm__create_note  mcp     once"),
        "{stdout}"
    );
    let digest = gateway_digest(dir.path()).await;
    assert!(
        stdout.contains(&format!("gateway (/mcp)  digest {digest}")),
        "check --discover shows the digest serve has: {stdout}"
    );

    let before = upstream.seen().len();
    let out = run(false).await.unwrap();
    assert!(out.status.success());
    assert_eq!(upstream.seen().len(), before, "plain check stays offline");

    let closed = deployment(&closed_url().await, "once");
    let out = tokio::process::Command::from(airlock())
        .args(["check", "--discover"])
        .arg(closed.path())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("connection crm: tools/list failed at boot"),
        "{stderr}"
    );
}

/// A schema of `2 * levels - 1` levels as `airlock check` counts them.
fn deep_schema(levels: usize) -> Value {
    let mut schema = json!({"type": "string"});
    for _ in 1..levels {
        schema = json!({"type": "object", "properties": {"a": schema}});
    }
    schema
}

/// `airlock discover URL ARGS… --dir DIR`.
async fn discover(url: &str, args: &[&str], dir: &Path) -> std::process::Output {
    tokio::process::Command::from(airlock())
        .arg("discover")
        .arg(url)
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .await
        .unwrap()
}

/// The scope of agent `agent` whose tools are `block`, pasted as printed into a fresh deployment
/// whose connection `connection` points at the upstream on `port`.
fn pasted_scope(block: &str, agent: &str, connection: &str, port: u16) -> Scope {
    let target = tempfile::tempdir().unwrap();
    let toml = format!(
        "[connections.{connection}]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}\"\ncredential = \"crm.mcp_token\"\n"
    );
    std::fs::write(target.path().join("airlock.toml"), toml).unwrap();
    std::fs::create_dir(target.path().join("agents")).unwrap();
    let indented: String = block.lines().map(|l| format!("    {l}\n")).collect();
    let manifest = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: {agent}\nspec:\n  model: {{ provider: openai, model: gpt-4o-mini }}\n  prompts: {{ system: test }}\n  tools:\n{indented}"
    );
    std::fs::write(target.path().join(format!("agents/{agent}.yml")), &manifest).unwrap();
    let deployment = Deployment::load(target.path())
        .unwrap_or_else(|e| panic!("{e}\n--- manifest:\n{manifest}"));
    deployment.agent_scope(agent).unwrap()
}

#[tokio::test]
async fn discover_prints_a_block_that_check_accepts() {
    let upstream = Server::start(Script::default()).await;
    upstream.set_tools(vec![
        json!({"name": "search", "description": "Search the CRM: by \"name\" or id.",
               "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}},
               "annotations": {"readOnlyHint": true}}),
        json!({"name": "create-note", "annotations": {"readOnlyHint": false}}),
        json!({"name": "deep", "description": "Too deep.", "inputSchema": deep_schema(5)}),
        json!({"name": "fits", "description": "Just fits.", "inputSchema": deep_schema(4)}),
    ]);
    let dir = deployment(&upstream.loopback_url(), "never");
    let out = discover(
        &upstream.loopback_url(),
        &["--name", "crm-live", "--credential", "crm.mcp_token"],
        dir.path(),
    )
    .await;
    let block = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{block}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // DECL-39: a read only where the server says so; every other tool is a proposed write.
    assert!(
        block.contains("    - name: \"search\"\n      description: \"Search the CRM: by \\\"name\\\" or id.\"\n      writes: false  # the server marks it readOnlyHint: true\n"),
        "{block}"
    );
    assert!(
        block.contains("    - name: \"create-note\"\n      description: \"create-note\"\n      writes: true  # the server marks it readOnlyHint: false\n      mode: propose\n"),
        "{block}"
    );
    assert!(
        block.contains("    - name: \"fits\"\n      description: \"Just fits.\"\n      writes: true  # the server gives no readOnlyHint\n      mode: propose\n"),
        "{block}"
    );
    assert_eq!(block.matches("writes: false").count(), 1, "{block}");
    // DECL-39: no `--auth`, but the listing needed the credential: the block sends it as it
    // was sent, bearer (a block without `auth` on the credentialed connection would not load).
    assert!(block.contains("\n  auth: { scheme: bearer }\n"), "{block}");
    assert!(!block.contains("approval"), "{block}");
    assert!(
        block.contains(
            "# tool \"deep\" left out: the input schema is 9 levels deep; the limit is 8"
        ),
        "{block}"
    );
    assert_eq!(
        upstream.seen()[0].headers["authorization"],
        format!("Bearer {SECRET}").as_str()
    );

    // Paste it into a deployment with the connection it names, and load that.
    let scope = pasted_scope(&block, "live", "crm_live_mcp", upstream.port);
    assert_eq!(scope.tools().len(), 3, "{block}");
    let writes: Vec<(String, bool, String)> = scope
        .tools()
        .iter()
        .map(|t| {
            let p = &t.policy;
            (t.definition.name.to_string(), p.writes, p.mode.to_string())
        })
        .collect();
    assert!(
        writes.contains(&("crm_live_search".into(), false, "execute".into())),
        "{writes:?}"
    );
    assert!(
        writes.contains(&("crm_live_create_note".into(), true, "propose".into())),
        "{writes:?}"
    );
}

/// DECL-39: `--auth` and `--approval` are printed when asked for, and the block still loads.
#[tokio::test]
async fn discover_prints_auth_and_approval_only_when_asked() {
    let upstream = Server::start(Script::default()).await;
    upstream.set_tools(vec![json!({"name": "refund", "description": "Refund."})]);
    let dir = deployment(&upstream.loopback_url(), "never");
    let out = discover(
        &upstream.loopback_url(),
        &[
            "--name",
            "pay",
            "--credential",
            "crm.mcp_token",
            "--auth",
            "bearer",
            "--approval",
            "always",
        ],
        dir.path(),
    )
    .await;
    let block = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{block}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(block.contains("\n  auth: { scheme: bearer }\n"), "{block}");
    assert!(block.contains("\n  approval: always"), "{block}");
    assert!(
        block.contains("writes: true  # the server gives no readOnlyHint\n      mode: propose\n"),
        "{block}"
    );
    let scope = pasted_scope(&block, "pay", "pay_mcp", upstream.port);
    let tool = &scope.tools()[0];
    assert_eq!(tool.policy.approval.to_string(), "always");
    assert!(tool.policy.writes);
}

/// DECL-37: a discovered schema the validator refuses stops the boot, naming the connection
/// and the tool, like any bad connection; `airlock discover` leaves such a tool out.
#[tokio::test]
async fn a_discovered_schema_that_does_not_compile_refuses_boot() {
    let upstream = Server::start(Script::default()).await;
    upstream.set_tools(vec![
        json!({"name": "echo", "description": "Echo."}),
        json!({"name": "bad", "description": "Bad.",
               "inputSchema": {"type": "object", "properties": {"a": {"type": "nonsense"}}}}),
    ]);
    let dir = deployment(&upstream.loopback_url(), "never");
    let err = boot(dir.path()).await.err().expect("the boot is refused");
    let message = format!("{err:#}");
    assert!(
        message.contains("connection crm: ")
            && message.contains("tool `bad`: the input schema does not compile"),
        "{message}"
    );

    let out = discover(
        &upstream.loopback_url(),
        &["--name", "crm-live", "--credential", "crm.mcp_token"],
        dir.path(),
    )
    .await;
    let block = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{block}");
    assert!(
        block.contains("# tool \"bad\" left out: the input schema does not compile"),
        "{block}"
    );
}

/// POLICY-6: the connection's server gains a tool while a call of another of its tools waits,
/// approved; after the restart that discovers the new tool, the approved call still runs.
#[tokio::test]
async fn an_approved_call_survives_its_connection_gaining_a_tool() {
    let upstream = Server::start(Script::default()).await;
    upstream.set_tools(vec![json!({"name": "echo", "description": "Echo."})]);
    let dir = deployment(&upstream.loopback_url(), "always");
    let before = boot(dir.path()).await.unwrap().gateway;
    let ctx = call_context(&before, ScopeId::Gateway, Some("bob"), "1").await;
    let parked = before
        .call(&ctx, "crm__echo", json!({"ticket": "42"}))
        .await
        .unwrap();
    assert_eq!(parked.kind(), OutcomeKind::Parked, "{parked:?}");
    let id = parked.invocation().id;
    before
        .store()
        .decide(id, "alice", Decision::Approve)
        .await
        .unwrap();
    drop(before);

    upstream.set_tools(vec![
        json!({"name": "echo", "description": "Echo."}),
        json!({"name": "archive", "description": "New on the server."}),
    ]);
    let after = boot(dir.path()).await.unwrap().gateway;
    let done = after.continue_approved(id).await.unwrap();
    let row = done.invocation();
    assert_eq!(row.state, InvocationState::Succeeded, "{:?}", row.error);
    assert!(upstream.seen().iter().any(|s| s.method == "tools/call"));
}

/// A connection's `approval_ttl` sets how long its calls wait for an approval (the server's
/// default, 7 days, applies to every other tool).
#[tokio::test]
async fn a_connections_approval_ttl_bounds_its_parked_calls() {
    let (_upstream, outcome) = call_echo("always\napproval_ttl: 90s").await;
    assert_eq!(outcome.kind(), OutcomeKind::Parked, "{outcome:?}");
    let row = outcome.into_invocation();
    let waits = row.expires_at.unwrap() - row.created_at;
    assert_eq!(waits, time::Duration::seconds(90), "{row:?}");
}
