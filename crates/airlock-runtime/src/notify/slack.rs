//! Slack cards (docs/rules.md NOTIFY-4, NOTIFY-5, NOTIFY-7): a Block Kit card per parked or
//! proposed call,
//! posted with `chat.postMessage`, and the same message replaced by the outcome with
//! `chat.update` once the call is decided anywhere or expires.
//!
//! Guarantees. Every text taken from a call (tool name, principal, reason, scope) is escaped
//! by Slack's mrkdwn rules (`&`, `<`, `>`), so a caller cannot forge a link or a mention. The
//! buttons carry only the invocation id; what they do is decided at the interactions
//! endpoint, never by the card. The bot token goes only to the configured API base, through the
//! egress guard.

use airlock_egress::{GuardedClient, Request};
use http::{HeaderName, HeaderValue, header};
use secrecy::{ExposeSecret as _, SecretString};
use serde_json::{Value, json};

use super::Undelivered;

/// The action ids of the card's buttons, read back by the interactions endpoint.
pub(crate) const APPROVE: &str = "approve";
/// See [`APPROVE`].
pub(crate) const DENY: &str = "deny";

/// Where cards go.
pub(crate) struct SlackOut {
    pub(crate) api_base: String,
    pub(crate) token: SecretString,
    pub(crate) channel: String,
}

/// `text` safe inside mrkdwn: Slack's three control characters as entities.
#[must_use]
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn field(data: &Value, key: &str) -> String {
    escape(data.get(key).and_then(Value::as_str).unwrap_or("—"))
}

fn mrkdwn(text: &str) -> Value {
    json!({ "type": "mrkdwn", "text": text })
}

/// The "open in the inbox" line, when the server's public URL is known.
fn link_line(data: &Value) -> Value {
    let id = field(data, "invocation_id");
    let text = match data.get("inbox_url").and_then(Value::as_str) {
        Some(url) if url.starts_with("http") => {
            format!("<{}|Open in the inbox> · invocation `{id}`", escape(url))
        }
        _ => format!("invocation `{id}`"),
    };
    json!({ "type": "context", "elements": [mrkdwn(&text)] })
}

/// The card of a parked call: who asks for what, where, until when, and the buttons.
pub(crate) fn card(data: &Value) -> (String, Value) {
    let tool = field(data, "tool");
    let state = data.get("state").and_then(Value::as_str);
    let question = state == Some("awaiting_answer");
    let headline = match state {
        Some("awaiting_answer") => format!("*A question waits for an answer:* `{tool}`"),
        Some("proposed") => format!("*Proposed, not run:* `{tool}` (approve to run it)"),
        _ => format!("*Approval needed:* `{tool}`"),
    };
    let facts = json!({
        "type": "section",
        "fields": [
            mrkdwn(&format!("*Asked by*\n{}", field(data, "principal"))),
            mrkdwn(&format!("*Scope*\n{}", field(data, "scope"))),
            mrkdwn(&format!("*Channel*\n{}", field(data, "channel"))),
            mrkdwn(&format!("*Expires*\n{}", field(data, "expires_at"))),
        ]
    });
    let mut blocks = vec![
        json!({ "type": "section", "text": mrkdwn(&headline) }),
        facts,
        link_line(data),
    ];
    if !question {
        let id = data.get("invocation_id").cloned().unwrap_or(Value::Null);
        let button = |action: &str, label: &str, style: &str| {
            json!({
                "type": "button", "action_id": action, "value": id, "style": style,
                "text": { "type": "plain_text", "text": label }
            })
        };
        blocks.push(json!({
            "type": "actions",
            "block_id": "airlock_decision",
            "elements": [button(APPROVE, "Approve", "primary"), button(DENY, "Deny", "danger")]
        }));
    }
    (headline, Value::Array(blocks))
}

