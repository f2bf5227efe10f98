//! The process's TLS crypto: one rustls provider for the client side, the data path to the
//! backends and the control path (mysql_async). A leaf: imports nothing of the crate.

use std::sync::Arc;

use rustls::crypto::CryptoProvider;

/// The process's rustls crypto provider: *ring*. Installed as the process default too, so
/// mysql_async (which asks rustls for the default) agrees with the data path even when
/// another crate enables a second provider.
pub fn provider() -> Arc<CryptoProvider> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let _ = CryptoProvider::install_default(rustls::crypto::ring::default_provider());
    provider
}
