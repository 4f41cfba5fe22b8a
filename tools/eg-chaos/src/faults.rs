//! The fault injector: at random moments (exponentially distributed around the mean
//! interval) it SIGKILLs a random tier process and starts it again after a short pause;
//! a few times per run it SIGKILLs redis-server and starts it again from its
//! append-only file on the same socket, leaving the tiers to reconnect on their own.
//! Besides, it freezes tier processes and Redis for a few seconds (SIGSTOP … SIGCONT),
//! as a long pause or an overloaded host would.

use crate::deployment::Deployment;
use crate::journal::Journal;
use crate::receiver::lock;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub struct Faults {
    pub deployment: Arc<Deployment>,
    pub journal: Journal,
    pub redis_down: Arc<AtomicBool>,
    /// Faults injected, by kind (`kill_sender`, …, `restart_redis`).
    pub injected: Mutex<BTreeMap<String, u64>>,
}

impl Faults {
    /// Kills tier processes until `stop_at`; returns once every one it killed runs again.
    pub async fn kill_tiers(self: Arc<Self>, mean_interval: Duration, stop_at: Instant) {
        if mean_interval.is_zero() {
            return;
        }
        let mut restarts = tokio::task::JoinSet::new();
        loop {
            let wait = exponential(mean_interval);
            if Instant::now() + wait >= stop_at {
                break;
            }
            tokio::time::sleep(wait).await;
            while restarts.try_join_next().is_some() {}
            let labels = self.deployment.labels();
            let (index, role, label) = labels[rand::random_range(0..labels.len())].clone();
            if !self.deployment.kill(index).await {
                continue; // down already, waiting for its restart
            }
            let pause = Duration::from_millis(rand::random_range(300..3000));
            self.journal.note(&format!(
                "SIGKILL {label}; restart in {}",
                humantime::format_duration(pause)
            ));
            *lock(&self.injected).entry(format!("kill_{}", role.name())).or_default() += 1;
            let faults = self.clone();
            restarts.spawn(async move {
                tokio::time::sleep(pause).await;
                match faults.deployment.restart(index) {
                    Ok(()) => faults.journal.note(&format!("restarted {label}")),
                    Err(e) => faults.journal.note(&format!("cannot restart {label}: {e:#}")),
                }
            });
        }
        while restarts.join_next().await.is_some() {}
    }

    /// Freezes tier processes (SIGSTOP) for two to eight seconds — longer than the
    /// visibility timeout at times, so what a frozen sender holds is taken back while it
    /// still believes it holds it — then lets them go on (SIGCONT), until `stop_at`.
    pub async fn pause_tiers(self: Arc<Self>, mean_interval: Duration, stop_at: Instant) {
        if mean_interval.is_zero() {
            return;
        }
        let mut resumes = tokio::task::JoinSet::new();
        loop {
            let wait = exponential(mean_interval);
            if Instant::now() + wait >= stop_at {
                break;
            }
            tokio::time::sleep(wait).await;
            while resumes.try_join_next().is_some() {}
            let labels = self.deployment.labels();
            let (index, role, label) = labels[rand::random_range(0..labels.len())].clone();
            let Some(pid) = self.deployment.signal(index, "STOP", None) else {
                continue;
            };
            let pause = Duration::from_millis(rand::random_range(2000..8000));
            self.journal.note(&format!(
                "SIGSTOP {label} (pid {pid}) for {}",
                humantime::format_duration(pause)
            ));
            *lock(&self.injected)
                .entry(format!("pause_{}", role.name()))
                .or_default() += 1;
            let faults = self.clone();
            resumes.spawn(async move {
                tokio::time::sleep(pause).await;
                if faults.deployment.signal(index, "CONT", Some(pid)).is_some() {
                    faults.journal.note(&format!("SIGCONT {label} (pid {pid})"));
                }
            });
        }
        while resumes.join_next().await.is_some() {}
    }

    /// Restarts Redis `restarts` times and freezes it (SIGSTOP for one to six seconds,
    /// then SIGCONT) `freezes` times, at random moments of the run. A restart leaves it
    /// down for half a second to two and a half seconds before it loads its append-only
    /// file again.
    pub async fn disturb_redis(self: Arc<Self>, restarts: usize, freezes: usize, started: Instant, stop_at: Instant) {
        let span = stop_at.saturating_duration_since(started);
        let mut moments: Vec<(Duration, bool)> = (0..restarts)
            .map(|_| true)
            .chain((0..freezes).map(|_| false))
            .map(|restart| (span.mul_f64(rand::random_range(0.1..0.85)), restart))
            .collect();
        moments.sort_by_key(|(moment, _)| *moment);
        for (moment, restart) in moments {
            tokio::time::sleep_until((started + moment).into()).await;
            self.redis_down.store(true, Ordering::SeqCst);
            if restart {
                self.restart_redis().await;
            } else {
                self.freeze_redis().await;
            }
            self.redis_down.store(false, Ordering::SeqCst);
        }
    }

    async fn restart_redis(&self) {
        self.deployment.kill_redis().await;
        let pause = Duration::from_millis(rand::random_range(500..2500));
        self.journal.note(&format!(
            "SIGKILL redis-server; restart in {}",
            humantime::format_duration(pause)
        ));
        *lock(&self.injected).entry("restart_redis".into()).or_default() += 1;
        tokio::time::sleep(pause).await;
        let restarted = Instant::now();
        match self.deployment.start_redis().await {
            Ok(()) => self.journal.note(&format!(
                "redis-server answers again (loading took {:.1}s)",
                restarted.elapsed().as_secs_f64()
            )),
            Err(e) => self.journal.phase(&format!("cannot restart redis-server: {e:#}")),
        }
    }

    async fn freeze_redis(&self) {
        let Some(pid) = self.deployment.freeze_redis() else {
            return;
        };
        let pause = Duration::from_millis(rand::random_range(1000..6000));
        self.journal.note(&format!(
            "SIGSTOP redis-server for {}",
            humantime::format_duration(pause)
        ));
        *lock(&self.injected).entry("freeze_redis".into()).or_default() += 1;
        tokio::time::sleep(pause).await;
        if self.deployment.resume_redis(pid) {
            self.journal.note("SIGCONT redis-server");
        }
    }
}

/// An exponentially distributed wait with the given mean, kept within a tenth and four
/// times the mean so runs stay comparable.
pub fn exponential(mean: Duration) -> Duration {
    let u: f64 = rand::random_range(f64::EPSILON..1.0);
    mean.mul_f64((-u.ln()).clamp(0.1, 4.0))
}
