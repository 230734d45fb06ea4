//! Caller text shown to a person: which characters could disguise it, and the text with each
//! of them written as a visible `\u{…}` escape (docs/rules.md INBOX-4, MCP-50).
//!
//! Guarantees: control characters (but newline and tab, which lay out pretty-printed JSON),
//! bidirectional formatting characters (which can reorder what a reader sees, e.g. U+202E) and
//! invisible ones (zero-width, word joiners, the BOM, soft hyphen, tags, variation selectors)
//! are never shown as themselves by a surface that uses this module.

use std::fmt::Write as _;

/// Whether `c` is shown as an escape rather than as itself.
#[must_use]
pub fn disguises(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(c,
            '\u{00AD}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{180E}'
            | '\u{200B}'..='\u{200F}' | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}'
            | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFF9}'..='\u{FFFB}'
            | '\u{E0000}'..='\u{E007F}')
}

/// `text` with every character that [`disguises`] written as `\u{XXXX}`.
#[must_use]
pub fn visible_text(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if disguises(c) {
            // Writing to a String cannot fail.
            let _ = write!(out, "\\u{{{:04X}}}", u32::from(c));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disguising_characters_become_escapes_and_layout_stays() {
        let shown = visible_text("a\u{202E}b\u{200B}c\u{0007}\n\td");
        assert_eq!(shown, "a\\u{202E}b\\u{200B}c\\u{0007}\n\td");
        assert_eq!(visible_text("plain é ü"), "plain é ü");
    }
}
