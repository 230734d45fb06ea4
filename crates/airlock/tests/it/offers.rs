//! docs/rules.md MCP-54 … MCP-62, LEDGER-59, LEDGER-60, DECL-77, EGRESS-37 end to end: an
//! upstream built with the official TypeScript SDK (`crates/airlock-mcp/tests/sdk/fixture.mjs`)
//! offers resources, a template, prompts and completion; `airlock serve`'s endpoint serves them
//! under a connection file's namespace — blobs byte for byte, each read a ledger row, filtered by
//! `[[access]]` — and a `type: mcp` declaration's only with `offers: true`, and only through the
//! egress guard. Needs `npm ci --prefix crates/airlock-mcp/tests/sdk`.

use base64::Engine as _;
use serde_json::{Value, json};

use crate::support::{deployment_with, mcp_request, sdk_fixture, serve_in_process};

const CLAUDE: &str = "mcp-5d1e7a3c9b2f4e6a8c0d2f4b6a8e0c1d";
const OTHER: &str = "mcp-8f2a4c6e1b3d5f7a9c1e3b5d7f9a2c4e";

/// Connection `media` on the fixture at `port`; agents `plain` (a declaration without
/// `offers`) and `rich` (with). `claude` sees everything, `other` only `media__static_*`.
fn deployment(port: u16, egress: &str) -> tempfile::TempDir {
    let toml = format!(
        "[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[[mcp.tokens]]\ncredential = \"airlock.other\"\nprincipal = \"other\"\n[[access]]\nprincipals = [\"claude\"]\ntools = [\"*\"]\n[[access]]\nprincipals = [\"other\"]\ntools = [\"media__static_*\"]\n[egress]\n{egress}\n[connections.fixture]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}\"\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let dir = deployment_with(
        &toml,
        &format!("airlock:\n  claude: {CLAUDE}\n  other: {OTHER}\n"),
    );
    let path = dir.path();
    if egress.contains("127.0.0.1") {
        std::fs::create_dir(path.join("connections")).unwrap();
        let media = format!("url: http://127.0.0.1:{port}/mcp\n");
        std::fs::write(path.join("connections/media.yml"), media).unwrap();
    }
    std::fs::create_dir(path.join("agents")).unwrap();
    for (name, offers) in [("plain", ""), ("rich", "      offers: true\n")] {
        let agent = format!(
            "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: {name}\nspec:\n  model: {{ provider: openai, model: unused }}\n  prompts: {{ system: Unused. }}\n  tools:\n    - name: {name}\n      type: mcp\n      connection: fixture\n      path: /mcp\n{offers}      tools:\n        - name: simple_text\n          description: Returns a short text.\n          writes: false\n          input_schema: {{ type: object }}\n"
        );
        std::fs::write(path.join(format!("agents/{name}.yml")), agent).unwrap();
    }
    dir
}

/// The whole JSON-RPC reply to one request to `path` (`/mcp` or an agent's) as `token`.
async fn reply(base: &str, path: &str, token: &str, method: &str, params: Value) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
    let sent = mcp_request(&format!("{base}{path}"))
        .bearer_auth(token)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    serde_json::from_str(&sent.text().await.unwrap()).unwrap()
}

/// The result of a request that must succeed.
async fn rpc(base: &str, path: &str, method: &str, params: Value) -> Value {
    let reply = reply(base, path, CLAUDE, method, params).await;
    assert!(reply.get("error").is_none(), "{method}: {reply}");
    reply["result"].clone()
}

