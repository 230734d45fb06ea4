//! `/inbox/credentials` (docs/rules.md INBOX-14): the signed-in person sets and revokes their
//! own credential for a per-principal connection, only with the session's CSRF token; the page
//! shows the digest, never the secret, and offers a connect link where the connection connects
//! accounts.

use crate::inbox::ALICE;
use crate::support::inbox_client::InboxClient;
use crate::support::{deployment_with, serve_in_process};

const SECRET: &str = "alice-crm-secret-9a0b1c2d";

fn deployment() -> tempfile::TempDir {
    let toml = "[server]\npublic_url = \"https://airlock.example.com\"\n\
                [[admin.tokens]]\ncredential = \"airlock.alice\"\nprincipal = \"alice\"\n\
                [credentials]\nfile = \"creds.yml\"\n\
                [connections.crm]\nbase_url = \"https://crm.example.com\"\nper_principal = true\n\
                [connections.mail]\nbase_url = \"https://mail.example.com\"\nper_principal = true\n\
                [connections.mail.oauth]\nauthorization_endpoint = \"https://id.example.com/authorize\"\n\
                token_endpoint = \"https://id.example.com/token\"\nclient_id = \"airlock\"\n";
    deployment_with(toml, &format!("airlock:\n  alice: {ALICE}\n"))
}

#[tokio::test]
async fn a_person_sets_and_revokes_their_own_credential() {
    let dir = deployment();
    let (addr, gateway) = serve_in_process(dir.path()).await;
    let base = format!("http://{addr}");
    let mut inbox = InboxClient::signed_in(&base, ALICE).await;
    let page = inbox.get("/inbox/credentials").await;
    assert!(
        page.body.contains("crm") && page.body.contains("Not set."),
        "{}",
        page.body
    );
    assert!(
        page.body.contains("/v1/connect/mail?ticket="),
        "{}",
        page.body
    );

    let forged = inbox
        .post(
            "/inbox/credentials/set",
            &[("csrf", "nope"), ("connection", "crm"), ("secret", SECRET)],
        )
        .await;
    assert_eq!(forged.status, 403, "{}", forged.body);
    assert!(gateway.store().credentials(None).await.unwrap().is_empty());

    let csrf = inbox.csrf("/inbox/credentials").await;
    let set = inbox
        .post(
            "/inbox/credentials/set",
            &[("csrf", &csrf), ("connection", "crm"), ("secret", SECRET)],
        )
        .await;
    assert_eq!((set.status, set.location()), (303, "/inbox/credentials"));
    let stored = gateway.store().credentials(None).await.unwrap();
    assert_eq!((stored.len(), stored[0].principal.as_str()), (1, "alice"));
    let page = inbox.get("/inbox/credentials").await;
    assert!(page.body.contains(&stored[0].digest), "{}", page.body);
    assert!(
        page.body.contains("Your credential for crm is set"),
        "{}",
        page.body
    );
    assert!(!page.body.contains(SECRET));

    let revoked = inbox
        .post(
            "/inbox/credentials/revoke",
            &[("csrf", &csrf), ("connection", "crm")],
        )
        .await;
    assert_eq!(revoked.status, 303);
    assert!(gateway.store().credentials(None).await.unwrap().is_empty());
}
