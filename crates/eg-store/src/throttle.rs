//! Shared rate limits in Redis (`deliveryLimits`, docs/rate-limits.md): one hash and one
//! sorted set of leases per subscription, in a hash tag of their own, changed only by two
//! scripts that run `eg_core::throttle`'s machine, so every sender shares one cap.
//!
//! - `delivery_gate` before an attempt: go now, go at a turn reserved a moment ahead, or
//!   not before a time (slowed, rate spent, every slot in flight).
//! - `delivery_feedback` after it: end the attempt's lease; slow the whole subscription
//!   when a busy answer asked to wait (`Retry-After`).
//! - `throttle_records` read the state for the status page and tests.
//!
//! Keys expire [`LIMIT_KEY_TTL`] after their last write (or the longest slowdown, if
//! longer), so subscriptions that stop sending leave nothing behind. Times come from the
//! caller: pass `Clock::now()`, corrected to Redis's clock, so all senders agree.

use crate::connection::Store;
use crate::error::StoreError;
use crate::scripts;
use eg_core::UnixMillis;
use eg_core::subscription::DeliveryLimits;
use eg_core::throttle::{BusyPolicy, GateAsk, ThrottleGate, ThrottleId, ThrottleRecord};
use std::collections::HashMap;
use std::time::Duration;

/// How long a subscription's limit keys outlive their last write (at least).
pub const LIMIT_KEY_TTL: Duration = Duration::from_secs(3600);

/// The limit hash's fields, as `delivery_gate.lua` and `delivery_feedback.lua` name them.
/// (Records written by older senders may also hold `k` and `b`, a busy streak no longer
/// kept: ignored.)
mod field {
    pub const TAT: &str = "t";
    pub const PLAN: &str = "p";
    pub const SLOWED: &str = "s";
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

fn key_ttl(policy: BusyPolicy) -> u64 {
    millis(LIMIT_KEY_TTL.max(policy.max.saturating_mul(2)))
}

impl Store {
    /// Asks whether an attempt of this subscription may go now (see
    /// `eg_core::throttle::gate`). `limits` `None` asks only whether it is slowed down.
    pub async fn delivery_gate(
        &self,
        id: &ThrottleId,
        limits: Option<&DeliveryLimits>,
        ask: GateAsk<'_>,
        policy: BusyPolicy,
    ) -> Result<ThrottleGate, StoreError> {
        let key = self.keys.limit(id);
        let interval = limits
            .and_then(DeliveryLimits::interval)
            .map_or(0, |d| d.as_micros().max(1));
        let (lease, lease_for) = ask.lease.unwrap_or(("", Duration::ZERO));
        let mut conn = self.conn().await?;
        let reply: Vec<String> = scripts::DELIVERY_GATE
            .key(&key)
            .key(self.keys.leases(id))
            .arg(ask.now.0)
            .arg(u64::try_from(interval).unwrap_or(u64::MAX))
            .arg(limits.map_or(1, DeliveryLimits::burst))
            .arg(ask.want.max(1))
            .arg(limits.and_then(DeliveryLimits::max_concurrent).map_or(0, |n| n.get()))
            .arg(lease)
            .arg(millis(lease_for))
            .arg(key_ttl(policy))
            .arg(millis(ask.reserve_within))
            .invoke_async(&mut conn)
            .await?;
        decode_gate(&reply)
            .ok_or_else(|| StoreError::corrupt(&key, format!("unexpected delivery_gate reply {reply:?}")))
    }

