//! A signed-in inbox user without a browser: an HTTP client keeping the session cookie the
//! inbox's sign-in form set. Shared by the `inbox` and `scale` benches (`#[path]`).

/// A person signed in to the inbox with an admin token.
pub(crate) struct Person {
    pub(crate) http: reqwest::Client,
    pub(crate) cookie: String,
}

/// The value of hidden field `name` in `html`.
pub(crate) fn field(html: &str, name: &str) -> String {
    let marker = format!("name=\"{name}\" value=\"");
    let at = html.find(&marker).unwrap() + marker.len();
    html[at..].split('"').next().unwrap().to_owned()
}

/// The `name=value` of the `Set-Cookie` named `name`.
fn set_cookie(response: &reqwest::Response, name: &str) -> String {
    response
        .headers()
        .get_all("set-cookie")
        .iter()
        .map(|v| v.to_str().unwrap())
        .find(|c| c.starts_with(&format!("{name}=")))
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_owned()
}

impl Person {
    /// Signs in at `base`'s `/inbox/sign-in` form with `admin_token`, as a browser does.
    pub(crate) async fn sign_in(base: &str, admin_token: &str) -> Self {
        let http = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .unwrap();
        let form = http
            .get(format!("{base}/inbox/sign-in"))
            .send()
            .await
            .unwrap();
        let form_cookie = set_cookie(&form, "airlock_inbox_form");
        let nonce = field(&form.text().await.unwrap(), "form");
        let signed = http
            .post(format!("{base}/inbox/sign-in"))
            .header("cookie", form_cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("token={admin_token}&form={nonce}"))
            .send()
            .await
            .unwrap();
        assert_eq!(signed.status().as_u16(), 303);
        let cookie = set_cookie(&signed, "airlock_inbox");
        Self { http, cookie }
    }

    /// The page at `path`, which must answer 200.
    pub(crate) async fn get(&self, base: &str, path: &str) -> String {
        let page = self
            .http
            .get(format!("{base}{path}"))
            .header("cookie", &self.cookie)
            .send()
            .await
            .unwrap();
        assert_eq!(page.status().as_u16(), 200);
        page.text().await.unwrap()
    }
}
