//! Notifications end to end (docs/rules.md NOTIFY, LEDGER-30 … LEDGER-33): a real
//! `airlock serve` with `[notify]`, a webhook receiver and a fake Slack API on loopback.
//! Signatures are checked here with the Standard Webhooks and Slack schemes written out again,
//! not with airlock's own helpers.

use std::time::Duration;

use airlock_testkit::{Delivery, FakeSlack, Receiver, free_port};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::mcp::{ADMIN, CLAUDE, admin_get, approve, call};
use crate::support::{Server, cli, deployment_with, mcp_request};

/// The webhook secret's key, base64 (the Standard Webhooks README's example secret).
const KEY: &str = "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
/// The key rotated in after [`KEY`], base64.
const NEXT_KEY: &str = "c2Vjb25kLWtleS1mb3Itcm90YXRpb24=";
const BOT_TOKEN: &str = "xoxb-test-0a1b2c3d";
const SIGNING_SECRET: &str = "8f742231b10e8888abcd99yyyzzz85a5";
/// A value only an argument holds: it must never reach a receiver.
const CARD: &str = "4111111111111111";
const WITHIN: Duration = Duration::from_secs(20);
/// The `ts` the fake Slack gives the first message it is sent.
const FIRST_TS: &str = "1700000000.000001";

/// A deployment whose `fetch` always parks, with `notify` appended to its `airlock.toml`.
fn deployment(notify: &str, top: &str) -> tempfile::TempDir {
    deployment_fetching("always", notify, top)
}

/// A deployment whose `fetch` has `approval`, with `notify` appended to its `airlock.toml`.
fn deployment_fetching(approval: &str, notify: &str, top: &str) -> tempfile::TempDir {
    let toml = format!(
        "{top}[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\nallow_fetch = true\n[credentials]\nfile = \"creds.yml\"\n[builtins.fetch]\napproval = \"{approval}\"\n[server]\npublic_url = \"https://airlock.example.com/\"\n{notify}"
    );
    let creds = format!(
        "airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\nhooks:\n  secret: whsec_{KEY}\n  next: whsec_{NEXT_KEY}\nslack:\n  bot: {BOT_TOKEN}\n  signing: {SIGNING_SECRET}\n"
    );
    deployment_with(&toml, &creds)
}

fn webhook(url: &str) -> String {
    format!("[[notify.webhooks]]\nurl = \"{url}\"\nsecret = \"hooks.secret\"\n")
}

fn slack(api_base: &str) -> String {
    format!(
        "[notify.slack]\nbot_token = \"slack.bot\"\nchannel = \"C123\"\nsigning_secret = \"slack.signing\"\ndeciders = [\"U_ALICE\"]\napi_base = \"{api_base}\"\n"
    )
}

/// Parks a fetch (of a page nobody serves: running it fails fast); its invocation id.
async fn park(base: &str) -> String {
    let url = format!("http://127.0.0.1:9/?card={CARD}");
    let parked = call(base, CLAUDE, "fetch", json!({ "url": url })).await;
    let status = &parked["structuredContent"];
    assert_eq!(status["status"], "awaiting_approval", "{parked}");
    status["invocation_id"].as_str().unwrap().to_owned()
}

