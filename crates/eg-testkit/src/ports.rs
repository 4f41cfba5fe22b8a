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

/// How many times a server is started on other ports after a parallel test took one.
const TRIES: usize = 5;

/// Starts a server that must be told its ports: `start` gets `count` free ports and
/// answers what went wrong, if anything. When it says a port was taken (a parallel test
/// came first), it is tried again on other ports, up to five times; `start` undoes its
/// half-started state itself before answering so. Any other failure fails the test.
pub fn start_on_free_ports(what: &str, count: usize, mut start: impl FnMut(&[u16]) -> Result<(), String>) {
    for _ in 0..TRIES {
        match start(&free_ports(count)) {
            Ok(()) => return,
            Err(e) if port_was_taken(&e) => continue,
            Err(e) => panic!("{e}"),
        }
    }
    panic!("{what} could not listen on free ports ({TRIES} tries)");
}

/// Whether a server's failure message says its port was in use: Node's `EADDRINUSE`,
/// Go's and Python's "address already in use", Erlang's `eaddrinuse`.
pub fn port_was_taken(message: &str) -> bool {
    let message = message.to_lowercase();
    message.contains("eaddrinuse") || message.contains("address already in use")
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

    #[test]
    fn a_taken_port_is_recognised_in_each_servers_words() {
        for message in [
            "Error: listen EADDRINUSE: address already in use 127.0.0.1:20001",
            "nats: listen tcp 127.0.0.1:20001: bind: address already in use",
            "OSError: [Errno 98] Address already in use",
            "{error,eaddrinuse}",
        ] {
            assert!(port_was_taken(message), "{message}");
        }
        assert!(!port_was_taken("no such file or directory"));
    }

    #[test]
    #[should_panic(expected = "a server could not listen on free ports (5 tries)")]
    fn a_server_whose_ports_are_always_taken_fails_after_five_tries() {
        let mut tries = 0;
        start_on_free_ports("a server", 2, |ports| {
            tries += 1;
            assert_eq!(ports.len(), 2);
            assert!(tries <= 5, "tried {tries} times");
            Err("EADDRINUSE".to_owned())
        });
    }

    #[test]
    fn a_server_started_on_a_second_try_gets_other_ports() {
        let mut seen = Vec::new();
        start_on_free_ports("a server", 1, |ports| {
            seen.push(ports[0]);
            if seen.len() == 1 {
                Err("address already in use".to_owned())
            } else {
                Ok(())
            }
        });
        assert_eq!(seen.len(), 2);
    }
}
