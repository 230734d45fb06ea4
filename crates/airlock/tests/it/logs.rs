//! The operator's log (docs/rules.md OPS-5, OPS-11), read as an operator reads it: the
//! standard error of a real `airlock serve` child — not a terminal — with no `AIRLOCK_LOG`,
//! `RUST_LOG` or `NO_COLOR` set, so the defaults are what is tested.

use std::io::{Read as _, Write as _};
use std::time::Duration;

use serde_json::{Value, json};

use crate::mcp::{ADMIN, CLAUDE, approve, call};
use crate::support::{Server, deployment_with};

/// A card number passed as an argument: it must never reach the log.
const CARD: &str = "4111111111111111";
/// The payment API's credential: it must never reach the log either.
const PAY_TOKEN: &str = "tok-pay-5e0c9a71d3b24f86";
const WITHIN: Duration = Duration::from_secs(20);

/// An upstream that answers every request `{"status":"active"}` (bounded by the test's life).
fn upstream() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut socket in listener.incoming().map_while(Result::ok) {
            let mut head = Vec::new();
            let mut buf = [0u8; 1024];
            while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => head.extend_from_slice(&buf[..n]),
                }
            }
            let body = r#"{"status":"active"}"#;
            let _ = write!(
                socket,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

/// A deployment whose `pay_card_status` (a card number in, approval always) parks every call.
fn deployment(port: u16) -> tempfile::TempDir {
    let toml = format!(
        "[[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n[[mcp.tokens]]\ncredential = \"airlock.claude\"\nprincipal = \"claude\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[connections.pay]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{port}/api\"\ncredential = \"pay.token\"\n[credentials]\nfile = \"creds.yml\"\n"
    );
    let dir = deployment_with(
        &toml,
        &format!("airlock:\n  admin: {ADMIN}\n  claude: {CLAUDE}\npay:\n  token: {PAY_TOKEN}\n"),
    );
    std::fs::create_dir(dir.path().join("apis")).unwrap();
    let api = "name: pay\nconnection: pay\nauth: { scheme: bearer }\noperations:\n  - name: card_status\n    description: Where a card stands.\n    writes: false\n    approval: always\n    parameters: { card: { type: string, required: true } }\n    request: { method: GET, path: /cards }\n";
    std::fs::write(dir.path().join("apis/pay.yml"), api).unwrap();
    dir
}

/// `airlock serve` on `dir` with the defaults an operator has: no log settings at all.
fn serve(dir: &std::path::Path, extra: &[&str]) -> Server {
    let mut command = Server::command(dir, extra);
    command
        .env_remove("AIRLOCK_LOG")
        .env_remove("RUST_LOG")
        .env_remove("NO_COLOR");
    Server::spawn(command)
}

/// Parks a card lookup through `/mcp`; its invocation id.
async fn park(base: &str) -> String {
    let parked = call(base, CLAUDE, "pay_card_status", json!({"card": CARD})).await;
    let status = &parked["structuredContent"];
    assert_eq!(status["status"], "awaiting_approval", "{parked}");
    status["invocation_id"].as_str().unwrap().to_owned()
}

/// What no line of the log may hold, whatever its format.
fn assert_clean(log: &[String]) {
    for line in log {
        assert!(
            !line.contains("\x1b["),
            "colour on a non-terminal: {line:?}"
        );
        assert!(!line.contains(CARD), "an argument's value: {line}");
        assert!(!line.contains(PAY_TOKEN), "a credential: {line}");
        assert!(
            !line.contains(CLAUDE) && !line.contains(ADMIN),
            "a token: {line}"
        );
    }
}

/// OPS-11, OPS-5: without any setting, a gated call is logged received, parked (with the
/// command that approves it), decided, executed; a refused call as failed with its kind; in
/// plain text without colour, with no library internals at info and no secret anywhere.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gated_call_is_logged_from_arrival_to_execution_without_secrets() {
    let dir = deployment(upstream());
    let server = serve(dir.path(), &[]);
    let base = format!("http://{}", server.addr);

    let id = park(&base).await;
    let received = server.await_log(&["call received", "pay_card_status"], WITHIN);
    for field in ["scope=gateway", "principal=\"claude\"", "channel=\"mcp\""] {
        assert!(received.contains(field), "{field} missing: {received}");
    }
    let parked = server.await_log(&["parked", &id], WITHIN);
    assert!(
        parked.contains("tool=\"pay_card_status\"") && parked.contains("principal=\"claude\""),
        "the tool and who asked (NOTIFY-9): {parked}"
    );
    assert!(
        parked.contains(&format!("airlock approve {id} --dir /")),
        "the command to approve, with an absolute --dir: {parked}"
    );
    assert!(
        parked.contains(&format!("POST /v1/invocations/{id}/approve")),
        "{parked}"
    );

    approve(&base, &id).await;
    let decided = server.await_log(&["decided", &id], WITHIN);
    for field in ["by=\"alice\"", "decision=\"approve\"", "surface=\"api\""] {
        assert!(decided.contains(field), "{field} missing: {decided}");
    }
    let executed = server.await_log(&["executed", &id], WITHIN);
    assert!(executed.contains("outcome=\"succeeded\""), "{executed}");
    assert!(executed.contains("duration_ms="), "{executed}");

    let refused = call(&base, CLAUDE, "pay_card_status", json!({"card": 7})).await;
    assert_eq!(refused["isError"], true, "{refused}");
    let failed = server.await_log(&["failed", "pay_card_status"], WITHIN);
    assert!(failed.contains("kind=\"bad_arguments\""), "{failed}");

    let log = server.log();
    assert_clean(&log);
    for line in &log {
        let internal = ["rmcp", "hyper", "sqlx", "h2", "reqwest", "tower"]
            .iter()
            .any(|lib| line.contains(&format!(" INFO {lib}")));
        assert!(!internal, "a library's internals at info: {line}");
    }
}

