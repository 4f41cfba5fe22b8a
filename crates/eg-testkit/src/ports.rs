//! Free loopback ports for servers that must be told their port (Azurite, moto,
//! RabbitMQ, NATS).
//!
//! They are drawn at random below the kernel's ephemeral range
//! (`/proc/sys/net/ipv4/ip_local_port_range`, 32768–60999 by default), never from it: a
//! killed server is started again on the same port, and a port of the ephemeral range
//! freed by the kill can meanwhile be handed to any process binding port 0 or opening a
//! connection. Below the range only a program naming the port can take it. A port is
//! still only free when chosen, not held: each server's start checks that the process
//! answering is its own and retries on other ports when another test came first.

use std::collections::HashSet;
use std::hash::{BuildHasher, Hasher};
use std::net::TcpListener;

/// The lowest port drawn: above the common fixed ports of servers and tools.
const LOWEST: u16 = 20_000;

/// A loopback port nothing listens on right now, outside the ephemeral range.
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `count` distinct loopback ports nothing listens on right now, outside the ephemeral
/// range.
pub fn free_ports(count: usize) -> Vec<u16> {
    let end = ephemeral_start().max(LOWEST + 1_000);
    let mut chosen: Vec<u16> = Vec::with_capacity(count);
    let mut tried = HashSet::new();
    while chosen.len() < count {
        let port = LOWEST + (random() % u64::from(end - LOWEST)) as u16;
        assert!(
            tried.len() < usize::from(end - LOWEST),
            "no free loopback port between {LOWEST} and {end}"
        );
        if tried.insert(port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            chosen.push(port);
        }
    }
    chosen
}

/// The first port of the kernel's ephemeral range (32768 when it cannot be read).
fn ephemeral_start() -> u16 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|range| range.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A random number from the standard library's per-process random hashing keys.
fn random() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |elapsed| elapsed.as_nanos()),
    );
    hasher.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ports_are_distinct_bindable_and_below_the_ephemeral_range() {
        let ports = free_ports(4);
        let mut unique = ports.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), 4, "{ports:?}");
        for port in ports {
            assert!((LOWEST..ephemeral_start()).contains(&port), "{port}");
            TcpListener::bind(("127.0.0.1", port)).unwrap();
        }
    }
}
