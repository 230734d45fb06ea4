//! Definitions of the builtin tools: what the model sees of `ask_human` and `fetch`.

use serde_json::json;

use crate::names::ToolName;
use crate::tool::{Builtin, ToolDefinition};

/// Why `ask_human` cannot take `approval: caller` (docs/rules.md POLICY-40): a question already
/// waits for a person's answer, and through the MCP endpoint it is already put to the person at
/// the client (MCP-47), so there is nothing left to confirm.
pub(crate) const ASK_HUMAN_ASKS_ITSELF: &str = "`ask_human` already waits for a person's answer (put to the person at the client where it can be)";

/// The model-visible definition of a builtin.
#[must_use]
pub fn definition(builtin: Builtin) -> ToolDefinition {
    let (description, input_schema) = match builtin {
        Builtin::AskHuman => (
            "Ask a person a question and wait for the answer. Use it when you need a decision or a fact only a person has. The answer may take hours or days.",
            json!({
                "type": "object",
                "properties": {"question": {"type": "string", "description": "The question, complete enough to answer without other context."}},
                "required": ["question"]
            }),
        ),
        Builtin::Fetch => (
            "Fetch a public web page or JSON document by URL (GET, text only, at most 5 MiB). Private and internal addresses are refused.",
            json!({
                "type": "object",
                "properties": {"url": {"type": "string", "description": "An absolute http(s) URL of a public host."}},
                "required": ["url"]
            }),
        ),
    };
    ToolDefinition {
        name: ToolName::from_static(builtin.name()),
        description: description.to_owned(),
        input_schema,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_names_are_valid_tool_names() {
        for (name, builtin) in Builtin::ALL {
            assert_eq!(definition(builtin).name.as_str(), name);
        }
    }

    /// DECL-37: builtin schemas compile like declared ones.
    #[test]
    fn builtin_schemas_compile() {
        for (name, builtin) in Builtin::ALL {
            let schema = definition(builtin).input_schema;
            assert!(crate::compile_input_schema(&schema).is_ok(), "{name}");
        }
    }
}