/// Polls `what` (bounded) until it gives `Some`.
async fn eventually<T>(what: impl Fn() -> Option<T>) -> T {
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        if let Some(found) = what() {
            return found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The Standard Webhooks signature of a delivery under the base64 `key`.
fn signature(key: &str, r: &Delivery) -> String {
    let (id, ts) = (r.header("webhook-id"), r.header("webhook-timestamp"));
    let key = STANDARD.decode(key).unwrap();
    let mut mac = Hmac::<Sha256>::new_from_slice(&key).unwrap();
    mac.update(format!("{id}.{ts}.").as_bytes());
    mac.update(&r.body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The event of a delivery, after checking its Standard Webhooks signature independently.
fn verified(r: &Delivery) -> Value {
    let (id, ts) = (r.header("webhook-id"), r.header("webhook-timestamp"));
    let expected = signature(KEY, r);
    let signatures = r.header("webhook-signature");
    assert!(
        signatures.split(' ').any(|s| s == expected),
        "{signatures} is not {expected}"
    );
    let now = time::OffsetDateTime::now_utc().unix_timestamp();
    assert!(
        (now - ts.parse::<i64>().unwrap()).abs() < 300,
        "timestamp {ts}"
    );
    let event: Value = serde_json::from_slice(&r.body).unwrap();
    assert_eq!(event["id"], id.as_str(), "the body's id is the delivery id");
    event
}

/// The first successful delivery of `kind` about `invocation`.
fn delivered(receiver: &Receiver, kind: &str, invocation: &str) -> Option<Value> {
    receiver
        .received()
        .iter()
        .filter(|r| r.status == 200)
        .map(verified)
        .find(|e| e["type"] == kind && e["data"]["invocation_id"] == invocation)
}

/// NOTIFY-2, NOTIFY-3, LEDGER-30: a park and a denial reach the receiver as signed events with
/// who, what, where and the inbox link, and without the call's arguments.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn webhook_events_are_signed_and_carry_no_arguments() {
    let receiver = Receiver::start().await;
    let dir = deployment(&webhook(&receiver.url()), "");
    let server = Server::start(dir.path(), &[]);
    let base = format!("http://{}", server.addr);
    let id = park(&base).await;

    let parked = eventually(|| delivered(&receiver, "invocation.parked", &id)).await;
    let data = &parked["data"];
    assert_eq!(data["tool"], "fetch");
    assert_eq!(data["principal"], "claude");
    assert_eq!(data["scope"], "gateway");
    assert_eq!(data["channel"], "mcp");
    assert_eq!(data["state"], "awaiting_approval");
    assert_eq!(
        data["inbox_url"],
        format!("https://airlock.example.com/inbox/invocations/{id}")
    );

    let denied = reqwest::Client::new()
        .post(format!("{base}/v1/invocations/{id}/deny"))
        .bearer_auth(ADMIN)
        .json(&json!({"reason": "not today <b>"}))
        .send()
        .await
        .unwrap();
    assert_eq!(denied.status().as_u16(), 200);
    let decided = eventually(|| delivered(&receiver, "invocation.decided", &id)).await;
    assert_eq!(decided["data"]["decided_by"], "alice");
    assert_eq!(decided["data"]["state"], "denied");
    assert_eq!(decided["data"]["reason"], "not today <b>");
    for r in receiver.received() {
        let body = String::from_utf8_lossy(&r.body);
        assert!(
            !body.contains(CARD),
            "an argument reached a receiver: {body}"
        );
    }
}

/// NOTIFY-10: while `hooks.secret` is rotated out for `hooks.next`, each delivery carries
/// one signature per secret, the current one first: a receiver holding either verifies it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn during_a_rotation_a_receiver_holding_either_secret_verifies() {
    let receiver = Receiver::start().await;
    let hook = format!(
        "[[notify.webhooks]]\nurl = \"{}\"\nsecret = \"hooks.next\"\nprevious_secrets = [\"hooks.secret\"]\n",
        receiver.url()
    );
    let dir = deployment(&hook, "");
    let server = Server::start(dir.path(), &[]);
    let id = park(&format!("http://{}", server.addr)).await;
    // `verified` holds the old key only: it accepts the delivery.
    let parked = eventually(|| delivered(&receiver, "invocation.parked", &id)).await;
    let sent = receiver
        .received()
        .into_iter()
        .find(|r| r.header("webhook-id") == parked["id"].as_str().unwrap())
        .unwrap();
    let signatures = sent.header("webhook-signature");
    let each: Vec<&str> = signatures.split(' ').collect();
    assert_eq!(each, [signature(NEXT_KEY, &sent), signature(KEY, &sent)]);
}

/// NOTIFY-2, LEDGER-30: a call nobody decides is told expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_call_is_told() {
    let receiver = Receiver::start().await;
    let dir = deployment(&webhook(&receiver.url()), "approval_ttl = \"1s\"\n");
    let server = Server::start(dir.path(), &[]);
    let id = park(&format!("http://{}", server.addr)).await;
    let expired = eventually(|| delivered(&receiver, "invocation.expired", &id)).await;
    assert_eq!(expired["data"]["state"], "expired");
}

/// LEDGER-31, NOTIFY-8: the notice of a park committed while the receiver was down survives a
/// killed server and is delivered by the next one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_notice_committed_before_a_crash_is_delivered_after_restart() {
    let port = free_port();
    let dir = deployment(&webhook(&format!("http://127.0.0.1:{port}/hook")), "");
    let mut first = Server::start(dir.path(), &[]);
    let id = park(&format!("http://{}", first.addr)).await;
    // Killed once its first attempt failed and gave the notice back, so no lease of the dead
    // server holds it: the restart must deliver it at once, from the ledger alone.
    let db = sqlx::SqlitePool::connect(&format!(
        "sqlite://{}",
        dir.path().join("airlock.sqlite").display()
    ))
    .await
    .unwrap();
    let deadline = tokio::time::Instant::now() + WITHIN;
    loop {
        let row: (i64, Option<String>) =
            sqlx::query_as("SELECT attempts, lease_owner FROM notifications")
                .fetch_one(&db)
                .await
                .unwrap();
        if row.0 >= 1 && row.1.is_none() {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "no failed attempt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    db.close().await;
    first.child.kill().unwrap();
    first.child.wait().unwrap();

    let receiver = Receiver::start_on(port).await;
    let _second = Server::start(dir.path(), &[]);
    let parked = eventually(|| delivered(&receiver, "invocation.parked", &id)).await;
    assert_eq!(parked["data"]["tool"], "fetch");
}

/// LEDGER-30, NOTIFY-2: a call cut off by a crash is told in doubt by the server that finds
/// it, and its resolution — taken with the CLI, another process — is told too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_in_doubt_call_and_its_cli_resolution_are_told() {
    let receiver = Receiver::start().await;
    let dir = deployment_fetching("never", &webhook(&receiver.url()), "");
    let d = dir.path();
    let mut first = Server::start(d, &["--lease", "2"]);
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let upstream = silent.local_addr().unwrap();
    let base = format!("http://{}", first.addr);
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "fetch", "arguments": {"url": format!("http://{upstream}/slow")}}});
    let hanging = tokio::spawn(async move {
        let request = mcp_request(&base)
            .bearer_auth(CLAUDE)
            .body(body.to_string());
        request.send().await.map(|r| r.status())
    });
    // The call reached the upstream: it is running. Then the server dies under it.
    let (_held, _) = tokio::time::timeout(WITHIN, silent.accept())
        .await
        .unwrap()
        .unwrap();
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    assert!(
        hanging.await.unwrap().is_err(),
        "the client lost its server"
    );

    let _second = Server::start(d, &["--lease", "2"]);
    let in_doubt = eventually(|| {
        receiver
            .received()
            .iter()
            .map(verified)
            .find(|e| e["type"] == "invocation.in_doubt")
    })
    .await;
    let id = in_doubt["data"]["invocation_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(in_doubt["data"]["state"], "in_doubt");
    let out = cli(
        d,
        &[
            "resolve",
            &id,
            "--outcome",
            "ran",
            "--note",
            "seen upstream",
        ],
    );
    assert!(out.status.success(), "{}", crate::text(&out));
    let decided = eventually(|| delivered(&receiver, "invocation.decided", &id)).await;
    assert_eq!(decided["data"]["decided_by"], "alice");
    assert_eq!(decided["data"]["state"], "resolved");
    assert!(decided["data"]["reason"].is_null(), "a note is not sent");
}

