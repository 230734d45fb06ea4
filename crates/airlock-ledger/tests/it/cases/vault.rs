//! Credentials per principal in the ledger (docs/rules.md LEDGER-81 … LEDGER-84, NOTIFY-14): a
//! claimed call parks for its principal's credential, is released once by the commit that sets
//! it, records which credential its attempt carried, and a revocation is an event every replica
//! can see; a call parked while the credential was being set is released at once.

use std::sync::Arc;

use airlock_ledger::{
    CredentialUse, InvocationState, NotifyEvent, OutboxRoute, SealedCredential, Store,
};
use serde_json::json;

use crate::harness::{Harness, LEASE, config};

const ALICE: &str = "alice@example.com";

fn sealed(principal: &str, digest: &str) -> SealedCredential {
    SealedCredential {
        connection: "crm".into(),
        principal: principal.into(),
        kind: "secret".into(),
        sealed: format!("v1.0000.{digest}"),
        refresh_sealed: None,
        expires_at: None,
        issuer: None,
        digest: digest.into(),
        set_by: principal.into(),
        set_at: time::OffsetDateTime::now_utc(),
    }
}

async fn claimed(h: &Harness, store: &Arc<dyn Store>) -> airlock_ledger::Invocation {
    let s = h.session().await;
    let mut call = h.call(s, "crm_export", json!({}));
    call.principal = Some(ALICE.into());
    let id = store.record(call).await.unwrap().invocation.id;
    store.claim(id, "w1", LEASE).await.unwrap()
}

/// LEDGER-82, LEDGER-84, NOTIFY-14: park, notice, release once, run, record the use.
pub(crate) async fn ledger_82_a_call_waits_for_its_credential_and_runs_once(h: &Harness) {
    let store = h
        .reopen(airlock_ledger::StoreConfig {
            outbox: vec![OutboxRoute {
                destination: "webhook:a".into(),
                events: vec![NotifyEvent::CredentialRequired],
            }],
            ..config(&h.clock)
        })
        .await;
    let epoch = store.credentials_epoch().await.unwrap();
    let row = claimed(h, &store).await;
    let how = "waiting for alice's credential";
    let parked = store
        .await_credential(row.id, "w1", "crm".into(), how.into())
        .await
        .unwrap();
    assert_eq!(parked.state, InvocationState::AwaitingCredential);
    assert_eq!(parked.error.as_ref().unwrap().message, how);
    assert!(parked.expires_at.is_some());
    let notices = store.notices_of(row.id).await.unwrap();
    assert_eq!(notices.len(), 1);
    assert_eq!(notices[0].notice.event, NotifyEvent::CredentialRequired);
    assert!(
        store
            .await_credential(row.id, "w1", "crm".into(), how.into())
            .await
            .is_err(),
        "only a running row parks"
    );

    assert!(
        store
            .set_credential(sealed("bob", "b0b"))
            .await
            .unwrap()
            .is_empty(),
        "bob's releases nothing of alice's"
    );
    assert_eq!(
        store.set_credential(sealed(ALICE, "a11ce")).await.unwrap(),
        [row.id]
    );
    assert_eq!(
        store.get(row.id).await.unwrap().state,
        InvocationState::Approved
    );
    assert!(
        store
            .set_credential(sealed(ALICE, "a11ce2"))
            .await
            .unwrap()
            .is_empty(),
        "released once"
    );
    assert_eq!(store.credentials_epoch().await.unwrap(), epoch + 3);

    store.claim(row.id, "w2", LEASE).await.unwrap();
    let used = CredentialUse {
        connection: "crm".into(),
        principal: ALICE.into(),
        kind: "secret".into(),
        issuer: None,
        digest: "a11ce2".into(),
    };
    let done = store
        .finish_with_credential(row.id, "w2", Ok(json!({"ok": true})), used.clone())
        .await
        .unwrap();
    assert_eq!(done.state, InvocationState::Succeeded);
    assert_eq!(done.credential_use, Some(used.clone()));
    assert_eq!(store.get(row.id).await.unwrap().credential_use, Some(used));

    assert_eq!(
        store
            .revoke_credential(None, ALICE.into(), "ops".into())
            .await
            .unwrap(),
        1
    );
    assert!(
        store
            .credential(("crm").into(), ALICE.into())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(store.credentials_epoch().await.unwrap(), epoch + 4);
    assert_eq!(
        store.credentials(None).await.unwrap().len(),
        1,
        "bob's stays"
    );
}

/// LEDGER-82: a call that parks after its credential was set (the executor looked just
/// before) is released in its own transaction, so it never waits for what exists.
pub(crate) async fn ledger_82_a_call_parked_after_its_credential_was_set_is_released(h: &Harness) {
    let store = Arc::clone(&h.store);
    let row = claimed(h, &store).await;
    store.set_credential(sealed(ALICE, "a11ce")).await.unwrap();
    let parked = store
        .await_credential(row.id, "w1", "crm".into(), "late".into())
        .await
        .unwrap();
    assert_eq!(parked.state, InvocationState::Approved);
}

/// LEDGER-82: nobody sets it: the call expires after the approval TTL, by the sweeper.
pub(crate) async fn ledger_82_a_call_nobody_gave_a_credential_expires(h: &Harness) {
    let store = Arc::clone(&h.store);
    let row = claimed(h, &store).await;
    store
        .await_credential(row.id, "w1", "crm".into(), "wait".into())
        .await
        .unwrap();
    h.clock
        .advance(crate::harness::TTL + std::time::Duration::from_secs(1));
    store.sweep(h.clock_now()).await.unwrap();
    assert_eq!(
        store.get(row.id).await.unwrap().state,
        InvocationState::Expired
    );
    assert!(
        store
            .set_credential(sealed(ALICE, "late"))
            .await
            .unwrap()
            .is_empty()
    );
}
