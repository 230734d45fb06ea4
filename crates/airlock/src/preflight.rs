//! The one gate a deployment passes before it is served (docs/rules.md OPS-70): `airlock check`
//! and `serve` both load through [`load`], so what one refuses the other refuses, with the same
//! problems in the same words. Beyond the declarations' own rules it finds, offline, what boot
//! or a call would find out (DECL-38): every credential path a token, connection or connection
//! file names resolves in the deployment's credentials, and every URL passes the egress guard's
//! rules that need no DNS, with the deployment's `[egress]` allowances. A model's key that does
//! not resolve is a warning (OPS-72): only a run of its agent needs it. Each problem is placed
//! at file:line:key like a load error. No secret value is read out or printed, and nothing is
//! resolved or sent.

use std::path::Path;

use airlock_spec::{Credentials, Deployment, Reach, Reference, Referenced, SpecErrors, SpecIssue};

/// Loads `dir` and refuses it as a load error when boot or a call would fail on it; a model key
/// that does not resolve joins the deployment's warnings. The credentials are read from the
/// process's environment and the deployment's files, as boot reads them.
///
/// # Errors
/// Every problem of the declarations, or else every offline problem, each at file:line:key.
pub fn load(dir: &Path) -> Result<Deployment, SpecErrors> {
    let mut deployment = Deployment::load(dir)?;
    let (problems, warnings) = problems(&deployment, std::env::vars());
    if !problems.is_empty() {
        return Err(SpecErrors(problems));
    }
    deployment.warnings.extend(warnings);
    deployment.warnings.sort_by(by_place);
    Ok(deployment)
}

fn by_place(a: &SpecIssue, b: &SpecIssue) -> std::cmp::Ordering {
    (&a.file, a.line, a.column).cmp(&(&b.file, b.line, b.column))
}

/// Every offline problem of a deployment that loaded, and every warning, each sorted by place.
fn problems(
    deployment: &Deployment,
    env: impl IntoIterator<Item = (String, String)>,
) -> (Vec<SpecIssue>, Vec<SpecIssue>) {
    let mut out = Vec::new();
    let mut warnings = Vec::new();
    let egress = &deployment.config.egress;
    let operator = airlock_runtime::egress_policy(egress);
    let tenant = operator.public_only();
    let settings = &deployment.config.credentials;
    let credentials = Credentials::load(&deployment.root, settings, env)
        // Said once: every credential would otherwise repeat it.
        .map_err(|e| out.push(unreadable(settings_file(deployment), &e)))
        .ok();
    for reference in &deployment.references {
        let reason = match &reference.target {
            Referenced::Credential(path) => {
                credentials.as_ref().and_then(|c| resolves(c, path).err())
            }
            Referenced::ModelCredential(path) => {
                let missing = credentials.as_ref().and_then(|c| resolves(c, path).err());
                let why = "a run of this agent fails until it is set";
                warnings.extend(missing.map(|r| issue(reference, format!("{r}; {why}"))));
                None
            }
            Referenced::Url(url, reach) => {
                let vouched = match reach {
                    Reach::Operator => true,
                    Reach::Tenant => false,
                    Reach::Integration(slug) => egress.allow_integrations.contains(slug),
                };
                let policy = if vouched { &operator } else { &tenant };
                airlock_egress::check_offline(policy, url)
                    .err()
                    .map(|e| blocked(url, &e, vouched))
            }
        };
        out.extend(reason.map(|r| issue(reference, r)));
    }
    out.sort_by(by_place);
    warnings.sort_by(by_place);
    (out, warnings)
}

/// A path resolves as one value, or as the `username`/`password` mapping basic auth reads.
fn resolves(credentials: &Credentials, path: &airlock_spec::CredentialPath) -> Result<(), String> {
    match credentials.get(path) {
        Ok(_) => Ok(()),
        Err(_) if credentials.basic(path).is_ok() => Ok(()),
        Err(e) => Err(e.to_string()),
    }
}

/// Why `url` is refused, and what the operator can do: allow the host, or — for a tenant's
/// destination, which `[egress] allow` does not cover by itself — vouch for it (EGRESS-38).
fn blocked(url: &str, error: &airlock_egress::EgressError, vouched: bool) -> String {
    let remedy = if vouched {
        "if this host is yours, allow it in airlock.toml `[egress] allow`"
    } else {
        "a tenant's destination reaches public addresses only; if this host is yours, allow it in airlock.toml `[egress] allow` and vouch for it (`use_egress_allow = true` on its connection, or the integration in `[egress] allow_integrations`)"
    };
    format!(
        "the egress guard refuses `{url}` ({}): {}; {remedy}",
        error.kind(),
        error.detail()
    )
}

/// The credentials file boot could not read: the encrypted one when it exists, else the plain.
fn settings_file(deployment: &Deployment) -> &Path {
    let settings = &deployment.config.credentials;
    if deployment.root.join(&settings.encrypted).exists() {
        &settings.encrypted
    } else {
        settings.file.as_deref().unwrap_or(&settings.encrypted)
    }
}

fn unreadable(file: &Path, error: &airlock_spec::CredentialError) -> SpecIssue {
    SpecIssue {
        file: file.to_path_buf(),
        line: 1,
        column: 1,
        key: String::new(),
        reason: format!(
            "the credentials cannot be read, so no credential path was checked: {error}"
        ),
    }
}

fn issue(reference: &Reference, reason: String) -> SpecIssue {
    SpecIssue {
        file: reference.file.clone(),
        line: reference.line,
        column: reference.column,
        key: reference.key.clone(),
        reason,
    }
}
