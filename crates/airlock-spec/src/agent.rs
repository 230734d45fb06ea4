//! `agents/<name>.yml`: agent manifests (docs/rules.md DECL-14) — model, system prompt and tools of
//! types `api`, `mcp`, `agent`, `builtin` and `integration`. A bad manifest does not load, except
//! that a mis-declared `type: integration` entry warns and is skipped (DECL-46): catalog
//! integrations are the operator's, enabled by reference, and resolved after the catalog loads.

use std::path::PathBuf;

use serde_json::json;

use crate::declared::{Declared, approval, declare, no_caller_approval};
use crate::diag::Diag;
use crate::fields::Fields;
use crate::model_script::{ModelScript, script_path};
use crate::names::{CredentialPath, check_slug, slug_prefix};
use crate::refs::Referenced;
use crate::tool::{Builtin, Policy, ToolSource, ToolSpec};
use crate::tool_api::read_api;
use crate::tool_mcp::read_mcp;
use crate::tree::{Node, Pos};
use crate::urls::check_credential_url;
use crate::values::credential_path;

/// The only accepted `apiVersion`.
pub const API_VERSION: &str = "airlock/v1";

/// A validated agent manifest.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentSpec {
    /// `metadata.name`: a kebab slug equal to the file stem.
    pub name: String,
    /// The file, for messages.
    pub file: PathBuf,
    /// `metadata.description`.
    pub description: Option<String>,
    /// `spec.model`.
    pub model: ModelSpec,
    /// `spec.prompts.system`.
    pub system_prompt: String,
    /// `spec.tools`, expanded: one entry per model-visible tool.
    pub tools: Vec<ToolSpec>,
}

/// The model provider an agent runs against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelSpec {
    /// `provider`: `openai` (any OpenAI-compatible API), `anthropic`, or `scripted` (answers
    /// from a script file; no model, no network).
    pub provider: String,
    /// `model`: the provider's model id (for `scripted`, optional; default `scripted`).
    pub model: String,
    /// `endpoint`: base URL of the provider's API (default the provider's public API).
    pub endpoint: Option<String>,
    /// `credential`: path of the API key.
    pub credential: Option<CredentialPath>,
    /// `script` of a `scripted` model, read and validated at load (docs/rules.md MODEL-10);
    /// `None` for every other provider.
    pub script: Option<ModelScript>,
}

/// Model providers airlock has adapters for.
pub const PROVIDERS: [&str; 3] = ["openai", "anthropic", "scripted"];

/// The `script` key of a `scripted` model, before its file is read: the path (relative to the
/// deployment directory), where it is written, and its key path.
pub(crate) struct ScriptRef {
    pub(crate) path: PathBuf,
    pub(crate) at: Pos,
    pub(crate) key: String,
}

/// A manifest and the tools it declares, before cross-file checks.
pub(crate) struct ReadAgent {
    /// The agent, when its header (name, model, prompts) is valid.
    pub(crate) spec: Option<AgentSpec>,
    /// Its tools, read (and checkable) whatever the header's state, so one load reports the
    /// tools' problems beside the header's.
    pub(crate) declared: Vec<Declared>,
    /// Its `type: integration` entries, resolved against the catalog by the loader.
    pub(crate) integrations: Vec<IntegrationRef>,
    /// The script file a `scripted` model names, for the loader to read.
    pub(crate) script: Option<ScriptRef>,
}

/// A `type: integration` entry: which actions of which catalog integration the agent enables.
#[derive(Debug, Clone)]
pub(crate) struct IntegrationRef {
    /// The integration's slug (its `catalog/` directory).
    pub(crate) slug: String,
    /// The actions enabled, each with where it is written.
    pub(crate) actions: Vec<(String, Pos)>,
    /// `approval` for every enabled action (default `never`).
    pub(crate) approval: crate::policy::Approval,
    /// Where `integration` is written.
    pub(crate) at: Pos,
    /// Key path of `integration`.
    pub(crate) path: String,
    /// Key path of `actions`.
    pub(crate) actions_path: String,
}

/// Reads one manifest; `stem` is the file name without extension.
pub(crate) fn read_agent(node: &Node, stem: &str, d: &mut Diag) -> Option<ReadAgent> {
    let f = Fields::open(node, "", &["apiVersion", "kind", "metadata", "spec"], d)?;
    match f.req_str("apiVersion", d) {
        Some(v) if v != API_VERSION => d.push(
            f.key_at("apiVersion"),
            "apiVersion",
            format!("`{v}` is not supported; use `{API_VERSION}`"),
        ),
        _ => {}
    }
    match f.req_str("kind", d) {
        Some(k) if k != "Agent" => d.push(
            f.key_at("kind"),
            "kind",
            format!("`{k}` is not a kind this directory holds; use `Agent`"),
        ),
        _ => {}
    }
    let (name, description) = f
        .required("metadata", d)
        .map_or((None, None), |n| metadata(n, stem, d));
    let spec = f
        .required("spec", d)
        .and_then(|n| Fields::open(n, "spec", &["model", "prompts", "tools"], d));
    let spec = spec?;
    let (model, script) = spec.required("model", d).and_then(|n| model(n, d)).unzip();
    let system_prompt = spec.required("prompts", d).and_then(|n| {
        let p = Fields::open(n, "spec.prompts", &["system"], d)?;
        p.req_str("system", d)
    });
    let mut declared = Vec::new();
    let mut integrations = Vec::new();
    for (path, n) in spec.opt_list("tools", d).unwrap_or_default() {
        declared.extend(tool(n, &path, &mut integrations, d));
    }
    let spec = match (name, model, system_prompt) {
        (Some(name), Some(model), Some(system_prompt)) => Some(AgentSpec {
            name,
            file: d.file().to_path_buf(),
            description,
            model,
            system_prompt,
            tools: Vec::new(),
        }),
        _ => None,
    };
    Some(ReadAgent {
        spec,
        declared,
        integrations,
        script: script.flatten(),
    })
}

