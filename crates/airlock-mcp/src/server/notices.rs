//! Progress and logging on the endpoint: what a `tools/call` asks to see of its upstream, and
//! the messages relayed on the call's own response stream (docs/rules.md MCP-63..MCP-67).
//!
//! Guarantees:
//! - A call that carries `_meta.progressToken` gets its upstream's progress with the client's
//!   own token; a call with a log level gets the upstream's log messages at or above it. Those
//!   messages go out, in the order the upstream sent them, before the result on the same
//!   stream (rmcp answers with an event stream once a message precedes the result, and every
//!   client reaching rmcp accepts one); a call that asks for neither, or whose upstream sends
//!   nothing, is answered with plain JSON as before.
//! - The log level is per request on 2026-07-28 (`_meta["io.modelcontextprotocol/logLevel"]`,
//!   and `logging/setLevel` does not exist there); on the session-era revisions, whose clients
//!   set it with `logging/setLevel` once, it is remembered in this process for the principal on
//!   the scope (the endpoint keeps no session to hang it on), for at most [`MAX_LEVELS`]
//!   principals. No level, no log message.
//! - The endpoint never waits on a slow client: the relay drops what it cannot queue (`relay`).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ProgressNotificationParam, ProgressToken, ProtocolVersion, ServerNotification};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::request::Admitted;
use tokio::sync::mpsc;

use crate::relay::{LOG_LEVEL_META, Level, Notice, Relay};
use airlock_spec::ScopeId;

/// Principals whose session-era log level is remembered at most; past it the memory starts
/// over (a client that set one sees no logs until it sets it again).
pub(super) const MAX_LEVELS: usize = 4096;

/// The log levels session-era clients set, per scope and principal.
#[derive(Clone, Default)]
pub(super) struct Levels(Arc<Mutex<HashMap<(ScopeId, String), Level>>>);

impl Levels {
    /// Remembers `level` (rmcp's `LoggingLevel`) for the caller.
    pub(super) fn set(&self, admitted: &Admitted, level: impl Serialize) {
        let Some(level) = rewire::<Level>(level) else {
            return;
        };
        let mut levels = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let key = (admitted.scope.clone(), admitted.caller.principal.clone());
        if levels.len() >= MAX_LEVELS && !levels.contains_key(&key) {
            levels.clear();
        }
        levels.insert(key, level);
    }

    pub(super) fn get(&self, admitted: &Admitted) -> Option<Level> {
        let levels = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if levels.is_empty() {
            // The usual case, asked on every call: no key to build.
            return None;
        }
        let key = (admitted.scope.clone(), admitted.caller.principal.clone());
        levels.get(&key).copied()
    }
}

/// What one `tools/call` asked to see.
struct Wanted {
    token: Option<ProgressToken>,
    level: Option<Level>,
}

/// The receiving end of one request's relay: the messages its upstream calls send, and what
/// the request asked to see of them.
pub(super) struct Receiving {
    wanted: Wanted,
    messages: mpsc::Receiver<Notice>,
}

/// The relay the upstream calls of the request in `context` send through, when it asked for
/// progress or a log level, and its receiving end for [`forwarded`].
pub(super) fn relay_for(
    context: &RequestContext<RoleServer>,
    levels: &Levels,
    admitted: &Admitted,
) -> Option<(Relay, Receiving)> {
    let wanted = wanted(context, levels, admitted)?;
    let (relay, messages) = Relay::new(wanted.token.is_some(), wanted.level);
    Some((relay, Receiving { wanted, messages }))
}

/// Runs `call`, forwarding to `peer` what its upstream calls send through the relay of
/// `receiving` (none: plain JSON), and returns its outcome once every message that preceded it
/// has been sent.
pub(super) async fn forwarded<F: Future>(
    receiving: Option<Receiving>,
    peer: &Peer<RoleServer>,
    call: F,
) -> F::Output {
    match receiving {
        Some(receiving) => relayed(receiving, peer, call).await,
        None => call.await,
    }
}

