//! What a test's own Redis counted: commands and script calls, from `INFO commandstats`.

use eg_testkit::RedisServer;

/// Script calls so far (`EVALSHA` and `EVAL`).
pub fn script_calls(server: &RedisServer) -> u64 {
    command_calls(server, "evalsha") + command_calls(server, "eval")
}

/// Calls of `command` (lower case) so far.
pub fn command_calls(server: &RedisServer, command: &str) -> u64 {
    let stats: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(&mut server.client())
        .unwrap_or_default();
    let prefix = format!("cmdstat_{command}:calls=");
    stats
        .lines()
        .filter_map(|l| l.strip_prefix(&prefix)?.split(',').next()?.parse::<u64>().ok())
        .sum()
}
