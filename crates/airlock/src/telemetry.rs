//! `[telemetry]`: traces exported over OTLP/HTTP (protobuf) to the operator's collector
//! (docs/rules.md OPS-23 … OPS-26, EGRESS-35).
//!
//! Guarantees: nothing is built, and no span is ever started, unless `[telemetry]` is
//! configured; every export request goes through the egress guard, under the deployment's
//! policy with the collector's own host (and port) allowed, as if the operator had listed it
//! in `[egress] allow` (a `deny` entry still wins); header values are resolved from
//! credentials and never logged; the batch of spans still queued is flushed at shutdown.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use airlock_egress::trace::RequestTracer;
use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_runtime::egress_policy;
use airlock_spec::{Config, Credentials, TelemetrySettings};
use anyhow::Context as _;
use bytes::Bytes;
use opentelemetry::global::BoxedTracer;
use opentelemetry::trace::TracerProvider as _;
use opentelemetry_http::{HttpClient, HttpError};
use opentelemetry_otlp::{Protocol, WithExportConfig as _, WithHttpConfig as _};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
use secrecy::ExposeSecret as _;
use url::{Host, Url};

/// The tracer of a configured `[telemetry]`, and its provider (to flush at shutdown).
#[derive(Debug, Clone)]
pub struct Telemetry {
    /// What the MCP endpoint starts its server spans with.
    pub tracer: RequestTracer,
    provider: SdkTracerProvider,
}

impl Telemetry {
    /// Builds the exporter and tracer of `config`'s `[telemetry]`; `None` when it is absent.
    /// Must run inside the Tokio runtime that will carry the export requests.
    ///
    /// # Errors
    /// A header's credential that does not resolve, an egress client that cannot be built, or
    /// an exporter the OTLP crate refuses.
    pub fn start(config: &Config, credentials: &Credentials) -> anyhow::Result<Option<Self>> {
        let Some(settings) = &config.telemetry else {
            return Ok(None);
        };
        let endpoint = Url::parse(&settings.endpoint).context("[telemetry] endpoint")?;
        let guard = GuardedClient::new(collector_policy(egress_policy(&config.egress), &endpoint))
            .context("[telemetry]: the egress client")?;
        let mut headers = HashMap::new();
        for (name, path) in &settings.headers {
            let value = credentials
                .get(path)
                .with_context(|| format!("[telemetry.headers] {name}"))?;
            headers.insert(name.clone(), value.expose_secret().to_owned());
        }
        let client = GuardedExport {
            guard,
            runtime: tokio::runtime::Handle::current(),
            carries_credential: !headers.is_empty(),
        };
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_http_client(client)
            .with_protocol(Protocol::HttpBinary)
            .with_endpoint(format!("{}/v1/traces", settings.endpoint))
            .with_headers(headers)
            .build()
            .context("[telemetry]: the OTLP exporter")?;
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_sampler(Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(
                settings.sample_ratio,
            ))))
            .with_resource(resource(settings))
            .build();
        let tracer = provider.tracer("airlock");
        Ok(Some(Self {
            tracer: Arc::new(BoxedTracer::new(Box::new(tracer))),
            provider,
        }))
    }

    /// Exports the spans still queued and stops the exporter (off the async workers: the
    /// flush blocks its thread until the collector answered or the export timed out).
    pub async fn shutdown(self) {
        let provider = self.provider;
        let flushed = tokio::task::spawn_blocking(move || provider.shutdown()).await;
        if let Ok(Err(error)) = flushed {
            tracing::warn!(%error, "[telemetry]: flushing the last spans failed");
        }
    }
}

/// `service.name` and `service.version`.
fn resource(settings: &TelemetrySettings) -> Resource {
    Resource::builder_empty()
        .with_service_name(settings.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build()
}

/// The deployment's policy with the collector allowed: its host name or address, and its port
/// when `[egress] ports` restricts ports (EGRESS-35).
fn collector_policy(mut policy: EgressPolicy, endpoint: &Url) -> EgressPolicy {
    match endpoint.host() {
        Some(Host::Domain(name)) => policy
            .allow_hosts
            .push(name.trim_end_matches('.').to_ascii_lowercase()),
        Some(Host::Ipv4(ip)) => policy.allow_cidrs.push(IpAddr::V4(ip).into()),
        Some(Host::Ipv6(ip)) => policy.allow_cidrs.push(IpAddr::V6(ip).into()),
        None => {}
    }
    if let (Some(ports), Some(port)) = (policy.ports.as_mut(), endpoint.port_or_known_default()) {
        ports.push(port);
    }
    policy
}

/// The exporter's HTTP client: each export is one guarded request. The batch processor calls
/// it from its own thread, so the request runs on the server's runtime and is awaited from
/// there.
#[derive(Debug)]
struct GuardedExport {
    guard: GuardedClient,
    runtime: tokio::runtime::Handle,
    carries_credential: bool,
}

#[async_trait::async_trait]
impl HttpClient for GuardedExport {
    async fn send_bytes(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, HttpError> {
        let (guard, credential) = (self.guard.clone(), self.carries_credential);
        self.runtime
            .spawn(async move { export(&guard, request, credential).await })
            .await?
    }
}

/// Sends one export through the guard's pinned client. The collector's answer is judged by
/// its status only: its body (empty, or a protobuf partial-success notice) is not read, so a
/// collector cannot make the gateway hold a large answer.
async fn export(
    guard: &GuardedClient,
    request: http::Request<Bytes>,
    carries_credential: bool,
) -> Result<http::Response<Bytes>, HttpError> {
    let (parts, body) = request.into_parts();
    let prepared = guard
        .prepare(&parts.uri.to_string(), carries_credential)
        .await?;
    let send = prepared
        .client
        .request(parts.method, prepared.url)
        .headers(parts.headers)
        .body(body)
        .send();
    let response = tokio::time::timeout_at(prepared.deadline, send).await??;
    Ok(http::Response::builder()
        .status(response.status())
        .body(Bytes::new())?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_collector_is_allowed_by_name_address_and_port() {
        let base = EgressPolicy {
            ports: Some(vec![443]),
            ..EgressPolicy::default()
        };
        let named = collector_policy(
            base.clone(),
            &Url::parse("http://Otel.internal:4318").unwrap(),
        );
        assert_eq!(named.allow_hosts, ["otel.internal"]);
        assert_eq!(named.ports, Some(vec![443, 4318]));
        let literal = collector_policy(base, &Url::parse("http://10.1.2.3:4318").unwrap());
        assert_eq!(
            literal.allow_cidrs,
            ["10.1.2.3/32".parse::<ipnet::IpNet>().unwrap()]
        );
        assert!(literal.allow_hosts.is_empty());
    }
}
