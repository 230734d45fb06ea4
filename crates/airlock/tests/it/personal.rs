//! Credentials per principal through two real `airlock serve` replicas on one PostgreSQL
//! database (docs/rules.md CALL-11 … CALL-13), each replica with a deployment directory of its
//! own that shares only `airlock.toml`, the callers' tokens and the vault key (given through
//! the environment, as an operator of two hosts would): 10,000 interleaved calls from 50
//! principals, spread over both replicas, each reach the upstream carrying their own
//! principal's token and nobody else's (checked at the upstream); no token byte is in the
//! replies, the debug logs, any row of the ledger or the audit export; and a credential revoked
//! through one replica stops that principal's next call on the other within one second, the
//! call waiting (`awaiting_credential`) with nothing sent.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use airlock_testkit::Receiver;
use futures::StreamExt as _;
use rand::seq::SliceRandom as _;
use serde_json::{Value, json};

use crate::replicas::fresh_database;
use crate::support::{Server, deployment_with, http, mcp_request_on};
use crate::{airlock, text};

/// The vault key both replicas seal and open with; set through the environment only.
const VAULT_KEY: &str = "3f1e5c7a9b2d4f6081a3c5e7092b4d6f8a1c3e5f7092b4d6f8a0c2e4f6182a4c";
const VAULT_ENV: &str = "AIRLOCK_CREDENTIALS__VAULT__KEY";
const ADMIN: &str = "admin-5f4dcc3b5aa765d61d8327deb882cf99";
/// The per-principal API tool: its body names the caller so the upstream can check the token.
const TOOL: &str = "crm_whoami";

/// Principal `n`'s name.
fn principal(n: usize) -> String {
    format!("p{n:02}")
}

/// Principal `n`'s caller token of `[[mcp.tokens]]`.
fn caller(n: usize) -> String {
    format!("mcp-caller-{n:02}-9a0b1c2d3e4f5a6b7c8d9e0f")
}

/// A fresh secret for principal `n`: what they set, never to be seen again but at the upstream.
fn secret(n: usize) -> String {
    let random: String = (0..4)
        .map(|_| format!("{:08x}", rand::random::<u32>()))
        .collect();
    format!("tok-{}-{random}", principal(n))
}

/// The deployment of one replica on `database`: `principals` callers, and `crm`, declared
/// `per_principal = true`, on the loopback `upstream`. The vault key is named, not given.
fn deployment(database: &str, upstream: u16, principals: usize) -> tempfile::TempDir {
    let mut toml = format!(
        "database_url = \"{database}\"\n\
         [[admin.tokens]]\ncredential = \"airlock.admin\"\nprincipal = \"alice\"\n"
    );
    let mut creds = format!("airlock:\n  admin: {ADMIN}\ncallers:\n");
    for n in 0..principals {
        let p = principal(n);
        toml += &format!("[[mcp.tokens]]\ncredential = \"callers.{p}\"\nprincipal = \"{p}\"\n");
        creds += &format!("  {p}: {}\n", caller(n));
    }
    toml += &format!(
        "[egress]\nallow = [\"127.0.0.1/32\"]\n\
         [credentials]\nfile = \"creds.yml\"\nvault_key = \"vault.key\"\n\
         [connections.crm]\nuse_egress_allow = true\nbase_url = \"http://127.0.0.1:{upstream}\"\nper_principal = true\n"
    );
    let dir = deployment_with(&toml, &creds);
    let apis = dir.path().join("apis");
    std::fs::create_dir_all(&apis).unwrap();
    std::fs::write(apis.join("crm.yml"), API).unwrap();
    dir
}

/// `crm_whoami`: a read (executes, no approval) whose body carries `who`.
pub(crate) const API: &str = "name: crm\nconnection: crm\nauth: { scheme: bearer }\noperations:\n  - name: whoami\n    description: Says who calls.\n    writes: false\n    parameters: { who: { type: string, required: true } }\n    request: { method: POST, path: /whoami, body: { who: '{who}' } }\n";

/// Two replicas, each on a directory of its own, logging at debug level.
struct Pair {
    database: String,
    dirs: [tempfile::TempDir; 2],
    a: Server,
    b: Server,
    upstream: Receiver,
    client: reqwest::Client,
}

