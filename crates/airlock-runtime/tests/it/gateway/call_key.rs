//! MCP-22: a `tools/call` re-sent under the client's own call key is the call it first
//! recorded — one row, one run, the same invocation in every reply — for the same principal on
//! the same endpoint scope; another principal's key is another call.

use airlock_mcp::{CallKey, Caller, HostError, HostOutcome, ToolHost};

use super::*;

on_both_backends!(
    a_resent_call_is_one_row_and_one_run,
    concurrent_resends_are_one_row,
    a_resent_parked_call_names_the_same_invocation,
);

fn caller(principal: &str) -> Caller {
    Caller {
        principal: principal.into(),
        groups: Vec::new(),
        ..Default::default()
    }
}

async fn send(
    f: &Fixture,
    who: &str,
    key: &str,
    amount: i64,
) -> Result<airlock_mcp::HostCall, HostError> {
    let key = CallKey::new(key).unwrap();
    let arguments = json!({ "amount": amount });
    f.host()
        .call_tool_keyed(
            &ScopeId::Gateway,
            &caller(who),
            "count",
            arguments,
            Some(&key),
        )
        .await
}

async fn a_resent_call_is_one_row_and_one_run(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Never), "").await else {
        return;
    };
    let first = send(&f, "ada", "k-1", 1).await.unwrap();
    let again = send(&f, "ada", "k-1", 1).await.unwrap();
    assert_eq!(again.invocation_id, first.invocation_id);
    assert_eq!(again.outcome, first.outcome);
    assert!(matches!(
        first.outcome,
        HostOutcome::Completed {
            is_error: false,
            ..
        }
    ));
    assert_eq!(f.runs(), 1);
    let id = first.invocation_id.parse().unwrap();
    let row = f.gateway.store().get(id).await.unwrap();
    let rows = f.gateway.store().session_invocations(row.session_id).await;
    assert_eq!(rows.unwrap().len(), 1);
    // Another principal's key is its own call, and so is a call with no key.
    let bob = send(&f, "bob", "k-1", 1).await.unwrap();
    assert_ne!(bob.invocation_id, first.invocation_id);
    let unkeyed = f
        .host()
        .call_tool(
            &ScopeId::Gateway,
            &caller("ada"),
            "count",
            json!({"amount": 1}),
        )
        .await
        .unwrap();
    assert_ne!(unkeyed.invocation_id, first.invocation_id);
    assert_eq!(f.runs(), 3);
    // The same key for other arguments is refused, not answered with the first result.
    let other = send(&f, "ada", "k-1", 2).await.unwrap_err();
    assert!(
        matches!(&other, HostError::InvalidParams(m) if m.contains("k-1")),
        "{other:?}"
    );
    assert_eq!(f.runs(), 3);
}

async fn concurrent_resends_are_one_row(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Never), "").await else {
        return;
    };
    let sends: Vec<_> = (0..4).map(|_| send(&f, "ada", "same", 7)).collect();
    let replies = futures::future::join_all(sends).await;
    let ids: Vec<String> = replies
        .into_iter()
        .map(|r| r.unwrap().invocation_id)
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_eq!(f.runs(), 1);
    let row = f
        .gateway
        .store()
        .get(ids[0].parse().unwrap())
        .await
        .unwrap();
    let rows = f.gateway.store().session_invocations(row.session_id).await;
    assert_eq!(rows.unwrap().len(), 1);
}

async fn a_resent_parked_call_names_the_same_invocation(backend: Backend) {
    let Some(f) = fixture(backend, policy(Approval::Always), "").await else {
        return;
    };
    let first = send(&f, "ada", "01J9ZQ8K3W", 5).await.unwrap();
    assert!(first.is_parked(), "{first:?}");
    let again = send(&f, "ada", "01J9ZQ8K3W", 5).await.unwrap();
    assert_eq!(again.invocation_id, first.invocation_id);
    assert_eq!(again.outcome, first.outcome);
    let id = first.invocation_id.parse().unwrap();
    let approved = f
        .gateway
        .store()
        .decide(id, "olga", Decision::Approve)
        .await;
    approved.unwrap();
    // After the approval the re-send runs it (once) and answers with its result.
    let settled = send(&f, "ada", "01J9ZQ8K3W", 5).await.unwrap();
    assert_eq!(settled.invocation_id, first.invocation_id);
    assert!(matches!(
        settled.outcome,
        HostOutcome::Completed {
            is_error: false,
            ..
        }
    ));
    assert_eq!(send(&f, "ada", "01J9ZQ8K3W", 5).await.unwrap(), settled);
    assert_eq!(f.runs(), 1);
}

#[test]
fn call_keys_are_short_and_plain() {
    assert!(CallKey::new("3f2c9a1e-7b1d-4c55-9a43-0d6c1b2e9f10").is_ok());
    assert!(CallKey::new("a+b/c=").is_ok());
    for bad in ["", "has space", "quote\"", "é", &"k".repeat(129)] {
        assert!(CallKey::new(bad).is_err(), "{bad:?}");
    }
    let meta = json!({"io.airlock/call_key": 7});
    assert!(CallKey::from_meta(meta.as_object()).is_err());
    assert_eq!(CallKey::from_meta(None), Ok(None));
}
