//! Connect your account over HTTP through a real `airlock serve` on SQLite (docs/rules.md
//! CALL-12, CALL-15), against the testkit's loopback authorization server: a call through a
//! per-principal connection declared with `[connections.crm.oauth]` waits (nothing sent) until
//! its principal connects; the link `POST /v1/credentials/crm/connect` gives them sends the
//! browser to the authorization server with a PKCE challenge, the server sends it back to the
//! callback, which redeems the code with the verifier and releases the call; the call then runs
//! once, carrying the token the server minted for that account. A tampered ticket or state, and
//! a callback replayed (refused before the server is asked again, LEDGER-85), get a 400 page; no token is in the replies or the log.

use std::time::Duration;

use airlock_testkit::{Issuer, KeyKind, Receiver, free_port};
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::{Value, json};

use crate::airlock;
use crate::support::{Server, deployment_with, mcp_request};

const CAROL: &str = "mcp-carol-4b227777d4dd1fc61c6f884f48641d02";

/// A deployment on SQLite whose `crm` connects each person's account at `issuer`; its
/// public URL is `http://127.0.0.1:{port}`, where the server will listen.
fn deployment(port: u16, upstream: u16, issuer: &str) -> tempfile::TempDir {
    let toml = format!(
        "[[mcp.tokens]]\ncredential = \"airlock.carol\"\nprincipal = \"carol\"\n\
         [egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n\
         [server]\npublic_url = \"http://127.0.0.1:{port}\"\n\
         [connections.crm]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{upstream}\"\nper_principal = true\n\
         [connections.crm.oauth]\nauthorization_endpoint = \"{issuer}/authorize\"\ntoken_endpoint = \"{issuer}/token\"\nclient_id = \"airlock\"\nscopes = [\"crm.read\"]\n"
    );
    let dir = deployment_with(&toml, &format!("airlock:\n  carol: {CAROL}\n"));
    let apis = dir.path().join("apis");
    std::fs::create_dir_all(&apis).unwrap();
    std::fs::write(apis.join("crm.yml"), crate::personal::API).unwrap();
    dir
}

/// `tools/call` of `tool` with `arguments` as carol; the JSON-RPC reply's text and result.
async fn call(base: &str, tool: &str, arguments: Value) -> (String, Value) {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}});
    let reply = mcp_request(base)
        .bearer_auth(CAROL)
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(reply.status().as_u16(), 200);
    let text = reply.text().await.unwrap();
    let result = serde_json::from_str::<Value>(&text).unwrap()["result"].clone();
    (text, result)
}

/// The claims of the JWT bearer token in an `Authorization` header.
fn claims_of(authorization: &str) -> Value {
    let token = authorization.strip_prefix("Bearer ").unwrap();
    let payload = token.split('.').nth(1).unwrap();
    serde_json::from_slice(&URL_SAFE_NO_PAD.decode(payload).unwrap()).unwrap()
}

/// A GET a browser makes, redirects not followed; the status, `Location` and body.
async fn visit(browser: &reqwest::Client, url: &str) -> (u16, String, String) {
    let response = browser.get(url).send().await.unwrap();
    let status = response.status().as_u16();
    let location = response
        .headers()
        .get("location")
        .map(|l| l.to_str().unwrap().to_owned())
        .unwrap_or_default();
    (status, location, response.text().await.unwrap())
}

