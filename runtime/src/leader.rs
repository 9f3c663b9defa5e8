//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several
//! replicas exactly one writes.
//!
//! The protocol is client-go's `leaderelection` with a `LeaseLock`:
//!
//! - A candidate reads the Lease. If it is missing, the candidate creates it
//!   naming itself; if two create at once, the API server lets one win.
//! - If another holder is named, the candidate waits until the Lease has not
//!   changed for `leaseDurationSeconds`, measured on the candidate's own
//!   clock from the moment it *saw* the last change (not by comparing the
//!   holder's `renewTime` with the local clock, so clock skew between nodes
//!   does not matter). Then it takes the Lease over by an update carrying the
//!   resourceVersion it read: of several candidates only one update succeeds,
//!   the others get 409 Conflict.
//! - The leader renews (`renewTime`) every retry period; if it cannot renew
//!   within the renew deadline after its last successful renewal began, it
//!   has lost the lease and must stop writing.
//! - On shutdown the leader releases the Lease: it clears `holderIdentity`,
//!   so a follower takes over at its next retry instead of waiting for the
//!   lease to expire.
//!
//! All waiting uses tokio time, so tests run elections in paused time.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::time::Instant;

use crate::api_message::ApiMessage;
use crate::client::WriteGate;

/// Where the Lease is and how it is held (kube-controller-manager's flags
/// and defaults: 15 s lease, 10 s renew deadline, 2 s retry period).
#[derive(Clone, Debug)]
pub struct LeaseConfig {
    /// Namespace of the Lease (`--leader-elect-resource-namespace`).
    pub namespace: String,
    /// Name of the Lease (`--leader-elect-resource-name`).
    pub name: String,
    /// This candidate's identity, written as `holderIdentity`.
    pub identity: String,
    /// How long followers wait after the last renewal before taking over
    /// (`--leader-elect-lease-duration`).
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up
    /// leadership (`--leader-elect-renew-deadline`).
    pub renew_deadline: Duration,
    /// Pause between attempts to acquire or renew
    /// (`--leader-elect-retry-period`).
    pub retry_period: Duration,
}

impl LeaseConfig {
    /// The Lease `namespace/name` for `identity`, with upstream's timings.
    pub fn new(namespace: &str, name: &str, identity: &str) -> Self {
        Self {
            namespace: namespace.to_string(),
            name: name.to_string(),
            identity: identity.to_string(),
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

/// A unique identity for this process: `POD_NAME` (the instance's name,
/// from the downward API), else the host name, followed by a random suffix
/// so that two processes on one host never share an identity.
pub fn default_identity() -> String {
    let base = std::env::var("POD_NAME")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .or_else(|| std::fs::read_to_string("/etc/hostname").ok())
        .map(|name| name.trim().to_string())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "pv-controller".to_string());
    format!("{base}_{}", random_suffix())
}

/// Ten hex digits from the standard library's randomly seeded hasher.
fn random_suffix() -> String {
    use std::hash::BuildHasher;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    let bits = std::collections::hash_map::RandomState::new().hash_one((nanos, std::process::id()));
    format!("{:010x}", bits & 0xff_ffff_ffff)
}

/// Why an attempt on the Lease failed (other than losing a race, which is
/// not an error: the attempt just did not acquire).
#[derive(Debug, thiserror::Error)]
#[error("{action} lease {namespace}/{name}: {}", ApiMessage(source))]
pub struct LeaderError {
    action: &'static str,
    namespace: String,
    name: String,
    #[source]
    source: kube::Error,
}

/// The last version of the Lease this candidate saw, and when it saw it
/// change (on the local monotonic clock).
#[derive(Clone, Debug)]
struct Observed {
    resource_version: Option<String>,
    holder: String,
    lease_duration: Duration,
    since: Instant,
}

/// One candidate for leadership.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaseConfig,
    observed: Option<Observed>,
    gate: WriteGate,
    /// When the gate closes unless a renewal succeeds first: the renew
    /// deadline after the last successful attempt began.
    held_until: Option<Instant>,
}

impl LeaderElector {
    /// A candidate using `client` (a client of its own, see
    /// [`crate::client`]) to reach the Lease. Each acquisition or renewal
    /// opens `gate` until the renew deadline after the attempt began, so the
    /// controller's writes stop by themselves when renewals stop.
    pub fn new(client: Client, config: LeaseConfig, gate: WriteGate) -> Self {
        Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            observed: None,
            gate,
            held_until: None,
        }
    }

    /// This candidate's identity.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// The timings and names this candidate uses.
    #[cfg(any(test, feature = "testing"))]
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    fn error(&self, action: &'static str) -> impl FnOnce(kube::Error) -> LeaderError + use<> {
        let namespace = self.config.namespace.clone();
        let name = self.config.name.clone();
        move |source| LeaderError {
            action,
            namespace,
            name,
            source,
        }
    }

    /// One attempt: creates the Lease, renews it, or takes it over when the
    /// holder let it expire. Returns whether this candidate now holds it,
    /// and opens the write gate until the renew deadline when it does.
    pub async fn try_acquire_or_renew(&mut self) -> Result<bool, LeaderError> {
        let began = Instant::now();
        let held = self.attempt().await?;
        if held {
            let until = began + self.config.renew_deadline;
            self.gate.open_until(until);
            self.held_until = Some(until);
        }
        Ok(held)
    }

