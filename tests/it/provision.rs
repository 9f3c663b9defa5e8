//! The provisioning scenarios: upstream's provision table (set 11) and
//! multi-sync cases (set 12), with the mock plugin, each row run as one
//! direct sync (plus the operation it starts) and with the whole controller
//! until it settles. A claim of a class whose in-tree plugin migrated to
//! CSI (11-21) is handed to the driver and, as upstream's controller with
//! its real plugin manager, gets no `migrated-to` (upstream's own row 11-21
//! expects one because its fake manager calls every name migrated).

use std::sync::Arc;
use std::time::Duration;

use crate::harness::{Running, row, run_table};
use crate::mock_plugin::{
    MockConfig, MockPlugin, provision1_error, provision1_success, provision2_success,
};
use k8s_names::{
    ANN_BETA_STORAGE_PROVISIONER, ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER,
    ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
    FINALIZER_PV_CONTROLLER, FINALIZER_PV_PROTECTION,
};
use k8s_openapi::api::core::v1::{
    Node, PersistentVolume, PersistentVolumeClaim, TypedLocalObjectReference,
};
use k8s_openapi::api::storage::v1::StorageClass;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use memapi::{MemApi, Reactor, Verb};
use pv_controller::pv;
use pv_controller::pv::RetryPolicy;
use pv_controller::pv::Settings;
use pv_controller::pv::VolumePlugins;
use testkit::*;

fn class(name: &str, provisioner: &str, mode: &str, param: (&str, &str)) -> StorageClass {
    StorageClass {
        parameters: Some([(param.0.to_string(), param.1.to_string())].into()),
        ..storage_class(name, provisioner, mode)
    }
}

fn classes() -> Vec<StorageClass> {
    let p1 = ("param1", "value1");
    vec![
        class("gold", MOCK_PLUGIN, "Immediate", p1),
        class("silver", MOCK_PLUGIN, "Immediate", ("param2", "value2")),
        class("copper", MOCK_PLUGIN, "WaitForFirstConsumer", p1),
        class("external", "vendor.com/my-volume", "Immediate", p1),
        class(
            "external-wait",
            "vendor.com/my-volume-wait",
            "WaitForFirstConsumer",
            p1,
        ),
        class("unknown-internal", "kubernetes.io/unknown", "Immediate", p1),
        StorageClass {
            mount_options: Some(vec!["foo".to_string()]),
            ..class("unsupported-mountoptions", MOCK_PLUGIN, "Immediate", p1)
        },
        class("gp2", "kubernetes.io/aws-ebs", "Immediate", p1),
        class(
            "gp2-wait",
            "kubernetes.io/aws-ebs",
            "WaitForFirstConsumer",
            p1,
        ),
    ]
}

fn node1() -> Node {
    Node {
        metadata: ObjectMeta {
            name: Some("node1".to_string()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A pending claim of a class.
fn pending(name: &str, uid: &str, class: &str) -> ClaimBuilder {
    claim(name, uid, "1Gi").class(class)
}

/// The same claim after the controller named its provisioner.
fn handed(name: &str, uid: &str, class: &str) -> ClaimBuilder {
    pending(name, uid, class).annotations(&[ANN_STORAGE_PROVISIONER, ANN_BETA_STORAGE_PROVISIONER])
}

/// The claim handed to an external provisioner.
fn handed_to(name: &str, uid: &str, class: &str, provisioner: &str) -> ClaimBuilder {
    pending(name, uid, class)
        .annotation(ANN_STORAGE_PROVISIONER, provisioner)
        .annotation(ANN_BETA_STORAGE_PROVISIONER, provisioner)
}

/// The volume the mock provisions for a claim, as the server stores it
/// (admission adds pv-protection to the controller's own finalizer).
fn provisioned(uid: &str, claim_name: &str, class: &str) -> VolumeBuilder {
    volume(&format!("pvc-{uid}"), "1Gi")
        .bound_to(uid, claim_name)
        .phase("Bound")
        .policy("Delete")
        .class(class)
        .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED])
        .finalizers(&[FINALIZER_PV_CONTROLLER, FINALIZER_PV_PROTECTION])
}

/// A claim bound to its provisioned volume.
fn bound_provisioned(name: &str, uid: &str, class: &str) -> ClaimBuilder {
    handed(name, uid, class)
        .volume_name(&format!("pvc-{uid}"))
        .phase("Bound")
        .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])
}

