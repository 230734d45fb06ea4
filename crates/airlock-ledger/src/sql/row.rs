//! Database rows (private) and their one conversion each way into domain types.
//!
//! A row's content hash is SHA-256 over the canonical JSON of the row *as stored*, so both
//! backends hash identical bytes and any edit of any column changes the hash.

use std::str::FromStr;

use airlock_spec::json_sha256;
use serde::Serialize;
use serde_json::Value;

use crate::sql::db::{DbRow, SqlValue};
use crate::vocabulary::clock::{from_micros, to_micros};
use crate::vocabulary::error::{LedgerError, ToolError, ToolErrorKind};
use crate::vocabulary::model::{DecisionRecord, Invocation, Lease, ResolutionRecord, Run, Session};

/// Every column of `invocations`, in the order of [`InvocationRow::binds`].
pub(crate) const INVOCATION_COLUMNS: &str = "id, session_id, run_id, call_id, tool, arguments, \
    arguments_hash, source_kind, effect, approval, mode, kind, state, version, result, \
    error_kind, error_message, idempotency_key, principal, definitions_digest, approval_ref, \
    decided_by, decision, decision_reason, decided_at, resolved_by, resolution, \
    resolution_note, resolved_at, expires_at, lease_owner, lease_deadline, attempts, \
    created_at, updated_at, approved_arguments, credential_use, budget";

/// How many columns [`INVOCATION_COLUMNS`] names (and [`InvocationRow::binds`] binds).
pub(crate) const INVOCATION_COLUMN_COUNT: usize = 38;

/// The rows the partial index `invocations_open` holds (migrations 0003, 0007): those not in a terminal
/// state. Every lookup by state (rather than by run or id) names this exact conjunct, because
/// SQLite uses a partial index only for a query whose `WHERE` visibly implies the index's.
macro_rules! open_rows {
    () => {
        "state IN ('pending', 'proposed', 'awaiting_approval', 'awaiting_answer', 'awaiting_credential', 'approved', 'running', 'in_doubt')"
    };
}
pub(crate) use open_rows;

/// Fields in byte order of their names: see [`content_hash`].
#[derive(Debug, Clone, Serialize)]
pub(crate) struct InvocationRow {
    pub(crate) approval: String,
    pub(crate) approval_ref: Option<String>,
    /// Left out of the hash while NULL, so rows written before the column still verify.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) approved_arguments: Option<String>,
    pub(crate) arguments: String,
    pub(crate) arguments_hash: String,
    pub(crate) attempts: i64,
    /// The call's budget shares as judged (LEDGER-74), written by its insert and never after;
    /// not hashed: like a limit's running use, it is the budget's, not the call's content.
    #[serde(skip)]
    pub(crate) budget: Option<String>,
    pub(crate) call_id: String,
    pub(crate) created_at: i64,
    /// Left out of the hash while NULL, so rows written before the column still verify.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) credential_use: Option<String>,
    pub(crate) decided_at: Option<i64>,
    pub(crate) decided_by: Option<String>,
    pub(crate) decision: Option<String>,
    pub(crate) decision_reason: Option<String>,
    pub(crate) definitions_digest: String,
    pub(crate) effect: String,
    pub(crate) error_kind: Option<String>,
    pub(crate) error_message: Option<String>,
    pub(crate) expires_at: Option<i64>,
    pub(crate) id: String,
    pub(crate) idempotency_key: String,
    pub(crate) kind: String,
    pub(crate) lease_deadline: Option<i64>,
    pub(crate) lease_owner: Option<String>,
    pub(crate) mode: String,
    pub(crate) principal: Option<String>,
    pub(crate) resolution: Option<String>,
    pub(crate) resolution_note: Option<String>,
    pub(crate) resolved_at: Option<i64>,
    pub(crate) resolved_by: Option<String>,
    pub(crate) result: Option<String>,
    pub(crate) run_id: Option<String>,
    pub(crate) session_id: String,
    pub(crate) source_kind: String,
    pub(crate) state: String,
    pub(crate) tool: String,
    pub(crate) updated_at: i64,
    pub(crate) version: i64,
}