fn metadata(node: &Node, stem: &str, d: &mut Diag) -> (Option<String>, Option<String>) {
    let Some(f) = Fields::open(node, "metadata", &["name", "description"], d) else {
        return (None, None);
    };
    let name = f.req_str("name", d).filter(|name| {
        if let Err(reason) = check_slug(name, 64) {
            d.push(f.key_at("name"), "metadata.name", reason);
            return false;
        }
        if name != stem {
            d.push(
                f.key_at("name"),
                "metadata.name",
                format!(
                    "`{name}` differs from the file name `{stem}`; an agent's name is its file name"
                ),
            );
            return false;
        }
        true
    });
    (name, f.opt_str("description", d))
}

/// Reads `spec.model`; a `scripted` model also returns its script's path for the loader.
fn model(node: &Node, d: &mut Diag) -> Option<(ModelSpec, Option<ScriptRef>)> {
    let f = Fields::open(
        node,
        "spec.model",
        &["provider", "model", "endpoint", "credential", "script"],
        d,
    )?;
    let provider = f.req_str("provider", d).filter(|p| {
        let ok = PROVIDERS.contains(&p.as_str());
        if !ok {
            d.push(
                f.key_at("provider"),
                "spec.model.provider",
                format!(
                    "`{p}` is not a provider; use one of: {}",
                    PROVIDERS.join(", ")
                ),
            );
        }
        ok
    });
    let scripted = provider.as_deref() == Some("scripted");
    let model = if scripted {
        Some(
            f.opt_str("model", d)
                .unwrap_or_else(|| "scripted".to_owned()),
        )
    } else {
        f.req_str("model", d)
    };
    let credential = f
        .get("credential")
        .and_then(|n| credential_path(n, "spec.model.credential", d));
    // Recorded apart from the credentials boot needs: a model's key is needed when a run starts,
    // and a deployment whose agents nobody runs yet (a fresh quickstart) must still load, so
    // the offline check only warns about it (OPS-72).
    if let Some(path) = &credential {
        let (at, key) = (f.key_at("credential"), "spec.model.credential");
        d.refer(at, key, Referenced::ModelCredential(path.clone()));
    }
    let endpoint = f.opt_str("endpoint", d);
    if let Some(url) = &endpoint {
        let (at, key) = (f.key_at("endpoint"), "spec.model.endpoint");
        match check_credential_url(url, credential.is_some()) {
            Ok(()) => d.refer(
                at,
                key,
                Referenced::Url(url.clone(), crate::Reach::Operator),
            ),
            Err(reason) => d.push(at, key, reason),
        }
    }
    let script = script_ref(&f, scripted, d);
    let spec = ModelSpec {
        provider: provider?,
        model: model?,
        endpoint,
        credential,
        script: None,
    };
    Some((spec, script))
}

/// MODEL-10: `script` is required for a `scripted` model and refused for every other provider,
/// as are `endpoint` and `credential` on a `scripted` one (nothing is reached).
fn script_ref(f: &Fields<'_>, scripted: bool, d: &mut Diag) -> Option<ScriptRef> {
    if !scripted {
        if f.has("script") {
            d.push(
                f.key_at("script"),
                &f.key("script"),
                "`script` is read only for `provider: scripted`",
            );
        }
        return None;
    }
    for key in ["endpoint", "credential"] {
        if f.has(key) {
            d.push(
                f.key_at(key),
                &f.key(key),
                format!("a scripted model reaches no provider; remove `{key}`"),
            );
        }
    }
    let text = f.req_str("script", d)?;
    match script_path(&text) {
        Ok(path) => Some(ScriptRef {
            path,
            at: f.key_at("script"),
            key: f.key("script"),
        }),
        Err(reason) => {
            d.push(f.key_at("script"), &f.key("script"), reason);
            None
        }
    }
}

const TOOL_TYPES: [&str; 5] = ["api", "mcp", "agent", "builtin", "integration"];

