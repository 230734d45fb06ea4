//! The inbox in a real browser (docs/rules.md INBOX-9): headless Chromium over WebDriver signs
//! in, sees a call an MCP client parked, approves it and the client's `airlock_await_decision`
//! returns the result; denies with a reason; answers a question; resolves a call in doubt; a
//! second person reads who decided first; a forged form and a wrong token are refused; a
//! script in the arguments stays inert. With `UPDATE_SCREENSHOTS=1` it also saves the
//! screenshots shown in docs/inbox.md (`docs/images/inbox-*.png`).

use std::path::PathBuf;
use std::time::Duration;

use airlock_ledger::InvocationState;
use airlock_spec::ScopeId;
use serde_json::{Value, json};
use tokio::task::JoinHandle;

use crate::inbox::{ALICE, BOB, CLAUDE, start};
use crate::support::browser::Browser;
use crate::support::inbox_client::InboxClient;
use crate::support::park;

/// Enough for a page reload or a woken await on a loaded machine; every wait is bounded.
const WITHIN: Duration = Duration::from_secs(15);

/// An MCP client's `tools/call`; the structured content.
async fn mcp_call(base: &str, tool: &str, arguments: Value) -> Value {
    crate::mcp::call(base, CLAUDE, tool, arguments).await["structuredContent"].clone()
}

/// The MCP client waiting on `id` in `airlock_await_decision`.
fn awaiting(base: &str, id: &str) -> JoinHandle<Value> {
    let (base, id) = (base.to_owned(), id.to_owned());
    tokio::spawn(async move {
        let arguments = json!({"invocation_id": id, "wait_seconds": 25});
        mcp_call(&base, "airlock_await_decision", arguments).await
    })
}

async fn settled(waiting: JoinHandle<Value>) -> Value {
    tokio::time::timeout(WITHIN, waiting)
        .await
        .expect("the awaiting client was not woken by the inbox's decision")
        .unwrap()
}

/// Signs `browser` in with `token` through the form.
async fn sign_in(browser: &Browser, base: &str, token: &str) {
    browser.goto(&format!("{base}/inbox")).await;
    assert!(browser.url().await.ends_with("/inbox/sign-in"));
    browser.type_into("#token", token).await;
    browser.click("form[action='/inbox/sign-in'] button").await;
}

fn screenshots() -> Option<PathBuf> {
    std::env::var_os("UPDATE_SCREENSHOTS")
        .map(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/images"))
}

/// INBOX-9: sign in (a wrong token refused first), see the parked call in the list, approve
/// it on its card, and the MCP client's await returns the call's result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approving_in_chromium_wakes_the_waiting_client_with_the_result() {
    let (base, gateway, _dir) = start().await;
    let url = crate::mcp::page().await;
    let parked = mcp_call(&base, "fetch", json!({"url": url})).await;
    assert_eq!(parked["status"], "awaiting_approval", "{parked}");
    let id = parked["invocation_id"].as_str().unwrap().to_owned();
    // Company for the screenshot of the list.
    park(
        &gateway,
        ScopeId::Gateway,
        "claude",
        "ask_human",
        json!({"question": "Ship order 1042 to the Rosario warehouse or to Córdoba?"}),
    )
    .await;
    park(
        &gateway,
        ScopeId::Agent("helper".into()),
        "support-bot",
        "fetch",
        json!({"url": "https://status.example.com/"}),
    )
    .await;

    let Some(browser) = Browser::start(1200, 1000).await else {
        return;
    };
    sign_in(&browser, &base, "not-a-token").await;
    browser
        .wait_for_text("That token was not accepted.", WITHIN)
        .await;
    browser.type_into("#token", ALICE).await;
    browser.click("form[action='/inbox/sign-in'] button").await;
    let list = browser.wait_for_text("Waiting for a person", WITHIN).await;
    assert!(list.contains("signed in as alice"), "{list}");
    assert!(
        browser
            .source()
            .await
            .contains(&format!("/inbox/invocations/{id}"))
    );
    let shots = screenshots();
    if let Some(dir) = &shots {
        browser.screenshot(&dir.join("inbox-list.png")).await;
    }

    let waiting = awaiting(&base, &id);
    browser
        .goto(&format!("{base}/inbox/invocations/{id}"))
        .await;
    let card = browser.text("body").await;
    assert!(card.contains("fetch") && card.contains(&url), "{card}");
    if let Some(dir) = &shots {
        browser.screenshot(&dir.join("inbox-card.png")).await;
    }
    browser.click("form[action$='/approve'] button").await;
    assert!(
        browser
            .url()
            .await
            .ends_with(&format!("/inbox/invocations/{id}"))
    );
    browser.wait_for_text("Approved.", WITHIN).await;
    let done = settled(waiting).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["decided_by"], "alice", "{done}");
    assert_eq!(done["result"]["body"], "hello", "{done}");
    // The card shows the outcome once the call has run.
    browser
        .goto(&format!("{base}/inbox/invocations/{id}"))
        .await;
    browser.wait_for_text("approved by alice", WITHIN).await;
}

