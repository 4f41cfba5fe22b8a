//! Endpoints that misbehave on purpose: raw TCP servers ([`Hostile`]) that do what no
//! HTTP framework would (bodies that never end, heads that trickle or never end, endless
//! `100 Continue`s, bytes that are neither HTTP nor TLS, silence). Each records, per
//! connection, when it was accepted, when the client closed it, how many bytes the
//! server managed to write (what the client read, plus what the kernels buffered on the
//! way) and the start of what the client sent.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::watch;

/// The servers' send buffer, so what they manage to write is close to what the client
/// read (plus the client's receive buffer).
const SERVER_SNDBUF: u32 = 64 * 1024;
/// How much of what a client sends is kept per connection.
const KEPT_REQUEST_BYTES: usize = 64 * 1024;

/// What a hostile endpoint does once a request head arrived (or, for the acts that
/// answer no HTTP, once any byte arrived, e.g. a TLS ClientHello).
#[derive(Debug, Clone, Copy)]
pub enum Act {
    /// `status` with `Content-Length: len`, the body written as fast as it is taken.
    Sized { status: u16, len: u64 },
    /// `status`, chunked, and the body never ends.
    Endless { status: u16 },
    /// `200` with its head at once, then one body byte every `every`.
    TrickleBody { every: Duration },
    /// The status line, then one byte of a header every `every`.
    TrickleHead { every: Duration },
    /// A head that never ends (header after header), as fast as it is taken.
    EndlessHead,
    /// `100 Continue` after `100 Continue`, one every 10 ms, never a final status.
    EndlessContinue,
    /// `status` with `Location: location` and an empty body.
    Redirect { status: u16, location: &'static str },
    /// Accepts and never writes (e.g. a TLS handshake that never comes back).
    Silent,
    /// Writes bytes that are neither HTTP nor TLS.
    Garbage,
    /// A plain HTTP server's answer to a TLS ClientHello: `400` and close.
    PlainHttp400,
    /// A plain `200` with an empty body, and close.
    Ok,
}

impl Act {
    /// HTTP acts wait for a whole request head; the others answer the first bytes.
    fn waits_for_head(self) -> bool {
        !matches!(self, Act::Silent | Act::Garbage | Act::PlainHttp400)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Stage {
    Nothing,
    Bytes,
    Head,
    Closed,
}

/// One accepted connection.
pub struct Conn {
    pub accepted: Instant,
    closed: Mutex<Option<Instant>>,
    written: AtomicU64,
    request: Mutex<Vec<u8>>,
}

impl Conn {
    fn close(&self) {
        lock(&self.closed).get_or_insert_with(Instant::now);
    }

    /// When the client closed the connection (or writing to it failed).
    pub fn closed(&self) -> Option<Instant> {
        *lock(&self.closed)
    }

    /// How long the connection was open, once closed.
    pub fn open_for(&self) -> Option<Duration> {
        self.closed().map(|c| c - self.accepted)
    }

    /// Bytes the server managed to write.
    pub fn written(&self) -> u64 {
        self.written.load(Ordering::SeqCst)
    }

    /// The first 64 KiB the client sent.
    pub fn request(&self) -> Vec<u8> {
        lock(&self.request).clone()
    }
}

/// A hostile endpoint on a loopback port; stops accepting when dropped.
pub struct Hostile {
    addr: SocketAddr,
    conns: Arc<Mutex<Vec<Arc<Conn>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Hostile {
    pub async fn start(act: Act) -> Self {
        Self::start_on("127.0.0.1", act).await
    }

    /// On another IPv4 address (e.g. `127.0.0.2`, outside an allow-list of 127.0.0.1).
    pub async fn start_on(ip: &str, act: Act) -> Self {
        let socket = TcpSocket::new_v4().expect("create a TCP socket");
        socket.set_send_buffer_size(SERVER_SNDBUF).expect("set the send buffer");
        let address: SocketAddr = format!("{ip}:0").parse().expect("an IPv4 address");
        socket.bind(address).expect("bind a port");
        let listener = socket.listen(64).expect("listen");
        let addr = listener.local_addr().expect("local address");
        let conns: Arc<Mutex<Vec<Arc<Conn>>>> = Arc::default();
        let list = Arc::clone(&conns);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let conn = Arc::new(Conn {
                    accepted: Instant::now(),
                    closed: Mutex::new(None),
                    written: AtomicU64::new(0),
                    request: Mutex::default(),
                });
                lock(&list).push(Arc::clone(&conn));
                tokio::spawn(serve(stream, act, conn));
            }
        });
        Self { addr, conns, task }
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `{scheme}://ADDR/hook`
    pub fn url(&self, scheme: &str) -> String {
        format!("{scheme}://{}/hook", self.addr)
    }

    pub fn conns(&self) -> Vec<Arc<Conn>> {
        lock(&self.conns).clone()
    }

    /// The only connection, once the client has closed it (panics on a second one).
    pub async fn closed_conn(&self) -> Arc<Conn> {
        crate::eventually(Duration::from_secs(30), "the client closed the connection", || async {
            let conns = self.conns();
            assert!(conns.len() <= 1, "{} connections", conns.len());
            conns.first().filter(|c| c.closed().is_some()).cloned()
        })
        .await
    }

    /// Waits until `count` connections were accepted and closed by the client.
    pub async fn wait_closed(&self, count: usize, timeout: Duration) -> Vec<Arc<Conn>> {
        crate::eventually(
            timeout,
            &format!("{count} closed connection(s) at {}", self.addr),
            || async {
                let conns = self.conns();
                (conns.len() >= count && conns.iter().all(|c| c.closed().is_some())).then_some(conns)
            },
        )
        .await
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

async fn serve(stream: tokio::net::TcpStream, act: Act, conn: Arc<Conn>) {
    let (mut read, mut write) = stream.into_split();
    let (stage_tx, mut stage) = watch::channel(Stage::Nothing);
    let reader = Arc::clone(&conn);
    // Reads whatever the client sends (keeping its start), watching for the end of the
    // head, and notices the close.
    tokio::spawn(async move {
        let mut buf = vec![0u8; 16 * 1024];
        let mut tail: Vec<u8> = Vec::new();
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => {
                    reader.close();
                    stage_tx.send_replace(Stage::Closed);
                    return;
                }
                Ok(n) => {
                    {
                        let mut request = lock(&reader.request);
                        let room = KEPT_REQUEST_BYTES.saturating_sub(request.len());
                        request.extend_from_slice(&buf[..n.min(room)]);
                    }
                    tail.extend_from_slice(&buf[..n]);
                    let now = if tail.windows(4).any(|w| w == b"\r\n\r\n") {
                        Stage::Head
                    } else {
                        Stage::Bytes
                    };
                    tail.drain(..tail.len().saturating_sub(3));
                    stage_tx.send_if_modified(|s| {
                        let raise = now > *s;
                        if raise {
                            *s = now;
                        }
                        raise
                    });
                }
            }
        }
    });
    let wanted = if act.waits_for_head() {
        Stage::Head
    } else {
        Stage::Bytes
    };
    match stage.wait_for(|s| *s >= wanted).await {
        Ok(s) if *s != Stage::Closed => {}
        _ => return,
    }
    if perform(act, &mut write, &conn).await.is_err() {
        conn.close();
    }
    // Keep our side open (no FIN) until the client goes away.
    let _ = stage.wait_for(|s| *s == Stage::Closed).await;
}

async fn put(write: &mut OwnedWriteHalf, conn: &Conn, bytes: &[u8]) -> std::io::Result<()> {
    write.write_all(bytes).await?;
    conn.written.fetch_add(bytes.len() as u64, Ordering::SeqCst);
    Ok(())
}

async fn perform(act: Act, w: &mut OwnedWriteHalf, conn: &Conn) -> std::io::Result<()> {
    let block = vec![b'x'; 16 * 1024];
    match act {
        Act::Sized { status, len } => {
            let head = format!(
                "HTTP/1.1 {status} Whatever\r\ncontent-type: application/octet-stream\r\ncontent-length: {len}\r\n\r\n"
            );
            put(w, conn, head.as_bytes()).await?;
            let mut left = len;
            while left > 0 {
                let n = block.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                put(w, conn, &block[..n]).await?;
                left -= n as u64;
            }
        }
        Act::Endless { status } => {
            let head = format!("HTTP/1.1 {status} Whatever\r\ntransfer-encoding: chunked\r\n\r\n");
            put(w, conn, head.as_bytes()).await?;
            let mut chunk = format!("{:x}\r\n", block.len()).into_bytes();
            chunk.extend_from_slice(&block);
            chunk.extend_from_slice(b"\r\n");
            loop {
                put(w, conn, &chunk).await?;
            }
        }
        Act::TrickleBody { every } => {
            put(w, conn, b"HTTP/1.1 200 OK\r\ncontent-length: 1000000\r\n\r\n").await?;
            loop {
                put(w, conn, b"x").await?;
                tokio::time::sleep(every).await;
            }
        }
        Act::TrickleHead { every } => {
            put(w, conn, b"HTTP/1.1 200 OK\r\nx-trickle: ").await?;
            loop {
                put(w, conn, b"a").await?;
                tokio::time::sleep(every).await;
            }
        }
        Act::EndlessHead => {
            put(w, conn, b"HTTP/1.1 200 OK\r\n").await?;
            for i in 0u64.. {
                put(w, conn, format!("x-pad-{i}: {}\r\n", "a".repeat(100)).as_bytes()).await?;
            }
        }
        Act::EndlessContinue => loop {
            put(w, conn, b"HTTP/1.1 100 Continue\r\n\r\n").await?;
            tokio::time::sleep(Duration::from_millis(10)).await;
        },
        Act::Redirect { status, location } => {
            // One request per connection: this server answers only one.
            let head = format!(
                "HTTP/1.1 {status} Moved\r\nlocation: {location}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
            );
            put(w, conn, head.as_bytes()).await?;
            w.shutdown().await?;
        }
        Act::Silent => {}
        Act::Garbage => {
            for _ in 0..64 {
                put(w, conn, b"this is not TLS, nor HTTP; ").await?;
            }
        }
        Act::PlainHttp400 => {
            put(w, conn, &empty_response("400 Bad Request")).await?;
            w.shutdown().await?;
        }
        Act::Ok => {
            put(w, conn, &empty_response("200 OK")).await?;
            w.shutdown().await?;
        }
    }
    Ok(())
}

/// A complete response with no body, after which the server closes the connection.
fn empty_response(status: &str) -> Vec<u8> {
    format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").into_bytes()
}
