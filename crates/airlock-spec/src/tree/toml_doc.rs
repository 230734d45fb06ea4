//! TOML → [`Node`], on the `toml` crate's spanned parser.
//!
//! Every syntax error of the file is reported (the parser recovers), each with its position.

use toml::de::{DeTable, DeValue};

use super::{Entry, Node, NodeValue, Pos, SyntaxError};

/// Parses a TOML document into a mapping node, or every syntax error found.
pub(crate) fn parse_toml(text: &str) -> Result<Node, Vec<SyntaxError>> {
    let lines = LineIndex::new(text);
    let (table, errors) = DeTable::parse_recoverable(text);
    if !errors.is_empty() {
        return Err(errors
            .iter()
            .map(|e| SyntaxError {
                at: e.span().map_or_else(Pos::default, |s| lines.pos(s.start)),
                message: format!("invalid TOML: {}", e.message()),
            })
            .collect());
    }
    Ok(convert_table(
        table.get_ref(),
        lines.pos(table.span().start),
        &lines,
    ))
}

fn convert_table(table: &DeTable<'_>, at: Pos, lines: &LineIndex) -> Node {
    let entries = table
        .iter()
        .map(|(key, value)| Entry {
            key: key.get_ref().to_string(),
            key_at: lines.pos(key.span().start),
            value: convert(value.get_ref(), lines.pos(value.span().start), lines),
        })
        .collect();
    Node {
        at,
        value: NodeValue::Map(entries),
    }
}

fn convert(value: &DeValue<'_>, at: Pos, lines: &LineIndex) -> Node {
    let value = match value {
        DeValue::String(s) => NodeValue::Str(s.to_string()),
        DeValue::Integer(i) => integer(i.as_str(), i.radix()),
        DeValue::Float(f) => f
            .as_str()
            .replace('_', "")
            .parse()
            .map_or_else(|_| NodeValue::Str(f.as_str().to_owned()), NodeValue::Float),
        DeValue::Boolean(b) => NodeValue::Bool(*b),
        DeValue::Datetime(d) => NodeValue::Str(d.to_string()),
        DeValue::Array(items) => NodeValue::Seq(
            items
                .iter()
                .map(|item| convert(item.get_ref(), lines.pos(item.span().start), lines))
                .collect(),
        ),
        DeValue::Table(table) => return convert_table(table, at, lines),
    };
    Node { at, value }
}

fn integer(text: &str, radix: u32) -> NodeValue {
    let digits: String = text.chars().filter(|c| *c != '_').collect();
    i64::from_str_radix(&digits, radix)
        .map_or_else(|_| NodeValue::Str(text.to_owned()), NodeValue::Int)
}

/// Byte offset → line and column.
struct LineIndex {
    starts: Vec<usize>,
    text_len: usize,
}

impl LineIndex {
    fn new(text: &str) -> Self {
        let starts = std::iter::once(0)
            .chain(text.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Self {
            starts,
            text_len: text.len(),
        }
    }

    fn pos(&self, offset: usize) -> Pos {
        let offset = offset.min(self.text_len);
        let line = self.starts.partition_point(|s| *s <= offset).max(1);
        let start = self.starts.get(line - 1).copied().unwrap_or(0);
        Pos {
            line,
            column: offset - start + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_positions() {
        let node = parse_toml("listen = \"127.0.0.1:1\"\n\n[egress]\nports = [443]\n").unwrap();
        let NodeValue::Map(entries) = &node.value else {
            panic!()
        };
        assert_eq!(entries[0].key, "listen");
        assert_eq!(entries[0].key_at, Pos { line: 1, column: 1 });
        let NodeValue::Map(inner) = &entries[1].value.value else {
            panic!()
        };
        assert_eq!(inner[0].key_at, Pos { line: 4, column: 1 });
        assert_eq!(inner[0].value.to_json(), serde_json::json!([443]));
    }

    #[test]
    fn every_syntax_error_is_reported() {
        let errors = parse_toml("a = \nb = [\n").unwrap_err();
        assert!(!errors.is_empty());
        assert!(errors[0].message.starts_with("invalid TOML"));
    }

    /// Found by the `declarations` fuzz target: the parser's recursion limit on dotted keys
    /// has no span, and was reported at line 0, column 0 (DECL-43).
    #[test]
    fn an_error_without_a_span_is_reported_at_the_start_of_the_file() {
        let dotted = format!("[a{}]\n", ".a".repeat(2000));
        let errors = parse_toml(&dotted).unwrap_err();
        assert!(errors[0].message.contains("recursion limit"), "{errors:?}");
        let nested = format!("a = {}{}\n", "[".repeat(2000), "]".repeat(2000));
        let errors = errors.into_iter().chain(parse_toml(&nested).unwrap_err());
        for e in errors {
            assert!(e.at.line >= 1 && e.at.column >= 1, "{e:?}");
        }
    }

    #[test]
    fn duplicate_keys_are_refused() {
        assert!(parse_toml("a = 1\na = 2\n").is_err());
    }
}
