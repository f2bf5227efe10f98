//! Credentials and backend TLS, validated from whole configurations.

use super::validate;
use crate::config::credential::Credential;

const DEMO: &str = include_str!("../../../config/demo.toml");

fn with(from: &str, to: &str) -> String {
    assert!(DEMO.contains(from), "demo.toml lacks {from:?}");
    DEMO.replacen(from, to, 1)
}

#[test]
fn passwords_come_from_the_file_an_environment_variable_or_a_secret_file() {
    let dir = std::env::temp_dir().join(format!("routekey-secret-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("ds1-password");
    std::fs::write(&file, "s3cret\n").unwrap();
    let text = with(
        "name = \"app\"\npassword = \"app\"",
        "name = \"app\"\npassword_env = \"PATH\"",
    )
    .replacen(
        "address = \"127.0.0.1:33062\"\nuser = \"root\"\npassword = \"\"",
        &format!(
            "address = \"127.0.0.1:33062\"\nuser = \"root\"\npassword_file = \"{}\"",
            file.display()
        ),
        1,
    );
    let config = validate(&text, "t.toml").unwrap();
    let path = std::env::var("PATH").unwrap();
    assert_eq!(config.users[0].credential, Credential::Password(path));
    assert_eq!(
        config.datasources[1].password, "s3cret",
        "one newline dropped"
    );
    for (from, to, message) in [
        (
            "password = \"app\"",
            "password_env = \"ROUTEKEY_TEST_NOT_SET_ANYWHERE\"",
            "ROUTEKEY_TEST_NOT_SET_ANYWHERE is not set",
        ),
        (
            "password = \"app\"",
            "password_file = \"/nonexistent/secret\"",
            "cannot read /nonexistent/secret",
        ),
        (
            "password = \"app\"",
            "password = \"app\"\npassword_env = \"PATH\"",
            "only one of",
        ),
        (
            "password = \"app\"",
            "",
            "one of password, password_env, password_file or password_hash",
        ),
    ] {
        let e = validate(&with(from, to), "t.toml").unwrap_err();
        assert!(e.message.contains(message), "{}", e.message);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn backend_tls_modes_and_their_ca_file() {
    use crate::config::model::BackendTls;
    let ds0 = "address = \"127.0.0.1:33061\"\n";
    let config = validate(DEMO, "t").unwrap();
    assert_eq!(config.datasources[0].tls, BackendTls::Off);
    assert!(config.datasources[0].tls_ca_certs.is_empty());
    // required needs no CA file.
    let config = validate(&with(ds0, &format!("{ds0}tls = \"required\"\n")), "t").unwrap();
    assert_eq!(config.datasources[0].tls, BackendTls::Required);
    // The verifying modes do.
    for mode in ["verify_ca", "verify_identity"] {
        let e = validate(&with(ds0, &format!("{ds0}tls = \"{mode}\"\n")), "t")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "datasources.ds0.tls_ca_file: tls = verify_ca and verify_identity need a CA file"
            ),
            "{e}"
        );
    }
    let e = validate(&with(ds0, &format!("{ds0}tls = \"on\"\n")), "t")
        .unwrap_err()
        .to_string();
    assert!(e.contains("unknown variant `on`"), "{e}");
    // The file must exist and hold certificates.
    let dir = std::env::temp_dir().join(format!("routekey-ca-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let with_file = |path: &std::path::Path| {
        with(
            ds0,
            &format!(
                "{ds0}tls = \"verify_ca\"\ntls_ca_file = \"{}\"\n",
                path.display()
            ),
        )
    };
    let e = validate(&with_file(&dir.join("missing.pem")), "t")
        .unwrap_err()
        .to_string();
    assert!(e.contains("tls_ca_file: cannot read"), "{e}");
    let empty = dir.join("empty.pem");
    std::fs::write(&empty, "not a certificate\n").unwrap();
    let e = validate(&with_file(&empty), "t").unwrap_err().to_string();
    assert!(e.contains("holds no CERTIFICATE block"), "{e}");
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, TEST_CA).unwrap();
    let config = validate(&with_file(&ca), "t").unwrap();
    assert_eq!(config.datasources[0].tls, BackendTls::VerifyCa);
    assert_eq!(config.datasources[0].tls_ca_certs.len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A self-signed CA certificate (openssl req -x509), only parsed here.
const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBijCCATGgAwIBAgIUQGlSzMF7oZg2pnHazMnQ9HoKmPMwCgYIKoZIzj0EAwIw
GzEZMBcGA1UEAwwQcm91dGVrZXkgdGVzdCBDQTAeFw0yNjEyMDIwNDEwNDZaFw0z
NjExMjkwNDEwNDZaMBsxGTAXBgNVBAMMEHJvdXRla2V5IHRlc3QgQ0EwWTATBgcq
hkjOPQIBBggqhkjOPQMBBwNCAATy3amzwEr0WuTVSSWTt39WSvsInDmrNN9CkSGW
r9tKjczUaYS3YPQ3G84d3FOvN4eOiqDrw5cpnLT6gMVubci8o1MwUTAdBgNVHQ4E
FgQUn45z9XW2356wl8oc5pSqo6ZqH9swHwYDVR0jBBgwFoAUn45z9XW2356wl8oc
5pSqo6ZqH9swDwYDVR0TAQH/BAUwAwEB/zAKBggqhkjOPQQDAgNHADBEAiAdhF1a
gI+FA1swwrNvvU6PduZpag1zpAnSgIWtruQNdAIgRWSD5KpRcc6Vl07wGuJJEBVM
OBbUqWJo7/Mj9zgCm6I=
-----END CERTIFICATE-----
";
