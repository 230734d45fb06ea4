//! States in words on the wire (docs/rules.md POLICY-15, DECIDE-4, DECIDE-8, MCP-10, MCP-13,
//! MCP-14): an expired call reads `expired` through the await tool, both task shapes, the API,
//! the CLI and the metrics; a call in doubt can be abandoned with a reason over the API (both
//! routes) and the CLI, never runs, and reads back `abandoned` everywhere.

use std::time::Duration;

use airlock_ledger::{InvocationId, InvocationState, NewInvocation};
use airlock_runtime::Gateway;
use airlock_spec::ScopeId;
use serde_json::{Value, json};

use crate::mcp::{ADMIN, CLAUDE, call, deployment, rpc};
use crate::support::{call_context, cli, metrics, serve_in_process};
use crate::text;

/// Past every approval TTL.
const LATER: Duration = Duration::from_secs(30 * 24 * 3600);

async fn admin(
    base: &str,
    method: reqwest::Method,
    path: &str,
    body: Option<Value>,
) -> (u16, Value) {
    let mut request = reqwest::Client::new()
        .request(method, format!("{base}{path}"))
        .bearer_auth(ADMIN);
    if let Some(body) = body {
        request = request.json(&body);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A call of `fetch` by `claude` through the MCP endpoint that the sweeper found running after
/// its lease: in doubt.
pub(crate) async fn in_doubt(gateway: &Gateway, call_id: &str) -> InvocationId {
    let session = airlock_ledger::SessionId::new();
    gateway
        .open_session_as(session, "mcp", Some("claude".into()), &ScopeId::Gateway)
        .await
        .unwrap();
    let mut call = NewInvocation::new(
        session,
        call_id,
        "fetch",
        json!({"url": "http://127.0.0.1:9/"}),
        "d",
    );
    call.principal = Some("claude".into());
    let store = gateway.store();
    let row = store
        .record_and_claim(call, "w", Duration::from_secs(30))
        .await
        .unwrap()
        .invocation;
    let later = time::OffsetDateTime::now_utc() + Duration::from_secs(3600);
    assert!(store.sweep(later).await.unwrap().in_doubt.contains(&row.id));
    row.id
}

#[tokio::test]
async fn an_expired_call_reads_expired_on_every_surface() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let base = format!("http://127.0.0.1:{}", addr.port());
    let fetch = json!({"name": "fetch", "arguments": {"url": "http://127.0.0.1:9/"}});
    let parked = call(&base, CLAUDE, "fetch", fetch["arguments"].clone()).await;
    let id = parked["structuredContent"]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let mut augmented = fetch.clone();
    augmented["task"] = json!({"ttl": 60000});
    let (_, created) = rpc(
        &base,
        Some(CLAUDE),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": augmented}),
    )
    .await;
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap()
        .to_owned();
    let ctx = call_context(&gateway, ScopeId::Gateway, Some("bob"), "e1").await;
    let direct = gateway
        .call(&ctx, "fetch", fetch["arguments"].clone())
        .await
        .unwrap();
    let swept = gateway
        .store()
        .sweep(time::OffsetDateTime::now_utc() + LATER)
        .await
        .unwrap();
    assert_eq!(swept.expired.len(), 3, "{swept:?}");

    // The await tool: status `expired`; the refusal keeps its documented shape.
    let awaited = call(
        &base,
        CLAUDE,
        "airlock_await_decision",
        json!({"invocation_id": id}),
    )
    .await;
    let settled = &awaited["structuredContent"];
    assert_eq!(settled["status"], "expired", "{awaited}");
    assert_eq!(settled["decided_by"], Value::Null, "{awaited}");
    assert_eq!(
        settled["result"],
        json!({"denied": "approval expired"}),
        "{awaited}"
    );
    assert_eq!(awaited["isError"], true, "{awaited}");

    // 2025-11-25 tasks: `failed`, saying it expired (not that someone denied it).
    let request = |method: &str| json!({"jsonrpc": "2.0", "id": 2, "method": method, "params": {"taskId": task}});
    let (_, got) = rpc(&base, Some(CLAUDE), request("tasks/get")).await;
    assert_eq!(got["result"]["status"], "failed", "{got}");
    let message = got["result"]["statusMessage"].as_str().unwrap_or_default();
    assert!(message.starts_with("expired"), "{got}");
    let (_, result) = rpc(&base, Some(CLAUDE), request("tasks/result")).await;
    assert_eq!(
        result["result"]["structuredContent"]["status"], "expired",
        "{result}"
    );

    // The API and the CLI name the state; the metrics count a retried call id as expired.
    let (status, row) = admin(
        &base,
        reqwest::Method::GET,
        &format!("/v1/invocations/{id}"),
        None,
    )
    .await;
    assert_eq!((status, &row["state"]), (200, &json!("expired")), "{row}");
    assert_eq!(
        row["result"],
        json!({"denied": "approval expired"}),
        "{row}"
    );
    let out = cli(dir.path(), &["invocations", "show", &id]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("state       expired"),
        "{}",
        text(&out)
    );
    let again = gateway
        .call(&ctx, "fetch", fetch["arguments"].clone())
        .await
        .unwrap();
    assert_eq!(again.invocation().id, direct.invocation().id);
    assert_eq!(again.invocation().state, InvocationState::Expired);
    let metrics = metrics(&base, ADMIN).await;
    assert!(
        metrics
            .lines()
            .any(|l| l.starts_with("airlock_tool_calls_total{")
                && l.contains("tool=\"fetch\"")
                && l.contains("outcome=\"expired\"")),
        "{metrics}"
    );
}

#[tokio::test]
async fn an_abandoned_call_in_doubt_never_runs_and_says_who_gave_it_up() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let base = format!("http://127.0.0.1:{}", addr.port());
    let id = in_doubt(&gateway, "a1").await;
    let resolve = format!("/v1/invocations/{id}/resolve");
    let post = |path: String, body: Value| {
        let base = base.clone();
        async move { admin(&base, reqwest::Method::POST, &path, Some(body)).await }
    };

    // No reason: refused as a bad body, and nothing changes.
    let (status, reply) = post(
        resolve.clone(),
        json!({"outcome": "abandoned", "reason": " "}),
    )
    .await;
    assert_eq!(
        (status, &reply["error"]),
        (422, &json!("bad_body")),
        "{reply}"
    );
    assert_eq!(
        gateway.store().get(id).await.unwrap().state,
        InvocationState::InDoubt
    );

    let reason = "the vendor has no record of it; refunded by hand";
    let (status, reply) = post(
        resolve.clone(),
        json!({"outcome": "abandoned", "reason": reason}),
    )
    .await;
    assert_eq!(
        (status, &reply["state"]),
        (200, &json!("abandoned")),
        "{reply}"
    );
    assert_eq!(reply["resolution"]["outcome"], "abandoned", "{reply}");
    assert_eq!(reply["resolution"]["by"], "alice", "{reply}");
    assert_eq!(reply["resolution"]["note"], reason, "{reply}");
    assert_eq!(reply["result"], json!({"abandoned": reason}), "{reply}");

    // A second decision is refused naming the first; nothing ever claims the row.
    let (status, reply) = post(resolve, json!({"outcome": "did_not_run", "note": "retry"})).await;
    assert_eq!(
        (status, &reply["error"]),
        (409, &json!("already_decided")),
        "{reply}"
    );
    assert!(
        reply["message"]
            .as_str()
            .unwrap()
            .contains("abandoned by alice"),
        "{reply}"
    );
    let ran = gateway
        .continue_approved(id)
        .await
        .unwrap()
        .into_invocation();
    assert_eq!((ran.state.as_str(), ran.attempts), ("abandoned", 1));

    // The caller's await answer names the operator and the reason.
    let awaited = call(
        &base,
        CLAUDE,
        "airlock_await_decision",
        json!({"invocation_id": id.to_string()}),
    )
    .await;
    let settled = &awaited["structuredContent"];
    assert_eq!(settled["status"], "abandoned", "{awaited}");
    assert_eq!(settled["decided_by"], "alice", "{awaited}");
    assert_eq!(settled["result"], json!({"abandoned": reason}), "{awaited}");

    // The one-route form takes `outcome` as well as `ran`, never both.
    let other = in_doubt(&gateway, "a2").await;
    let decision = format!("/v1/approvals/{other}/decision");
    let both = json!({"decision": "resolve", "ran": true, "outcome": "ran", "note": "n"});
    assert_eq!(post(decision.clone(), both).await.0, 422);
    let given_up =
        json!({"decision": "resolve", "outcome": "abandoned", "note": "no trace upstream"});
    let (status, reply) = post(decision, given_up).await;
    assert_eq!(
        (status, &reply["state"]),
        (200, &json!("abandoned")),
        "{reply}"
    );
    assert_eq!(gateway.store().verify().await.unwrap().first_break, None);
}