/// The row types [`content_hash`] takes: flat, fields in byte order of their names.
pub(crate) trait Hashed: Serialize {}

impl Hashed for InvocationRow {}
impl Hashed for SessionRow {}
impl Hashed for RunRow {}

/// SHA-256 of the canonical JSON of a row.
///
/// The row types are flat (text, integers, nulls) and declare their fields in byte order, so
/// `serde_json` writes them canonically as they stand: no intermediate `Value`, no sorting, one
/// buffer (this runs for every version of every row the ledger writes). The tests below hold
/// each row type to `canonical_json`, so a field added out of order fails them rather than
/// changing the chain's hashes.
pub(crate) fn content_hash<T: Hashed>(row: &T) -> String {
    // Fed to the hash as written: the row's arguments text may be megabytes.
    json_sha256(row)
}

impl InvocationRow {
    pub(crate) fn read(r: &DbRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            id: r.req_text("id")?,
            session_id: r.req_text("session_id")?,
            run_id: r.text("run_id")?,
            call_id: r.req_text("call_id")?,
            tool: r.req_text("tool")?,
            arguments: r.req_text("arguments")?,
            arguments_hash: r.req_text("arguments_hash")?,
            source_kind: r.req_text("source_kind")?,
            effect: r.req_text("effect")?,
            approval: r.req_text("approval")?,
            mode: r.req_text("mode")?,
            kind: r.req_text("kind")?,
            state: r.req_text("state")?,
            version: r.req_int("version")?,
            result: r.text("result")?,
            error_kind: r.text("error_kind")?,
            error_message: r.text("error_message")?,
            idempotency_key: r.req_text("idempotency_key")?,
            principal: r.text("principal")?,
            definitions_digest: r.req_text("definitions_digest")?,
            approval_ref: r.text("approval_ref")?,
            decided_by: r.text("decided_by")?,
            decision: r.text("decision")?,
            decision_reason: r.text("decision_reason")?,
            decided_at: r.int("decided_at")?,
            resolved_by: r.text("resolved_by")?,
            resolution: r.text("resolution")?,
            resolution_note: r.text("resolution_note")?,
            resolved_at: r.int("resolved_at")?,
            expires_at: r.int("expires_at")?,
            lease_owner: r.text("lease_owner")?,
            lease_deadline: r.int("lease_deadline")?,
            attempts: r.req_int("attempts")?,
            created_at: r.req_int("created_at")?,
            updated_at: r.req_int("updated_at")?,
            approved_arguments: r.text("approved_arguments")?,
            credential_use: r.text("credential_use")?,
            budget: r.text("budget")?,
        })
    }

    /// Binds in [`INVOCATION_COLUMNS`] order.
    pub(crate) fn binds(&self) -> Vec<SqlValue> {
        vec![
            self.id.clone().into(),
            self.session_id.clone().into(),
            self.run_id.clone().into(),
            self.call_id.clone().into(),
            self.tool.clone().into(),
            self.arguments.clone().into(),
            self.arguments_hash.clone().into(),
            self.source_kind.clone().into(),
            self.effect.clone().into(),
            self.approval.clone().into(),
            self.mode.clone().into(),
            self.kind.clone().into(),
            self.state.clone().into(),
            self.version.into(),
            self.result.clone().into(),
            self.error_kind.clone().into(),
            self.error_message.clone().into(),
            self.idempotency_key.clone().into(),
            self.principal.clone().into(),
            self.definitions_digest.clone().into(),
            self.approval_ref.clone().into(),
            self.decided_by.clone().into(),
            self.decision.clone().into(),
            self.decision_reason.clone().into(),
            self.decided_at.into(),
            self.resolved_by.clone().into(),
            self.resolution.clone().into(),
            self.resolution_note.clone().into(),
            self.resolved_at.into(),
            self.expires_at.into(),
            self.lease_owner.clone().into(),
            self.lease_deadline.into(),
            self.attempts.into(),
            self.created_at.into(),
            self.updated_at.into(),
            self.approved_arguments.clone().into(),
            self.credential_use.clone().into(),
            self.budget.clone().into(),
        ]
    }
}

