//! The inbox over HTTP (docs/rules.md INBOX): sign-in and its cookie, sign-out, CSRF, GETs that
//! never decide, hostile payloads escaped, the list's filters, order and pages, each decision
//! from a card with its flash message, the "already decided" case in words, the session's and
//! the run's stories, and the security headers — against the app served on 127.0.0.1.

use std::time::Duration;

use airlock_ledger::{InvocationState, NewInvocation, NewRun};
use airlock_runtime::Gateway;
use airlock_spec::ScopeId;
use serde_json::json;

use crate::support::inbox_client::{InboxClient, Page};
use crate::support::{call_context, deployment_with, park, serve_in_process};

pub(crate) const ALICE: &str = "admin-alice-0cc175b9c0f1b6a831c399e269772661";
pub(crate) const BOB: &str = "admin-bob-92eb5ffee6ae2fec3ad71c777531578f";
pub(crate) const CLAUDE: &str = "mcp-claude-4a8a08f09d37b73795649038408b5f33";

const HELPER: &str = "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: helper\n  description: Reads pages.\nspec:\n  model:\n    provider: anthropic\n    model: claude-sonnet-4-5\n    credential: anthropic.api_key\n  prompts:\n    system: Read.\n  tools:\n    - type: builtin\n      name: fetch\n      approval: always\n";

/// Two admins (`alice`, `bob`), an MCP client (`claude`), `ask_human`, gated `fetch`, loopback
/// egress, and the agent `helper` (gated `fetch`).
pub(crate) fn deployment() -> tempfile::TempDir {
    let toml = "[[admin.tokens]]\ncredential = \"airlock.alice\"\nprincipal = \"alice\"\n[[admin.tokens]]\ncredential = \"airlock.bob\"\nprincipal = \"bob\"\n[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.ask_human]\n[builtins.fetch]\napproval = \"always\"\n";
    let dir = deployment_with(
        toml,
        &format!("airlock:\n  alice: {ALICE}\n  bob: {BOB}\n  claude: {CLAUDE}\n"),
    );
    std::fs::create_dir(dir.path().join("agents")).unwrap();
    std::fs::write(dir.path().join("agents/helper.yml"), HELPER).unwrap();
    dir
}

/// Serves [`deployment`]; the base URL, the gateway and the directory.
pub(crate) async fn start() -> (String, std::sync::Arc<Gateway>, tempfile::TempDir) {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    (format!("http://{addr}"), gateway, dir)
}

/// A gated `fetch` parked by `principal` in the gateway scope (nothing listens on port 9).
async fn fetch(gateway: &Gateway, principal: &str, n: u32) -> airlock_ledger::Invocation {
    let url = json!({"url": format!("http://127.0.0.1:9/{n}")});
    park(gateway, ScopeId::Gateway, principal, "fetch", url).await
}

fn assert_security_headers(page: &Page) {
    let header = |name: &str| {
        page.headers
            .get(name)
            .map(|v| v.to_str().unwrap().to_owned())
    };
    let csp = header("content-security-policy").unwrap_or_default();
    for part in [
        "default-src 'none'",
        "style-src 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(part), "{csp}");
    }
    assert_eq!(header("x-content-type-options").as_deref(), Some("nosniff"));
    assert_eq!(header("referrer-policy").as_deref(), Some("no-referrer"));
    assert_eq!(header("cache-control").as_deref(), Some("no-store"));
}