impl Pair {
    /// `None` when PostgreSQL is not here (a skip outside CI).
    async fn start(principals: usize) -> Option<Self> {
        let database = fresh_database().await?;
        let upstream = Receiver::start().await;
        let dirs = [0, 1].map(|_| deployment(&database, upstream.port, principals));
        // One after the other: the first migrates the fresh database.
        let [a, b] = [0, 1].map(|i| {
            let mut command = Server::command(dirs[i].path(), &[]);
            command
                .env("NO_COLOR", "1")
                .env("AIRLOCK_LOG", "debug")
                .env(VAULT_ENV, VAULT_KEY);
            Server::spawn(command)
        });
        Some(Self {
            database,
            dirs,
            a,
            b,
            upstream,
            // Idle connections are dropped before the server's `header_timeout` (10 s) closes
            // them: a request sent on one the server is closing would be reset.
            client: reqwest::Client::builder()
                .pool_idle_timeout(Duration::from_secs(5))
                .build()
                .unwrap(),
        })
    }

    /// `PUT /v1/credentials/crm` with `secret` as principal `n` on `server`; the reply's text.
    async fn set(&self, server: &Server, n: usize, secret: &str) -> String {
        let body = json!({"credential": secret});
        let token = caller(n);
        let (status, reply, _) = http(
            server.addr.parse().unwrap(),
            "PUT",
            "/v1/credentials/crm",
            Some(&token),
            Some(body),
        )
        .await;
        assert_eq!(status, 200, "{reply}");
        // The principal is the token's, never the body's.
        assert_eq!(reply["principal"], principal(n), "{reply}");
        reply.to_string()
    }

    /// `tools/call` of `crm_whoami` as principal `n` on `server`; the JSON-RPC reply's text and
    /// its result.
    async fn call(&self, server: &Server, n: usize) -> (String, Value) {
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": TOOL, "arguments": {"who": principal(n)}}});
        let reply = mcp_request_on(&self.client, &format!("http://{}", server.addr))
            .bearer_auth(caller(n))
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(reply.status().as_u16(), 200);
        let text = reply.text().await.unwrap();
        let parsed: Value = serde_json::from_str(&text).unwrap();
        (text, parsed["result"].clone())
    }

    /// Every request the upstream got for principal `n` (by the `who` of its body).
    fn sent_for(&self, n: usize) -> usize {
        let p = principal(n);
        let received = self.upstream.received();
        received.iter().filter(|d| who(d) == p).count()
    }
}

/// The `who` of a request's body.
fn who(delivery: &airlock_testkit::Delivery) -> String {
    let body: Value = serde_json::from_slice(&delivery.body).unwrap();
    body["who"].as_str().unwrap().to_owned()
}

/// The secrets whose random part (32 hex digits: enough to tell a leak) is in `text`, as is
/// or hex-encoded as a `bytea` column shows it. One pass over `text`'s runs of hex digits, each
/// window looked up: megabytes of debug logs are read in about a second in a debug build.
fn leaked<'a>(text: &str, secrets: &'a [String]) -> Vec<&'a str> {
    let mut parts: HashMap<String, &str> = HashMap::new();
    for secret in secrets {
        let part = &secret[secret.len() - 32..];
        let hex: String = part.bytes().map(|b| format!("{b:02x}")).collect();
        parts.insert(part.to_owned(), secret);
        parts.insert(hex, secret);
    }
    let mut found = std::collections::BTreeSet::new();
    let bytes = text.as_bytes();
    let mut start = 0;
    while start < bytes.len() {
        if !bytes[start].is_ascii_hexdigit() {
            start += 1;
            continue;
        }
        let mut end = start;
        while end < bytes.len() && bytes[end].is_ascii_hexdigit() {
            end += 1;
        }
        let run = &text[start..end];
        for width in [32, 64].into_iter().filter(|w| run.len() >= *w) {
            for at in 0..=run.len() - width {
                if let Some(secret) = parts.get(&run[at..at + width]) {
                    found.insert(*secret);
                }
            }
        }
        start = end;
    }
    found.into_iter().collect()
}

