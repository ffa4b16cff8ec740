//! `pods/portforward` as kubectl 1.32 speaks it by default: a websocket with subprotocol
//! `SPDY/3.1+portforward.k8s.io` that tunnels a SPDY/3.1 session (raw SPDY bytes in binary
//! messages). Per forwarded connection the client opens an `error` and a `data` stream
//! (headers `streamType`, `port`, `requestID`); the data stream is joined to a TCP
//! connection to the pod's IP and port, and a failure to connect is written on the error
//! stream. Header blocks are zlib with the SPDY/3 dictionary: inflated with miniz_oxide
//! (the dictionary preloaded as history), and ours are sent as stored (uncompressed)
//! blocks ended by a sync flush, which every inflater accepts. SPDY flow control is not enforced (spdystream,
//! the client library, does not use it either).

use super::spdy_dictionary::SPDY3_DICTIONARY;
use futures::{SinkExt, StreamExt};
use miniz_oxide::inflate::core::{decompress, inflate_flags, DecompressorOxide};
use miniz_oxide::inflate::TINFLStatus;
use std::collections::HashMap;
use std::net::Ipv4Addr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// The websocket subprotocol of tunneled port forwarding.
pub const PROTOCOL: &str = "SPDY/3.1+portforward.k8s.io";

const SPDY_VERSION: u16 = 3;
const SYN_STREAM: u16 = 1;
const SYN_REPLY: u16 = 2;
const RST_STREAM: u16 = 3;
const PING: u16 = 6;
const GOAWAY: u16 = 7;
const FLAG_FIN: u8 = 0x01;
/// Largest DATA payload sent in one frame.
const DATA_MAX: usize = 32 * 1024;

/// Inflates the peer's header blocks (one zlib stream for the whole session).
struct HeaderInflater {
    state: Box<DecompressorOxide>,
    out: Vec<u8>,
    pos: usize,
    header_seen: bool,
}

impl HeaderInflater {
    fn new() -> Self {
        Self {
            state: Box::default(),
            out: SPDY3_DICTIONARY.to_vec(),
            pos: SPDY3_DICTIONARY.len(),
            header_seen: false,
        }
    }

    /// The decompressed bytes of one header block.
    fn inflate(&mut self, mut input: &[u8]) -> Option<Vec<u8>> {
        if !self.header_seen {
            let flg = *input.get(1)?;
            let skip = if flg & 0x20 != 0 { 6 } else { 2 };
            input = input.get(skip..)?;
            self.header_seen = true;
        }
        let start = self.pos;
        let flags = inflate_flags::TINFL_FLAG_HAS_MORE_INPUT
            | inflate_flags::TINFL_FLAG_USING_NON_WRAPPING_OUTPUT_BUF;
        loop {
            if self.out.len() < self.pos + 64 * 1024 {
                self.out.resize(self.pos + 64 * 1024, 0);
            }
            let (status, used, written) =
                decompress(&mut self.state, input, &mut self.out, self.pos, flags);
            self.pos += written;
            input = &input[used..];
            match status {
                TINFLStatus::NeedsMoreInput | TINFLStatus::Done if input.is_empty() => break,
                TINFLStatus::HasMoreOutput | TINFLStatus::NeedsMoreInput => continue,
                TINFLStatus::Done => break,
                _ => return None,
            }
        }
        Some(self.out[start..self.pos].to_vec())
    }
}

/// Deflates our header blocks as stored blocks of one zlib stream.
struct HeaderDeflater {
    started: bool,
}

impl HeaderDeflater {
    fn block(&mut self, raw: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        if !self.started {
            out.extend([0x78, 0x01]);
            self.started = true;
        }
        for chunk in raw.chunks(0xffff) {
            let len = chunk.len() as u16;
            out.push(0x00);
            out.extend(len.to_le_bytes());
            out.extend((!len).to_le_bytes());
            out.extend(chunk);
        }
        // A sync flush (empty stored block) ends every header block, as zlib's
        // Z_SYNC_FLUSH does: Go's inflater then hands out the block's bytes without
        // reading past the frame.
        out.extend([0x00, 0x00, 0x00, 0xff, 0xff]);
        out
    }
}

