//! URL rules checked at load time (no DNS): scheme, and credentials only over https except
//! to a loopback development server (docs/rules.md DECL-12).

/// Hosts exempt from the https rule: local development servers.
const LOOPBACK_HOSTS: [&str; 3] = ["localhost", "127.0.0.1", "[::1]"];

/// Checks a URL a credential may be sent to. `with_credential` says whether auth is configured.
pub(crate) fn check_credential_url(url: &str, with_credential: bool) -> Result<(), String> {
    let parsed = match url::Url::parse(url) {
        Ok(parsed)
            if matches!(parsed.scheme(), "http" | "https") && parsed.host_str().is_some() =>
        {
            parsed
        }
        Ok(_) | Err(_) if with_credential => {
            return Err(format!(
                "`{url}` is not an http(s) URL, and a credential is configured for it: fix the URL"
            ));
        }
        _ => {
            return Err(format!(
                "`{url}` is not an http(s) URL such as `https://mcp.example.com/mcp`"
            ));
        }
    };
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(
            "a URL cannot carry a user name or password; put the secret in a credential".into(),
        );
    }
    let loopback = parsed
        .host_str()
        .is_some_and(|h| LOOPBACK_HOSTS.contains(&h));
    if with_credential && parsed.scheme() == "http" && !loopback {
        return Err(format!(
            "credentials require https: `{url}` is plaintext http to a non-loopback host (only localhost, 127.0.0.1 and ::1 are exempt)"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn https_rule() {
        assert!(check_credential_url("https://mcp.example.com/mcp", true).is_ok());
        assert!(check_credential_url("http://mcp.example.com/mcp", false).is_ok());
        assert!(
            check_credential_url("http://mcp.example.com/mcp", true)
                .unwrap_err()
                .starts_with("credentials require https")
        );
        assert!(check_credential_url("http://localhost:3000/mcp", true).is_ok());
        assert!(check_credential_url("http://127.0.0.1:3000/mcp", true).is_ok());
        assert!(check_credential_url("http://[::1]:3000/mcp", true).is_ok());
        assert!(check_credential_url("http://127.0.0.2/mcp", true).is_err());
        assert!(
            check_credential_url("not a url", true)
                .unwrap_err()
                .contains("a credential is configured")
        );
        assert!(check_credential_url("ftp://x.example.com", false).is_err());
        assert!(check_credential_url("https://u:p@x.example.com", false).is_err());
    }
}
