//! Provisioning is handed off to external provisioners: a claim of a
//! class gets the provisioner's annotations and an ExternalProvisioning
//! event, and binds to the volume the provisioner creates. The test plays
//! the provisioner (and, for WaitForFirstConsumer, the scheduler).

use std::sync::Arc;
use std::time::Duration;

use anyhow::ensure;
use k8s_names::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO, ANN_SELECTED_NODE,
    ANN_STORAGE_PROVISIONER,
};
use k8s_openapi::api::core::v1::{
    AWSElasticBlockStoreVolumeSource, NodeSelector, NodeSelectorRequirement, NodeSelectorTerm,
    PersistentVolume, VolumeNodeAffinity,
};
use kube::api::{Patch, PatchParams};
use testkit::{VolumeBuilder, claim, storage_class};

use crate::support::case::{annotation, claim_phase, volume_phase};
use crate::support::{Case, wait};

/// The event of a claim handed to an external provisioner.
fn external_provisioning(provisioner: &str) -> String {
    format!(
        "Waiting for a volume to be created either by the external provisioner '{provisioner}' or manually by the system administrator. If volume creation is delayed, please verify that the provisioner is running and correctly registered."
    )
}

/// A provisioner name of this case only.
fn provisioner(case: &Case) -> String {
    format!("e2e.example.com/{}", case.namespace)
}

/// A WaitForFirstConsumer claim waits until the scheduler selects a node,
/// is then handed to its provisioner, and binds to the volume provisioned
/// on that node.
pub(crate) async fn wait_for_first_consumer(case: Arc<Case>) -> anyhow::Result<()> {
    let provisioner = provisioner(&case);
    let class = case.name("wffc");
    case.create_class(storage_class(&class, &provisioner, "WaitForFirstConsumer"))
        .await?;
    case.create_claim(claim("data", "", "1Gi").class(&class))
        .await?;
    let waiting = (
        "Normal",
        "WaitForFirstConsumer",
        "waiting for first consumer to be created before binding",
    );
    case.expect_events("pvc", "data", &[waiting]).await?;
    wait::holds(
        "no provisioner before a node is selected",
        Duration::from_secs(2),
        || async {
            let claim = case.claims().get("data").await?;
            Ok(match annotation(&claim.metadata, ANN_STORAGE_PROVISIONER) {
                None if claim_phase(&claim) == "Pending" => Ok(()),
                found => Err(format!("{found:?}, phase {}", claim_phase(&claim))),
            })
        },
    )
    .await?;

    let node = case.env.node.clone();
    let patch = serde_json::json!({"metadata": {"annotations": {ANN_SELECTED_NODE: node}}});
    case.claims()
        .patch("data", &PatchParams::default(), &Patch::Merge(&patch))
        .await?;
    let handed = case
        .wait_claim("data", "handed to the provisioner", |c| {
            annotation(&c.metadata, ANN_STORAGE_PROVISIONER) == Some(provisioner.as_str())
        })
        .await?;
    ensure!(
        annotation(&handed.metadata, ANN_BETA_STORAGE_PROVISIONER) == Some(provisioner.as_str()),
        "the beta key too: {:?}",
        handed.metadata.annotations
    );
    let message = external_provisioning(&provisioner);
    let handed_off = ("Normal", "ExternalProvisioning", message.as_str());
    case.expect_events("pvc", "data", &[waiting, handed_off])
        .await?;

    let mut volume = provisioned(&case, "data", &provisioner, &class).await?;
    volume
        .0
        .spec
        .get_or_insert_with(Default::default)
        .node_affinity = Some(on_node(&node));
    let volume_name = case
        .create_volume(volume)
        .await?
        .metadata
        .name
        .unwrap_or_default();
    let bound = case.claim_phase("data", "Bound").await?;
    ensure!(bound.spec.and_then(|s| s.volume_name) == Some(volume_name.clone()));
    case.volume_phase(&volume_name, "Bound").await?;
    case.expect_events("pvc", "data", &[waiting, handed_off])
        .await?;
    Ok(())
}

/// An Immediate claim of an external provisioner's class is handed off at
/// once and binds to the provisioned volume; released, that volume is left
/// to the provisioner to delete.
pub(crate) async fn external(case: Arc<Case>) -> anyhow::Result<()> {
    let provisioner = provisioner(&case);
    let class = case.name("external");
    case.create_class(storage_class(&class, &provisioner, "Immediate"))
        .await?;
    case.create_claim(claim("data", "", "1Gi").class(&class))
        .await?;
    let handed = case
        .wait_claim("data", "handed to the provisioner", |c| {
            annotation(&c.metadata, ANN_STORAGE_PROVISIONER) == Some(provisioner.as_str())
                && annotation(&c.metadata, ANN_BETA_STORAGE_PROVISIONER)
                    == Some(provisioner.as_str())
        })
        .await?;
    ensure!(
        claim_phase(&handed) == "Pending",
        "Pending until provisioned"
    );
    let message = external_provisioning(&provisioner);
    let events = [("Normal", "ExternalProvisioning", message.as_str())];
    case.expect_events("pvc", "data", &events).await?;

    let volume = provisioned(&case, "data", &provisioner, &class).await?;
    let volume_name = case
        .create_volume(volume)
        .await?
        .metadata
        .name
        .unwrap_or_default();
    case.claim_phase("data", "Bound").await?;
    case.volume_phase(&volume_name, "Bound").await?;
    released_and_left_alone(&case, &volume_name).await?;
    case.expect_events("pv", &volume_name, &[]).await?;
    Ok(())
}

