//! How an upstream's resource URIs are served, and which served URIs a template covers.
//!
//! Guarantees: the mapping is reversible and one-to-one within a scope. A URI whose scheme is
//! the server's namespace is served unchanged (`test://x` from the server `test`); any other
//! is served with the namespace and a `+` before it (`crm+file:///a` from the server `crm`).
//! Namespaces never hold a `+`, so the first `+` of a served scheme ends the namespace, and
//! two servers never serve the same URI. Template matching is RFC 6570 level 1 to 4 read
//! loosely: a simple `{var}` stands for a run of characters without `/`, `?` or `#`; an
//! operator expression (`{+path}`, `{/seg}`, `{?q}`, …) for any run.

/// `upstream` as served by the server of `namespace`.
pub(crate) fn served(namespace: &str, upstream: &str) -> String {
    if scheme(upstream) == Some(namespace) {
        upstream.to_owned()
    } else {
        format!("{namespace}+{upstream}")
    }
}

/// The upstream URI behind `served`, if the server of `namespace` serves it.
pub(crate) fn upstream<'a>(namespace: &str, served: &'a str) -> Option<&'a str> {
    if let Some(rest) = served
        .strip_prefix(namespace)
        .and_then(|r| r.strip_prefix('+'))
    {
        return Some(rest);
    }
    (scheme(served) == Some(namespace)).then_some(served)
}

fn scheme(uri: &str) -> Option<&str> {
    uri.split_once(':').map(|(scheme, _)| scheme)
}

/// Whether `uri` is one the RFC 6570 `template` expands to.
pub(crate) fn matches(template: &str, uri: &str) -> bool {
    let parts = split(template);
    let Some(parts) = parts else {
        return template == uri;
    };
    matches_from(&parts, uri)
}

enum Part<'a> {
    Literal(&'a str),
    /// A simple expression: no `/`, `?` or `#`.
    Simple,
    /// An operator expression: anything.
    Any,
}

fn split(template: &str) -> Option<Vec<Part<'_>>> {
    let mut parts = Vec::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        let close = rest[open..].find('}')? + open;
        if open > 0 {
            parts.push(Part::Literal(&rest[..open]));
        }
        let expression = &rest[open + 1..close];
        let operator = expression.starts_with(['+', '#', '.', '/', ';', '?', '&']);
        parts.push(if operator { Part::Any } else { Part::Simple });
        rest = &rest[close + 1..];
    }
    if !rest.is_empty() {
        parts.push(Part::Literal(rest));
    }
    Some(parts)
}

/// Backtracking over the expressions; templates are short, and each tries only the ends its
/// next literal allows.
fn matches_from(parts: &[Part<'_>], uri: &str) -> bool {
    match parts.split_first() {
        None => uri.is_empty(),
        Some((Part::Literal(text), rest)) => uri
            .strip_prefix(text)
            .is_some_and(|tail| matches_from(rest, tail)),
        Some((expression, rest)) => {
            let stop = |c: char| matches!(expression, Part::Simple) && matches!(c, '/' | '?' | '#');
            let limit = uri.find(stop).unwrap_or(uri.len());
            (1..=limit)
                .rev()
                .filter(|end| uri.is_char_boundary(*end))
                .any(|end| matches_from(rest, &uri[end..]))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uri_in_the_namespace_scheme_is_served_unchanged_and_others_get_the_namespace() {
        assert_eq!(served("test", "test://static-text"), "test://static-text");
        assert_eq!(served("crm", "file:///a.txt"), "crm+file:///a.txt");
        assert_eq!(served("crm", "crm+x:y"), "crm+crm+x:y");
        for (ns, uri) in [
            ("test", "test://static-text"),
            ("crm", "file:///a.txt"),
            ("crm", "crm+x:y"),
            ("crm", "crm:plain"),
        ] {
            assert_eq!(upstream(ns, &served(ns, uri)), Some(uri), "{ns} {uri}");
        }
        assert_eq!(upstream("crm", "test://static-text"), None);
        assert_eq!(upstream("crm", "crmx:y"), None);
    }

    #[test]
    fn templates_match_their_expansions_only() {
        let t = "test://template/{id}/data";
        assert!(matches(t, "test://template/123/data"));
        assert!(!matches(t, "test://template/1/2/data"));
        assert!(!matches(t, "test://template//data"));
        assert!(!matches(t, "test://template/123/other"));
        assert!(matches("file:///{+path}", "file:///a/b/c.txt"));
        assert!(matches("x://fixed", "x://fixed"));
        assert!(!matches("x://fixed", "x://fixed/more"));
    }
}