/// LEDGER-32, NOTIFY-8: a receiver answering 500 then 200 gets the same delivery id twice and
/// accepts it once; the retry is not repeated after the 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_receiver_answering_500_then_200_accepts_each_delivery_once() {
    let receiver = Receiver::start().await;
    receiver.answer(&[500]);
    let dir = deployment(&webhook(&receiver.url()), "");
    let server = Server::start(dir.path(), &[]);
    let base = format!("http://{}", server.addr);
    let id = park(&base).await;
    let parked = eventually(|| delivered(&receiver, "invocation.parked", &id)).await;
    // A later event delivered means the worker moved on past the first one.
    approve(&base, &id).await;
    eventually(|| delivered(&receiver, "invocation.decided", &id)).await;
    let attempts: Vec<Delivery> = receiver
        .received()
        .into_iter()
        .filter(|r| r.header("webhook-id") == parked["id"].as_str().unwrap())
        .collect();
    let statuses: Vec<u16> = attempts.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [500, 200], "one retry, one acceptance");
    assert_eq!(
        attempts[0].body, attempts[1].body,
        "the retry is the same event"
    );
}

/// Slack's v0 signature of `body` at `timestamp`, written out independently.
fn slack_signature(timestamp: i64, body: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(SIGNING_SECRET.as_bytes()).unwrap();
    mac.update(format!("v0:{timestamp}:{body}").as_bytes());
    format!("v0={}", hex::encode(mac.finalize().into_bytes()))
}

