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
//! matched is remembered per user, so a scraper that keeps its password pays once; a wrong
//! one is checked again each time, on a blocking thread, at most two at a time, so the
//! endpoint keeps answering while someone guesses.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use serde::Deserialize;
use serde::de::IgnoredAny;

/// Why a web configuration file cannot be used. Each names the file and, where there is
/// one, the field.
#[derive(Debug, thiserror::Error)]
pub enum WebConfigError {
    /// The file (or one it names) cannot be read.
    #[error("web config {file}: {field}: cannot read {path}: {source}")]
    Read {
        /// The web configuration file.
        file: PathBuf,
        /// The field naming the file that could not be read (or `file` for the file itself).
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
    tls_server_config: Option<RawTls>,
    http_server_config: Option<IgnoredAny>,
    basic_auth_users: Option<HashMap<String, String>>,
}

#[derive(Debug, Default, Deserialize)]
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
    tls: Option<Arc<rustls::ServerConfig>>,
    client_auth: ClientAuth,
    /// User → bcrypt hash.
    users: HashMap<String, String>,
    /// User → the password that last matched its hash.
    matched: Mutex<HashMap<String, String>>,
    /// A hash that no password matches in practice, checked for unknown users so that the
    /// answer takes as long as for a known one.
    decoy: String,
    /// Bounds the blocking threads checking hashes.
    checking: tokio::sync::Semaphore,
}

impl fmt::Debug for WebConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // never the hashes
        f.debug_struct("WebConfig")
            .field("file", &self.file)
            .field("tls", &self.tls.is_some())
            .field("client_auth", &self.client_auth)
            .field("users", &self.users.len())
            .finish()
    }
}

/// What [`WebConfig::authorize`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Auth {
    Allowed,
    Denied,
}

const BCRYPT_PREFIXES: [&str; 4] = ["$2a$", "$2b$", "$2x$", "$2y$"];

impl WebConfig {
    /// Reads a web configuration file; paths in it are relative to its directory.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, WebConfigError> {
        let file = path.as_ref().to_path_buf();
        let text = std::fs::read_to_string(&file).map_err(|source| WebConfigError::Read {
            file: file.clone(),
            field: "file".into(),
            path: file.clone(),
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
                message: e.to_string(),
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
                let (config, auth) = server_config(t, base, &field, file)?;
                (Some(Arc::new(config)), auth)
            }
            None => (None, ClientAuth::None),
        };
        let users = raw.basic_auth_users.unwrap_or_default();
        for (user, hash) in &users {
            let name = format!("basic_auth_users.{user}");
            if user.contains(':') {
                return Err(field(&name, "a user name cannot contain ':'".into()));
            }
            let ok = BCRYPT_PREFIXES.iter().any(|p| hash.starts_with(p))
                && hash.len() == 60
                && bcrypt::verify("", hash).is_ok();
            if !ok {
                return Err(field(
                    &name,
                    "not a bcrypt hash (it starts with $2y$ or $2b$ and has 60 characters: make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)".into(),
                ));
            }
        }
        let decoy = if users.is_empty() {
            String::new()
        } else {
            // the cost of the first user's hash, so an unknown user costs as much
            let cost = users
                .values()
                .next()
                .and_then(|h| h.get(4..6))
                .and_then(|c| c.parse().ok())
                .unwrap_or(bcrypt::DEFAULT_COST);
            bcrypt::hash("proofline decoy: no user has this password", cost)
                .map_err(|e| field("basic_auth_users", e.to_string()))?
        };
        Ok(WebConfig {
            file: file.to_path_buf(),
            tls,
            client_auth,
            users,
            matched: Mutex::new(HashMap::new()),
            decoy,
            checking: tokio::sync::Semaphore::new(2),
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
        !self.users.is_empty()
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
            parts.push(format!("basic auth ({} users)", self.users.len()));
        }
        parts.join(", ")
    }

    pub(crate) fn server_config(&self) -> Option<Arc<rustls::ServerConfig>> {
        self.tls.clone()
    }

