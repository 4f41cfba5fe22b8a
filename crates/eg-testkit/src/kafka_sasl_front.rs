//! SASL PLAIN authentication in front of a Kafka-protocol broker that has none: what
//! Azure Event Hubs' Kafka endpoint asks of a client (SASL PLAIN over TLS, the user
//! `$ConnectionString`), for the tests of Event Grid's `EventHub` subscriptions. tansu
//! 0.6.0 speaks no SASL PLAIN and no broker installable here both does and runs without
//! a JVM, so the tests put this front between `socat` (TLS) and tansu (the records):
//!
//! ```text
//! client ──TLS──▶ socat ──TCP──▶ SaslPlainFront ──TCP──▶ tansu
//! ```
//!
//! On each connection the front answers what a broker with SASL answers before the
//! client is authenticated, as Kafka's protocol has it:
//! - `ApiVersions` (key 18) goes to tansu, and its answer comes back with
//!   `SaslHandshake` (17) and `SaslAuthenticate` (36) versions 0-1 in it;
//! - `SaslHandshake` is answered here: `PLAIN` is the one mechanism, anything else gets
//!   `UNSUPPORTED_SASL_MECHANISM` (33);
//! - `SaslAuthenticate` is answered here: the PLAIN message
//!   (`authzid NUL user NUL password`) must hold the configured user and password, else
//!   `SASL_AUTHENTICATION_FAILED` (58) and the connection is closed;
//! - any other request before that closes the connection, as a broker requiring SASL does.
//!
//! Once authenticated, bytes flow both ways untouched. The front counts the sign-ins it
//! took and refused, so a test can tell that the client really signed in.

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread;

const SASL_HANDSHAKE: i16 = 17;
const API_VERSIONS: i16 = 18;
const SASL_AUTHENTICATE: i16 = 36;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const SASL_AUTHENTICATION_FAILED: i16 = 58;
/// Kafka's frames are at most this large before authentication (as brokers bound them).
const LARGEST_UNAUTHENTICATED_FRAME: usize = 512 * 1024;

/// A running front; it stops accepting when dropped (open connections end with the
/// broker's).
pub struct SaslPlainFront {
    port: u16,
    tally: Arc<Tally>,
    stop: Arc<AtomicBool>,
}

#[derive(Default)]
struct Tally {
    accepted: AtomicUsize,
    refused: AtomicUsize,
}

/// Who may sign in, and where the broker is.
#[derive(Clone)]
struct Gate {
    user: String,
    password: String,
    upstream: u16,
}