/// A `block_actions` click of `action` on the card of `id` by `user`, form-encoded.
fn click_body(user: &str, action: &str, id: &str) -> String {
    let payload = json!({
        "type": "block_actions",
        "user": {"id": user},
        "actions": [{"action_id": action, "value": id, "block_id": "airlock_decision"}]
    });
    url::form_urlencoded::Serializer::new(String::new())
        .append_pair("payload", &payload.to_string())
        .finish()
}

/// POSTs a click with `timestamp` and `signature`; the status.
async fn click(base: &str, body: &str, timestamp: i64, signature: &str) -> u16 {
    reqwest::Client::new()
        .post(format!("{base}/v1/slack/interactions"))
        .header("content-type", "application/x-www-form-urlencoded")
        .header("x-slack-request-timestamp", timestamp.to_string())
        .header("x-slack-signature", signature)
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

fn now() -> i64 {
    time::OffsetDateTime::now_utc().unix_timestamp()
}

/// The posted card of `id`, once the fake has it.
async fn card(fake: &FakeSlack, id: &str) -> Value {
    eventually(|| {
        fake.calls_of("chat.postMessage")
            .into_iter()
            .find(|c| c.body.to_string().contains(id))
            .map(|c| {
                assert!(c.authorized, "the bot token was sent");
                c.body
            })
    })
    .await
}

/// The `chat.update` of the message `ts`, once the fake has it.
async fn update(fake: &FakeSlack, ts: &str) -> Value {
    eventually(|| {
        fake.calls_of("chat.update")
            .into_iter()
            .find(|c| c.body["ts"] == ts)
            .map(|c| c.body)
    })
    .await
}

/// NOTIFY-4, NOTIFY-6, NOTIFY-7: a park posts a card with the call's facts and buttons; a
/// signed click by an allow-listed user approves, recorded as `slack:<user id>`; the card is
/// then replaced by the outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_card_is_posted_and_a_signed_click_approves() {
    let fake = FakeSlack::start(BOT_TOKEN).await;
    let dir = deployment(&slack(&fake.api_base()), "");
    let server = Server::start(dir.path(), &[]);
    let base = format!("http://{}", server.addr);
    let id = park(&base).await;

    let posted = card(&fake, &id).await;
    assert_eq!(posted["channel"], "C123");
    let blocks = posted["blocks"].to_string();
    for needle in [
        "fetch",
        "claude",
        "Approve",
        "Deny",
        "https://airlock.example.com/inbox/invocations/",
    ] {
        assert!(blocks.contains(needle), "{needle} missing: {blocks}");
    }
    assert!(!blocks.contains(CARD), "no argument on the card: {blocks}");

    let body = click_body("U_ALICE", "approve", &id);
    let at = now();
    assert_eq!(
        click(&base, &body, at, &slack_signature(at, &body)).await,
        200
    );
    let row = admin_get(&base, &format!("/v1/invocations/{id}")).await;
    assert_eq!(row["decision"]["by"], "slack:U_ALICE", "{row}");

    // The fake's first message; the update must name it.
    let updated = update(&fake, FIRST_TS).await;
    let text = updated.to_string();
    assert!(
        text.contains("slack:U_ALICE") && text.contains("approved"),
        "{text}"
    );
    assert!(
        !text.contains("\"actions\""),
        "the buttons are gone: {text}"
    );
}

