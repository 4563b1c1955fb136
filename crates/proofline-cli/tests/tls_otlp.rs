//! OTLP over TLS: replay and the live exporter deliver to receivers that need a private CA
//! and an API key (HTTP and gRPC, a client certificate for gRPC), and each wrong setting is
//! named.

use std::time::Duration;

mod common;
use common::tls::*;
use common::{free_port, proofline};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

#[test]
fn replay_delivers_over_tls_with_a_private_ca_and_an_api_key_and_names_what_is_wrong() {
    let dir = tmp("replay");
    let pki = Pki::new(&dir);
    let log = two_gpu_log(&dir, 5);
    let key_header = format!("x-api-key={API_KEY}");
    let key = key_header.as_ref();
    let ca = pki.path("ca.crt");
    let ca = ca.as_os_str();
    let (cert, client_key) = (pki.path("client.crt"), pki.path("client.key"));
    let (cert, client_key) = (cert.as_os_str(), client_key.as_os_str());

    // OTLP/HTTP: the private CA and the key header
    let http = https_receiver(&pki);
    let (ok, err, _) = replay(
        &log,
        &http.endpoint,
        &[],
        &[
            ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca),
            ("OTEL_EXPORTER_OTLP_HEADERS", key),
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(http.roots(), 5, "one trace per sector: {err}");

    // OTLP/gRPC: the same, and a client certificate
    let grpc = grpc_receiver(&pki);
    let (ok, err, _) = replay(
        &log,
        &grpc.endpoint,
        &["--protocol", "grpc"],
        &[
            ("OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE", ca),
            ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert),
            ("OTEL_EXPORTER_OTLP_CLIENT_KEY", client_key),
            ("OTEL_EXPORTER_OTLP_HEADERS", key),
        ],
    );
    assert!(ok, "{err}");
    assert_eq!(grpc.roots(), 5, "one trace per sector over gRPC: {err}");

    // what goes wrong is named, within the deadline
    let other = pki.path("other-ca.crt");
    let other = other.as_os_str();
    let missing = dir.join("missing.crt");
    let no_key = "x-api-key=wrong".as_ref();
    let cases: [(&Receiver, &[&str], Env<'_>, &str); 5] = [
        (
            &http,
            &[],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", other),
                ("OTEL_EXPORTER_OTLP_HEADERS", key),
            ],
            "not trusted: signed by an unknown CA",
        ),
        (
            &http,
            &[],
            vec![("OTEL_EXPORTER_OTLP_HEADERS", key)],
            // the system's roots do not know the private CA
            "not trusted",
        ),
        (
            &http,
            &[],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca),
                ("OTEL_EXPORTER_OTLP_HEADERS", no_key),
            ],
            "HTTP 401: it did not accept the request's credentials",
        ),
        (
            &grpc,
            &["--protocol", "grpc"],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca),
                ("OTEL_EXPORTER_OTLP_HEADERS", key),
            ],
            "refused the handshake",
        ),
        (
            &grpc,
            &["--protocol", "grpc"],
            vec![
                ("OTEL_EXPORTER_OTLP_CERTIFICATE", ca),
                ("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert),
                ("OTEL_EXPORTER_OTLP_CLIENT_KEY", client_key),
                ("OTEL_EXPORTER_OTLP_HEADERS", no_key),
            ],
            "Unauthenticated",
        ),
    ];
    for (receiver, args, env, says) in cases {
        let mut args = args.to_vec();
        args.extend(["--timeout-s", "5"]);
        let (ok, err, took) = replay(&log, &receiver.endpoint, &args, &env);
        assert!(!ok, "{says}: replay succeeded: {err}");
        assert!(err.contains(says), "`{says}` not said: {err}");
        assert!(err.contains("traces: 0 delivered"), "{err}");
        assert!(!err.contains(API_KEY), "a header's value printed: {err}");
        assert!(took < Duration::from_secs(8), "{says}: {took:?}");
        assert_eq!(receiver.roots(), 0);
    }
    // certificates given for a plain-HTTP endpoint: a warning that the traces go in clear
    let plain = format!("http://127.0.0.1:{}", free_port());
    let (_, err, _) = replay(
        &log,
        &plain,
        &["--timeout-s", "2"],
        &[("OTEL_EXPORTER_OTLP_CERTIFICATE", ca)],
    );
    assert!(
        err.contains("warning: OTEL_EXPORTER_OTLP_CERTIFICATE set, but the endpoint http://")
            && err.contains("go in clear"),
        "{err}"
    );
    let (_, err, _) = replay(&log, &plain, &["--timeout-s", "2"], &[]);
    assert!(!err.contains("go in clear"), "{err}");
    // a CA file that cannot be read, a certificate without its key, a key header of the
    // wrong form, no roots at all: said at once
    let no_roots_file = dir.join("no-roots.pem");
    let no_roots_dir = dir.join("no-roots");
    std::fs::write(&no_roots_file, "").unwrap();
    std::fs::create_dir_all(&no_roots_dir).unwrap();
    for (env, says) in [
        (
            vec![("OTEL_EXPORTER_OTLP_CERTIFICATE", missing.as_os_str())],
            "OTEL_EXPORTER_OTLP_CERTIFICATE = ",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert)],
            "no client key is",
        ),
        (
            vec![("OTEL_EXPORTER_OTLP_HEADERS", "api-key sesame-7f3a".as_ref())],
            "OTEL_EXPORTER_OTLP_HEADERS: item 1 is not key=value",
        ),
        (
            // no CA variable, and a system with no roots: rustls-native-certs reads these
            vec![
                ("SSL_CERT_FILE", no_roots_file.as_os_str()),
                ("SSL_CERT_DIR", no_roots_dir.as_os_str()),
            ],
            "no CA certificates found on this system",
        ),
    ] {
        let (ok, err, took) = replay(&log, &http.endpoint, &[], &env);
        assert!(!ok && err.contains(says), "{err}");
        assert!(!err.contains(API_KEY), "a header's value printed: {err}");
        assert!(took < Duration::from_secs(3), "{took:?}");
    }
}