impl SaslPlainFront {
    /// Listens on `127.0.0.1:port` for clients of the broker at `127.0.0.1:upstream`,
    /// taking `user` with `password` only.
    pub fn start(port: u16, upstream: u16, user: &str, password: &str) -> io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", port))?;
        let gate = Gate {
            user: user.to_owned(),
            password: password.to_owned(),
            upstream,
        };
        let tally = Arc::new(Tally::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (accept_tally, accept_stop) = (tally.clone(), stop.clone());
        thread::Builder::new().name("sasl-front".into()).spawn(move || {
            for client in listener.incoming() {
                if accept_stop.load(Ordering::Relaxed) {
                    break;
                }
                let Ok(client) = client else { continue };
                let (gate, tally) = (gate.clone(), accept_tally.clone());
                let _ = thread::Builder::new()
                    .name("sasl-front-conn".into())
                    .spawn(move || serve(client, &gate, &tally));
            }
        })?;
        Ok(Self { port, tally, stop })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Sign-ins taken so far.
    pub fn accepted(&self) -> usize {
        self.tally.accepted.load(Ordering::Relaxed)
    }

    /// Sign-ins refused so far (a wrong user or password, or another mechanism).
    pub fn refused(&self) -> usize {
        self.tally.refused.load(Ordering::Relaxed)
    }
}

impl Drop for SaslPlainFront {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the accepting thread so it sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

/// One client connection: the handshake, then a plain pipe to the broker.
fn serve(mut client: TcpStream, gate: &Gate, tally: &Tally) {
    let Ok(mut upstream) = TcpStream::connect(("127.0.0.1", gate.upstream)) else {
        return; // the broker is down: the client sees the connection close, as then
    };
    match authenticate(&mut client, &mut upstream, gate, tally) {
        Ok(true) => pipe(client, upstream),
        Ok(false) | Err(_) => {
            let _ = client.shutdown(Shutdown::Both);
            let _ = upstream.shutdown(Shutdown::Both);
        }
    }
}

/// Answers the client until it signed in (`true`) or must be turned away (`false`).
fn authenticate(client: &mut TcpStream, upstream: &mut TcpStream, gate: &Gate, tally: &Tally) -> io::Result<bool> {
    let mut mechanism_ok = false;
    loop {
        let frame = read_frame(client)?;
        let header = RequestHeader::of(&frame)?;
        match header.api_key {
            API_VERSIONS => {
                write_frame(upstream, &frame)?;
                let answer = read_frame(upstream)?;
                let answer = with_sasl_versions(&answer, header.api_version).unwrap_or(answer);
                write_frame(client, &answer)?;
            }
            SASL_HANDSHAKE => {
                let mut body = Cursor::at(&frame, header.body_at);
                let mechanism = body.string()?;
                mechanism_ok = mechanism == "PLAIN";
                let mut answer = header.correlation_id.to_be_bytes().to_vec();
                let error = if mechanism_ok { 0 } else { UNSUPPORTED_SASL_MECHANISM };
                answer.extend(error.to_be_bytes());
                answer.extend(1i32.to_be_bytes());
                put_string(&mut answer, "PLAIN");
                write_frame(client, &answer)?;
                if !mechanism_ok {
                    tally.refused.fetch_add(1, Ordering::Relaxed);
                    return Ok(false);
                }
            }
            SASL_AUTHENTICATE if mechanism_ok && header.api_version <= 1 => {
                let mut body = Cursor::at(&frame, header.body_at);
                let message = body.bytes()?;
                let signed_in = plain_credentials(message).is_some_and(|(user, password)| {
                    user == gate.user.as_bytes() && password == gate.password.as_bytes()
                });
                let mut answer = header.correlation_id.to_be_bytes().to_vec();
                if signed_in {
                    answer.extend(0i16.to_be_bytes());
                    answer.extend((-1i16).to_be_bytes()); // no error message
                } else {
                    answer.extend(SASL_AUTHENTICATION_FAILED.to_be_bytes());
                    put_string(&mut answer, "Authentication failed: invalid user name or password");
                }
                answer.extend(0i32.to_be_bytes()); // no auth bytes back
                if header.api_version >= 1 {
                    answer.extend(0i64.to_be_bytes()); // the session does not expire
                }
                write_frame(client, &answer)?;
                let tally = if signed_in { &tally.accepted } else { &tally.refused };
                tally.fetch_add(1, Ordering::Relaxed);
                return Ok(signed_in);
            }
            // Anything else before signing in: a broker requiring SASL closes the connection.
            _ => return Ok(false),
        }
    }
}

/// Copies bytes both ways until either side closes.
fn pipe(client: TcpStream, upstream: TcpStream) {
    let (Ok(mut client_reader), Ok(mut upstream_writer)) = (client.try_clone(), upstream.try_clone()) else {
        return;
    };
    let back = thread::spawn(move || {
        let (mut upstream, mut client) = (upstream, client);
        let _ = io::copy(&mut upstream, &mut client);
        let _ = client.shutdown(Shutdown::Both);
    });
    let _ = io::copy(&mut client_reader, &mut upstream_writer);
    let _ = upstream_writer.shutdown(Shutdown::Both);
    let _ = back.join();
}

/// `authzid NUL authcid NUL passwd` (RFC 4616): the user and the password.
fn plain_credentials(message: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut parts = message.split(|b| *b == 0);
    let (_authzid, user, password) = (parts.next()?, parts.next()?, parts.next()?);
    parts.next().is_none().then_some((user, password))
}

/// The broker's `ApiVersions` answer (to a request of `version`) with SASL's two
/// requests in it at versions 0-1; `None` when it is an error answer or not one this
/// reads (it then goes to the client as it came).
fn with_sasl_versions(answer: &[u8], version: i16) -> Option<Vec<u8>> {
    let flexible = version >= 3;
    let mut at = Cursor::at(answer, 0);
    let correlation_id = at.i32().ok()?;
    let error = at.i16().ok()?;
    if error != 0 {
        return None;
    }
    let count = if flexible {
        usize::try_from(at.uvarint().ok()?.checked_sub(1)?).ok()?
    } else {
        usize::try_from(at.i32().ok()?).ok()?
    };
    // (key, min, max, the entry's tagged fields as they came)
    let mut entries: Vec<(i16, i16, i16, Vec<u8>)> = Vec::with_capacity(count + 2);
    for _ in 0..count {
        let (key, min, max) = (at.i16().ok()?, at.i16().ok()?, at.i16().ok()?);
        let tags = if flexible {
            at.tagged_fields().ok()?.to_vec()
        } else {
            Vec::new()
        };
        entries.push((key, min, max, tags));
    }
    let rest = &answer[at.pos..];
    for key in [SASL_HANDSHAKE, SASL_AUTHENTICATE] {
        let no_tags = if flexible { vec![0] } else { Vec::new() };
        entries.retain(|entry| entry.0 != key);
        entries.push((key, 0, 1, no_tags));
    }
    entries.sort_by_key(|entry| entry.0);
    let mut out = correlation_id.to_be_bytes().to_vec();
    out.extend(0i16.to_be_bytes());
    if flexible {
        put_uvarint(&mut out, u64::try_from(entries.len()).ok()? + 1);
    } else {
        out.extend(i32::try_from(entries.len()).ok()?.to_be_bytes());
    }
    for (key, min, max, tags) in entries {
        out.extend(key.to_be_bytes());
        out.extend(min.to_be_bytes());
        out.extend(max.to_be_bytes());
        out.extend(tags);
    }
    out.extend(rest);
    Some(out)
}

/// The part of a request header the front reads: key, version, correlation id, and
/// where the body starts (after the client id; the requests the front answers have
/// non-flexible headers).
struct RequestHeader {
    api_key: i16,
    api_version: i16,
    correlation_id: i32,
    body_at: usize,
}

impl RequestHeader {
    fn of(frame: &[u8]) -> io::Result<Self> {
        let mut at = Cursor::at(frame, 0);
        let api_key = at.i16()?;
        let api_version = at.i16()?;
        let correlation_id = at.i32()?;
        let client_id_len = at.i16()?;
        if client_id_len > 0 {
            at.skip(usize::try_from(client_id_len).unwrap_or(0))?;
        }
        Ok(Self {
            api_key,
            api_version,
            correlation_id,
            body_at: at.pos,
        })
    }
}

/// Reads big-endian Kafka primitives from a frame, refusing to run past its end.
struct Cursor<'a> {
    frame: &'a [u8],
    pos: usize,
}

fn malformed() -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, "a malformed Kafka frame")
}