/// What replaces the card: the outcome, who and when, and no buttons.
pub(crate) fn outcome(data: &Value, at: &str) -> (String, Value) {
    let tool = field(data, "tool");
    let who = field(data, "decided_by");
    let at = escape(at);
    let text = match data.get("state").and_then(Value::as_str) {
        Some("expired") => format!("*Expired* at {at}: nobody decided `{tool}`"),
        _ => {
            let decision = field(data, "decision");
            let mut text = format!("*{decision}* by {who} at {at}: `{tool}`");
            if let Some(reason) = data.get("reason").and_then(Value::as_str) {
                text.push_str(&format!("\n> {}", escape(reason)));
            }
            text
        }
    };
    let blocks = json!([{ "type": "section", "text": mrkdwn(&text) }, link_line(data)]);
    (text, blocks)
}

impl SlackOut {
    /// `chat.postMessage`; the posted message's `channel ts`.
    pub(crate) async fn post(
        &self,
        egress: &GuardedClient,
        (text, blocks): (String, Value),
    ) -> Result<String, Undelivered> {
        let body = json!({ "channel": self.channel, "text": text, "blocks": blocks });
        let answer = self.call(egress, "chat.postMessage", &body).await?;
        let channel = answer.get("channel").and_then(Value::as_str);
        let ts = answer.get("ts").and_then(Value::as_str);
        match (channel, ts) {
            (Some(channel), Some(ts)) => Ok(format!("{channel} {ts}")),
            _ => Err(Undelivered::retry("Slack answered without channel and ts")),
        }
    }

    /// `chat.update` of the message `reference` (as [`SlackOut::post`] returned it).
    pub(crate) async fn update(
        &self,
        egress: &GuardedClient,
        reference: &str,
        (text, blocks): (String, Value),
    ) -> Result<(), Undelivered> {
        let Some((channel, ts)) = reference.split_once(' ') else {
            return Err(Undelivered::give_up(
                "a stored Slack message reference is unreadable",
            ));
        };
        let body = json!({ "channel": channel, "ts": ts, "text": text, "blocks": blocks });
        self.call(egress, "chat.update", &body).await.map(|_| ())
    }

    async fn call(
        &self,
        egress: &GuardedClient,
        method: &str,
        body: &Value,
    ) -> Result<Value, Undelivered> {
        let bearer = format!("Bearer {}", self.token.expose_secret());
        let auth = HeaderValue::from_str(&bearer)
            .map_err(|_| Undelivered::give_up("the Slack bot token is not a header value"))?;
        let request = Request::post(format!("{}/{method}", self.api_base))
            .header(header::AUTHORIZATION, auth)
            .header(
                HeaderName::from_static("content-type"),
                HeaderValue::from_static("application/json; charset=utf-8"),
            )
            .body(body.to_string());
        let response = egress
            .send(request)
            .await
            .map_err(|e| Undelivered::egress(&e))?;
        if !response.status().is_success() {
            return Err(Undelivered::status(response.status().as_u16()));
        }
        let answer: Value = serde_json::from_slice(response.body())
            .map_err(|_| Undelivered::retry("Slack answered with something other than JSON"))?;
        if answer.get("ok") == Some(&Value::Bool(true)) {
            return Ok(answer);
        }
        // Slack's error codes are fixed words (`channel_not_found`), never our data.
        let code = answer
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("unknown");
        Err(Undelivered::retry(format!(
            "Slack {method}: {}",
            escape(code)
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mrkdwn_control_characters_are_escaped() {
        assert_eq!(
            escape("<!channel> & <https://evil|click>"),
            "&lt;!channel&gt; &amp; &lt;https://evil|click&gt;"
        );
    }

    #[test]
    fn a_hostile_principal_and_reason_stay_text() {
        let data = json!({
            "invocation_id": "0190", "tool": "refund", "principal": "<@U999>",
            "state": "denied", "decided_by": "slack:U1", "decision": "denied",
            "reason": "<!here> pay now"
        });
        let (_, blocks) =
            card(&json!({"tool": "x<y", "principal": "<@U999>", "state": "awaiting_approval"}));
        assert!(!blocks.to_string().contains("<@U999>"), "{blocks}");
        let (text, _) = outcome(&data, "2026-01-01T00:00:00Z");
        assert!(
            text.contains("&lt;!here&gt;") && !text.contains("<!here>"),
            "{text}"
        );
    }
}
