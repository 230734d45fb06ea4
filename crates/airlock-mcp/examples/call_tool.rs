//! One remote tool call, as the crate's documentation shows it: a short session through the
//! egress guard that calls `search` and prints the result or the stable error kind.
//!
//! `cargo run -p airlock-mcp --example call_tool -- https://mcp.example.com/mcp`
//!
//! An example program rather than a doc test: `cargo test` builds it, so it stays compiled,
//! while no crate runs doc tests (docs/testing.md, the skip summary).

use airlock_egress::{EgressPolicy, GuardedClient};
use airlock_mcp::{McpClient, McpTarget, ToolCall};

#[tokio::main]
async fn main() -> Result<(), airlock_egress::EgressError> {
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "https://mcp.example.com/mcp".to_owned());
    let client = McpClient::new(GuardedClient::new(EgressPolicy::default())?);
    let target = McpTarget::new(url);
    match client
        .call_tool(
            &target,
            &ToolCall::new("search", serde_json::json!({"q": "x"})),
        )
        .await
    {
        Ok(result) => println!("{}", result.text),
        Err(err) => println!("{}: {}", err.kind, err.message),
    }
    Ok(())
}
