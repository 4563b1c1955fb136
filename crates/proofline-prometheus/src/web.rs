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
    /// User → bcrypt hash.
    users: HashMap<String, String>,
    /// User → the password that last matched its hash.
    matched: Mutex<HashMap<String, String>>,
    /// A hash that no password matches in practice, checked for unknown users so that the
    /// answer takes as long as for a known one.
    decoy: String,
    /// Bounds the blocking threads checking hashes.
    checking: Arc<tokio::sync::Semaphore>,
}

/// The TLS part: its settings, and what was loaded from its files.
struct Tls {
    raw: RawTls,
    base: PathBuf,
    loaded: Mutex<Loaded>,
}

struct Loaded {
    config: Arc<rustls::ServerConfig>,
    /// The files read and what they were then.
    stamps: Vec<(PathBuf, Option<Stamp>)>,
    checked: std::time::Instant,
}

/// How often certificate files are looked at for changes, at most.
const RELOAD_EVERY: std::time::Duration = std::time::Duration::from_secs(1);
/// A bcrypt cost above this is refused: at 17 a check takes seconds, past it minutes.
const MAX_BCRYPT_COST: u32 = 17;

/// What tells a file changed: its modification time, size and (on Unix) inode, so that a
/// file swapped in with its old time kept (`cp -p`, a Kubernetes secret's symlink flip) is
/// seen too.
type Stamp = (Option<std::time::SystemTime>, u64, u64);

fn stamp(p: &Path) -> Option<Stamp> {
    let m = std::fs::metadata(p).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some((m.modified().ok(), m.len(), ino))
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
    /// Two checks running already: try again.
    Busy,
}