impl From<&Invocation> for InvocationRow {
    fn from(i: &Invocation) -> Self {
        let d = i.decision.as_ref();
        let r = i.resolution.as_ref();
        Self {
            id: i.id.to_string(),
            session_id: i.session_id.to_string(),
            run_id: i.run_id.map(|r| r.to_string()),
            call_id: i.call_id.clone(),
            tool: i.tool.clone(),
            arguments: i.arguments.to_string(),
            arguments_hash: i.arguments_hash.clone(),
            source_kind: i.source_kind.as_str().to_owned(),
            effect: i.effect.as_str().to_owned(),
            approval: i.approval.as_str().to_owned(),
            mode: i.mode.as_str().to_owned(),
            kind: i.kind.as_str().to_owned(),
            state: i.state.as_str().to_owned(),
            version: i.version,
            result: i.result.as_ref().map(Value::to_string),
            error_kind: i.error.as_ref().map(|e| e.kind.as_str().to_owned()),
            error_message: i.error.as_ref().map(|e| e.message.clone()),
            idempotency_key: i.idempotency_key.clone(),
            principal: i.principal.clone(),
            definitions_digest: i.definitions_digest.clone(),
            approval_ref: i.approval_ref.map(|r| r.to_string()),
            decided_by: d.map(|d| d.by.clone()),
            decision: d.map(|d| d.decision.as_str().to_owned()),
            decision_reason: d.and_then(|d| d.reason.clone()),
            decided_at: d.map(|d| to_micros(d.at)),
            resolved_by: r.map(|r| r.by.clone()),
            resolution: r.map(|r| r.resolution.as_str().to_owned()),
            resolution_note: r.map(|r| r.note.clone()),
            resolved_at: r.map(|r| to_micros(r.at)),
            expires_at: i.expires_at.map(to_micros),
            lease_owner: i.lease.as_ref().map(|l| l.owner.clone()),
            lease_deadline: i.lease.as_ref().map(|l| to_micros(l.deadline)),
            attempts: i.attempts,
            created_at: to_micros(i.created_at),
            updated_at: to_micros(i.updated_at),
            approved_arguments: i.approved_arguments.as_ref().map(Value::to_string),
            credential_use: i
                .credential_use
                .as_ref()
                .and_then(|u| serde_json::to_string(u).ok()),
            budget: None,
        }
    }
}

/// Parses one stored field, naming the row and the column when it does not parse.
struct Reader<'a> {
    entity: &'static str,
    id: &'a str,
}

impl Reader<'_> {
    fn err(&self, column: &str, why: impl std::fmt::Display) -> LedgerError {
        LedgerError::Corrupt {
            entity: self.entity,
            id: self.id.to_owned(),
            reason: format!("column {column}: {why}"),
        }
    }

    fn parse<T: FromStr>(&self, column: &str, s: &str) -> Result<T, LedgerError>
    where
        T::Err: std::fmt::Display,
    {
        s.parse().map_err(|e| self.err(column, e))
    }

    fn json<T: serde::de::DeserializeOwned>(
        &self,
        column: &str,
        s: &str,
    ) -> Result<T, LedgerError> {
        serde_json::from_str(s).map_err(|e| self.err(column, e))
    }

    fn time(&self, column: &str, micros: i64) -> Result<time::OffsetDateTime, LedgerError> {
        from_micros(micros).ok_or_else(|| self.err(column, "timestamp out of range"))
    }

    fn opt_time(
        &self,
        column: &str,
        micros: Option<i64>,
    ) -> Result<Option<time::OffsetDateTime>, LedgerError> {
        micros.map(|m| self.time(column, m)).transpose()
    }
}

impl TryFrom<InvocationRow> for Invocation {
    type Error = LedgerError;