/// NOTIFY-6: a bad signature, a stale timestamp and a user off the allow-list are refused and
/// decide nothing; a replay of an accepted click is refused too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_clicks_decide_nothing() {
    let fake = FakeSlack::start(BOT_TOKEN).await;
    let dir = deployment(&slack(&fake.api_base()), "");
    let server = Server::start(dir.path(), &[]);
    let base = format!("http://{}", server.addr);
    let id = park(&base).await;
    card(&fake, &id).await;

    let body = click_body("U_ALICE", "approve", &id);
    let at = now();
    let genuine = slack_signature(at, &body);
    let flipped = if &genuine[3..5] == "00" { "11" } else { "00" };
    let forged = format!("v0={flipped}{}", &genuine[5..]);
    assert_eq!(click(&base, &body, at, &forged).await, 401, "bad signature");
    let stale = at - 600;
    assert_eq!(
        click(&base, &body, stale, &slack_signature(stale, &body)).await,
        401,
        "stale"
    );
    let mallory = click_body("U_MALLORY", "approve", &id);
    assert_eq!(
        click(&base, &mallory, at, &slack_signature(at, &mallory)).await,
        403,
        "not a decider"
    );
    let row = admin_get(&base, &format!("/v1/invocations/{id}")).await;
    assert_eq!(row["state"], "awaiting_approval", "nothing decided: {row}");

    let deny = click_body("U_ALICE", "deny", &id);
    let signature = slack_signature(at, &deny);
    assert_eq!(click(&base, &deny, at, &signature).await, 200);
    assert_eq!(click(&base, &deny, at, &signature).await, 401, "replayed");
    let row = admin_get(&base, &format!("/v1/invocations/{id}")).await;
    assert_eq!(row["state"], "denied", "{row}");
}

/// NOTIFY-7: a decision taken elsewhere (the API) replaces the card with who decided.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_through_the_api_updates_the_card() {
    let fake = FakeSlack::start(BOT_TOKEN).await;
    let dir = deployment(&slack(&fake.api_base()), "");
    let server = Server::start(dir.path(), &[]);
    let base = format!("http://{}", server.addr);
    let id = park(&base).await;
    card(&fake, &id).await;
    approve(&base, &id).await;
    let updated = update(&fake, FIRST_TS).await;
    assert_eq!(updated["channel"], "C123");
    assert!(updated.to_string().contains("alice"), "{updated}");
}

/// DECIDE-18, NOTIFY-4: a proposal gets a Slack card saying it did not run, and a signed click
/// approves it like a parked call. The quickstart's offline agent proposes the write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proposal_gets_a_card_and_a_click_approves_it() {
    let fake = FakeSlack::start(BOT_TOKEN).await;
    let dir = tempfile::tempdir().unwrap();
    crate::quickstart::copy_dir(&crate::examples().join("quickstart"), dir.path());
    let toml_path = dir.path().join("airlock.toml");
    let toml = std::fs::read_to_string(&toml_path)
        .unwrap()
        .replace("allow = []", "allow = [\"127.0.0.1/32\"]");
    std::fs::write(&toml_path, format!("{toml}\n{}", slack(&fake.api_base()))).unwrap();
    let creds_path = dir.path().join("credentials.example.yml");
    let creds = std::fs::read_to_string(&creds_path).unwrap();
    let slack_creds = format!("slack:\n  bot: {BOT_TOKEN}\n  signing: {SIGNING_SECRET}\n");
    std::fs::write(&creds_path, format!("{creds}{slack_creds}")).unwrap();
    let server = Server::start(dir.path(), &[]);
    let addr: std::net::SocketAddr = server.addr.parse().unwrap();
    let run = crate::support::http(
        addr,
        "POST",
        "/v1/agents/concierge/run",
        Some("dev-mcp-token-change-me"),
        Some(json!({"input": "Draft an order for me"})),
    )
    .await
    .1;
    let id = run["proposals"][0]["id"].as_str().unwrap().to_owned();

    let posted = card(&fake, &id).await;
    let blocks = posted["blocks"].to_string();
    assert!(
        blocks.contains("Proposed, not run") && blocks.contains("Approve"),
        "{blocks}"
    );
    let base = format!("http://{}", server.addr);
    let body = click_body("U_ALICE", "approve", &id);
    let at = now();
    assert_eq!(
        click(&base, &body, at, &slack_signature(at, &body)).await,
        200
    );
    let (status, row, _) = crate::support::http(
        addr,
        "GET",
        &format!("/v1/invocations/{id}"),
        Some("dev-admin-token-change-me"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{row}");
    assert_eq!(row["decision"]["by"], "slack:U_ALICE", "{row}");
    assert_eq!(row["decision"]["decision"], "approved", "{row}");
}
