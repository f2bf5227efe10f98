//! Framed MySQL packets over a byte stream, on mysql_common's `PacketCodec`: used toward
//! clients and toward backends alike.

use std::io;

use bytes::BytesMut;
use mysql_common::proto::codec::PacketCodec;
use mysql_common::proto::codec::error::PacketCodecError;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// Output is flushed once this much is buffered, so long results stream.
pub const FLUSH_THRESHOLD: usize = 64 * 1024;

/// Buffers grown past this (by one large packet) are given back once empty, so a
/// connection that once carried a 16 MiB row does not keep 16 MiB for the rest of its life.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// A fresh read or write buffer's capacity.
const INITIAL_CAPACITY: usize = 16 * 1024;

/// The largest chunk payload; a packet's chunk of this length is followed by another.
const MAX_CHUNK: usize = 0xff_ffff;

/// Which side of a relay failed: the proxy treats a lost client and a lost backend apart.
#[derive(Debug)]
pub enum RelayError {
    /// Reading from the stream the packet comes from.
    Source(io::Error),
    /// Writing to the stream it goes to.
    Sink(io::Error),
}

/// A stream of MySQL packets (payloads; headers and splitting at 16 MiB handled here).
pub struct PacketStream<S> {
    stream: S,
    codec: PacketCodec,
    read_buf: BytesMut,
    /// A packet being assembled from several 16 MiB chunks; kept across reads so a
    /// cancelled read loses nothing.
    packet: BytesMut,
    write_buf: BytesMut,
    /// A write was started and not finished (a flush or a relay cancelled by a timeout, or
    /// failed): the peer may hold part of a packet, so nothing more may be framed to it.
    cut: bool,
    /// Packets written so far (a statement that failed before writing any may run again
    /// elsewhere).
    written: u64,
}

