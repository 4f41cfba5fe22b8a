//! A loopback port that refuses connections, for tests of "nothing listens there".

use std::net::SocketAddr;

/// A loopback port bound but never listened on: connecting to it is refused, and since
/// it stays bound no other process (a tier binding port 0 in a parallel test) can be
/// handed it while the test runs. A port merely freed again could be.
pub struct RefusingPort {
    _socket: tokio::net::TcpSocket,
    address: SocketAddr,
}

impl RefusingPort {
    pub fn new() -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("create a TCP socket");
        socket
            .bind(SocketAddr::from(([127, 0, 0, 1], 0)))
            .expect("bind a loopback port");
        let address = socket.local_addr().expect("local address");
        Self {
            _socket: socket,
            address,
        }
    }

    /// Holds `address`, where a listener has just been closed, the same way: from now on
    /// connecting there is refused. `SO_REUSEADDR` lets the bind succeed beside the closed
    /// listener's connections that are still open or in `TIME_WAIT`; the kernel still
    /// never hands a bound port to a process binding port 0.
    pub fn hold(address: SocketAddr) -> Self {
        let socket = tokio::net::TcpSocket::new_v4().expect("create a TCP socket");
        socket.set_reuseaddr(true).expect("set SO_REUSEADDR");
        socket
            .bind(address)
            .unwrap_or_else(|e| panic!("hold {address} after its listener closed: {e}"));
        Self {
            _socket: socket,
            address,
        }
    }

    pub fn port(&self) -> u16 {
        self.address.port()
    }

    /// `http://127.0.0.1:PORT`
    pub fn url(&self) -> String {
        format!("http://{}", self.address)
    }
}

impl Default for RefusingPort {
    fn default() -> Self {
        Self::new()
    }
}
