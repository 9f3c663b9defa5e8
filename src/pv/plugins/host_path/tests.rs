use super::*;
use k8s_openapi::api::core::v1::{
    PersistentVolumeClaim, PersistentVolumeClaimSpec, VolumeResourceRequirements,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

fn plugin(enabled: bool, root: &Path) -> HostPathPlugin {
    let recycler = RecyclerPodConfig {
        template: recycler::default_template(),
        minimum_timeout: 60,
        timeout_increment: 30,
    };
    HostPathPlugin::new(recycler, enabled, root.to_path_buf())
}

fn request(pv_name: &str) -> ProvisionRequest {
    ProvisionRequest {
        pv_name: pv_name.to_string(),
        claim: PersistentVolumeClaim {
            spec: Some(PersistentVolumeClaimSpec {
                access_modes: Some(vec!["ReadWriteOnce".to_string()]),
                resources: Some(VolumeResourceRequirements {
                    requests: Some([("storage".to_string(), Quantity("1Gi".to_string()))].into()),
                    ..Default::default()
                }),
                ..Default::default()
            }),
            ..Default::default()
        },
        reclaim_policy: crate::pv::objects::ReclaimPolicy::Delete,
        parameters: Default::default(),
        mount_options: vec![],
        selected_node: None,
    }
}

#[tokio::test]
async fn provisions_a_directory_and_deletes_it() {
    let root = std::env::temp_dir().join(format!("hostpath-test-{}", std::process::id()));
    let plugin = plugin(true, &root);
    let volume = plugin
        .provision(&request("pvc-1"))
        .await
        .expect("provisioned");
    let path = volume
        .spec
        .as_ref()
        .and_then(|s| s.host_path.as_ref())
        .map(|h| h.path.clone());
    assert_eq!(path, Some(root.join("pvc-1").display().to_string()));
    assert!(root.join("pvc-1").is_dir());
    assert_eq!(
        volume
            .spec
            .as_ref()
            .and_then(|s| s.persistent_volume_reclaim_policy.as_deref()),
        Some("Delete")
    );
    plugin.delete(&volume).await.expect("deleted");
    assert!(!root.join("pvc-1").exists());
    plugin
        .delete(&volume)
        .await
        .expect("deleting a missing directory is fine");
    std::fs::remove_dir_all(&root).ok();
}

#[tokio::test]
async fn provisioning_is_refused_unless_enabled() {
    let root = std::env::temp_dir().join("hostpath-never-created");
    let error = plugin(false, &root)
        .provision(&request("pvc-2"))
        .await
        .err();
    assert!(matches!(error, Some(PluginError::Setup(m)) if m.contains("disabled")));
    assert!(!root.exists());
}

#[tokio::test]
async fn block_claims_are_refused_before_anything_is_made() {
    let root = std::env::temp_dir().join(format!("hostpath-block-{}", std::process::id()));
    let mut block = request("pvc-3");
    if let Some(spec) = block.claim.spec.as_mut() {
        spec.volume_mode = Some("Block".to_string());
    }
    let error = plugin(true, &root).provision(&block).await.err();
    assert!(matches!(
        error,
        Some(PluginError::Failed(m)) if m == "kubernetes.io/host-path does not support block volume provisioning"
    ));
    assert!(!root.exists());
}

#[test]
fn deletes_only_below_tmp_or_the_root() {
    let plugin = plugin(true, Path::new("/srv/volumes"));
    assert!(plugin.may_delete(Path::new("/tmp/x")));
    assert!(plugin.may_delete(Path::new("/srv/volumes/pvc-1")));
    assert!(!plugin.may_delete(Path::new("/tmp")));
    assert!(!plugin.may_delete(Path::new("/tmp/../etc")));
    assert!(!plugin.may_delete(Path::new("/etc/passwd")));
    assert!(!plugin.may_delete(Path::new("/srv/volumes")));
    assert!(!plugin.may_delete(Path::new("tmp/x")));
}