/// Every row of every table of the ledger's schema, as text; and how many rows each had.
async fn ledger_dump(database: &str) -> (String, HashMap<String, i64>) {
    let db = sqlx::PgPool::connect(database).await.unwrap();
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = 'public' AND table_type = 'BASE TABLE'",
    )
    .fetch_all(&db)
    .await
    .unwrap();
    let (mut dump, mut counts) = (String::new(), HashMap::new());
    for table in tables {
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT t::text FROM \"{table}\" t"
        )))
        .fetch_all(&db)
        .await
        .unwrap();
        counts.insert(table, i64::try_from(rows.len()).unwrap());
        for row in rows {
            dump.push_str(&row);
            dump.push('\n');
        }
    }
    let used: i64 =
        sqlx::query_scalar("SELECT COUNT(*) FROM invocations WHERE credential_use IS NOT NULL")
            .fetch_one(&db)
            .await
            .unwrap();
    counts.insert("calls with a credential use".to_owned(), used);
    db.close().await;
    (dump, counts)
}

/// `airlock audit export --to -` of the deployment in `dir`; its output.
fn audit_export(dir: &Path) -> String {
    let out = airlock()
        .args(["audit", "export", "--to", "-", "--dir"])
        .arg(dir)
        .env(VAULT_ENV, VAULT_KEY)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    text(&out)
}

const PRINCIPALS: usize = 50;
const CALLS_EACH: usize = 200;
const CONCURRENCY: usize = 32;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_interleaved_calls_of_fifty_principals_carry_only_their_own_tokens() {
    // CALL-11: every request the upstream gets carries the token its row's principal set, on
    // whichever replica the credential was set and the call made; CALL-13: a credential set
    // through one replica is used by the other (the same vault key opens it there).
    let began = Instant::now();
    let Some(pair) = Pair::start(PRINCIPALS).await else {
        return;
    };
    let secrets: Vec<String> = (0..PRINCIPALS).map(secret).collect();
    let mut replies = String::new();
    for (n, secret) in secrets.iter().enumerate() {
        let on = if n % 2 == 0 { &pair.a } else { &pair.b };
        replies += &pair.set(on, n, secret).await;
    }

    // Each principal's calls shuffled among everyone's, each sent to a replica at random.
    let mut calls: Vec<(usize, bool)> = (0..PRINCIPALS)
        .flat_map(|n| (0..CALLS_EACH).map(move |_| (n, rand::random::<bool>())))
        .collect();
    calls.shuffle(&mut rand::rng());
    eprintln!(
        "two replicas up and 50 credentials set in {:?}",
        began.elapsed()
    );
    let started = Instant::now();
    let results: Vec<(String, Value)> = futures::stream::iter(calls)
        .map(|(n, on_a)| {
            let on = if on_a { &pair.a } else { &pair.b };
            pair.call(on, n)
        })
        .buffer_unordered(CONCURRENCY)
        .collect()
        .await;
    let took = started.elapsed();
    let total = PRINCIPALS * CALLS_EACH;
    eprintln!(
        "{total} calls through two replicas at concurrency {CONCURRENCY}: {took:?} ({:.0} calls/s)",
        f64::from(u32::try_from(total).unwrap()) / took.as_secs_f64()
    );
    for (text, result) in &results {
        // A JSON-RPC error has no result at all: every call must have one.
        assert!(result.is_object(), "not a result: {text}");
        assert_ne!(result["isError"], true, "{text}");
        assert!(result["structuredContent"]["status"].is_null(), "{text}");
        replies += text;
    }

    // Checked at the upstream: exactly one request per call, each with its caller's token.
    let received = pair.upstream.received();
    assert_eq!(received.len(), total, "one request per call, none repeated");
    let mut per_principal: HashMap<String, usize> = HashMap::new();
    let owner: HashMap<String, &String> = (0..PRINCIPALS)
        .map(|n| (principal(n), &secrets[n]))
        .collect();
    for delivery in &received {
        let who = who(delivery);
        let expected = format!("Bearer {}", owner[&who]);
        assert!(
            delivery.header("authorization") == expected,
            "a request for {who} carried another token"
        );
        *per_principal.entry(who).or_default() += 1;
    }
    assert_eq!(per_principal.len(), PRINCIPALS);
    assert!(per_principal.values().all(|&c| c == CALLS_EACH));

    // No token byte anywhere but at the upstream: the replies, the debug logs, the ledger, the
    // audit export.
    // The detector finds a secret as a log line or a `bytea` column would hold it.
    let hex: String = secrets[7].bytes().map(|b| format!("{b:02x}")).collect();
    let planted = format!("token=\"{}\" \\x{hex}", secrets[3]);
    assert_eq!(leaked(&planted, &secrets), [&secrets[3], &secrets[7]]);
    let checking = Instant::now();
    assert_eq!(leaked(&replies, &secrets), Vec::<&str>::new(), "in a reply");
    for server in [&pair.a, &pair.b] {
        let log = server.log().join("\n");
        assert!(log.contains("DEBUG"), "the replicas log at debug level");
        eprintln!("log of {}: {} bytes", server.addr, log.len());
        assert_eq!(leaked(&log, &secrets), Vec::<&str>::new(), "in the log");
    }
    eprintln!("replies and logs checked in {:?}", checking.elapsed());
    let (dump, counts) = ledger_dump(&pair.database).await;
    eprintln!(
        "ledger: {} bytes, dumped and checked in {:?}",
        dump.len(),
        checking.elapsed()
    );
    // The dump holds what it should: every credential, sealed, and every use of one.
    assert_eq!(counts["principal_credentials"], 50, "{counts:?}");
    assert_eq!(counts["calls with a credential use"], 10_000, "{counts:?}");
    assert_eq!(leaked(&dump, &secrets), Vec::<&str>::new(), "in the ledger");
    let export = audit_export(pair.dirs[0].path());
    assert!(export.lines().count() >= total, "the export has every call");
    eprintln!("everything checked in {:?}", checking.elapsed());
    assert_eq!(
        leaked(&export, &secrets),
        Vec::<&str>::new(),
        "in the export"
    );
}

