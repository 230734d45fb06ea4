//! Which upstreams to listen to for a client's `subscriptions/listen`, and the relay of their
//! updates (docs/rules.md MCP-92, MCP-93).
//!
//! Guarantees: a served URI is watched only when it is one the caller may read (a listed
//! resource, or one a listed template covers, MCP-56) of an upstream that declared
//! `resources.subscribe` and speaks 2026-07-28; every other URI is never notified. Each upstream
//! is listened to with one stream for all of its URIs, listened to again each time the guard's
//! deadline ends it, and left when the upstream ends it, fails, or the client's stream is gone.
//! An update reaches the client as the served form of the URI asked for; when 64 already wait
//! for a slow client, later ones are dropped rather than held.

use std::collections::BTreeMap;

use airlock_mcp::{Listened, McpClient, McpTarget};
use airlock_spec::ScopeId;
use tokio::sync::mpsc;

use super::{Offered, uri};

/// How many updates wait for a slow client before more are dropped.
const WAITING: usize = 64;

/// One upstream to listen to, and for which URIs.
struct Watch {
    namespace: String,
    client: McpClient,
    target: McpTarget,
    /// Upstream URIs.
    uris: Vec<String>,
}

impl Offered {
    /// The updates of the served URIs `served` that `visible` lets the caller read, as served
    /// URIs, for as long as the receiver is held.
    pub(crate) fn watch(
        &self,
        scope: &ScopeId,
        served: &[String],
        visible: &dyn Fn(&str) -> bool,
    ) -> mpsc::Receiver<String> {
        let mut watches: BTreeMap<&str, Watch> = BTreeMap::new();
        for asked in served {
            let Some((source, upstream)) = self.resource(scope, asked, visible) else {
                continue;
            };
            if !source.catalog.subscribe {
                continue;
            }
            let watch = watches.entry(&source.namespace).or_insert_with(|| Watch {
                namespace: source.namespace.clone(),
                client: source.client.clone(),
                target: source.target.clone(),
                uris: Vec::new(),
            });
            watch.uris.push(upstream);
        }
        let (sender, receiver) = mpsc::channel(WAITING);
        for watch in watches.into_values() {
            tokio::spawn(watch.relay(sender.clone()));
        }
        receiver
    }
}

impl Watch {
    async fn relay(self, sender: mpsc::Sender<String>) {
        let notify = |upstream: &str| {
            // A full queue drops the update: a slow client never holds the upstream's stream.
            let _ = sender.try_send(uri::served(&self.namespace, upstream));
        };
        loop {
            let listened = tokio::select! {
                listened = self.client.listen_resources(&self.target, &self.uris, &notify) => listened,
                () = sender.closed() => return,
            };
            match listened {
                Ok(Listened::Deadline) => {}
                Ok(Listened::Closed) => return,
                Err(e) => {
                    tracing::warn!(server = %self.namespace, error = %e.message, "resource updates can no longer be heard; the subscription relays none from this server");
                    return;
                }
            }
        }
    }
}
