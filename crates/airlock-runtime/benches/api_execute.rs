//! Bench binary: the api executor's overhead (argument check + request building + egress
//! guard + response parsing and select) versus a bare reqwest GET of the same URL, both over
//! keep-alive connections to one loopback server. Run with
//! `cargo bench -p airlock-runtime --bench api_execute`; prints p50 and p99 of each.

#![allow(clippy::unwrap_used, missing_docs)]

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use airlock_egress::{EgressPolicy, GuardedClient, StaticResolver};
use airlock_runtime::api::execute;
use airlock_runtime::arguments::ArgumentCheck;
use airlock_spec::{ApiAuth, ApiConnection, ApiOperation, CredentialPath, Credentials, Method};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const BODY: &str = r#"{"data":{"name":"ACME SA","id":7}}"#;
const ROUNDS: usize = 3000;

/// A keep-alive HTTP/1.1 server answering every request with `BODY`.
async fn server() -> u16 {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let (mut socket, _) = listener.accept().await.unwrap();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut pending = Vec::new();
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{BODY}",
                    BODY.len()
                );
                loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    pending.extend_from_slice(&buf[..n]);
                    while let Some(end) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                        pending.drain(..end + 4);
                        if socket.write_all(reply.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                }
            });
        }
    });
    port
}

fn percentiles(mut samples: Vec<Duration>) -> (Duration, Duration) {
    samples.sort();
    (
        samples[samples.len() / 2],
        samples[samples.len() * 99 / 100],
    )
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let port = server().await;
    let mut policy = EgressPolicy::default();
    policy.allow_cidrs.push("127.0.0.1/32".parse().unwrap());
    let resolver =
        StaticResolver::new().with("api.bench.example.com", [Ipv4Addr::LOCALHOST.into()]);
    let guard = GuardedClient::builder(policy)
        .resolver(Arc::new(resolver))
        .build()
        .unwrap();
    let op = ApiOperation {
        slug: "erp".into(),
        operation: "get".into(),
        connection: "erp".into(),
        auth: ApiAuth::Bearer,
        method: Method::Get,
        path: "/clientes/{id}".into(),
        query: vec![("limit".into(), "{limit}".into())],
        body: None,
        allow_slashes: Vec::new(),
        select: Some("data.name".into()),
    };
    let connection = ApiConnection {
        // A loopback test upstream: the operator vouches for it (EGRESS-38).
        use_egress_allow: true,
        base_url: format!("http://api.bench.example.com:{port}/v1"),
        credential: Some(CredentialPath::try_from("erp.token").unwrap()),
        per_principal: None,
    };
    let creds = Credentials::from_pairs([("erp.token".to_owned(), "bench-token".to_owned())]);
    let check = ArgumentCheck::new(&json!({"type": "object", "properties": {"id": {"type": "string"}, "limit": {"type": "integer", "default": 25}}, "required": ["id"]})).unwrap();
    let arguments = json!({"id": "30-1"});

    let plain = reqwest::Client::builder().no_proxy().build().unwrap();
    let url = format!("http://127.0.0.1:{port}/v1/clientes/30-1?limit=25");
    let mut bare = Vec::with_capacity(ROUNDS);
    let mut airlock = Vec::with_capacity(ROUNDS);
    for round in 0..ROUNDS * 2 {
        let start = Instant::now();
        let response = plain
            .get(&url)
            .bearer_auth("bench-token")
            .send()
            .await
            .unwrap();
        let value: serde_json::Value =
            serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(value["data"]["name"], "ACME SA");
        let bare_time = start.elapsed();

        let start = Instant::now();
        let args = check.prepare(arguments.clone()).unwrap();
        let result = execute(&guard, &op, &connection, &creds, &args)
            .await
            .unwrap();
        assert_eq!(result, "ACME SA");
        let airlock_time = start.elapsed();
        // The first half warms connections and caches.
        if round >= ROUNDS {
            bare.push(bare_time);
            airlock.push(airlock_time);
        }
    }
    let (bare_p50, bare_p99) = percentiles(bare);
    let (air_p50, air_p99) = percentiles(airlock);
    println!(
        "bare reqwest GET + JSON parse: p50 {:.1} µs, p99 {:.1} µs",
        bare_p50.as_secs_f64() * 1e6,
        bare_p99.as_secs_f64() * 1e6
    );
    println!(
        "api executor (check + build + guard + parse + select): p50 {:.1} µs, p99 {:.1} µs",
        air_p50.as_secs_f64() * 1e6,
        air_p99.as_secs_f64() * 1e6
    );
    println!(
        "overhead at p50: {:.1} µs",
        (air_p50.as_secs_f64() - bare_p50.as_secs_f64()) * 1e6
    );
}