/// A claim bound to the volume `pvc-<uid>` that was there before its first
/// sync: never handed to a provisioner, so without provisioner annotations.
fn bound_without_provisioning(name: &str, uid: &str, class: &str) -> ClaimBuilder {
    pending(name, uid, class)
        .volume_name(&format!("pvc-{uid}"))
        .phase("Bound")
        .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])
}

fn create_fails(times: u32) -> Reactor {
    Reactor::on(Verb::Create, "persistentvolumes")
        .error(500)
        .times(times)
}

#[tokio::test(start_paused = true)]
async fn set_11_provision() {
    run_table(vec![
        row("11-1 successful provision with storage class 1")
            .volumes(vec![], volumes([provisioned("uid11-1", "claim11-1", "gold")]))
            .claims(claims([pending("claim11-1", "uid11-1", "gold")]), claims([handed("claim11-1", "uid11-1", "gold")]))
            .classes(classes())
            .plugin(MockConfig::default().provisions(vec![provision1_success()]))
            .events(&["Normal ProvisioningSucceeded Successfully provisioned volume pvc-uid11-1 using kubernetes.io/mock-volume"])
            .settles_with(|s| {
                s.claim("claim11-1", |_| {
                    bound_provisioned("claim11-1", "uid11-1", "gold")
                })
            }),
        row("11-2 plugin not found")
            .same_claims(claims([pending("claim11-2", "uid11-2", "gold")]))
            .classes(classes())
            .events(&["Warning ProvisioningFailed"]),
        row("11-3 newProvisioner failure")
            .claims(claims([pending("claim11-3", "uid11-3", "gold")]), claims([handed("claim11-3", "uid11-3", "gold")]))
            .classes(classes())
            .plugin(MockConfig::default())
            .events(&["Warning ProvisioningFailed Failed to create provisioner: Mock plugin error: no provisionCalls configured"]),
        row("11-4 provision failure")
            .claims(claims([pending("claim11-4", "uid11-4", "gold")]), claims([handed("claim11-4", "uid11-4", "gold")]))
            .classes(classes())
            .plugin(MockConfig::default().provisions(vec![provision1_error()]))
            .events(&["Warning ProvisioningFailed Failed to provision volume with StorageClass \"gold\": Mock provisioner error"]),
        row("11-6 provisioning when there is a volume available")
            .volumes(
                volumes([volume("volume11-6", "1Gi").phase("Available").class("gold")]),
                volumes([volume("volume11-6", "1Gi")
                    .bound_to("uid11-6", "claim11-6")
                    .phase("Bound")
                    .class("gold")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([pending("claim11-6", "uid11-6", "gold")]),
                claims([pending("claim11-6", "uid11-6", "gold")
                    .volume_name("volume11-6")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            )
            .classes(classes())
            .plugin(MockConfig::default().provisions(vec![provision1_success()])),
        row("11-7 claim is bound before provisioning")
            .volumes(vec![], volumes([provisioned("uid11-7", "claim11-7", "gold")]))
            .claims(claims([pending("claim11-7", "uid11-7", "gold")]), claims([handed("claim11-7", "uid11-7", "gold")]))
            .classes(classes())
            .plugin(MockConfig::default())
            .inject(|api, _| {
                // Another controller provisioned the volume meanwhile.
                let volume: PersistentVolume = provisioned("uid11-7", "claim11-7", "gold").build();
                api.put(&volume).expect("put volume");
            })
            // Settled: the volume is there before the claim's first sync.
            .settles_with(|s| {
                s.claim("claim11-7", |_| {
                    bound_without_provisioning("claim11-7", "uid11-7", "gold")
                })
            }),
        row("11-8 cannot save provisioned volume")
            .volumes(vec![], volumes([provisioned("uid11-8", "claim11-8", "gold")]))
            .claims(claims([pending("claim11-8", "uid11-8", "gold")]), claims([handed("claim11-8", "uid11-8", "gold")]))
            .classes(classes())
            .errors(vec![create_fails(1)])
            .plugin(MockConfig::default().provisions(vec![provision1_success()]))
            .events(&["Normal ProvisioningSucceeded"])
            .settles_with(|s| {
                s.claim("claim11-8", |_| {
                    bound_provisioned("claim11-8", "uid11-8", "gold")
                })
            }),
        row("11-9 cannot save provisioned volume, delete succeeds")
            .claims(claims([pending("claim11-9", "uid11-9", "gold")]), claims([handed("claim11-9", "uid11-9", "gold")]))
            .classes(classes())
            .errors(vec![create_fails(5)])
            .plugin(MockConfig::default().provisions(vec![provision1_success()]).deletes(&[None]))
            .events(&["Warning ProvisioningFailed Error creating provisioned PV object for claim default/claim11-9"]),
        row("11-10 cannot save provisioned volume, no delete plugin found")
            .claims(claims([pending("claim11-10", "uid11-10", "gold")]), claims([handed("claim11-10", "uid11-10", "gold")]))
            .classes(classes())
            .errors(vec![create_fails(5)])
            .plugin(MockConfig::default().provisions(vec![provision1_success()]))
            .events(&["Warning ProvisioningFailed", "Warning ProvisioningCleanupFailed"]),
        row("11-11 cannot save provisioned volume, deleter fails")
            .claims(claims([pending("claim11-11", "uid11-11", "gold")]), claims([handed("claim11-11", "uid11-11", "gold")]))
            .classes(classes())
            .errors(vec![create_fails(5)])
            .plugin(MockConfig::default().provisions(vec![provision1_success()]).deletes(&[
                Some("Mock deletion error1"),
                Some("Mock deletion error2"),
                Some("Mock deletion error3"),
                Some("Mock deletion error4"),
                Some("Mock deletion error5"),
            ]))
            .events(&[
                "Warning ProvisioningFailed",
                "Warning ProvisioningCleanupFailed Error cleaning provisioned volume for claim default/claim11-11: Mock deletion error5. Please delete manually.",
            ]),
        row("11-12 cannot save provisioned volume, delete succeeds 2nd time")
            .claims(claims([pending("claim11-12", "uid11-12", "gold")]), claims([handed("claim11-12", "uid11-12", "gold")]))
            .classes(classes())
            .errors(vec![create_fails(5)])
            .plugin(MockConfig::default()
                .provisions(vec![provision1_success()])
                .deletes(&[Some("Mock deletion error1"), None]))
            .events(&["Warning ProvisioningFailed"]),
        row("11-13 successful provision with storage class 2")
            .volumes(vec![], volumes([provisioned("uid11-13", "claim11-13", "silver")]))
            .claims(claims([pending("claim11-13", "uid11-13", "silver")]), claims([handed("claim11-13", "uid11-13", "silver")]))
            .classes(classes())
            .plugin(MockConfig::default().provisions(vec![provision2_success()]))
            .events(&["Normal ProvisioningSucceeded"])
            .settles_with(|s| {
                s.claim("claim11-13", |_| {
                    bound_provisioned("claim11-13", "uid11-13", "silver")
                })
            }),
        row("11-14 fail due to non-existing class")
            .same_claims(claims([pending("claim11-14", "uid11-14", "non-existing")]))
            .classes(classes())
            .plugin(MockConfig::default())
            .events(&["Warning ProvisioningFailed"]),
        row("11-15 no provisioning with class=''")
            .same_claims(claims([pending("claim11-15", "uid11-15", "")]))
            .classes(classes())
            .plugin(MockConfig::default())
            .events(&["Normal FailedBinding"]),
        row("11-16 no provisioning with class=nil")
            .same_claims(claims([claim("claim11-16", "uid11-16", "1Gi")]))
            .classes(classes())
            .plugin(MockConfig::default())
            .events(&["Normal FailedBinding"]),
        row("11-17 external provisioner")
            .claims(
                claims([pending("claim11-17", "uid11-17", "external")]),
                claims([handed_to("claim11-17", "uid11-17", "external", "vendor.com/my-volume")]),
            )
            .classes(classes())
            .plugin(MockConfig::default())
            .events(&["Normal ExternalProvisioning"]),
        row("11-18 unknown internal provisioner")
            .same_claims(claims([pending("claim11-18", "uid11-18", "unknown-internal")]))
            .classes(classes())
            .plugin(MockConfig::default())
            .events(&["Warning ProvisioningFailed"]),
        row("11-19 provisioned volume saved but API server crashed")
            // The first create was stored but unanswered; the controller's
            // check for an existing volume missed it (a stale read), so the
            // retry meets AlreadyExists, which counts as success.
            .volumes(vec![], volumes([provisioned("uid11-19", "claim11-19", "gold")]))
            .claims(claims([pending("claim11-19", "uid11-19", "gold")]), claims([handed("claim11-19", "uid11-19", "gold")]))
            .classes(classes())
            .errors(vec![
                Reactor::on(Verb::Get, "persistentvolumes").name("pvc-uid11-19").error(404),
                create_fails(1),
            ])
            .inject(|api, _| {
                let volume: PersistentVolume = provisioned("uid11-19", "claim11-19", "gold").build();
                api.put(&volume).expect("put volume");
            })
            .plugin(MockConfig::default().provisions(vec![provision1_success()]))
            .events(&["Normal ProvisioningSucceeded"])
            // Settled: the volume is there before the claim's first sync.
            .settles_with(|s| {
                s.claim("claim11-19", |_| {
                    bound_without_provisioning("claim11-19", "uid11-19", "gold")
                })
            })
            .settled_events(&[]),
        row("11-20 unsupported storageClass.mountOptions")
            .claims(
                claims([pending("claim11-20", "uid11-20", "unsupported-mountoptions")]),
                claims([handed("claim11-20", "uid11-20", "unsupported-mountoptions")]),
            )
            .classes(classes())
            .plugin(MockConfig::default())
            .events(&["Warning ProvisioningFailed Mount options are not supported by the provisioner but StorageClass \"unsupported-mountoptions\" has mount options [foo]"]),
        row("11-22 external provisioner with volume available")
            .volumes(
                volumes([volume("volume11-22", "1Gi").phase("Available").class("external")]),
                volumes([volume("volume11-22", "1Gi")
                    .bound_to("uid11-22", "claim11-22")
                    .phase("Bound")
                    .class("external")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([pending("claim11-22", "uid11-22", "external")]),
                claims([pending("claim11-22", "uid11-22", "external")
                    .volume_name("volume11-22")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            )
            .classes(classes())
            .plugin(MockConfig::default()),
        row("11-23 skip finding PV and provision for PVC annotated with AnnSelectedNode")
            .volumes(
                volumes([volume("volume11-23", "1Gi").phase("Available").policy("Delete").class("copper")]),
                volumes([
                    volume("volume11-23", "1Gi").phase("Available").policy("Delete").class("copper"),
                    provisioned("uid11-23", "claim11-23", "copper"),
                ]),
            )
            .claims(
                claims([pending("claim11-23", "uid11-23", "copper").annotation(ANN_SELECTED_NODE, "node1")]),
                claims([handed("claim11-23", "uid11-23", "copper").annotation(ANN_SELECTED_NODE, "node1")]),
            )
            .classes(classes())
            .nodes(vec![node1()])
            .plugin(MockConfig::default().provisions(vec![provision1_success()]))
            .events(&["Normal ProvisioningSucceeded"])
            .settles_with(|s| {
                s.claim("claim11-23", |_| {
                    bound_provisioned("claim11-23", "uid11-23", "copper")
                        .annotation(ANN_SELECTED_NODE, "node1")
                })
            }),
        row("11-24 skip finding PV and wait external provisioner for PVC annotated with AnnSelectedNode")
            .same_volumes(volumes([volume("volume11-24", "1Gi").phase("Available").policy("Delete").class("external-wait")]))
            .claims(
                claims([pending("claim11-24", "uid11-24", "external-wait").annotation(ANN_SELECTED_NODE, "node1")]),
                claims([handed_to("claim11-24", "uid11-24", "external-wait", "vendor.com/my-volume-wait")
                    .annotation(ANN_SELECTED_NODE, "node1")]),
            )
            .classes(classes())
            .events(&["Normal ExternalProvisioning"]),
        // CSI migration: a gp2 class (the default class of many managed
        // clusters) is served by ebs.csi.aws.com's external provisioner.
        row("11-21 external provisioner for CSI migration")
            .claims(
                claims([pending("claim11-21", "uid11-21", "gp2")]),
                claims([handed_to("claim11-21", "uid11-21", "gp2", "ebs.csi.aws.com")]),
            )
            .classes(classes())
            .events(&["Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'ebs.csi.aws.com'"]),
        row("11-21-1 CSI migration with delayed binding and a selected node")
            .claims(
                claims([pending("claim11-21-1", "uid11-21-1", "gp2-wait").annotation(ANN_SELECTED_NODE, "node1")]),
                claims([handed_to("claim11-21-1", "uid11-21-1", "gp2-wait", "ebs.csi.aws.com")
                    .annotation(ANN_SELECTED_NODE, "node1")]),
            )
            .classes(classes())
            .events(&["Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'ebs.csi.aws.com'"]),
        // A claim an older controller handed to the in-tree plugin by name
        // is re-addressed to the driver.
        row("11-21-2 claim handed to the in-tree plugin before migration")
            .claims(
                claims([handed_to("claim11-21-2", "uid11-21-2", "gp2", "kubernetes.io/aws-ebs")]),
                claims([handed_to("claim11-21-2", "uid11-21-2", "gp2", "ebs.csi.aws.com")]),
            )
            .classes(classes())
            .events(&["Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner 'ebs.csi.aws.com'"]),
        row("11-25 failed in-tree provision with data source")
            .same_claims(vec![with_data_source(pending("claim11-25", "uid11-25", "gold").build())])
            .classes(classes())
            .plugin(MockConfig::default().provisions(vec![provision1_success()]))
            .events(&["Warning ProvisioningFailed plugin \"kubernetes.io/mock-volume\" is not a CSI plugin. Only CSI plugin can provision a claim with a datasource"]),
        row("11-26 failed provision on the selected node removes it for rescheduling")
            .claims(
                claims([pending("claim11-26", "uid11-26", "copper").annotation(ANN_SELECTED_NODE, "node1")]),
                claims([handed("claim11-26", "uid11-26", "copper")]),
            )
            .classes(classes())
            .nodes(vec![node1()])
            .plugin(MockConfig::default().provisions(vec![provision1_error()]))
            .events(&["Warning ProvisioningFailed Failed to provision volume with StorageClass \"copper\""])
            .settled_events(&["Warning ProvisioningFailed", "Normal WaitForFirstConsumer"]),
    ])
    .await;
}

fn with_data_source(mut claim: PersistentVolumeClaim) -> PersistentVolumeClaim {
    if let Some(spec) = claim.spec.as_mut() {
        spec.data_source = Some(TypedLocalObjectReference {
            api_group: Some("snapshot.storage.k8s.io".to_string()),
            kind: "VolumeSnapshot".to_string(),
            name: "snapshot".to_string(),
        });
    }
    claim
}

#[tokio::test(start_paused = true)]
async fn set_12_provision_multi_sync() {
    let external_volume = |uid: &str, claim_name: Option<&str>| {
        let builder = volume(&format!("pvc-{uid}"), "1Gi").class("external");
        match claim_name {
            Some(name) => builder
                .bound_to(uid, name)
                .annotations(&[ANN_BOUND_BY_CONTROLLER]),
            None => builder.phase("Available"),
        }
    };
    run_table(vec![
        row("12-1 successful provision")
            .volumes(
                vec![],
                volumes([provisioned("uid12-1", "claim12-1", "gold")]),
            )
            .claims(
                claims([pending("claim12-1", "uid12-1", "gold")]),
                claims([handed("claim12-1", "uid12-1", "gold")]),
            )
            .classes(classes())
            .plugin(MockConfig::default().provisions(vec![provision1_success()]))
            .events(&["Normal ProvisioningSucceeded"])
            .settles_with(|s| {
                s.claim("claim12-1", |_| {
                    bound_provisioned("claim12-1", "uid12-1", "gold")
                })
            }),
        row("12-2 external provisioner with volume provisioned success")
            .volumes(vec![], volumes([external_volume("uid12-2", None)]))
            .claims(
                claims([pending("claim12-2", "uid12-2", "external")]),
                claims([handed_to(
                    "claim12-2",
                    "uid12-2",
                    "external",
                    "vendor.com/my-volume",
                )]),
            )
            .classes(classes())
            .inject(move |api, controller| {
                let volume: PersistentVolume = external_volume("uid12-2", None).build();
                let stored = api.put(&volume).expect("put volume");
                if let Some(controller) = controller {
                    controller
                        .store()
                        .offer_volume(Arc::new(stored))
                        .expect("cache");
                }
            })
            .events(&["Normal ExternalProvisioning"])
            // Settled: the volume exists from the start, so the claim binds
            // without any provisioning.
            .settles_with(|s| {
                s.volume("pvc-uid12-2", |v| {
                    v.bound_to("uid12-2", "claim12-2")
                        .annotations(&[ANN_BOUND_BY_CONTROLLER])
                        .phase("Bound")
                })
                .claim("claim12-2", |_| {
                    bound_without_provisioning("claim12-2", "uid12-2", "external")
                })
            })
            .settled_events(&[]),
        row("12-3 external provisioner with volume to be provisioned")
            .claims(
                claims([pending("claim12-3", "uid12-3", "external")]),
                claims([handed_to(
                    "claim12-3",
                    "uid12-3",
                    "external",
                    "vendor.com/my-volume",
                )]),
            )
            .classes(classes())
            .plugin(MockConfig::default().provisions(vec![provision1_success()]))
            .events(&["Normal ExternalProvisioning"]),
        row("12-4 external provisioner with volume provisioned/bound success")
            .volumes(
                vec![],
                volumes([external_volume("uid12-4", Some("claim12-4"))]),
            )
            .claims(
                claims([pending("claim12-4", "uid12-4", "external")]),
                claims([handed_to(
                    "claim12-4",
                    "uid12-4",
                    "external",
                    "vendor.com/my-volume",
                )]),
            )
            .classes(classes())
            .inject(move |api, _| {
                let volume: PersistentVolume =
                    external_volume("uid12-4", Some("claim12-4")).build();
                api.put(&volume).expect("put volume");
            })
            .events(&["Normal ExternalProvisioning"])
            // Settled: the volume is there before the claim's first sync.
            .settles_with(|s| {
                s.volume("pvc-uid12-4", |v| v.phase("Bound"))
                    .claim("claim12-4", |_| {
                        bound_without_provisioning("claim12-4", "uid12-4", "external")
                    })
            })
            .settled_events(&[]),
    ])
    .await;
}

/// Every in-tree plugin upstream migrated hands its claims to its CSI driver.
#[tokio::test(start_paused = true)]
async fn every_migrated_plugin_hands_its_claims_to_its_driver() {
    let plugins = [
        ("kubernetes.io/aws-ebs", "ebs.csi.aws.com"),
        ("kubernetes.io/gce-pd", "pd.csi.storage.gke.io"),
        ("kubernetes.io/azure-disk", "disk.csi.azure.com"),
        ("kubernetes.io/azure-file", "file.csi.azure.com"),
        ("kubernetes.io/cinder", "cinder.csi.openstack.org"),
        ("kubernetes.io/vsphere-volume", "csi.vsphere.vmware.com"),
        ("kubernetes.io/portworx-volume", "pxd.portworx.com"),
    ];
    let rows = plugins
        .iter()
        .map(|(plugin, driver)| {
            let class_name = plugin.trim_start_matches("kubernetes.io/");
            let name: &'static str = Box::leak(format!("migrated {plugin}").into_boxed_str());
            let event: &'static str = Box::leak(
                format!("Normal ExternalProvisioning Waiting for a volume to be created either by the external provisioner '{driver}'")
                    .into_boxed_str(),
            );
            row(name)
                .claims(
                    claims([pending("claim", "uid", class_name)]),
                    claims([handed_to("claim", "uid", class_name, driver)]),
                )
                .classes(vec![class(class_name, plugin, "Immediate", ("type", "ssd"))])
                .events(&[event])
        })
        .collect();
    run_table(rows).await;
}

/// A claim of a migrated in-tree class, handed to the CSI driver, binds to
/// the in-tree volume the driver provisions for it: the claim never
/// carries `migrated-to` (as upstream's, whose provisioner annotation
/// names the driver), the volume does.
#[tokio::test(start_paused = true)]
async fn a_migrated_claim_binds_without_migrated_to() {
    const DRIVER: &str = "ebs.csi.aws.com";
    let api = MemApi::new();
    api.create(&class(
        "gp2",
        "kubernetes.io/aws-ebs",
        "Immediate",
        ("type", "ssd"),
    ))
    .expect("class");
    api.create(&pending("claim", "uid", "gp2").build())
        .expect("claim");
    let running = Running::binder(&api).await;
    running.settle().await;
    let handed = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim")
        .expect("claim");
    let annotations = handed.metadata.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations.get(ANN_STORAGE_PROVISIONER).map(String::as_str),
        Some(DRIVER)
    );
    // The driver's external provisioner makes an in-tree volume, as CSI
    // migration writes it.
    let provisioned = volume("pvc-uid", "1Gi")
        .claim_ref("default", "claim", "uid")
        .class("gp2")
        .policy("Delete")
        .annotation(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/aws-ebs")
        .build();
    api.create(&provisioned).expect("volume");
    running.settle().await;
    running.stop().await;
    let claim = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim")
        .expect("claim");
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
    let annotations = claim.metadata.annotations.unwrap_or_default();
    assert!(
        !annotations.contains_key(ANN_MIGRATED_TO),
        "no migrated-to on the claim: {annotations:?}"
    );
    let volume = api
        .get::<PersistentVolume>(None, "pvc-uid")
        .expect("volume");
    assert_eq!(
        volume
            .metadata
            .annotations
            .unwrap_or_default()
            .get(ANN_MIGRATED_TO)
            .map(String::as_str),
        Some(DRIVER),
        "the volume is marked migrated"
    );
}

/// The first create of the provisioned volume is stored but its answer is
/// lost, and every retry fails before reaching the store: the volume object
/// exists, so its storage must not be deleted as if the object could not
/// be saved (found by the chaos suite: a volume left without storage).
#[tokio::test(start_paused = true)]
async fn storage_of_a_volume_object_stored_unanswered_is_never_deleted() {
    let api = server_with_claim(pending("claim-x", "uid-x", "gold"));
    // The first create waits a second (already past the reactors), is
    // stored, and its answer is lost; from then on every create fails.
    let create = || Reactor::on(Verb::Create, "persistentvolumes");
    api.add_reactor(create().delay(Duration::from_secs(1)));
    api.add_reactor(create().error(500).after_commit());
    let (config, calls) = one_provision_and_delete(RetryPolicy::default());
    let running = Running::binder_with(&api, config).await;
    while api
        .requests()
        .count(Verb::Create, "persistentvolumes", None)
        == 0
    {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let failing = api.add_reactor(create().error(500).always());
    tokio::time::sleep(Duration::from_secs(120)).await;
    api.remove_reactor(failing);
    running.settle().await;
    running.stop().await;

    assert!(api.get::<PersistentVolume>(None, "pvc-uid-x").is_some());
    assert!(
        calls.lock().unwrap().deletes.is_empty(),
        "the storage behind the stored volume object was deleted"
    );
    let claim = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim-x")
        .expect("claim");
    assert_eq!(claim.status.and_then(|s| s.phase).as_deref(), Some("Bound"));
}

/// The first create of the provisioned volume is stored but its answer is
/// lost, and before the retry (a minute later) a user pre-binds another
/// volume to the claim by name; the claim takes that one. The provisioned
/// volume is not needed, but it is released only when the provisioning has
/// ended: deleted earlier, the retry would create it a second time, for
/// storage already deleted (found by the chaos suite: a second provisioning
/// for a live claim).
#[tokio::test(start_paused = true)]
async fn a_retried_volume_create_never_provisions_again_for_a_claim_bound_elsewhere() {
    let (api, storage_deletes, creates) = while_a_volume_create_is_retried(|api| {
        api.create(
            &volume("a-static", "1Gi")
                .class("gold")
                .bound_to("", "claim-x")
                .build(),
        )
        .expect("pre-bound volume");
    })
    .await;
    let claim = api
        .get::<PersistentVolumeClaim>(Some("default"), "claim-x")
        .expect("claim");
    let bound_to = claim.spec.and_then(|s| s.volume_name).unwrap_or_default();
    assert_eq!(bound_to, "a-static");
    assert_eq!(creates, 1, "creates of volume pvc-uid-x");
    assert!(api.get::<PersistentVolume>(None, "pvc-uid-x").is_none());
    assert_eq!(storage_deletes, 1);
}

/// As above, with the claim deleted before the retry: the volume is
/// released and its storage deleted once, after the provisioning ended.
#[tokio::test(start_paused = true)]
async fn a_retried_volume_create_never_provisions_again_for_a_deleted_claim() {
    let (api, storage_deletes, creates) = while_a_volume_create_is_retried(|api| {
        api.delete::<PersistentVolumeClaim>(Some("default"), "claim-x")
            .expect("delete claim");
    })
    .await;
    assert_eq!(creates, 1, "creates of volume pvc-uid-x");
    assert!(api.get::<PersistentVolume>(None, "pvc-uid-x").is_none());
    assert_eq!(storage_deletes, 1);
}

/// Runs the controller on a claim of class `gold` whose provisioned
/// volume's first create is stored unanswered, retried a minute later;
/// `meanwhile` changes the world as soon as the volume is stored, while
/// claim writes fail (so the claim is not bound to it first). Returns the
/// settled server, the plugin's storage deletes and the stored creates of
/// `pvc-uid-x`.
async fn while_a_volume_create_is_retried(
    meanwhile: impl FnOnce(&MemApi),
) -> (MemApi, usize, usize) {
    let api = server_with_claim(handed("claim-x", "uid-x", "gold"));
    let mut observed = api.observe::<PersistentVolume>().expect("observer");
    api.add_reactor(
        Reactor::on(Verb::Create, "persistentvolumes")
            .error(500)
            .after_commit(),
    );
    let claim_writes = api.add_reactor(
        Reactor::on(Verb::Patch, "persistentvolumeclaims")
            .error(500)
            .always(),
    );
    let (config, calls) = one_provision_and_delete(RetryPolicy {
        attempts: 5,
        interval: Duration::from_secs(60),
    });
    let running = Running::binder_with(&api, config).await;
    while api.get::<PersistentVolume>(None, "pvc-uid-x").is_none() {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    meanwhile(&api);
    api.remove_reactor(claim_writes);
    running.settle().await;
    running.stop().await;
    let creates = observed
        .drain()
        .iter()
        .filter(|o| o.change == memapi::ChangeType::Added)
        .filter(|o| o.object.metadata.name.as_deref() == Some("pvc-uid-x"))
        .count();
    let storage_deletes = calls.lock().unwrap().deletes.len();
    (api, storage_deletes, creates)
}

/// A server with the classes of this file and `claim`.
fn server_with_claim(claim: ClaimBuilder) -> MemApi {
    let api = MemApi::new();
    for class in classes() {
        api.create(&class).expect("class");
    }
    api.create(&claim.build()).expect("claim");
    api
}

/// A controller configuration whose mock plugin provisions once (class
/// `gold`) and deletes once, creating volume objects with `retry`; and the
/// plugin's record of calls.
fn one_provision_and_delete(
    retry: RetryPolicy,
) -> (
    pv::Config,
    Arc<std::sync::Mutex<crate::mock_plugin::MockCalls>>,
) {
    let plugin = Arc::new(MockPlugin::new(
        MockConfig::default()
            .provisions(vec![provision1_success()])
            .deletes(&[None]),
    ));
    let calls = Arc::clone(&plugin.calls);
    let config = pv::Config {
        settings: Settings {
            plugins: VolumePlugins::default().with(plugin),
            provision_retry: retry,
            ..Settings::default()
        },
        ..pv::Config::default()
    };
    (config, calls)
}
