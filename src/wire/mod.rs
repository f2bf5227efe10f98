//! The client side of the wire: the byte stream under a client connection ([`stream`]:
//! TCP, TLS or a Unix socket), the connection's handshake and authentication
//! ([`handshake`]), and [`client::Client`], which writes replies (OK, ERR, EOF, result sets)
//! as the client negotiated them.
//!
//! It knows no plan, pool or backend connection, and of the session only its handle in the
//! registry (a `KILL` ends a write that waits for the client): the engine writes its replies
//! through a [`client::Client`], and the frontend's command loop reads commands from it.

pub mod client;
pub mod handshake;
pub mod stream;
