//! Every tool's arguments against its input schema: defaults filled, then validated.
//!
//! Guarantees: a call is checked once, when it is recorded (the gateway refuses to record a
//! runnable call whose arguments fail); when it runs, its arguments are only completed
//! ([`ArgumentCheck::complete`]), since a row never runs under a definition other than the one
//! it was recorded under. So a call that reaches an executor has an object of arguments that
//! satisfies the tool's input schema. A violation is a `bad_arguments` tool error listing every problem,
//! each with its JSON pointer, so the model can correct all of them in one retry. The schema is
//! compiled by `airlock_spec::compile_input_schema`, the compilation the load checks declared
//! schemas with (without network or file access: a `$ref` to a remote document fails to
//! compile instead of fetching anything).

use serde_json::{Map, Value};

use crate::ToolError;

/// Most problems listed in one error; the rest are counted.
const MAX_LISTED: usize = 20;

/// The compiled input schema of one tool, with the defaults of its parameters.
pub struct ArgumentCheck {
    validator: jsonschema::Validator,
    defaults: Vec<(String, Value)>,
}

impl std::fmt::Debug for ArgumentCheck {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArgumentCheck")
            .field("defaults", &self.defaults)
            .finish_non_exhaustive()
    }
}

impl ArgumentCheck {
    /// Compiles `input_schema` (once per tool; reuse it for every call).
    ///
    /// # Errors
    /// `bad_declaration` when the schema does not compile.
    pub fn new(input_schema: &Value) -> Result<Self, ToolError> {
        let validator =
            airlock_spec::compile_input_schema(input_schema).map_err(ToolError::bad_declaration)?;
        let defaults = input_schema
            .get("properties")
            .and_then(Value::as_object)
            .map(|props| {
                props
                    .iter()
                    .filter_map(|(name, p)| Some((name.clone(), p.get("default")?.clone())))
                    .collect()
            })
            .unwrap_or_default();
        Ok(Self {
            validator,
            defaults,
        })
    }

    /// Fills defaults for absent (or `null`) arguments, then validates. The arguments are
    /// taken, not copied: a call's arguments may be megabytes.
    ///
    /// `null` as the whole argument value means "no arguments" (`{}`).
    ///
    /// # Errors
    /// `bad_arguments` listing every violation, or saying the arguments are not an object.
    pub fn prepare(&self, arguments: Value) -> Result<Map<String, Value>, ToolError> {
        let args = Value::Object(self.complete(arguments)?);
        self.validate(&args)?;
        match args {
            Value::Object(args) => Ok(args),
            _ => Ok(Map::new()),
        }
    }

    /// Fills defaults for absent (or `null`) arguments of a call [`Self::check`] accepted when
    /// it was recorded, without validating them again.
    ///
    /// # Errors
    /// `bad_arguments` when the arguments are not an object.
    pub fn complete(&self, arguments: Value) -> Result<Map<String, Value>, ToolError> {
        let mut args = match arguments {
            Value::Object(map) => map,
            Value::Null => Map::new(),
            _ => return Err(not_an_object()),
        };
        // A `null` argument means "left out" (see `template`); drop it so the default applies
        // and the schema does not reject a type it never allowed.
        args.retain(|_, v| !v.is_null());
        for (name, default) in &self.defaults {
            if !args.contains_key(name) {
                args.insert(name.clone(), default.clone());
            }
        }
        Ok(args)
    }

    /// Whether [`Self::prepare`] would accept `arguments`, without keeping them: they are read
    /// in place, and copied only when a `null` or a missing default must be filled first.
    ///
    /// # Errors
    /// As [`Self::prepare`].
    pub fn check(&self, arguments: &Value) -> Result<(), ToolError> {
        let complete = match arguments {
            Value::Object(map) => {
                !map.values().any(Value::is_null)
                    && self.defaults.iter().all(|(name, _)| map.contains_key(name))
            }
            Value::Null => false,
            _ => return Err(not_an_object()),
        };
        if complete {
            self.validate(arguments)
        } else {
            self.prepare(arguments.clone()).map(drop)
        }
    }

