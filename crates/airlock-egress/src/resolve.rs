//! Name resolution: the resolver trait the guard asks, a static resolver for tests and for
//! `airlock egress check --resolve`, and the production resolver (hickory).
//!
//! Guarantees: the guard asks a resolver at most once per host per call, under its own timeout;
//! the production resolver looks up the *absolute* name (so search domains cannot turn
//! `kubernetes.default` into a cluster name), A and AAAA together, and reports every address.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::str::FromStr;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::LookupIpStrategy;

/// The future a [`Resolve`] returns.
pub type Lookup<'a> = Pin<Box<dyn Future<Output = Result<Vec<IpAddr>, ResolveError>> + Send + 'a>>;

/// Resolves a host name to every address it has (A and AAAA).
///
/// `name` is normalized (ASCII, lower-case, no trailing dot); implementations must resolve it as
/// an absolute name. The guard applies its own timeout, and judges every returned address.
pub trait Resolve: Send + Sync + fmt::Debug {
    /// Looks `name` up.
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a>;
}

/// Why a lookup gave no addresses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// NXDOMAIN, or no records of the asked types.
    #[error("no such name")]
    NotFound,
    /// Any other failure (SERVFAIL, network, configuration).
    #[error("lookup failed: {0}")]
    Failed(String),
}

/// A resolver answering from a fixed table; names not in it are [`ResolveError::NotFound`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StaticResolver {
    answers: HashMap<String, Vec<IpAddr>>,
}

impl StaticResolver {
    /// An empty table.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds (or replaces) the answer for `name` (normalized like a URL host: lower-case, one
    /// trailing dot stripped).
    #[must_use]
    pub fn with(mut self, name: &str, addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        self.answers
            .insert(normalize_key(name), addrs.into_iter().collect());
        self
    }

    /// Parses override specs of the form `HOST=ADDR[,ADDR…]` (as given to `--resolve`), one per
    /// item; later items for the same host replace earlier ones.
    ///
    /// # Errors
    /// [`OverrideError`] naming the first malformed item.
    pub fn parse_overrides<'a>(
        specs: impl IntoIterator<Item = &'a str>,
    ) -> Result<Self, OverrideError> {
        let mut out = Self::new();
        for spec in specs {
            let parsed: Self = spec.parse()?;
            out.answers.extend(parsed.answers);
        }
        Ok(out)
    }
}

impl FromStr for StaticResolver {
    type Err = OverrideError;

    /// Parses one `HOST=ADDR[,ADDR…]` item.
    fn from_str(spec: &str) -> Result<Self, Self::Err> {
        let bad = |why: &'static str| OverrideError {
            spec: spec.to_owned(),
            why,
        };
        let (host, addrs) = spec
            .split_once('=')
            .ok_or(bad("expected HOST=ADDR[,ADDR…]"))?;
        let host = host.trim();
        if host.is_empty() {
            return Err(bad("empty host"));
        }
        let addrs = addrs
            .split(',')
            .map(|a| {
                a.trim()
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse()
            })
            .collect::<Result<Vec<IpAddr>, _>>()
            .map_err(|_| bad("not an IP address"))?;
        Ok(Self::new().with(host, addrs))
    }
}

fn normalize_key(name: &str) -> String {
    let lower = name.to_ascii_lowercase();
    lower.strip_suffix('.').unwrap_or(&lower).to_owned()
}

/// A malformed `--resolve` item.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad resolve override {spec:?}: {why}")]
pub struct OverrideError {
    /// The item as given.
    pub spec: String,
    /// What is wrong with it.
    pub why: &'static str,
}

impl Resolve for StaticResolver {
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a> {
        let answer = self
            .answers
            .get(&normalize_key(name))
            .cloned()
            .ok_or(ResolveError::NotFound);
        Box::pin(std::future::ready(answer))
    }
}

/// The production resolver: the system's name servers through hickory.
#[derive(Clone)]
pub struct SystemResolver {
    inner: TokioResolver,
}

impl fmt::Debug for SystemResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SystemResolver").finish_non_exhaustive()
    }
}

impl SystemResolver {
    /// Reads the system resolver configuration (`/etc/resolv.conf` on Unix).
    ///
    /// # Errors
    /// [`ResolveError::Failed`] when the configuration cannot be read.
    pub fn from_system_conf() -> Result<Self, ResolveError> {
        let mut builder =
            TokioResolver::builder_tokio().map_err(|e| ResolveError::Failed(e.to_string()))?;
        // A and AAAA in parallel: the guard must see every address the name has.
        builder.options_mut().ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        let inner = builder
            .build()
            .map_err(|e| ResolveError::Failed(e.to_string()))?;
        Ok(Self { inner })
    }
}

impl Resolve for SystemResolver {
    fn lookup<'a>(&'a self, name: &'a str) -> Lookup<'a> {
        Box::pin(async move {
            // The trailing dot makes the name absolute: no search-domain expansion.
            let absolute = format!("{name}.");
            match self.inner.lookup_ip(absolute.as_str()).await {
                Ok(answer) => Ok(answer.iter().collect()),
                Err(e) if e.is_no_records_found() || e.is_nx_domain() => {
                    Err(ResolveError::NotFound)
                }
                Err(e) => Err(ResolveError::Failed(e.to_string())),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_overrides() {
        let r = StaticResolver::parse_overrides(["API.tenant.test.=127.0.0.1,::1", "b.com=[::1]"])
            .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let a = rt.block_on(r.lookup("api.tenant.test")).unwrap();
        assert_eq!(
            a,
            [
                "127.0.0.1".parse::<IpAddr>().unwrap(),
                "::1".parse().unwrap()
            ]
        );
        assert_eq!(rt.block_on(r.lookup("c.com")), Err(ResolveError::NotFound));
        assert!(StaticResolver::parse_overrides(["x"]).is_err());
        assert!(StaticResolver::parse_overrides(["x=1.2.3"]).is_err());
        assert!(StaticResolver::parse_overrides(["=1.2.3.4"]).is_err());
    }
}
