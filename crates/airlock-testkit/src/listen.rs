//! Loopback listeners for the testkit's servers: bound on 127.0.0.1 (an OS-assigned port unless
//! a test asks for one), so no fixture ever listens beyond this machine.

use axum::Router;
use tokio::net::TcpListener;

/// A listener on 127.0.0.1:`port` (0: any free port) and the port it got.
///
/// # Panics
/// When the port cannot be bound: a broken test machine, reported loudly.
pub(crate) async fn loopback(port: u16) -> (TcpListener, u16) {
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .expect("binding a port on 127.0.0.1");
    let port = listener
        .local_addr()
        .expect("the listener's address")
        .port();
    (listener, port)
}

/// Serves `app` on 127.0.0.1:`port` (0: any free port) in the background; the port it got.
pub(crate) async fn serve(app: Router, port: u16) -> u16 {
    let (listener, port) = loopback(port).await;
    tokio::spawn(async move { axum::serve(listener, app).await });
    port
}

/// A port on 127.0.0.1 that was free a moment ago (nothing listens on it now).
///
/// # Panics
/// When no port on 127.0.0.1 can be bound.
#[must_use]
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("binding 127.0.0.1:0")
        .port()
}
