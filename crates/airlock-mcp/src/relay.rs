//! Progress and log messages an upstream sends while it runs a call, read off the call's own
//! reply stream and handed to the endpoint request that made the call (docs/rules.md MCP-63,
//! MCP-65 to MCP-67).
//!
//! Guarantees:
//! - Only calls whose target carries a [`Relay`] (in its [`crate::Downstream`]) are tapped: the
//!   endpoint makes one for a `tools/call` whose client asked for progress or a log level. Boot
//!   discovery, agent runs and calls run later by an approver carry none: they relay nothing,
//!   and their upstreams are asked for nothing.
//! - Only `notifications/progress` (for the token airlock sent) and `notifications/message` (at
//!   or above the level asked) are read, each reduced to the fields MCP defines for it — numbers
//!   and a message string; a level, a logger name and the data — so nothing else an upstream
//!   puts in a message reaches the client, and the text is handed on as data, never read.
//! - A message larger than [`MAX_NOTICE_BYTES`], or whose text contains the call's own
//!   credential, is dropped.
//! - Relaying never slows or fails the call (MCP-67): at most [`QUEUE`] messages wait for the
//!   client, later ones are dropped until it catches up.

use std::sync::{Arc, Mutex, PoisonError};

use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sse_stream::Sse;
use tokio::sync::mpsc;

/// The progress token airlock sends upstream: one call per short session, so one token does.
pub(crate) const UPSTREAM_TOKEN: &str = "airlock";

/// Where 2026-07-28 carries a request's log level (the same key the client used).
pub(crate) const LOG_LEVEL_META: &str = "io.modelcontextprotocol/logLevel";

/// The longest message relayed, as the upstream sent it (an event's data), in bytes.
pub(crate) const MAX_NOTICE_BYTES: usize = 16 * 1024;

/// How many messages may wait for the client before later ones are dropped.
pub(crate) const QUEUE: usize = 64;

/// MCP's log levels (RFC 5424's severities), least severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum Level {
    Debug,
    Info,
    Notice,
    Warning,
    Error,
    Critical,
    Alert,
    Emergency,
}

/// One message of the upstream, reduced to what MCP defines for it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) enum Notice {
    /// `notifications/progress`, without the upstream's token.
    Progress {
        progress: f64,
        total: Option<f64>,
        message: Option<String>,
    },
    /// `notifications/message`.
    Log {
        level: Level,
        logger: Option<String>,
        data: Value,
    },
}

/// What the client of one endpoint request asked to see of its call, and where it goes.
#[derive(Debug, Clone)]
pub(crate) struct Relay {
    progress: bool,
    level: Option<Level>,
    sink: mpsc::Sender<Notice>,
}

impl Relay {
    /// A relay for progress (when `progress`) and log messages at `level` or above (when
    /// set), and the receiving end of its messages.
    pub(crate) fn new(progress: bool, level: Option<Level>) -> (Self, mpsc::Receiver<Notice>) {
        let (sink, messages) = mpsc::channel(QUEUE);
        let relay = Self {
            progress,
            level,
            sink,
        };
        (relay, messages)
    }
}

/// What the upstream of a call is asked for in its `_meta`: a progress token and the log level,
/// when the endpoint request the call serves asked for them (`relay`).
pub(crate) fn ask_upstream(meta: &mut Map<String, Value>, relay: Option<&Relay>) {
    let Some(Relay {
        progress, level, ..
    }) = relay.cloned()
    else {
        return;
    };
    if progress {
        meta.insert("progressToken".into(), Value::from(UPSTREAM_TOKEN));
    }
    if let Some(level) = level.and_then(|l| serde_json::to_value(l).ok()) {
        meta.insert(LOG_LEVEL_META.into(), level);
    }
}

/// The tap of one upstream session: the relay of the request it serves (if any) and the
/// session's credential, which no relayed message may contain.
#[derive(Debug, Clone)]
pub(crate) struct Tap {
    relay: Relay,
    secret: Option<SecretString>,
    /// The progress token of the session's `tools/call`: [`UPSTREAM_TOKEN`] unless the call
    /// went out with another one.
    token: Arc<Mutex<Value>>,
}

impl Tap {
    /// The tap of a session opened with `secret` for a call relaying to `relay`, if any.
    pub(crate) fn of(relay: Option<&Relay>, secret: Option<SecretString>) -> Option<Self> {
        relay.cloned().map(|relay| Self {
            relay,
            secret,
            token: Arc::new(Mutex::new(Value::from(UPSTREAM_TOKEN))),
        })
    }

    /// Notes the progress token of the `tools/call` in `body`, as it is sent.
    pub(crate) fn sent_call(&self, body: &[u8]) {
        let sent: Option<Value> = serde_json::from_slice::<Value>(body)
            .ok()
            .and_then(|m| m.pointer("/params/_meta/progressToken").cloned());
        if let Some(token) = sent {
            *self.token.lock().unwrap_or_else(PoisonError::into_inner) = token;
        }
    }

    /// Hands on the message `event` carries, if it is one the client asked for.
    pub(crate) fn observe(&self, event: &Sse) {
        let Some(data) = event.data.as_deref() else {
            return;
        };
        // The call's result comes on the same stream: it is not parsed a second time.
        if data.len() > MAX_NOTICE_BYTES || !data.contains("notifications/") {
            return;
        }
        let Some(notice) = self.read(data) else {
            return;
        };
        let leaks = self.secret.as_ref().is_some_and(|secret| {
            let secret = secret.expose_secret();
            !secret.is_empty() && serde_json::to_string(&notice).is_ok_and(|t| t.contains(secret))
        });
        if leaks {
            tracing::warn!("an MCP upstream's message contained its credential; not relayed");
            return;
        }
        // A full queue drops the message: the call itself must not wait for the client.
        let _ = self.relay.sink.try_send(notice);
    }

