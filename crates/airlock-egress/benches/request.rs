//! A guarded keep-alive GET to a loopback server (allowed by policy, name pinned through an
//! injected resolver) against plain reqwest to the same server (target at p50: within 10% or
//! 20 µs, whichever is larger).

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use airlock_egress::{EgressPolicy, GuardedClient, Request, StaticResolver};
use criterion::{Criterion, criterion_group, criterion_main};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const REPLY: &[u8] =
    b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 11\r\n\r\n{\"ok\":true}";

/// A minimal keep-alive HTTP/1.1 server answering every GET with the same small JSON body.
fn start_server(rt: &tokio::runtime::Runtime) -> SocketAddr {
    let listener = rt
        .block_on(TcpListener::bind("127.0.0.1:0"))
        .unwrap_or_else(|e| panic!("bind: {e}"));
    let addr = listener
        .local_addr()
        .unwrap_or_else(|e| panic!("addr: {e}"));
    rt.spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::with_capacity(4096);
                let mut chunk = [0u8; 4096];
                loop {
                    while let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                        buf.drain(..end + 4);
                        if stream.write_all(REPLY).await.is_err() {
                            return;
                        }
                    }
                    match stream.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
            });
        }
    });
    addr
}

fn keep_alive_get(c: &mut Criterion) {
    let server_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));
    let addr = start_server(&server_rt);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("runtime: {e}"));

    let plain = reqwest::Client::builder()
        .no_proxy()
        .build()
        .unwrap_or_else(|e| panic!("reqwest: {e}"));
    let plain_url = format!("http://127.0.0.1:{}/", addr.port());

    let loopback: IpAddr = [127, 0, 0, 1].into();
    let policy = EgressPolicy {
        allow_cidrs: vec![loopback.into()],
        ..EgressPolicy::default()
    };
    let resolver = StaticResolver::new().with("bench.example.com", [loopback]);
    let guarded = rt
        .block_on(async {
            GuardedClient::builder(policy)
                .resolver(Arc::new(resolver))
                .build()
        })
        .unwrap_or_else(|e| panic!("guarded client: {e}"));
    let guarded_url = format!("http://bench.example.com:{}/", addr.port());

    let mut group = c.benchmark_group("keep_alive_get");
    group.bench_function("plain_reqwest", |b| {
        b.iter(|| {
            rt.block_on(async {
                let reply = plain
                    .get(&plain_url)
                    .send()
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                reply.bytes().await.unwrap_or_else(|e| panic!("{e}"))
            })
        });
    });
    group.bench_function("guarded", |b| {
        b.iter(|| {
            rt.block_on(async {
                let reply = guarded
                    .send(Request::get(guarded_url.as_str()))
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                reply.body().len()
            })
        });
    });
    group.finish();
}

criterion_group!(benches, keep_alive_get);
criterion_main!(benches);
