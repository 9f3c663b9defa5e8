//! The binder's long operations: delete a released volume's storage and
//! object, recycle (scrub) a released volume, provision a volume for a
//! claim. A decision starts one by name ([`crate::pv::keys`]); the tracker
//! runs at most one per name, and the executor builds its work here
//! ([`Operations::runner`]).
//!
//! Unlike a decision, an operation awaits: it reads its object from the
//! API server again (the decision that started it may have been made from
//! a view that is stale by now), asks the volume plugins to touch storage,
//! and waits. What it writes and records is planned by the decisions' own
//! functions ([`crate::pv::controller`]) and carried out by the same
//! executor as every plan, each write conditional on the copy the
//! operation read.

mod delete;
mod provision;
mod recycle;

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use kube::Client;

use crate::pv::controller::{Binder, PvEffect, PvPlan};
use crate::pv::error::Result;
use crate::pv::keys::{DELETE, PROVISION, RECYCLE, VolumeName};
use crate::runtime::executor::{Executor, Runner};
use crate::runtime::keys::ObjectKey;
use crate::runtime::operations::OperationName;
use crate::runtime::plan::Then;

/// What the binder's operations work with: what its decisions read (and
/// plan with), and a client for what a recycle reads of its pod.
#[derive(Clone)]
pub(crate) struct Operations {
    /// What the binder knows and decides by.
    pub(crate) binder: Binder,
    /// For reading recycler pods and their events.
    pub(crate) client: Client,
}

/// The executor of the binder's plans, on which an operation carries out
/// its own.
type PvExecutor = Executor<PvEffect>;

impl Operations {
    /// What the executor starts the binder's operations with.
    pub(crate) fn runner(self) -> Runner<PvEffect> {
        Arc::new(move |name: &OperationName, executor: &PvExecutor| {
            let (this, name, executor) = (self.clone(), name.clone(), executor.clone());
            let work: crate::runtime::executor::OperationWork = match name.kind() {
                DELETE => Box::pin(async move {
                    this.delete(&name, &executor)
                        .await
                        .map_err(|error| error.to_string())
                }),
                RECYCLE => Box::pin(async move {
                    this.recycle(&name, &executor)
                        .await
                        .map_err(|error| error.to_string())
                }),
                // The provisioning future is large: keep it on the heap.
                PROVISION => Box::pin(async move {
                    Box::pin(this.provision(&name, &executor))
                        .await
                        .map_err(|error| error.to_string())
                }),
                _ => return None,
            };
            Some(work)
        })
    }
}

/// Carries `plan` out on the binder's executor.
async fn carry_out(executor: &PvExecutor, plan: PvPlan) -> Result<Then> {
    Ok(executor.execute(plan).await?)
}

/// The volume `name` as the API server has it now (stored on the way);
/// `None` when it is gone.
async fn read_volume(
    executor: &PvExecutor,
    name: &VolumeName,
) -> Result<Option<Arc<PersistentVolume>>> {
    Ok(executor
        .writers()
        .get::<PersistentVolume>()?
        .read(&name.key())
        .await?)
}

/// The claim `key` as the API server has it now (stored on the way);
/// `None` when it is gone.
async fn read_claim(
    executor: &PvExecutor,
    key: &ObjectKey,
) -> Result<Option<Arc<PersistentVolumeClaim>>> {
    Ok(executor
        .writers()
        .get::<PersistentVolumeClaim>()?
        .read(key)
        .await?)
}

/// The operation `name`'s object is not the incarnation it was started for.
fn another_incarnation(name: &OperationName, uid: Option<&str>) -> bool {
    uid.unwrap_or_default() != name.uid()
}

#[cfg(test)]
mod tests;
