//! A person's browser without the browser: plain HTTP to the inbox keeping its cookies, no
//! redirects followed (tests read the 303s), forms posted URL-encoded as a browser does.

use std::collections::HashMap;

use reqwest::header::{HeaderMap, SET_COOKIE};

/// One answer of the inbox.
#[derive(Debug)]
pub(crate) struct Page {
    pub(crate) status: u16,
    pub(crate) headers: HeaderMap,
    pub(crate) body: String,
}

impl Page {
    /// The `Location` of a redirect.
    pub(crate) fn location(&self) -> &str {
        self.headers
            .get("location")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
    }

    /// Every `Set-Cookie` line.
    pub(crate) fn set_cookies(&self) -> Vec<String> {
        self.headers
            .get_all(SET_COOKIE)
            .iter()
            .map(|v| v.to_str().unwrap().to_owned())
            .collect()
    }

    /// The value of the hidden field `name` (the first one on the page).
    pub(crate) fn field(&self, name: &str) -> String {
        let marker = format!("name=\"{name}\" value=\"");
        let at = self
            .body
            .find(&marker)
            .unwrap_or_else(|| panic!("no field {name} in {}", self.body))
            + marker.len();
        self.body[at..].split('"').next().unwrap().to_owned()
    }
}

/// A cookie-keeping client of one inbox.
pub(crate) struct InboxClient {
    base: String,
    http: reqwest::Client,
    cookies: HashMap<String, String>,
    /// Extra headers sent with every request (e.g. `X-Forwarded-Proto`).
    pub(crate) extra: Vec<(&'static str, &'static str)>,
}

impl InboxClient {
    pub(crate) fn new(base: &str) -> Self {
        Self {
            base: base.to_owned(),
            http: reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .build()
                .unwrap(),
            cookies: HashMap::new(),
            extra: Vec::new(),
        }
    }

    fn cookie_header(&self) -> String {
        self.cookies
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("; ")
    }

    async fn send(&mut self, request: reqwest::RequestBuilder) -> Page {
        let mut request = request.header("cookie", self.cookie_header());
        for (name, value) in &self.extra {
            request = request.header(*name, *value);
        }
        let response = request.send().await.unwrap();
        let status = response.status().as_u16();
        let headers = response.headers().clone();
        let body = response.text().await.unwrap();
        let page = Page {
            status,
            headers,
            body,
        };
        for line in page.set_cookies() {
            let pair = line.split(';').next().unwrap();
            let (name, value) = pair.split_once('=').unwrap();
            if value.is_empty() || line.contains("Max-Age=0") {
                self.cookies.remove(name);
            } else {
                self.cookies.insert(name.to_owned(), value.to_owned());
            }
        }
        page
    }

    pub(crate) async fn get(&mut self, path: &str) -> Page {
        let request = self.http.get(format!("{}{path}", self.base));
        self.send(request).await
    }

    /// A form POST of `fields` to `path`.
    pub(crate) async fn post(&mut self, path: &str, fields: &[(&str, &str)]) -> Page {
        let body = url::form_urlencoded::Serializer::new(String::new())
            .extend_pairs(fields)
            .finish();
        let request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body);
        self.send(request).await
    }

    /// Signs in with `token` through the form; the answer to the POST.
    pub(crate) async fn sign_in(&mut self, token: &str) -> Page {
        let form = self.get("/inbox/sign-in").await;
        assert_eq!(form.status, 200, "{}", form.body);
        let nonce = form.field("form");
        self.post("/inbox/sign-in", &[("token", token), ("form", &nonce)])
            .await
    }

    /// Signs in, asserting success.
    pub(crate) async fn signed_in(base: &str, token: &str) -> Self {
        let mut client = Self::new(base);
        let page = client.sign_in(token).await;
        assert_eq!((page.status, page.location()), (303, "/inbox"), "{page:?}");
        client
    }

    /// Whether a session cookie is held.
    pub(crate) fn has_session(&self) -> bool {
        self.cookies.contains_key("airlock_inbox")
    }

    /// The session cookie's value, if one is held.
    pub(crate) fn session(&self) -> Option<&str> {
        self.cookies.get("airlock_inbox").map(String::as_str)
    }

    /// Drops every cookie but the session's replaced by `value` (a forged or stale one).
    pub(crate) fn set_session(&mut self, value: &str) {
        self.cookies.insert("airlock_inbox".into(), value.into());
    }

    /// The page at `path` and the CSRF token on it.
    pub(crate) async fn csrf(&mut self, path: &str) -> String {
        let page = self.get(path).await;
        assert_eq!(page.status, 200, "{}", page.body);
        page.field("csrf")
    }
}
