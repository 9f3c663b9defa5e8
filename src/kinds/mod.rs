//! The kinds the process's controllers watch, and what the process keeps
//! of each: one trim per kind, the union of what any controller of the
//! process reads (every store of a kind is shared by the controllers that
//! read it). Pods, which three controllers read, and the readings of a pod
//! more than one of them needs are in [`pod`].

pub(crate) mod pod;

use k8s_openapi::api::core::v1::{Node, PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::api::resource::v1::{ResourceClaim, ResourceClaimTemplate};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::{Api, Client};
use serde_json::value::RawValue;

use crate::runtime::kinds::{Kind, Part, drop_managed_fields, metadata_and};

impl Kind for PersistentVolume {
    const NAME: &'static str = "persistentvolume";
    fn api(client: &Client, _namespace: &str) -> Api<Self> {
        Api::all(client.clone())
    }
    fn encode_part(&self, part: Part) -> serde_json::Result<Box<RawValue>> {
        metadata_and(&self.metadata, &self.spec, &self.status, part)
    }
    fn trim(&mut self) {
        drop_managed_fields(self);
    }
}

impl Kind for PersistentVolumeClaim {
    const NAME: &'static str = "persistentvolumeclaim";
    fn api(client: &Client, namespace: &str) -> Api<Self> {
        Api::namespaced(client.clone(), namespace)
    }
    fn encode_part(&self, part: Part) -> serde_json::Result<Box<RawValue>> {
        metadata_and(&self.metadata, &self.spec, &self.status, part)
    }
    fn trim(&mut self) {
        drop_managed_fields(self);
    }
}

impl Kind for StorageClass {
    const NAME: &'static str = "storageclass";
    fn api(client: &Client, _namespace: &str) -> Api<Self> {
        Api::all(client.clone())
    }
    fn trim(&mut self) {
        drop_managed_fields(self);
    }
}

impl Kind for Node {
    const NAME: &'static str = "node";
    fn api(client: &Client, _namespace: &str) -> Api<Self> {
        Api::all(client.clone())
    }
    /// Keeps the node's identity and labels (node affinity, the selected
    /// node of a provisioning); its status is large and never read.
    fn trim(&mut self) {
        drop_managed_fields(self);
        self.status = None;
    }
}

impl Kind for ResourceClaim {
    const NAME: &'static str = "resourceclaim";
    fn api(client: &Client, namespace: &str) -> Api<Self> {
        Api::namespaced(client.clone(), namespace)
    }
    fn encode_part(&self, part: Part) -> serde_json::Result<Box<RawValue>> {
        metadata_and(&self.metadata, &self.spec, &self.status, part)
    }
    fn trim(&mut self) {
        drop_managed_fields(self);
    }
}

impl Kind for ResourceClaimTemplate {
    const NAME: &'static str = "resourceclaimtemplate";
    fn api(client: &Client, namespace: &str) -> Api<Self> {
        Api::namespaced(client.clone(), namespace)
    }
    fn trim(&mut self) {
        drop_managed_fields(self);
    }
}
