//! Free loopback ports for servers that must be told their port (Azurite, moto,
//! RabbitMQ, NATS). A port is free when chosen, not held: a parallel test may bind it
//! first, so each server's start checks that the process answering is its own.

use std::net::TcpListener;

/// A loopback port nothing listens on right now.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `count` distinct loopback ports nothing listens on right now.
pub fn free_ports(count: usize) -> Vec<u16> {
    // Every listener stays open until all are chosen, so the kernel hands out distinct ports.
    let listeners: Vec<TcpListener> = (0..count)
        .map(|_| TcpListener::bind("127.0.0.1:0").expect("bind a free loopback port"))
        .collect();
    listeners
        .iter()
        .map(|listener| listener.local_addr().expect("local address").port())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ports_are_distinct_and_bindable() {
        let ports = free_ports(4);
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 4, "{ports:?}");
        for port in ports {
            TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
    }
}
