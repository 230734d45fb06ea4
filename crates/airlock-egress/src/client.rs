//! The guarded client: every outbound request goes through here; addresses are checked once per
//! call and pinned.
//!
//! Guarantees: a [`Call`] resolves each host at most once (a rebinding resolver cannot change the
//! answer mid-call) and runs every request under one deadline; every connection goes only to
//! addresses the policy allowed, with `Host` and TLS SNI carrying the original name and the
//! certificate verified against it; responses obey [`crate::body`]'s rules. Connection pools are
//! shared across calls only between calls whose checked addresses for a host are identical, so a
//! pooled connection never reaches an address the current call did not check.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, PoisonError};

use http::Method;
use tokio::time::Instant;
use tracing::Instrument;
use url::Url;

use crate::body::{self, BodyRule};
use crate::observe;
use crate::pin::{self, Deadline, Pinned};
use crate::request::{Request, Response};
use crate::resolve::{Resolve, SystemResolver};
use crate::streaming::StreamingResponse;
use crate::trace::{HttpSpan, TRACEPARENT};
use crate::transport::{self, Pins};
use crate::url_check::{self, Target, TargetHost};
use crate::{EgressError, EgressPolicy};

/// Pooled clients kept at most; past it the pool starts over (idle connections are cheap to lose).
const MAX_POOLED_CLIENTS: usize = 256;

/// The guarded HTTP client. Cheap to clone; clones share the policy, resolver, TLS config and
/// connection pools.
#[derive(Debug, Clone)]
pub struct GuardedClient {
    inner: Arc<Inner>,
}

struct Inner {
    policy: EgressPolicy,
    resolver: Arc<dyn Resolve>,
    tls: rustls::ClientConfig,
    /// One reqwest client per (pinned name, checked addresses): its pool may be reused by any
    /// later call that checked exactly the same addresses.
    pool: Mutex<HashMap<(String, Vec<SocketAddr>), reqwest::Client>>,
}

impl std::fmt::Debug for Inner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GuardedClient")
            .field("policy", &self.policy)
            .field("resolver", &self.resolver)
            .finish_non_exhaustive()
    }
}

/// Builds a [`GuardedClient`] with an injected resolver or TLS configuration.
#[derive(Debug)]
pub struct GuardedClientBuilder {
    policy: EgressPolicy,
    resolver: Option<Arc<dyn Resolve>>,
    tls: Option<rustls::ClientConfig>,
}

impl GuardedClientBuilder {
    /// Uses `resolver` instead of the system resolver (tests, `egress check --resolve`).
    #[must_use]
    pub fn resolver(mut self, resolver: Arc<dyn Resolve>) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// Uses this rustls configuration (for example with a private root) instead of the platform
    /// verifier. ALPN `h2`/`http/1.1` is added when it has none.
    #[must_use]
    pub fn tls_config(mut self, config: rustls::ClientConfig) -> Self {
        self.tls = Some(config);
        self
    }

    /// Builds the client.
    ///
    /// # Errors
    /// [`EgressError::Tls`] when the platform roots cannot be loaded; [`EgressError::Unresolvable`]
    /// when the system resolver configuration cannot be read.
    pub fn build(self) -> Result<GuardedClient, EgressError> {
        let resolver: Arc<dyn Resolve> = match self.resolver {
            Some(r) => r,
            None => Arc::new(SystemResolver::from_system_conf().map_err(|e| {
                EgressError::Unresolvable {
                    host: String::new(),
                    reason: e.to_string(),
                }
            })?),
        };
        let mut tls = match self.tls {
            Some(tls) => tls,
            None => transport::default_tls()?,
        };
        transport::with_alpn(&mut tls);
        Ok(GuardedClient {
            inner: Arc::new(Inner {
                policy: self.policy,
                resolver,
                tls,
                pool: Mutex::new(HashMap::new()),
            }),
        })
    }
}

impl GuardedClient {
    /// A client with the system resolver and the platform's certificate roots.
    ///
    /// # Errors
    /// As [`GuardedClientBuilder::build`].
    pub fn new(policy: EgressPolicy) -> Result<Self, EgressError> {
        Self::builder(policy).build()
    }

    /// A builder, for injecting a resolver or TLS configuration.
    #[must_use]
    pub fn builder(policy: EgressPolicy) -> GuardedClientBuilder {
        GuardedClientBuilder {
            policy,
            resolver: None,
            tls: None,
        }
    }

