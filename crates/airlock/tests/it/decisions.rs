//! The decisions API's routes per decision (`/v1/invocations/{id}/approve|deny|answer|resolve`)
//! with their precise statuses, and the paged, filtered `GET /v1/approvals`.

use std::time::Duration;

use airlock_ledger::InvocationState;
use airlock_spec::ScopeId;
use serde_json::{Value, json};

use crate::serve::{ADMIN, deployment, post};
use crate::support::{http, park, serve_in_process};

const HELPER: &str = "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: helper\n  description: Reads pages.\nspec:\n  model:\n    provider: anthropic\n    model: claude-sonnet-4-5\n    credential: anthropic.api_key\n  prompts:\n    system: Read.\n  tools:\n    - type: builtin\n      name: fetch\n      approval: always\n";

#[tokio::test]
async fn decision_routes_answer_with_precise_statuses() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    // Nothing listens on port 9: a fetch that runs fails fast, which is all this test needs.
    let url = json!({"url": "http://127.0.0.1:9/"});
    let fetch = park(&gateway, ScopeId::Gateway, "bob", "fetch", url.clone()).await;
    let question = park(
        &gateway,
        ScopeId::Gateway,
        "bob",
        "ask_human",
        json!({"question": "Which warehouse?"}),
    )
    .await;
    let at = |id: &airlock_ledger::InvocationId, verb: &str| format!("/v1/invocations/{id}/{verb}");

    // 422: a body that is not the decision's shape (a self-chosen decider included).
    for (verb, body) in [
        ("approve", json!({"by": "mallory"})),
        ("deny", json!({})),
        ("deny", json!({"reason": 5})),
        ("answer", json!({"answer": "x"})),
        ("resolve", json!({"outcome": "maybe", "note": "n"})),
        ("resolve", json!({"outcome": "ran"})),
    ] {
        let (status, reply) = post(addr, &at(&fetch.id, verb), Some(body.clone())).await;
        assert_eq!(
            (status, &reply["error"]),
            (422, &json!("bad_body")),
            "{verb} {body}: {reply}"
        );
    }
    // 400: a malformed id; 404: an id nobody recorded.
    assert_eq!(
        post(addr, "/v1/invocations/nope/approve", None).await.0,
        400
    );
    let unknown = airlock_ledger::InvocationId::new();
    let (status, reply) = post(addr, &at(&unknown, "approve"), None).await;
    assert_eq!(
        (status, &reply["error"]),
        (404, &json!("not_found")),
        "{reply}"
    );

    // 200 with an empty body, the decider being the admin; then 409 naming who.
    let (status, reply) = post(addr, &at(&fetch.id, "approve"), None).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["decision"]["by"], "alice");
    let (status, reply) = post(
        addr,
        &at(&fetch.id, "deny"),
        Some(json!({"reason": "late"})),
    )
    .await;
    assert_eq!(
        (status, &reply["error"]),
        (409, &json!("already_decided")),
        "{reply}"
    );
    assert!(
        reply["message"].as_str().unwrap().contains("by alice"),
        "{reply}"
    );

    // A question: answering it with a wrong route is a conflict, answering it settles it.
    let (status, _) = post(
        addr,
        &at(&question.id, "resolve"),
        Some(json!({"outcome": "ran", "note": "n"})),
    )
    .await;
    assert_eq!(status, 409);
    let (status, reply) = post(
        addr,
        &at(&question.id, "answer"),
        Some(json!({"text": "Rosario"})),
    )
    .await;
    assert_eq!(
        (status, &reply["result"]["answer"]),
        (200, &json!("Rosario")),
        "{reply}"
    );

    // deny on a fresh call.
    let other = park(
        &gateway,
        ScopeId::Gateway,
        "carol",
        "fetch",
        json!({"url": "http://127.0.0.1:9/x"}),
    )
    .await;
    let (status, reply) = post(
        addr,
        &at(&other.id, "deny"),
        Some(json!({"reason": "not today"})),
    )
    .await;
    assert_eq!(
        (status, &reply["state"]),
        (200, &json!("denied")),
        "{reply}"
    );
    assert_eq!(reply["decision"]["reason"], "not today");
}

