//! The script of a `provider: scripted` model (docs/rules.md MODEL-10 to MODEL-13): a YAML file
//! the manifest names with `spec.model.script`, read and validated when the deployment loads,
//! with file, line and key for every problem, so a scripted agent never fails at run time on a
//! typo.
//!
//! A script is a list of turns, or a mapping `conversations:` whose entries each have `turns`
//! and optionally `when_input_contains` (the first whose text occurs in the run's input wins,
//! ignoring case; one without it is the fallback). A turn is `{answer: text}` or
//! `{call: [{tool, arguments}], text?}`.

use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::diag::Diag;
use crate::fields::Fields;
use crate::tree::{Node, NodeValue};

/// A validated model script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelScript {
    /// The script file, relative to the deployment directory.
    pub file: PathBuf,
    /// Its conversations, in file order (one when the file is a plain list of turns).
    pub conversations: Vec<ScriptedConversation>,
}

/// One scripted conversation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedConversation {
    /// Chosen when the run's input contains this text (ignoring case); `None`: the fallback.
    pub when_input_contains: Option<String>,
    /// The model's turns, in order: turn N answers a conversation with N assistant messages.
    pub turns: Vec<ScriptedTurn>,
}

/// One turn of a scripted model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScriptedTurn {
    /// The model calls tools (and may say something while doing so).
    Call {
        /// Text alongside the calls (empty when none).
        text: String,
        /// The calls, in order.
        calls: Vec<ScriptedCall>,
    },
    /// The model answers; the run ends.
    Answer(String),
}

/// One scripted tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptedCall {
    /// The tool's model-visible name.
    pub tool: String,
    /// Its arguments (an object; `{}` when not written).
    pub arguments: Value,
}

impl ModelScript {
    /// The conversation for a run whose input is `input`: the first whose
    /// `when_input_contains` occurs in it (ignoring case), else the first without one.
    #[must_use]
    pub fn conversation_for(&self, input: &str) -> Option<&ScriptedConversation> {
        let input = input.to_lowercase();
        self.conversations
            .iter()
            .find(|c| {
                c.when_input_contains
                    .as_ref()
                    .is_some_and(|w| input.contains(&w.to_lowercase()))
            })
            .or_else(|| {
                self.conversations
                    .iter()
                    .find(|c| c.when_input_contains.is_none())
            })
    }
}

/// Checks the `script` value of a manifest: a relative path inside the deployment directory.
pub(crate) fn script_path(text: &str) -> Result<PathBuf, String> {
    let path = Path::new(text);
    let inside = path
        .components()
        .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if text.is_empty() || !inside {
        return Err(format!(
            "`{text}` is not a relative path inside the deployment directory (such as `scripts/offline.yml`)"
        ));
    }
    Ok(path.to_path_buf())
}

/// Validates a parsed script file; problems go to `d` (the script file's own diagnostics).
pub(crate) fn read_script(node: &Node, file: &Path, d: &mut Diag) -> Option<ModelScript> {
    let conversations = match &node.value {
        NodeValue::Seq(_) => vec![ScriptedConversation {
            when_input_contains: None,
            turns: turns(node, "", d)?,
        }],
        NodeValue::Map(_) => {
            let f = Fields::open(node, "", &["conversations"], d)?;
            f.required("conversations", d)?;
            let items = f.opt_list("conversations", d)?;
            let read: Vec<_> = items
                .into_iter()
                .map(|(path, n)| conversation(n, &path, d))
                .collect();
            read.into_iter().collect::<Option<Vec<_>>>()?
        }
        _ => {
            d.push(
                node.at,
                "",
                format!(
                    "expected a list of turns or a mapping with `conversations`, found {}",
                    node.kind()
                ),
            );
            return None;
        }
    };
    if conversations.is_empty() {
        d.push(
            node.at,
            "conversations",
            "a script needs at least one conversation",
        );
        return None;
    }
    Some(ModelScript {
        file: file.to_path_buf(),
        conversations,
    })
}

fn conversation(node: &Node, path: &str, d: &mut Diag) -> Option<ScriptedConversation> {
    let f = Fields::open(node, path, &["when_input_contains", "turns"], d)?;
    let when_input_contains = f.opt_str("when_input_contains", d);
    let turns = turns(f.required("turns", d)?, &f.key("turns"), d)?;
    Some(ScriptedConversation {
        when_input_contains,
        turns,
    })
}

fn turns(node: &Node, path: &str, d: &mut Diag) -> Option<Vec<ScriptedTurn>> {
    let NodeValue::Seq(items) = &node.value else {
        d.push(
            node.at,
            path,
            format!("expected a list of turns, found {}", node.kind()),
        );
        return None;
    };
    if items.is_empty() {
        d.push(node.at, path, "a conversation needs at least one turn");
        return None;
    }
    let read: Vec<_> = items
        .iter()
        .enumerate()
        .map(|(i, item)| turn(item, &format!("{path}[{i}]"), d))
        .collect();
    read.into_iter().collect()
}

