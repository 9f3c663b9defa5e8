//! The cluster a chaos run plays with: a seeded generator, the objects
//! users create, and the storage plugin that provisions and deletes.
//!
//! Three kinds of static volume (1Gi or 2Gi, ReadWriteOnce): Retain,
//! Delete (handed to [`ChaosPlugin`] by their `provisioned-by`), and
//! Recycle (hostPath, so the real recycler pod scrubs them). Claims ask for
//! 1Gi, of class "" (static binding) or of class [`CLASS`], which
//! [`ChaosPlugin`] provisions.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use k8s_names::ANN_DYNAMICALLY_PROVISIONED;
use k8s_openapi::api::core::v1::{
    HostPathVolumeSource, ObjectReference, PersistentVolume, PersistentVolumeClaim,
};
use pv_controller::pv::PluginError;
use pv_controller::pv::ProvisionRequest;
use pv_controller::pv::VolumePlugin;
use testkit::{RWO, claim, storage_class, volume};

use crate::mock_plugin::provisioned_volume;

/// The provisioner and deleter of the chaos world.
pub(crate) const PLUGIN: &str = "example.com/chaos";
/// The StorageClass whose claims [`ChaosPlugin`] provisions.
pub(crate) const CLASS: &str = "chaos";

/// A small seeded generator (SplitMix64): the same seed gives the same run.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number below `n` (`n` > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// True with probability `p`.
    pub(crate) fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// One element of a non-empty slice.
    pub(crate) fn pick<'a, T>(&mut self, list: &'a [T]) -> &'a T {
        &list[self.below(list.len() as u64) as usize]
    }
}

/// What happens to a static volume once its claim is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Policy {
    Retain,
    Delete,
    Recycle,
}

/// A static volume of `size` with `policy`, as a user creates it.
pub(crate) fn static_volume(name: &str, size: &str, policy: Policy) -> PersistentVolume {
    let builder = volume(name, size).modes(&[RWO]);
    match policy {
        Policy::Retain => builder.policy("Retain").build(),
        Policy::Delete => builder
            .policy("Delete")
            .annotation(ANN_DYNAMICALLY_PROVISIONED, PLUGIN)
            .build(),
        Policy::Recycle => {
            let mut v = builder.policy("Recycle").build();
            if let Some(spec) = v.spec.as_mut() {
                spec.gce_persistent_disk = None;
                spec.host_path = Some(HostPathVolumeSource {
                    path: format!("/chaos/{name}"),
                    type_: None,
                });
            }
            v
        }
    }
    .without_status()
}

/// A claim of 1Gi, ReadWriteOnce; provisioned by [`ChaosPlugin`] when
/// `dynamic`.
pub(crate) fn user_claim(name: &str, dynamic: bool) -> PersistentVolumeClaim {
    let builder = claim(name, "", "1Gi").modes(&[RWO]);
    let mut c = if dynamic {
        builder.class(CLASS).build()
    } else {
        builder.build()
    };
    c.status = None;
    c
}

/// The StorageClass [`ChaosPlugin`] provisions for (Delete, immediate).
pub(crate) fn chaos_class() -> k8s_openapi::api::storage::v1::StorageClass {
    storage_class(CLASS, PLUGIN, "Immediate")
}

/// A claim reference by name only: the volume is pre-bound to that claim.
pub(crate) fn pre_binding(name: &str) -> ObjectReference {
    ObjectReference {
        kind: Some("PersistentVolumeClaim".to_string()),
        namespace: Some("default".to_string()),
        name: Some(name.to_string()),
        ..Default::default()
    }
}

trait WithoutStatus {
    fn without_status(self) -> Self;
}

impl WithoutStatus for PersistentVolume {
    /// As a user creates it: the server and the controller set the phase.
    fn without_status(mut self) -> Self {
        self.status = None;
        self
    }
}

/// One call the storage backend received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StorageCall {
    /// Storage made for a claim (its UID), named as the volume.
    Provision { claim_uid: String, volume: String },
    /// Storage of a volume (name, UID) deleted.
    Delete { volume: String, uid: String },
}

/// A storage backend that works unless a fault says otherwise, and keeps a
/// log of what it was asked to do.
#[derive(Default)]
pub(crate) struct ChaosPlugin {
    pub(crate) calls: Mutex<Vec<StorageCall>>,
    /// Fails the next N calls (set by the fault schedule).
    pub(crate) failing: Mutex<u32>,
}

impl ChaosPlugin {
    fn fail_now(&self) -> bool {
        let mut failing = self.failing.lock().expect("plugin lock");
        if *failing == 0 {
            return false;
        }
        *failing -= 1;
        true
    }
}

/// Lets the chaos run keep its own handle on the plugin it gives away.
pub(crate) struct Shared(pub(crate) Arc<ChaosPlugin>);

impl VolumePlugin for Shared {
    fn name(&self) -> &str {
        PLUGIN
    }

    fn can_provision(&self) -> bool {
        true
    }

    fn can_delete(&self, _volume: &PersistentVolume) -> bool {
        true
    }

    fn provision<'a>(
        &'a self,
        request: &'a ProvisionRequest,
    ) -> BoxFuture<'a, Result<PersistentVolume, PluginError>> {
        Box::pin(async move {
            if self.0.fail_now() {
                return Err(PluginError::Failed("injected storage failure".into()));
            }
            self.0
                .calls
                .lock()
                .expect("plugin lock")
                .push(StorageCall::Provision {
                    claim_uid: request.claim.metadata.uid.clone().unwrap_or_default(),
                    volume: request.pv_name.clone(),
                });
            let mut volume = provisioned_volume(request);
            if let Some(spec) = volume.spec.as_mut() {
                spec.host_path = Some(HostPathVolumeSource {
                    path: format!("/chaos/{}", request.pv_name),
                    type_: None,
                });
            }
            Ok(volume)
        })
    }

    fn delete<'a>(
        &'a self,
        volume: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        Box::pin(async move {
            if self.0.fail_now() {
                return Err(PluginError::Failed("injected storage failure".into()));
            }
            self.0
                .calls
                .lock()
                .expect("plugin lock")
                .push(StorageCall::Delete {
                    volume: volume.metadata.name.clone().unwrap_or_default(),
                    uid: volume.metadata.uid.clone().unwrap_or_default(),
                });
            Ok(())
        })
    }
}