    fn try_from(row: InvocationRow) -> Result<Self, LedgerError> {
        let rd = Reader {
            entity: "invocation",
            id: &row.id,
        };
        let decision = match (row.decided_by, row.decision) {
            (Some(by), Some(decision)) => Some(DecisionRecord {
                by,
                decision: rd.parse("decision", &decision)?,
                reason: row.decision_reason,
                at: rd.time("decided_at", row.decided_at.unwrap_or_default())?,
            }),
            _ => None,
        };
        let resolution = match (row.resolved_by, row.resolution) {
            (Some(by), Some(resolution)) => Some(ResolutionRecord {
                by,
                resolution: rd.parse("resolution", &resolution)?,
                note: row.resolution_note.unwrap_or_default(),
                at: rd.time("resolved_at", row.resolved_at.unwrap_or_default())?,
            }),
            _ => None,
        };
        let lease = match (row.lease_owner, row.lease_deadline) {
            (Some(owner), Some(deadline)) => Some(Lease {
                owner,
                deadline: rd.time("lease_deadline", deadline)?,
            }),
            _ => None,
        };
        let error = match (row.error_kind, row.error_message) {
            // Read through the legacy mapping; the column keeps its stored word (and hash).
            (Some(kind), Some(message)) => {
                Some(ToolError::new(ToolErrorKind::from_stored(&kind), message))
            }
            _ => None,
        };
        Ok(Self {
            id: rd.parse("id", &row.id)?,
            session_id: rd.parse("session_id", &row.session_id)?,
            run_id: row.run_id.map(|r| rd.parse("run_id", &r)).transpose()?,
            call_id: row.call_id,
            tool: row.tool,
            arguments: rd.json("arguments", &row.arguments)?,
            approved_arguments: row
                .approved_arguments
                .map(|a| rd.json("approved_arguments", &a))
                .transpose()?,
            credential_use: row
                .credential_use
                .map(|u| rd.json("credential_use", &u))
                .transpose()?,
            arguments_hash: row.arguments_hash,
            source_kind: rd.parse("source_kind", &row.source_kind)?,
            effect: rd.parse("effect", &row.effect)?,
            approval: rd.parse("approval", &row.approval)?,
            mode: rd.parse("mode", &row.mode)?,
            kind: rd.parse("kind", &row.kind)?,
            state: rd.parse("state", &row.state)?,
            version: row.version,
            result: row.result.map(|r| rd.json("result", &r)).transpose()?,
            error,
            idempotency_key: row.idempotency_key,
            principal: row.principal,
            definitions_digest: row.definitions_digest,
            approval_ref: row
                .approval_ref
                .map(|r| rd.parse("approval_ref", &r))
                .transpose()?,
            decision,
            resolution,
            expires_at: rd.opt_time("expires_at", row.expires_at)?,
            lease,
            attempts: row.attempts,
            created_at: rd.time("created_at", row.created_at)?,
            updated_at: rd.time("updated_at", row.updated_at)?,
        })
    }
}

/// Every column of `sessions`.
pub(crate) const SESSION_COLUMNS: &str = "id, channel, principal, metadata, created_at";

/// Fields in byte order of their names: see [`content_hash`].
#[derive(Debug, Clone, Serialize)]
pub(crate) struct SessionRow {
    pub(crate) channel: String,
    pub(crate) created_at: i64,
    pub(crate) id: String,
    pub(crate) metadata: String,
    pub(crate) principal: Option<String>,
}

impl SessionRow {
    pub(crate) fn read(r: &DbRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            id: r.req_text("id")?,
            channel: r.req_text("channel")?,
            principal: r.text("principal")?,
            metadata: r.req_text("metadata")?,
            created_at: r.req_int("created_at")?,
        })
    }

    pub(crate) fn binds(&self) -> Vec<SqlValue> {
        vec![
            self.id.clone().into(),
            self.channel.clone().into(),
            self.principal.clone().into(),
            self.metadata.clone().into(),
            self.created_at.into(),
        ]
    }
}

