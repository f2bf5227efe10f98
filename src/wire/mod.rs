//! The client side of the wire: the byte stream under a client connection ([`stream`]:
//! TCP, TLS or a Unix socket), the connection's handshake and authentication
//! ([`handshake`]), and [`client::Client`], which writes replies (OK, ERR, EOF, result sets)
//! as the client negotiated them.
//!
//! It knows no session, plan, pool or backend connection: the engine writes its replies
//! through a [`client::Client`], and the frontend's command loop reads commands from it.

pub mod client;
pub mod handshake;
pub mod stream;
