//! Every row of `tests/data/egress-vectors.tsv`, as one table-driven test per input kind. The
//! columns, input kinds and escapes are described in docs/rules.md EGRESS-29.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use airlock_egress::{
    EgressPolicy, Request, Resolve, StaticResolver, check_host, check_join, check_url, classify,
    join,
};
use http::{HeaderValue, Method};
use url::Url;

use crate::support::{self, Everything, Rebinding, Reply, Server, Silent};

const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/egress-vectors.tsv");

/// The stand-in for the gateway's own public address (vector `SELF`).
const SELF_ADDR: &str = "34.1.2.3";

#[derive(Debug, Clone)]
struct Row {
    id: String,
    kind: String,
    input: String,
    resolved: String,
    allow: bool,
}

fn unescape(s: &str) -> String {
    let mut out = s
        .replace("<SP>", " ")
        .replace("<TAB>", "\t")
        .replace("<LF>", "\n")
        .replace("<CR>", "\r")
        .replace("<NUL>", "\0");
    while let Some(start) = out.find("<U+") {
        let end = start + out[start..].find('>').expect("unterminated <U+");
        let code = u32::from_str_radix(&out[start + 3..end], 16).expect("bad <U+XXXX>");
        out.replace_range(
            start..=end,
            &char::from_u32(code).expect("bad scalar").to_string(),
        );
    }
    out
}

fn rows(kind: &str) -> Vec<Row> {
    let text = std::fs::read_to_string(VECTORS)
        .unwrap_or_else(|e| panic!("the egress vectors must be at {VECTORS}: {e}"));
    let mut lines = text.lines();
    assert!(
        lines
            .next()
            .is_some_and(|h| h.starts_with("id\tinput_kind\tinput")),
        "bad header"
    );
    let all: Vec<Row> = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            assert!(f.len() >= 5, "short row: {l}");
            assert!(matches!(f[4], "allow" | "block"), "bad expected in {l}");
            Row {
                id: f[0].into(),
                kind: f[1].into(),
                input: unescape(f[2]),
                resolved: f[3].into(),
                allow: f[4] == "allow",
            }
        })
        .collect();
    assert!(all.len() >= 265, "only {} vectors in {VECTORS}", all.len());
    all.into_iter().filter(|r| r.kind == kind).collect()
}

