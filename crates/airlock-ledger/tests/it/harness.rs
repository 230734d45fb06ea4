//! Test fixtures: a store of either backend, a manual clock, and raw SQL access for tampering.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use airlock_ledger::{
    ManualClock, NewInvocation, NewSession, PgStore, SessionId, SqliteStore, Store, StoreConfig,
};
use serde_json::{Value, json};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::sqlite::{SqliteConnectOptions, SqlitePool};
use sqlx::{AssertSqlSafe, Column, Row};
use time::OffsetDateTime;

pub(crate) const TTL: Duration = Duration::from_secs(3600);
pub(crate) const LEASE: Duration = Duration::from_secs(30);
pub(crate) const DIGEST: &str = "digest-1";

/// Which backend a harness runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Sqlite,
    Postgres,
}

/// Direct database access, outside the ledger (to tamper, and to read a tool's own tables).
pub(crate) enum Raw {
    Sqlite(SqlitePool),
    Postgres(PgPool),
}

impl Raw {
    pub(crate) async fn exec(&self, sql: &str) -> u64 {
        let q = sqlx::query(AssertSqlSafe(sql.to_owned()));
        match self {
            Raw::Sqlite(p) => q.execute(p).await.unwrap().rows_affected(),
            Raw::Postgres(p) => {
                let q = sqlx::query(AssertSqlSafe(sql.to_owned()));
                q.execute(p).await.unwrap().rows_affected()
            }
        }
    }

    /// The one row `sql` selects, as column → JSON value: the columns named in `ints` as
    /// integers, the others as text (NULL as null), exactly as the ledger hashes stored rows.
    pub(crate) async fn row_json(&self, sql: &str, ints: &[&str]) -> BTreeMap<String, Value> {
        macro_rules! read {
            ($pool:expr) => {{
                let row = sqlx::query(AssertSqlSafe(sql.to_owned()))
                    .fetch_one($pool)
                    .await
                    .unwrap();
                row.columns()
                    .iter()
                    .map(|c| {
                        let name = c.name();
                        let value = if ints.contains(&name) {
                            json!(row.get::<Option<i64>, _>(name))
                        } else {
                            json!(row.get::<Option<String>, _>(name))
                        };
                        (name.to_owned(), value)
                    })
                    .collect()
            }};
        }
        match self {
            Raw::Sqlite(p) => read!(p),
            Raw::Postgres(p) => read!(p),
        }
    }

    pub(crate) async fn count(&self, sql: &str) -> i64 {
        match self {
            Raw::Sqlite(p) => sqlx::query(AssertSqlSafe(sql.to_owned()))
                .fetch_one(p)
                .await
                .unwrap()
                .get(0),
            Raw::Postgres(p) => sqlx::query(AssertSqlSafe(sql.to_owned()))
                .fetch_one(p)
                .await
                .unwrap()
                .get(0),
        }
    }
}

pub(crate) struct Harness {
    pub(crate) kind: Kind,
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: ManualClock,
    pub(crate) raw: Raw,
    /// SQLite: the database file; PostgreSQL: the schema.
    pub(crate) location: String,
    _dir: Option<tempfile::TempDir>,
}

/// Now, in whole seconds (so stored microseconds compare equal to test values).
pub(crate) fn start_time() -> OffsetDateTime {
    OffsetDateTime::from_unix_timestamp(OffsetDateTime::now_utc().unix_timestamp()).unwrap()
}

pub(crate) fn config(clock: &ManualClock) -> StoreConfig {
    StoreConfig {
        approval_ttl: TTL,
        clock: Arc::new(clock.clone()),
        ..StoreConfig::default()
    }
}

/// The PostgreSQL URL, or `None` to skip; in CI a missing URL fails the test.
pub(crate) fn pg_url() -> Option<String> {
    airlock_testkit::postgres_url()
}

/// Connect options for `schema` (a fresh schema per test keeps parallel tests apart).
pub(crate) fn pg_options(url: &str, schema: &str) -> PgConnectOptions {
    let opts: PgConnectOptions = url.parse().unwrap();
    opts.options([("search_path", schema)])
}

pub(crate) async fn fresh_schema(url: &str) -> String {
    let schema = format!("t_{}", uuid::Uuid::new_v4().simple());
    let admin = PgPoolOptions::new()
        .max_connections(1)
        .connect(url)
        .await
        .unwrap();
    sqlx::query(AssertSqlSafe(format!("CREATE SCHEMA {schema}")))
        .execute(&admin)
        .await
        .unwrap();
    admin.close().await;
    schema
}

impl Harness {
    pub(crate) async fn sqlite() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.db");
        let clock = ManualClock::new(start_time());
        let store = SqliteStore::open(&path, config(&clock)).await.unwrap();
        let raw = SqlitePool::connect_with(SqliteConnectOptions::new().filename(&path))
            .await
            .unwrap();
        Self {
            kind: Kind::Sqlite,
            store: Arc::new(store),
            clock,
            raw: Raw::Sqlite(raw),
            location: path.display().to_string(),
            _dir: Some(dir),
        }
    }

    pub(crate) async fn postgres() -> Option<Self> {
        let url = pg_url()?;
        let schema = fresh_schema(&url).await;
        let clock = ManualClock::new(start_time());
        let store = PgStore::connect(pg_options(&url, &schema), config(&clock))
            .await
            .unwrap();
        let raw = PgPoolOptions::new()
            .max_connections(2)
            .connect_with(pg_options(&url, &schema))
            .await
            .unwrap();
        Some(Self {
            kind: Kind::Postgres,
            store: Arc::new(store),
            clock,
            raw: Raw::Postgres(raw),
            location: schema,
            _dir: None,
        })
    }

    /// Another store on the same database, as a second process would open it.
    pub(crate) async fn second_store(&self) -> Arc<dyn Store> {
        self.reopen(config(&self.clock)).await
    }

    /// Another store on the same database with `config`.
    pub(crate) async fn reopen(&self, config: StoreConfig) -> Arc<dyn Store> {
        match self.kind {
            Kind::Sqlite => Arc::new(SqliteStore::open(&self.location, config).await.unwrap()),
            Kind::Postgres => {
                let url = pg_url().unwrap();
                Arc::new(
                    PgStore::connect(pg_options(&url, &self.location), config)
                        .await
                        .unwrap(),
                )
            }
        }
    }

    /// The harness clock's now.
    pub(crate) fn clock_now(&self) -> OffsetDateTime {
        airlock_ledger::Clock::now(&self.clock)
    }

    pub(crate) async fn session(&self) -> SessionId {
        self.session_for(Some("alice@example.com")).await
    }

    pub(crate) async fn session_for(&self, principal: Option<&str>) -> SessionId {
        self.store
            .create_session(
                SessionId::new(),
                NewSession {
                    channel: "mcp".into(),
                    principal: principal.map(str::to_owned),
                    metadata: json!({"client": "test"}),
                },
            )
            .await
            .unwrap()
            .id
    }

    /// A call with a fresh call id.
    pub(crate) fn call(&self, session: SessionId, tool: &str, arguments: Value) -> NewInvocation {
        NewInvocation::new(
            session,
            uuid::Uuid::new_v4().to_string(),
            tool,
            arguments,
            DIGEST,
        )
    }
}

/// Generates one test per backend for each case function in `crate::cases`.
macro_rules! both_backends {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let h = crate::harness::Harness::sqlite().await;
                    crate::cases::$case(&h).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $case() {
                    let Some(h) = crate::harness::Harness::postgres().await else { return };
                    crate::cases::$case(&h).await;
                }
            )*
        }
    };
}
pub(crate) use both_backends;
