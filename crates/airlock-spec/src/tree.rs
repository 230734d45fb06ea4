//! A positioned document tree shared by YAML and TOML declarations.
//!
//! Both formats are read into [`Node`]s that remember the line and column of every key and
//! value, so a validator can name the exact spot of each problem. YAML scalars are resolved by
//! the YAML 1.2 core schema (`writes: 0` is an integer, `writes: "false"` a string); duplicate
//! keys are refused in both formats.

mod toml_doc;
mod yaml;

pub(crate) use toml_doc::parse_toml;
pub(crate) use yaml::parse_yaml;

use serde_json::Value;

/// A 1-based line and column.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Pos {
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

/// The start of the file, 1:1: where a problem the parser cannot place is reported, so every
/// position an operator reads is one their editor can open.
impl Default for Pos {
    fn default() -> Self {
        Self { line: 1, column: 1 }
    }
}

/// A value with the position where it starts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    pub(crate) at: Pos,
    pub(crate) value: NodeValue,
}

/// The value of a [`Node`].
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum NodeValue {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

/// One key of a mapping, with the position of the key itself.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Entry {
    pub(crate) key: String,
    pub(crate) key_at: Pos,
    pub(crate) value: Node,
}

/// A syntax error of a whole file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) at: Pos,
    pub(crate) message: String,
}

impl Node {
    /// The name of this value's type, for messages ("expected a string, found an integer").
    pub(crate) fn kind(&self) -> &'static str {
        match self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "a boolean",
            NodeValue::Int(_) => "an integer",
            NodeValue::Float(_) => "a number",
            NodeValue::Str(_) => "a string",
            NodeValue::Seq(_) => "a list",
            NodeValue::Map(_) => "a mapping",
        }
    }

    pub(crate) fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::Str(s) => Some(s),
            _ => None,
        }
    }

    /// The node as JSON (mappings keep their key order).
    pub(crate) fn to_json(&self) -> Value {
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Int(i) => Value::from(*i),
            NodeValue::Float(f) => {
                serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number)
            }
            NodeValue::Str(s) => Value::String(s.clone()),
            NodeValue::Seq(items) => Value::Array(items.iter().map(Node::to_json).collect()),
            NodeValue::Map(entries) => Value::Object(
                entries
                    .iter()
                    .map(|e| (e.key.clone(), e.value.to_json()))
                    .collect(),
            ),
        }
    }
}
