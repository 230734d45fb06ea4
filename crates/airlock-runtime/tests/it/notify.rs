//! The delivery worker against real receivers on loopback (docs/rules.md NOTIFY-11,
//! NOTIFY-12): every attempt goes through the egress guard as a request of its own, so a
//! destination is judged again each time, a redirect is never followed, and `410 Gone` ends a
//! delivery. The guard's resolver is injected: the receiver's name means what each test says.

use std::collections::VecDeque;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient, Lookup, Resolve};
use airlock_runtime::ledger::{
    InvocationId, NewInvocation, NewSession, NoticeRecord, SessionId, SqliteStore, Store,
    StoreConfig,
};
use airlock_runtime::notify::{self, Notifications};
use airlock_spec::{
    Approval, CredentialPath, Credentials, NotifyEvent, NotifySettings, WebhookSettings,
};
use airlock_testkit::Receiver;
use serde_json::json;
use tokio_util::sync::CancellationToken;

/// The receiver's host name, resolved by each test's resolver.
const HOST: &str = "hooks.receiver.com";
/// How long a test waits for the worker at most.
const WITHIN: Duration = Duration::from_secs(20);

/// Answers each lookup with the next of its answers; the last one stays.
#[derive(Debug)]
struct Rebinding(Mutex<VecDeque<IpAddr>>);

impl Rebinding {
    fn new(answers: impl IntoIterator<Item = IpAddr>) -> Arc<Self> {
        Arc::new(Self(Mutex::new(answers.into_iter().collect())))
    }
}

impl Resolve for Rebinding {
    fn lookup<'a>(&'a self, _name: &'a str) -> Lookup<'a> {
        let mut answers = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let answer = if answers.len() > 1 {
            answers.pop_front()
        } else {
            answers.front().copied()
        };
        Box::pin(std::future::ready(Ok(answer.into_iter().collect())))
    }
}

/// A ledger that tells one webhook at `port` of `HOST`, and a parked call's invocation id.
struct Told {
    store: Arc<dyn Store>,
    notifications: Arc<Notifications>,
    invocation: InvocationId,
    _dir: tempfile::TempDir,
}

async fn told(port: u16) -> Told {
    let secret = CredentialPath::try_from("hooks.secret").unwrap();
    let settings = NotifySettings {
        webhooks: vec![WebhookSettings {
            url: format!("http://{HOST}:{port}/hook"),
            secret: secret.clone(),
            previous_secrets: Vec::new(),
            events: NotifyEvent::ALL.to_vec(),
        }],
        slack: None,
    };
    let credentials = Credentials::from_pairs([(secret.as_str().to_owned(), "s3cret".to_owned())]);
    let notifications = Notifications::new(&settings, None, &credentials).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig {
        outbox: notify::routes(&settings),
        ..StoreConfig::default()
    };
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(&dir.path().join("ledger.sqlite"), config)
            .await
            .unwrap(),
    );
    let session = NewSession {
        channel: "mcp".into(),
        principal: Some("claude".into()),
        metadata: json!({}),
    };
    let session = store.create_session(SessionId::new(), session).await;
    let mut call = NewInvocation::new(session.unwrap().id, "c1", "refund", json!({}), "d");
    call.approval = Approval::Always;
    let invocation = store.record(call).await.unwrap().invocation.id;
    Told {
        store,
        notifications: Arc::new(notifications),
        invocation,
        _dir: dir,
    }
}

/// Runs the worker with `resolver` (loopback allowed, as `[egress] allow` would) until the
/// parked call's notice satisfies `done`; that notice.
async fn deliver_until(
    told: &Told,
    resolver: Arc<dyn Resolve>,
    done: impl Fn(&NoticeRecord) -> bool,
) -> NoticeRecord {
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    let egress = GuardedClient::builder(policy)
        .resolver(resolver)
        .build()
        .unwrap();
    let stop = CancellationToken::new();
    let worker = tokio::spawn(notify::deliver(
        Arc::clone(&told.store),
        egress,
        Arc::clone(&told.notifications),
        "test".into(),
        stop.clone(),
    ));
    let deadline = tokio::time::Instant::now() + WITHIN;
    let found = loop {
        let notices = told.store.notices_of(told.invocation).await.unwrap();
        if let Some(found) = notices.into_iter().find(&done) {
            break found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "not within {WITHIN:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    stop.cancel();
    worker.await.unwrap();
    found
}

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// NOTIFY-11: the receiver's name is resolved again at each attempt; once it points at a
/// private address the retry is refused by the guard and the receiver sees nothing more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_destination_that_turns_private_between_attempts_is_refused() {
    let receiver = Receiver::start().await;
    receiver.answer(&[500]);
    let told = told(receiver.port).await;
    let private = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 7));
    let resolver = Rebinding::new([LOOPBACK, private]);
    // The second attempt settled: its error replaced the first one's 500.
    let refused = deliver_until(&told, resolver, |r| {
        r.last_error
            .as_deref()
            .is_some_and(|e| !e.contains("HTTP 500"))
    })
    .await;
    let why = refused.last_error.unwrap_or_default();
    assert!(why.contains("not allowed"), "{why}");
    assert!(refused.delivered_at.is_none());
    assert_eq!(
        receiver.received().len(),
        1,
        "only the first attempt was sent"
    );
}

/// NOTIFY-11: a 302 is a failed attempt: its `Location` (another receiver) is never asked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_is_a_failed_attempt_and_never_followed() {
    let (receiver, elsewhere) = (Receiver::start().await, Receiver::start().await);
    receiver.redirect(302, &elsewhere.url());
    let told = told(receiver.port).await;
    let delivered = deliver_until(&told, Rebinding::new([LOOPBACK]), |r| {
        r.delivered_at.is_some()
    })
    .await;
    assert_eq!(
        delivered.notice.attempts, 2,
        "the 302, then the retry's 200"
    );
    let statuses: Vec<u16> = receiver.received().iter().map(|r| r.status).collect();
    assert_eq!(statuses, [302, 200]);
    assert!(elsewhere.received().is_empty(), "the Location was followed");
}

/// NOTIFY-12: `410 Gone` ends the delivery at once: one attempt, given up, never retried.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gone_is_final() {
    let receiver = Receiver::start().await;
    receiver.answer(&[410]);
    let told = told(receiver.port).await;
    let failed = deliver_until(&told, Rebinding::new([LOOPBACK]), |r| {
        r.failed_at.is_some() || r.notice.attempts > 1
    })
    .await;
    assert!(failed.failed_at.is_some(), "{failed:?}");
    assert_eq!(failed.notice.attempts, 1);
    assert_eq!(receiver.received().len(), 1, "exactly one attempt");
}