/// OPS-11: `--log-format json` writes one JSON object a line, the event's fields at the top.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_logs_are_one_object_a_line_with_the_events_fields() {
    let dir = deployment(upstream());
    let server = serve(dir.path(), &["--log-format", "json"]);
    let base = format!("http://{}", server.addr);

    let id = park(&base).await;
    server.await_log(&["\"parked\"", &id], WITHIN);
    approve(&base, &id).await;
    server.await_log(&["\"executed\"", &id], WITHIN);

    let log = server.log();
    assert_clean(&log);
    let events: Vec<Value> = log
        .iter()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    let event = |message: &str| {
        events
            .iter()
            .find(|e| e["message"] == message && e["id"] == id.as_str())
            .unwrap_or_else(|| panic!("no {message} event for {id}: {events:#?}"))
    };
    let parked = event("parked");
    assert_eq!(parked["level"], "INFO");
    assert_eq!(parked["tool"], "pay_card_status");
    assert_eq!(parked["state"], "awaiting_approval");
    assert_eq!(parked["principal"], "claude");
    assert!(
        parked["decide"]
            .as_str()
            .unwrap()
            .starts_with(&format!("airlock approve {id} --dir /")),
        "{parked}"
    );
    assert_eq!(event("decided")["surface"], "api");
    let executed = event("executed");
    assert_eq!(executed["outcome"], "succeeded");
    assert!(executed["duration_ms"].is_u64(), "{executed}");
}

/// OPS-11: an `AIRLOCK_LOG` that does not parse is a usage error naming it, not a silent
/// default.
#[test]
fn an_invalid_airlock_log_is_refused() {
    let out = crate::airlock()
        .args(["completions", "bash"])
        .env("AIRLOCK_LOG", "airlock=loud")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", crate::text(&out));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("AIRLOCK_LOG is not a valid filter"),
        "{stderr}"
    );
}
