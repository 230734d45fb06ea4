//! A loopback forwarding proxy that adds `Authorization: Bearer TOKEN` to each HTTP/1.1 request
//! without one, for clients that cannot send a bearer token themselves: the MCP conformance
//! suite has no header option, and airlock's MCP endpoint is deny-by-default.
//!
//! Guarantees: it listens on 127.0.0.1 port 0 and connects only to the loopback address it was
//! given; requests are forwarded byte for byte except for the one inserted header line (the
//! `Host`, `Origin`, a missing `Accept` and every other header reach airlock as the client sent
//! them, so host and header validation are tested for real); responses come back untouched.
//! A request it cannot frame (a chunked body, a head over 64 KiB or without a request line)
//! closes the connection with a message on stderr, never a guess.
//!
//! Each request also gets `Connection: close` (a hop-by-hop header, the proxy's own business):
//! every request then has a connection of its own. Reusing one is a race here — when airlock
//! refuses a request without reading its body (a 401, a 403), hyper closes that connection
//! after the response, and a client that already sent its next request on it sees "other side
//! closed" for a request airlock never received.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};

/// The largest request head read.
const MAX_HEAD: usize = 64 * 1024;

/// Starts the proxy in front of `upstream`; returns the address to give the client.
pub(crate) async fn start(upstream: SocketAddr, token: &str) -> SocketAddr {
    assert!(upstream.ip().is_loopback(), "{upstream} is not loopback");
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let line: Arc<[u8]> = format!("authorization: Bearer {token}\r\n")
        .into_bytes()
        .into();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let line = line.clone();
            tokio::spawn(async move {
                if let Err(e) = relay(client, upstream, &line).await {
                    eprintln!("bearer proxy: {e}");
                }
            });
        }
    });
    addr
}

/// One client connection: requests go up with the header added, responses come back as sent.
async fn relay(client: TcpStream, upstream: SocketAddr, line: &[u8]) -> io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let responses =
        tokio::spawn(async move { tokio::io::copy(&mut server_read, &mut client_write).await });
    let requests = forward_requests(&mut client_read, &mut server_write, line).await;
    // The client is done: let the server see the end too, then finish the responses.
    let _ = server_write.shutdown().await;
    let _ = responses.await;
    requests
}

/// Forwards each request on the connection until the client closes it.
async fn forward_requests(
    from: &mut (impl AsyncRead + Unpin),
    to: &mut (impl AsyncWrite + Unpin),
    line: &[u8],
) -> io::Result<()> {
    let mut pending = Vec::new();
    loop {
        let head_len = loop {
            if let Some(end) = find(&pending, b"\r\n\r\n") {
                break end + 4;
            }
            if pending.len() > MAX_HEAD {
                return Err(refused("a request head over 64 KiB"));
            }
            if read_more(from, &mut pending).await? == 0 {
                return if pending.is_empty() {
                    Ok(())
                } else {
                    Err(refused("a request head cut short"))
                };
            }
        };
        let head = &pending[..head_len];
        let body_len = body_len(head)?;
        let request_line = find(head, b"\r\n").map_or(head_len, |end| end + 2);
        let mut out = Vec::with_capacity(head_len + line.len());
        out.extend_from_slice(&head[..request_line]);
        if header(head, "authorization").is_none() {
            out.extend_from_slice(line);
        }
        out.extend_from_slice(b"connection: close\r\n");
        out.extend_from_slice(&head[request_line..]);
        to.write_all(&out).await?;
        pending.drain(..head_len);
        let mut left = body_len;
        while left > 0 {
            if pending.is_empty() && read_more(from, &mut pending).await? == 0 {
                return Err(refused("a request body cut short"));
            }
            let take = left.min(pending.len());
            to.write_all(&pending[..take]).await?;
            pending.drain(..take);
            left -= take;
        }
    }
}

/// Reads what is available into `buf`; 0 at the end of the stream.
async fn read_more(from: &mut (impl AsyncRead + Unpin), buf: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 8192];
    let n = from.read(&mut chunk).await?;
    buf.extend_from_slice(&chunk[..n]);
    Ok(n)
}

/// The body length of a request head: its `Content-Length`, or none.
fn body_len(head: &[u8]) -> io::Result<usize> {
    if header(head, "transfer-encoding").is_some() {
        return Err(refused("a chunked request body"));
    }
    header(head, "content-length").map_or(Ok(0), |value| {
        value
            .trim()
            .parse()
            .map_err(|_| refused("an invalid Content-Length"))
    })
}

/// The value of header `name` (lower case) in a request head, if present.
fn header(head: &[u8], name: &str) -> Option<String> {
    String::from_utf8_lossy(head)
        .split("\r\n")
        .skip(1)
        .filter_map(|l| l.split_once(':'))
        .find(|(n, _)| n.trim().eq_ignore_ascii_case(name))
        .map(|(_, v)| v.to_owned())
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

fn refused(what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{what}; closing the connection"),
    )
}
