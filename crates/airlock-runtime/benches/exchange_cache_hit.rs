//! Bench binary: what a hit of the OAuth exchange cache costs — building the key of a ~1 KB
//! subject token (one SHA-256 pass) and looking it up — against a cache holding its full
//! capacity of other principals' entries. Reports nanoseconds per hit, the median of 7 rounds
//! of 20,000 hits. Run with `cargo bench -p airlock-runtime --bench exchange_cache_hit`.

#![allow(clippy::unwrap_used, missing_docs)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use airlock_runtime::oauth::{Exchange, ExchangeCache, Grant, Tokens};
use secrecy::SecretString;
use url::Url;

const HITS: u32 = 20_000;
const ROUNDS: usize = 7;

fn tokens() -> Tokens {
    Tokens {
        access: SecretString::from("exchanged-access-token"),
        refresh: None,
        expires_in: Some(Duration::from_secs(3_600)),
        scope: None,
        issued_token_type: None,
    }
}

fn main() {
    let exchange = Exchange {
        token_endpoint: Url::parse("https://login.example.com/oauth2/v2.0/token").unwrap(),
        client_id: "airlock".into(),
        client_secret: None,
        scopes: vec!["api://crm/.default".into()],
        grant: Grant::TokenExchange {
            audience: Some("crm".into()),
            resource: None,
            actor: None,
        },
    };
    // A subject token the size of a typical JWT access token.
    let subject = SecretString::from(format!("eyJ{}", "x".repeat(1_021)));
    let cache = ExchangeCache::new();
    let principals: Vec<String> = (0..ExchangeCache::CAPACITY - 1)
        .map(|i| format!("principal-{i}"))
        .collect();
    for principal in &principals {
        cache.insert(&exchange.cache_key(principal, &subject), tokens());
    }
    cache.insert(&exchange.cache_key("alice", &subject), tokens());
    assert_eq!(cache.len(), ExchangeCache::CAPACITY);
    let mut rounds: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let start = Instant::now();
            for _ in 0..HITS {
                let key = exchange.cache_key(black_box("alice"), black_box(&subject));
                black_box(cache.get(&key).unwrap());
            }
            start.elapsed() / HITS
        })
        .collect();
    rounds.sort();
    println!(
        "exchange cache hit (key of a 1 KiB subject token + lookup, {} entries): {} ns median, {} ns best",
        cache.len(),
        rounds[ROUNDS / 2].as_nanos(),
        rounds[0].as_nanos()
    );
}