fn turn(node: &Node, path: &str, d: &mut Diag) -> Option<ScriptedTurn> {
    let f = Fields::open(node, path, &["answer", "call", "text"], d)?;
    match (f.has("answer"), f.has("call")) {
        (true, false) => {
            if f.has("text") {
                d.push(
                    f.key_at("text"),
                    &f.key("text"),
                    "`text` goes with `call`; an answer's text is `answer` itself",
                );
            }
            f.req_str("answer", d).map(ScriptedTurn::Answer)
        }
        (false, true) => {
            let text = f.opt_str("text", d).unwrap_or_default();
            let items = f.opt_list("call", d)?;
            if items.is_empty() {
                d.push(
                    f.key_at("call"),
                    &f.key("call"),
                    "a call turn needs at least one call",
                );
                return None;
            }
            let calls: Vec<_> = items.into_iter().map(|(p, n)| call(n, &p, d)).collect();
            Some(ScriptedTurn::Call {
                text,
                calls: calls.into_iter().collect::<Option<Vec<_>>>()?,
            })
        }
        _ => {
            d.push(
                f.at(),
                path,
                "a turn has exactly one of `answer` (the final text) or `call` (a list of tool calls)",
            );
            None
        }
    }
}

fn call(node: &Node, path: &str, d: &mut Diag) -> Option<ScriptedCall> {
    let f = Fields::open(node, path, &["tool", "arguments"], d)?;
    let tool = f.req_str("tool", d);
    let arguments = match f.get("arguments") {
        None => Some(Value::Object(serde_json::Map::new())),
        Some(n) if matches!(n.value, NodeValue::Map(_)) => Some(n.to_json()),
        Some(n) => {
            d.push(
                f.key_at("arguments"),
                &f.key("arguments"),
                format!("expected a mapping of arguments, found {}", n.kind()),
            );
            None
        }
    };
    Some(ScriptedCall {
        tool: tool?,
        arguments: arguments?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::parse_yaml;

    fn read(text: &str) -> (Option<ModelScript>, Vec<String>) {
        let node = parse_yaml(text).unwrap().unwrap();
        let mut d = Diag::new(Path::new("scripts/s.yml"));
        let script = read_script(&node, Path::new("scripts/s.yml"), &mut d);
        let issues = d.into_issues().iter().map(ToString::to_string).collect();
        (script, issues)
    }

    #[test]
    fn a_list_of_turns_is_one_conversation() {
        let (script, issues) = read(
            "- call: [{tool: crm_search, arguments: {q: ada}}]\n  text: looking\n- answer: done\n",
        );
        assert!(issues.is_empty(), "{issues:?}");
        let script = script.unwrap();
        let turns = &script.conversation_for("anything").unwrap().turns;
        assert_eq!(
            turns[0],
            ScriptedTurn::Call {
                text: "looking".into(),
                calls: vec![ScriptedCall {
                    tool: "crm_search".into(),
                    arguments: serde_json::json!({"q": "ada"}),
                }],
            }
        );
        assert_eq!(turns[1], ScriptedTurn::Answer("done".into()));
    }

    #[test]
    fn conversations_are_chosen_by_the_input_ignoring_case() {
        let (script, issues) = read(
            "conversations:\n  - when_input_contains: Weather\n    turns: [{answer: sunny}]\n  - turns: [{answer: fallback}]\n",
        );
        assert!(issues.is_empty(), "{issues:?}");
        let script = script.unwrap();
        let first = |input: &str| script.conversation_for(input).unwrap().turns[0].clone();
        assert_eq!(
            first("the WEATHER today?"),
            ScriptedTurn::Answer("sunny".into())
        );
        assert_eq!(first("hello"), ScriptedTurn::Answer("fallback".into()));
    }

    #[test]
    fn every_problem_is_reported_with_line_and_key() {
        let (script, issues) = read(
            "- answer: a\n  call: []\n- call: [{arguments: {}}]\n- call: [{tool: t, arguments: [1]}]\n- speak: x\n",
        );
        assert!(script.is_none());
        assert!(
            issues
                .iter()
                .any(|i| i.starts_with("scripts/s.yml:1:3: [0]: a turn has exactly one")),
            "{issues:?}"
        );
        assert!(
            issues
                .iter()
                .any(|i| i.contains("[1].call[0].tool: `tool` is required")),
            "{issues:?}"
        );
        assert!(
            issues
                .iter()
                .any(|i| i.contains(":4:") && i.contains("[2].call[0].arguments")),
            "{issues:?}"
        );
        assert!(
            issues.iter().any(|i| i.contains("[3].speak: unknown key")),
            "{issues:?}"
        );
    }

    #[test]
    fn a_script_path_stays_inside_the_directory() {
        assert!(script_path("scripts/offline.yml").is_ok());
        for bad in ["", "/etc/passwd", "../x.yml", "scripts/../../x.yml"] {
            assert!(script_path(bad).is_err(), "{bad}");
        }
    }
}