impl<'a> Cursor<'a> {
    fn at(frame: &'a [u8], pos: usize) -> Self {
        Self { frame, pos }
    }

    fn take(&mut self, n: usize) -> io::Result<&'a [u8]> {
        let end = self.pos.checked_add(n).filter(|end| *end <= self.frame.len());
        let end = end.ok_or_else(malformed)?;
        let taken = &self.frame[self.pos..end];
        self.pos = end;
        Ok(taken)
    }

    fn skip(&mut self, n: usize) -> io::Result<()> {
        self.take(n).map(drop)
    }

    fn i16(&mut self) -> io::Result<i16> {
        let bytes = self.take(2)?;
        Ok(i16::from_be_bytes([bytes[0], bytes[1]]))
    }

    fn i32(&mut self) -> io::Result<i32> {
        let bytes = self.take(4)?;
        Ok(i32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }

    fn string(&mut self) -> io::Result<String> {
        let len = usize::try_from(self.i16()?).map_err(|_| malformed())?;
        Ok(String::from_utf8_lossy(self.take(len)?).into_owned())
    }

    fn bytes(&mut self) -> io::Result<&'a [u8]> {
        let len = usize::try_from(self.i32()?).map_err(|_| malformed())?;
        self.take(len)
    }

    fn uvarint(&mut self) -> io::Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let byte = self.take(1)?[0];
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(malformed())
    }

    /// A tagged-fields section, as its bytes.
    fn tagged_fields(&mut self) -> io::Result<&'a [u8]> {
        let start = self.pos;
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = usize::try_from(self.uvarint()?).map_err(|_| malformed())?;
            self.skip(size)?;
        }
        Ok(&self.frame[start..self.pos])
    }
}

