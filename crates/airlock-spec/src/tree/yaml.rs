//! YAML → [`Node`], on saphyr's event parser.
//!
//! Guarantees: one document per file; duplicate keys refused; only scalar keys; aliases expand
//! with a bound on the total size (no "billion laughs"); plain scalars resolved by the YAML 1.2
//! core schema, quoted scalars always strings.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span};

use super::{Entry, Node, NodeValue, Pos, SyntaxError};

/// Most nodes a file may expand to through aliases.
const MAX_NODES: usize = 200_000;

/// Deepest nesting of sequences and mappings: far beyond any declaration (an input schema may
/// nest 8 levels, `MAX_SCHEMA_DEPTH`), far below what the recursive builder's stack holds.
const MAX_DEPTH: usize = 64;

/// Parses one YAML document. `Ok(None)` for an empty file (or one with only comments).
pub(crate) fn parse_yaml(text: &str) -> Result<Option<Node>, SyntaxError> {
    let mut builder = Builder {
        events: Parser::new_from_str(text),
        anchors: HashMap::new(),
        nodes: 0,
        depth: 0,
    };
    builder.document()
}

struct Builder<'a> {
    events: Parser<'a, saphyr_parser::StrInput<'a>>,
    anchors: HashMap<usize, Node>,
    nodes: usize,
    /// Sequences and mappings open around the current event.
    depth: usize,
}

fn pos(span: Span) -> Pos {
    Pos {
        line: span.start.line(),
        column: span.start.col() + 1,
    }
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<(Event<'a>, Pos), SyntaxError> {
        match self.events.next_event() {
            Some(Ok((event, span))) => Ok((event, pos(span))),
            Some(Err(e)) => Err(SyntaxError {
                at: Pos {
                    line: e.marker().line(),
                    column: e.marker().col() + 1,
                },
                message: format!("invalid YAML: {}", e.info()),
            }),
            None => Err(SyntaxError {
                at: Pos::default(),
                message: "unexpected end of YAML".into(),
            }),
        }
    }

    fn document(&mut self) -> Result<Option<Node>, SyntaxError> {
        let mut root = None;
        loop {
            let (event, at) = self.next()?;
            match event {
                Event::StreamStart | Event::DocumentEnd | Event::Nothing => {}
                Event::StreamEnd => return Ok(root),
                Event::DocumentStart(_) if root.is_some() => {
                    return Err(SyntaxError {
                        at,
                        message:
                            "a declaration file holds one YAML document; remove the second `---`"
                                .into(),
                    });
                }
                Event::DocumentStart(_) => {
                    let (event, at) = self.next()?;
                    if matches!(event, Event::DocumentEnd) {
                        continue;
                    }
                    root = Some(self.node(event, at)?);
                }
                other => root = Some(self.node(other, at)?),
            }
        }
    }

    fn count(&mut self, at: Pos) -> Result<(), SyntaxError> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return Err(SyntaxError {
                at,
                message: format!("the document expands to more than {MAX_NODES} values"),
            });
        }
        Ok(())
    }

    fn node(&mut self, event: Event<'a>, at: Pos) -> Result<Node, SyntaxError> {
        self.count(at)?;
        let (node, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let forced_str = tag.as_ref().is_some_and(|t| t.suffix == "str");
                (
                    Node {
                        at,
                        value: scalar(&text, style, forced_str),
                    },
                    anchor,
                )
            }
            Event::SequenceStart(anchor, _) => (self.nested(at, Self::sequence)?, anchor),
            Event::MappingStart(anchor, _) => (self.nested(at, Self::mapping)?, anchor),
            Event::Alias(id) => {
                let target = self.anchors.get(&id).cloned().ok_or_else(|| SyntaxError {
                    at,
                    message: "alias to an unknown anchor".into(),
                })?;
                self.nodes += weight(&target);
                self.count(at)?;
                return Ok(Node {
                    at,
                    value: target.value,
                });
            }
            _ => {
                return Err(SyntaxError {
                    at,
                    message: "unexpected YAML structure".into(),
                });
            }
        };
        if anchor != 0 {
            self.anchors.insert(anchor, node.clone());
        }
        Ok(node)
    }

    /// Reads a sequence or mapping one level deeper: the builder recurses per level, and the
    /// parser bounds only flow nesting, so block nesting is bounded here (DECL-43).
    fn nested(
        &mut self,
        at: Pos,
        read: fn(&mut Self, Pos) -> Result<Node, SyntaxError>,
    ) -> Result<Node, SyntaxError> {
        if self.depth == MAX_DEPTH {
            return Err(SyntaxError {
                at,
                message: format!("the document nests more than {MAX_DEPTH} levels deep"),
            });
        }
        self.depth += 1;
        let node = read(self, at);
        self.depth -= 1;
        node
    }

    fn sequence(&mut self, at: Pos) -> Result<Node, SyntaxError> {
        let mut items = Vec::new();
        loop {
            let (event, item_at) = self.next()?;
            if matches!(event, Event::SequenceEnd) {
                return Ok(Node {
                    at,
                    value: NodeValue::Seq(items),
                });
            }
            items.push(self.node(event, item_at)?);
        }
    }

    fn mapping(&mut self, at: Pos) -> Result<Node, SyntaxError> {
        let mut entries: Vec<Entry> = Vec::new();
        loop {
            let (event, key_at) = self.next()?;
            if matches!(event, Event::MappingEnd) {
                return Ok(Node {
                    at,
                    value: NodeValue::Map(entries),
                });
            }
            let key_node = self.node(event, key_at)?;
            let key = match key_node.value {
                NodeValue::Str(s) => s,
                NodeValue::Null => "null".to_owned(),
                NodeValue::Bool(b) => b.to_string(),
                NodeValue::Int(i) => i.to_string(),
                NodeValue::Float(f) => f.to_string(),
                NodeValue::Seq(_) | NodeValue::Map(_) => {
                    return Err(SyntaxError {
                        at: key_at,
                        message: "a mapping key must be a plain value, not a list or mapping"
                            .into(),
                    });
                }
            };
            if let Some(first) = entries.iter().find(|e| e.key == key) {
                return Err(SyntaxError {
                    at: key_at,
                    message: format!(
                        "duplicate key `{key}` (first at line {}); a second value would silently replace the first",
                        first.key_at.line
                    ),
                });
            }
            let (event, value_at) = self.next()?;
            let value = self.node(event, value_at)?;
            entries.push(Entry { key, key_at, value });
        }
    }
}