fn too_large(limit: usize) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("packet larger than the {limit} bytes allowed"),
    )
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
            read_buf: BytesMut::with_capacity(INITIAL_CAPACITY),
            packet: BytesMut::with_capacity(INITIAL_CAPACITY),
            write_buf: BytesMut::with_capacity(INITIAL_CAPACITY),
            cut: false,
            written: 0,
        }
    }

    /// Packets (or relayed chunks) written since the stream was made.
    pub fn packets_written(&self) -> u64 {
        self.written
    }

    /// Packets above `max_packet` bytes are refused from now on (a handshake reads with a
    /// small limit, the session after it with the configured one).
    pub fn set_max_packet(&mut self, max_packet: usize) {
        self.codec.max_allowed_packet = max_packet;
    }

    /// Starts a new command: sequence ids count from 0 again.
    pub fn reset_seq(&mut self) {
        self.codec.reset_seq_id();
    }

    /// The next packet's payload; `None` when the peer closed cleanly between packets.
    ///
    /// Small packets are split off one shared buffer (no allocation per packet once the
    /// packets handed out before are dropped); a packet above [`KEEP_CAPACITY`] takes its
    /// buffer with it.
    pub async fn read_packet(&mut self) -> io::Result<Option<BytesMut>> {
        loop {
            if !self.read_buf.is_empty()
                && self
                    .codec
                    .decode(&mut self.read_buf, &mut self.packet)
                    .map_err(codec_error)?
            {
                if self.read_buf.is_empty() && self.read_buf.capacity() > KEEP_CAPACITY {
                    self.read_buf = BytesMut::with_capacity(INITIAL_CAPACITY);
                }
                if self.packet.len() > KEEP_CAPACITY {
                    let packet = std::mem::take(&mut self.packet);
                    self.packet = BytesMut::with_capacity(INITIAL_CAPACITY);
                    return Ok(Some(packet));
                }
                return Ok(Some(self.packet.split()));
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
            cut: self.cut,
            written: self.written,
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
        self.written += 1;
        let mut src = payload;
        self.codec
            .encode(&mut src, &mut self.write_buf)
            .map_err(codec_error)
    }

    /// Whether a write stopped partway (cancelled or failed): the peer may hold part of a
    /// packet, so the only clean thing left is to close the connection.
    pub fn is_cut(&self) -> bool {
        self.cut
    }

    /// Bytes queued and not yet sent.
    pub fn pending(&self) -> usize {
        self.write_buf.len()
    }

    /// Sends what is queued.
    ///
    /// # Errors
    ///
    /// The stream's; and `BrokenPipe` at once when an earlier write stopped partway
    /// ([`PacketStream::is_cut`]): writing the queue again would repeat what the peer may
    /// already hold, so it is dropped instead.
    pub async fn flush(&mut self) -> io::Result<()> {
        if self.cut {
            self.write_buf.clear();
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "an earlier write to this peer stopped partway",
            ));
        }
        if !self.write_buf.is_empty() {
            self.cut = true;
            self.stream.write_all(&self.write_buf).await?;
            self.cut = false;
            self.write_buf.clear();
            if self.write_buf.capacity() > KEEP_CAPACITY {
                self.write_buf = BytesMut::with_capacity(INITIAL_CAPACITY);
            }
        }
        self.stream.flush().await
    }

    /// The payload length of the next packet's first chunk, once its header is read
    /// (`Ok(None)`: the peer closed first). Only between packets, when no chunk of a packet is
    /// held: lets a caller relay a large packet with [`PacketStream::relay_packet`] instead
    /// of reading it whole.
    pub async fn peek_length(&mut self) -> io::Result<Option<usize>> {
        if !self.packet.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a packet is half read",
            ));
        }
        while self.read_buf.len() < 4 {
            self.read_buf.reserve(INITIAL_CAPACITY);
            if self.stream.read_buf(&mut self.read_buf).await? == 0 {
                return Ok(None);
            }
        }
        let h = &self.read_buf[..3];
        Ok(Some(
            usize::from(h[0]) | usize::from(h[1]) << 8 | usize::from(h[2]) << 16,
        ))
    }

    /// Relays the next packet to `to` as it arrives, chunk by chunk and in pieces of about
    /// [`FLUSH_THRESHOLD`] bytes read at a time, never holding it whole: for rows of many
    /// megabytes. Sequence ids are checked on this side (by feeding the codec each chunk's
    /// header as an empty chunk) and given by `to`'s codec on the other, so both codecs go
    /// on in step. What `to` had queued is sent first. Returns the payload's length.
    pub async fn relay_packet<T>(&mut self, to: &mut PacketStream<T>) -> Result<u64, RelayError>
    where
        T: AsyncRead + AsyncWrite + Unpin,
    {
        to.flush().await.map_err(RelayError::Sink)?;
        let mut total = 0u64;
        loop {
            let len = self
                .peek_length()
                .await
                .map_err(RelayError::Source)?
                .ok_or_else(|| {
                    RelayError::Source(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "connection closed inside a packet",
                    ))
                })?;
            // The limits both codecs would apply to the whole packet.
            let limit = self.codec.max_allowed_packet;
            if total as usize + len > limit {
                return Err(RelayError::Source(too_large(limit)));
            }
            if total as usize + len > to.codec.max_allowed_packet {
                return Err(RelayError::Sink(too_large(to.codec.max_allowed_packet)));
            }
            let seq = self.read_buf[3];
            // The codec checks and advances its sequence id on an empty chunk with the same
            // id; it must come out as one empty packet.
            let mut header = BytesMut::from(&[0u8, 0, 0, seq][..]);
            let mut empty = BytesMut::new();
            let decoded = self
                .codec
                .decode(&mut header, &mut empty)
                .map_err(|e| RelayError::Source(codec_error(e)))?;
            if !decoded || !empty.is_empty() {
                return Err(RelayError::Source(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "packet chunk out of sequence",
                )));
            }
            bytes::Buf::advance(&mut self.read_buf, 4);
            let out_seq = to.take_seq();
            let out_header = [len as u8, (len >> 8) as u8, (len >> 16) as u8, out_seq];
            // Until the last chunk is written, the other side holds part of a packet.
            to.cut = true;
            to.stream
                .write_all(&out_header)
                .await
                .map_err(RelayError::Sink)?;
            let mut left = len;
            while left > 0 {
                if self.read_buf.is_empty() {
                    self.read_buf.reserve(FLUSH_THRESHOLD);
                    let n = self
                        .stream
                        .read_buf(&mut self.read_buf)
                        .await
                        .map_err(RelayError::Source)?;
                    if n == 0 {
                        return Err(RelayError::Source(io::Error::new(
                            io::ErrorKind::UnexpectedEof,
                            "connection closed inside a packet",
                        )));
                    }
                }
                let n = left.min(self.read_buf.len());
                to.stream
                    .write_all(&self.read_buf[..n])
                    .await
                    .map_err(RelayError::Sink)?;
                bytes::Buf::advance(&mut self.read_buf, n);
                left -= n;
            }
            total += len as u64;
            if len < MAX_CHUNK {
                to.cut = false;
                return Ok(total);
            }
        }
    }

    /// The sequence id the next chunk written takes, advancing the codec past it (by
    /// encoding an empty chunk and reading its header: the codec keeps the id private).
    fn take_seq(&mut self) -> u8 {
        self.written += 1;
        let mut scratch = BytesMut::with_capacity(4);
        // An empty payload is one header; it cannot exceed any packet limit.
        let _ = self.codec.encode(&mut &[][..], &mut scratch);
        scratch.get(3).copied().unwrap_or(0)
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
            cut: self.cut,
            written: self.written,
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

    /// `payload` framed as MySQL chunks from sequence id `seq`, as a server writes it.
    fn framed(payload: &[u8], mut seq: u8) -> Vec<u8> {
        let mut out = Vec::new();
        let mut last_len = 0;
        for chunk in payload.chunks(MAX_CHUNK) {
            let len = chunk.len();
            out.extend_from_slice(&[len as u8, (len >> 8) as u8, (len >> 16) as u8, seq]);
            out.extend_from_slice(chunk);
            seq = seq.wrapping_add(1);
            last_len = len;
        }
        if payload.is_empty() || last_len == MAX_CHUNK {
            out.extend_from_slice(&[0, 0, 0, seq]);
        }
        out
    }

    /// Relays one packet of `len` bytes (after a small one) through `relay_packet` and reads
    /// what the other side gets with an ordinary codec.
    async fn relayed(len: usize) {
        let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let (mut backend, backend_side) = tokio::io::duplex(1 << 16);
        let (client_side, client) = tokio::io::duplex(1 << 16);
        let mut wire = framed(b"small", 0);
        wire.extend(framed(&payload, 1));
        wire.extend(framed(b"after", 1 + (len / MAX_CHUNK) as u8 + 1));
        let writer = tokio::spawn(async move { backend.write_all(&wire).await.unwrap() });
        let mut from = PacketStream::new(backend_side, 64 << 20);
        let mut to = PacketStream::new(client_side, 64 << 20);
        let mut reader = PacketStream::new(client, 64 << 20);
        let reading = tokio::spawn(async move {
            let mut got = Vec::new();
            for _ in 0..3 {
                got.push(reader.expect_packet().await.unwrap().to_vec());
            }
            got
        });
        // The small packet goes through the codecs; the large one is relayed in pieces.
        let first = from.read_packet().await.unwrap().unwrap();
        to.write_packet(&first).unwrap();
        let next = from.peek_length().await.unwrap().unwrap();
        assert_eq!(next, len.min(MAX_CHUNK));
        assert_eq!(from.relay_packet(&mut to).await.unwrap(), len as u64);
        // Both codecs went on in step: the packet after reads and writes normally.
        let after = from.read_packet().await.unwrap().unwrap();
        to.write_packet(&after).unwrap();
        to.flush().await.unwrap();
        writer.await.unwrap();
        let got = reading.await.unwrap();
        assert_eq!(got[0], b"small");
        assert!(
            got[1] == payload,
            "the relayed payload differs ({} bytes)",
            got[1].len()
        );
        assert_eq!(got[2], b"after");
    }

    #[tokio::test]
    async fn a_large_packet_is_relayed_in_pieces_with_sequence_ids_in_step() {
        relayed(300_000).await;
    }

    #[tokio::test]
    async fn a_packet_of_several_chunks_is_relayed_chunk_by_chunk() {
        relayed(MAX_CHUNK + 10).await;
        // Exactly one full chunk: an empty chunk ends it.
        relayed(MAX_CHUNK).await;
    }

    #[tokio::test]
    async fn a_relayed_chunk_out_of_sequence_is_an_error_of_the_source() {
        let (mut backend, backend_side) = tokio::io::duplex(1 << 16);
        let (client_side, _client) = tokio::io::duplex(1 << 16);
        backend.write_all(&framed(&[7u8; 1000], 5)).await.unwrap();
        let mut from = PacketStream::new(backend_side, 64 << 20);
        let mut to = PacketStream::new(client_side, 64 << 20);
        match from.relay_packet(&mut to).await {
            Err(RelayError::Source(e)) => assert_eq!(e.kind(), io::ErrorKind::InvalidData),
            other => panic!("expected a source error, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_relayed_packet_above_the_other_sides_limit_is_refused_before_a_byte_is_sent() {
        let (mut backend, backend_side) = tokio::io::duplex(1 << 20);
        let (client_side, _client) = tokio::io::duplex(1 << 16);
        backend
            .write_all(&framed(&[1u8; 300_000], 0))
            .await
            .unwrap();
        let mut from = PacketStream::new(backend_side, 64 << 20);
        let mut to = PacketStream::new(client_side, 100_000);
        match from.relay_packet(&mut to).await {
            Err(RelayError::Sink(e)) => assert!(e.to_string().contains("100000"), "{e}"),
            other => panic!("expected the client side's limit, got {other:?}"),
        }
        assert!(!to.is_cut(), "nothing of the packet was written");
    }

    #[tokio::test]
    async fn a_relay_stopped_partway_leaves_the_stream_cut() {
        let (mut backend, backend_side) = tokio::io::duplex(1 << 20);
        // The client reads nothing: the relay blocks once 1 KiB is written.
        let (client_side, _client) = tokio::io::duplex(1024);
        backend
            .write_all(&framed(&[1u8; 300_000], 0))
            .await
            .unwrap();
        let mut from = PacketStream::new(backend_side, 64 << 20);
        let mut to = PacketStream::new(client_side, 64 << 20);
        let relay = from.relay_packet(&mut to);
        let timed = tokio::time::timeout(std::time::Duration::from_millis(100), relay).await;
        assert!(timed.is_err(), "the relay cannot finish");
        assert!(to.is_cut(), "the client holds part of a packet");
    }

    #[tokio::test]
    async fn an_upgrade_with_bytes_buffered_is_refused() {
        let mut s = wire(b"hello").await;
        s.read_packet().await.unwrap().unwrap();
        let e = s.upgrade(|inner| async move { Ok(inner) }).await;
        assert!(e.is_err(), "the bytes behind the packet would be lost");
    }
}
