//! `apis/<slug>.yml`: a tenant HTTP API declared for the whole deployment (docs/rules.md
//! DECL-40 to DECL-42). The file is exactly the `type: api` entry of an agent manifest, read by
//! the same reader under the same rules (`type` may be left out); its operations join the
//! gateway scope (`POST /mcp`) beside builtins and connection tools.

use crate::declared::Declared;
use crate::diag::Diag;
use crate::fields::Fields;
use crate::tool_api::{KEYS, read_api};
use crate::tree::Node;

/// Reads one `apis/*.yml` file into one tool per operation.
pub(crate) fn read_api_file(node: &Node, stem: &str, d: &mut Diag) -> Vec<Declared> {
    let Some(f) = Fields::open(node, "", &KEYS, d) else {
        return Vec::new();
    };
    if let Some(ty) = f.opt_str("type", d).filter(|t| t != "api") {
        d.push(
            f.key_at("type"),
            "type",
            format!("an apis/ file declares a `type: api` tool; remove `type: {ty}`"),
        );
    }
    // One file per API, found by its name, as connection files are.
    if let Some(name) = f.opt_str("name", d).filter(|n| n != stem) {
        d.push(
            f.key_at("name"),
            "name",
            format!("`{name}` differs from the file name: name the file apis/{name}.yml, or write `name: {stem}`"),
        );
        return Vec::new();
    }
    read_api(&f, d)
}