fn weight(node: &Node) -> usize {
    match &node.value {
        NodeValue::Seq(items) => 1 + items.iter().map(weight).sum::<usize>(),
        NodeValue::Map(entries) => 1 + entries.iter().map(|e| weight(&e.value)).sum::<usize>(),
        _ => 1,
    }
}

/// Resolves a scalar by the YAML 1.2 core schema.
fn scalar(text: &str, style: ScalarStyle, forced_str: bool) -> NodeValue {
    if forced_str || style != ScalarStyle::Plain {
        return NodeValue::Str(text.to_owned());
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return NodeValue::Null,
        "true" | "True" | "TRUE" => return NodeValue::Bool(true),
        "false" | "False" | "FALSE" => return NodeValue::Bool(false),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            return NodeValue::Float(f64::INFINITY);
        }
        "-.inf" | "-.Inf" | "-.INF" => return NodeValue::Float(f64::NEG_INFINITY),
        ".nan" | ".NaN" | ".NAN" => return NodeValue::Float(f64::NAN),
        _ => {}
    }
    if let Some(i) = parse_int(text) {
        return NodeValue::Int(i);
    }
    if let Some(f) = looks_like_float(text)
        .then(|| text.parse::<f64>().ok())
        .flatten()
    {
        return NodeValue::Float(f);
    }
    NodeValue::Str(text.to_owned())
}

fn parse_int(text: &str) -> Option<i64> {
    if let Some(hex) = text.strip_prefix("0x") {
        return i64::from_str_radix(hex, 16).ok();
    }
    if let Some(oct) = text.strip_prefix("0o") {
        return i64::from_str_radix(oct, 8).ok();
    }
    let digits = text.strip_prefix(['-', '+']).unwrap_or(text);
    if !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().ok();
    }
    None
}