/// INBOX-9: deny with a reason (the client reads it), answer a question, resolve a call in
/// doubt — each from its card in the browser.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deny_answer_and_resolve_in_chromium() {
    let (base, gateway, _dir) = start().await;
    let Some(browser) = Browser::start(800, 900).await else {
        return;
    };
    sign_in(&browser, &base, BOB).await;
    browser.wait_for_text("signed in as bob", WITHIN).await;

    let parked = mcp_call(&base, "fetch", json!({"url": "http://127.0.0.1:9/"})).await;
    let id = parked["invocation_id"].as_str().unwrap().to_owned();
    let waiting = awaiting(&base, &id);
    browser
        .goto(&format!("{base}/inbox/invocations/{id}"))
        .await;
    browser.type_into("#reason", "not on a Friday").await;
    browser.click("form[action$='/deny'] button").await;
    browser.wait_for_text("Denied.", WITHIN).await;
    let denied = settled(waiting).await;
    assert_eq!(denied["status"], "denied", "{denied}");
    assert_eq!(denied["denied"], "not on a Friday", "{denied}");
    assert_eq!(denied["decided_by"], "bob", "{denied}");

    let question = mcp_call(&base, "ask_human", json!({"question": "Which warehouse?"})).await;
    let qid = question["invocation_id"].as_str().unwrap().to_owned();
    let waiting = awaiting(&base, &qid);
    browser
        .goto(&format!("{base}/inbox/invocations/{qid}"))
        .await;
    browser.type_into("#text", "Rosario").await;
    browser.click("form[action$='/answer'] button").await;
    browser.wait_for_text("Answered.", WITHIN).await;
    let answered = settled(waiting).await;
    assert_eq!(answered["result"]["answer"], "Rosario", "{answered}");

    let doubt = crate::words::in_doubt(&gateway, "d1").await;
    browser
        .goto(&format!("{base}/inbox/invocations/{doubt}"))
        .await;
    browser.wait_for_text("Did it run?", WITHIN).await;
    browser
        .type_into("#note", "seen in the upstream's logs")
        .await;
    browser.click("form[action$='/resolve'] button").await;
    browser.wait_for_text("Resolved.", WITHIN).await;
    let row = gateway.store().get(doubt).await.unwrap();
    assert_eq!(row.state, InvocationState::Resolved, "{row:?}");
    assert_eq!(row.resolution.unwrap().by, "bob");
}