/// A claim of a class naming an in-tree plugin that migrated to CSI
/// (`kubernetes.io/aws-ebs`) is handed to the CSI driver, without
/// `migrated-to` on the claim (as upstream); the volume the driver
/// provisions (an in-tree volume, as CSI migration writes it) is marked
/// migrated and never deleted by this controller.
pub(crate) async fn csi_migrated(case: Arc<Case>) -> anyhow::Result<()> {
    const IN_TREE: &str = "kubernetes.io/aws-ebs";
    const DRIVER: &str = "ebs.csi.aws.com";
    let class = case.name("ebs");
    case.create_class(storage_class(&class, IN_TREE, "Immediate"))
        .await?;
    case.create_claim(claim("data", "", "1Gi").class(&class))
        .await?;
    let handed = case
        .wait_claim("data", "handed to the CSI driver", |c| {
            annotation(&c.metadata, ANN_STORAGE_PROVISIONER) == Some(DRIVER)
        })
        .await?;
    ensure!(
        annotation(&handed.metadata, ANN_MIGRATED_TO).is_none(),
        "no migrated-to on the claim, as upstream: {:?}",
        handed.metadata.annotations
    );
    let message = external_provisioning(DRIVER);
    let events = [("Normal", "ExternalProvisioning", message.as_str())];
    case.expect_events("pvc", "data", &events).await?;

    let mut volume = provisioned(&case, "data", IN_TREE, &class).await?;
    let spec = volume.0.spec.get_or_insert_with(Default::default);
    spec.host_path = None;
    spec.aws_elastic_block_store = Some(AWSElasticBlockStoreVolumeSource {
        volume_id: format!("aws://eu-west-1a/vol-{}", case.namespace),
        fs_type: Some("ext4".to_string()),
        ..Default::default()
    });
    let volume_name = case
        .create_volume(volume)
        .await?
        .metadata
        .name
        .unwrap_or_default();
    let bound_claim = case.claim_phase("data", "Bound").await?;
    ensure!(
        annotation(&bound_claim.metadata, ANN_MIGRATED_TO).is_none(),
        "no migrated-to on the bound claim: {:?}",
        bound_claim.metadata.annotations
    );
    let bound = case
        .wait_volume(&volume_name, "Bound and marked migrated", |v| {
            volume_phase(v) == "Bound" && annotation(&v.metadata, ANN_MIGRATED_TO) == Some(DRIVER)
        })
        .await?;
    ensure!(annotation(&bound.metadata, ANN_DYNAMICALLY_PROVISIONED) == Some(IN_TREE));
    released_and_left_alone(&case, &volume_name).await?;
    case.expect_events("pv", &volume_name, &[]).await?;
    Ok(())
}

/// The volume a provisioner creates for `claim`: named `pvc-<uid>`,
/// pre-bound to the claim with its UID, `provisioned-by`, policy Delete.
async fn provisioned(
    case: &Case,
    claim: &str,
    provisioner: &str,
    class: &str,
) -> anyhow::Result<VolumeBuilder> {
    let uid = case
        .claims()
        .get(claim)
        .await?
        .metadata
        .uid
        .unwrap_or_default();
    let namespace = case.namespace.clone();
    Ok(case
        .host_path_volume(&format!("pvc-{uid}"), "1Gi")?
        .class(class)
        .policy("Delete")
        .claim_ref(&namespace, claim, &uid)
        .annotation(ANN_DYNAMICALLY_PROVISIONED, provisioner))
}

/// Node affinity to one node, as a provisioner of local storage sets it.
fn on_node(node: &str) -> VolumeNodeAffinity {
    VolumeNodeAffinity {
        required: Some(NodeSelector {
            node_selector_terms: vec![NodeSelectorTerm {
                match_expressions: Some(vec![NodeSelectorRequirement {
                    key: "kubernetes.io/hostname".to_string(),
                    operator: "In".to_string(),
                    values: Some(vec![node.to_string()]),
                }]),
                ..Default::default()
            }],
        }),
    }
}

/// Deletes the claim of the case; its volume goes Released and stays, not
/// deleted, not Failed: deleting it is the external provisioner's job.
async fn released_and_left_alone(case: &Case, volume: &str) -> anyhow::Result<()> {
    case.delete_claim("data").await?;
    case.volume_phase(volume, "Released").await?;
    wait::holds(
        "left to the external provisioner",
        Duration::from_secs(4),
        || async {
            let found: Option<PersistentVolume> = case.volumes().get_opt(volume).await?;
            Ok(match found {
                Some(v)
                    if volume_phase(&v) == "Released"
                        && v.metadata.deletion_timestamp.is_none() =>
                {
                    Ok(())
                }
                Some(v) => Err(format!(
                    "phase {}, deleting {:?}",
                    volume_phase(&v),
                    v.metadata.deletion_timestamp
                )),
                None => Err("deleted".to_string()),
            })
        },
    )
    .await
}
