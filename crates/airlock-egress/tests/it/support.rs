//! Test servers on 127.0.0.1 (plain and TLS), scripted resolvers, and policies that reach
//! loopback only through `allow`, exactly as an operator would configure it.

use std::collections::VecDeque;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use airlock_egress::{EgressPolicy, GuardedClient, Lookup, Resolve, ResolveError, StaticResolver};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the scripted server answers.
#[derive(Clone, Debug)]
pub(crate) enum Reply {
    /// A status line + headers (without the blank line) and a body, written at once.
    Raw { head: String, body: Vec<u8> },
    /// The head, then one byte of body every `every`, forever.
    Trickle { head: String, every: Duration },
    /// No answer: close the connection once the request is read.
    Hangup,
    /// No answer: keep the connection open and say nothing.
    Silence,
}

impl Reply {
    /// A 200 with this content type and body, and a correct Content-Length.
    pub(crate) fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        let body = body.into();
        Reply::Raw {
            head: format!(
                "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}",
                body.len()
            ),
            body,
        }
    }
}

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) head: String,
    pub(crate) sni: Option<String>,
}

impl Seen {
    pub(crate) fn header(&self, name: &str) -> Option<String> {
        self.head.lines().find_map(|l| {
            let (n, v) = l.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_owned())
        })
    }
}

type Script = Arc<dyn Fn(&Seen) -> Reply + Send + Sync>;

/// A scripted HTTP/1.1 server on 127.0.0.1:0.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    pub(crate) seen: Arc<Mutex<Vec<Seen>>>,
    pub(crate) connections: Arc<AtomicUsize>,
}

impl Server {
    pub(crate) async fn plain(script: impl Fn(&Seen) -> Reply + Send + Sync + 'static) -> Server {
        Self::start(Arc::new(script), None).await
    }

    pub(crate) async fn tls(
        cert_names: &[&str],
        script: impl Fn(&Seen) -> Reply + Send + Sync + 'static,
    ) -> (Server, CertificateDer<'static>) {
        let key = rcgen::generate_simple_self_signed(
            cert_names.iter().map(|s| s.to_string()).collect::<Vec<_>>(),
        )
        .unwrap();
        let cert = key.cert.der().clone();
        let private =
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.signing_key.serialize_der()));
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![cert.clone()], private)
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        (Self::start(Arc::new(script), Some(acceptor)).await, cert)
    }

    async fn start(script: Script, tls: Option<tokio_rustls::TlsAcceptor>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let connections = Arc::new(AtomicUsize::new(0));
        let (seen2, conns2) = (seen.clone(), connections.clone());
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                conns2.fetch_add(1, Ordering::SeqCst);
                let (script, seen, tls) = (script.clone(), seen2.clone(), tls.clone());
                tokio::spawn(async move {
                    match tls {
                        None => serve_conn(stream, None, script, seen).await,
                        Some(acceptor) => {
                            let Ok(stream) = acceptor.accept(stream).await else {
                                return;
                            };
                            let sni = stream.get_ref().1.server_name().map(str::to_owned);
                            serve_conn(stream, sni, script, seen).await;
                        }
                    }
                });
            }
        });
        Server {
            addr,
            seen,
            connections,
        }
    }

    pub(crate) fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn port(&self) -> u16 {
        self.addr.port()
    }
}

async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(
    mut stream: S,
    sni: Option<String>,
    script: Script,
    seen: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buf = Vec::new();
    loop {
        // Read one request head (and its body, by Content-Length) per iteration: keep-alive.
        let head_end = loop {
            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
        let request = Seen {
            head,
            sni: sni.clone(),
        };
        let body_len: usize = request
            .header("content-length")
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        while buf.len() < head_end + body_len {
            let mut chunk = [0u8; 4096];
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
        buf.drain(..head_end + body_len);
        seen.lock().unwrap().push(request.clone());
        match script(&request) {
            Reply::Hangup => return,
            Reply::Silence => std::future::pending::<()>().await,
            Reply::Raw { head, body } => {
                let mut out = format!("{head}\r\n\r\n").into_bytes();
                out.extend_from_slice(&body);
                if stream.write_all(&out).await.is_err() {
                    return;
                }
            }
            Reply::Trickle { head, every } => {
                if stream
                    .write_all(format!("{head}\r\n\r\n").as_bytes())
                    .await
                    .is_err()
                {
                    return;
                }
                let mut tick = tokio::time::interval(every);
                loop {
                    tick.tick().await;
                    if stream.write_all(b"a").await.is_err() || stream.flush().await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// A policy that reaches 127.0.0.1 only because the operator allowed it.
pub(crate) fn loopback_policy() -> EgressPolicy {
    EgressPolicy {
        allow_cidrs: vec!["127.0.0.1/32".parse().unwrap()],
        ..EgressPolicy::default()
    }
}

/// A client with `policy`, this resolver, and (for TLS tests) a private root.
pub(crate) fn client(
    policy: EgressPolicy,
    resolver: Arc<dyn Resolve>,
    root: Option<&CertificateDer<'static>>,
) -> GuardedClient {
    let mut builder = GuardedClient::builder(policy).resolver(resolver);
    if let Some(root) = root {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(root.clone()).unwrap();
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        builder = builder.tls_config(config);
    }
    builder.build().unwrap()
}

pub(crate) fn resolver(name: &str, addrs: &[&str]) -> Arc<dyn Resolve> {
    Arc::new(StaticResolver::new().with(name, addrs.iter().map(|a| a.parse::<IpAddr>().unwrap())))
}

/// Answers each lookup with the next answer in line (the last one repeats), counting lookups:
/// a DNS-rebinding attacker's name server.
#[derive(Debug)]
pub(crate) struct Rebinding {
    answers: Mutex<VecDeque<Vec<IpAddr>>>,
    pub(crate) lookups: AtomicUsize,
}

impl Rebinding {
    pub(crate) fn new(answers: Vec<Vec<IpAddr>>) -> Arc<Self> {
        Arc::new(Self {
            answers: Mutex::new(answers.into()),
            lookups: AtomicUsize::new(0),
        })
    }

    pub(crate) fn lookups(&self) -> usize {
        self.lookups.load(Ordering::SeqCst)
    }
}

impl Resolve for Rebinding {
    fn lookup<'a>(&'a self, _name: &'a str) -> Lookup<'a> {
        self.lookups.fetch_add(1, Ordering::SeqCst);
        let mut answers = self.answers.lock().unwrap();
        let answer = if answers.len() > 1 {
            answers.pop_front()
        } else {
            answers.front().cloned()
        };
        Box::pin(std::future::ready(answer.ok_or(ResolveError::NotFound)))
    }
}

/// Answers every name with the same addresses (so a refusal must come from a rule, not from DNS).
#[derive(Debug)]
pub(crate) struct Everything(pub(crate) Vec<IpAddr>);

impl Resolve for Everything {
    fn lookup<'a>(&'a self, _name: &'a str) -> Lookup<'a> {
        Box::pin(std::future::ready(Ok(self.0.clone())))
    }
}

/// Never answers (a name server that times out).
#[derive(Debug)]
pub(crate) struct Silent;

impl Resolve for Silent {
    fn lookup<'a>(&'a self, _name: &'a str) -> Lookup<'a> {
        Box::pin(std::future::pending())
    }
}
