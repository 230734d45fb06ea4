//! The credentials API (docs/rules.md CALL-13): a person sets, lists and revokes their own
//! credential with their own token — the principal is the token's, whatever the body says; an
//! admin lists and revokes anyone's; every refusal is precise and never echoes a secret.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{deployment_with, serve_in_process};

const ADMIN: &str = "admin-ops-7d793037a0760186574b0282f2f435e7";
const CAROL: &str = "mcp-carol-c4ca4238a0b923820dcc509a6f75849b";
const SECRET: &str = "carol-crm-token-1679091c5a880faf";

fn deployment() -> tempfile::TempDir {
    let toml = "[[admin.tokens]]\ncredential = \"airlock.ops\"\nprincipal = \"ops\"\n\
                [[mcp.tokens]]\ncredential = \"airlock.carol\"\nprincipal = \"carol\"\n\
                [credentials]\nfile = \"creds.yml\"\n\
                [connections.crm]\nbase_url = \"https://crm.example.com\"\nper_principal = true\n\
                [connections.erp]\nbase_url = \"https://erp.example.com\"\n";
    deployment_with(
        toml,
        &format!("airlock:\n  ops: {ADMIN}\n  carol: {CAROL}\n"),
    )
}

async fn send(request: reqwest::RequestBuilder) -> (StatusCode, Value, String) {
    let response = request.send().await.unwrap();
    let status = response.status();
    let text = response.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::Null),
        text,
    )
}

#[tokio::test]
async fn a_person_sets_lists_and_revokes_their_own_and_an_admin_revokes_anyones() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let (base, client) = (format!("http://{addr}/v1"), reqwest::Client::new());
    let put = |path: &str, token: &str, body: Value| {
        client
            .put(format!("{base}{path}"))
            .bearer_auth(token)
            .json(&body)
    };
    let (status, body, _) = send(put(
        "/credentials/crm",
        "nobody",
        json!({"credential": SECRET}),
    ))
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    let (status, body, text) = send(put(
        "/credentials/erp",
        CAROL,
        json!({"credential": SECRET}),
    ))
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    assert!(!text.contains(SECRET));
    let (status, body, text) = send(put(
        "/credentials/crm",
        CAROL,
        json!({"credential": 42, "principal": SECRET}),
    ))
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{body}");
    assert!(!text.contains(SECRET), "{text}");
    let (status, _, text) = send(put("/credentials/crm", CAROL, json!({"credential": ""}))).await;
    assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");

    let (status, body, text) = send(put(
        "/credentials/crm",
        CAROL,
        json!({"credential": SECRET}),
    ))
    .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    assert_eq!(body["principal"], "carol");
    assert!(!text.contains(SECRET));
    let stored = gateway.store().credentials(None).await.unwrap();
    assert_eq!((stored.len(), stored[0].principal.as_str()), (1, "carol"));

    let mine = client.get(format!("{base}/credentials")).bearer_auth(CAROL);
    let (status, body, text) = send(mine).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["credentials"][0]["digest"], stored[0].digest.as_str());
    assert!(!text.contains(SECRET));

    let theirs = client
        .delete(format!("{base}/principals/carol/credentials"))
        .bearer_auth(CAROL);
    assert_eq!(
        send(theirs).await.0,
        StatusCode::UNAUTHORIZED,
        "callers revoke only their own"
    );
    let revoke = client
        .delete(format!("{base}/principals/carol/credentials"))
        .bearer_auth(ADMIN);
    let (status, body, _) = send(revoke).await;
    assert_eq!(
        (status, body["revoked"].as_u64()),
        (StatusCode::OK, Some(1))
    );
    assert!(gateway.store().credentials(None).await.unwrap().is_empty());
}