fn put_string(out: &mut Vec<u8>, text: &str) {
    let len = i16::try_from(text.len()).unwrap_or(i16::MAX);
    out.extend(len.to_be_bytes());
    out.extend(&text.as_bytes()[..usize::try_from(len).unwrap_or(0)]);
}

fn put_uvarint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push(u8::try_from(value & 0x7f).unwrap_or(0) | 0x80);
        value >>= 7;
    }
    out.push(u8::try_from(value).unwrap_or(0));
}

fn read_frame(stream: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut size = [0; 4];
    stream.read_exact(&mut size)?;
    let size = usize::try_from(i32::from_be_bytes(size)).map_err(|_| malformed())?;
    if size > LARGEST_UNAUTHENTICATED_FRAME {
        return Err(malformed());
    }
    let mut frame = vec![0; size];
    stream.read_exact(&mut frame)?;
    Ok(frame)
}

fn write_frame(stream: &mut TcpStream, frame: &[u8]) -> io::Result<()> {
    let size = i32::try_from(frame.len()).map_err(|_| malformed())?;
    stream.write_all(&size.to_be_bytes())?;
    stream.write_all(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plain_message_is_authzid_user_and_password() {
        assert_eq!(
            plain_credentials(b"\0$ConnectionString\0Endpoint=sb://x/;K=v"),
            Some((&b"$ConnectionString"[..], &b"Endpoint=sb://x/;K=v"[..]))
        );
        assert_eq!(plain_credentials(b"user-only"), None);
        assert_eq!(plain_credentials(b"a\0b\0c\0d"), None);
    }

    #[test]
    fn api_versions_answers_get_both_sasl_requests_in_either_encoding() {
        // v0: correlation id 7, no error, one entry (Produce 0-9).
        let mut v0 = 7i32.to_be_bytes().to_vec();
        v0.extend(0i16.to_be_bytes());
        v0.extend(1i32.to_be_bytes());
        v0.extend([0, 0, 0, 0, 0, 9]);
        let out = with_sasl_versions(&v0, 0).unwrap();
        let mut at = Cursor::at(&out, 0);
        assert_eq!((at.i32().unwrap(), at.i16().unwrap(), at.i32().unwrap()), (7, 0, 3));
        let keys: Vec<(i16, i16, i16)> = (0..3)
            .map(|_| (at.i16().unwrap(), at.i16().unwrap(), at.i16().unwrap()))
            .collect();
        assert_eq!(keys, [(0, 0, 9), (17, 0, 1), (36, 0, 1)]);

        // v3: compact array, a tagged-field section per entry and at the end.
        let mut v3 = 8i32.to_be_bytes().to_vec();
        v3.extend(0i16.to_be_bytes());
        v3.push(2); // one entry
        v3.extend([0, 18, 0, 0, 0, 3, 0]); // ApiVersions 0-3, no tags
        v3.extend(0i32.to_be_bytes()); // throttle time
        v3.push(0); // no tagged fields
        let out = with_sasl_versions(&v3, 3).unwrap();
        assert_eq!(&out[..6], &[0, 0, 0, 8, 0, 0]);
        assert_eq!(out[6], 4, "three entries");
        assert_eq!(&out[out.len() - 5..], &[0, 0, 0, 0, 0], "the rest as it came");

        // An error answer is left alone.
        let mut error = 9i32.to_be_bytes().to_vec();
        error.extend(35i16.to_be_bytes());
        assert_eq!(with_sasl_versions(&error, 3), None);
    }
}