impl WebConfig {
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
                let (config, auth, read) = server_config(&t, base, &field, file)?;
                let loaded = Loaded {
                    config: Arc::new(config),
                    stamps: read.into_iter().map(|p| (p.clone(), stamp(&p))).collect(),
                    checked: std::time::Instant::now(),
                };
                let tls = Tls {
                    raw: t,
                    base: base.to_path_buf(),
                    loaded: Mutex::new(loaded),
                };
                (Some(tls), auth)
            }
            None => (None, ClientAuth::None),
        };
        if raw.basic_auth_users.as_ref().is_some_and(HashMap::is_empty) {
            return Err(field(
                "basic_auth_users",
                "no users under it: name at least one, or remove the key for no authentication"
                    .into(),
            ));
        }
        let mut users = HashMap::new();
        for (user, hash) in raw.basic_auth_users.unwrap_or_default() {
            let name = format!("basic_auth_users.{user}");
            if user.is_empty() {
                return Err(field(
                    "basic_auth_users",
                    "a user name cannot be empty".into(),
                ));
            }
            if user.contains(':') {
                return Err(field(&name, "a user name cannot contain ':'".into()));
            }
            let Some(hash) = hash.filter(|h| !h.trim().is_empty()) else {
                return Err(field(&name, "no bcrypt hash given".into()));
            };
            let cost = hash.parse::<bcrypt::HashParts>().map(|h| h.get_cost());
            match cost {
                Ok(c) if c <= MAX_BCRYPT_COST => {}
                Ok(c) => {
                    return Err(field(
                        &name,
                        format!(
                            "bcrypt cost {c} is above {MAX_BCRYPT_COST}: each check would take minutes; hash with a cost of 10 to 12"
                        ),
                    ));
                }
                Err(_) => {
                    return Err(field(
                        &name,
                        "not a bcrypt hash (it starts with $2y$ or $2b$ and has 60 characters: make one with `htpasswd -nBC 10 \"\" | tr -d ':\\n'`)".into(),
                    ));
                }
            }
            users.insert(user, hash);
        }
        let decoy = if users.is_empty() {
            String::new()
        } else {
            // at the highest cost of the users' hashes: an unknown user costs no less
            let cost = users
                .values()
                .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
                .map(|h| h.get_cost())
                .max()
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
            checking: Arc::new(tokio::sync::Semaphore::new(2)),
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
            let n = self.users.len();
            parts.push(format!(
                "basic auth ({n} user{})",
                if n == 1 { "" } else { "s" }
            ));
        }
        parts.join(", ")
    }

    /// The TLS configuration for a new connection: read again when its files changed.
    pub(crate) fn server_config(&self) -> Option<Arc<rustls::ServerConfig>> {
        let tls = self.tls.as_ref()?;
        let mut loaded = tls.loaded.lock().unwrap_or_else(|e| e.into_inner());
        if loaded.checked.elapsed() >= RELOAD_EVERY {
            loaded.checked = std::time::Instant::now();
            // taken before reading: a file that changes while it is read is read again
            let now: Vec<(PathBuf, Option<Stamp>)> = loaded
                .stamps
                .iter()
                .map(|(p, _)| (p.clone(), stamp(p)))
                .collect();
            if now != loaded.stamps {
                let field = |field: &str, message: String| WebConfigError::Field {
                    file: self.file.clone(),
                    field: field.to_owned(),
                    message,
                };
                // a change that does not load yet keeps the old configuration, and is
                // tried again at the next check
                if let Ok((config, _, _)) = server_config(&tls.raw, &tls.base, &field, &self.file) {
                    loaded.config = Arc::new(config);
                    loaded.stamps = now;
                }
            }
        }
        Some(loaded.config.clone())
    }

    /// The answer to a request that may not be served (401, or 429 when two password
    /// checks are running); `None`: serve it.
    pub(crate) async fn gate(
        &self,
        headers: &hyper::HeaderMap,
        metrics: &crate::Metrics,
    ) -> Option<hyper::Response<http_body_util::Full<hyper::body::Bytes>>> {
        use hyper::header::{
            AUTHORIZATION, CONTENT_TYPE, HeaderValue, RETRY_AFTER, WWW_AUTHENTICATE,
        };
        let header = headers.get(AUTHORIZATION).map(|v| v.as_bytes());
        let (status, body, extra) = match self.authorize(header).await {
            Auth::Allowed => return None,
            Auth::Denied => {
                metrics.refused("unauthorized");
                (
                    hyper::StatusCode::UNAUTHORIZED,
                    "Unauthorized\n",
                    (
                        WWW_AUTHENTICATE,
                        HeaderValue::from_static("Basic realm=\"proofline\""),
                    ),
                )
            }
            Auth::Busy => {
                metrics.refused("too_many_checks");
                (
                    hyper::StatusCode::TOO_MANY_REQUESTS,
                    "Too many password checks at once; try again\n",
                    (RETRY_AFTER, HeaderValue::from_static("1")),
                )
            }
        };
        let mut r = hyper::Response::new(http_body_util::Full::new(hyper::body::Bytes::from(body)));
        *r.status_mut() = status;
        r.headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
        r.headers_mut().insert(extra.0, extra.1);
        Some(r)
    }

    /// Checks a request's `Authorization` header against the users.
    pub(crate) async fn authorize(&self, header: Option<&[u8]>) -> Auth {
        if self.users.is_empty() {
            return Auth::Allowed;
        }
        let Some((user, password)) = header.and_then(parse_basic) else {
            return Auth::Denied;
        };
        let known = self.users.get(&user);
        if known.is_some() {
            let matched = self.matched.lock().unwrap_or_else(|e| e.into_inner());
            if matched.get(&user).is_some_and(|p| same(p, &password)) {
                return Auth::Allowed;
            }
        }
        let hash = known.unwrap_or(&self.decoy).clone();
        // the place is held by the check itself: a client that hangs up does not free it
        let Ok(permit) = self.checking.clone().try_acquire_owned() else {
            return Auth::Busy;
        };
        let pw = password.clone();
        let ok = tokio::task::spawn_blocking(move || {
            let _permit = permit;
            bcrypt::verify(pw, &hash).unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        if ok && known.is_some() {
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

/// The server configuration of `t`, its client-auth policy, and the files it read.
fn server_config(
    t: &RawTls,
    base: &Path,
    field: &dyn Fn(&str, String) -> WebConfigError,
    file: &Path,
) -> Result<(rustls::ServerConfig, ClientAuth, Vec<PathBuf>), WebConfigError> {
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
    fn given(v: &Option<String>) -> Option<&str> {
        v.as_deref().filter(|p| !p.trim().is_empty())
    }
    let (Some(cert_file), Some(key_file)) = (given(&t.cert_file), given(&t.key_file)) else {
        let missing = if given(&t.cert_file).is_none() {
            "cert_file"
        } else {
            "key_file"
        };
        return Err(field(
            &format!("tls_server_config.{missing}"),
            "required: TLS needs both cert_file and key_file".into(),
        ));
    };
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
    let mut files = vec![resolve(cert_file), resolve(key_file)];
    let chain = certs("cert_file", &files[0])?;
    let key_path = files[1].clone();
    let key_pem = read("key_file", &key_path)?;
    if key_pem
        .windows(b"ENCRYPTED PRIVATE KEY".len())
        .any(|w| w == b"ENCRYPTED PRIVATE KEY")
    {
        return Err(field(
            "tls_server_config.key_file",
            format!(
                "{}: an encrypted key; proofline reads unencrypted PEM keys (openssl pkey -in KEY -out PLAIN, kept readable by the prover only)",
                key_path.display()
            ),
        ));
    }
    let key = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        field(
            "tls_server_config.key_file",
            format!("{}: no PEM private key ({e})", key_path.display()),
        )
    })?;
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
            files.push(resolve(ca));
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
    Ok((config, auth, files))
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
        // two checks running: a password to check is answered Busy at once; the one that
        // matched before is still let in
        let held = (
            w.checking.clone().try_acquire_owned().unwrap(),
            w.checking.clone().try_acquire_owned().unwrap(),
        );
        assert_eq!(check(Some(basic("prom", "guess"))), Auth::Busy);
        assert_eq!(check(Some(basic("prom", "s3cret"))), Auth::Allowed);
        drop(held);
        assert_eq!(check(Some(basic("prom", "guess"))), Auth::Denied);
        assert!(!format!("{w:?}").contains("$2"), "Debug shows no hash");
    }
}
