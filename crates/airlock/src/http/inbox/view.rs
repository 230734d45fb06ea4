//! What every inbox page shares: the layout (viewport for phones, one stylesheet from
//! `/inbox/style.css`, a header with the signed-in principal and a sign-out form), and the
//! rendering of text a caller sent. Everything shown goes through maud, which escapes HTML;
//! text from callers (arguments, reasons, answers, names) also goes through [`visible`], which
//! shows control, bidirectional and zero-width characters as `\u{…}` escapes, so a payload can
//! neither run nor disguise itself (docs/rules.md INBOX-4).

use airlock_ledger::Invocation;
use maud::{DOCTYPE, Markup, html};
use serde_json::Value;
use time::{OffsetDateTime, UtcOffset};

use super::sessions::Signed;

/// The list reloads itself this often (seconds) while live (docs/rules.md INBOX-5).
pub(super) const REFRESH_SECS: u32 = 1;

/// The inbox's stylesheet, served at `/inbox/style.css` (the CSP allows styles from 'self'
/// only, so no inline style exists anywhere).
pub(super) const STYLE: &str = "\
:root{color-scheme:light dark;--fg:#1d1d1f;--bg:#fff;--muted:#5f6368;--line:#d9d9de;--accent:#0b57d0;--bad:#b3261e;--ok:#146c2e}
@media (prefers-color-scheme:dark){:root{--fg:#e8e8ea;--bg:#141416;--muted:#a0a0a8;--line:#3a3a40;--accent:#8ab4f8;--bad:#f2b8b5;--ok:#6dd58c}}
*{box-sizing:border-box}
body{margin:0;font:16px/1.5 system-ui,-apple-system,Segoe UI,Roboto,sans-serif;color:var(--fg);background:var(--bg)}
header{display:flex;flex-wrap:wrap;gap:.5rem 1rem;align-items:center;padding:.75rem 1rem;border-bottom:1px solid var(--line)}
header .brand{font-weight:700;margin-right:auto}
main{max-width:64rem;margin:0 auto;padding:1rem}
a{color:var(--accent)}
a:focus-visible,button:focus-visible,input:focus-visible,textarea:focus-visible,select:focus-visible{outline:3px solid var(--accent);outline-offset:2px}
h1{font-size:1.4rem;margin:.5rem 0 1rem;overflow-wrap:anywhere}
h2{font-size:1.1rem;margin:1.5rem 0 .5rem}
table{width:100%;border-collapse:collapse}
th,td{text-align:left;padding:.4rem .5rem;border-bottom:1px solid var(--line);vertical-align:top;overflow-wrap:break-word}
th{font-size:.85rem;color:var(--muted);font-weight:600}
@media (max-width:40rem){thead{display:none}tr{display:block;border-bottom:1px solid var(--line);padding:.5rem 0}td{display:block;border:0;padding:.1rem 0}td[data-label]::before{content:attr(data-label) ': ';color:var(--muted)}}
dl{display:grid;grid-template-columns:max-content 1fr;gap:.25rem 1rem;margin:0}
dt{color:var(--muted)}dd{margin:0;overflow-wrap:anywhere}
@media (max-width:40rem){dl{grid-template-columns:1fr}dd{margin-bottom:.5rem}}
pre{background:color-mix(in srgb,var(--fg) 6%,transparent);padding:.75rem;border-radius:.4rem;overflow-x:auto;white-space:pre-wrap;overflow-wrap:anywhere}
.esc{color:var(--bad);font-weight:700}
.flash{border:1px solid var(--accent);border-radius:.4rem;padding:.5rem .75rem;margin-bottom:1rem}
.error{border-color:var(--bad)}
.muted{color:var(--muted)}
.state{display:inline-block;border:1px solid var(--line);border-radius:1rem;padding:0 .5rem;font-size:.85rem}
form.decide{border:1px solid var(--line);border-radius:.4rem;padding:.75rem;margin:.75rem 0;display:grid;gap:.5rem}
form.inline{display:inline}
label{font-weight:600}
input[type=text],input[type=password],textarea,select{font:inherit;width:100%;padding:.4rem;border:1px solid var(--line);border-radius:.3rem;background:var(--bg);color:var(--fg)}
button{font:inherit;padding:.45rem 1rem;border-radius:.3rem;border:1px solid var(--accent);background:var(--accent);color:var(--bg);cursor:pointer;justify-self:start}
button.secondary{background:transparent;color:var(--accent)}
button.danger{background:var(--bad);border-color:var(--bad)}
.filters{display:grid;grid-template-columns:repeat(auto-fit,minmax(10rem,1fr));gap:.5rem;align-items:end;margin-bottom:1rem}
nav.pages{display:flex;gap:1rem;margin-top:1rem}
ol.story{padding-left:1.25rem}ol.story li{margin-bottom:.75rem}
";

/// A whole page: `title`, the signed-in header (when signed in), an optional flash message,
/// an optional self-reload, and `body`.
pub(super) fn page(
    title: &str,
    signed: Option<&Signed>,
    flash: Option<&str>,
    refresh: Option<u32>,
    body: &Markup,
) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                @if let Some(secs) = refresh {
                    meta http-equiv="refresh" content=(secs);
                }
                title { (title) " · airlock inbox" }
                link rel="stylesheet" href="/inbox/style.css";
            }
            body {
                header {
                    a.brand href="/inbox" { "airlock inbox" }
                    @if let Some(signed) = signed {
                        a href="/inbox/freezes" { "Freezes" }
                        " · "
                        a href="/inbox/credentials" { "Credentials" }
                        span.muted { "signed in as " strong { (visible(&signed.principal)) } }
                        form.inline method="post" action="/inbox/sign-out" {
                            input type="hidden" name="csrf" value=(signed.csrf);
                            button.secondary type="submit" { "Sign out" }
                        }
                    }
                }
                main {
                    @if let Some(flash) = flash {
                        p.flash role="status" { (visible(flash)) }
                    }
                    (body)
                }
            }
        }
    }
}

