//! Who is acting from the command line: `--as NAME`, else the OS user (`$USER`, `$LOGNAME`).
//!
//! Guarantees: a command that records a name (a decision, a call's principal) never records an
//! empty or placeholder one; with no `--as` and no OS user it fails, saying how to name one. A
//! name is one word, as configured principals are: the names airlock records for itself
//! (`access policy`, `airlock freeze`) have a space, so no person can be recorded as them.
//! `--as` exists only on commands that record something.

/// The `--as` option of commands that record who acted.
#[derive(Debug, clap::Args)]
pub(crate) struct AsArg {
    /// Who is acting [default: the OS user, from $USER or $LOGNAME].
    #[arg(long = "as", value_name = "NAME")]
    name: Option<String>,
}

impl AsArg {
    /// `--as`, else the OS user; `role` says who is asked for (`deciding`, `calling`).
    pub(crate) fn resolve(&self, role: &str) -> anyhow::Result<String> {
        let named = self.name.as_ref().filter(|n| !n.trim().is_empty()).cloned();
        if let Some(name) = named
            .as_ref()
            .filter(|n| n.chars().any(char::is_whitespace))
        {
            anyhow::bail!("--as `{name}`: a name is one word, without spaces");
        }
        named
            .or_else(|| {
                ["USER", "LOGNAME"]
                    .iter()
                    .find_map(|var| std::env::var(var).ok().filter(|v| !v.trim().is_empty()))
            })
            .ok_or_else(|| {
                anyhow::anyhow!("who is {role}? pass --as NAME (neither $USER nor $LOGNAME is set)")
            })
    }
}