fn report(kind: &str, failures: &[String], ran: usize) {
    assert!(ran > 0, "no {kind} vectors");
    assert!(
        failures.is_empty(),
        "{} of {ran} {kind} vectors failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

fn expect(row: &Row, allowed: bool, detail: impl std::fmt::Display, failures: &mut Vec<String>) {
    if allowed != row.allow {
        let want = if row.allow { "allow" } else { "block" };
        failures.push(format!(
            "{} {:?}: expected {want}, got {detail}",
            row.id, row.input
        ));
    }
}

#[tokio::test]
async fn ip_vectors() {
    let (rows, mut failures) = (rows("ip"), Vec::new());
    let everything = Everything(vec![]);
    for row in &rows {
        let ip: IpAddr = row
            .input
            .parse()
            .unwrap_or_else(|_| panic!("{}: bad ip", row.id));
        let class = classify(ip);
        expect(row, class.is_public(), format!("{class:?}"), &mut failures);
        // The same address as a URL literal goes through the same table.
        let url = match ip {
            IpAddr::V4(v4) => format!("http://{v4}/"),
            IpAddr::V6(v6) => format!("http://[{v6}]/"),
        };
        let r = check_url(&EgressPolicy::default(), &url, &everything).await;
        expect(row, r.is_allowed(), &r, &mut failures);
    }
    report("ip", &failures, rows.len());
}

#[test]
fn host_vectors() {
    let (rows, mut failures) = (rows("host"), Vec::new());
    for row in &rows {
        let r = check_host(&EgressPolicy::default(), &row.input);
        expect(row, r.is_ok(), format!("{r:?}"), &mut failures);
    }
    report("host", &failures, rows.len());
}

/// Parses a `resolved_addresses` cell into successive answers (`;`), dropping `cname:` hops
/// (the requested name and the final addresses decide).
fn answers(cell: &str) -> Vec<Vec<IpAddr>> {
    cell.split(';')
        .map(|answer| match answer {
            "NODATA" => vec![],
            "SELF" => vec![SELF_ADDR.parse().unwrap()],
            _ => answer
                .split(',')
                .filter(|a| !a.starts_with("cname:"))
                .map(|a| a.parse().unwrap_or_else(|_| panic!("bad address {a}")))
                .collect(),
        })
        .collect()
}

#[tokio::test]
async fn resolved_vectors() {
    let (rows, mut failures) = (rows("resolved"), Vec::new());
    for row in &rows {
        let policy = EgressPolicy {
            // The gateway's own public address, as an operator would deny it.
            deny_cidrs: vec![format!("{SELF_ADDR}/32").parse().unwrap()],
            dns_timeout: Duration::from_millis(50),
            ..EgressPolicy::default()
        };
        let url = format!("https://{}/", row.input);
        if row.resolved == "TIMEOUT" {
            let r = check_url(&policy, &url, &Silent).await;
            expect(row, r.is_allowed(), &r, &mut failures);
            continue;
        }
        let answers = answers(&row.resolved);
        let first = answers[0].clone();
        let rebinding = Rebinding::new(answers);
        // Through a call, twice: one lookup, and both requests pinned to the first answer.
        let client = support::client(policy, rebinding.clone(), None);
        let call = client.call();
        let (a, b) = (
            call.prepare(&url, false).await,
            call.prepare(&url, false).await,
        );
        if rebinding.lookups() > 1 {
            failures.push(format!(
                "{}: {} lookups in one call",
                row.id,
                rebinding.lookups()
            ));
        }
        if a.is_ok() != b.is_ok() {
            failures.push(format!(
                "{}: the second request of the call was judged differently",
                row.id
            ));
        }
        match (&a, &b) {
            (Ok(a), Ok(b)) => {
                let mut want: Vec<SocketAddr> =
                    first.iter().map(|ip| SocketAddr::new(*ip, 443)).collect();
                want.dedup();
                if a.addresses != want || b.addresses != want {
                    failures.push(format!(
                        "{}: pinned {:?}, want {want:?}",
                        row.id, a.addresses
                    ));
                }
                expect(row, true, "allow", &mut failures);
            }
            (Err(e), _) => expect(row, false, format!("{}: {e}", e.kind()), &mut failures),
            (Ok(_), Err(e)) => failures.push(format!("{}: second request refused: {e}", row.id)),
        }
    }
    report("resolved", &failures, rows.len());
}

#[tokio::test]
async fn url_vectors() {
    let (rows, mut failures) = (rows("url"), Vec::new());
    for row in &rows {
        // With no answer given, every name resolves to a public address: a refusal must then
        // come from a URL, name or address rule, never from DNS.
        let resolver: Box<dyn Resolve> = if row.resolved == "-" {
            Box::new(Everything(vec!["93.184.215.14".parse().unwrap()]))
        } else {
            let host = Url::parse(&row.input)
                .unwrap()
                .host_str()
                .unwrap()
                .to_owned();
            Box::new(StaticResolver::new().with(&host, answers(&row.resolved).remove(0)))
        };
        let r = check_url(&EgressPolicy::default(), &row.input, resolver.as_ref()).await;
        expect(row, r.is_allowed(), &r, &mut failures);
    }
    report("url", &failures, rows.len());
}

#[tokio::test]
async fn join_vectors() {
    let (rows, mut failures) = (rows("join"), Vec::new());
    let resolver =
        StaticResolver::new().with("api.example.com", ["93.184.215.14".parse().unwrap()]);
    for row in &rows {
        let rest = row
            .input
            .strip_prefix("base=")
            .expect("join input starts with base=");
        let (base, path) = rest.split_once(" path=").expect("join input has ' path='");
        let joined = join(&Url::parse(base).unwrap(), path);
        expect(row, joined.is_ok(), format!("{joined:?}"), &mut failures);
        if let Ok(url) = &joined {
            assert_eq!(
                url.origin(),
                Url::parse(base).unwrap().origin(),
                "{}",
                row.id
            );
        }
        let r = check_join(&EgressPolicy::default(), base, path, &resolver).await;
        expect(row, r.is_allowed(), &r, &mut failures);
    }
    report("join", &failures, rows.len());
}

/// Turns a `response` vector into what the scripted server sends, and the kind a block must have.
fn scripted(input: &str, limit: usize) -> (Reply, Option<&'static str>) {
    let mut status = 200u16;
    let mut head = Vec::new();
    let mut body = br#"{"ok":true}"#.to_vec();
    let mut declared = None;
    let mut chunked = false;
    let mut want = None;
    for token in input.split_whitespace() {
        let (k, v) = token.split_once('=').unwrap_or((token, ""));
        let size = |v: &str| match v {
            "LIMIT" => limit,
            "LIMIT+1" => limit + 1,
            _ => v.parse().unwrap(),
        };
        match k {
            "status" => status = v.parse().unwrap(),
            "content-type" if v == "(missing)" => {
                // No content type: the body must be UTF-8 (EGRESS-24); this one is not.
                body = vec![0xff, 0xfe, 0x00, 0x81];
                want = Some("not_text");
            }
            "content-type" => head.push(format!("content-type: {v}")),
            "content-encoding" => {
                head.push(format!("content-encoding: {v}"));
                // A real gzip header, to show it is refused, not decompressed.
                body = vec![
                    0x1f, 0x8b, 0x08, 0, 0, 0, 0, 0, 0, 0x03, 0x03, 0, 0, 0, 0, 0, 0, 0, 0, 0,
                ];
                want = Some("encoding");
            }
            "transfer-encoding" => chunked = true,
            "content-length" => {
                declared = Some(size(v));
                want = Some("too_large");
            }
            "body-bytes" => {
                body = vec![b'a'; size(v)];
                want = Some("too_large");
            }
            "location" => {
                head.push(format!("location: {v}"));
                want = Some("redirect");
            }
            _ => panic!("unknown response token {token}"),
        }
    }
    if input.contains("octet-stream") {
        want = Some("not_text");
    }
    let mut head = [vec![format!("HTTP/1.1 {status} X")], head].concat();
    let body = match (declared, chunked) {
        // A declared length over the cap: send the head only, so a guard that read on would hang.
        (Some(n), _) if n > limit => {
            head.push(format!("content-length: {n}"));
            Vec::new()
        }
        (Some(n), _) => {
            head.push(format!("content-length: {n}"));
            vec![b'a'; n]
        }
        (None, true) => {
            head.push("transfer-encoding: chunked".into());
            let mut out = Vec::new();
            for piece in body.chunks(64 * 1024) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
            out
        }
        (None, false) => {
            head.push(format!("content-length: {}", body.len()));
            body
        }
    };
    (
        Reply::Raw {
            head: head.join("\r\n"),
            body,
        },
        want,
    )
}

#[tokio::test]
async fn response_vectors() {
    let (rows, mut failures) = (rows("response"), Vec::new());
    let policy = support::loopback_policy();
    let limit = usize::try_from(policy.max_body_bytes).unwrap();
    for row in &rows {
        if let Some(rest) = row.input.strip_prefix("MCP: ") {
            // Discovery URLs chosen by the tenant's server go through the same guard.
            let url = rest
                .split('"')
                .nth(1)
                .expect("a quoted URL in the MCP vector");
            let r = check_url(&EgressPolicy::default(), url, &Everything(vec![])).await;
            expect(row, r.is_allowed(), &r, &mut failures);
            continue;
        }
        let (reply, want) = scripted(&row.input, limit);
        let server = Server::plain(move |_| reply.clone()).await;
        let client = support::client(policy.clone(), Arc::new(StaticResolver::new()), None);
        let url = format!("http://127.0.0.1:{}/", server.port());
        let result = client.send(Request::get(url)).await;
        match &result {
            Ok(resp) => expect(
                row,
                true,
                format!("allow ({} bytes)", resp.body().len()),
                &mut failures,
            ),
            Err(e) => {
                expect(row, false, format!("{}: {e}", e.kind()), &mut failures);
                if !row.allow && want.is_some_and(|w| w != e.kind()) {
                    failures.push(format!(
                        "{}: refused as {}, expected {want:?}",
                        row.id,
                        e.kind()
                    ));
                }
            }
        }
        if row.allow && row.input.contains("content-length=LIMIT") {
            assert_eq!(
                result.unwrap().body().len(),
                limit,
                "{}: exactly the cap",
                row.id
            );
        }
    }
    report("response", &failures, rows.len());
}

#[tokio::test]
async fn request_vectors() {
    let (rows, mut failures) = (rows("request"), Vec::new());
    let everything: Arc<dyn Resolve> = Arc::new(Everything(vec!["93.184.215.14".parse().unwrap()]));
    let client = support::client(EgressPolicy::default(), everything.clone(), None);
    for row in &rows {
        let result = if row.input.contains("'Host: ") {
            let value = HeaderValue::from_static("169.254.169.254");
            client
                .send(Request::get("https://api.example.com/").header(http::header::HOST, value))
                .await
                .map(|_| ())
        } else if row.input.contains("method CONNECT") {
            client
                .send(Request::new(Method::CONNECT, "https://api.example.com/"))
                .await
                .map(|_| ())
        } else if row.input.contains("HTTPS_PROXY") {
            // Allowed and pinned straight to the checked address; that the proxy variables are
            // ignored is shown end to end by `proxy::environment_proxies_are_ignored`.
            let prepared = client.prepare("https://api.example.com/", false).await;
            match prepared {
                Ok(p) if p.addresses == ["93.184.215.14:443".parse::<SocketAddr>().unwrap()] => {
                    Ok(())
                }
                Ok(p) => {
                    failures.push(format!("{}: pinned {:?}", row.id, p.addresses));
                    Ok(())
                }
                Err(e) => Err(e),
            }
        } else {
            panic!("{}: request vector not understood: {}", row.id, row.input);
        };
        match result {
            Ok(()) => expect(row, true, "allow", &mut failures),
            Err(e) => expect(row, false, format!("{}: {e}", e.kind()), &mut failures),
        }
    }
    report("request", &failures, rows.len());
}
