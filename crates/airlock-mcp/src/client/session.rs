//! One short MCP session: open (initialize or discover) → one piece of work → close, under the
//! call's one deadline, through the egress guard.
//!
//! Guarantees: the destination is checked and pinned by the guard before any byte is sent; the
//! whole session — lifecycle, work and every reply byte — runs under one deadline and one byte
//! cap; every failure, whatever layer saw it, becomes one [`McpCallError`] whose kind says what
//! really went wrong (the server's own JSON-RPC error first, then the first transport failure
//! the guarded HTTP client saw, then rmcp's summary). Nothing here panics.

use std::future::Future;
use std::time::Duration;

use airlock_egress::{Delivery, GuardedClient};
use airlock_spec::McpProtocol;
use rmcp::handler::client::ClientHandler;
use rmcp::model::{ClientCapabilities, ClientConfig, Implementation, ProtocolVersion};
use rmcp::service::{ClientInitializeError, ClientLifecycleMode, ClientServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{Peer, RoleClient, ServiceError};

use crate::client::target::McpTarget;
use crate::client::transport::GuardedHttp;
use crate::error::{CallErrorKind, McpCallError};
use crate::relay::Tap;

/// Which lifecycle an upstream speaks, as far as we know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Speaks {
    /// `initialize` / `notifications/initialized`.
    Legacy,
    /// `server/discover` and self-contained requests (2026-07-28).
    Modern,
}

/// What a session that opened learnt about its upstream.
#[derive(Debug, Clone)]
pub(crate) struct Opened {
    /// The lifecycle it spoke.
    pub(crate) speaks: Speaks,
    /// The revision the handshake settled on.
    pub(crate) version: ProtocolVersion,
    /// It issued no `Mcp-Session-Id`: it keeps no state between requests.
    pub(crate) stateless: bool,
    /// It declared resources, prompts or completions: something to list beside its tools.
    pub(crate) offers: bool,
}

/// Where a session failed, before it is classified.
enum Failure {
    Open(Box<ClientInitializeError>),
    Work(ServiceError),
}

/// A checked, pinned destination: the session's HTTP client, the checked URL and the call's
/// deadline.
pub(crate) struct Prepared {
    pub(crate) http: GuardedHttp,
    pub(crate) url: url::Url,
    pub(crate) deadline: tokio::time::Instant,
}

/// Checks and pins `target` through the guard (nothing is sent yet).
pub(crate) async fn prepare(
    guard: &GuardedClient,
    target: &McpTarget,
) -> Result<Prepared, McpCallError> {
    let credential = target.credential.header()?;
    let prepared = guard
        .call()
        .prepare(&target.url, target.credential.is_some())
        .await?;
    let http = GuardedHttp::new(
        prepared.client,
        &prepared.url,
        credential,
        prepared.max_body_bytes,
        guard.policy().deadline,
        Tap::of(target.downstream.relay.as_ref(), target.credential.secret()),
    );
    Ok(Prepared {
        http,
        url: prepared.url,
        deadline: prepared.deadline,
    })
}

/// Runs `work` in one short session with `target`.
///
/// `known` is what the upstream was last seen to speak (for `protocol: auto`); the returned
/// [`Opened`] is what it spoke this time, when the session opened. `handler` is the session's
/// client: [`client_info`], or one that relays the upstream's requests (`asked`).
pub(crate) async fn run<H, T, F, Fut>(
    guard: &GuardedClient,
    target: &McpTarget,
    (known, handler): (Option<Speaks>, H),
    work: F,
) -> (Option<Opened>, Result<T, McpCallError>)
where
    H: ClientHandler,
    F: FnOnce(Peer<RoleClient>) -> Fut,
    Fut: Future<Output = Result<T, ServiceError>>,
{
    let budget = guard.policy().deadline;
    let Prepared {
        http,
        url,
        deadline,
    } = match prepare(guard, target).await {
        Ok(p) => p,
        Err(e) => return (None, Err(e)),
    };
    let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
    // A short session never recovers an expired session: that would replay the handshake and
    // possibly the call.
    config.reinit_on_expired_session = false;
    let transport = StreamableHttpClientTransport::with_client(http.clone(), config);
    let timed = tokio::time::timeout_at(deadline, async {
        let running = handler
            .serve_with_lifecycle(transport, lifecycle(target.protocol, known))
            .await
            .map_err(|e| Failure::Open(Box::new(e)))?;
        let result = work(running.peer().clone()).await;
        Ok::<_, Failure>((running, result))
    })
    .await;
    let (mut running, result) = match timed {
        Err(_elapsed) => return (None, Err(delivered(McpCallError::timeout(budget), &http))),
        Ok(Err(failure)) => {
            let err = classify(&failure, &http, target.protocol);
            return (None, Err(delivered(err, &http)));
        }
        Ok(Ok(done)) => done,
    };
    let opened = running.peer_info().map(|info| Opened {
        speaks: if info.protocol_version >= ProtocolVersion::V_2026_07_28 {
            Speaks::Modern
        } else {
            Speaks::Legacy
        },
        version: info.protocol_version.clone(),
        stateless: !http.issued_session(),
        offers: {
            let caps = &info.capabilities;
            caps.resources.is_some()
                || caps.prompts.is_some()
                || caps.completions.is_some()
                || caps.supports_skills()
        },
    });
    // Close within what is left of the deadline; the outcome is already decided.
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let _ = running
        .close_with_timeout(left.max(Duration::from_millis(1)))
        .await;
    let result =
        result.map_err(|e| delivered(classify(&Failure::Work(e), &http, target.protocol), &http));
    (opened, result)
}