/// Resolving a call in doubt over the API: the reply names who settled it, and how.
#[tokio::test]
async fn resolving_a_call_in_doubt_names_the_operator() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let at = |id: &airlock_ledger::InvocationId, verb: &str| format!("/v1/invocations/{id}/{verb}");
    let store = gateway.store();
    let ctx = crate::support::call_context(&gateway, ScopeId::Gateway, Some("dan"), "d1").await;
    let call = airlock_ledger::NewInvocation::new(
        ctx.session,
        "d1",
        "fetch",
        json!({"url": "http://127.0.0.1:9/"}),
        "d",
    );
    let row = store
        .record_and_claim(call, "w", Duration::from_secs(30))
        .await
        .unwrap()
        .invocation;
    let later = time::OffsetDateTime::now_utc() + Duration::from_secs(3600);
    assert_eq!(store.sweep(later).await.unwrap().in_doubt, vec![row.id]);
    let (status, reply) = post(
        addr,
        &at(&row.id, "resolve"),
        Some(json!({"outcome": "ran", "note": "seen in the logs"})),
    )
    .await;
    assert_eq!(
        (status, &reply["state"]),
        (200, &json!("resolved")),
        "{reply}"
    );
    assert_eq!(reply["resolution"]["by"], "alice", "{reply}");
    assert_eq!(reply["resolution"]["outcome"], "ran", "{reply}");
    assert_eq!(reply["resolution"]["note"], "seen in the logs", "{reply}");
}

#[tokio::test]
async fn an_expired_call_is_gone() {
    let dir = deployment();
    let toml = std::fs::read_to_string(dir.path().join("airlock.toml")).unwrap();
    std::fs::write(
        dir.path().join("airlock.toml"),
        format!("approval_ttl = \"300ms\"\n{toml}"),
    )
    .unwrap();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let row = park(
        &gateway,
        ScopeId::Gateway,
        "bob",
        "fetch",
        json!({"url": "http://127.0.0.1:9/"}),
    )
    .await;
    // Woken when the read past the deadline expires the row.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let now = gateway
        .store()
        .wait_for_change(row.id, Some(row.version), deadline)
        .await
        .unwrap();
    assert_eq!(now.state, InvocationState::Expired);
    let (status, reply) = post(addr, &format!("/v1/invocations/{}/approve", row.id), None).await;
    assert_eq!(
        (status, &reply["error"]),
        (410, &json!("expired")),
        "{reply}"
    );
}

#[tokio::test]
async fn approvals_are_paged_and_filtered_by_agent() {
    let dir = deployment();
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    std::fs::write(dir.path().join("agents/helper.yml"), HELPER).unwrap();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let url = json!({"url": format!("http://127.0.0.1:9/{n}")});
        ids.push(
            park(&gateway, ScopeId::Gateway, "bob", "fetch", url)
                .await
                .id
                .to_string(),
        );
    }
    let helper = ScopeId::Agent("helper".into());
    let agent_row = park(
        &gateway,
        helper,
        "bob",
        "fetch",
        json!({"url": "http://127.0.0.1:9/a"}),
    )
    .await;
    let get = |path: String| async move { http(addr, "GET", &path, Some(ADMIN), None).await };
    let listed = |v: &Value| -> Vec<String> {
        v["approvals"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_str().unwrap().to_owned())
            .collect()
    };

    let (status, page, _) = get("/v1/approvals?limit=2".into()).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(listed(&page), ids[..2]);
    assert_eq!(page["next_offset"], 2);
    let (_, page, _) = get("/v1/approvals?limit=2&offset=2".into()).await;
    assert_eq!(listed(&page), [ids[2].clone(), agent_row.id.to_string()]);
    assert_eq!(page["next_offset"], Value::Null);

    let (_, page, _) = get("/v1/approvals?agent=helper".into()).await;
    assert_eq!(listed(&page), [agent_row.id.to_string()]);
    let (_, page, _) = get("/v1/approvals?agent=nobody".into()).await;
    assert!(listed(&page).is_empty());
    let (_, page, _) = get("/v1/approvals?principal=bob&limit=1&offset=1".into()).await;
    assert_eq!(listed(&page), [ids[1].clone()]);

    assert_eq!(get("/v1/approvals?limit=many".into()).await.0, 400);
    assert_eq!(get("/v1/approvals?colour=red".into()).await.0, 400);
}