    /// Every way `instance` violates the schema, as one `bad_arguments` error.
    fn validate(&self, instance: &Value) -> Result<(), ToolError> {
        let problems: Vec<String> = self
            .validator
            .iter_errors(instance)
            .map(|e| {
                let at = e.instance_path().as_str();
                let at = if at.is_empty() { "(arguments)" } else { at };
                format!("- {at}: {e}")
            })
            .collect();
        if problems.is_empty() {
            return Ok(());
        }
        let mut message = format!(
            "the arguments do not match the tool's input schema ({} problem{}):",
            problems.len(),
            if problems.len() == 1 { "" } else { "s" }
        );
        for line in problems.iter().take(MAX_LISTED) {
            message.push('\n');
            message.push_str(line);
        }
        if problems.len() > MAX_LISTED {
            message.push_str(&format!("\n… and {} more", problems.len() - MAX_LISTED));
        }
        Err(ToolError::bad_arguments(message))
    }
}

fn not_an_object() -> ToolError {
    ToolError::bad_arguments("the arguments must be a JSON object")
}

/// Compiles `input_schema` and prepares `arguments` in one step (tests, one-off calls).
///
/// # Errors
/// As [`ArgumentCheck::new`] and [`ArgumentCheck::prepare`].
pub fn prepare_arguments(
    input_schema: &Value,
    arguments: &Value,
) -> Result<Map<String, Value>, ToolError> {
    ArgumentCheck::new(input_schema)?.prepare(arguments.clone())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::ToolErrorKind;

    fn schema() -> Value {
        json!({
            "type": "object",
            "properties": {
                "cuit": {"type": "string"},
                "limit": {"type": "integer", "default": 25},
                "estado": {"type": "string", "enum": ["activo", "baja"]}
            },
            "required": ["cuit"]
        })
    }

    #[test]
    fn defaults_fill_absent_and_null_arguments() {
        let args = prepare_arguments(&schema(), &json!({"cuit": "1", "limit": null})).unwrap();
        assert_eq!(Value::Object(args), json!({"cuit": "1", "limit": 25}));
        let args = prepare_arguments(&schema(), &json!({"cuit": "1", "limit": 3})).unwrap();
        assert_eq!(args["limit"], json!(3));
    }

    /// `check` answers as `prepare` does, whether the arguments are read in place (complete) or
    /// need a default filled first.
    #[test]
    fn check_agrees_with_prepare() {
        let check = ArgumentCheck::new(&schema()).unwrap();
        for arguments in [
            json!({"cuit": "1", "limit": 3}),
            json!({"cuit": "1"}),
            json!({"cuit": "1", "limit": null}),
            json!({"limit": 3}),
            json!({"cuit": "1", "limit": "x"}),
            json!({"cuit": 1, "limit": 3, "estado": "otro"}),
            Value::Null,
            json!("text"),
        ] {
            let checked = check.check(&arguments).map_err(|e| e.message);
            let prepared = check
                .prepare(arguments.clone())
                .map(drop)
                .map_err(|e| e.message);
            assert_eq!(checked, prepared, "{arguments}");
        }
    }

    #[test]
    fn every_problem_is_listed() {
        let e = prepare_arguments(&schema(), &json!({"limit": "x", "estado": "otro"})).unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::BadArguments);
        assert!(
            e.message
                .starts_with("the arguments do not match the tool's input schema (3 problems):"),
            "{}",
            e.message
        );
        assert!(
            e.message
                .contains("- (arguments): \"cuit\" is a required property"),
            "{}",
            e.message
        );
        assert!(e.message.contains("- /limit: "), "{}", e.message);
        assert!(e.message.contains("- /estado: "), "{}", e.message);
    }

    #[test]
    fn not_an_object() {
        let e = prepare_arguments(&schema(), &json!([1])).unwrap_err();
        assert_eq!(e.message, "the arguments must be a JSON object");
        let no_required = json!({"type": "object", "properties": {}});
        assert_eq!(
            prepare_arguments(&no_required, &Value::Null).unwrap(),
            Map::new()
        );
    }

    #[test]
    fn remote_refs_do_not_compile() {
        let e = ArgumentCheck::new(&json!({"$ref": "https://example.com/s.json"})).unwrap_err();
        assert_eq!(e.kind, ToolErrorKind::BadDeclaration);
    }
}