    /// After an attempt: ends its lease (`""` if it had none) and, when the endpoint
    /// answered busy with `retry_after`, slows the whole subscription for that long (at
    /// most `policy.max`). Returns the end of the slowdown, if it slowed down.
    pub async fn delivery_feedback(
        &self,
        id: &ThrottleId,
        now: UnixMillis,
        lease: &str,
        retry_after: Option<Duration>,
        policy: BusyPolicy,
    ) -> Result<Option<UnixMillis>, StoreError> {
        let key = self.keys.limit(id);
        let mut conn = self.conn().await?;
        let reply: Vec<String> = scripts::DELIVERY_FEEDBACK
            .key(&key)
            .key(self.keys.leases(id))
            .arg(now.0)
            .arg(lease)
            .arg(retry_after.map(|d| millis(d).to_string()).unwrap_or_default())
            .arg(millis(policy.max))
            .arg(key_ttl(policy))
            .invoke_async(&mut conn)
            .await?;
        match reply.as_slice() {
            [ok] if ok == "OK" => Ok(None),
            [slowed, until] if slowed == "SLOWED" => until
                .parse()
                .map(|t| Some(UnixMillis(t)))
                .map_err(|_| StoreError::corrupt(&key, format!("unexpected delivery_feedback reply {reply:?}"))),
            _ => Err(StoreError::corrupt(
                &key,
                format!("unexpected delivery_feedback reply {reply:?}"),
            )),
        }
    }

    /// The pace records of many subscriptions, in order, in one round of reads (each
    /// subscription has its own slot; the reads go out together on one connection).
    pub async fn throttle_records(&self, ids: &[ThrottleId]) -> Result<Vec<ThrottleRecord>, StoreError> {
        if ids.is_empty() {
            return Ok(Vec::new());
        }
        let (_held, link) = self.link().await?;
        let reads = ids.iter().map(|id| {
            let mut link = link.clone();
            let (key, leases) = (self.keys.limit(id), self.keys.leases(id));
            async move {
                let hash: HashMap<String, String> = redis::AsyncCommands::hgetall(&mut link, &key).await?;
                let held: Vec<(String, i64)> =
                    redis::AsyncCommands::zrange_withscores(&mut link, &leases, 0, -1).await?;
                Ok::<_, redis::RedisError>((key, hash, held))
            }
        });
        let found = futures_util::future::try_join_all(reads).await?;
        found
            .into_iter()
            .map(|(key, hash, held)| decode_record(&hash, held).map_err(|problem| StoreError::corrupt(&key, problem)))
            .collect()
    }
}

fn decode_gate(reply: &[String]) -> Option<ThrottleGate> {
    let at = |s: &String| s.parse::<i64>().ok().map(UnixMillis);
    Some(match reply {
        [go, n] if go == "GO" => ThrottleGate::Go {
            granted: n.parse().ok()?,
        },
        [reserved, t] if reserved == "RESERVED" => ThrottleGate::Reserved { at: at(t)? },
        [wait, t] if wait == "WAIT" => ThrottleGate::Wait { turn: at(t)? },
        [full, t] if full == "FULL" => ThrottleGate::Full { earliest: at(t)? },
        [slowed, t] if slowed == "SLOWED" => ThrottleGate::Slowed { until: at(t)? },
        _ => return None,
    })
}

fn decode_record(hash: &HashMap<String, String>, held: Vec<(String, i64)>) -> Result<ThrottleRecord, String> {
    let int = |name: &str| -> Result<i64, String> {
        hash.get(name).map_or(Ok(0), |v| {
            v.parse()
                .map_err(|_| format!("field {name} is not a whole number: {v:?}"))
        })
    };
    Ok(ThrottleRecord {
        tat_us: int(field::TAT)?,
        plan_us: int(field::PLAN)?,
        slowed_until: int(field::SLOWED)?,
        leases: held.into_iter().collect(),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn decodes_every_gate_reply() {
        let r = |parts: &[&str]| parts.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(decode_gate(&r(&["GO", "3"])), Some(ThrottleGate::Go { granted: 3 }));
        assert_eq!(
            decode_gate(&r(&["WAIT", "12"])),
            Some(ThrottleGate::Wait { turn: UnixMillis(12) })
        );
        assert_eq!(
            decode_gate(&r(&["FULL", "7"])),
            Some(ThrottleGate::Full {
                earliest: UnixMillis(7)
            })
        );
        assert_eq!(
            decode_gate(&r(&["RESERVED", "15"])),
            Some(ThrottleGate::Reserved { at: UnixMillis(15) })
        );
        assert_eq!(decode_gate(&r(&["SLOWED", "x"])), None);
        assert_eq!(decode_gate(&r(&["GO"])), None);
    }
}
