//! `[mcp.oauth]` on the real gateway (docs/rules.md AUTH-1, AUTH-14): a deployment whose
//! airlock.toml names the testkit's issuer boots, accepts its access tokens on `/mcp`, and never
//! passes the access token on: the connection's upstream sees its own credential only.

use std::time::{SystemTime, UNIX_EPOCH};

use airlock::boot::boot;
use airlock_testkit::{Issuer, KeyKind, Script, Server};
use serde_json::{Value, json};

use crate::mcp::rpc;
use crate::support::{deployment_with, serve_in_process};

const SECRET: &str = "crm-secret-77ab";
const RESOURCE: &str = "https://airlock.example.com";

fn deployment(issuer: &Issuer, upstream: &str, scopes: &str) -> tempfile::TempDir {
    let toml = format!(
        "[mcp.oauth]\nissuer = \"{}\"\nresource = \"{RESOURCE}\"\n[mcp.oauth.scopes]\n{scopes}\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n",
        issuer.url()
    );
    let dir = deployment_with(&toml, &format!("crm:\n  mcp_token: {SECRET}\n"));
    std::fs::create_dir(dir.path().join("connections")).unwrap();
    let crm = format!(
        "url: {upstream}\nauth:\n  type: bearer\n  credential: crm.mcp_token\napproval: never\neffect: idempotent\n"
    );
    std::fs::write(dir.path().join("connections/crm.yml"), crm).unwrap();
    dir
}

fn token(issuer: &Issuer) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs();
    issuer.sign(&json!({
        "iss": issuer.url(), "sub": "ada", "aud": format!("{RESOURCE}/mcp"),
        "exp": now + 300, "scope": "mcp:tools",
    }))
}

#[tokio::test]
async fn an_access_token_calls_a_connection_tool_and_never_reaches_the_upstream() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let upstream = Server::start(Script::default()).await;
    upstream.set_tools(vec![json!({"name": "echo", "description": "Echo."})]);
    let dir = deployment(
        &issuer,
        &upstream.loopback_url(),
        "\"mcp:tools\" = [\"gateway\"]",
    );
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://127.0.0.1:{}", addr.port());
    let jwt = token(&issuer);
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "crm__echo", "arguments": {"q": "hi"}}});
    let (status, reply) = rpc(&base, Some(&jwt), call).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["result"]["isError"], false, "{reply}");
    let seen = upstream.seen();
    assert!(seen.iter().any(|s| s.method == "tools/call"), "{seen:?}");
    for request in &seen {
        for (name, value) in &request.headers {
            let value = value.to_str().unwrap_or_default();
            assert!(
                !value.contains(&jwt),
                "the access token went upstream in {name}"
            );
        }
        assert!(!request.body.to_string().contains(&jwt));
        assert_eq!(
            request.headers["authorization"],
            format!("Bearer {SECRET}").as_str()
        );
    }
    // Without a token: the challenge names this deployment's resource metadata.
    let (status, _): (u16, Value) = rpc(
        &base,
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    )
    .await;
    assert_eq!(status, 401);
}

#[tokio::test]
async fn a_scope_naming_an_agent_that_is_not_deployed_stops_the_boot() {
    let issuer = Issuer::start(KeyKind::Es256).await;
    let upstream = Server::start(Script::default()).await;
    let dir = deployment(&issuer, &upstream.loopback_url(), "x = [\"agent:ghost\"]");
    let error = boot(dir.path()).await.err().unwrap().to_string();
    assert!(error.contains("[mcp.oauth]"), "{error}");
    let chain = format!("{:#}", boot(dir.path()).await.err().unwrap());
    assert!(
        chain.contains(
            "token scope `x` names scope \"agent:ghost\", but no agent `ghost` is deployed"
        ),
        "{chain}"
    );
}