/// Rounds of the revocation test: one principal each, so no call a round leaves waiting is
/// released by a later round's credential.
const ROUNDS: usize = 5;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_revoked_on_one_replica_stops_the_next_call_on_the_other() {
    // CALL-13: revoked through B, the principal's next call on A waits within one second
    // (A's copy is dropped by its watch); CALL-12: it waits with nothing sent, on A and on B;
    // another principal's calls on A still run with their own token.
    let Some(pair) = Pair::start(ROUNDS + 1).await else {
        return;
    };
    let secrets: Vec<String> = (0..=ROUNDS).map(secret).collect();
    pair.set(&pair.a, ROUNDS, &secrets[ROUNDS]).await;
    let mut replies = String::new();
    let mut reaches = Vec::new();
    for n in 0..ROUNDS {
        pair.set(&pair.b, n, &secrets[n]).await;
        // A holds the credential in memory once a call used it.
        let (text, first) = pair.call(&pair.a, n).await;
        assert_ne!(first["isError"], true, "{text}");
        assert_eq!(pair.sent_for(n), 1);

        let token = caller(n);
        let b = pair.b.addr.parse().unwrap();
        let (status, revoked, _) =
            http(b, "DELETE", "/v1/credentials/crm", Some(&token), None).await;
        assert_eq!((status, &revoked["revoked"]), (200, &json!(1)), "{revoked}");
        let revoked_at = Instant::now();
        let waiting = loop {
            let (text, result) = pair.call(&pair.a, n).await;
            replies += &text;
            if result["structuredContent"]["status"] == "awaiting_credential" {
                reaches.push(revoked_at.elapsed());
                break result;
            }
            assert_ne!(result["isError"], true, "{text}");
            assert!(
                revoked_at.elapsed() < Duration::from_secs(5),
                "A still calls with a revoked credential: {text}"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let message = waiting["structuredContent"]["message"].as_str().unwrap();
        assert!(message.contains("PUT /v1/credentials/crm"), "{message}");
        let sent = pair.sent_for(n);

        // Waiting, never sent: again on A, and on B.
        for on in [&pair.a, &pair.b] {
            let (text, result) = pair.call(on, n).await;
            assert_eq!(
                result["structuredContent"]["status"], "awaiting_credential",
                "{text}"
            );
            replies += &text;
        }
        let (text, other) = pair.call(&pair.a, ROUNDS).await;
        assert_ne!(other["isError"], true, "{text}");
        assert_eq!(pair.sent_for(n), sent, "nothing more was sent for {n}");
        let last = pair.upstream.received().pop().unwrap();
        let own = format!("Bearer {}", secrets[ROUNDS]);
        assert_eq!(last.header("authorization"), own);
    }
    eprintln!("a revocation on B reached A's next call after {reaches:?}");
    let slowest = reaches.iter().max().unwrap();
    assert!(*slowest <= Duration::from_secs(1), "took {slowest:?}");
    assert_eq!(leaked(&replies, &secrets), Vec::<&str>::new());
}
