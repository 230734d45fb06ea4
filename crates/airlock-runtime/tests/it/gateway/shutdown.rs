//! OPS-9 from the gateway's side: a gateway tied to its serving process's shutdown ends its
//! long polls with the process's token, and runs an approval's call on the process's tracked
//! tasks — so the process, which waits for those tasks before exiting, never exits under it.

use airlock_runtime::decisions;
use tokio::sync::Notify;
use tokio::time::timeout;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::*;

/// A local tool that says when it starts and finishes only once let go.
struct Held {
    started: Arc<Notify>,
    release: Arc<Notify>,
}

impl LocalTool for Held {
    fn definition(&self) -> ToolDefinition {
        ToolDefinition {
            name: ToolName::try_from("held").unwrap(),
            description: "Finishes when let go.".into(),
            input_schema: json!({"type": "object"}),
        }
    }
    fn policy(&self) -> Policy {
        policy(Approval::Always)
    }
    fn invoke(&self, _arguments: Value) -> LocalBody {
        let (started, release) = (Arc::clone(&self.started), Arc::clone(&self.release));
        LocalBody::Plain(Box::pin(async move {
            started.notify_one();
            release.notified().await;
            Ok(json!("done"))
        }))
    }
}

#[tokio::test]
async fn an_approvals_call_runs_on_the_tasks_shutdown_waits_for() {
    let dir = tempfile::tempdir().unwrap();
    let Some(store) = store(Backend::Sqlite, &dir).await else {
        return;
    };
    let (started, release) = (Arc::new(Notify::new()), Arc::new(Notify::new()));
    let tool = Arc::new(Held {
        started: Arc::clone(&started),
        release: Arc::clone(&release),
    });
    let mut scope = Scope::new(ScopeId::Gateway);
    scope.add(spec_of(tool.as_ref())).unwrap();
    let (long_polls, tasks) = (CancellationToken::new(), TaskTracker::new());
    let egress = GuardedClient::new(EgressPolicy::default()).unwrap();
    let gateway = Gateway::builder(Arc::clone(&store), egress, Arc::new(Credentials::default()))
        .scope(scope)
        .unwrap()
        .local(tool)
        .shutdown(long_polls.clone(), tasks.clone())
        .build();
    let gateway = Arc::new(gateway);
    let ctx = ctx_on(&gateway, "ada", "c1").await;
    let parked = gateway.call(&ctx, "held", json!({})).await.unwrap();
    let id = expect(parked, OutcomeKind::Parked).id;

    decisions::decide(&gateway, id, "alice", Decision::Approve, "api")
        .await
        .unwrap();
    timeout(Duration::from_secs(15), started.notified())
        .await
        .expect("the approved call never started");
    // What `serve` does at the signal: cancel, close, wait.
    assert!(!gateway.long_polls_ended());
    long_polls.cancel();
    assert!(gateway.long_polls_ended());
    tasks.close();
    assert_eq!(
        tasks.len(),
        1,
        "the running call is one of the process's tasks"
    );
    release.notify_one();
    timeout(Duration::from_secs(15), tasks.wait())
        .await
        .expect("the tracked call never ended");
    let row = store.get(id).await.unwrap();
    assert_eq!(row.state, InvocationState::Succeeded, "{row:?}");
}