async fn capabilities(base: &str, path: &str) -> Value {
    let hello = json!({"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}});
    rpc(base, path, "initialize", hello).await["capabilities"].clone()
}

/// `(tool, principal, state, arguments)` of every row of `method`, oldest first.
async fn rows(dir: &std::path::Path, method: &str) -> Vec<(String, String, String, String)> {
    let url = format!("sqlite://{}", dir.join("airlock.sqlite").display());
    let db = sqlx::SqlitePool::connect(&url).await.unwrap();
    sqlx::query_as("SELECT tool, principal, state, arguments FROM invocations WHERE tool = $1 ORDER BY created_at")
        .bind(method)
        .fetch_all(&db)
        .await
        .unwrap()
}

fn names(list: &Value, key: &str, field: &str) -> Vec<String> {
    let entries = list[key].as_array().unwrap();
    entries
        .iter()
        .map(|e| e[field].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn mcp_55_a_connections_resources_are_served_namespaced_and_read_byte_for_byte_each_read_a_row()
 {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port, "allow = [\"127.0.0.1/32\"]");
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://{addr}");
    let caps = capabilities(&base, "").await;
    assert_eq!(
        (caps["resources"].clone(), caps["prompts"].clone()),
        (json!({}), json!({})),
        "{caps}"
    );
    assert_eq!(caps["completions"], json!({}), "{caps}");

    let list = rpc(&base, "", "resources/list", json!({})).await;
    assert_eq!(
        names(&list, "resources", "uri"),
        ["media+test://static-text", "media+test://static-binary"]
    );
    assert_eq!(
        names(&list, "resources", "name"),
        ["media__static_text", "media__static_binary"]
    );
    let templates = rpc(&base, "", "resources/templates/list", json!({})).await;
    assert_eq!(
        names(&templates, "resourceTemplates", "uriTemplate"),
        ["media+test://template/{id}/data"]
    );

    let text = rpc(
        &base,
        "",
        "resources/read",
        json!({"uri": "media+test://static-text"}),
    )
    .await;
    let content = &text["contents"][0];
    assert_eq!(content["uri"], "media+test://static-text");
    assert_eq!(
        content["text"],
        "This is the content of the static text resource."
    );
    let binary = rpc(
        &base,
        "",
        "resources/read",
        json!({"uri": "media+test://static-binary"}),
    )
    .await;
    let blob = binary["contents"][0]["blob"].as_str().unwrap();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(blob)
        .unwrap();
    assert_eq!(bytes, (0..=255u8).collect::<Vec<_>>());
    let templated = rpc(
        &base,
        "",
        "resources/read",
        json!({"uri": "media+test://template/123/data"}),
    )
    .await;
    assert_eq!(templated["contents"][0]["text"], r#"{"id":"123"}"#);
    assert_eq!(
        templated["contents"][0]["uri"],
        "media+test://template/123/data"
    );

    // LEDGER-59: one succeeded row each, under the caller, with the URI it asked for.
    let rows = rows(dir.path(), "resources/read").await;
    let uris: Vec<Value> = rows
        .iter()
        .map(|r| serde_json::from_str::<Value>(&r.3).unwrap()["uri"].clone())
        .collect();
    assert_eq!(
        uris,
        [
            json!("media+test://static-text"),
            json!("media+test://static-binary"),
            json!("media+test://template/123/data")
        ]
    );
    assert!(
        rows.iter().all(|r| r.1 == "claude" && r.2 == "succeeded"),
        "{rows:?}"
    );
}

#[tokio::test]
async fn mcp_59_prompts_and_completion_are_served_under_the_tools_prefix() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port, "allow = [\"127.0.0.1/32\"]");
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://{addr}");
    let list = rpc(&base, "", "prompts/list", json!({})).await;
    assert_eq!(
        names(&list, "prompts", "name"),
        [
            "media__simple_prompt",
            "media__prompt_with_arguments",
            "media__prompt_with_embedded_resource",
            "media__prompt_with_image"
        ]
    );
    let args = json!({"name": "media__prompt_with_arguments", "arguments": {"arg1": "one", "arg2": "two"}});
    let got = rpc(&base, "", "prompts/get", args).await;
    assert_eq!(
        got["messages"][0]["content"]["text"],
        "Prompt with arguments: arg1='one', arg2='two'"
    );
    let embedded = json!({"name": "media__prompt_with_embedded_resource", "arguments": {"resourceUri": "test://doc"}});
    let got = rpc(&base, "", "prompts/get", embedded).await;
    // The embedded resource's URI is served as the server's URIs are.
    assert_eq!(
        got["messages"][0]["content"]["resource"]["uri"],
        "media+test://doc"
    );
    let image = rpc(
        &base,
        "",
        "prompts/get",
        json!({"name": "media__prompt_with_image"}),
    )
    .await;
    assert_eq!(image["messages"][0]["content"]["type"], "image");
    assert_eq!(rows(dir.path(), "prompts/get").await.len(), 3);

    let prompt = json!({"ref": {"type": "ref/prompt", "name": "media__prompt_with_arguments"}, "argument": {"name": "arg1", "value": "test"}});
    let done = rpc(&base, "", "completion/complete", prompt).await;
    assert_eq!(
        done["completion"]["values"],
        json!(["test-alpha", "test-beta"])
    );
    let template = json!({"ref": {"type": "ref/resource", "uri": "media+test://template/{id}/data"}, "argument": {"name": "id", "value": "o"}});
    let done = rpc(&base, "", "completion/complete", template).await;
    assert_eq!(done["completion"]["values"], json!(["other"]));
}

#[tokio::test]
async fn mcp_57_an_unknown_or_hidden_resource_is_invalid_params_naming_its_uri_and_leaves_no_row() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port, "allow = [\"127.0.0.1/32\"]");
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://{addr}");
    for (token, uri) in [
        (CLAUDE, "media+test://nonexistent"),
        (CLAUDE, "test://static-text"),
        // MCP-58: `other` may see only the static resources, not the template's.
        (OTHER, "media+test://template/1/data"),
    ] {
        let refused = reply(&base, "", token, "resources/read", json!({"uri": uri})).await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        assert_eq!(refused["error"]["data"]["uri"], uri, "{refused}");
    }
    assert!(rows(dir.path(), "resources/read").await.is_empty());
    let seen = reply(&base, "", OTHER, "resources/list", json!({})).await;
    assert_eq!(
        names(&seen["result"], "resources", "name"),
        ["media__static_text", "media__static_binary"]
    );
    let templates = reply(&base, "", OTHER, "resources/templates/list", json!({})).await;
    assert_eq!(templates["result"]["resourceTemplates"], json!([]));
    let prompts = reply(&base, "", OTHER, "prompts/list", json!({})).await;
    assert_eq!(prompts["result"]["prompts"], json!([]));
    let hidden = json!({"name": "media__simple_prompt"});
    let refused = reply(&base, "", OTHER, "prompts/get", hidden).await;
    assert_eq!(refused["error"]["code"], -32602, "{refused}");
}