/// INBOX-1, INBOX-2, INBOX-8: signed out, every page leads to the sign-in form; a wrong token
/// is refused without saying what was wrong; a right one gives a strict, scoped cookie (Secure
/// behind TLS); sign-out ends the session.
#[tokio::test]
async fn sign_in_gives_a_strict_session_cookie_and_sign_out_ends_it() {
    let (base, _gateway, _dir) = start().await;
    let mut browser = InboxClient::new(&base);
    let page = browser.get("/inbox").await;
    assert_eq!((page.status, page.location()), (303, "/inbox/sign-in"));
    assert_security_headers(&page);
    let form = browser.get("/inbox/sign-in").await;
    assert_security_headers(&form);
    assert!(form.body.contains("type=\"password\""), "{}", form.body);

    for wrong in ["wrong", "", &ALICE[..ALICE.len() - 1]] {
        let page = browser.sign_in(wrong).await;
        assert_eq!(page.status, 401, "{wrong}: {}", page.body);
        assert!(page.body.contains("That token was not accepted."));
        assert!(!browser.has_session());
    }
    // A sign-in form not issued to this browser (no double-submit cookie) is refused.
    let mut stranger = InboxClient::new(&base);
    let page = stranger
        .post("/inbox/sign-in", &[("token", ALICE), ("form", "forged")])
        .await;
    assert_eq!(page.status, 403, "{}", page.body);
    assert!(!stranger.has_session());

    let page = browser.sign_in(ALICE).await;
    assert_eq!((page.status, page.location()), (303, "/inbox"));
    let cookie = page
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("airlock_inbox="))
        .unwrap();
    for attribute in [
        "HttpOnly",
        "SameSite=Strict",
        "Path=/inbox",
        "Max-Age=43200",
    ] {
        assert!(cookie.contains(attribute), "{cookie}");
    }
    assert!(!cookie.contains("Secure"), "plain HTTP: {cookie}");
    let list = browser.get("/inbox").await;
    assert_eq!(list.status, 200, "{}", list.body);
    assert!(list.body.contains("signed in as <strong>alice</strong>"));
    assert!(
        list.body.contains("http-equiv=\"refresh\""),
        "live by default"
    );

    // Behind a TLS-terminating proxy the cookie is Secure.
    let mut behind_tls = InboxClient::new(&base);
    behind_tls.extra.push(("x-forwarded-proto", "https"));
    let page = behind_tls.sign_in(BOB).await;
    assert!(
        page.set_cookies()
            .iter()
            .any(|c| c.starts_with("airlock_inbox=") && c.ends_with("; Secure")),
        "{:?}",
        page.set_cookies()
    );

    // Sign-out needs the CSRF token, then ends the session for good.
    let csrf = browser.csrf("/inbox").await;
    assert_eq!(
        browser
            .post("/inbox/sign-out", &[("csrf", "x")])
            .await
            .status,
        403
    );
    let out = browser.post("/inbox/sign-out", &[("csrf", &csrf)]).await;
    assert_eq!((out.status, out.location()), (303, "/inbox/sign-in"));
    assert!(!browser.has_session());
    let mut replay = InboxClient::new(&base);
    let stale = page_cookie(&cookie);
    replay.set_session(&stale);
    assert_eq!(replay.get("/inbox").await.location(), "/inbox/sign-in");
}

fn page_cookie(set_cookie: &str) -> String {
    set_cookie
        .split(';')
        .next()
        .unwrap()
        .split_once('=')
        .unwrap()
        .1
        .to_owned()
}

