//! The MySQL wire protocol pieces shared by both sides of the proxy: framed packet streams
//! (on mysql_common's codec) and the packets the proxy builds or reads itself.

pub mod binary;
pub mod packets;
pub mod stream;

pub use stream::PacketStream;
