//! Large calls against a real `airlock serve` (docs/rules.md OPS-53, OPS-54): many concurrent
//! calls whose arguments come close to the endpoint's 4 MiB body cap are all answered, none cut
//! off: those the body budget admits at once with their result, any that waited for it too long
//! with `503` and `Retry-After`.

use std::time::Duration;

use airlock_testkit::{Script, Server as Upstream};
use serde_json::{Value, json};

use crate::support::{Server, deployment_with, mcp_request};

const TOKEN: &str = "mcp-big-calls-6d1e0f2a9b8c4d7e";
/// Concurrent calls in the test: twice what the body budget admits at once (eight at the cap).
const CALLS: usize = 16;
/// What the body budget admits at once: these are never refused.
const ADMITTED_AT_ONCE: usize = 8;
/// The `text` argument of each call: with the JSON-RPC envelope it stays under the 4 MiB cap.
const TEXT_BYTES: usize = 3_900_000;

fn deployment(upstream: &str) -> tempfile::TempDir {
    let toml = "listen = \"127.0.0.1:0\"\n[[mcp.tokens]]\ncredential = \"airlock.mcp_token\"\nprincipal = \"big\"\n[egress]\nallow = [\"127.0.0.1/32\"]\n[credentials]\nfile = \"creds.yml\"\n";
    let dir = deployment_with(toml, &format!("airlock:\n  mcp_token: {TOKEN}\n"));
    std::fs::create_dir(dir.path().join("connections")).unwrap();
    std::fs::write(
        dir.path().join("connections/up.yml"),
        format!("url: {upstream}\napproval: never\n"),
    )
    .unwrap();
    dir
}

/// How a call was answered.
enum Answer {
    /// The upstream's result.
    Result(Value),
    /// `503` with `Retry-After`: the body budget stayed spent too long.
    Busy,
}

/// One `tools/call` of `up__count` with `text`; the answer, or what went wrong.
async fn count(base: String, text: std::sync::Arc<String>) -> Result<Answer, String> {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "up__count", "arguments": {"text": text.as_str()}}});
    let response = mcp_request(&base)
        .bearer_auth(TOKEN)
        .timeout(Duration::from_secs(600))
        .body(body.to_string())
        .send()
        .await
        .map_err(|e| format!("{e:?}"))?;
    let status = response.status();
    let retry = response.headers().get("retry-after").cloned();
    let reply: Value = response
        .json()
        .await
        .map_err(|e| format!("{status}: {e:?}"))?;
    if status == 503 && retry.is_some_and(|r| r == "1") && reply["error"]["code"] == -32005 {
        Ok(Answer::Busy)
    } else if status.is_success()
        && reply["result"].is_object()
        && reply["result"]["isError"] != true
    {
        Ok(Answer::Result(reply))
    } else {
        Err(format!("{status}: {reply}"))
    }
}

/// OPS-53, OPS-54: 16 concurrent calls of 3.9 MB of arguments are each answered, none cut off
/// or closed without an answer: with the upstream's result, or (only those beyond what the body
/// budget admits at once, and only if they waited too long) `503` with `Retry-After`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_near_the_body_cap_are_all_answered() {
    let upstream = Upstream::start(Script {
        unrecorded: true,
        ..Script::default()
    })
    .await;
    upstream.set_tools(vec![
        json!({"name": "count", "inputSchema": {"type": "object"}}),
    ]);
    let dir = deployment(&upstream.loopback_url());
    let server = Server::start(dir.path(), &[]);
    let base = format!("http://{}", server.addr);
    let text = std::sync::Arc::new("a".repeat(TEXT_BYTES));
    let calls: Vec<_> = (0..CALLS)
        .map(|_| tokio::spawn(count(base.clone(), text.clone())))
        .collect();
    let (mut failed, mut busy) = (Vec::new(), 0);
    for call in calls {
        match call.await.unwrap() {
            // The upstream counted every byte of the arguments as sent.
            Ok(Answer::Result(reply)) => assert_eq!(
                reply["result"]["content"][0]["text"],
                format!("{} bytes", TEXT_BYTES + r#"{"text":""}"#.len()),
            ),
            Ok(Answer::Busy) => busy += 1,
            Err(error) => failed.push(error),
        }
    }
    assert!(busy <= CALLS - ADMITTED_AT_ONCE, "{busy} busy answers");
    assert!(
        failed.is_empty(),
        "{} of {CALLS} calls failed; the first: {:.400}",
        failed.len(),
        failed[0]
    );
}
