//! The guarded client in a few lines, as the crate's documentation shows it: one call (one
//! deadline, one resolution per host) that fetches a public URL and prints the body.
//!
//! `cargo run -p airlock-egress --example get -- https://api.example.com/v1/items`
//!
//! An example program rather than a doc test: `cargo test` builds it, so it stays compiled,
//! while no crate runs doc tests (docs/testing.md, the skip summary).

use airlock_egress::{EgressError, EgressPolicy, GuardedClient, Request};

#[tokio::main]
async fn main() -> Result<(), EgressError> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "https://api.example.com/v1/items".to_owned());
    let client = GuardedClient::new(EgressPolicy::default())?;
    let call = client.call(); // one deadline, one resolution per host
    let reply = call.send(Request::get(url)).await?;
    println!("{}", reply.error_for_status()?.text());
    Ok(())
}
