//! `[mcp.oauth]` (docs/rules.md DECL-73..DECL-76): read with its defaults, and every mistake
//! reported at its file, line and key.

use std::time::Duration;

use airlock_spec::{DEFAULT_OAUTH_ALGORITHMS, ScopeId};

use crate::support::Dir;

#[test]
fn oauth_is_read_with_its_defaults() {
    let toml = "[mcp.oauth]\nissuer = \"https://auth.example.com/\"\nresource = \"https://airlock.example.com\"\n[mcp.oauth.scopes]\n\"mcp:tools\" = [\"gateway\"]\n\"mcp:ops\" = [\"gateway\", \"agent:ops\"]\n";
    let d = Dir::new().file("airlock.toml", toml).load().unwrap();
    let oauth = d.config.mcp.oauth.unwrap();
    assert_eq!(oauth.issuer, "https://auth.example.com/");
    assert_eq!(oauth.jwks_uri, None);
    assert_eq!(oauth.principal_claim, "sub");
    assert_eq!(oauth.groups_claim, "groups");
    assert_eq!(oauth.algorithms, DEFAULT_OAUTH_ALGORITHMS.map(String::from));
    assert_eq!(oauth.leeway, Duration::from_secs(30));
    assert_eq!(
        oauth.scopes,
        [
            ("mcp:tools".to_owned(), vec![ScopeId::Gateway]),
            (
                "mcp:ops".to_owned(),
                vec![ScopeId::Gateway, ScopeId::Agent("ops".into())]
            ),
        ]
    );
    assert!(
        Dir::new()
            .file("airlock.toml", "")
            .load()
            .unwrap()
            .config
            .mcp
            .oauth
            .is_none()
    );
}

/// DECL-74: without `resource`, `[server] public_url` is the resource, and must be an origin.
#[test]
fn the_resource_defaults_to_the_public_url_and_is_an_origin() {
    let base = "[mcp.oauth]\nissuer = \"https://auth.example.com\"\n[mcp.oauth.scopes]\nx = [\"gateway\"]\n";
    let with_url = format!("{base}[server]\npublic_url = \"https://airlock.example.com/\"\n");
    let d = Dir::new().file("airlock.toml", &with_url).load().unwrap();
    assert_eq!(
        d.config.mcp.oauth.unwrap().resource.as_deref(),
        Some("https://airlock.example.com")
    );
    let errors = Dir::new().file("airlock.toml", base).errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(
        errors[0].contains("mcp.oauth.resource: set `resource`"),
        "{errors:#?}"
    );
    let with_path = format!("{base}[server]\npublic_url = \"https://example.com/airlock\"\n");
    let errors = Dir::new().file("airlock.toml", &with_path).errors();
    assert!(
        errors[0].contains("server.public_url: `https://example.com/airlock` is not an origin"),
        "{errors:#?}"
    );
}

/// DECL-73, DECL-75, DECL-76: bad URLs, `none`/HMAC algorithms, a long leeway, bad scope maps
/// and unknown keys, all reported at once.
#[test]
fn every_oauth_mistake_is_reported_at_its_key() {
    let toml = "[mcp.oauth]\nissuer = \"auth.example.com\"\njwks_uri = \"ftp://x/keys\"\nresource = \"https://a.example.com/mcp\"\nalgorithms = [\"RS256\", \"HS256\", \"none\"]\nleeway = \"10m\"\nprincipal_claim = \" \"\nsurprise = 1\n[mcp.oauth.scopes]\n\"a b\" = [\"gateway\"]\nc = []\nd = [\"everything\"]\n";
    let errors = Dir::new().file("airlock.toml", toml).errors();
    let expect = [
        "airlock.toml:2:1: mcp.oauth.issuer: `auth.example.com` is not an http(s) URL",
        "airlock.toml:3:1: mcp.oauth.jwks_uri: `ftp://x/keys` is not an http(s) URL",
        "airlock.toml:4:1: mcp.oauth.resource: `https://a.example.com/mcp` is not an origin",
        "airlock.toml:5:24: mcp.oauth.algorithms: `HS256` is not accepted (never `none` nor an HMAC",
        "airlock.toml:5:33: mcp.oauth.algorithms: `none` is not accepted",
        "airlock.toml:6:1: mcp.oauth.leeway: at most 5m",
        "airlock.toml:7:1: mcp.oauth.principal_claim: must name a claim",
        "airlock.toml:8:1: mcp.oauth.surprise: unknown key `surprise`",
        "airlock.toml:10:1: mcp.oauth.scopes.a b: a token scope is printable ASCII",
        "airlock.toml:11:5: mcp.oauth.scopes.c: expected a non-empty list",
        "airlock.toml:12:5: mcp.oauth.scopes.d: unknown scope `everything`",
    ];
    for want in expect {
        assert!(
            errors.iter().any(|e| e.starts_with(want)),
            "missing {want}: {errors:#?}"
        );
    }
    assert_eq!(errors.len(), expect.len(), "{errors:#?}");
    let no_scopes =
        "[mcp.oauth]\nissuer = \"https://a.example.com\"\nresource = \"https://b.example.com\"\n";
    let errors = Dir::new().file("airlock.toml", no_scopes).errors();
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert!(errors[0].contains("mcp.oauth.scopes"), "{errors:#?}");
    let admin = "[admin.oauth]\nissuer = \"https://a.example.com\"\n";
    let errors = Dir::new().file("airlock.toml", admin).errors();
    assert!(
        errors[0].contains("admin.oauth: unknown key"),
        "{errors:#?}"
    );
}
