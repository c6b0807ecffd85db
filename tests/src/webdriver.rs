//! A minimal W3C WebDriver client over reqwest, enough to drive headless Chromium through
//! chromedriver in the Memory hub's browser test: start the driver on a free port, open a
//! session, navigate, find elements, type, click, read the page and take screenshots.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The element reference key of the W3C protocol.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A running chromedriver and one headless Chromium session on it. Dropping it ends both.
pub struct Browser {
    driver: Child,
    client: reqwest::Client,
    session: String,
    base: String,
}

/// One element of the current page.
#[derive(Debug, Clone)]
pub struct Element(String);

/// chromedriver's path: `DEJA_CHROMEDRIVER` (deploy/browser.sh env) or `chromedriver` on PATH.
pub fn chromedriver_path() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("DEJA_CHROMEDRIVER") {
        return Some(PathBuf::from(path));
    }
    ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

impl Browser {
    /// Starts chromedriver and a headless Chromium session (window 1280x900).
    pub async fn start(driver: &Path) -> Browser {
        let port = free_port();
        let child = Command::new(driver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", driver.display()));
        let base = format!("http://127.0.0.1:{port}");
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Ok(r) = client.get(format!("{base}/status")).send().await {
                if r.status().is_success() {
                    break;
                }
            }
            assert!(Instant::now() < deadline, "chromedriver did not start");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut options = json!({"args": ["--headless=new", "--no-sandbox", "--disable-gpu",
            "--disable-dev-shm-usage", "--window-size=1280,900"]});
        if let Some(binary) = ["/usr/bin/chromium", "/usr/bin/chromium-browser"]
            .iter()
            .find(|p| Path::new(p).exists())
        {
            options["binary"] = json!(binary);
        }
        let capabilities = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome", "goog:chromeOptions": options}}});
        let mut browser = Browser {
            driver: child,
            client,
            session: String::new(),
            base,
        };
        let value = browser
            .command("POST", "/session", Some(capabilities))
            .await;
        browser.session = value["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session: {value}"))
            .to_owned();
        browser
    }

    async fn command(&self, method: &str, path: &str, body: Option<Value>) -> Value {
        let url = format!("{}{path}", self.base);
        let request = match method {
            "GET" => self.client.get(url),
            "DELETE" => self.client.delete(url),
            _ => self
                .client
                .post(url)
                .json(&body.unwrap_or_else(|| json!({}))),
        };
        let response = request.send().await.expect("webdriver request");
        let json: Value = response.json().await.expect("webdriver json");
        if let Some(error) = json["value"].get("error") {
            panic!(
                "webdriver {method} {path}: {error}: {}",
                json["value"]["message"]
            );
        }
        json["value"].clone()
    }

    fn path(&self, rest: &str) -> String {
        format!("/session/{}{rest}", self.session)
    }

    pub async fn goto(&self, url: &str) {
        self.command("POST", &self.path("/url"), Some(json!({"url": url})))
            .await;
    }

    pub async fn current_url(&self) -> String {
        self.command("GET", &self.path("/url"), None)
            .await
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    pub async fn source(&self) -> String {
        self.command("GET", &self.path("/source"), None)
            .await
            .as_str()
            .unwrap_or("")
            .to_owned()
    }

    /// The first element matching a CSS selector (panics when there is none).
    pub async fn find(&self, css: &str) -> Element {
        let value = self
            .command(
                "POST",
                &self.path("/element"),
                Some(json!({"using": "css selector", "value": css})),
            )
            .await;
        Element(
            value[ELEMENT]
                .as_str()
                .unwrap_or_else(|| panic!("no element {css}: {value}"))
                .to_owned(),
        )
    }

    /// How many elements match a CSS selector.
    pub async fn count(&self, css: &str) -> usize {
        self.command(
            "POST",
            &self.path("/elements"),
            Some(json!({"using": "css selector", "value": css})),
        )
        .await
        .as_array()
        .map_or(0, Vec::len)
    }

    /// Waits (up to 20 s) until the current URL contains `part`: a click that submits a form
    /// returns before the next page has necessarily loaded.
    pub async fn wait_for_url(&self, part: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            let url = self.current_url().await;
            if url.contains(part) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "still at {url}, waiting for {part}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits (up to 20 s) until an element matches `css`.
    pub async fn wait_for(&self, css: &str) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while self.count(css).await == 0 {
            assert!(Instant::now() < deadline, "no {css} appeared");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    pub async fn click(&self, css: &str) {
        let element = self.find(css).await;
        self.command(
            "POST",
            &self.path(&format!("/element/{}/click", element.0)),
            None,
        )
        .await;
    }

    /// Clears a field and types `text` into it.
    pub async fn fill(&self, css: &str, text: &str) {
        let element = self.find(css).await;
        self.command(
            "POST",
            &self.path(&format!("/element/{}/clear", element.0)),
            None,
        )
        .await;
        self.command(
            "POST",
            &self.path(&format!("/element/{}/value", element.0)),
            Some(json!({"text": text})),
        )
        .await;
    }

    pub async fn text(&self, css: &str) -> String {
        let element = self.find(css).await;
        self.command(
            "GET",
            &self.path(&format!("/element/{}/text", element.0)),
            None,
        )
        .await
        .as_str()
        .unwrap_or("")
        .to_owned()
    }

    /// A PNG of the viewport, written to `path`.
    pub async fn screenshot(&self, path: &Path) {
        let value = self.command("GET", &self.path("/screenshot"), None).await;
        let png = decode_base64(value.as_str().expect("base64 screenshot"));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("screenshot dir");
        }
        std::fs::write(path, png).expect("write screenshot");
    }

    /// A PNG of the element `css` alone (a part of a long page), written to `path`.
    pub async fn element_screenshot(&self, css: &str, path: &Path) {
        let element = self.find(css).await;
        let value = self
            .command(
                "GET",
                &self.path(&format!("/element/{}/screenshot", element.0)),
                None,
            )
            .await;
        let png = decode_base64(value.as_str().expect("base64 screenshot"));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("screenshot dir");
        }
        std::fs::write(path, png).expect("write screenshot");
    }

    /// Ends the session and the driver.
    pub async fn quit(mut self) {
        let path = self.path("");
        let _ = self
            .client
            .delete(format!("{}{path}", self.base))
            .send()
            .await;
        let _ = self.driver.kill();
        let _ = self.driver.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.driver.kill();
    }
}

/// Standard base64 (what WebDriver screenshots are), padding and whitespace tolerated.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut buffer, mut bits) = (0u32, 0u32);
    for sextet in text.bytes().filter_map(value) {
        buffer = (buffer << 6) | u32::from(sextet);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((buffer >> bits) as u8);
            buffer &= (1 << bits) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(super::decode_base64("aGVsbG8="), b"hello");
        assert_eq!(super::decode_base64("aGVsbG8gd29ybGQ"), b"hello world");
    }
}