fn tool(
    node: &Node,
    path: &str,
    integrations: &mut Vec<IntegrationRef>,
    d: &mut Diag,
) -> Vec<Declared> {
    let Some(ty) = tool_type(node, path, d) else {
        return Vec::new();
    };
    if ty == "integration" {
        integrations.extend(integration_ref(node, path, d));
        return Vec::new();
    }
    let keys: &[&str] = match ty.as_str() {
        "api" => &crate::tool_api::KEYS,
        "mcp" => &crate::tool_mcp::KEYS,
        "agent" => &["type", "agent", "description", "approval"],
        _ => &["type", "name", "approval"],
    };
    let Some(f) = Fields::open(node, path, keys, d) else {
        return Vec::new();
    };
    match ty.as_str() {
        "api" => read_api(&f, d),
        "mcp" => read_mcp(&f, d),
        "agent" => agent_tool(&f, d).into_iter().collect(),
        _ => builtin_tool(&f, d).into_iter().collect(),
    }
}

fn tool_type(node: &Node, path: &str, d: &mut Diag) -> Option<String> {
    let f = Fields::open_free(node, path, d)?;
    let ty = f.req_str("type", d)?;
    if !TOOL_TYPES.contains(&ty.as_str()) {
        d.push(
            f.key_at("type"),
            &f.key("type"),
            format!(
                "`{ty}` is not a tool type; use one of: {}",
                TOOL_TYPES.join(", ")
            ),
        );
        return None;
    }
    Some(ty)
}

/// Reads a `type: integration` entry; each of its problems is a warning and the entry is
/// skipped (DECL-46).
fn integration_ref(node: &Node, path: &str, d: &mut Diag) -> Option<IntegrationRef> {
    let mut scratch = d.scratch();
    let read = read_integration_ref(node, path, &mut scratch);
    let clean = scratch.is_clean();
    d.demote(scratch, "this integration entry is skipped");
    read.filter(|_| clean)
}

fn read_integration_ref(node: &Node, path: &str, d: &mut Diag) -> Option<IntegrationRef> {
    let keys = ["type", "integration", "actions", "approval"];
    let f = Fields::open(node, path, &keys, d)?;
    let slug = f.req_str("integration", d);
    let actions = f
        .required("actions", d)
        .and_then(|_| f.opt_str_list("actions", d));
    if actions.as_ref().is_some_and(Vec::is_empty) {
        d.push(
            f.key_at("actions"),
            &f.key("actions"),
            "`actions` needs at least one action of the integration",
        );
    }
    let approval = approval(&f, d)?;
    Some(IntegrationRef {
        slug: slug?,
        actions: actions?,
        approval,
        at: f.key_at("integration"),
        path: f.key("integration"),
        actions_path: f.key("actions"),
    })
}

/// Input of every sub-agent tool: the request for the other agent.
fn agent_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {"input": {"type": "string", "description": "What to ask the agent."}},
        "required": ["input"]
    })
}

/// Why a sub-agent cannot take `approval: caller` (docs/rules.md POLICY-39).
const SUB_AGENT_HAS_NO_CALLER: &str =
    "a sub-agent is called only inside an agent run, where no MCP client is";

fn agent_tool(f: &Fields<'_>, d: &mut Diag) -> Option<Declared> {
    let agent = f.req_str("agent", d).filter(|a| {
        check_slug(a, 64)
            .map_err(|r| d.push(f.key_at("agent"), &f.key("agent"), r))
            .is_ok()
    });
    let description = f.opt_str("description", d);
    let approval = approval(f, d)?;
    let approval = no_caller_approval(f, approval, SUB_AGENT_HAS_NO_CALLER, d)?;
    let agent = agent?;
    let description =
        description.unwrap_or_else(|| format!("Ask the `{agent}` agent and get its answer."));
    let policy = Policy {
        approval,
        ..Policy::default()
    };
    let at: Pos = f.key_at("agent");
    declare(
        &slug_prefix(&agent),
        description,
        agent_schema(),
        ToolSource::Agent(agent),
        policy,
        (at, &f.key("agent")),
        d,
    )
}

fn builtin_tool(f: &Fields<'_>, d: &mut Diag) -> Option<Declared> {
    let name = f.req_str("name", d);
    let approval = approval(f, d)?;
    let name = name?;
    let Some(builtin) = Builtin::by_name(&name) else {
        let names: Vec<&str> = Builtin::ALL.iter().map(|(n, _)| *n).collect();
        d.push(
            f.key_at("name"),
            &f.key("name"),
            format!(
                "unknown builtin `{name}`; expected one of: {}",
                names.join(", ")
            ),
        );
        return None;
    };
    if builtin == Builtin::AskHuman {
        no_caller_approval(f, approval, crate::builtin::ASK_HUMAN_ASKS_ITSELF, d)?;
    }
    let def = crate::builtin::definition(builtin);
    let policy = Policy {
        approval,
        ..Policy::default()
    };
    declare(
        builtin.name(),
        def.description,
        def.input_schema,
        ToolSource::Builtin(builtin),
        policy,
        (f.key_at("name"), &f.key("name")),
        d,
    )
}