fn looks_like_float(text: &str) -> bool {
    let body = text.strip_prefix(['-', '+']).unwrap_or(text);
    body.chars()
        .next()
        .is_some_and(|c| c.is_ascii_digit() || c == '.')
        && body
            .chars()
            .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '-' | '+'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn root(text: &str) -> Node {
        parse_yaml(text).unwrap().unwrap()
    }

    fn get<'n>(node: &'n Node, key: &str) -> &'n Node {
        match &node.value {
            NodeValue::Map(entries) => &entries.iter().find(|e| e.key == key).unwrap().value,
            _ => panic!("not a map"),
        }
    }

    #[test]
    fn core_schema_scalars() {
        let doc =
            root("a: 0\nb: false\nc: \"false\"\nd: ~\ne: 1.5\nf: 0x1f\ng: yes\nh: !!str 12\n");
        assert_eq!(get(&doc, "a").value, NodeValue::Int(0));
        assert_eq!(get(&doc, "b").value, NodeValue::Bool(false));
        assert_eq!(get(&doc, "c").value, NodeValue::Str("false".into()));
        assert_eq!(get(&doc, "d").value, NodeValue::Null);
        assert_eq!(get(&doc, "e").value, NodeValue::Float(1.5));
        assert_eq!(get(&doc, "f").value, NodeValue::Int(31));
        // YAML 1.2: `yes` is a string, not a boolean.
        assert_eq!(get(&doc, "g").value, NodeValue::Str("yes".into()));
        assert_eq!(get(&doc, "h").value, NodeValue::Str("12".into()));
    }

    #[test]
    fn positions_are_one_based() {
        let doc = root("a:\n  b: 1\n");
        let NodeValue::Map(entries) = &get(&doc, "a").value else {
            panic!()
        };
        assert_eq!(entries[0].key_at, Pos { line: 2, column: 3 });
    }

    #[test]
    fn duplicate_keys_are_refused() {
        let err = parse_yaml("a: 1\nb: 2\na: 3\n").unwrap_err();
        assert_eq!(err.at.line, 3);
        assert!(
            err.message.contains("duplicate key `a` (first at line 1)"),
            "{}",
            err.message
        );
    }

    #[test]
    fn empty_and_comment_only_files_are_none() {
        assert!(parse_yaml("").unwrap().is_none());
        assert!(parse_yaml("# nothing here\n").unwrap().is_none());
    }

    #[test]
    fn syntax_errors_have_a_position() {
        let err = parse_yaml("a: [1, 2\nb: 3\n").unwrap_err();
        assert!(err.at.line >= 1);
        assert!(err.message.starts_with("invalid YAML"));
    }

    #[test]
    fn aliases_expand_but_are_bounded() {
        let doc = root("base: &b {x: 1}\nother: *b\n");
        assert_eq!(get(&doc, "other").to_json(), serde_json::json!({"x": 1}));
        let mut bomb = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 0..8 {
            let prev = if i == 0 {
                "a".to_owned()
            } else {
                format!("l{}", i - 1)
            };
            bomb.push_str(&format!("l{i}: &l{i} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"));
        }
        let err = parse_yaml(&bomb).unwrap_err();
        assert!(
            err.message.contains("expands to more than"),
            "{}",
            err.message
        );
    }

    /// Found while checking the `declarations` fuzz target's reach: saphyr bounds flow
    /// nesting (`[[[…`) but not block nesting, and 30,000 levels of `- ` (60 KB) overflowed
    /// the stack of `airlock check` (DECL-43).
    #[test]
    fn nesting_is_bounded() {
        let deep = format!("{}x\n", "- ".repeat(30_000));
        let err = parse_yaml(&deep).unwrap_err();
        assert!(err.message.contains("levels deep"), "{}", err.message);
        assert!(err.at.line >= 1 && err.at.column >= 1, "{err:?}");
        let keys = format!("{}x\n", "? ".repeat(30_000));
        assert!(parse_yaml(&keys).is_err());
        let ok = format!("{}x\n", "- ".repeat(MAX_DEPTH));
        assert!(parse_yaml(&ok).is_ok());
    }

    #[test]
    fn two_documents_are_refused() {
        assert!(parse_yaml("a: 1\n---\nb: 2\n").is_err());
    }
}