/// `err` with how far the call's request got (MCP-23): nothing of the call was sent while the
/// session opened; after the `tools/call` was sent, the server's own answer (a JSON-RPC error,
/// an HTTP status, a reply airlock refuses) is an answer, and anything else — the deadline, a
/// broken connection, a stream that ended without a response — leaves the outcome unknown.
pub(crate) fn delivered(mut err: McpCallError, http: &GuardedHttp) -> McpCallError {
    err.delivery = if !http.call_sent() {
        Delivery::NotSent
    } else {
        match err.kind {
            CallErrorKind::Blocked | CallErrorKind::Config => Delivery::NotSent,
            CallErrorKind::ToolError
            | CallErrorKind::JsonRpc
            | CallErrorKind::HttpStatus
            | CallErrorKind::Redirect
            | CallErrorKind::TooLarge
            | CallErrorKind::BadReply
            | CallErrorKind::Protocol => Delivery::Answered,
            CallErrorKind::Timeout
            | CallErrorKind::Unreachable
            | CallErrorKind::ConnectionLost
            | CallErrorKind::Other => Delivery::Unanswered,
        }
    };
    err
}

pub(crate) fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("airlock", env!("CARGO_PKG_VERSION")),
    )
    // `initialize` offers the newest revision that still has it; 2026-07-28 uses discover.
    .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
}

fn lifecycle(protocol: McpProtocol, known: Option<Speaks>) -> ClientLifecycleMode {
    let modern = || vec![ProtocolVersion::V_2026_07_28];
    let speaks = match protocol {
        McpProtocol::Legacy => Some(Speaks::Legacy),
        McpProtocol::Rev20260728 => Some(Speaks::Modern),
        McpProtocol::Auto => known,
    };
    match speaks {
        Some(Speaks::Legacy) => ClientLifecycleMode::Initialize,
        Some(Speaks::Modern) => ClientLifecycleMode::Discover {
            preferred_versions: modern(),
        },
        // Unknown yet: probe once (rmcp waits up to 10 s for `server/discover`), then remember.
        None => ClientLifecycleMode::Auto {
            preferred_versions: modern(),
            legacy_version: Some(ProtocolVersion::LATEST_WITH_INITIALIZE),
        },
    }
}

/// One error for a failed session: the server's JSON-RPC error wins (it is the server's own
/// explanation, even after a swallowed 3xx on a notification), then the first failure the
/// guarded HTTP client saw, then rmcp's own summary.
fn classify(failure: &Failure, http: &GuardedHttp, protocol: McpProtocol) -> McpCallError {
    if let Some(message) = jsonrpc_message(failure) {
        if matches!(failure, Failure::Open(_)) && protocol == McpProtocol::Rev20260728 {
            return McpCallError::new(
                CallErrorKind::Protocol,
                format!("the MCP server does not speak protocol 2026-07-28: {message}"),
            );
        }
        return McpCallError::new(CallErrorKind::JsonRpc, message);
    }
    if let Some(seen) = http.failure() {
        return seen;
    }
    match failure {
        Failure::Open(e) => match e.as_ref() {
            ClientInitializeError::NoCompatibleProtocolVersion { .. }
            | ClientInitializeError::ExpectedInitResult(_)
            | ClientInitializeError::ExpectedInitResponse(_) => McpCallError::new(
                CallErrorKind::Protocol,
                format!("the MCP server's handshake is not compatible: {e}"),
            ),
            _ => McpCallError::new(
                CallErrorKind::Other,
                format!("the MCP session could not be opened: {e}"),
            ),
        },
        Failure::Work(ServiceError::UnexpectedResponse) => McpCallError::new(
            CallErrorKind::Protocol,
            "the MCP server answered with an unexpected result type",
        ),
        Failure::Work(e) => {
            McpCallError::new(CallErrorKind::Other, format!("the MCP call failed: {e}"))
        }
    }
}

fn jsonrpc_message(failure: &Failure) -> Option<String> {
    let open_error = |e: &ClientInitializeError| match e {
        ClientInitializeError::JsonRpcError(e) => Some(e.message.to_string()),
        _ => None,
    };
    match failure {
        Failure::Work(ServiceError::McpError(e)) => Some(e.message.to_string()),
        Failure::Work(_) => None,
        Failure::Open(e) => match e.as_ref() {
            ClientInitializeError::LegacyFallbackFailed { fallback, .. } => open_error(fallback),
            other => open_error(other),
        },
    }
}
