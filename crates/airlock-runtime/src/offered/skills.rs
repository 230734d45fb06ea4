//! An upstream's skills (the MCP Skills extension, SEP-2640) as a scope serves them, and the
//! check of each file read against the digest its skill entry lists (docs/rules.md MCP-88 …
//! MCP-91).
//!
//! Guarantees: a skill entry is served with its `uri` and every `resources[].uri` mapped as
//! resource URIs are ([`super::uri`]) and its `frontmatter` verbatim (the extension requires it
//! to equal the `SKILL.md` it describes); its access name is the server's prefix and the
//! frontmatter `name`. A file a served entry lists is readable even when the server's
//! `resources/list` does not list it, and what the server answers for it is handed on only when
//! its bytes (a text's UTF-8, a blob's decoded base64) have exactly the entry's size and SHA-256
//! digest: a server that changes a file without changing its entry is refused, never relayed.
//! An entry whose `resources` is not a list (`"dynamic"`) lists no file, so none of it is read
//! through a skill; it is served, and pinned, as the server describes it. The files of a skill
//! withheld from its pin — as listed now and as pinned — are not read at all, even when the
//! server's `resources/list` names them (OPS-79).

use base64::Engine as _;
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Source, field, uri};
use crate::error::ToolError;
use crate::pins::{Difference, Pending};
use airlock_ledger::ToolErrorKind;
use airlock_mcp::Entry;

impl Source {
    /// `skill`'s access name: the server's prefix and the frontmatter's `name`.
    pub(super) fn skill_name(&self, skill: &Entry) -> String {
        let name = skill.get("frontmatter").and_then(|f| f.get("name"));
        let name = name.and_then(Value::as_str).unwrap_or_default();
        format!("{}{name}", self.prefix)
    }

    /// `skill` as served: its URI and its files' URIs mapped.
    pub(super) fn serve_skill(&self, skill: &Entry) -> Entry {
        let mut served = skill.clone();
        served.insert(
            "uri".into(),
            Value::String(self.served_uri(field(skill, "uri"))),
        );
        if let Some(Value::Array(files)) = served.get_mut("resources") {
            for file in files.iter_mut().filter_map(Value::as_object_mut) {
                let mapped = uri::served(&self.namespace, field(file, "uri"));
                file.insert("uri".into(), Value::String(mapped));
            }
        }
        served
    }

    /// The file entry (`{uri, digest, size}`) of the upstream URI `upstream` in a skill whose
    /// access name `visible` accepts.
    pub(super) fn skill_file(
        &self,
        upstream: &str,
        visible: &dyn Fn(&str) -> bool,
    ) -> Option<&Entry> {
        self.catalog.skills.iter().find_map(|skill| {
            let files = skill.get("resources").and_then(Value::as_array)?;
            let file = files
                .iter()
                .filter_map(Value::as_object)
                .find(|f| field(f, "uri") == upstream)?;
            visible(&self.skill_name(skill)).then_some(file)
        })
    }

    /// Withholds the files of the skills `pending` names, as listed now and as pinned.
    pub(super) fn withhold(&mut self, pending: &[Pending]) {
        for p in pending {
            let pinned = match &p.difference {
                Difference::Changed { pinned } | Difference::Removed { pinned } => Some(pinned),
                Difference::New | Difference::Renamed { .. } => None,
            };
            for entry in std::iter::once(&p.definition).chain(pinned) {
                self.withheld.insert(p.tool.clone());
                let files = entry.get("resources").and_then(Value::as_array);
                let uris = files
                    .into_iter()
                    .flatten()
                    .filter_map(|f| f["uri"].as_str());
                self.withheld.extend(uris.map(str::to_owned));
            }
        }
    }

    /// `read` (a `resources/read` result of the upstream URI `upstream`) when it is not a skill
    /// file's, or when its content for that URI has the size and digest the skill's entry lists.
    ///
    /// # Errors
    /// A [`ToolErrorKind::BadResponse`] naming the URI when the bytes differ, or are missing.
    pub(crate) fn verified(&self, upstream: &str, read: &Entry) -> Result<(), ToolError> {
        let Some(file) = self.skill_file(upstream, &|_| true) else {
            return Ok(());
        };
        let contents = read.get("contents").and_then(Value::as_array);
        let content = contents
            .into_iter()
            .flatten()
            .find(|c| c["uri"].as_str() == Some(upstream));
        let bytes = content.and_then(raw_bytes);
        let digest = bytes.as_deref().map(digest);
        let size = bytes.as_ref().map(|b| b.len() as u64);
        if digest.as_deref() == Some(field(file, "digest"))
            && size == file.get("size").and_then(Value::as_u64)
        {
            return Ok(());
        }
        Err(ToolError::new(
            ToolErrorKind::BadResponse,
            format!(
                "the server's content of the skill file `{}` does not match the digest its skill lists; it is not served",
                self.served_uri(upstream)
            ),
        ))
    }
}

/// A content's raw bytes: a text's UTF-8, a blob's decoded base64.
fn raw_bytes(content: &Value) -> Option<Vec<u8>> {
    if let Some(text) = content["text"].as_str() {
        return Some(text.as_bytes().to_vec());
    }
    let blob = content["blob"].as_str()?;
    base64::engine::general_purpose::STANDARD.decode(blob).ok()
}

/// `sha256:` and the lowercase hex of `bytes`' SHA-256, as SEP-2640 writes digests.
fn digest(bytes: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(bytes)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_are_written_as_the_extension_writes_them() {
        assert_eq!(
            digest(b"abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        let blob = serde_json::json!({"blob": "YWJj"});
        assert_eq!(raw_bytes(&blob).as_deref(), Some(&b"abc"[..]));
    }
}
