//! A deployment directory written in a temp dir, file by file.

use std::path::{Path, PathBuf};

use airlock_spec::{Deployment, SpecErrors};

pub(crate) struct Dir {
    dir: tempfile::TempDir,
}

pub(crate) const TOML: &str = "[connections.erp_main]\nbase_url = \"https://erp.example.com\"\ncredential = \"erp.token\"\n\n[connections.soporte_mcp]\nbase_url = \"https://soporte.example.com\"\ncredential = \"soporte.token\"\n";

impl Dir {
    pub(crate) fn new() -> Self {
        let dir = Self {
            dir: tempfile::tempdir().unwrap(),
        };
        dir.file("airlock.toml", TOML)
    }

    pub(crate) fn file(self, rel: &str, text: &str) -> Self {
        let path = self.dir.path().join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        self
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn load(&self) -> Result<Deployment, SpecErrors> {
        Deployment::load(self.dir.path())
    }

    /// The reasons of every problem, as `file:line: key: reason` lines.
    pub(crate) fn errors(&self) -> Vec<String> {
        match self.load() {
            Ok(_) => Vec::new(),
            Err(e) => e.0.iter().map(ToString::to_string).collect(),
        }
    }
}

/// An agent manifest named `name` whose `spec.tools` is `tools` (indented list items).
pub(crate) fn agent(name: &str, tools: &str) -> String {
    format!(
        "apiVersion: airlock/v1\nkind: Agent\nmetadata:\n  name: {name}\nspec:\n  model: {{ provider: openai, model: gpt-4o-mini }}\n  prompts: {{ system: test }}\n  tools:\n{tools}"
    )
}

pub(crate) fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}