    /// Checks a request's `Authorization` header against the users.
    pub(crate) async fn authorize(&self, header: Option<&[u8]>) -> Auth {
        if self.users.is_empty() {
            return Auth::Allowed;
        }
        let Some((user, password)) = header.and_then(parse_basic) else {
            return Auth::Denied;
        };
        let hash = match self.users.get(&user) {
            Some(h) => {
                let matched = self.matched.lock().unwrap_or_else(|e| e.into_inner());
                if matched.get(&user).is_some_and(|p| same(p, &password)) {
                    return Auth::Allowed;
                }
                h.clone()
            }
            None => self.decoy.clone(),
        };
        let known = self.users.contains_key(&user);
        let Ok(_permit) = self.checking.acquire().await else {
            return Auth::Denied;
        };
        let pw = password.clone();
        let ok = tokio::task::spawn_blocking(move || bcrypt::verify(pw, &hash).unwrap_or(false))
            .await
            .unwrap_or(false);
        if ok && known {
            self.matched
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(user, password);
            Auth::Allowed
        } else {
            Auth::Denied
        }
    }
}

/// Compares without stopping at the first difference.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len() && a.bytes().zip(b.bytes()).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// `Basic base64(user:password)` → (user, password).
fn parse_basic(header: &[u8]) -> Option<(String, String)> {
    let header = std::str::from_utf8(header).ok()?.trim();
    let (scheme, token) = header.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(token.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (user, password) = text.split_once(':')?;
    Some((user.to_owned(), password.to_owned()))
}

fn server_config(
    t: RawTls,
    base: &Path,
    field: &dyn Fn(&str, String) -> WebConfigError,
    file: &Path,
) -> Result<(rustls::ServerConfig, ClientAuth), WebConfigError> {
    for (name, set) in [
        ("cert", t.cert.is_some()),
        ("key", t.key.is_some()),
        ("client_ca", t.client_ca.is_some()),
        ("client_allowed_sans", t.client_allowed_sans.is_some()),
        ("cipher_suites", t.cipher_suites.is_some()),
        ("curve_preferences", t.curve_preferences.is_some()),
        (
            "prefer_server_cipher_suites",
            t.prefer_server_cipher_suites.is_some(),
        ),
    ] {
        if set {
            let hint = match name {
                "cert" | "key" | "client_ca" => "; name a file with the `_file` form",
                "cipher_suites" | "curve_preferences" | "prefer_server_cipher_suites" => {
                    "; rustls chooses among its own safe suites and groups"
                }
                _ => "",
            };
            return Err(field(
                &format!("tls_server_config.{name}"),
                format!("not supported by proofline{hint}; remove it"),
            ));
        }
    }
    let resolve = |p: &str| {
        let p = Path::new(p);
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };
    let read = |name: &str, p: &Path| -> Result<Vec<u8>, WebConfigError> {
        std::fs::read(p).map_err(|source| WebConfigError::Read {
            file: file.to_path_buf(),
            field: format!("tls_server_config.{name}"),
            path: p.to_path_buf(),
            source,
        })
    };
    let certs = |name: &str, p: &Path| -> Result<Vec<CertificateDer<'static>>, WebConfigError> {
        let pem = read(name, p)?;
        let certs: Vec<_> = CertificateDer::pem_slice_iter(&pem)
            .collect::<Result<_, _>>()
            .map_err(|e| {
                field(
                    &format!("tls_server_config.{name}"),
                    format!("{}: not PEM certificates ({e})", p.display()),
                )
            })?;
        if certs.is_empty() {
            return Err(field(
                &format!("tls_server_config.{name}"),
                format!("{} holds no PEM certificate", p.display()),
            ));
        }
        Ok(certs)
    };
    let (Some(cert_file), Some(key_file)) = (t.cert_file.as_deref(), t.key_file.as_deref()) else {
        let missing = if t.cert_file.is_none() {
            "cert_file"
        } else {
            "key_file"
        };
        return Err(field(
            &format!("tls_server_config.{missing}"),
            "required: TLS needs both cert_file and key_file".into(),
        ));
    };
    let chain = certs("cert_file", &resolve(cert_file))?;
    let key_path = resolve(key_file);
    let key = PrivateKeyDer::from_pem_slice(&read("key_file", &key_path)?).map_err(|e| {
        field(
            "tls_server_config.key_file",
            format!("{}: no PEM private key ({e})", key_path.display()),
        )
    })?;
    let version = |name: &str, v: &Option<String>| -> Result<Option<u8>, WebConfigError> {
        match v.as_deref() {
            None | Some("") => Ok(None),
            Some("TLS12") => Ok(Some(12)),
            Some("TLS13") => Ok(Some(13)),
            Some(other @ ("TLS10" | "TLS11")) => Err(field(
                &format!("tls_server_config.{name}"),
                format!("{other} is not offered (rustls speaks TLS12 and TLS13 only)"),
            )),
            Some(other) => Err(field(
                &format!("tls_server_config.{name}"),
                format!("`{other}`: expected TLS12 or TLS13"),
            )),
        }
    };
    let min = version("min_version", &t.min_version)?.unwrap_or(12);
    let max = version("max_version", &t.max_version)?.unwrap_or(13);
    if min > max {
        return Err(field(
            "tls_server_config.min_version",
            format!("TLS{min} is above max_version TLS{max}"),
        ));
    }
    let versions: Vec<&'static rustls::SupportedProtocolVersion> =
        [(12, &rustls::version::TLS12), (13, &rustls::version::TLS13)]
            .into_iter()
            .filter(|(v, _)| (min..=max).contains(v))
            .map(|(_, p)| p)
            .collect();
    let auth = match t.client_auth_type.as_deref() {
        None | Some("") | Some("NoClientCert") => ClientAuth::None,
        Some("VerifyClientCertIfGiven") => ClientAuth::VerifyIfGiven,
        Some("RequireAndVerifyClientCert") => ClientAuth::Required,
        Some(other @ ("RequestClientCert" | "RequireAnyClientCert")) => {
            return Err(field(
                "tls_server_config.client_auth_type",
                format!(
                    "{other} accepts certificates nobody verifies: not supported; use VerifyClientCertIfGiven or RequireAndVerifyClientCert with client_ca_file"
                ),
            ));
        }
        Some(other) => {
            return Err(field(
                "tls_server_config.client_auth_type",
                format!(
                    "`{other}`: expected NoClientCert, VerifyClientCertIfGiven or RequireAndVerifyClientCert"
                ),
            ));
        }
    };
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .map_err(|e| field("tls_server_config", e.to_string()))?;
    let builder = match (auth, t.client_ca_file.as_deref()) {
        (ClientAuth::None, None) => builder.with_no_client_auth(),
        (ClientAuth::None, Some(_)) => {
            return Err(field(
                "tls_server_config.client_ca_file",
                "set, but client_auth_type is NoClientCert: say VerifyClientCertIfGiven or RequireAndVerifyClientCert".into(),
            ));
        }
        (_, None) => {
            return Err(field(
                "tls_server_config.client_ca_file",
                "required: client certificates are verified against it".into(),
            ));
        }
        (auth, Some(ca)) => {
            let mut roots = rustls::RootCertStore::empty();
            for c in certs("client_ca_file", &resolve(ca))? {
                roots.add(c).map_err(|e| {
                    field(
                        "tls_server_config.client_ca_file",
                        format!("not a CA certificate: {e}"),
                    )
                })?;
            }
            let v = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider);
            let v = if auth == ClientAuth::VerifyIfGiven {
                v.allow_unauthenticated()
            } else {
                v
            };
            let v = v
                .build()
                .map_err(|e| field("tls_server_config.client_ca_file", e.to_string()))?;
            builder.with_client_cert_verifier(v)
        }
    };
    let mut config = builder.with_single_cert(chain, key).map_err(|e| {
        field(
            "tls_server_config.key_file",
            format!("does not go with cert_file: {e}"),
        )
    })?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok((config, auth))
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
        let e = err("http_server_config:\n  http2: false\n");
        assert!(e.contains("http_server_config: not supported"), "{e}");
    }

    #[test]
    fn a_password_is_checked_against_its_bcrypt_hash_and_remembered() {
        let hash = bcrypt::hash("s3cret", 4).unwrap();
        let w = WebConfig::from_yaml(
            &format!("basic_auth_users:\n  prom: '{hash}'\n"),
            Path::new("w.yml"),
        )
        .unwrap();
        let basic = |u: &str, p: &str| {
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"))
            )
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let check = |h: Option<String>| rt.block_on(w.authorize(h.as_deref().map(str::as_bytes)));
        assert_eq!(check(None), Auth::Denied);
        assert_eq!(check(Some(basic("prom", "wrong"))), Auth::Denied);
        assert_eq!(check(Some(basic("mallory", "s3cret"))), Auth::Denied);
        assert_eq!(check(Some("Bearer abc".into())), Auth::Denied);
        assert_eq!(check(Some(basic("prom", "s3cret"))), Auth::Allowed);
        assert_eq!(w.matched.lock().unwrap().get("prom").unwrap(), "s3cret");
        assert_eq!(check(Some(basic("prom", "s3cret"))), Auth::Allowed);
        assert_eq!(check(Some(basic("prom", "s3cre"))), Auth::Denied);
        assert!(!format!("{w:?}").contains("$2"), "Debug shows no hash");
    }
}
