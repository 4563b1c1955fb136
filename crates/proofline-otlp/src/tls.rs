//! TLS for the export (the `tls` feature): rustls on ring (no OpenSSL, and no process-wide crypto provider is
//! installed: a prover's other TLS users are left as they are).
//!
//! Trust and client identity come from [`TlsSettings`], or else from the standard variables:
//! `OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE` / `OTEL_EXPORTER_OTLP_CERTIFICATE` (a PEM file of
//! the CA certificates to trust *instead of* the system's roots, as the other OpenTelemetry
//! SDKs read it), and `..._CLIENT_CERTIFICATE` with `..._CLIENT_KEY` (a PEM chain and key
//! for servers that ask for a client certificate). Without a CA file the system's roots are
//! trusted (rustls-native-certs: `/etc/ssl/certs` and `SSL_CERT_FILE`/`SSL_CERT_DIR`).

use std::path::PathBuf;

/// Where the exporter's TLS trust and identity come from. A field left `None` is read from
/// its `OTEL_EXPORTER_OTLP_(TRACES_)*` variable. Used with the `tls` feature (without it,
/// an `https://` endpoint is refused at start).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    pub(crate) ca_file: Option<PathBuf>,
    pub(crate) client_cert_file: Option<PathBuf>,
    pub(crate) client_key_file: Option<PathBuf>,
}

impl TlsSettings {
    /// PEM file of the CA certificates to trust instead of the system's roots (default:
    /// `OTEL_EXPORTER_OTLP_CERTIFICATE`).
    pub fn ca_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.ca_file = Some(path.into());
        self
    }

    /// PEM file of the client's certificate chain (default:
    /// `OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE`).
    pub fn client_cert_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.client_cert_file = Some(path.into());
        self
    }

    /// PEM file of the client's private key (default: `OTEL_EXPORTER_OTLP_CLIENT_KEY`).
    pub fn client_key_file(mut self, path: impl Into<PathBuf>) -> Self {
        self.client_key_file = Some(path.into());
        self
    }
}

#[cfg(feature = "tls")]
/// A file and what named it (a variable or the configuration), for messages.
#[derive(Debug, Clone)]
pub(crate) struct Named {
    pub path: PathBuf,
    pub by: String,
}

#[cfg(feature = "tls")]
/// The settings with the variables applied.
#[derive(Debug, Clone, Default)]
pub(crate) struct Resolved {
    pub ca: Option<Named>,
    pub cert: Option<Named>,
    pub key: Option<Named>,
}

#[cfg(feature = "tls")]
fn from_env(suffix: &str) -> Option<Named> {
    crate::config::otel_var(suffix).map(|(by, path)| Named {
        path: PathBuf::from(path),
        by,
    })
}

#[cfg(feature = "tls")]
impl TlsSettings {
    pub(crate) fn resolve(&self) -> Resolved {
        let given = |p: &Option<PathBuf>, what: &str| {
            p.as_ref().map(|p| Named {
                path: p.clone(),
                by: what.to_owned(),
            })
        };
        Resolved {
            ca: given(&self.ca_file, "the CA file").or_else(|| from_env("CERTIFICATE")),
            cert: given(&self.client_cert_file, "the client certificate")
                .or_else(|| from_env("CLIENT_CERTIFICATE")),
            key: given(&self.client_key_file, "the client key").or_else(|| from_env("CLIENT_KEY")),
        }
    }
}

#[cfg(feature = "tls")]
pub(crate) use with_tls::*;

/// The rustls side (the `tls` feature).
#[cfg(feature = "tls")]
mod with_tls {
    use std::sync::Arc;

    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    use super::{Named, Resolved};
    use crate::OtlpError;
    use crate::endpoint::{Found, Probe};

    fn read(n: &Named) -> Result<Vec<u8>, OtlpError> {
        std::fs::read(&n.path).map_err(|e| {
            OtlpError::Build(format!(
                "{} = {}: cannot read it: {e}",
                n.by,
                n.path.display()
            ))
        })
    }