#[tokio::test]
async fn the_cli_abandons_a_call_in_doubt_with_a_reason() {
    let dir = deployment();
    let d = dir.path();
    let gateway = airlock::boot::boot(d).await.unwrap().gateway;
    let id = in_doubt(&gateway, "c1").await.to_string();

    let out = cli(d, &["resolve", &id, "--outcome", "abandoned", "--note", ""]);
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("needs a reason"), "{}", text(&out));
    let out = cli(
        d,
        &[
            "resolve",
            &id,
            "--outcome",
            "abandoned",
            "--note",
            "no trace upstream",
        ],
    );
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with(&format!("abandoned {id}")),
        "{}",
        text(&out)
    );
    let out = cli(d, &["invocations", "show", &id]);
    let shown = String::from_utf8(out.stdout).unwrap();
    assert!(shown.contains("state       abandoned"), "{shown}");
    assert!(shown.contains("resolution  abandoned by alice"), "{shown}");
    assert!(
        shown.contains(r#"{"abandoned":"no trace upstream"}"#),
        "{shown}"
    );
    let out = cli(
        d,
        &[
            "resolve",
            &id,
            "--outcome",
            "did_not_run",
            "--note",
            "retry",
        ],
    );
    assert!(!out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("abandoned by alice"), "{}", text(&out));
}
