//! 2026-07-28 `subscriptions/listen` for resource updates: the client's stream carries the
//! `notifications/resources/updated` of the upstreams behind the URIs it names (docs/rules.md
//! MCP-92, MCP-93).
//!
//! Guarantees: only `resourceSubscriptions` are accepted (no `listChanged` of any kind: the
//! scope's lists are fixed at boot). The updates come from the host's
//! [`crate::OfferHost::watch_resources`], which hears only URIs the caller may read, in their
//! served form; each reaches the client as one `notifications/resources/updated` on the stream
//! the request holds, and nothing is kept once the client goes: the subscription lives exactly
//! as long as its request, on the replica serving it. A scope with nothing to subscribe to
//! holds the stream open and sends nothing.

use futures::StreamExt;
use rmcp::ErrorData;
use rmcp::model::SubscriptionFilter;
use rmcp::service::SubscriptionContext;

use super::request::Admitted;
use crate::host::ToolHost;

/// What airlock accepts of `requested`: its resource subscriptions only.
pub(super) fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
    let mut accepted = SubscriptionFilter::new();
    accepted
        .resource_subscriptions
        .clone_from(&requested.resource_subscriptions);
    accepted
}

/// Relays the updates of the accepted URIs until the client goes or the upstreams stop.
pub(super) async fn listen(
    host: &dyn ToolHost,
    admitted: &Admitted,
    context: SubscriptionContext,
) -> Result<(), ErrorData> {
    let uris = context.accepted().resource_subscriptions.clone();
    let uris = uris.unwrap_or_default();
    if uris.is_empty() || !host.offers(&admitted.scope).subscribe {
        context.cancelled().await;
        return Ok(());
    }
    let mut updates = host.watch_resources(&admitted.scope, &admitted.caller, uris);
    loop {
        tokio::select! {
            () = context.cancelled() => return Ok(()),
            update = updates.next() => {
                let Some(uri) = update else { return Ok(()) };
                if context.sink().notify_resource_updated(uri).await.is_err() {
                    return Ok(());
                }
            }
        }
    }
}
