//! A real Chromium, headless, driven over W3C WebDriver by `chromedriver` on an OS-assigned
//! port, with a fresh profile directory. The handful of WebDriver commands the inbox tests use
//! are plain JSON over HTTP, sent with the reqwest the tests already have.
//!
//! `.ci/run` installs `chromium` and `chromium-driver`; both are looked up on `PATH`. A missing
//! one fails the test under `CI`, and elsewhere skips it saying how to install them
//! (docs/rules.md INBOX-9).

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine as _;
use serde_json::{Value, json};

/// The WebDriver id key of an element reference.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// The executable `name` on `PATH`, if any.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// One browser session; chromedriver and Chromium end when it is dropped.
pub(crate) struct Browser {
    driver: Child,
    http: reqwest::Client,
    /// `http://127.0.0.1:PORT/session/ID`.
    session: String,
    chromium_pid: Option<u32>,
    _profile: tempfile::TempDir,
}

/// chromedriver and Chromium, when both are installed; otherwise the test skips (fails under
/// `CI`, as [`crate::support::installed`]).
fn installed() -> Option<(PathBuf, PathBuf)> {
    let found = on_path("chromedriver").zip(on_path("chromium"));
    if found.is_none() {
        airlock_testkit::skip(airlock_testkit::Needs::Chromium);
    }
    found
}

/// Starts chromedriver on port 0 and reads the port it chose from its banner.
fn start_driver(chromedriver: &Path) -> (Child, u16) {
    let mut driver = Command::new(chromedriver)
        .arg("--port=0")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(driver.stdout.take().unwrap()).lines();
    let port = lines
        .by_ref()
        .take(20)
        .map_while(Result::ok)
        .find_map(|line| {
            line.strip_prefix("ChromeDriver was started successfully on port ")
                .map(|rest| rest.trim_end_matches('.').parse::<u16>().unwrap())
        })
        .expect("chromedriver did not say which port it listens on");
    std::thread::spawn(move || lines.for_each(drop));
    (driver, port)
}

impl Browser {
    /// A fresh headless Chromium, `width`×`height`; `None` when it is not installed (outside
    /// `CI`, which fails instead).
    pub(crate) async fn start(width: u32, height: u32) -> Option<Self> {
        let (chromedriver, chromium) = installed()?;
        let (driver, port) = start_driver(&chromedriver);
        let profile = tempfile::tempdir().unwrap();
        let args = [
            "--headless".to_owned(),
            "--no-sandbox".to_owned(),
            "--disable-gpu".to_owned(),
            "--disable-quic".to_owned(),
            "--no-first-run".to_owned(),
            "--disable-background-networking".to_owned(),
            "--disable-component-update".to_owned(),
            "--disable-sync".to_owned(),
            "--hide-scrollbars".to_owned(),
            format!("--window-size={width},{height}"),
            format!("--user-data-dir={}", profile.path().display()),
        ];
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {"binary": chromium, "args": args}
        }}});
        let http = reqwest::Client::new();
        let base = format!("http://127.0.0.1:{port}");
        let reply: Value = http
            .post(format!("{base}/session"))
            .json(&capabilities)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let value = &reply["value"];
        let id = value["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no browser session: {reply}"));
        let chromium_pid = value["capabilities"]["goog:processID"]
            .as_u64()
            .and_then(|pid| u32::try_from(pid).ok());
        Some(Self {
            driver,
            http,
            session: format!("{base}/session/{id}"),
            chromium_pid,
            _profile: profile,
        })
    }

    /// One WebDriver command; its `value` (panics on a WebDriver error).
    async fn command(&self, method: reqwest::Method, path: &str, body: Option<Value>) -> Value {
        let mut request = self.http.request(method, format!("{}{path}", self.session));
        if let Some(body) = body {
            request = request.json(&body);
        }
        let reply: Value = request.send().await.unwrap().json().await.unwrap();
        let value = reply["value"].clone();
        assert!(value.get("error").is_none(), "WebDriver {path}: {value}");
        value
    }

    /// Opens `url` and waits for it to load.
    pub(crate) async fn goto(&self, url: &str) {
        self.command(reqwest::Method::POST, "/url", Some(json!({"url": url})))
            .await;
    }

    /// The current URL.
    pub(crate) async fn url(&self) -> String {
        let url = self.command(reqwest::Method::GET, "/url", None).await;
        url.as_str().unwrap().to_owned()
    }

    /// The page's HTML as the browser holds it.
    pub(crate) async fn source(&self) -> String {
        let source = self.command(reqwest::Method::GET, "/source", None).await;
        source.as_str().unwrap().to_owned()
    }

    /// The element matching `css` (the first).
    async fn find(&self, css: &str) -> String {
        let body = json!({"using": "css selector", "value": css});
        let found = self
            .command(reqwest::Method::POST, "/element", Some(body))
            .await;
        found[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {found}"))
            .to_owned()
    }

    /// Clicks the element matching `css` (a form's button: the browser submits and loads the
    /// answer, following its redirect).
    pub(crate) async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{element}/click"),
            Some(json!({})),
        )
        .await;
    }

    /// Types `text` into the field matching `css`.
    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.command(
            reqwest::Method::POST,
            &format!("/element/{element}/value"),
            Some(json!({"text": text})),
        )
        .await;
    }

    /// The visible text of the element matching `css`.
    pub(crate) async fn text(&self, css: &str) -> String {
        let element = self.find(css).await;
        let text = self
            .command(
                reqwest::Method::GET,
                &format!("/element/{element}/text"),
                None,
            )
            .await;
        text.as_str().unwrap().to_owned()
    }

    /// Runs `script` in the page (WebDriver's own channel, not the page's: the CSP that keeps
    /// the page free of scripts does not apply to it); its return value.
    pub(crate) async fn execute(&self, script: &str) -> Value {
        let body = json!({"script": script, "args": []});
        self.command(reqwest::Method::POST, "/execute/sync", Some(body))
            .await
    }

    /// Waits (bounded) until the page's text holds `needle`, reloading as the page itself does.
    pub(crate) async fn wait_for_text(&self, needle: &str, within: Duration) -> String {
        let deadline = Instant::now() + within;
        loop {
            // One command, so a page reloading itself cannot leave a stale element behind.
            let text = self.execute("return document.body.innerText;").await;
            let text = text.as_str().unwrap_or_default().to_owned();
            if text.contains(needle) {
                return text;
            }
            assert!(
                Instant::now() < deadline,
                "no {needle:?} within {within:?}: {text}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Saves a PNG of the viewport to `path`.
    pub(crate) async fn screenshot(&self, path: &Path) {
        let png = self
            .command(reqwest::Method::GET, "/screenshot", None)
            .await;
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().unwrap())
            .unwrap();
        std::fs::write(path, bytes).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Chromium outlives a killed chromedriver: end it by its own id first.
        if let Some(pid) = self.chromium_pid {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}