/// INBOX-3: a GET never decides; a POST without the session's CSRF token (missing, wrong,
/// another session's) or without a session is refused with 403 and decides nothing.
#[tokio::test]
async fn forms_without_the_session_csrf_token_decide_nothing() {
    let (base, gateway, _dir) = start().await;
    let row = fetch(&gateway, "claude", 1).await;
    let card = format!("/inbox/invocations/{}", row.id);
    let mut alice = InboxClient::signed_in(&base, ALICE).await;
    let mut bob = InboxClient::signed_in(&base, BOB).await;
    let bobs = bob.csrf(&card).await;
    let alices = alice.csrf(&card).await;
    assert_ne!(alices, bobs);

    // GETs of every decision route: not a route for GET, nothing decided.
    for verb in ["approve", "deny", "answer", "resolve"] {
        let page = alice
            .get(&format!("{card}/{verb}?csrf={alices}&reason=x"))
            .await;
        assert_eq!(page.status, 405, "GET {verb}");
    }
    for fields in [
        vec![],
        vec![("csrf", "nope")],
        vec![("csrf", bobs.as_str())],
    ] {
        let page = alice.post(&format!("{card}/approve"), &fields).await;
        assert_eq!(page.status, 403, "{fields:?}");
        assert!(page.body.contains("Nothing was done"), "{}", page.body);
    }
    let mut nobody = InboxClient::new(&base);
    let page = nobody
        .post(&format!("{card}/approve"), &[("csrf", &alices)])
        .await;
    assert_eq!(page.status, 403, "no session");
    assert_eq!(
        gateway.store().get(row.id).await.unwrap().state,
        InvocationState::AwaitingApproval
    );
    // With its token, the same form decides, as the session's principal.
    let page = alice
        .post(&format!("{card}/approve"), &[("csrf", &alices)])
        .await;
    assert_eq!((page.status, page.location()), (303, card.as_str()));
    let decided = gateway.store().get(row.id).await.unwrap();
    assert_eq!(decided.decision.unwrap().by, "alice");
}

/// INBOX-4: arguments, principals and reasons are shown escaped, with hidden characters made
/// visible; no page holds a live tag from a caller.
#[tokio::test]
async fn hostile_text_is_escaped_and_hidden_characters_are_shown() {
    let (base, gateway, _dir) = start().await;
    let payload = "<script>window.pwned=1</script><img src=x onerror=\"window.pwned=2\">\u{202E}fdp.exe\u{200B}";
    let row = park(
        &gateway,
        ScopeId::Gateway,
        "<b>mallory</b>\u{2066}",
        "ask_human",
        json!({"question": payload}),
    )
    .await;
    let mut alice = InboxClient::signed_in(&base, ALICE).await;
    for path in [
        "/inbox".to_owned(),
        format!("/inbox/invocations/{}", row.id),
        format!("/inbox/sessions/{}", row.session_id),
    ] {
        let page = alice.get(&path).await;
        assert_eq!(page.status, 200, "{path}");
        let html = &page.body;
        assert!(
            !html.contains("<script") && !html.contains("<img") && !html.contains("<b>"),
            "{path}: {html}"
        );
        assert!(
            !html.contains('\u{202E}') && !html.contains('\u{200B}') && !html.contains('\u{2066}'),
            "{path}"
        );
        assert!(
            html.contains("\\u{2066}"),
            "{path}: the principal's hidden character is shown"
        );
        if !path.ends_with("/inbox") {
            assert!(
                html.contains("&lt;script&gt;window.pwned=1&lt;/script&gt;"),
                "{path}: {html}"
            );
            assert!(
                html.contains("\\u{202E}") && html.contains("\\u{200B}"),
                "{path}"
            );
        }
    }
    // A hostile denial reason is escaped where it is shown back.
    let card = format!("/inbox/invocations/{}", row.id);
    let csrf = alice.csrf(&card).await;
    alice
        .post(
            &format!("{card}/deny"),
            &[("csrf", &csrf), ("reason", "<script>x</script>")],
        )
        .await;
    let page = alice.get(&card).await;
    assert!(!page.body.contains("<script>x"), "{}", page.body);
    assert!(page.body.contains("&lt;script&gt;x&lt;/script&gt;"));
}