/// DECIDE-19: `POST /v1/approvals/decisions` decides several calls in one commit or none:
/// 400 for a malformed id, 422 for a denial without a reason, 409 naming the call decided
/// already (the others untouched), 200 with every row decided.
#[tokio::test]
async fn a_batch_decision_decides_every_call_or_none() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let mut ids = Vec::new();
    for n in 0..3 {
        let url = json!({"url": format!("http://127.0.0.1:9/{n}")});
        ids.push(
            park(&gateway, ScopeId::Gateway, "bob", "fetch", url)
                .await
                .id
                .to_string(),
        );
    }
    let batch = |body: Value| async move {
        let (status, answer, _) = http(
            addr,
            "POST",
            "/v1/approvals/decisions",
            Some(ADMIN),
            Some(body),
        )
        .await;
        (status, answer)
    };
    let (status, _) = batch(json!({"ids": ["nope"], "decision": "approve"})).await;
    assert_eq!(status, 400);
    let (status, answer) = batch(json!({"ids": ids, "decision": "deny"})).await;
    assert_eq!(status, 422, "{answer}");
    let (status, _) = batch(json!({"ids": ids, "decision": "approve", "reason": "x"})).await;
    assert_eq!(status, 422);
    let single = format!("/v1/invocations/{}/deny", ids[1]);
    let (status, _, _) = http(
        addr,
        "POST",
        &single,
        Some(ADMIN),
        Some(json!({"reason": "no"})),
    )
    .await;
    assert_eq!(status, 200);
    let (status, answer) = batch(json!({"ids": ids, "decision": "approve"})).await;
    assert_eq!(status, 409, "{answer}");
    assert!(
        answer.to_string().contains(&ids[1]),
        "names the decided call: {answer}"
    );
    for id in [&ids[0], &ids[2]] {
        let row = gateway.store().get(id.parse().unwrap()).await.unwrap();
        assert_eq!(row.state, InvocationState::AwaitingApproval, "untouched");
    }
    let (status, answer) = batch(json!({"ids": [ids[0], ids[2]], "decision": "approve"})).await;
    assert_eq!(status, 200, "{answer}");
    let decided = answer["decided"].as_array().unwrap();
    assert_eq!(decided.len(), 2);
    assert!(
        decided.iter().all(|r| r["decision"]["by"] == "alice"),
        "{answer}"
    );
}

/// POLICY-62: an approval given with a grant lets the same principal's identical calls run
/// without asking, as many times as granted, then they park again; a grant past `max_grant`,
/// or unbounded, is refused (422) and decides nothing.
#[tokio::test]
async fn an_approval_with_a_grant_lets_identical_calls_through_its_uses() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let url = json!({"url": "http://127.0.0.1:9/report"});
    let first = park(&gateway, ScopeId::Gateway, "bob", "fetch", url.clone()).await;
    let approve = |body: Value| {
        let path = format!("/v1/invocations/{}/approve", first.id);
        async move { http(addr, "POST", &path, Some(ADMIN), Some(body)).await }
    };
    for (body, why) in [
        (json!({"grant": {}}), "a grant is bounded"),
        (json!({"grant": {"uses": 0}}), "at least one later call"),
        (
            json!({"grant": {"uses": 2, "for": "48h"}}),
            "at most 86400s",
        ),
        (
            json!({"grant": {"uses": 2, "for": "soon"}}),
            "not a duration",
        ),
        (
            json!({"grant": {"uses": 2, "reach": "everything"}}),
            "unknown variant",
        ),
    ] {
        let (status, answer, _) = approve(body).await;
        assert_eq!(status, 422, "{why}: {answer}");
        assert!(answer.to_string().contains(why), "{why}: {answer}");
    }
    let row = gateway.store().get(first.id).await.unwrap();
    assert_eq!(
        row.state,
        InvocationState::AwaitingApproval,
        "nothing decided"
    );
    let (status, answer, _) = approve(json!({"grant": {"uses": 2, "for": "30m"}})).await;
    assert_eq!(
        (status, answer["state"].as_str()),
        (200, Some("approved")),
        "{answer}"
    );
    let mut states = Vec::new();
    for n in 0..3 {
        let ctx = crate::support::call_context(
            &gateway,
            ScopeId::Gateway,
            Some("bob"),
            &format!("again-{n}"),
        )
        .await;
        let outcome = gateway.call(&ctx, "fetch", url.clone()).await.unwrap();
        states.push(outcome.invocation().state);
    }
    assert!(
        !states[0].is_parked() && !states[1].is_parked(),
        "{states:?}"
    );
    assert_eq!(states[2], InvocationState::AwaitingApproval, "{states:?}");
}