    async fn attempt(&mut self) -> Result<bool, LeaderError> {
        let now = crate::ambient::now();
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(self.error("reading"))?
        else {
            return self.create(now).await;
        };
        self.observe(&lease);
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let ours = holder == self.config.identity;
        if !holder.is_empty() && !ours && !self.observed_expired() {
            return Ok(false);
        }
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.lease_seconds()),
            renew_time: Some(MicroTime(now)),
            acquire_time: if ours {
                spec.acquire_time.clone()
            } else {
                Some(MicroTime(now))
            },
            lease_transitions: if ours {
                spec.lease_transitions
            } else {
                // Saturating: the count is read from the Lease, where anyone
                // who may write it can put i32::MAX.
                Some(spec.lease_transitions.unwrap_or(0).saturating_add(1))
            },
            ..spec
        });
        match self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
        {
            Ok(stored) => {
                if !ours {
                    tracing::info!(v = 0, identity = %self.config.identity, previous = %holder, "acquired the leader lease");
                }
                self.observe(&stored);
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.is_conflict() => {
                tracing::debug!("lost a race for the leader lease");
                Ok(false)
            }
            Err(error) => Err(self.error("updating")(error)),
        }
    }

    async fn create(&mut self, now: Timestamp) -> Result<bool, LeaderError> {
        let lease = Lease {
            metadata: ObjectMeta {
                name: Some(self.config.name.clone()),
                namespace: Some(self.config.namespace.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(self.config.identity.clone()),
                lease_duration_seconds: Some(self.lease_seconds()),
                acquire_time: Some(MicroTime(now)),
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(0),
                ..Default::default()
            }),
        };
        match self.api.create(&PostParams::default(), &lease).await {
            Ok(stored) => {
                tracing::info!(v = 0, identity = %self.config.identity, "created the leader lease");
                self.observe(&stored);
                Ok(true)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(false),
            Err(error) => Err(self.error("creating")(error)),
        }
    }

    fn lease_seconds(&self) -> i32 {
        i32::try_from(self.config.lease_duration.as_secs())
            .unwrap_or(i32::MAX)
            .max(1)
    }

    /// Notes the Lease as seen now, restarting the expiry clock when it
    /// changed since the last look.
    fn observe(&mut self, lease: &Lease) {
        let resource_version = lease.metadata.resource_version.clone();
        if self
            .observed
            .as_ref()
            .is_some_and(|seen| seen.resource_version == resource_version)
        {
            return;
        }
        let spec = lease.spec.as_ref();
        self.observed = Some(Observed {
            resource_version,
            holder: spec
                .and_then(|s| s.holder_identity.clone())
                .unwrap_or_default(),
            lease_duration: spec
                .and_then(|s| s.lease_duration_seconds)
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs)
                .unwrap_or(self.config.lease_duration),
            since: Instant::now(),
        });
    }

    /// Whether the observed holder has not renewed for its lease duration.
    fn observed_expired(&self) -> bool {
        self.observed
            .as_ref()
            .is_none_or(|seen| seen.since + seen.lease_duration <= Instant::now())
    }

    /// Whether this candidate held the Lease at the last look.
    pub fn is_leader(&self) -> bool {
        self.observed
            .as_ref()
            .is_some_and(|seen| seen.holder == self.config.identity)
    }

    /// Tries every retry period until this candidate holds the Lease.
    pub async fn acquire(&mut self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => {}
                Err(error) => tracing::warn!(%error, "cannot acquire the leader lease"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Renews every retry period; returns when no renewal has succeeded
    /// within the renew deadline after the last successful one began, that
    /// is when leadership is lost: the moment the write gate closes, so
    /// nothing the controller runs outlives the gate by a retry period (a
    /// plugin's call to storage outside the API server, which the gate
    /// does not stop).
    pub async fn hold(&mut self) {
        loop {
            tokio::time::sleep(self.config.retry_period).await;
            let deadline = self.held_until.unwrap_or_else(Instant::now);
            let renewed = tokio::time::timeout_at(deadline, self.renew_until_success()).await;
            if renewed.is_err() {
                self.gate.close();
                tracing::error!(identity = %self.config.identity, "could not renew the leader lease in time, leadership lost");
                return;
            }
        }
    }

    async fn renew_until_success(&mut self) {
        loop {
            match self.try_acquire_or_renew().await {
                Ok(true) => return,
                Ok(false) => tracing::warn!("the leader lease is held by another candidate"),
                Err(error) => tracing::warn!(%error, "cannot renew the leader lease"),
            }
            tokio::time::sleep(self.config.retry_period).await;
        }
    }

    /// Gives the Lease up, if held: closes the write gate, then clears the
    /// holder, so that a follower takes over at its next attempt.
    pub async fn release(&mut self) -> Result<(), LeaderError> {
        self.gate.close();
        let Some(mut lease) = self
            .api
            .get_opt(&self.config.name)
            .await
            .map_err(self.error("reading"))?
        else {
            return Ok(());
        };
        let spec = lease.spec.clone().unwrap_or_default();
        if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
            return Ok(());
        }
        let now = MicroTime(crate::ambient::now());
        lease.spec = Some(LeaseSpec {
            holder_identity: None,
            lease_duration_seconds: Some(1),
            acquire_time: Some(now.clone()),
            renew_time: Some(now),
            ..spec
        });
        let stored = self
            .api
            .replace(&self.config.name, &PostParams::default(), &lease)
            .await
            .map_err(self.error("releasing"))?;
        self.observe(&stored);
        tracing::info!(v = 0, identity = %self.config.identity, "released the leader lease");
        Ok(())
    }
}

#[cfg(test)]
mod tests;