/// What the request in `context` asks to see of its call; `None`: nothing, plain JSON.
fn wanted(
    context: &RequestContext<RoleServer>,
    levels: &Levels,
    admitted: &Admitted,
) -> Option<Wanted> {
    let token = context.meta.get_progress_token();
    let level = if is_modern(context) {
        context.meta.0.get(LOG_LEVEL_META).and_then(rewire)
    } else {
        levels.get(admitted)
    };
    (token.is_some() || level.is_some()).then_some(Wanted { token, level })
}

/// Whether the request speaks 2026-07-28 or later (per-request log level, no `setLevel`).
pub(super) fn is_modern(context: &RequestContext<RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v >= ProtocolVersion::V_2026_07_28)
}

/// Runs `call` while relaying what its upstream sends to `peer`, and returns its outcome once
/// every message that preceded it has been sent.
async fn relayed<F: Future>(receiving: Receiving, peer: &Peer<RoleServer>, call: F) -> F::Output {
    let Receiving {
        wanted,
        mut messages,
    } = receiving;
    tokio::pin!(call);
    let outcome = loop {
        tokio::select! {
            biased;
            outcome = &mut call => break outcome,
            Some(notice) = messages.recv() => send(&wanted, peer, notice).await,
        }
    };
    while let Ok(notice) = messages.try_recv() {
        send(&wanted, peer, notice).await;
    }
    outcome
}

/// Sends one message; a client gone away loses it, and the call's outcome stands.
async fn send(wanted: &Wanted, peer: &Peer<RoleServer>, notice: Notice) {
    let Some(notification) = notification(wanted.token.as_ref(), notice) else {
        return;
    };
    if let Err(error) = peer.send_notification(notification).await {
        tracing::debug!(%error, "a relayed MCP message could not be sent");
    }
}

/// `notice` as the notification the client gets: progress under its own `token` (none: not
/// relayed), a log message as MCP defines it.
#[allow(
    deprecated,
    reason = "MCP logging is deprecated (SEP-2577) yet still part of 2025-11-25"
)]
pub(super) fn notification(
    token: Option<&ProgressToken>,
    notice: Notice,
) -> Option<ServerNotification> {
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    match notice {
        Notice::Progress {
            progress,
            total,
            message,
        } => {
            let mut param = ProgressNotificationParam::new(token?.clone(), progress);
            param.total = total;
            param.message = message;
            Some(ServerNotification::ProgressNotification(
                rmcp::model::Notification::new(param),
            ))
        }
        Notice::Log {
            level,
            logger,
            data,
        } => {
            let level = rewire::<LoggingLevel>(level)?;
            let mut param = LoggingMessageNotificationParam::new(level, data);
            param.logger = logger;
            Some(ServerNotification::LoggingMessageNotification(
                rmcp::model::Notification::new(param),
            ))
        }
    }
}

/// `value` as a `T` of the same wire form: a level between rmcp's type, airlock's own and JSON
/// (`None` when the wire forms differ, e.g. a level no revision defines).
fn rewire<T: DeserializeOwned>(value: impl Serialize) -> Option<T> {
    serde_json::to_value(value)
        .ok()
        .and_then(|v| serde_json::from_value(v).ok())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Caller;

    fn admitted(scope: ScopeId, principal: &str) -> Admitted {
        let caller = Caller {
            principal: principal.to_owned(),
            groups: Vec::new(),
            ..Default::default()
        };
        Admitted { scope, caller }
    }

    /// MCP-64: a session-era level holds for its principal on its scope only, and the memory
    /// is bounded.
    #[test]
    fn mcp_64_a_level_is_kept_per_principal_and_scope_within_a_bound() {
        let levels = Levels::default();
        let alice = admitted(ScopeId::Gateway, "alice");
        levels.set(&alice, Level::Warning);
        assert_eq!(levels.get(&alice), Some(Level::Warning));
        assert_eq!(levels.get(&admitted(ScopeId::Gateway, "bob")), None);
        let elsewhere = admitted(ScopeId::Agent("a".into()), "alice");
        assert_eq!(levels.get(&elsewhere), None);
        for n in 0..MAX_LEVELS {
            levels.set(&admitted(ScopeId::Gateway, &format!("p{n}")), Level::Info);
        }
        let held = levels.0.lock().unwrap().len();
        assert!(held <= MAX_LEVELS, "{held}");
        assert_eq!(
            levels.get(&alice),
            None,
            "past the bound the memory starts over"
        );
    }
}