impl From<&Session> for SessionRow {
    fn from(s: &Session) -> Self {
        Self {
            id: s.id.to_string(),
            channel: s.channel.clone(),
            principal: s.principal.clone(),
            metadata: s.metadata.to_string(),
            created_at: to_micros(s.created_at),
        }
    }
}

impl TryFrom<SessionRow> for Session {
    type Error = LedgerError;

    fn try_from(row: SessionRow) -> Result<Self, LedgerError> {
        let rd = Reader {
            entity: "session",
            id: &row.id,
        };
        Ok(Self {
            id: rd.parse("id", &row.id)?,
            metadata: rd.json("metadata", &row.metadata)?,
            created_at: rd.time("created_at", row.created_at)?,
            channel: row.channel,
            principal: row.principal,
        })
    }
}

/// Every column of `runs`.
pub(crate) const RUN_COLUMNS: &str = "id, session_id, agent, status, status_reason, \
    definitions_digest, definitions_snapshot, version, created_at, updated_at";

/// Fields in byte order of their names: see [`content_hash`].
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RunRow {
    pub(crate) agent: String,
    pub(crate) created_at: i64,
    pub(crate) definitions_digest: String,
    pub(crate) definitions_snapshot: String,
    pub(crate) id: String,
    pub(crate) session_id: String,
    pub(crate) status: String,
    pub(crate) status_reason: Option<String>,
    pub(crate) updated_at: i64,
    pub(crate) version: i64,
}

impl RunRow {
    pub(crate) fn read(r: &DbRow) -> Result<Self, sqlx::Error> {
        Ok(Self {
            id: r.req_text("id")?,
            session_id: r.req_text("session_id")?,
            agent: r.req_text("agent")?,
            status: r.req_text("status")?,
            status_reason: r.text("status_reason")?,
            definitions_digest: r.req_text("definitions_digest")?,
            definitions_snapshot: r.req_text("definitions_snapshot")?,
            version: r.req_int("version")?,
            created_at: r.req_int("created_at")?,
            updated_at: r.req_int("updated_at")?,
        })
    }

    pub(crate) fn binds(&self) -> Vec<SqlValue> {
        vec![
            self.id.clone().into(),
            self.session_id.clone().into(),
            self.agent.clone().into(),
            self.status.clone().into(),
            self.status_reason.clone().into(),
            self.definitions_digest.clone().into(),
            self.definitions_snapshot.clone().into(),
            self.version.into(),
            self.created_at.into(),
            self.updated_at.into(),
        ]
    }
}

impl From<&Run> for RunRow {
    fn from(r: &Run) -> Self {
        Self {
            id: r.id.to_string(),
            session_id: r.session_id.to_string(),
            agent: r.agent.clone(),
            status: r.status.as_str().to_owned(),
            status_reason: r.status_reason.clone(),
            definitions_digest: r.definitions_digest.clone(),
            definitions_snapshot: r.definitions_snapshot.to_string(),
            version: r.version,
            created_at: to_micros(r.created_at),
            updated_at: to_micros(r.updated_at),
        }
    }
}

impl TryFrom<RunRow> for Run {
    type Error = LedgerError;

    fn try_from(row: RunRow) -> Result<Self, LedgerError> {
        let rd = Reader {
            entity: "run",
            id: &row.id,
        };
        Ok(Self {
            id: rd.parse("id", &row.id)?,
            session_id: rd.parse("session_id", &row.session_id)?,
            status: rd.parse("status", &row.status)?,
            definitions_snapshot: rd.json("definitions_snapshot", &row.definitions_snapshot)?,
            version: row.version,
            created_at: rd.time("created_at", row.created_at)?,
            updated_at: rd.time("updated_at", row.updated_at)?,
            agent: row.agent,
            status_reason: row.status_reason,
            definitions_digest: row.definitions_digest,
        })
    }
}

#[cfg(test)]
mod tests {
    use airlock_spec::{canonical_json, sha256_hex};

    use super::*;

    /// The hash every ledger written so far was chained with.
    fn canonical_hash<T: Serialize>(row: &T) -> String {
        sha256_hex(canonical_json(&serde_json::to_value(row).unwrap()).as_bytes())
    }