/// `text`, HTML-escaped, with every character that [`airlock_spec::disguises`] shown as a visible `\u{…}`.
pub(super) fn visible(text: &str) -> Markup {
    html! {
        @for part in split_disguised(text) {
            @match part {
                Part::Plain(plain) => { (plain) }
                Part::Escape(c) => { span.esc title="hidden character" { (format!("\\u{{{:04X}}}", u32::from(c))) } }
            }
        }
    }
}

enum Part<'a> {
    Plain(&'a str),
    Escape(char),
}

fn split_disguised(text: &str) -> Vec<Part<'_>> {
    let mut parts = Vec::new();
    let mut start = 0;
    for (at, c) in text.char_indices() {
        if airlock_spec::disguises(c) {
            if start < at {
                parts.push(Part::Plain(&text[start..at]));
            }
            parts.push(Part::Escape(c));
            start = at + c.len_utf8();
        }
    }
    if start < text.len() {
        parts.push(Part::Plain(&text[start..]));
    }
    parts
}

/// A JSON value pretty-printed for a form's text field: every character that
/// [`airlock_spec::disguises`] is written as its JSON `\u` escape, so it shows, and the text
/// still parses back to the same value. (Such characters are only ever inside JSON strings:
/// the layout `serde_json` writes is plain ASCII.)
pub(super) fn json_text(value: &Value) -> String {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    let mut out = String::with_capacity(pretty.len());
    for c in pretty.chars() {
        if airlock_spec::disguises(c) {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// A JSON value pretty-printed in a `<pre>`, shown with [`visible`].
pub(super) fn json_block(value: &Value) -> Markup {
    let pretty = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    html! { pre { (visible(&pretty)) } }
}

/// `2026-12-01 17:05:03 UTC`.
pub(super) fn when(at: OffsetDateTime) -> String {
    let at = at.to_offset(UtcOffset::UTC);
    format!(
        "{} {:02}:{:02}:{:02} UTC",
        at.date(),
        at.hour(),
        at.minute(),
        at.second()
    )
}

/// What a waiting row waits for, in words.
pub(super) fn waiting_for(row: &Invocation) -> &'static str {
    use airlock_ledger::InvocationState as S;
    match row.state {
        S::AwaitingApproval => "approval",
        S::AwaitingAnswer => "an answer",
        S::InDoubt => "a person to say whether it ran",
        S::Proposed => "a decision on its proposal (it did not run)",
        S::AwaitingCredential => "its caller's credential for the connection it goes through",
        S::Pending
        | S::Approved
        | S::Running
        | S::Succeeded
        | S::Failed
        | S::Denied
        | S::Expired
        | S::Resolved
        | S::Abandoned
        | S::InputRequired => "nothing",
    }
}

/// A page saying only `message` (errors, refusals).
pub(super) fn message_page(title: &str, message: &str) -> Markup {
    page(
        title,
        None,
        None,
        None,
        &html! {
            h1 { (title) }
            p.flash.error role="alert" { (visible(message)) }
            p { a href="/inbox" { "Back to the inbox" } }
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// INBOX-4: markup in caller text is escaped, and hidden characters are shown.
    #[test]
    fn caller_text_is_escaped_and_hidden_characters_are_shown() {
        let shown = visible("<script>alert(1)</script>\u{202E}gpj.exe\u{200B}&").into_string();
        assert!(!shown.contains("<script"), "{shown}");
        assert!(shown.contains("&lt;script&gt;"), "{shown}");
        assert!(shown.contains("\\u{202E}"), "{shown}");
        assert!(shown.contains("\\u{200B}"), "{shown}");
        assert!(
            !shown.contains('\u{202E}') && !shown.contains('\u{200B}'),
            "{shown}"
        );
        assert!(shown.contains("&amp;"), "{shown}");
        // Layout characters of pretty JSON stay as they are.
        assert_eq!(visible("a\n\tb").into_string(), "a\n\tb");
        assert!(visible("\u{7}").into_string().contains("\\u{0007}"));
    }
}
