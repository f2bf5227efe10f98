//! The MySQL wire protocol pieces shared by both sides of the proxy: framed packet streams
//! (on mysql_common's codec) and the packets the proxy builds or reads itself.

pub mod binary;
pub mod packets;
pub mod row;
pub mod status;
pub mod stream;

pub use stream::PacketStream;

/// Implements tokio's `AsyncRead` and `AsyncWrite` for an enum whose variants each hold one
/// stream (a `TcpStream`, a boxed TLS stream, ...), by handing each call to the variant
/// held: one `match` per call, no dynamic dispatch. Used by the client side
/// (`ClientStream`) and the backend side (`BackendStream`) alike.
macro_rules! delegate_stream_io {
    ($ty:ident { $($variant:ident),+ $(,)? }) => {
        impl tokio::io::AsyncRead for $ty {
            fn poll_read(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &mut tokio::io::ReadBuf<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => std::pin::Pin::new(s).poll_read(cx, buf),)+
                }
            }
        }

        impl tokio::io::AsyncWrite for $ty {
            fn poll_write(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                buf: &[u8],
            ) -> std::task::Poll<std::io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => std::pin::Pin::new(s).poll_write(cx, buf),)+
                }
            }

            fn poll_flush(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => std::pin::Pin::new(s).poll_flush(cx),)+
                }
            }

            fn poll_shutdown(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
            ) -> std::task::Poll<std::io::Result<()>> {
                match self.get_mut() {
                    $(Self::$variant(s) => std::pin::Pin::new(s).poll_shutdown(cx),)+
                }
            }

            fn poll_write_vectored(
                self: std::pin::Pin<&mut Self>,
                cx: &mut std::task::Context<'_>,
                bufs: &[std::io::IoSlice<'_>],
            ) -> std::task::Poll<std::io::Result<usize>> {
                match self.get_mut() {
                    $(Self::$variant(s) => std::pin::Pin::new(s).poll_write_vectored(cx, bufs),)+
                }
            }

            fn is_write_vectored(&self) -> bool {
                match self {
                    $(Self::$variant(s) => s.is_write_vectored(),)+
                }
            }
        }
    };
}
pub(crate) use delegate_stream_io;