/// INBOX-5: newest first, filtered by tool, principal and agent, in pages.
#[tokio::test]
async fn the_list_is_newest_first_filtered_and_paged() {
    let (base, gateway, _dir) = start().await;
    let mut ids = Vec::new();
    for (n, principal) in [(0, "bob"), (1, "carol"), (2, "bob")] {
        ids.push(fetch(&gateway, principal, n).await.id.to_string());
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let question = park(
        &gateway,
        ScopeId::Gateway,
        "carol",
        "ask_human",
        json!({"question": "Which warehouse?"}),
    )
    .await;
    let helper = park(
        &gateway,
        ScopeId::Agent("helper".into()),
        "dan",
        "fetch",
        json!({"url": "http://127.0.0.1:9/a"}),
    )
    .await;
    let mut alice = InboxClient::signed_in(&base, ALICE).await;
    let order = |page: &Page, ids: &[&str]| -> Vec<usize> {
        ids.iter().filter_map(|id| page.body.find(*id)).collect()
    };
    let all = alice.get("/inbox").await;
    let newest_first = [
        helper.id.to_string(),
        question.id.to_string(),
        ids[2].clone(),
        ids[1].clone(),
        ids[0].clone(),
    ];
    let refs: Vec<&str> = newest_first.iter().map(String::as_str).collect();
    let at = order(&all, &refs);
    assert_eq!(at.len(), 5, "{}", all.body);
    assert!(at.windows(2).all(|w| w[0] < w[1]), "newest first: {at:?}");
    assert!(all.body.contains("agent helper") && all.body.contains("an answer"));

    let page = alice.get("/inbox?tool=fetch&principal=bob").await;
    assert_eq!(order(&page, &[&ids[2], &ids[0]]).len(), 2);
    assert!(!page.body.contains(&ids[1]) && !page.body.contains(&question.id.to_string()));
    let page = alice.get("/inbox?agent=helper").await;
    assert!(page.body.contains(&helper.id.to_string()) && !page.body.contains(&ids[0]));
    // Empty filters (a submitted, blank form) filter nothing.
    let page = alice.get("/inbox?tool=&agent=&principal=&live=off").await;
    assert_eq!(order(&page, &refs).len(), 5);
    assert!(!page.body.contains("http-equiv=\"refresh\""), "paused");
    assert!(
        page.body.contains("name=\"tool\""),
        "the filter form shows when paused"
    );

    let first = alice.get("/inbox?limit=2").await;
    assert_eq!(order(&first, &refs).len(), 2);
    assert!(first.body.contains(&helper.id.to_string()));
    assert!(
        first.body.contains("offset=2&amp;limit=2"),
        "{}",
        first.body
    );
    let last = alice.get("/inbox?limit=2&offset=4").await;
    assert_eq!(order(&last, &refs), order(&last, &[&ids[0]]));
    assert!(last.body.contains("Newer") && !last.body.contains("Older"));
    assert_eq!(alice.get("/inbox?offset=minus").await.status, 400);
    assert_eq!(alice.get("/inbox?bogus=1").await.status, 400);
}

/// INBOX-6: deny (a reason required), answer and resolve from the card, each recorded under
/// the session's principal, each followed by a 303 back to the card with a flash message.
#[tokio::test]
async fn each_decision_is_taken_from_the_card() {
    let (base, gateway, _dir) = start().await;
    let store = gateway.store();
    let mut alice = InboxClient::signed_in(&base, ALICE).await;
    let decide = |row: &airlock_ledger::Invocation, verb: &str| {
        (
            format!("/inbox/invocations/{}", row.id),
            format!("/inbox/invocations/{}/{verb}", row.id),
        )
    };

    let denied = fetch(&gateway, "claude", 1).await;
    let (card, action) = decide(&denied, "deny");
    let csrf = alice.csrf(&card).await;
    let page = alice
        .post(&action, &[("csrf", &csrf), ("reason", "  ")])
        .await;
    assert_eq!(page.location(), card);
    assert!(
        alice
            .get(&card)
            .await
            .body
            .contains("a denial needs a reason")
    );
    assert_eq!(
        store.get(denied.id).await.unwrap().state,
        InvocationState::AwaitingApproval
    );
    alice
        .post(&action, &[("csrf", &csrf), ("reason", "not today")])
        .await;
    let after = alice.get(&card).await.body;
    assert!(
        after.contains("Denied. The caller sees your reason."),
        "{after}"
    );
    assert!(
        after.contains("denied by <strong>alice</strong>"),
        "{after}"
    );
    assert!(
        !after.contains("name=\"reason\""),
        "a settled call has no forms: {after}"
    );

    let question = park(
        &gateway,
        ScopeId::Gateway,
        "claude",
        "ask_human",
        json!({"question": "Which warehouse?"}),
    )
    .await;
    let (card, action) = decide(&question, "answer");
    let page = alice.get(&card).await;
    assert!(page.body.contains("Which warehouse?") && page.body.contains("Your answer"));
    alice
        .post(
            &action,
            &[("csrf", &page.field("csrf")), ("text", "Rosario")],
        )
        .await;
    let row = store.get(question.id).await.unwrap();
    assert_eq!(
        (row.state, row.result.clone()),
        (
            InvocationState::Succeeded,
            Some(json!({"answer": "Rosario"}))
        )
    );

    let doubt = crate::words::in_doubt(&gateway, "d1").await;
    let card = format!("/inbox/invocations/{doubt}");
    let page = alice.get(&card).await;
    assert!(page.body.contains("Did it run?"), "{}", page.body);
    let csrf = page.field("csrf");
    let resolve = format!("{card}/resolve");
    alice
        .post(
            &resolve,
            &[("csrf", &csrf), ("outcome", "abandoned"), ("note", "")],
        )
        .await;
    assert!(alice.get(&card).await.body.contains("needs a reason"));
    alice
        .post(
            &resolve,
            &[
                ("csrf", &csrf),
                ("outcome", "ran"),
                ("note", "seen in the logs"),
            ],
        )
        .await;
    let row = store.get(doubt).await.unwrap();
    assert_eq!(row.state, InvocationState::Resolved);
    assert_eq!(row.resolution.unwrap().by, "alice");

    assert_eq!(
        alice
            .post(&format!("{card}/launch"), &[("csrf", &csrf)])
            .await
            .status,
        404
    );
    assert_eq!(alice.get("/inbox/invocations/nope").await.status, 400);
    let unknown = alice
        .get(&format!(
            "/inbox/invocations/{}",
            airlock_ledger::InvocationId::new()
        ))
        .await;
    assert_eq!(unknown.status, 404);
    assert_security_headers(&unknown);
}

/// INBOX-6 (DECIDE-5): two people on one card — the second decision is not taken, and the
/// second person reads who decided first and when.
#[tokio::test]
async fn a_second_decider_reads_who_decided_first_and_when() {
    let (base, gateway, _dir) = start().await;
    let row = fetch(&gateway, "claude", 1).await;
    let card = format!("/inbox/invocations/{}", row.id);
    let mut alice = InboxClient::signed_in(&base, ALICE).await;
    let mut bob = InboxClient::signed_in(&base, BOB).await;
    let alices = alice.csrf(&card).await;
    let bobs = bob.csrf(&card).await;
    alice
        .post(&format!("{card}/approve"), &[("csrf", &alices)])
        .await;
    let page = bob
        .post(
            &format!("{card}/deny"),
            &[("csrf", &bobs), ("reason", "late")],
        )
        .await;
    assert_eq!((page.status, page.location()), (303, card.as_str()));
    let page = bob.get(&card).await.body;
    let decided = gateway.store().get(row.id).await.unwrap().decision.unwrap();
    let at = decided.at.to_offset(time::UtcOffset::UTC);
    let expected = format!(
        "Nothing was done: alice already approved this call at {} {:02}:{:02}:{:02} UTC.",
        at.date(),
        at.hour(),
        at.minute(),
        at.second()
    );
    assert!(page.contains(&expected), "{expected}\n{page}");
    assert_eq!(decided.by, "alice");
}

/// INBOX-7: a session's page and a run's page tell the story in order: calls, decisions and
/// results.
#[tokio::test]
async fn session_and_run_pages_tell_the_story_in_order() {
    let (base, gateway, _dir) = start().await;
    let store = gateway.store();
    let ctx = call_context(&gateway, ScopeId::Gateway, Some("claude"), "1").await;
    let first = gateway
        .call(&ctx, "fetch", json!({"url": "http://127.0.0.1:9/1"}))
        .await
        .unwrap()
        .into_invocation();
    let second_ctx = airlock_runtime::CallContext {
        call_id: "2".into(),
        ..ctx.clone()
    };
    let second = gateway
        .call(
            &second_ctx,
            "ask_human",
            json!({"question": "Which warehouse?"}),
        )
        .await
        .unwrap()
        .into_invocation();
    let mut alice = InboxClient::signed_in(&base, ALICE).await;
    let deny = format!("/inbox/invocations/{}", first.id);
    let csrf = alice.csrf(&deny).await;
    alice
        .post(
            &format!("{deny}/deny"),
            &[("csrf", &csrf), ("reason", "no fetching")],
        )
        .await;
    alice
        .post(
            &format!("/inbox/invocations/{}/answer", second.id),
            &[("csrf", &csrf), ("text", "Rosario")],
        )
        .await;
    let page = alice
        .get(&format!("/inbox/sessions/{}", ctx.session))
        .await
        .body;
    let steps = [
        "called <a href=\"/inbox/invocations/".to_owned() + &first.id.to_string(),
        "called <a href=\"/inbox/invocations/".to_owned() + &second.id.to_string(),
        "denied by <strong>alice</strong> — “no fetching”".to_owned(),
        "answered by <strong>alice</strong>".to_owned(),
        "Rosario".to_owned(),
    ];
    let at: Vec<usize> = steps
        .iter()
        .map(|s| {
            page.find(s.as_str())
                .unwrap_or_else(|| panic!("{s}\n{page}"))
        })
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{at:?}\n{page}");

    // A run's page reads the run's calls.
    let run = store
        .create_run(NewRun {
            session_id: ctx.session,
            agent: "helper".into(),
            definitions_digest: "d".into(),
            definitions_snapshot: json!([]),
            lease: None,
        })
        .await
        .unwrap();
    let mut call = NewInvocation::new(
        ctx.session,
        "r1",
        "fetch",
        json!({"url": "http://127.0.0.1:9/r"}),
        "d",
    );
    call.run_id = Some(run.id);
    call.approval = airlock_spec::Approval::Always;
    let in_run = store.record(call).await.unwrap().invocation;
    let page = alice.get(&format!("/inbox/runs/{}", run.id)).await;
    assert_eq!(page.status, 200, "{}", page.body);
    assert!(page.body.contains("helper") && page.body.contains(&in_run.id.to_string()));
    assert!(
        !page.body.contains(&first.id.to_string()),
        "only the run's calls"
    );
    let card = alice
        .get(&format!("/inbox/invocations/{}", in_run.id))
        .await
        .body;
    assert!(
        card.contains(&format!("/inbox/runs/{}", run.id)),
        "the card links its run"
    );
    assert_eq!(alice.get("/inbox/runs/x").await.status, 400);
    assert_eq!(
        alice
            .get(&format!(
                "/inbox/sessions/{}",
                airlock_ledger::SessionId::new()
            ))
            .await
            .status,
        404
    );
}

/// INBOX-6: the card shows what the tool does and the digest the call was recorded under.
#[tokio::test]
async fn the_card_shows_the_tools_description_and_digest() {
    let (base, gateway, _dir) = start().await;
    let row = fetch(&gateway, "claude", 1).await;
    let mut alice = InboxClient::signed_in(&base, ALICE).await;
    let page = alice.get(&format!("/inbox/invocations/{}", row.id)).await;
    assert_security_headers(&page);
    let tool = gateway
        .scope(&ScopeId::Gateway)
        .unwrap()
        .get("fetch")
        .unwrap();
    assert!(
        page.body.contains(&tool.definition.description),
        "{}",
        page.body
    );
    assert!(page.body.contains(&row.definitions_digest));
    assert!(page.body.contains("Approve") && page.body.contains("Deny"));
    let css = alice.get("/inbox/style.css").await;
    assert_eq!(
        css.headers.get("content-type").unwrap(),
        "text/css; charset=utf-8"
    );
}

/// INBOX-1: after 20 failed sign-ins within a minute, even the right token is refused (429)
/// until the minute has passed.
#[tokio::test]
async fn failed_sign_ins_close_sign_in_for_a_while() {
    let (base, _gateway, _dir) = start().await;
    let mut guesser = InboxClient::new(&base);
    for n in 0..20 {
        let page = guesser.sign_in(&format!("guess-{n}")).await;
        assert_eq!(page.status, 401, "{n}");
    }
    let page = guesser.sign_in(ALICE).await;
    assert_eq!(page.status, 429, "{}", page.body);
    assert!(page.body.contains("Too many failed sign-ins"));
    assert!(!guesser.has_session());
}

/// INBOX-13, POLICY-56: an admin freezes from the inbox (CSRF-checked, under the admin's name),
/// every page shows what is frozen, a frozen call is refused, and the Lift button restores it.
#[tokio::test]
async fn freezes_are_made_shown_and_lifted_from_the_inbox() {
    let (base, gateway, _dir) = start().await;
    let mut inbox = InboxClient::signed_in(&base, ALICE).await;
    let forged = inbox
        .post(
            "/inbox/freezes/freeze",
            &[
                ("csrf", "nope"),
                ("kind", "tool"),
                ("name", "fetch"),
                ("reason", "x"),
            ],
        )
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(gateway.store().freezes().await.unwrap().is_empty());
    let csrf = inbox.csrf("/inbox/freezes").await;
    let reason = "<b>leak</b>";
    let frozen = inbox
        .post(
            "/inbox/freezes/freeze",
            &[
                ("csrf", &csrf),
                ("kind", "tool"),
                ("name", "fetch"),
                ("reason", reason),
            ],
        )
        .await;
    assert_eq!((frozen.status, frozen.location()), (303, "/inbox/freezes"));
    let stored = gateway.store().freezes().await.unwrap();
    assert_eq!((stored.len(), stored[0].by.as_str()), (1, "alice"));
    let page = inbox.get("/inbox/freezes").await;
    assert!(page.body.contains("tool `fetch`"), "{}", page.body);
    assert!(
        page.body.contains("&lt;b&gt;leak&lt;/b&gt;"),
        "escaped: {}",
        page.body
    );
    let front = inbox.get("/inbox").await;
    assert!(
        front.body.contains("Frozen: tool `fetch`"),
        "{}",
        front.body
    );
    let refused = fetch_call(&gateway, 1).await;
    assert_eq!(refused.decision.unwrap().by, airlock_ledger::FREEZE);
    let bad = inbox
        .post(
            "/inbox/freezes/freeze",
            &[
                ("csrf", &csrf),
                ("kind", "agent"),
                ("name", ""),
                ("reason", "r"),
            ],
        )
        .await;
    assert_eq!(bad.status, 303);
    let page = inbox.get("/inbox/freezes").await;
    assert!(page.body.contains("Nothing was frozen"), "{}", page.body);
    let lifted = inbox
        .post(
            "/inbox/freezes/lift",
            &[("csrf", &csrf), ("kind", "tool"), ("name", "fetch")],
        )
        .await;
    assert_eq!(lifted.status, 303);
    assert!(gateway.store().freezes().await.unwrap().is_empty());
    let page = inbox.get("/inbox/freezes").await;
    assert!(page.body.contains("Lifted: tool `fetch`"), "{}", page.body);
    let parked = fetch_call(&gateway, 2).await;
    assert_eq!(parked.state, InvocationState::AwaitingApproval);
}

/// A `fetch` call by `claude` in the gateway scope, as recorded.
async fn fetch_call(gateway: &Gateway, n: u32) -> airlock_ledger::Invocation {
    let ctx = call_context(gateway, ScopeId::Gateway, Some("claude"), &format!("f{n}")).await;
    let url = json!({"url": format!("http://127.0.0.1:9/{n}")});
    let outcome = gateway.call(&ctx, "fetch", url).await.unwrap();
    outcome.invocation().clone()
}
