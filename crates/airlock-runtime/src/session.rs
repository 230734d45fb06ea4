//! How a session records the scope it was opened in: metadata `{"scope": "<scope>"}`, the
//! scope in its one written form (`gateway`, `agent:<name>`). Existing ledgers hold this
//! form, so it is written and read only here, through [`ScopeId`]'s `Display` and `FromStr`.

use airlock_ledger::{NewSession, Session};
use airlock_spec::ScopeId;
use serde_json::{Value, json};

/// The metadata of a session opened in `scope`.
pub(crate) fn metadata(scope: &ScopeId) -> Value {
    json!({ "scope": scope.to_string() })
}

/// The session of its own that one MCP endpoint request of `principal` in `scope` opens.
pub(crate) fn on_mcp(scope: &ScopeId, principal: &str) -> NewSession {
    NewSession {
        channel: "mcp".to_owned(),
        principal: Some(principal.to_owned()),
        metadata: metadata(scope),
    }
}

/// The scope `session` was opened in; `None` if its metadata names none (or none readable).
pub(crate) fn scope(session: &Session) -> Option<ScopeId> {
    session.metadata.get("scope")?.as_str()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stored_form_is_pinned() {
        assert_eq!(metadata(&ScopeId::Gateway), json!({"scope": "gateway"}));
        assert_eq!(
            metadata(&ScopeId::Agent("support".into())),
            json!({"scope": "agent:support"})
        );
    }

    #[test]
    fn sessions_stored_before_read_back() {
        let session = |metadata: Value| Session {
            id: airlock_ledger::SessionId::new(),
            channel: "mcp".into(),
            principal: None,
            metadata,
            created_at: time::OffsetDateTime::UNIX_EPOCH,
        };
        let stored = session(json!({"scope": "agent:support"}));
        assert_eq!(scope(&stored), Some(ScopeId::Agent("support".into())));
        assert_eq!(
            scope(&session(json!({"scope": "gateway"}))),
            Some(ScopeId::Gateway)
        );
        assert_eq!(scope(&session(json!({}))), None);
    }
}
