//! A run belongs to the principal that started it (docs/rules.md AGENT-67, AGENT-70): another
//! principal — even one granted the run's agent — reads and cancels it as a run nobody
//! recorded (the same 404, the same body), while the run's own caller and an admin reach it.

use std::net::SocketAddr;

use airlock_testkit::{FakeCall, FakeModel, ModelReply};
use serde_json::{Value, json};

use super::{
    CALLER, CAROL_GATEWAY, EVERY_SCOPE, GATEWAY_ONLY, helper_deployment, read_run, start_run,
};
use crate::serve::ADMIN;
use crate::support::{http, serve_in_process};

/// `POST /v1/runs/{id}/cancel` with `token`.
async fn cancel_run(addr: SocketAddr, id: &str, token: &str) -> (u16, Value) {
    let path = format!("/v1/runs/{id}/cancel");
    let (status, body, _) = http(addr, "POST", &path, Some(token), None).await;
    (status, body)
}

#[tokio::test]
async fn another_principal_gets_404_for_a_run_as_if_it_did_not_exist() {
    // `carol` starts two runs that park (each `fetch` waits for a person); `root` (a token with
    // every scope, so granted the agent) and `gus` (another agent's grant) try to reach the
    // first; an admin cancels it, and `carol` the second.
    let fetch = || FakeCall::new("call_1", "fetch", &json!({"url": "http://127.0.0.1:9/"}));
    let model = FakeModel::openai(vec![
        ModelReply::calls(vec![fetch()]),
        ModelReply::calls(vec![fetch()]),
    ])
    .await;
    let dir = helper_deployment(&model.endpoint(), "http://127.0.0.1:9");
    let (addr, _) = serve_in_process(dir.path()).await;
    let parked = parked_run(addr).await;
    let run = parked["run_id"].as_str().unwrap();

    // What a run nobody recorded answers, with this run's id in place of the other's.
    let nobody = airlock_ledger::RunId::new().to_string();
    let (status, unknown) = read_run(addr, &nobody, EVERY_SCOPE).await;
    assert_eq!(status, 404, "{unknown}");
    let unknown: Value = serde_json::from_str(&unknown.to_string().replace(&nobody, run)).unwrap();
    assert_eq!(cancel_run(addr, &nobody, EVERY_SCOPE).await.0, 404);

    for other in [EVERY_SCOPE, GATEWAY_ONLY] {
        assert_eq!(read_run(addr, run, other).await, (404, unknown.clone()));
        assert_eq!(cancel_run(addr, run, other).await, (404, unknown.clone()));
    }
    // Nothing was cancelled: the run still waits, for its caller and an admin alike.
    let (status, read) = read_run(addr, run, CALLER).await;
    assert_eq!((status, &read["status"]), (200, &json!("parked")), "{read}");
    assert_eq!(read["proposals"], parked["proposals"]);
    let (status, read) = read_run(addr, run, ADMIN).await;
    assert_eq!((status, &read["status"]), (200, &json!("parked")), "{read}");

    let (status, cancelled) = cancel_run(addr, run, ADMIN).await;
    assert_eq!(
        (status, &cancelled["status"]),
        (200, &json!("cancelled")),
        "{cancelled}"
    );
    let second = parked_run(addr).await;
    let (status, cancelled) = cancel_run(addr, second["run_id"].as_str().unwrap(), CALLER).await;
    assert_eq!(
        (status, &cancelled["status"]),
        (200, &json!("cancelled")),
        "{cancelled}"
    );
}

/// A run of `carol`'s that parked.
async fn parked_run(addr: SocketAddr) -> Value {
    let (status, parked) = start_run(addr, "helper", CALLER, json!({"input": "fetch it"})).await;
    assert_eq!(
        (status, &parked["status"]),
        (200, &json!("parked")),
        "{parked}"
    );
    parked
}

/// AGENT-40 with AGENT-67: the run's own principal reaches it only through a token still granted
/// the run's agent — `carol`'s gateway-only token is refused (403: the run is hers, so nothing
/// is revealed), her agent token reads it.
#[tokio::test]
async fn the_owner_reaches_a_run_only_through_a_token_granted_its_agent() {
    let fetch = || FakeCall::new("call_1", "fetch", &json!({"url": "http://127.0.0.1:9/"}));
    let model = FakeModel::openai(vec![ModelReply::calls(vec![fetch()])]).await;
    let dir = helper_deployment(&model.endpoint(), "http://127.0.0.1:9");
    let (addr, _) = serve_in_process(dir.path()).await;
    let parked = parked_run(addr).await;
    let run = parked["run_id"].as_str().unwrap();
    let (status, refused) = read_run(addr, run, CAROL_GATEWAY).await;
    assert_eq!(status, 403, "{refused}");
    let (status, _) = cancel_run(addr, run, CAROL_GATEWAY).await;
    assert_eq!(status, 403);
    let (status, read) = read_run(addr, run, CALLER).await;
    assert_eq!((status, &read["status"]), (200, &json!("parked")), "{read}");
}
