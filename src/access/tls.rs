//! What client security reads from files: the TLS certificate and key the listener offers
//! (`server.tls_cert_file`, `server.tls_key_file`) and the RSA key of caching_sha2_password's
//! public key exchange (`server.rsa_private_key_file`). Read at start (a file that does not
//! load stops the start) and again with every configuration reload (SIGHUP, or a change to
//! the configuration file or to one of these files): a file that does not load then leaves
//! the previous material in force, logged.

use std::path::Path;
use std::sync::Arc;

use rsa::pkcs1::DecodeRsaPrivateKey;
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

use crate::config::{ServerConfig, TlsFiles};

/// The RSA key pair of the public key exchange.
pub struct RsaKey {
    /// The private key, to decrypt passwords.
    pub private: rsa::RsaPrivateKey,
    /// Its public half as a PEM `PUBLIC KEY` (SubjectPublicKeyInfo), what clients are sent.
    pub public_pem: String,
}

/// The loaded TLS and RSA material of one configuration.
#[derive(Clone, Default)]
pub struct ClientSecurity {
    /// Offered to clients when set.
    pub tls: Option<TlsAcceptor>,
    /// Used for full authentication over clear-text TCP when set.
    pub rsa: Option<Arc<RsaKey>>,
}

impl ClientSecurity {
    /// Reads the files `server` names. Errors name the file and what is wrong.
    pub fn load(server: &ServerConfig) -> Result<Self, String> {
        let tls = server.tls.as_ref().map(acceptor).transpose()?;
        let rsa = server
            .rsa_private_key_file
            .as_deref()
            .map(rsa_key)
            .transpose()?
            .map(Arc::new);
        Ok(Self { tls, rsa })
    }

    /// [`ClientSecurity::load`] for a reloaded configuration: what does not load keeps
    /// `previous`'s material (and is logged), so a bad new certificate never takes TLS away.
    pub fn reload(server: &ServerConfig, previous: &ClientSecurity) -> Self {
        let tls = match server.tls.as_ref().map(acceptor).transpose() {
            Ok(tls) => tls,
            Err(e) => {
                tracing::warn!(error = %e, "client TLS certificate not reloaded; the previous one stays in force");
                previous.tls.clone()
            }
        };
        let rsa = match server
            .rsa_private_key_file
            .as_deref()
            .map(rsa_key)
            .transpose()
        {
            Ok(rsa) => rsa.map(Arc::new),
            Err(e) => {
                tracing::warn!(error = %e, "RSA key not reloaded; the previous one stays in force");
                previous.rsa.clone()
            }
        };
        Self { tls, rsa }
    }
}

fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, String> {
    let cert_file = files.cert_file.display();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(&files.cert_file)
        .and_then(|certs| certs.collect::<Result<_, _>>())
        .map_err(|e| format!("server.tls_cert_file {cert_file}: {e}"))?;
    if certs.is_empty() {
        return Err(format!(
            "server.tls_cert_file {cert_file}: no certificate in it"
        ));
    }
    let key = PrivateKeyDer::from_pem_file(&files.key_file)
        .map_err(|e| format!("server.tls_key_file {}: {e}", files.key_file.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(certs, key))
        .map_err(|e| format!("server.tls_cert_file {cert_file}, server.tls_key_file: {e}"))?;
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn rsa_key(path: &Path) -> Result<RsaKey, String> {
    let what = || format!("server.rsa_private_key_file {}", path.display());
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", what()))?;
    let private = rsa::RsaPrivateKey::from_pkcs8_pem(&text)
        .or_else(|_| rsa::RsaPrivateKey::from_pkcs1_pem(&text))
        .map_err(|e| format!("{}: not an RSA private key in PEM ({e})", what()))?;
    let public_pem = private
        .to_public_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| format!("{}: {e}", what()))?;
    Ok(RsaKey {
        private,
        public_pem,
    })
}
