//! OPS-86 on both backends: a ledger that a newer release migrated — a migration version this
//! build does not know — opens and records calls, as an older replica must during a rolling
//! upgrade (and when it restarts then); a known migration whose text changed is still refused.

use serde_json::json;

use crate::harness::{Harness, Kind};

/// A `_sqlx_migrations` row of `version` with checksum `checksum` (one byte, in hex).
async fn applied(h: &Harness, version: i64, checksum: &str) {
    let checksum = match h.kind {
        Kind::Sqlite => format!("X'{checksum}'"),
        Kind::Postgres => format!("'\\x{checksum}'::bytea"),
    };
    let sql = format!(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES ({version}, 'a newer release', TRUE, {checksum}, 0)"
    );
    h.raw.exec(&sql).await;
}

pub(crate) async fn ops_86_a_ledger_a_newer_release_migrated_opens(h: &Harness) {
    applied(h, 999_999, "00").await;
    // `second_store` unwraps the open: a refusal fails here.
    let older = h.second_store().await;
    let session = h.session().await;
    let recorded = older
        .record(h.call(session, "crm__read", json!({"id": 1})))
        .await
        .unwrap();
    assert!(recorded.created);
}

pub(crate) async fn ops_86_an_edited_migration_is_refused(h: &Harness) {
    let sql = "UPDATE _sqlx_migrations SET checksum = (SELECT checksum FROM _sqlx_migrations \
               WHERE version = 2) WHERE version = 1";
    assert_eq!(h.raw.exec(sql).await, 1);
    let refused = match h.kind {
        Kind::Sqlite => {
            airlock_ledger::SqliteStore::open(&h.location, crate::harness::config(&h.clock))
                .await
                .err()
        }
        Kind::Postgres => {
            let url = crate::harness::pg_url().unwrap();
            let options = crate::harness::pg_options(&url, &h.location);
            airlock_ledger::PgStore::connect(options, crate::harness::config(&h.clock))
                .await
                .err()
        }
    };
    let refused = refused.expect("a changed migration must be refused");
    assert!(
        format!("{refused:?}").contains("VersionMismatch(1)"),
        "{refused:?}"
    );
}
