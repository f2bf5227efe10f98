//! Framed MySQL packets over a byte stream, on mysql_common's `PacketCodec`: used toward
//! clients and toward backends alike.

use std::io;

use bytes::BytesMut;
use mysql_common::proto::codec::PacketCodec;
use mysql_common::proto::codec::error::PacketCodecError;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Output is flushed once this much is buffered, so long results stream.
pub const FLUSH_THRESHOLD: usize = 64 * 1024;

/// A stream of MySQL packets (payloads; headers and splitting at 16 MiB handled here).
pub struct PacketStream<S> {
    stream: S,
    codec: PacketCodec,
    read_buf: BytesMut,
    /// A packet being assembled from several 16 MiB chunks; kept across reads so a
    /// cancelled read loses nothing.
    packet: BytesMut,
    write_buf: BytesMut,
}

fn codec_error(e: PacketCodecError) -> io::Error {
    match e {
        PacketCodecError::Io(e) => e,
        other => io::Error::new(io::ErrorKind::InvalidData, other.to_string()),
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> PacketStream<S> {
    /// Wraps a stream; packets above `max_packet` bytes are refused.
    pub fn new(stream: S, max_packet: usize) -> Self {
        let mut codec = PacketCodec::default();
        codec.max_allowed_packet = max_packet;
        Self {
            stream,
            codec,
            read_buf: BytesMut::with_capacity(16 * 1024),
            packet: BytesMut::new(),
            write_buf: BytesMut::with_capacity(16 * 1024),
        }
    }

    /// Starts a new command: sequence ids count from 0 again.
    pub fn reset_seq(&mut self) {
        self.codec.reset_seq_id();
    }

    /// The next packet's payload; `None` when the peer closed cleanly between packets.
    pub async fn read_packet(&mut self) -> io::Result<Option<BytesMut>> {
        loop {
            if !self.read_buf.is_empty()
                && self
                    .codec
                    .decode(&mut self.read_buf, &mut self.packet)
                    .map_err(codec_error)?
            {
                return Ok(Some(std::mem::take(&mut self.packet)));
            }
            if self.read_buf.capacity() - self.read_buf.len() < 4096 {
                self.read_buf.reserve(16 * 1024);
            }
            let n = self.stream.read_buf(&mut self.read_buf).await?;
            if n == 0 {
                if self.read_buf.is_empty() && self.packet.is_empty() {
                    return Ok(None);
                }
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "connection closed inside a packet",
                ));
            }
        }
    }

    /// Reads one packet without reading a byte past its end: for the packet after which
    /// the stream changes hands (the client's SSLRequest, right behind which its TLS
    /// handshake may already be on the wire). One chunk only (below 16 MiB); `None` when
    /// the peer closed before sending anything.
    pub async fn read_packet_unbuffered(&mut self) -> io::Result<Option<BytesMut>> {
        if !self.read_buf.is_empty() {
            return self.read_packet().await;
        }
        let mut header = [0u8; 4];
        match self.stream.read_exact(&mut header[..1]).await {
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
            other => other?,
        };
        self.stream.read_exact(&mut header[1..]).await?;
        let len =
            usize::from(header[0]) | usize::from(header[1]) << 8 | usize::from(header[2]) << 16;
        if len >= 0xff_ffff || len > self.codec.max_allowed_packet {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "packet too large at this step",
            ));
        }
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await?;
        self.read_buf.extend_from_slice(&header);
        self.read_buf.extend_from_slice(&body);
        self.read_packet().await
    }

    /// Hands the stream to `f` (a TLS handshake) and goes on over what it returns, with
    /// the same sequence ids and settings. Refused when bytes are buffered either way:
    /// they would belong to the other side of the change.
    pub async fn upgrade<T, F, Fut>(self, f: F) -> io::Result<PacketStream<T>>
    where
        F: FnOnce(S) -> Fut,
        Fut: std::future::Future<Output = io::Result<T>>,
    {
        if !self.read_buf.is_empty() || !self.packet.is_empty() || !self.write_buf.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "data buffered across a transport upgrade",
            ));
        }
        let stream = f(self.stream).await?;
        Ok(PacketStream {
            stream,
            codec: self.codec,
            read_buf: self.read_buf,
            packet: self.packet,
            write_buf: self.write_buf,
        })
    }

    /// Like [`PacketStream::read_packet`], but a clean close is an error too.
    pub async fn expect_packet(&mut self) -> io::Result<BytesMut> {
        self.read_packet()
            .await?
            .ok_or_else(|| io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed"))
    }

    /// Queues one packet; call [`PacketStream::flush`] to send.
    pub fn write_packet(&mut self, payload: &[u8]) -> io::Result<()> {
        let mut src = payload;
        self.codec
            .encode(&mut src, &mut self.write_buf)
            .map_err(codec_error)
    }

    /// Bytes queued and not yet sent.
    pub fn pending(&self) -> usize {
        self.write_buf.len()
    }

    /// Sends what is queued.
    pub async fn flush(&mut self) -> io::Result<()> {
        if !self.write_buf.is_empty() {
            self.stream.write_all(&self.write_buf).await?;
            self.write_buf.clear();
        }
        self.stream.flush().await
    }

    /// Sends what is queued once it passes [`FLUSH_THRESHOLD`].
    pub async fn flush_if_full(&mut self) -> io::Result<()> {
        if self.write_buf.len() >= FLUSH_THRESHOLD {
            self.flush().await?;
        }
        Ok(())
    }

    /// The underlying stream.
    pub fn get_ref(&self) -> &S {
        &self.stream
    }

    /// Puts another byte stream under the same codec (a TLS upgrade after SSLRequest): `f`
    /// gets the old stream and returns the new one; sequence ids go on. Bytes already read
    /// and not yet taken as packets would be lost, so they are an error.
    pub async fn map_stream<T, F, Fut>(self, f: F) -> io::Result<PacketStream<T>>
    where
        F: FnOnce(S) -> Fut,
        Fut: std::future::Future<Output = io::Result<T>>,
    {
        if self.buffered() > 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "the peer sent data before the TLS handshake",
            ));
        }
        Ok(PacketStream {
            stream: f(self.stream).await?,
            codec: self.codec,
            read_buf: self.read_buf,
            packet: self.packet,
            write_buf: self.write_buf,
        })
    }

    /// The underlying stream, mutably (a backend connection's idle probe reads through it).
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    /// Bytes received and not yet read as packets.
    pub fn buffered(&self) -> usize {
        self.read_buf.len() + self.packet.len()
    }

    /// Shuts the write side down.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.stream.shutdown().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 3-byte packet (sequence id 0) with `after` right behind it, as one write.
    async fn wire(after: &[u8]) -> PacketStream<tokio::io::DuplexStream> {
        let (mut client, server) = tokio::io::duplex(1024);
        let mut bytes = vec![3, 0, 0, 0, 1, 2, 3];
        bytes.extend_from_slice(after);
        client.write_all(&bytes).await.unwrap();
        // Kept open: the server side must not see an end of stream.
        std::mem::forget(client);
        PacketStream::new(server, 1 << 20)
    }

    #[tokio::test]
    async fn an_unbuffered_read_leaves_what_follows_on_the_wire_for_the_upgrade() {
        // The SSLRequest and the start of the TLS handshake in one segment.
        let mut s = wire(b"hello").await;
        let packet = s.read_packet_unbuffered().await.unwrap().unwrap();
        assert_eq!(&packet[..], [1, 2, 3]);
        s.upgrade(|mut inner| async move {
            let mut rest = [0u8; 5];
            inner.read_exact(&mut rest).await?;
            assert_eq!(&rest, b"hello");
            Ok(inner)
        })
        .await
        .unwrap();
    }

    #[tokio::test]
    async fn an_upgrade_with_bytes_buffered_is_refused() {
        let mut s = wire(b"hello").await;
        s.read_packet().await.unwrap().unwrap();
        let e = s.upgrade(|inner| async move { Ok(inner) }).await;
        assert!(e.is_err(), "the bytes behind the packet would be lost");
    }
}