    fn text(s: &str) -> String {
        format!("{s} \"quoted\" \\ tab\t é ✓ \u{1}")
    }

    fn invocation(some: bool) -> InvocationRow {
        let opt = |s: &str| some.then(|| text(s));
        let int = |i: i64| some.then_some(i);
        InvocationRow {
            approval: text("approval"),
            approval_ref: opt("approval_ref"),
            approved_arguments: None,
            credential_use: None,
            arguments: r#"{"b":1,"a":[true,null]}"#.to_owned(),
            arguments_hash: text("arguments_hash"),
            attempts: 3,
            budget: opt("budget"),
            call_id: text("call_id"),
            created_at: -7,
            decided_at: int(11),
            decided_by: opt("decided_by"),
            decision: opt("decision"),
            decision_reason: opt("decision_reason"),
            definitions_digest: text("definitions_digest"),
            effect: text("effect"),
            error_kind: opt("error_kind"),
            error_message: opt("error_message"),
            expires_at: int(i64::MAX),
            id: text("id"),
            idempotency_key: text("idempotency_key"),
            kind: text("kind"),
            lease_deadline: int(i64::MIN),
            lease_owner: opt("lease_owner"),
            mode: text("mode"),
            principal: opt("principal"),
            resolution: opt("resolution"),
            resolution_note: opt("resolution_note"),
            resolved_at: int(13),
            resolved_by: opt("resolved_by"),
            result: opt("result"),
            run_id: opt("run_id"),
            session_id: text("session_id"),
            source_kind: text("source_kind"),
            state: text("state"),
            tool: text("tool"),
            updated_at: 17,
            version: 2,
        }
    }

    /// A row's hash is part of every chain written so far: a change of `serde_json`'s output
    /// (escapes, integers) must fail here, not break the audit of existing ledgers.
    #[test]
    fn a_rows_hash_is_pinned() {
        assert_eq!(
            content_hash(&invocation(true)),
            "5751e3bdaf4b4df652baf18be63fdcafd184e8c63743a0e14594edea7e2f0a7d"
        );
    }

    /// DECIDE-20: a row without edited arguments hashes as rows did before the column, and
    /// one with them hashes them too, so neither an old row nor an edit escapes the chain.
    #[test]
    fn the_column_count_is_the_columns_and_the_binds() {
        assert_eq!(
            INVOCATION_COLUMNS.split(',').count(),
            INVOCATION_COLUMN_COUNT
        );
        assert_eq!(invocation(true).binds().len(), INVOCATION_COLUMN_COUNT);
    }

    #[test]
    fn approved_arguments_are_hashed_only_when_present() {
        let legacy = invocation(true);
        let mut edited = invocation(true);
        edited.approved_arguments = Some(r#"{"a":2}"#.to_owned());
        let legacy_json = serde_json::to_string(&legacy).unwrap();
        assert!(!legacy_json.contains("approved_arguments"), "{legacy_json}");
        assert_ne!(content_hash(&edited), content_hash(&legacy));
        assert_eq!(content_hash(&edited), canonical_hash(&edited));
    }

    #[test]
    fn every_row_type_hashes_as_its_canonical_json() {
        for some in [true, false] {
            let row = invocation(some);
            assert_eq!(content_hash(&row), canonical_hash(&row));
            let session = SessionRow {
                channel: text("channel"),
                created_at: 5,
                id: text("id"),
                metadata: r#"{"z":1,"a":2}"#.to_owned(),
                principal: some.then(|| text("principal")),
            };
            assert_eq!(content_hash(&session), canonical_hash(&session));
            let run = RunRow {
                agent: text("agent"),
                created_at: 1,
                definitions_digest: text("digest"),
                definitions_snapshot: r#"{"tools":[]}"#.to_owned(),
                id: text("id"),
                session_id: text("session_id"),
                status: text("status"),
                status_reason: some.then(|| text("reason")),
                updated_at: 2,
                version: 4,
            };
            assert_eq!(content_hash(&run), canonical_hash(&run));
        }
    }
}