    /// The certificates of a PEM file's bytes, at least one.
    fn parse_certs(pem: &[u8], n: &Named) -> Result<Vec<CertificateDer<'static>>, OtlpError> {
        let certs: Vec<_> = CertificateDer::pem_slice_iter(pem)
            .collect::<Result<_, _>>()
            .map_err(|e| {
                OtlpError::Build(format!(
                    "{} = {}: not PEM certificates ({e})",
                    n.by,
                    n.path.display()
                ))
            })?;
        if certs.is_empty() {
            return Err(OtlpError::Build(format!(
                "{} = {}: holds no PEM certificate",
                n.by,
                n.path.display()
            )));
        }
        Ok(certs)
    }

    /// A file and its bytes.
    pub(crate) type Pem = (Named, Vec<u8>);

    /// The settings' files, each read once: the rustls configuration (the HTTP client and
    /// the probe) and tonic's (gRPC) are built from the same bytes.
    #[derive(Debug, Clone)]
    pub(crate) struct Files {
        /// The CA file and its PEM bytes; `None`: the system's roots.
        pub ca: Option<Pem>,
        /// The client certificate chain's and key's files and PEM bytes.
        pub identity: Option<(Pem, Pem)>,
    }

    impl Files {
        /// Reads what `r` names (a certificate and a key both, or neither).
        pub(crate) fn read(r: &Resolved) -> Result<Files, OtlpError> {
            let ca = match &r.ca {
                Some(n) => Some((n.clone(), read(n)?)),
                None => None,
            };
            let identity = match (&r.cert, &r.key) {
                (None, None) => None,
                (Some(c), Some(k)) => Some(((c.clone(), read(c)?), (k.clone(), read(k)?))),
                (Some(c), None) => {
                    return Err(OtlpError::Build(format!(
                        "{} is set but no client key is (OTEL_EXPORTER_OTLP_CLIENT_KEY)",
                        c.by
                    )));
                }
                (None, Some(k)) => {
                    return Err(OtlpError::Build(format!(
                        "{} is set but no client certificate is (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE)",
                        k.by
                    )));
                }
            };
            Ok(Files { ca, identity })
        }

        /// What is trusted, in words: the CA file and what named it, or the system's roots.
        pub(crate) fn trust(&self) -> String {
            match &self.ca {
                Some((ca, _)) => format!("{} = {}", ca.by, ca.path.display()),
                None => "the system's roots".to_owned(),
            }
        }
    }

    fn provider() -> Arc<rustls::crypto::CryptoProvider> {
        Arc::new(rustls::crypto::ring::default_provider())
    }

    /// A client configuration trusting the CA file or the system's roots, with the client
    /// identity if one is set. `alpn`: the protocols to offer.
    pub(crate) fn client_config(
        files: &Files,
        alpn: &[&[u8]],
    ) -> Result<rustls::ClientConfig, OtlpError> {
        let mut roots = rustls::RootCertStore::empty();
        let mut pinned = Vec::new();
        match &files.ca {
            Some((ca, pem)) => {
                for c in parse_certs(pem, ca)? {
                    pinned.push(c.clone());
                    roots.add(c).map_err(|e| {
                        OtlpError::Build(format!(
                            "{} = {}: not a usable CA certificate: {e}",
                            ca.by,
                            ca.path.display()
                        ))
                    })?;
                }
            }
            None => {
                let found = rustls_native_certs::load_native_certs();
                let why: Vec<String> = found.errors.iter().map(|e| e.to_string()).collect();
                let (added, _) = roots.add_parsable_certificates(found.certs);
                if added == 0 {
                    return Err(OtlpError::Build(format!(
                        "no CA certificates found on this system to trust the collector's with{}; set OTEL_EXPORTER_OTLP_CERTIFICATE to a PEM file of the CA that signed it",
                        if why.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", why.join("; "))
                        }
                    )));
                }
            }
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            provider(),
        )
        .build()
        .map_err(|e| OtlpError::Build(format!("TLS: {e}")))?;
        let builder = rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| OtlpError::Build(format!("TLS: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Pinning {
                webpki: verifier,
                pinned,
            }));
        let mut config = match &files.identity {
            None => builder.with_no_client_auth(),
            Some(((c, chain), (k, key))) => {
                let chain = parse_certs(chain, c)?;
                let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| {
                    OtlpError::Build(format!(
                        "{} = {}: no PEM private key ({e})",
                        k.by,
                        k.path.display()
                    ))
                })?;
                builder.with_client_auth_cert(chain, key).map_err(|e| {
                    OtlpError::Build(format!(
                        "{} and {}: the key does not go with the certificate: {e}",
                        c.by, k.by
                    ))
                })?
            }
        };
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        Ok(config)
    }

    /// The usual verification, and besides it pinning: a server certificate that is itself
    /// one of the certificates of the CA file is accepted for the names it carries, as curl,
    /// Go's and Python's clients accept it. That is what `openssl req -x509 ... -addext
    /// subjectAltName=IP:127.0.0.1` makes (CA:TRUE, self-signed) and what an operator then
    /// passes as `OTEL_EXPORTER_OTLP_CERTIFICATE`; rustls alone refuses it
    /// (`CaUsedAsEndEntity`). Its validity dates are not checked: the file was trusted as it is.
    #[derive(Debug)]
    struct Pinning {
        webpki: Arc<rustls::client::WebPkiServerVerifier>,
        pinned: Vec<CertificateDer<'static>>,
    }

    impl rustls::client::danger::ServerCertVerifier for Pinning {
        fn verify_server_cert(
            &self,
            end_entity: &CertificateDer<'_>,
            intermediates: &[CertificateDer<'_>],
            server_name: &rustls::pki_types::ServerName<'_>,
            ocsp: &[u8],
            now: rustls::pki_types::UnixTime,
        ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
            let verified =
                self.webpki
                    .verify_server_cert(end_entity, intermediates, server_name, ocsp, now);
            if verified.is_ok()
                || !self
                    .pinned
                    .iter()
                    .any(|c| c.as_ref() == end_entity.as_ref())
            {
                return verified;
            }
            let parsed = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_name(&parsed, server_name)?;
            Ok(rustls::client::danger::ServerCertVerified::assertion())
        }

        fn verify_tls12_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            self.webpki.verify_tls12_signature(message, cert, dss)
        }

        fn verify_tls13_signature(
            &self,
            message: &[u8],
            cert: &CertificateDer<'_>,
            dss: &rustls::DigitallySignedStruct,
        ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
            self.webpki.verify_tls13_signature(message, cert, dss)
        }

        fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
            self.webpki.supported_verify_schemes()
        }
    }

    /// A configuration for plain-HTTP endpoints: reqwest wants one even when it never
    /// speaks TLS (the system's roots are not read for it).
    pub(crate) fn unused_config() -> Result<rustls::ClientConfig, OtlpError> {
        Ok(rustls::ClientConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| OtlpError::Build(format!("TLS: {e}")))?
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth())
    }

    /// Shakes hands with `host` over `tcp` within `until` and says what went wrong, if
    /// anything: the probe behind an export that failed with a bare "network error".
    pub(crate) fn handshake(
        mut tcp: std::net::TcpStream,
        host: &str,
        config: Arc<rustls::ClientConfig>,
        (url, trust): (&str, &str),
        until: std::time::Instant,
    ) -> Result<(), Probe> {
        use std::io::{Read, Write};
        let name = rustls::pki_types::ServerName::try_from(host.to_owned()).map_err(|e| {
            Probe::new(
                Found::TlsOther,
                format!("TLS: `{host}` is not a name a certificate can carry: {e}"),
            )
        })?;
        let wants_h2 = config.alpn_protocols.iter().any(|p| p == b"h2");
        let mut conn = rustls::ClientConnection::new(config, name).map_err(|e| {
            Probe::new(
                Found::TlsOther,
                format!("TLS: cannot start a handshake with {url}: {e}"),
            )
        })?;
        // what is left of the probe's budget (never zero: that would mean no timeout)
        let left = || {
            until
                .saturating_duration_since(std::time::Instant::now())
                .max(std::time::Duration::from_millis(1))
        };
        let timeout = left();
        let _ = tcp.set_read_timeout(Some(timeout));
        let _ = tcp.set_write_timeout(Some(timeout));
        let said = |e: std::io::Error| -> Probe {
            match e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
            {
                Some(tls) => describe(tls, url, trust),
                None if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
                {
                    Probe::new(
                        Found::TlsNotTls,
                        format!(
                            "TLS: {url} accepts connections but sent no TLS answer within {timeout:?} (is it a TLS endpoint?)"
                        ),
                    )
                }
                None => Probe::new(
                    Found::TlsOther,
                    format!("TLS: the handshake with {url} failed: {e}"),
                ),
            }
        };
        while conn.is_handshaking() {
            let _ = tcp.set_read_timeout(Some(left()));
            conn.complete_io(&mut tcp).map_err(said)?;
        }
        if wants_h2 && conn.alpn_protocol() != Some(b"h2") {
            return Err(Probe::new(
                Found::TlsNotGrpc,
                format!(
                    "TLS: {url} does not agree to HTTP/2 (ALPN), which gRPC needs: is it an OTLP/gRPC endpoint? (OTLP/HTTP is usually on 4318, gRPC on 4317; --protocol http/protobuf for the former)"
                ),
            ));
        }
        let _ = tcp.set_read_timeout(Some(left()));
        // TLS 1.3: a server that refuses our certificate (or its absence) says so after the
        // handshake, when it reads what we send: send the start of a request (the HTTP/2
        // preface and an empty SETTINGS frame, or an HTTP/1.1 HEAD) and read its answer
        let h2 = conn.alpn_protocol() == Some(b"h2");
        let mut stream = rustls::Stream::new(&mut conn, &mut tcp);
        let request = if h2 {
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0".to_vec()
        } else {
            format!("HEAD / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").into_bytes()
        };
        let is_tls = |e: &std::io::Error| {
            e.get_ref()
                .is_some_and(|inner| inner.downcast_ref::<rustls::Error>().is_some())
        };
        if let Err(e) = stream.write_all(&request).and_then(|()| stream.flush()) {
            return if is_tls(&e) { Err(said(e)) } else { Ok(()) };
        }
        let mut byte = [0u8; 1];
        match stream.read(&mut byte) {
            Err(e) if is_tls(&e) => Err(said(e)),
            _ => Ok(()),
        }
    }

    /// A TLS failure, as a kind and in an operator's words, with what to do about it.
    fn describe(e: &rustls::Error, url: &str, trust: &str) -> Probe {
        use rustls::{AlertDescription as A, CertificateError as C, Error as E};
        let (found, words) = match e {
            E::InvalidCertificate(C::UnknownIssuer) => (
                Found::TlsUntrusted,
                format!(
                    "TLS: the certificate of {url} is not trusted: signed by an unknown CA (trusted: {trust}; set OTEL_EXPORTER_OTLP_CERTIFICATE to the CA certificate that signed it)"
                ),
            ),
            E::InvalidCertificate(C::NotValidForName | C::NotValidForNameContext { .. }) => (
                Found::TlsWrongName,
                format!(
                    "TLS: the certificate of {url} is not valid for that host name ({e}); use the name it was issued for"
                ),
            ),
            E::InvalidCertificate(
                C::Expired
                | C::ExpiredContext { .. }
                | C::NotValidYet
                | C::NotValidYetContext { .. },
            ) => (
                Found::TlsExpired,
                format!("TLS: the certificate of {url} is outside its validity period ({e})"),
            ),
            E::InvalidCertificate(other) => (
                Found::TlsBadCertificate,
                format!("TLS: the certificate of {url} is not accepted: {other:?}"),
            ),
            E::AlertReceived(
                a @ (A::CertificateRequired
                | A::BadCertificate
                | A::UnknownCA
                | A::CertificateUnknown
                | A::AccessDenied),
            ) => (
                Found::TlsHandshakeRefused,
                format!(
                    "TLS: {url} refused the handshake ({a:?}): it wants a client certificate it trusts (OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and OTEL_EXPORTER_OTLP_CLIENT_KEY)"
                ),
            ),
            E::AlertReceived(
                a @ (A::HandshakeFailure | A::ProtocolVersion | A::InsufficientSecurity),
            ) => (
                Found::TlsHandshakeRefused,
                format!(
                    "TLS: {url} refused the handshake ({a:?}): no TLS version or cipher suite in common (rustls offers TLS 1.2 and 1.3), or it wants a client certificate"
                ),
            ),
            E::InvalidMessage(_) | E::InappropriateMessage { .. } => (
                Found::TlsNotTls,
                format!(
                    "TLS: {url} does not speak TLS ({e}); if it is a plain-HTTP collector, use http://"
                ),
            ),
            other => (
                Found::TlsOther,
                format!("TLS: the handshake with {url} failed: {other}"),
            ),
        };
        Probe::new(found, words)
    }

    /// The host of an endpoint as a certificate names it (no brackets around IPv6).
    pub(crate) fn host_for_name(host: &str) -> &str {
        host.trim_start_matches('[').trim_end_matches(']')
    }
}

#[cfg(all(test, feature = "tls"))]
mod tests {
    /// The exporter brings rustls' ring provider but installs it nowhere: a prover's own
    /// TLS code that asks for the process-wide provider finds what it found before.
    #[test]
    fn starting_the_exporter_installs_no_process_wide_provider() {
        let mut cfg = crate::OtlpConfig::new("run", 0);
        cfg.endpoint = Some("http://127.0.0.1:1/v1/traces".into());
        let (sink, mut handle) = crate::start(cfg).unwrap();
        assert!(rustls::crypto::CryptoProvider::get_default().is_none());
        drop(sink);
        let _ = handle.shutdown(std::time::Duration::from_millis(100));
    }
}