fn parse_headers(raw: &[u8]) -> HashMap<String, String> {
    let mut h = HashMap::new();
    let u32_at = |b: &[u8], i: usize| -> Option<usize> {
        Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?) as usize)
    };
    let Some(n) = u32_at(raw, 0) else { return h };
    let mut i = 4;
    for _ in 0..n {
        let Some(kl) = u32_at(raw, i) else { break };
        let Some(k) = raw.get(i + 4..i + 4 + kl) else {
            break;
        };
        i += 4 + kl;
        let Some(vl) = u32_at(raw, i) else { break };
        let Some(v) = raw.get(i + 4..i + 4 + vl) else {
            break;
        };
        i += 4 + vl;
        h.insert(
            String::from_utf8_lossy(k).to_ascii_lowercase(),
            String::from_utf8_lossy(v).into_owned(),
        );
    }
    h
}

fn control(kind: u16, flags: u8, data: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(8 + data.len());
    f.extend((0x8000 | SPDY_VERSION).to_be_bytes());
    f.extend(kind.to_be_bytes());
    f.push(flags);
    f.extend(&(data.len() as u32).to_be_bytes()[1..]);
    f.extend(data);
    f
}

fn data_frame(stream: u32, flags: u8, data: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(8 + data.len());
    f.extend((stream & 0x7fff_ffff).to_be_bytes());
    f.push(flags);
    f.extend(&(data.len() as u32).to_be_bytes()[1..]);
    f.extend(data);
    f
}

/// One forwarded connection's streams.
#[derive(Default)]
struct Request {
    error_stream: Option<u32>,
    data_stream: Option<u32>,
    port: u16,
}

/// Runs a tunneled SPDY port-forward session against `pod_ip` until the client goes away.
pub async fn run<S>(ws: WebSocketStream<S>, pod_ip: Ipv4Addr)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut sink, mut source) = ws.split();
    let (out_tx, mut out_rx) = mpsc::channel::<Vec<u8>>(64);
    let writer = tokio::spawn(async move {
        while let Some(frame) = out_rx.recv().await {
            if sink.send(Message::Binary(frame.into())).await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });
    let mut inflater = HeaderInflater::new();
    let mut deflater = HeaderDeflater { started: false };
    let mut buf: Vec<u8> = Vec::new();
    let mut requests: HashMap<String, Request> = HashMap::new();
    let mut to_pod: HashMap<u32, mpsc::Sender<Option<Vec<u8>>>> = HashMap::new();
    'session: loop {
        let msg = match source.next().await {
            Some(Ok(m)) => m,
            other => {
                tracing::debug!(?other, "port-forward session ends");
                break;
            }
        };
        match msg {
            Message::Binary(b) => buf.extend_from_slice(&b),
            Message::Close(_) => break,
            _ => continue,
        }
        while buf.len() >= 8 {
            let len = u32::from_be_bytes([0, buf[5], buf[6], buf[7]]) as usize;
            if buf.len() < 8 + len {
                break;
            }
            let frame: Vec<u8> = buf.drain(..8 + len).collect();
            let flags = frame[4];
            let body = &frame[8..];
            if frame[0] & 0x80 == 0 {
                let stream = u32::from_be_bytes([frame[0], frame[1], frame[2], frame[3]]);
                if let Some(tx) = to_pod.get(&stream) {
                    if !body.is_empty() {
                        let _ = tx.send(Some(body.to_vec())).await;
                    }
                    if flags & FLAG_FIN != 0 {
                        let _ = tx.send(None).await;
                        to_pod.remove(&stream);
                    }
                }
                continue;
            }
            let kind = u16::from_be_bytes([frame[2], frame[3]]);
            tracing::debug!(kind, flags, len, "port-forward control frame");
            match kind {
                SYN_STREAM if body.len() >= 10 => {
                    let stream =
                        u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & 0x7fff_ffff;
                    let Some(raw) = inflater.inflate(&body[10..]) else {
                        tracing::warn!("port-forward: bad header block");
                        break 'session;
                    };
                    let headers = parse_headers(&raw);
                    let mut reply = stream.to_be_bytes().to_vec();
                    reply.extend(deflater.block(&0u32.to_be_bytes()));
                    if out_tx.send(control(SYN_REPLY, 0, &reply)).await.is_err() {
                        break 'session;
                    }
                    let id = headers.get("requestid").cloned().unwrap_or_default();
                    let port: u16 = headers
                        .get("port")
                        .and_then(|p| p.parse().ok())
                        .unwrap_or(0);
                    let req = requests.entry(id.clone()).or_default();
                    req.port = port;
                    match headers.get("streamtype").map(String::as_str) {
                        Some("error") => req.error_stream = Some(stream),
                        Some("data") => req.data_stream = Some(stream),
                        _ => {}
                    }
                    if let (Some(err), Some(data)) = (req.error_stream, req.data_stream) {
                        let (tx, rx) = mpsc::channel(64);
                        to_pod.insert(data, tx);
                        tokio::spawn(forward(pod_ip, req.port, err, data, rx, out_tx.clone()));
                        requests.remove(&id);
                    }
                }
                RST_STREAM if body.len() >= 4 => {
                    let stream =
                        u32::from_be_bytes([body[0], body[1], body[2], body[3]]) & 0x7fff_ffff;
                    if let Some(tx) = to_pod.remove(&stream) {
                        let _ = tx.send(None).await;
                    }
                }
                PING => {
                    let _ = out_tx.send(control(PING, 0, body)).await;
                }
                GOAWAY => break 'session,
                _ => {}
            }
        }
    }
    drop(to_pod);
    drop(out_tx);
    let _ = writer.await;
}

