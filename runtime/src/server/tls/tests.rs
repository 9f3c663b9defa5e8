use super::*;

fn write_pair(dir: &Path, names: &[&str]) -> (PathBuf, PathBuf) {
    let made = rcgen::generate_simple_self_signed(
        names.iter().map(ToString::to_string).collect::<Vec<_>>(),
    )
    .unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    (cert, key)
}

#[test]
fn a_self_signed_certificate_is_made() {
    let certificates = Certificates::load(ServingCertificate::SelfSigned {
        names: vec!["pv-controller.pv-controller.svc".into()],
    })
    .unwrap();
    assert!(!certificates.leaf().is_empty());
    assert!(!certificates.reload_if_changed(), "nothing to reload");
    certificates.server_config().unwrap();
}

#[test]
fn files_are_read_again_when_they_change_and_a_broken_change_is_ignored() {
    let dir = std::env::temp_dir().join(format!("pv-controller-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = write_pair(&dir, &["first"]);
    let certificates = Certificates::load(ServingCertificate::Files {
        cert: cert.clone(),
        key: key.clone(),
    })
    .unwrap();
    let first = certificates.leaf();
    assert!(!certificates.reload_if_changed(), "unchanged");
    std::fs::write(
        &cert,
        "not a certificate, and longer than before to change the size",
    )
    .unwrap();
    assert!(
        !certificates.reload_if_changed(),
        "a broken file is not taken"
    );
    assert_eq!(certificates.leaf(), first);
    write_pair(&dir, &["second"]);
    assert!(
        certificates.reload_if_changed(),
        "the rotated pair is taken"
    );
    assert_ne!(certificates.leaf(), first);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_key_of_another_certificate_is_refused_at_load() {
    let dir = std::env::temp_dir().join(format!("pv-controller-tls-pair-{}", std::process::id()));
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    let (cert, _) = write_pair(&dir, &["first"]);
    let (_, foreign_key) = write_pair(&other, &["second"]);
    let error = Certificates::load(ServingCertificate::Files {
        cert: cert.clone(),
        key: foreign_key.clone(),
    })
    .unwrap_err();
    assert!(
        matches!(error, CertificateError::Mismatch { .. }),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        format!(
            "the private key {} does not belong to the certificate {}",
            foreign_key.display(),
            cert.display()
        )
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let error = Certificates::load(ServingCertificate::Files {
        cert: "/nonexistent/tls.crt".into(),
        key: "/nonexistent/tls.key".into(),
    })
    .unwrap_err();
    assert!(
        error.to_string().contains("/nonexistent/tls.crt"),
        "{error}"
    );
}
