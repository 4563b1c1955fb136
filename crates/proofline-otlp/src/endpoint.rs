//! The collector's address: checked at start ([`check`]), and probed when an export fails
//! for a reason the transport cannot name ([`Endpoint::probe`]), which answers with a
//! [`Probe`]: what it found, as a type, and in words.

#[cfg(feature = "tls")]
use std::sync::Arc;
use std::time::Duration;
#[cfg(feature = "tls")]
use std::time::Instant;

use crate::OtlpError;
use crate::config::{OtlpConfig, Transport};
#[cfg(feature = "tls")]
use crate::tls;

/// What a connection to the collector found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Found {
    /// The host name does not resolve.
    CannotResolve,
    /// The address refuses connections.
    Refused,
    /// Connecting took longer than the probe's budget.
    ConnectTimedOut,
    /// Connecting failed otherwise.
    CannotConnect,
    /// It accepts connections (and, with TLS, completes a handshake) but did not answer the
    /// export in time.
    NoAnswer,
    /// TLS: the certificate is signed by a CA that is not trusted.
    TlsUntrusted,
    /// TLS: the certificate is for another name.
    TlsWrongName,
    /// TLS: the certificate is outside its validity period.
    TlsExpired,
    /// TLS: the certificate is refused for another reason.
    TlsBadCertificate,
    /// TLS: the collector refused the handshake (a client certificate, versions, ciphers).
    TlsHandshakeRefused,
    /// TLS: the address does not speak TLS.
    TlsNotTls,
    /// TLS: no HTTP/2 agreed, which gRPC needs.
    TlsNotGrpc,
    /// TLS: another failure.
    TlsOther,
}

impl Found {
    /// The kind, as failure summaries name it.
    pub fn as_str(self) -> &'static str {
        match self {
            Found::CannotResolve => "cannot resolve host",
            Found::Refused => "connection refused",
            Found::ConnectTimedOut => "connect timed out",
            Found::CannotConnect => "cannot connect",
            Found::NoAnswer => "no answer from the collector",
            Found::TlsUntrusted => "TLS: untrusted certificate",
            Found::TlsWrongName => "TLS: certificate for another name",
            Found::TlsExpired => "TLS: certificate expired or not yet valid",
            Found::TlsBadCertificate => "TLS: certificate not accepted",
            Found::TlsHandshakeRefused => "TLS: handshake refused",
            Found::TlsNotTls => "TLS: not a TLS endpoint",
            Found::TlsNotGrpc => "TLS: not a gRPC endpoint",
            Found::TlsOther => "TLS error",
        }
    }
}

impl std::fmt::Display for Found {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a probe found, and the same in an operator's words (with what to do about it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// What it found.
    pub found: Found,
    /// In words.
    pub words: String,
}

impl Probe {
    pub(crate) fn new(found: Found, words: String) -> Probe {
        Probe { found, words }
    }
}

impl std::fmt::Display for Probe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.words)
    }
}

/// The collector's address, as far as the transport and a probe need it.
#[derive(Debug, Clone)]
pub(crate) struct Endpoint {
    /// As configured or from the environment (for messages).
    pub url: String,
    /// Where exports are sent (for OTLP/HTTP the whole URL).
    pub export_url: String,
    /// `host:port`.
    pub authority: String,
    /// The host, as its certificate names it.
    #[cfg(feature = "tls")]
    pub host: String,
    /// For `https://`: the TLS configuration the transport and the probe use.
    #[cfg(feature = "tls")]
    pub tls: Option<Arc<rustls::ClientConfig>>,
    /// The files that configuration was built from (for the words of a TLS failure).
    #[cfg(feature = "tls")]
    pub files: Option<tls::Files>,
}

/// The endpoint the exporter will use, checked: a scheme it can speak, a host, the TLS
/// files it names.
pub(crate) fn check(cfg: &OtlpConfig) -> Result<Endpoint, OtlpError> {
    let (export_url, url) = cfg.export_url();
    // the address as messages show it: never a password it carries
    let url = redacted(&url);
    let no_scheme = || {
        OtlpError::Build(format!(
            "endpoint `{url}` has no scheme: use http://HOST:PORT or https://HOST:PORT"
        ))
    };
    let scheme = url
        .split_once("://")
        .map(|(s, _)| s.to_ascii_lowercase())
        .ok_or_else(no_scheme)?;
    if scheme != "http" && scheme != "https" {
        return Err(OtlpError::Build(format!(
            "endpoint `{url}`: unsupported scheme `{scheme}`; use http://HOST:PORT or https://HOST:PORT"
        )));
    }
    let uri: http::Uri = export_url
        .parse()
        .map_err(|e| OtlpError::Build(format!("endpoint `{url}` is not a URL: {e}")))?;
    let host = uri
        .host()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| OtlpError::Build(format!("endpoint `{url}` names no host")))?;
    let https = scheme == "https";
    let authority = format!(
        "{host}:{}",
        uri.port_u16().unwrap_or(if https { 443 } else { 80 })
    );
    let needs = match cfg.transport {
        Transport::HttpProtobuf => (!cfg!(feature = "tls")).then_some("tls"),
        #[cfg(feature = "grpc")]
        Transport::Grpc => (!cfg!(feature = "grpc-tls")).then_some("grpc-tls"),
    };
    if let (true, Some(feature)) = (https, needs) {
        return Err(OtlpError::Build(format!(
            "endpoint `{url}`: https needs proofline-otlp's `{feature}` feature, which this build has not (the proofline command has it)"
        )));
    }
    #[cfg(feature = "tls")]
    let tls = if https {
        let alpn: &[&[u8]] = match cfg.transport {
            Transport::HttpProtobuf => &[b"http/1.1"],
            #[cfg(feature = "grpc")]
            Transport::Grpc => &[b"h2"],
        };
        let files = tls::Files::read(&cfg.tls.resolve())?;
        Some((Arc::new(tls::client_config(&files, alpn)?), files))
    } else {
        None
    };
    Ok(Endpoint {
        url,
        #[cfg(feature = "tls")]
        host: tls::host_for_name(host).to_owned(),
        export_url,
        authority,
        #[cfg(feature = "tls")]
        files: tls.as_ref().map(|(_, f)| f.clone()),
        #[cfg(feature = "tls")]
        tls: tls.map(|(c, _)| c),
    })
}

