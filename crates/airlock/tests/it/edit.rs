//! Edit-on-approve (docs/rules.md DECIDE-20, DECIDE-21) over HTTP: the API's approve routes and
//! the inbox card's form take edited arguments, which are checked before anything is decided,
//! recorded beside the proposed ones, and the ones the call runs with at a loopback upstream.

use std::time::Duration;

use airlock_ledger::{Invocation, InvocationState};
use airlock_runtime::Gateway;
use airlock_spec::ScopeId;
use serde_json::{Value, json};

use crate::inbox::{ALICE, start};
use crate::serve::{ADMIN, deployment, post};
use crate::support::inbox_client::InboxClient;
use crate::support::{http, json_once, park, serve_in_process};

/// The row once it left `approved` and `running`: the approval ran in the background.
async fn settled(gateway: &Gateway, row: &Invocation) -> Invocation {
    let mut current = gateway.store().get(row.id).await.unwrap();
    for _ in 0..20 {
        if !matches!(
            current.state,
            InvocationState::Approved | InvocationState::Running
        ) {
            break;
        }
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        current = gateway
            .store()
            .wait_for_change(row.id, Some(current.version), deadline)
            .await
            .unwrap();
    }
    current
}

/// The request head the upstream was sent; fails when nothing reached it in time.
async fn asked(request: std::thread::JoinHandle<String>) -> String {
    let head = tokio::task::spawn_blocking(move || request.join().unwrap());
    tokio::time::timeout(Duration::from_secs(20), head)
        .await
        .expect("the edited call never reached the upstream")
        .unwrap()
}

/// A gated `fetch` of a URL nothing answers: only an edit can make it reach the upstream.
async fn nowhere(gateway: &Gateway, n: u32) -> Invocation {
    let url = format!("http://127.0.0.1:9/proposed/{n}");
    park(
        gateway,
        ScopeId::Gateway,
        "bob",
        "fetch",
        json!({ "url": url }),
    )
    .await
}

