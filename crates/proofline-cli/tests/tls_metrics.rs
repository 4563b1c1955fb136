//! /metrics' TLS options over rustls directly: optional client certificates, TLS 1.3 only,
//! a certificate replaced on disk served without a restart.

use std::time::{Duration, Instant};

use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

mod common;
use common::tls::*;

#[test]
fn optional_client_certificates_tls13_only_and_a_rotated_certificate() {
    let dir = tmp("options");
    let pki = Pki::new(&dir);
    let log = two_gpu_log(&dir, 2);
    std::fs::copy(pki.path("server.crt"), dir.join("prover.crt")).unwrap();
    std::fs::copy(pki.path("server.key"), dir.join("prover.key")).unwrap();
    let web = dir.join("web.yml");
    std::fs::write(
        &web,
        "tls_server_config:\n  cert_file: prover.crt\n  key_file: prover.key\n  client_auth_type: VerifyClientCertIfGiven\n  client_ca_file: ca.crt\n  min_version: TLS13\n",
    )
    .unwrap();
    let (_w, port) = watch(&log, Some(&web));
    let anonymous = Client {
        cert: None,
        auth: None,
        tls12_only: false,
    };
    // no certificate: served; one the client CA signed: served; another CA's: refused
    let (head, first) = https_get(port, &pki, "/metrics", anonymous).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _) = https_get(port, &pki, "/metrics", WITH_CERT).unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let stranger = Client {
        cert: Some("other-client"),
        ..anonymous
    };
    let refused = https_get(port, &pki, "/metrics", stranger);
    assert!(
        refused.as_ref().is_err_and(|e| {
            let e = e.to_lowercase();
            e.contains("unknownca") || e.contains("badcertificate")
        }),
        "{refused:?}"
    );
    // TLS 1.2 is below min_version
    let old = https_get(
        port,
        &pki,
        "/metrics",
        Client {
            tls12_only: true,
            ..anonymous
        },
    );
    assert!(
        old.as_ref()
            .is_err_and(|e| e.to_lowercase().contains("protocolversion")),
        "{old:?}"
    );

    // the certificate is replaced on disk: new connections get the new one, no restart
    let der = |pem: &[u8]| {
        CertificateDer::pem_slice_iter(pem)
            .next()
            .unwrap()
            .unwrap()
            .to_vec()
    };
    assert_eq!(first, der(&pki.read("server.crt")));
    pki.reissue_server("prover");
    let new = der(&pki.read("prover.crt"));
    assert_ne!(new, first);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (head, peer) = https_get(port, &pki, "/metrics", anonymous).unwrap();
        assert!(head.starts_with("HTTP/1.1 200"), "{head}");
        if peer == new {
            break;
        }
        assert_eq!(peer, first, "neither the old certificate nor the new one");
        assert!(
            Instant::now() < deadline,
            "the new certificate was not served"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}