/// Joins one data stream to a TCP connection to the pod.
async fn forward(
    ip: Ipv4Addr,
    port: u16,
    error_stream: u32,
    data_stream: u32,
    mut from_client: mpsc::Receiver<Option<Vec<u8>>>,
    out: mpsc::Sender<Vec<u8>>,
) {
    let tcp = match TcpStream::connect((ip, port)).await {
        Ok(t) => t,
        Err(e) => {
            let msg = format!("failed to connect to port {port} of the pod ({ip}): {e}");
            let _ = out
                .send(data_frame(error_stream, FLAG_FIN, msg.as_bytes()))
                .await;
            let _ = out.send(data_frame(data_stream, FLAG_FIN, &[])).await;
            return;
        }
    };
    let (mut r, mut w) = tcp.into_split();
    let up = tokio::spawn(async move {
        while let Some(Some(chunk)) = from_client.recv().await {
            if w.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = w.shutdown().await;
    });
    let mut buf = vec![0u8; DATA_MAX];
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                if out
                    .send(data_frame(data_stream, 0, &buf[..n]))
                    .await
                    .is_err()
                {
                    break;
                }
            }
        }
    }
    let _ = out.send(data_frame(data_stream, FLAG_FIN, &[])).await;
    let _ = out.send(data_frame(error_stream, FLAG_FIN, &[])).await;
    up.abort();
}

#[cfg(test)]
mod tests {
    use super::*;

    /// SPDY/3 header blocks: ours (stored blocks) parse back as written.
    #[test]
    fn stored_header_blocks_round_trip() {
        let mut raw = 1u32.to_be_bytes().to_vec();
        for s in ["port", "8080"] {
            raw.extend((s.len() as u32).to_be_bytes());
            raw.extend(s.as_bytes());
        }
        let mut d = HeaderDeflater { started: false };
        let mut i = HeaderInflater::new();
        let block = d.block(&raw);
        let out = i.inflate(&block).unwrap_or_default();
        assert_eq!(
            parse_headers(&out).get("port").map(String::as_str),
            Some("8080")
        );
        let again = i.inflate(&d.block(&raw)).unwrap_or_default();
        assert_eq!(again, raw);
    }
}