#[tokio::test]
async fn an_edited_approval_runs_with_the_edited_arguments_and_shows_both() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let row = nowhere(&gateway, 1).await;
    let approve = format!("/v1/invocations/{}/approve", row.id);

    // DECIDE-21: arguments failing the tool's schema are a 422 naming the field; nothing decided.
    for (path, body) in [
        (approve.clone(), json!({"arguments": {"url": 5}})),
        (
            format!("/v1/approvals/{}/decision", row.id),
            json!({"decision": "approve", "arguments": {"url": 5}}),
        ),
    ] {
        let (status, reply) = post(addr, &path, Some(body)).await;
        assert_eq!(
            (status, &reply["error"]),
            (422, &json!("bad_arguments")),
            "{reply}"
        );
        assert!(
            reply["message"].as_str().unwrap().contains("/url"),
            "{reply}"
        );
    }
    let untouched = gateway.store().get(row.id).await.unwrap();
    assert_eq!(untouched.state, InvocationState::AwaitingApproval);
    assert_eq!(untouched.decision, None);

    let (port, request) = json_once(r#"{"ok":true}"#);
    let edited = json!({"url": format!("http://127.0.0.1:{port}/edited")});
    let (status, reply) = post(addr, &approve, Some(json!({ "arguments": edited }))).await;
    assert_eq!(status, 200, "{reply}");
    assert_eq!(reply["decision"]["decision"], "edited");
    let head = asked(request).await;
    assert!(head.starts_with("GET /edited "), "{head}");
    assert_eq!(
        settled(&gateway, &row).await.state,
        InvocationState::Succeeded
    );

    let (status, shown, _) = http(
        addr,
        "GET",
        &format!("/v1/invocations/{}", row.id),
        Some(ADMIN),
        None,
    )
    .await;
    assert_eq!(status, 200, "{shown}");
    assert_eq!(shown["arguments"], row.arguments);
    assert_eq!(shown["approved_arguments"], edited);
    assert_eq!(
        (&shown["decision"]["by"], &shown["decision"]["decision"]),
        (&json!("alice"), &json!("edited"))
    );

    // The decision route takes the same edit; a plain approval shows no approved arguments.
    let other = nowhere(&gateway, 2).await;
    let (port, request) = json_once(r#"{"ok":true}"#);
    let body = json!({"decision": "approve", "arguments": {"url": format!("http://127.0.0.1:{port}/two")}});
    let path = format!("/v1/approvals/{}/decision", other.id);
    let (status, reply) = post(addr, &path, Some(body)).await;
    assert_eq!(status, 200, "{reply}");
    let head = asked(request).await;
    assert!(head.starts_with("GET /two "), "{head}");
    let plain = nowhere(&gateway, 3).await;
    let (_, reply) = post(addr, &format!("/v1/invocations/{}/approve", plain.id), None).await;
    assert_eq!(reply.get("approved_arguments"), None::<&Value>, "{reply}");
}

/// INBOX: the card offers the proposed arguments in a form, escaped; text that is not JSON or
/// fails the schema is a flash message and decides nothing; valid JSON approves the edit, and
/// the card then shows both sets.
#[tokio::test]
async fn an_inbox_edit_is_checked_then_approved_and_the_card_shows_both() {
    let (base, gateway, _dir) = start().await;
    let hostile = "http://127.0.0.1:9/</textarea><script>window.pwned=1</script>\u{202E}";
    let row = park(
        &gateway,
        ScopeId::Gateway,
        "bob",
        "fetch",
        json!({ "url": hostile }),
    )
    .await;
    let card = format!("/inbox/invocations/{}", row.id);
    let mut alice = InboxClient::signed_in(&base, ALICE).await;
    let page = alice.get(&card).await;
    assert!(page.body.contains("Edit and approve"), "{}", page.body);
    assert!(!page.body.contains("<script>"), "{}", page.body);
    assert!(page.body.contains("&lt;/textarea&gt;"), "{}", page.body);
    // The hidden character is written as its JSON escape, so the person sees it.
    assert!(page.body.contains("\\u202e"), "{}", page.body);
    let csrf = page.field("csrf");

    for (arguments, says) in [("{not json", "not JSON"), (r#"{"url": 5}"#, "/url")] {
        let fields = [("csrf", csrf.as_str()), ("arguments", arguments)];
        let posted = alice.post(&format!("{card}/edit"), &fields).await;
        assert_eq!((posted.status, posted.location()), (303, card.as_str()));
        let shown = alice.get(&card).await;
        assert!(shown.body.contains("Nothing was done"), "{}", shown.body);
        assert!(shown.body.contains(says), "{says}: {}", shown.body);
        let now = gateway.store().get(row.id).await.unwrap();
        assert_eq!(now.state, InvocationState::AwaitingApproval);
    }

    let (port, request) = json_once(r#"{"ok":true}"#);
    let edited = format!(r#"{{"url": "http://127.0.0.1:{port}/from-the-inbox"}}"#);
    let fields = [("csrf", csrf.as_str()), ("arguments", edited.as_str())];
    let posted = alice.post(&format!("{card}/edit"), &fields).await;
    assert_eq!(posted.status, 303);
    let head = asked(request).await;
    assert!(head.starts_with("GET /from-the-inbox "), "{head}");
    let done = settled(&gateway, &row).await;
    assert_eq!(done.state, InvocationState::Succeeded);
    assert_eq!(done.arguments, row.arguments);
    assert_eq!(done.decision.unwrap().by, "alice");
    let shown = alice.get(&card).await;
    assert!(shown.body.contains("Arguments proposed"), "{}", shown.body);
    assert!(shown.body.contains("from-the-inbox"), "{}", shown.body);
    assert!(!shown.body.contains("<script>"), "{}", shown.body);
}
