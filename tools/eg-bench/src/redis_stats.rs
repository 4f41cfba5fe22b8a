//! Where Redis's time goes: `INFO commandstats` (calls and µs per command; a script's
//! time includes the commands it ran, which are counted on their own too) read at both
//! ends of a window, per unit of work — "evalsha 3.00× 41 µs, xadd 1.00× 2 µs per delivery".

use redis::aio::MultiplexedConnection;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Default)]
pub struct CommandStats {
    /// command → (calls, µs)
    by_command: BTreeMap<String, (u64, u64)>,
}

impl CommandStats {
    pub async fn read(conn: &mut MultiplexedConnection) -> anyhow::Result<Self> {
        let info: String = redis::cmd("INFO").arg("commandstats").query_async(conn).await?;
        Ok(Self::parse(&info))
    }

    fn parse(info: &str) -> Self {
        let mut by_command = BTreeMap::new();
        for line in info.lines() {
            let Some((name, fields)) = line.strip_prefix("cmdstat_").and_then(|l| l.split_once(':')) else {
                continue;
            };
            let field = |key: &str| {
                fields
                    .split(',')
                    .find_map(|f| f.strip_prefix(key)?.strip_prefix('=')?.parse::<u64>().ok())
                    .unwrap_or(0)
            };
            by_command.insert(name.to_owned(), (field("calls"), field("usec")));
        }
        Self { by_command }
    }

    /// What happened between `earlier` and this reading, per `units` of work: the
    /// commands that took the most time first.
    pub fn per_unit_since(&self, earlier: &CommandStats, units: f64) -> PerUnit {
        let mut commands: Vec<(String, f64, f64)> = self
            .by_command
            .iter()
            .filter_map(|(name, (calls, usec))| {
                let (c0, u0) = earlier.by_command.get(name).copied().unwrap_or((0, 0));
                let calls = calls.saturating_sub(c0);
                (calls > 0).then(|| {
                    (
                        name.clone(),
                        calls as f64 / units,
                        usec.saturating_sub(u0) as f64 / units,
                    )
                })
            })
            .collect();
        commands.sort_by(|a, b| b.2.total_cmp(&a.2));
        PerUnit { commands }
    }
}

/// Calls and µs per unit of work, by command.
#[derive(Debug, Clone, Default)]
pub struct PerUnit {
    pub commands: Vec<(String, f64, f64)>,
}

impl PerUnit {
    /// `evalsha 2.00× 31.0 µs, xreadgroup …`: calls and µs per unit of the `most`
    /// commands that took the most time (a script's time includes the commands it ran,
    /// which are also listed on their own).
    pub fn brief(&self, most: usize) -> String {
        self.commands
            .iter()
            .take(most)
            .map(|(n, c, u)| format!("{n} {c:.2}× {u:.1} µs"))
            .collect::<Vec<_>>()
            .join(", ")
    }

    pub fn to_json(&self) -> serde_json::Value {
        serde_json::Value::Array(
            self.commands
                .iter()
                .map(|(n, c, u)| {
                    serde_json::json!({"command": n, "callsPerUnit": (c * 1000.0).round() / 1000.0, "usecPerUnit": (u * 10.0).round() / 10.0})
                })
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_commandstats_and_divides_by_work() {
        let before = CommandStats::parse(
            "# Commandstats\r\ncmdstat_evalsha:calls=10,usec=100,usec_per_call=10.00,rejected_calls=0,failed_calls=0\r\n",
        );
        let after = CommandStats::parse(
            "# Commandstats\r\ncmdstat_evalsha:calls=30,usec=500,usec_per_call=16.67\r\ncmdstat_xadd:calls=20,usec=40,usec_per_call=2\r\n",
        );
        let per = after.per_unit_since(&before, 10.0);
        assert_eq!(per.commands[0], ("evalsha".to_owned(), 2.0, 40.0));
        assert_eq!(per.commands[1], ("xadd".to_owned(), 2.0, 4.0));
        assert_eq!(per.brief(1), "evalsha 2.00× 40.0 µs");
    }
}