/// `url` with the password of its user information, if any, hidden (also in an address
/// given without a scheme).
pub(crate) fn redacted(url: &str) -> String {
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let user = rest[..at].split(':').next().unwrap_or_default();
            format!("{scheme}{user}:***@{}", &rest[at + 1..])
        }
        None => url.to_owned(),
    }
}

impl Endpoint {
    /// Resolves and connects (with TLS, shakes hands and sends the start of a request),
    /// within `timeout` in all, and says what it found.
    pub(crate) fn probe(&self, timeout: Duration) -> Probe {
        use std::net::{TcpStream, ToSocketAddrs};
        #[cfg(feature = "tls")]
        let until = Instant::now() + timeout;
        let addrs: Vec<_> = match self.authority.to_socket_addrs() {
            Ok(a) => a.collect(),
            Err(e) => {
                return Probe::new(
                    Found::CannotResolve,
                    format!("cannot resolve host of {} ({e})", self.url),
                );
            }
        };
        let Some(addr) = addrs.first() else {
            return Probe::new(
                Found::CannotResolve,
                format!("cannot resolve host of {} (no address)", self.url),
            );
        };
        match TcpStream::connect_timeout(addr, timeout) {
            #[cfg(feature = "tls")]
            Ok(tcp) if self.tls.is_some() => {
                let config = self.tls.clone().expect("checked");
                let trust = self
                    .files
                    .as_ref()
                    .map(tls::Files::trust)
                    .unwrap_or_default();
                match tls::handshake(tcp, &self.host, config, (&self.url, &trust), until) {
                    Err(found) => found,
                    Ok(()) => Probe::new(
                        Found::NoAnswer,
                        format!(
                            "the collector at {} ({addr}) completes a TLS handshake but did not answer the export in time",
                            self.url
                        ),
                    ),
                }
            }
            Ok(_) => Probe::new(
                Found::NoAnswer,
                format!(
                    "the collector at {} ({addr}) accepts connections but did not answer the export in time",
                    self.url
                ),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => Probe::new(
                Found::Refused,
                format!(
                    "connection refused by {addr} ({}): is the collector up there?",
                    self.url
                ),
            ),
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => Probe::new(
                Found::ConnectTimedOut,
                format!(
                    "no answer to connect from {addr} within {timeout:?} ({})",
                    self.url
                ),
            ),
            Err(e) => Probe::new(
                Found::CannotConnect,
                format!("cannot connect to {addr} ({}): {e}", self.url),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn endpoint(url: &str) -> Result<Endpoint, String> {
        let cfg = OtlpConfig::default().endpoint(url);
        check(&cfg).map_err(|e| e.to_string())
    }

    #[test]
    fn a_password_in_the_endpoint_is_never_shown() {
        assert_eq!(
            redacted("http://user:s3cret@127.0.0.1:4318/v1/traces"),
            "http://user:***@127.0.0.1:4318/v1/traces"
        );
        assert_eq!(
            redacted("http://127.0.0.1:4318/a@b"),
            "http://127.0.0.1:4318/a@b"
        );
        let e = endpoint("http://user:s3cret@127.0.0.1:9/v1/traces").unwrap();
        assert!(!e.url.contains("s3cret") && e.export_url.contains("s3cret"));
        assert!(!e.probe(Duration::from_secs(1)).words.contains("s3cret"));
    }

    #[test]
    fn endpoints_are_checked_for_scheme_and_host() {
        assert!(
            endpoint("ftp://h:1")
                .unwrap_err()
                .contains("unsupported scheme `ftp`")
        );
        assert!(endpoint("h:4318").unwrap_err().contains("has no scheme"));
        let e = endpoint("http://127.0.0.1:4318/v1/traces").unwrap();
        assert_eq!(e.authority, "127.0.0.1:4318");
        assert_eq!(endpoint("http://h/v1/traces").unwrap().authority, "h:80");
    }

    #[test]
    fn a_probe_of_a_closed_port_finds_it_refused() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = endpoint(&format!("http://127.0.0.1:{port}")).unwrap();
        let p = e.probe(Duration::from_secs(2));
        assert_eq!(p.found, Found::Refused, "{p}");
        assert!(p.words.contains("connection refused"));
        // one that listens and says nothing: accepted, no answer
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let e = endpoint(&format!("http://{}", l.local_addr().unwrap())).unwrap();
        assert_eq!(e.probe(Duration::from_secs(2)).found, Found::NoAnswer);
    }
}
