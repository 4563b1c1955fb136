//! Certificates read again when their files change: at most once a second, on new
//! connections; a change that does not load (a key written before its certificate) keeps
//! the previous configuration until it does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;

use super::{ClientAuth, RawTls, WebConfigError};

/// The TLS part: its settings, and what was loaded from its files.
pub(super) struct Tls {
    raw: RawTls,
    base: PathBuf,
    /// The web configuration file (for errors).
    file: PathBuf,
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

impl Tls {
    /// Loads the configuration `raw` describes (paths relative to `base`); `file` is the web
    /// configuration file, for errors.
    pub(super) fn load(
        raw: RawTls,
        base: &Path,
        file: &Path,
    ) -> Result<(Tls, ClientAuth), WebConfigError> {
        let field = |field: &str, message: String| WebConfigError::Field {
            file: file.to_path_buf(),
            field: field.to_owned(),
            message,
        };
        let (config, auth, read) = server_config(&raw, base, &field, file)?;
        let loaded = Loaded {
            config: Arc::new(config),
            stamps: read.into_iter().map(|p| (p.clone(), stamp(&p))).collect(),
            checked: std::time::Instant::now(),
        };
        let tls = Tls {
            raw,
            base: base.to_path_buf(),
            file: file.to_path_buf(),
            loaded: Mutex::new(loaded),
        };
        Ok((tls, auth))
    }

    /// The TLS configuration for a new connection: read again when its files changed.
    pub(super) fn current(&self) -> Arc<rustls::ServerConfig> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|e| e.into_inner());
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
                if let Ok((config, _, _)) = server_config(&self.raw, &self.base, &field, &self.file)
                {
                    loaded.config = Arc::new(config);
                    loaded.stamps = now;
                }
            }
        }
        loaded.config.clone()
    }
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
