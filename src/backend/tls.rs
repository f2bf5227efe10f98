//! TLS toward backends on the data path: the stream a backend connection runs on (plain TCP,
//! or TLS after the SSLRequest upgrade) and the rustls client configuration for each `tls`
//! mode of a datasource (MySQL's `--ssl-mode` meanings, see [`BackendTls`]).
//!
//! The control path (mysql_async) gets the same choices through
//! [`crate::route::index::control_ssl_opts`].

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::Context;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio::io::{AsyncRead, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use crate::config::{BackendTls, Datasource};

/// The byte stream of one backend connection. An enum rather than a boxed trait object, so
/// the plain case costs one branch per read or write and nothing else.
#[derive(Debug)]
pub enum BackendStream {
    /// Plain TCP (`tls = "off"`), and every connection until the SSLRequest upgrade.
    Plain(TcpStream),
    /// TLS over TCP (boxed: the rustls state is large, the plain variant small).
    Tls(Box<TlsStream<TcpStream>>),
}

impl BackendStream {
    /// Whether the connection is encrypted (caching_sha2_password may then send the
    /// password itself instead of asking for the server's RSA key).
    pub fn is_tls(&self) -> bool {
        matches!(self, Self::Tls(_))
    }

    /// For an idle connection: whether it is still open and the server sent nothing. One
    /// non-blocking read attempt, no round trip. On TLS, records that carry no data
    /// (a session ticket, a key update) are consumed and do not count as data.
    pub fn idle_and_open(&mut self) -> bool {
        match self {
            Self::Plain(tcp) => {
                let mut probe = [0u8; 1];
                matches!(tcp.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
            }
            Self::Tls(tls) => {
                let mut probe = [0u8; 1];
                let mut buf = ReadBuf::new(&mut probe);
                let mut cx = Context::from_waker(std::task::Waker::noop());
                Pin::new(tls.as_mut())
                    .poll_read(&mut cx, &mut buf)
                    .is_pending()
            }
        }
    }

    /// Replaces the plain stream with TLS over it: the client side of the TLS handshake,
    /// with `connector`, checking the certificate against `name` as the mode asks.
    /// Errors carry rustls's reason (an unknown issuer, a name mismatch, no TLS offered).
    pub async fn upgrade(
        self,
        connector: &TlsConnector,
        name: ServerName<'static>,
    ) -> io::Result<Self> {
        match self {
            Self::Plain(tcp) => Ok(Self::Tls(Box::new(connector.connect(name, tcp).await?))),
            Self::Tls(_) => Err(io::Error::other("the connection already uses TLS")),
        }
    }
}

crate::protocol::delegate_stream_io!(BackendStream { Plain, Tls });

/// The TLS client for a datasource, or `None` for `tls = "off"`. Errors (a CA the rustls
/// store refuses) are messages for the datasource's connect error.
pub fn connector(ds: &Datasource) -> Result<Option<TlsConnector>, String> {
    if ds.tls == BackendTls::Off {
        return Ok(None);
    }
    let provider = crate::crypto::provider();
    let verifier = BackendVerifier::new(ds, &provider)?;
    let config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier))
        .with_no_client_auth();
    Ok(Some(TlsConnector::from(Arc::new(config))))
}

/// The name the server's certificate is checked against (`verify_identity`): the host of
/// `address`, a DNS name or an IP address (brackets of an IPv6 literal removed).
pub fn server_name(ds: &Datasource) -> Result<ServerName<'static>, String> {
    let host = ds.address.rsplit_once(':').map_or(&*ds.address, |(h, _)| h);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_owned())
        .map_err(|e| format!("`{host}` is not a host name for TLS ({e})"))
}

/// Checks a backend's certificate as the datasource's `tls` mode says.
#[derive(Debug)]
struct BackendVerifier {
    mode: BackendTls,
    /// The chain and name check against the datasource's CA (`None` for `required`).
    webpki: Option<Arc<WebPkiServerVerifier>>,
    /// Handshake signatures are checked in every mode: `required` skips the certificate,
    /// not the proof that the peer holds its key.
    algorithms: WebPkiSupportedAlgorithms,
}

impl BackendVerifier {
    fn new(ds: &Datasource, provider: &Arc<CryptoProvider>) -> Result<Self, String> {
        let webpki = if ds.tls == BackendTls::Required {
            None
        } else {
            let mut roots = RootCertStore::empty();
            for der in &ds.tls_ca_certs {
                roots
                    .add(CertificateDer::from(der.clone()))
                    .map_err(|e| format!("tls_ca_file: unusable CA certificate ({e})"))?;
            }
            let verifier =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| format!("tls_ca_file: {e}"))?;
            Some(verifier)
        };
        Ok(Self {
            mode: ds.tls,
            webpki,
            algorithms: provider.signature_verification_algorithms,
        })
    }
}

impl ServerCertVerifier for BackendVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = &self.webpki else {
            return Ok(ServerCertVerified::assertion());
        };
        let verdict =
            webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now);
        match verdict {
            // The chain was checked before the name: verify_ca stops there.
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.mode == BackendTls::VerifyCa => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ds(address: &str) -> Datasource {
        Datasource {
            name: "ds0".into(),
            address: address.into(),
            members: vec![address.into()],
            cluster: false,
            user: "u".into(),
            password: String::new(),
            database: None,
            pool_size: 1,
            connect_timeout: std::time::Duration::from_secs(1),
            checkout_timeout: std::time::Duration::from_secs(1),
            idle_timeout: std::time::Duration::from_secs(1),
            query_timeout: std::time::Duration::from_secs(1),
            tls: BackendTls::Required,
            tls_ca_certs: Vec::new(),
        }
    }

    #[test]
    fn server_names_come_from_the_address() {
        assert_eq!(
            server_name(&ds("db.example:3306")).unwrap(),
            ServerName::try_from("db.example").unwrap()
        );
        assert!(matches!(
            server_name(&ds("127.0.0.1:3306")).unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(matches!(
            server_name(&ds("[::1]:3306")).unwrap(),
            ServerName::IpAddress(_)
        ));
        assert!(server_name(&ds("bad name:3306")).is_err());
    }

    #[test]
    fn off_needs_no_connector_and_required_needs_no_ca() {
        let mut d = ds("127.0.0.1:3306");
        assert!(connector(&d).unwrap().is_some());
        d.tls = BackendTls::Off;
        assert!(connector(&d).unwrap().is_none());
    }
}
