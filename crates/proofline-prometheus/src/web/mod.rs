//! TLS and basic authentication for `/metrics`, configured by the web configuration file of
//! the Prometheus exporter-toolkit (the `--web.config.file` of node_exporter and the
//! exporters built on it), so that a fleet secures proofline as it secures its other
//! exporters:
//!
//! ```yaml
//! tls_server_config:
//!   cert_file: server.crt          # PEM chain; paths are relative to this file
//!   key_file: server.key
//!   client_auth_type: RequireAndVerifyClientCert   # or VerifyClientCertIfGiven, NoClientCert
//!   client_ca_file: clients-ca.crt
//!   min_version: TLS12             # TLS12 (default) or TLS13
//! basic_auth_users:
//!   prometheus: $2y$10$...         # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\n')
//! ```
//!
//! Read with [`WebConfig::from_file`]; every error names the file and the field. A field the
//! exporter-toolkit knows and proofline does not implement (`cipher_suites`,
//! `client_allowed_sans`, `http_server_config`, ...) is an error, never silently ignored:
//! a security setting that does nothing is worse than a refusal to start.
//!
//! Checking a bcrypt hash costs tens of milliseconds of CPU on purpose. A password that
//! matched is remembered per user, so a scraper that keeps its password pays once; any other
//! is checked each time, on a blocking thread, at most two at a time (a client that hangs up
//! does not free its check's place before the check ends): a request that finds both places
//! taken is answered 429 at once, so guessing costs the prover at most two threads and never
//! holds connections, and a scraper whose password matched is answered as usual.
//!
//! Certificates are read again when their files change (checked at most once a second, on
//! new connections), so a rotated certificate is served without a restart; a change that
//! does not load (a key written before its certificate) keeps the previous one until it does.

mod auth;
mod reload;

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde::Deserialize;
use serde::de::IgnoredAny;

use auth::BasicAuth;
use reload::Tls;

/// Why a web configuration file cannot be used. Each names the file and, where there is
/// one, the field.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WebConfigError {
    /// The file itself cannot be read.
    #[error("web config {file}: cannot read it: {source}")]
    Open {
        /// The web configuration file.
        file: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file it names cannot be read.
    #[error("web config {file}: {field}: cannot read {path}: {source}")]
    Read {
        /// The web configuration file.
        file: PathBuf,
        /// The field naming the file that could not be read.
        field: String,
        /// The file that could not be read.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The YAML does not parse, or has a field the format does not have.
    #[error("web config {file}: {message}")]
    Parse {
        /// The web configuration file.
        file: PathBuf,
        /// The parser's message (with line and column).
        message: String,
    },
    /// A field's value cannot be used.
    #[error("web config {file}: {field}: {message}")]
    Field {
        /// The web configuration file.
        file: PathBuf,
        /// The field, as a path (`tls_server_config.key_file`).
        field: String,
        /// What is wrong, in words.
        message: String,
    },
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    // present but empty (every field under it commented out) is not "no TLS": it is TLS
    // without its certificate, an error
    #[serde(default, deserialize_with = "present")]
    tls_server_config: Option<RawTls>,
    http_server_config: Option<IgnoredAny>,
    #[serde(default, deserialize_with = "present")]
    basic_auth_users: Option<HashMap<String, Option<String>>>,
}

/// A key that is there is `Some`, even with nothing under it.
fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Some(Option::<T>::deserialize(d)?.unwrap_or_default()))
}

#[derive(Debug, Default, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTls {
    cert_file: Option<String>,
    key_file: Option<String>,
    client_auth_type: Option<String>,
    client_ca_file: Option<String>,
    min_version: Option<String>,
    max_version: Option<String>,
    // known to the exporter-toolkit, not implemented here: refused when set
    cert: Option<IgnoredAny>,
    key: Option<IgnoredAny>,
    client_ca: Option<IgnoredAny>,
    client_allowed_sans: Option<IgnoredAny>,
    cipher_suites: Option<IgnoredAny>,
    curve_preferences: Option<IgnoredAny>,
    prefer_server_cipher_suites: Option<IgnoredAny>,
}