#[tokio::test]
async fn decl_77_a_declaration_offers_its_servers_entries_only_with_offers_true() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port, "allow = [\"127.0.0.1/32\"]");
    let (addr, _) = serve_in_process(dir.path()).await;
    let base = format!("http://{addr}");
    let caps = capabilities(&base, "/agents/plain").await;
    assert!(
        caps.get("resources").is_none() && caps.get("prompts").is_none(),
        "{caps}"
    );
    let refused = reply(&base, "/agents/plain", CLAUDE, "resources/list", json!({})).await;
    assert_eq!(refused["error"]["code"], -32601, "{refused}");
    // The server's scheme (`test`) is not the declaration's name: its URIs get the name first.
    let list = rpc(&base, "/agents/rich", "resources/list", json!({})).await;
    assert_eq!(
        names(&list, "resources", "uri"),
        ["rich+test://static-text", "rich+test://static-binary"]
    );
    let got = rpc(
        &base,
        "/agents/rich",
        "prompts/get",
        json!({"name": "rich_simple_prompt"}),
    )
    .await;
    assert_eq!(
        got["messages"][0]["content"]["text"],
        "This is a simple prompt for testing."
    );
}

#[tokio::test]
async fn egress_37_a_server_the_guard_refuses_offers_nothing() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    // `allow` covers loopback, but the operator did not vouch for the tenant's connection
    // (EGRESS-38): the guard refuses it, so the boot — like `airlock check` — names it and how
    // to vouch for it, and nothing of the server is ever listed (OPS-70).
    let dir = deployment(port, "allow = [\"127.0.0.1/32\"]");
    let toml = std::fs::read_to_string(dir.path().join("airlock.toml")).unwrap();
    let unvouched = toml.replace("use_egress_allow = true\n", "");
    std::fs::write(dir.path().join("airlock.toml"), unvouched).unwrap();
    let refused = airlock::boot::boot(dir.path())
        .await
        .err()
        .expect("refused");
    let said = refused.to_string();
    assert!(
        said.contains("connections.fixture.base_url") && said.contains("use_egress_allow"),
        "{said}"
    );
}

/// POLICY-52: a read a freeze covers is refused — recorded `denied` by the freeze, nothing sent.
#[tokio::test]
async fn a_read_a_freeze_covers_is_refused_and_recorded_denied() {
    let Some((_upstream, port)) = sdk_fixture().await else {
        return;
    };
    let dir = deployment(port, "allow = [\"127.0.0.1/32\"]");
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let base = format!("http://{addr}");
    let claude = airlock_ledger::FreezeTarget::Principal("claude".into());
    gateway
        .freezes()
        .freeze(claude, "token leaked", "ops")
        .await
        .unwrap();
    let uri = json!({"uri": "media+test://static-text"});
    let refused = reply(&base, "", CLAUDE, "resources/read", uri).await;
    let text = refused.to_string();
    assert!(
        text.contains("principal `claude` is frozen by ops (token leaked)"),
        "{refused}"
    );
    let first = rows(dir.path(), "resources/read").await;
    assert_eq!(first.len(), 1, "{first:?}");
    assert_eq!(
        (first[0].1.as_str(), first[0].2.as_str()),
        ("claude", "denied")
    );
    // The connection its server is reached through covers it too.
    let freezes = gateway.freezes();
    let claude = airlock_ledger::FreezeTarget::Principal("claude".into());
    freezes.unfreeze(claude, "ops").await.unwrap();
    let media = airlock_ledger::FreezeTarget::Connection("media".into());
    freezes
        .freeze(media, "upstream breach", "ops")
        .await
        .unwrap();
    let uri = json!({"uri": "media+test://static-text"});
    let refused = reply(&base, "", CLAUDE, "resources/read", uri).await;
    assert!(
        refused
            .to_string()
            .contains("connection `media` is frozen by ops"),
        "{refused}"
    );
    let both = rows(dir.path(), "resources/read").await;
    assert_eq!(
        both.iter().filter(|r| r.2 == "denied").count(),
        2,
        "{both:?}"
    );
}