/// INBOX-9: a script in the arguments stays inert, a forged form decides nothing, and a second
/// person on a card someone else decided reads who and when.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_arguments_forged_forms_and_a_second_decider_in_chromium() {
    let (base, gateway, _dir) = start().await;
    let payload =
        "<img src=x onerror=\"window.__xss=1\"><script>window.__xss=2</script>\u{202E}txt.exe";
    let hostile = park(
        &gateway,
        ScopeId::Gateway,
        "claude",
        "ask_human",
        json!({"question": payload}),
    )
    .await;
    let Some(browser) = Browser::start(800, 900).await else {
        return;
    };
    sign_in(&browser, &base, BOB).await;
    browser.wait_for_text("signed in as bob", WITHIN).await;

    browser
        .goto(&format!("{base}/inbox/invocations/{}", hostile.id))
        .await;
    let text = browser.text("body").await;
    assert!(
        text.contains("<img src=x onerror="),
        "shown as text: {text}"
    );
    assert!(text.contains("\\u{202E}txt.exe"), "{text}");
    assert_eq!(
        browser.execute("return typeof window.__xss;").await,
        "undefined"
    );
    assert_eq!(browser.execute("return document.images.length;").await, 0);
    assert_eq!(browser.execute("return document.scripts.length;").await, 0);

    // A form whose CSRF token is not the session's is refused; nothing is decided.
    let row = park(
        &gateway,
        ScopeId::Gateway,
        "claude",
        "fetch",
        json!({"url": "http://127.0.0.1:9/"}),
    )
    .await;
    let card = format!("{base}/inbox/invocations/{}", row.id);
    browser.goto(&card).await;
    browser
        .execute("document.querySelector(\"form[action$='/approve'] input[name=csrf]\").value = 'forged'; return null;")
        .await;
    browser.click("form[action$='/approve'] button").await;
    browser.wait_for_text("Nothing was done", WITHIN).await;
    assert_eq!(
        gateway.store().get(row.id).await.unwrap().state,
        InvocationState::AwaitingApproval
    );

    // Bob has the card open; Alice approves first (from her own session); Bob's denial is not
    // taken, and he reads who decided and when.
    browser.goto(&card).await;
    let mut alice = InboxClient::signed_in(&base, ALICE).await;
    let csrf = alice.csrf(&format!("/inbox/invocations/{}", row.id)).await;
    alice
        .post(
            &format!("/inbox/invocations/{}/approve", row.id),
            &[("csrf", &csrf)],
        )
        .await;
    browser.type_into("#reason", "too late").await;
    browser.click("form[action$='/deny'] button").await;
    let said = browser
        .wait_for_text("alice already approved this call at", WITHIN)
        .await;
    assert!(said.contains("UTC"), "{said}");
    assert_eq!(
        gateway
            .store()
            .get(row.id)
            .await
            .unwrap()
            .decision
            .unwrap()
            .by,
        "alice"
    );

    // Sign-out from the header ends the session: the inbox asks to sign in again.
    browser.click("form[action='/inbox/sign-out'] button").await;
    browser.wait_for_text("Paste an admin token", WITHIN).await;
    browser.goto(&card).await;
    assert!(browser.url().await.ends_with("/inbox/sign-in"));
}

/// DECIDE-20 in Chromium: the approver replaces the pre-filled arguments of a call an MCP client
/// parked and clicks "Edit and approve"; the call runs with the edited arguments, the client's
/// await returns the result with the arguments that ran, and the card shows both sets.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn editing_in_chromium_runs_the_edited_call_and_tells_the_waiting_client() {
    let (base, _gateway, _dir) = start().await;
    let proposed = json!({"url": "http://127.0.0.1:9/proposed"});
    let parked = mcp_call(&base, "fetch", proposed).await;
    let id = parked["invocation_id"].as_str().unwrap().to_owned();
    let Some(browser) = Browser::start(1200, 1000).await else {
        return;
    };
    sign_in(&browser, &base, ALICE).await;
    browser.wait_for_text("Waiting for a person", WITHIN).await;
    let waiting = awaiting(&base, &id);
    browser
        .goto(&format!("{base}/inbox/invocations/{id}"))
        .await;
    let prefilled = browser
        .execute("return document.querySelector('#arguments').value")
        .await;
    assert!(
        prefilled.as_str().unwrap().contains("127.0.0.1:9/proposed"),
        "{prefilled}"
    );
    let edited = json!({ "url": crate::mcp::page().await });
    browser
        .execute("document.querySelector('#arguments').value = ''")
        .await;
    browser.type_into("#arguments", &edited.to_string()).await;
    browser.click("form[action$='/edit'] button").await;
    browser
        .wait_for_text("Approved with your arguments.", WITHIN)
        .await;
    let done = settled(waiting).await;
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(done["result"]["body"], "hello", "{done}");
    assert_eq!(done["approved_arguments"], edited, "{done}");
    browser
        .goto(&format!("{base}/inbox/invocations/{id}"))
        .await;
    let card = browser.text("body").await;
    assert!(card.contains("Arguments proposed"), "{card}");
    assert!(card.contains("127.0.0.1:9/proposed"), "{card}");
}