/// How a client's certificate is asked for, in the exporter-toolkit's words.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    /// No client certificate is asked for (`NoClientCert`, the default).
    None,
    /// A certificate, when given, must be signed by the client CA (`VerifyClientCertIfGiven`).
    VerifyIfGiven,
    /// A certificate signed by the client CA is required (`RequireAndVerifyClientCert`).
    Required,
}

/// A web configuration: TLS, client certificates, basic authentication. Each part is
/// optional; an empty file serves plain HTTP with no authentication, as the
/// exporter-toolkit does.
pub struct WebConfig {
    file: PathBuf,
    tls: Option<Tls>,
    client_auth: ClientAuth,
    /// The users and their password checks.
    auth: BasicAuth,
}

impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // never the hashes
        f.debug_struct("WebConfig")
            .field("file", &self.file)
            .field("tls", &self.tls.is_some())
            .field("client_auth", &self.client_auth)
            .field("users", &self.auth.len())
            .finish()
    }
}

impl WebConfig {
    /// The TLS configuration for a new connection (read again when its files changed);
    /// `None`: plain HTTP.
    pub(crate) fn server_config(&self) -> Option<std::sync::Arc<rustls::ServerConfig>> {
        self.tls.as_ref().map(Tls::current)
    }

    /// Reads a web configuration file; paths in it are relative to its directory.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, WebConfigError> {
        let file = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&file).map_err(|source| WebConfigError::Open {
            file: file.clone(),
            source,
        })?;
        Self::from_yaml(&text, &file)
    }

    /// Reads a web configuration from its text; `file` names it in errors, and its
    /// directory is where relative paths start.
    pub fn from_yaml(text: &str, file: &Path) -> Result<Self, WebConfigError> {
        let raw: RawFile = if text.trim().is_empty() {
            RawFile::default()
        } else {
            serde_saphyr::from_str(text).map_err(|e| WebConfigError::Parse {
                file: file.to_path_buf(),
                // the first line (where, and what): the parser quotes the lines around it
                // after that, which may hold password hashes
                message: e
                    .to_string()
                    .lines()
                    .next()
                    .unwrap_or_default()
                    .trim_start_matches("error: ")
                    .to_owned(),
            })?
        };
        let field = |field: &str, message: String| WebConfigError::Field {
            file: file.to_path_buf(),
            field: field.to_owned(),
            message,
        };
        if raw.http_server_config.is_some() {
            return Err(field(
                "http_server_config",
                "not supported by proofline (it serves HTTP/1.1 and sets no extra headers); remove it".into(),
            ));
        }
        let base = file.parent().unwrap_or(Path::new("."));
        let (tls, client_auth) = match raw.tls_server_config {
            Some(t) => {
                let (tls, auth) = Tls::load(t, base, file)?;
                (Some(tls), auth)
            }
            None => (None, ClientAuth::None),
        };
        let auth = BasicAuth::new(raw.basic_auth_users, &field)?;
        Ok(WebConfig {
            file: file.to_path_buf(),
            tls,
            client_auth,
            auth,
        })
    }

    /// The file it was read from.
    pub fn file(&self) -> &Path {
        &self.file
    }

    /// Whether the endpoint speaks TLS.
    pub fn tls(&self) -> bool {
        self.tls.is_some()
    }

    /// How client certificates are asked for.
    pub fn client_auth(&self) -> ClientAuth {
        self.client_auth
    }

    /// Whether requests need a user and password.
    pub fn basic_auth(&self) -> bool {
        !self.auth.is_empty()
    }

    /// A line for an operator: what the endpoint requires.
    pub fn describe(&self) -> String {
        let mut parts = vec![if self.tls() { "TLS" } else { "plain HTTP" }.to_owned()];
        match self.client_auth {
            ClientAuth::None => {}
            ClientAuth::VerifyIfGiven => parts.push("client certificates verified if given".into()),
            ClientAuth::Required => parts.push("client certificate required".into()),
        }
        if self.basic_auth() {
            let n = self.auth.len();
            parts.push(format!(
                "basic auth ({n} user{})",
                if n == 1 { "" } else { "s" }
            ));
        }
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(yaml: &str) -> String {
        WebConfig::from_yaml(yaml, Path::new("/etc/proofline/web.yml"))
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn an_empty_file_asks_for_nothing() {
        let w = WebConfig::from_yaml("", Path::new("w.yml")).unwrap();
        assert!(!w.tls() && !w.basic_auth());
        assert_eq!(w.describe(), "plain HTTP");
    }

    #[test]
    fn errors_name_the_file_and_the_field() {
        let e = err("tls_server_config:\n  cert_file: a.crt\n  cipher_suites: [x]\n");
        assert!(
            e.contains("/etc/proofline/web.yml") && e.contains("tls_server_config.cipher_suites"),
            "{e}"
        );
        let e = err("tls_server_config:\n  cert_file: a.crt\n");
        assert!(e.contains("tls_server_config.key_file: required"), "{e}");
        let e = err("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n");
        assert!(
            e.contains("tls_server_config.cert_file: cannot read /etc/proofline/a.crt"),
            "{e}"
        );
        let e = err("basic_auth_users:\n  alice: secret\n");
        assert!(
            e.contains("basic_auth_users.alice: not a bcrypt hash"),
            "{e}"
        );
        let e = err("basic_auth_user:\n  alice: x\n");
        assert!(e.contains("basic_auth_user"), "{e}");
        let e = err("tls_server_config:\n  # cert_file: a.crt\n");
        assert!(e.contains("tls_server_config.cert_file: required"), "{e}");
        let e = err("basic_auth_users:\n");
        assert!(e.contains("basic_auth_users: no users"), "{e}");
        let e = err("basic_auth_users:\n  prometheus:\n");
        assert!(
            e.contains("basic_auth_users.prometheus: no bcrypt hash"),
            "{e}"
        );
        let hash = bcrypt::hash("x", 4).unwrap();
        let e = err(&format!("basic_auth_users:\n  '': '{hash}'\n"));
        assert!(e.contains("a user name cannot be empty"), "{e}");
        let e = err("tls_server_config:\n  cert_file: ''\n  key_file: a.key\n");
        assert!(e.contains("tls_server_config.cert_file: required"), "{e}");
        let e = err("http_server_config:\n  http2: false\n");
        assert!(e.contains("http_server_config: not supported"), "{e}");
        // the client-auth types that accept certificates nobody verifies, and versions
        // rustls does not speak, are refused before any file is read
        let tls = |extra: &str| {
            format!("tls_server_config:\n  cert_file: a.crt\n  key_file: a.key\n{extra}")
        };
        let e = err(&tls("  client_auth_type: RequireAnyClientCert\n"));
        assert!(
            e.contains("tls_server_config.client_auth_type") && e.contains("nobody verifies"),
            "{e}"
        );
        let e = err(&tls("  min_version: TLS10\n"));
        assert!(
            e.contains("tls_server_config.min_version: TLS10 is not offered"),
            "{e}"
        );
        let e = err(&tls("  min_version: TLS13\n  max_version: TLS12\n"));
        assert!(e.contains("above max_version"), "{e}");
        // a cost that would take minutes per check
        let e = err(
            "basic_auth_users:\n  alice: '$2y$31$abcdefghijklmnopqrstuu5h9FhJ8mmG5HbcXMb6L4rcl4Um/yFuO'\n",
        );
        assert!(e.contains("basic_auth_users.alice: bcrypt cost 31"), "{e}");
        // the parser's message, without the lines it quotes (hashes live there)
        let hash = bcrypt::hash("x", 4).unwrap();
        let e = err(&format!(
            "basic_auth_users:\n  a: '{hash}'\n  a: '{hash}'\n"
        ));
        assert!(e.contains("line 3") && !e.contains(&hash), "{e}");
    }
}
