//! LEDGER-48 and LEDGER-49 on both backends: a call the access policy refuses is born
//! `denied`, decided by the access policy, never claimable; tool pins are stored, replaced and
//! removed, and read back equal.

use airlock_ledger::{
    ACCESS_POLICY, DecisionKind, FREEZE, Freeze, FreezeTarget, InvocationState, Refusal, Refuser,
    ToolPin,
};
use serde_json::json;

use crate::harness::Harness;

pub(crate) async fn ledger_48_a_refused_call_is_born_denied(h: &Harness) {
    let session = h.session_for(Some("ada")).await;
    let mut call = h.call(session, "crm__delete", json!({"id": 7}));
    call.refusal = Some(Refusal {
        by: Refuser::AccessPolicy,
        reason: "not permitted".into(),
    });
    let recorded = h.store.record(call).await.unwrap();
    let row = recorded.invocation;
    assert!(recorded.created);
    assert_eq!(row.state, InvocationState::Denied);
    let decision = row.decision.clone().unwrap();
    assert_eq!(decision.by, ACCESS_POLICY);
    assert_eq!(decision.decision, DecisionKind::Denied);
    assert_eq!(decision.reason.as_deref(), Some("not permitted"));
    assert!(row.expires_at.is_none(), "nobody waits for it");
    assert!(
        h.store
            .claim(row.id, "me", std::time::Duration::from_secs(5))
            .await
            .is_err()
    );
    assert_eq!(
        h.store.get(row.id).await.unwrap(),
        row,
        "read back as written"
    );
    assert!(h.store.verify().await.unwrap().first_break.is_none());
}

/// LEDGER-73: a freeze is stored once per target (a second freeze keeps the first), read back
/// by every store, lifted with its event, and a call it refuses is born `denied` in the
/// freeze's name.
pub(crate) async fn ledger_73_freezes_are_stored_once_and_lifted(h: &Harness) {
    let tool = FreezeTarget::Tool("crm__delete".into());
    let first = Freeze {
        target: tool.clone(),
        reason: "incident 42".into(),
        by: "ops".into(),
        at: time::OffsetDateTime::UNIX_EPOCH,
    };
    let stored = h.store.freeze(first.clone()).await.unwrap();
    assert_eq!(
        (stored.reason.as_str(), stored.by.as_str()),
        ("incident 42", "ops")
    );
    assert_ne!(
        stored.at,
        time::OffsetDateTime::UNIX_EPOCH,
        "the ledger's time"
    );
    let again = Freeze {
        reason: "another".into(),
        by: "bob".into(),
        ..first.clone()
    };
    assert_eq!(
        h.store.freeze(again).await.unwrap(),
        stored,
        "the first freeze stands"
    );
    let everything = Freeze {
        target: FreezeTarget::Everything,
        ..first.clone()
    };
    h.store.freeze(everything).await.unwrap();
    let listed = h.store.freezes().await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&stored));
    let blank = Freeze {
        reason: " ".into(),
        target: FreezeTarget::Agent("support".into()),
        ..first.clone()
    };
    assert!(matches!(
        h.store.freeze(blank).await,
        Err(airlock_ledger::LedgerError::Invalid(_))
    ));
    let long = Freeze {
        reason: "x".repeat(1_001),
        target: FreezeTarget::Agent("support".into()),
        ..first.clone()
    };
    assert!(matches!(
        h.store.freeze(long).await,
        Err(airlock_ledger::LedgerError::Invalid(m)) if m.contains("1000 characters")
    ));
    let lifted = h.store.unfreeze(tool.clone(), "ops".into()).await.unwrap();
    assert_eq!(lifted, Some(stored));
    assert_eq!(h.store.unfreeze(tool, "ops".into()).await.unwrap(), None);
    let left = h.store.freezes().await.unwrap();
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].target, FreezeTarget::Everything);
    let session = h.session_for(Some("ada")).await;
    let mut call = h.call(session, "crm__delete", json!({"id": 8}));
    call.refusal = Some(Refusal {
        by: Refuser::Freeze,
        reason: "frozen: everything (incident 42)".into(),
    });
    let row = h.store.record(call).await.unwrap().invocation;
    assert_eq!(row.state, InvocationState::Denied);
    assert_eq!(row.decision.unwrap().by, FREEZE);
}

fn pin(tool: &str, description: &str, by: &str) -> ToolPin {
    ToolPin {
        connection: "crm".into(),
        tool: tool.into(),
        definition: json!({"name": tool, "description": description, "inputSchema": {"type": "object"}}),
        pinned_by: by.into(),
        pinned_at: time::OffsetDateTime::UNIX_EPOCH,
    }
}

pub(crate) async fn ledger_49_tool_pins_are_replaced_and_removed(h: &Harness) {
    assert!(h.store.tool_pins().await.unwrap().is_empty());
    h.store
        .pin_tool(pin("search", "Search.", "trust on first use"))
        .await
        .unwrap();
    h.store
        .pin_tool(pin("delete", "Delete.", "trust on first use"))
        .await
        .unwrap();
    h.store
        .pin_tool(pin("search", "Search better.", "alice"))
        .await
        .unwrap();
    let pins = h.store.tool_pins().await.unwrap();
    let names: Vec<_> = pins
        .iter()
        .map(|p| (p.tool.as_str(), p.pinned_by.as_str()))
        .collect();
    assert_eq!(
        names,
        [("delete", "trust on first use"), ("search", "alice")]
    );
    assert_eq!(pins[1].definition["description"], "Search better.");
    h.store
        .unpin_tool("crm".into(), "delete".into())
        .await
        .unwrap();
    let pins = h.store.tool_pins().await.unwrap();
    assert_eq!(pins.len(), 1);
    assert_eq!(
        pins[0].definition,
        pin("search", "Search better.", "").definition
    );
}