    fn read(&self, data: &str) -> Option<Notice> {
        #[derive(Deserialize)]
        struct Message {
            method: String,
            #[serde(default)]
            params: Value,
            id: Option<Value>,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Progress {
            progress_token: Value,
            progress: f64,
            total: Option<f64>,
            message: Option<String>,
        }
        #[derive(Deserialize)]
        struct Log {
            level: Level,
            logger: Option<String>,
            data: Value,
        }
        let message: Message = serde_json::from_str(data).ok()?;
        if message.id.is_some() {
            return None;
        }
        match message.method.as_str() {
            "notifications/progress" if self.relay.progress => {
                let p: Progress = serde_json::from_value(message.params).ok()?;
                let ours = self.token.lock().unwrap_or_else(PoisonError::into_inner);
                (p.progress_token == *ours).then_some(Notice::Progress {
                    progress: p.progress,
                    total: p.total,
                    message: p.message,
                })
            }
            "notifications/message" => {
                let log: Log = serde_json::from_value(message.params).ok()?;
                (log.level >= self.relay.level?).then_some(Notice::Log {
                    level: log.level,
                    logger: log.logger,
                    data: log.data,
                })
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(data: &str) -> Sse {
        Sse::default().data(data)
    }

    fn tapped(progress: bool, level: Option<Level>) -> (Tap, mpsc::Receiver<Notice>) {
        let (relay, messages) = Relay::new(progress, level);
        let secret = Some(SecretString::from("s3cret-token"));
        let token = Arc::new(Mutex::new(Value::from(UPSTREAM_TOKEN)));
        let tap = Tap {
            relay,
            secret,
            token,
        };
        (tap, messages)
    }

    /// MCP-63: progress for airlock's own token is relayed with its numbers and message only.
    #[test]
    fn mcp_63_progress_for_the_token_sent_is_reduced_to_its_fields() {
        let (tap, mut got) = tapped(true, None);
        tap.observe(&event(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"airlock","progress":1,"total":2,"message":"half","extra":"x"}}"#,
        ));
        tap.observe(&event(
            r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"other","progress":2}}"#,
        ));
        let first = got.try_recv().unwrap();
        let expected = Notice::Progress {
            progress: 1.0,
            total: Some(2.0),
            message: Some("half".into()),
        };
        assert_eq!(first, expected);
        assert!(
            got.try_recv().is_err(),
            "another token's progress is dropped"
        );
        // A call that went out with another token (rmcp numbers its own) is followed by it.
        tap.sent_call(br#"{"method":"tools/call","params":{"_meta":{"progressToken":3}}}"#);
        let progress = |token: &str| {
            event(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/progress","params":{{"progressToken":{token},"progress":5}}}}"#
            ))
        };
        tap.observe(&progress("\"airlock\""));
        tap.observe(&progress("3"));
        let only = got.try_recv().unwrap();
        assert!(matches!(only, Notice::Progress { progress, .. } if progress == 5.0));
        assert!(got.try_recv().is_err());
    }

    /// MCP-65: only messages at or above the level asked are relayed; none without a level.
    #[test]
    fn mcp_65_log_messages_below_the_level_are_dropped() {
        let log = |level: &str| {
            event(&format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"{level}","data":"d"}}}}"#
            ))
        };
        let (tap, mut got) = tapped(false, Some(Level::Warning));
        for level in ["debug", "info", "warning", "error", "bogus"] {
            tap.observe(&log(level));
        }
        let levels: Vec<_> = std::iter::from_fn(|| got.try_recv().ok())
            .map(|n| match n {
                Notice::Log { level, .. } => level,
                Notice::Progress { .. } => panic!("no progress was asked"),
            })
            .collect();
        assert_eq!(levels, [Level::Warning, Level::Error]);
        let (tap, mut got) = tapped(true, None);
        tap.observe(&log("emergency"));
        assert!(got.try_recv().is_err());
    }

    /// MCP-66: a message carrying the call's credential, a request, or an oversized message
    /// is never relayed.
    #[test]
    fn mcp_66_credentials_requests_and_oversized_messages_are_dropped() {
        let (tap, mut got) = tapped(true, Some(Level::Debug));
        tap.observe(&event(
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"error","data":{"token":"s3cret-token"}}}"#,
        ));
        tap.observe(&event(
            r#"{"jsonrpc":"2.0","id":7,"method":"notifications/message","params":{"level":"error","data":"x"}}"#,
        ));
        let big = "x".repeat(MAX_NOTICE_BYTES);
        tap.observe(&event(&format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"error","data":"{big}"}}}}"#
        )));
        assert!(got.try_recv().is_err());
    }

    #[test]
    fn only_calls_carrying_a_relay_ask_their_upstream() {
        let mut meta = Map::new();
        ask_upstream(&mut meta, None);
        assert!(meta.is_empty());
        assert!(Tap::of(None, None).is_none());
        let (relay, _got) = Relay::new(true, Some(Level::Info));
        ask_upstream(&mut meta, Some(&relay));
        assert!(Tap::of(Some(&relay), None).is_some());
        assert_eq!(meta["progressToken"], UPSTREAM_TOKEN);
        assert_eq!(meta[LOG_LEVEL_META], "info");
    }
}
