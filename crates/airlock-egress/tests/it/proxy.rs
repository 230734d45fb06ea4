//! With `HTTP_PROXY`, `HTTPS_PROXY` and `ALL_PROXY` pointing at a listener, the listener gets
//! nothing and the request goes straight to the checked address.
//!
//! Setting environment variables in a threaded test binary is unsafe (and the workspace forbids
//! unsafe code), so the parent test re-runs this test binary as a child process with the proxy
//! variables set; the child makes the request, the parent watches both listeners.

use std::net::TcpListener as StdListener;
use std::sync::Arc;

use airlock_egress::{Request, StaticResolver};

use crate::support::{self, Reply, Server};

const CHILD: &str = "AIRLOCK_EGRESS_PROXY_CHILD_URL";

#[tokio::test]
async fn environment_proxies_are_ignored() {
    let server = Server::plain(|_| Reply::ok("text/plain", b"direct".to_vec())).await;
    let proxy = StdListener::bind("127.0.0.1:0").unwrap();
    proxy.set_nonblocking(true).unwrap();
    let proxy_url = format!("http://{}", proxy.local_addr().unwrap());
    let status = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "proxy::child_sends_one_request",
            "--ignored",
            "--test-threads=1",
        ])
        .env(CHILD, format!("http://127.0.0.1:{}/", server.port()))
        .env("HTTP_PROXY", &proxy_url)
        .env("HTTPS_PROXY", &proxy_url)
        .env("ALL_PROXY", &proxy_url)
        .env("http_proxy", &proxy_url)
        .env("https_proxy", &proxy_url)
        .env("all_proxy", &proxy_url)
        .env_remove("NO_PROXY")
        .env_remove("no_proxy")
        // The child's own test report would read like this binary's; its exit status is enough.
        .stdout(std::process::Stdio::null())
        .status()
        .await
        .unwrap();
    assert!(status.success(), "the child's request failed");
    assert_eq!(
        server.seen().len(),
        1,
        "the request did not reach the server directly"
    );
    assert_eq!(
        proxy.accept().map_err(|e| e.kind()).err(),
        Some(std::io::ErrorKind::WouldBlock),
        "the proxy listener received a connection"
    );
}

/// Runs only as the child of `environment_proxies_are_ignored`.
#[tokio::test]
#[ignore = "run by environment_proxies_are_ignored in a child process"]
async fn child_sends_one_request() {
    let Ok(url) = std::env::var(CHILD) else {
        return;
    };
    assert!(std::env::var("HTTP_PROXY").is_ok());
    let client = support::client(
        support::loopback_policy(),
        Arc::new(StaticResolver::new()),
        None,
    );
    let reply = client.send(Request::get(url)).await.unwrap();
    assert_eq!(reply.text(), "direct");
}