    /// The policy this client enforces.
    #[must_use]
    pub fn policy(&self) -> &EgressPolicy {
        &self.inner.policy
    }

    /// A client for destinations a tenant or a caller declared (docs/rules.md EGRESS-38): this
    /// one's policy without the operator's `allow` lists, so only public addresses are reached,
    /// whatever the operator allowed for its own connections. The resolver, TLS configuration,
    /// deny lists, ports, deadline and body cap are the same; the connection pools are its own.
    #[must_use]
    pub fn public_only(&self) -> Self {
        Self {
            inner: Arc::new(Inner {
                policy: self.inner.policy.public_only(),
                resolver: Arc::clone(&self.inner.resolver),
                tls: self.inner.tls.clone(),
                pool: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// The resolver this client asks.
    #[must_use]
    pub fn resolver(&self) -> &Arc<dyn Resolve> {
        &self.inner.resolver
    }

    /// Starts a call: one deadline (the policy's) and one resolution per host for every request
    /// made through it.
    #[must_use]
    pub fn call(&self) -> Call {
        Call {
            client: self.clone(),
            deadline: Deadline::starting_now(self.inner.policy.deadline),
            pins: tokio::sync::Mutex::new(HashMap::new()),
        }
    }

    /// Sends one request as a call of its own.
    ///
    /// # Errors
    /// Any [`EgressError`].
    pub async fn send(&self, request: Request) -> Result<Response, EgressError> {
        self.call().send(request).await
    }

    /// Checks `url` and returns a reqwest client pinned to its checked addresses, as a call of
    /// its own (see [`Call::prepare`]).
    ///
    /// # Errors
    /// Any refusal of [`Call::prepare`].
    pub async fn prepare(
        &self,
        url: &str,
        carries_credential: bool,
    ) -> Result<PreparedCall, EgressError> {
        self.call().prepare(url, carries_credential).await
    }

    /// The pooled reqwest client for these checked addresses (built on first use).
    fn pooled(
        &self,
        target: &Target,
        addrs: &[SocketAddr],
    ) -> Result<reqwest::Client, EgressError> {
        let key = match target.host {
            TargetHost::Name { .. } => (target.pin_name().to_owned(), addrs.to_vec()),
            // An IP literal is never resolved; one unpinned client serves every literal.
            TargetHost::Ip(_) => (String::new(), Vec::new()),
        };
        let mut pool = self
            .inner
            .pool
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = pool.get(&key) {
            return Ok(client.clone());
        }
        let pins = (!key.0.is_empty()).then(|| Pins {
            name: &key.0,
            addrs,
        });
        // A backstop for a request whose caller forgot the call's deadline (every caller here
        // wraps its work in it): twice the deadline, so it never fires before the real one.
        let backstop = self.inner.policy.deadline.saturating_mul(2);
        let client = transport::build_client(&self.inner.tls, pins, Some(backstop))?;
        if pool.len() >= MAX_POOLED_CLIENTS {
            pool.clear();
        }
        pool.insert(key, client.clone());
        Ok(client)
    }
}

/// One logical call (for example an MCP initialize + tools/call): one deadline, and one
/// resolution per host, shared by every request made through it.
#[derive(Debug)]
pub struct Call {
    client: GuardedClient,
    deadline: Deadline,
    /// Checked addresses per host name, filled on first use. Held across the lookup, so two
    /// concurrent requests of a call cannot resolve the same host twice.
    pins: tokio::sync::Mutex<HashMap<String, Result<Pinned, pin::Refusal>>>,
}

/// A response whose head passed the rules, with its body not read yet.
struct Opened {
    response: reqwest::Response,
    rule: BodyRule,
    /// The host name or IP literal, for messages.
    host: String,
}

/// A reqwest client pinned to one URL's checked addresses, for code that must drive reqwest
/// itself (rmcp's `StreamableHttpClientTransport::with_client`).
///
/// The client refuses redirects and proxies, sends `Accept-Encoding: identity`, and reaches only
/// the checked addresses of `url`'s host (any other name fails to resolve). It cannot enforce
/// the body rules: the caller must refuse non-identity encodings, check content types, count
/// bytes against `max_body_bytes`, wrap its work in `tokio::time::timeout_at(deadline, …)`, and
/// use it only for URLs on `url`'s origin (an IP-literal URL bypasses resolvers).
#[derive(Debug, Clone)]
pub struct PreparedCall {
    /// The pinned client, pooled per checked address set so connections are reused (each
    /// request also times out after twice the policy's deadline, a backstop only).
    pub client: reqwest::Client,
    /// The checked URL.
    pub url: Url,
    /// The whole-call deadline.
    pub deadline: Instant,
    /// The addresses connections may go to.
    pub addresses: Vec<SocketAddr>,
    /// The policy's body cap, in bytes.
    pub max_body_bytes: u64,
}

impl Call {
    /// When this call's deadline passes.
    #[must_use]
    pub fn deadline(&self) -> Instant {
        self.deadline.at
    }

    /// Sends one request of this call.
    ///
    /// # Errors
    /// Any [`EgressError`]; a 4xx/5xx is not an error here (see [`Response::error_for_status`]).
    pub async fn send(&self, request: Request) -> Result<Response, EgressError> {
        let span = observe::request_span();
        let result = self
            .send_in_span(request, &span)
            .instrument(span.clone())
            .await;
        observe::finish(&span, result.as_ref().map(|_| ()));
        result
    }

    async fn send_in_span(
        &self,
        request: Request,
        span: &tracing::Span,
    ) -> Result<Response, EgressError> {
        let expect_body = request.method != Method::HEAD;
        let exchange = async {
            let opened = self.open(request, expect_body, span).await?;
            let (status, headers) = (opened.response.status(), opened.response.headers().clone());
            let cap = self.client.policy().max_body_bytes;
            let body = body::read_capped(opened.response, opened.rule, cap, &opened.host).await?;
            Ok(Response {
                status,
                headers,
                body,
            })
        };
        tokio::time::timeout_at(self.deadline.at, exchange)
            .await
            .map_err(|_| self.deadline.error())?
    }

    /// Sends one request of this call and returns as soon as its head passed the response rules;
    /// the body is read piece by piece through [`StreamingResponse::body`] (docs/rules.md
    /// EGRESS-31 to EGRESS-34): the same checks, pins and cap as [`Call::send`], and the call's
    /// deadline covers every read of the body too.
    ///
    /// # Errors
    /// Any [`EgressError`] up to the head; a 4xx/5xx is not an error here. A response without a
    /// content type is refused (`not_text`): a stream cannot be checked for UTF-8 before it is
    /// handed on.
    pub async fn send_streaming(&self, request: Request) -> Result<StreamingResponse, EgressError> {
        let span = observe::request_span();
        let expect_body = request.method != Method::HEAD;
        let opened =
            tokio::time::timeout_at(self.deadline.at, self.open(request, expect_body, &span))
                .instrument(span.clone())
                .await
                .map_err(|_| self.deadline.error())
                .and_then(|r| r)
                .and_then(|opened| match opened.rule {
                    BodyRule::Text => Ok(opened),
                    // EGRESS-32: a stream is handed on as it arrives, so its text must be declared.
                    BodyRule::MustBeUtf8 => Err(EgressError::NotText {
                        content_type: "no content type on a streamed response".into(),
                    }),
                });
        observe::finish(&span, opened.as_ref().map(|_| ()));
        let opened = opened?;
        Ok(StreamingResponse::new(
            opened.response,
            self.client.policy().max_body_bytes,
            self.deadline,
            opened.host,
        ))
    }

    /// The common start of [`Call::send`] and [`Call::send_streaming`]: checks the request,
    /// pins its host, sends it and checks the response's head. The caller applies the deadline.
    async fn open(
        &self,
        request: Request,
        expect_body: bool,
        span: &tracing::Span,
    ) -> Result<Opened, EgressError> {
        request.check()?;
        let target = url_check::parse_target(self.client.policy(), &request.url)?;
        // EGRESS-35: a traced call's request gets its own client span, refusals included.
        let traced = HttpSpan::start_current(&request.method, &target.url);
        let opened = self
            .open_target(request, target, expect_body, span, traced.as_ref())
            .await;
        if let Some(traced) = traced {
            traced.finish(
                opened
                    .as_ref()
                    .map(|o| o.response.status().as_u16())
                    .map_err(EgressError::kind),
            );
        }
        opened
    }

    /// [`Call::open`] once the URL is parsed: pins, sends (with `traceparent` when traced,
    /// EGRESS-36) and checks the head.
    async fn open_target(
        &self,
        request: Request,
        target: Target,
        expect_body: bool,
        span: &tracing::Span,
        traced: Option<&HttpSpan>,
    ) -> Result<Opened, EgressError> {
        let policy = self.client.policy();
        let host = target.host_label();
        span.record("host", host.as_str());
        let addrs = self
            .checked_addrs(&target, request.carries_credential())
            .await?;
        span.record("checked", tracing::field::debug(&addrs));
        let client = self.client.pooled(&target, &addrs)?;
        let mut builder = client
            .request(request.method, target.url)
            .headers(request.headers);
        if let Some(value) = traced.and_then(HttpSpan::header) {
            builder = builder.header(TRACEPARENT, value);
        }
        if let Some(body) = request.body {
            builder = builder.body(body);
        }
        let response = builder
            .send()
            .await
            .map_err(|e| transport::classify_error(e, &host))?;
        if let Some(remote) = response.remote_addr() {
            span.record("chosen", tracing::field::display(remote));
        }
        let rule = body::check_head(
            response.status(),
            response.headers(),
            expect_body,
            policy.max_body_bytes,
        )?;
        Ok(Opened {
            response,
            rule,
            host,
        })
    }

    /// Checks `url` and returns a reqwest client pinned to its checked addresses, under this
    /// call's deadline and resolution.
    ///
    /// # Errors
    /// Every refusal that needs no response: scheme, URL, name, address, resolution, a
    /// credential over plain `http`, or a deadline already passed.
    pub async fn prepare(
        &self,
        url: &str,
        carries_credential: bool,
    ) -> Result<PreparedCall, EgressError> {
        let span = observe::request_span();
        let result = async {
            let target = url_check::parse_target(self.client.policy(), url)?;
            span.record("host", target.host_label());
            let addrs = self.checked_addrs(&target, carries_credential).await?;
            span.record("checked", tracing::field::debug(&addrs));
            if self.deadline.at <= Instant::now() {
                return Err(self.deadline.error());
            }
            // The pooled client of these checked addresses: its idle connections are reused,
            // so a call does not pay for a new connection (and TLS handshake) each time.
            let client = self.client.pooled(&target, &addrs)?;
            Ok(PreparedCall {
                client,
                url: target.url,
                deadline: self.deadline.at,
                addresses: addrs,
                max_body_bytes: self.client.policy().max_body_bytes,
            })
        }
        .instrument(span.clone())
        .await;
        observe::finish(&span, result.as_ref().map(|_| ()));
        result
    }

    /// The checked socket addresses for `target`, resolving its host once per call, and the
    /// credential rule.
    async fn checked_addrs(
        &self,
        target: &Target,
        carries_credential: bool,
    ) -> Result<Vec<SocketAddr>, EgressError> {
        let policy = self.client.policy();
        let pinned = {
            let mut pins = self.pins.lock().await;
            match pins.get(target.lookup_name()) {
                Some(Ok(p)) => p.clone(),
                Some(Err(refusal)) => return Err(refusal.clone().into()),
                None => {
                    let resolver = self.client.resolver().as_ref();
                    let result = pin::pin(policy, resolver, target, Some(self.deadline)).await;
                    // A refusal is remembered too: a rebinding name refused once in a call must
                    // not get a second chance with a friendlier answer.
                    let remembered = match &result {
                        Ok(p) => Ok(p.clone()),
                        Err(e) => Err(pin::Refusal::from(e)),
                    };
                    pins.insert(target.lookup_name().to_owned(), remembered);
                    result?
                }
            }
        };
        // A credential over plain http can be read on the path; only an operator-allowed loopback
        // address (a sidecar on the same host) is exempt.
        if carries_credential && target.url.scheme() == "http" && !pinned.operator_loopback_only() {
            return Err(EgressError::BlockedScheme {
                reason: "a credential is never sent over plain http".into(),
            });
        }
        Ok(pinned.socket_addrs(target.port))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_production_client_builds_from_the_system_configuration() {
        let client = GuardedClient::new(EgressPolicy::default()).unwrap();
        // A refusal needs no network: the guard decides before any lookup.
        let err = client
            .send(Request::get("http://localhost/"))
            .await
            .unwrap_err();
        assert_eq!(err.kind(), "blocked_name");
    }
}