/// `url` with the value of query parameter `key` altered in its middle.
fn tampered(url: &str, key: &str) -> String {
    let mut parsed = url::Url::parse(url).unwrap();
    let pairs: Vec<(String, String)> = parsed
        .query_pairs()
        .map(|(k, v)| {
            let mut v = v.into_owned();
            if k == key {
                let middle = v.len() / 2;
                let flipped = if &v[middle..=middle] == "A" { "B" } else { "A" };
                v.replace_range(middle..=middle, flipped);
            }
            (k.into_owned(), v)
        })
        .collect();
    parsed.query_pairs_mut().clear().extend_pairs(pairs);
    parsed.to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connecting_an_account_over_http_runs_the_waiting_call_once_with_its_token() {
    let (upstream, issuer) = (Receiver::start().await, Issuer::start(KeyKind::Es256).await);
    issuer.set_subject("carol@crm");
    // The public URL must be known before the server starts: a port the OS picked just now.
    let port = free_port();
    let dir = deployment(port, upstream.port, &issuer.url());
    let mut command = airlock();
    command
        .arg("serve")
        .arg(dir.path())
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .env("NO_COLOR", "1")
        .env("AIRLOCK_LOG", "debug");
    let server = Server::spawn(command);
    let base = format!("http://{}", server.addr);
    let mut replies = String::new();

    // CALL-12: no account connected yet: the call waits and says how to connect; nothing sent.
    let (text, waiting) = call(&base, "crm_whoami", json!({"who": "carol"})).await;
    replies += &text;
    let parked = &waiting["structuredContent"];
    assert_eq!(parked["status"], "awaiting_credential", "{text}");
    let message = parked["message"].as_str().unwrap();
    assert!(
        message.contains("POST /v1/credentials/crm/connect"),
        "{message}"
    );
    let id = parked["invocation_id"].as_str().unwrap().to_owned();
    assert!(upstream.received().is_empty(), "nothing was sent");

    // CALL-15: the link, made for the token's principal.
    let link: Value = reqwest::Client::new()
        .post(format!("{base}/v1/credentials/crm/connect"))
        .bearer_auth(CAROL)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let link = link["url"].as_str().unwrap().to_owned();
    assert!(
        link.starts_with(&format!("{base}/v1/connect/crm?ticket=")),
        "{link}"
    );

    let browser = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    // A tampered ticket is refused with a page, before anything goes to the server.
    let (status, _, page) = visit(&browser, &tampered(&link, "ticket")).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("Not connected"), "{page}");
    // The server's one alive after a refused request.
    assert!(issuer.token_requests().is_empty());

    let (status, authorize, _) = visit(&browser, &link).await;
    // 303 See Other: the browser GETs the authorization server.
    assert!(matches!(status, 302 | 303), "{status}");
    assert!(
        authorize.starts_with(&format!("{}/authorize?", issuer.url())),
        "{authorize}"
    );
    let asked: Vec<(String, String)> = url::Url::parse(&authorize)
        .unwrap()
        .query_pairs()
        .into_owned()
        .collect();
    let asked = |k: &str| asked.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(asked("code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(
        asked("redirect_uri"),
        Some(format!("{base}/v1/connect/callback"))
    );
    let (status, callback, _) = visit(&browser, &authorize).await;
    assert_eq!(status, 302);
    assert!(
        callback.starts_with(&format!("{base}/v1/connect/callback?")),
        "{callback}"
    );
    // A tampered state is refused, and spends nothing: the true one still connects.
    let (status, _, page) = visit(&browser, &tampered(&callback, "state")).await;
    assert_eq!(status, 400, "{page}");
    assert!(issuer.token_requests().is_empty());
    let (status, _, page) = visit(&browser, &callback).await;
    assert_eq!(status, 200, "{page}");
    assert!(
        page.contains("carol's account is connected to crm"),
        "{page}"
    );
    // The code was redeemed once, with the PKCE verifier.
    let redeemed = issuer.token_requests();
    assert_eq!(redeemed.len(), 1);
    assert_eq!(redeemed[0].grant_type, "authorization_code");
    assert!(redeemed[0].form.contains_key("code_verifier"));
    // LEDGER-85: a replayed callback (a reloaded page) is refused with a 400 page before it
    // reaches the authorization server, which could otherwise revoke what the code issued.
    let (status, _, page) = visit(&browser, &callback).await;
    assert_eq!(status, 400, "{page}");
    assert!(page.contains("was used already"), "{page}");
    assert_eq!(issuer.token_requests().len(), 1, "the replay sent nothing");

    // The released call runs (the worker, or this await, whichever claims it) once.
    let args = json!({"invocation_id": id, "wait_seconds": 20});
    let (text, settled) = call(&base, "airlock_await_decision", args).await;
    replies += &text;
    let settled = &settled["structuredContent"];
    assert_eq!(settled["status"], "completed", "{text}");
    // Bounded: a second run, had there been one, would land within this look.
    for _ in 0..20 {
        if upstream.received().len() > 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let sent = upstream.received();
    assert_eq!(sent.len(), 1, "the released call ran once");
    let authorization = sent[0].header("authorization");
    let claims = claims_of(&authorization);
    assert_eq!(claims["sub"], "carol@crm", "{claims}");
    assert_eq!(claims["iss"], issuer.url(), "{claims}");
    assert_eq!(
        serde_json::from_slice::<Value>(&sent[0].body).unwrap()["who"],
        "carol"
    );

    // The access token is nowhere but at the upstream.
    let token = authorization.strip_prefix("Bearer ").unwrap();
    let signature = token.rsplit('.').next().unwrap();
    assert!(!replies.contains(signature), "a reply holds the token");
    let log = server.log().join("\n");
    assert!(!log.contains(signature), "the log holds the token");
}