#[test]
fn the_live_exporter_delivers_over_tls_with_the_otel_variables() {
    let dir = tmp("live");
    let pki = Pki::new(&dir);
    for grpc in [false, true] {
        let receiver = if grpc {
            grpc_receiver(&pki)
        } else {
            https_receiver(&pki)
        };
        let mut cmd = proofline();
        cmd.args([
            "demo",
            "--speed",
            "100",
            "--jobs",
            "2",
            "--no-metrics",
            "--out",
        ])
        .arg(dir.join(format!("demo-{grpc}")))
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.endpoint)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("OTEL_EXPORTER_OTLP_CERTIFICATE", pki.path("ca.crt"))
        .env("OTEL_EXPORTER_OTLP_HEADERS", format!("x-api-key={API_KEY}"));
        if grpc {
            cmd.env("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
                .env(
                    "OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE",
                    pki.path("client.crt"),
                )
                .env("OTEL_EXPORTER_OTLP_CLIENT_KEY", pki.path("client.key"));
        } else {
            cmd.env_remove("OTEL_EXPORTER_OTLP_PROTOCOL");
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{err}");
        assert_eq!(receiver.roots(), 2, "grpc {grpc}: {err}");
    }
}

/// A collector whose certificate is self-signed and marked CA:TRUE, made the usual way
/// (`openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -addext
/// subjectAltName=IP:127.0.0.1`), given as OTEL_EXPORTER_OTLP_CERTIFICATE: the certificate
/// is pinned, as curl, Go and Python accept it, and the traces are delivered, over OTLP/HTTP
/// and gRPC; for another name than the one it carries it is still refused.
#[test]
fn a_self_signed_ca_certificate_given_as_the_trust_is_pinned() {
    let dir = tmp("pinned");
    let pki = Pki::new(&dir);
    let mut p = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, "127.0.0.1");
    let key = KeyPair::generate().unwrap();
    let cert = p.self_signed(&key).unwrap();
    std::fs::write(dir.join("server.crt"), cert.pem()).unwrap();
    std::fs::write(dir.join("server.key"), key.serialize_pem()).unwrap();
    let receiver = https_receiver(&pki);
    let log = two_gpu_log(&dir, 2);
    let pinned = dir.join("server.crt");
    let env: Env<'_> = vec![
        ("OTEL_EXPORTER_OTLP_CERTIFICATE", pinned.as_os_str()),
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "x-api-key=sesame-7f3a".as_ref(),
        ),
    ];
    let by_ip = receiver.endpoint.replace("localhost", "127.0.0.1");
    let (ok, err, _) = replay(&log, &by_ip, &["--timeout-s", "10"], &env);
    assert!(ok, "{err}");
    assert!(err.contains("all delivered"), "{err}");
    // the name it does not carry: refused, named
    let (ok, err, _) = replay(&log, &receiver.endpoint, &["--timeout-s", "5"], &env);
    assert!(!ok && err.contains("not valid for that host name"), "{err}");

    // OTLP/gRPC pins it too (tonic's own TLS refused it: CaUsedAsEndEntity); this receiver
    // also asks for a client certificate
    let grpc = grpc_receiver(&pki);
    let (cert, client_key) = (pki.path("client.crt"), pki.path("client.key"));
    let mut env = env;
    env.push(("OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE", cert.as_os_str()));
    env.push(("OTEL_EXPORTER_OTLP_CLIENT_KEY", client_key.as_os_str()));
    let by_ip = grpc.endpoint.replace("localhost", "127.0.0.1");
    let grpc_args = ["--protocol", "grpc", "--timeout-s", "10"];
    let (ok, err, _) = replay(&log, &by_ip, &grpc_args, &env);
    assert!(ok, "{err}");
    assert_eq!(grpc.roots(), 2, "over gRPC: {err}");
    let (ok, err, _) = replay(&log, &grpc.endpoint, &grpc_args, &env);
    assert!(!ok && err.contains("not valid for that host name"), "{err}");
}
