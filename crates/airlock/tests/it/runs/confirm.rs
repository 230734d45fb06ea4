//! The confirmation gate end to end on a real `airlock serve` (docs/rules.md POLICY-30..
//! POLICY-34): a catalog action declared `confirm: true`, `[confirm] yes_words` set to words of
//! the operator's own, the run API, a fake OpenAI-compatible provider and a loopback tenant API
//! that counts what reaches it.

use std::net::SocketAddr;

use airlock_testkit::{Cue, FakeCall, FakeModel, ModelReply, RawServer};
use serde_json::{Value, json};

use super::CALLER;
use crate::serve::ADMIN;
use crate::support::{Server, deployment_with, http};

/// A deployment whose agent `desk` may call `tickets_close` (a POST declared `confirm: true`)
/// of the catalog integration `tickets` at `api`; the yes-words are French.
fn desk_deployment(model: &str, api: u16) -> tempfile::TempDir {
    let toml = "listen = \"127.0.0.1:0\"\n\
         [[mcp.tokens]]\ncredential = \"airlock.caller\"\nprincipal = \"carol\"\nscopes = [\"agent:desk\"]\n\
         [[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\nallow_integrations = [\"tickets\"]\n\
         [credentials]\nfile = \"creds.yml\"\n\
         [confirm]\nyes_words = [\"oui\", \"vas-y\"]\n";
    let creds = format!(
        "airlock:\n  caller: {CALLER}\n  admin: {ADMIN}\nopenai:\n  key: {}\ntickets:\n  token: tickets-token-1\n",
        FakeModel::KEY
    );
    let dir = deployment_with(toml, &creds);
    let catalog = dir.path().join("catalog/tickets");
    std::fs::create_dir_all(&catalog).unwrap();
    let integration = format!(
        "base_url: http://127.0.0.1:{api}/api\n\
         auth: {{ scheme: bearer, credential: tickets.token }}\n\
         actions:\n\
         \x20 - name: close\n    description: Close a ticket.\n\
         \x20   parameters:\n      id: {{ type: string, required: true }}\n\
         \x20   request: {{ method: POST, path: \"/tickets/{{id}}/close\" }}\n\
         \x20   confirm: true\n"
    );
    std::fs::write(catalog.join("integration.yaml"), integration).unwrap();
    let agents = dir.path().join("agents");
    std::fs::create_dir(&agents).unwrap();
    let manifest = format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: desk\n\
         spec:\n  model:\n    provider: openai\n    model: gpt-test\n    endpoint: {model}\n    credential: openai.key\n\
         \x20 prompts:\n    system: Help.\n  tools:\n\
         \x20   - type: integration\n      integration: tickets\n      actions: [close]\n"
    );
    std::fs::write(agents.join("desk.yml"), manifest).unwrap();
    dir
}

/// The model's turn closing ticket `id`.
fn close(id: &str) -> ModelReply {
    ModelReply::calls(vec![FakeCall::new(
        "call_1",
        "tickets_close",
        &json!({"id": id}),
    )])
}

/// One message of the person in `session` (a new session when `None`); the run's report.
async fn say(addr: SocketAddr, session: Option<&str>, input: &str) -> Value {
    let mut body = json!({"input": input});
    if let Some(session) = session {
        body["session_id"] = json!(session);
    }
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
    run
}

#[tokio::test]
async fn the_persons_configured_yes_lets_the_held_call_run_once_and_another_message_cancels() {
    let api = RawServer::start(None, Cue::Status(200)).await;
    let model = FakeModel::openai(vec![
        // "close ticket 7": held, the person asked.
        close("7"),
        ModelReply::text(&["Please confirm."]),
        // "  OUI ": consent; the model calls it again and it runs.
        close("7"),
        ModelReply::text(&["Closed."]),
        // "close ticket 8": held.
        close("8"),
        ModelReply::text(&["Please confirm."]),
        // "yes" is not one of this deployment's words: it cancels.
        ModelReply::text(&["Alright, I will not."]),
        // "oui" with nothing held consents to nothing: the call is held anew.
        close("8"),
        ModelReply::text(&["Please confirm again."]),
    ])
    .await;
    let dir = desk_deployment(&model.endpoint(), api.port);
    let server = Server::start(dir.path(), &[]);
    let addr: SocketAddr = server.addr.parse().unwrap();

    let held = say(addr, None, "close ticket 7").await;
    let session = held["session_id"].as_str().unwrap().to_owned();
    let notice = &held["confirmation"];
    assert_eq!(notice["tool"], "tickets_close", "{held}");
    assert_eq!(notice["arguments"], json!({"id": "7"}), "{held}");
    assert_eq!(notice["yes_words"], json!(["oui", "vas-y"]), "{held}");
    assert!(api.seen().is_empty(), "held, not run: {:?}", api.seen());

    let consented = say(addr, Some(&session), "  OUI ").await;
    assert_eq!(consented["answer"], "Closed.", "{consented}");
    assert!(consented.get("confirmation").is_none(), "{consented}");
    assert_eq!(
        api.seen(),
        ["/api/tickets/7/close"],
        "ran once, at the upstream"
    );

    let held = say(addr, Some(&session), "close ticket 8").await;
    assert_eq!(
        held["confirmation"]["arguments"],
        json!({"id": "8"}),
        "{held}"
    );
    let cancelled = say(addr, Some(&session), "yes").await;
    assert!(cancelled.get("confirmation").is_none(), "{cancelled}");
    let again = say(addr, Some(&session), "oui").await;
    assert_eq!(
        again["confirmation"]["arguments"],
        json!({"id": "8"}),
        "{again}"
    );
    assert_eq!(api.seen(), ["/api/tickets/7/close"], "nothing else ran");
    assert_eq!(model.requests(), 9);
}
