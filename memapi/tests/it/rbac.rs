//! Users and RBAC: requests made as a user are authorized by the loaded
//! roles (403 in the API server's words otherwise), and the opt-in
//! OwnerReferencesPermissionEnforcement admission plugin asks the same
//! roles whether a user may block its owner's deletion.

use crate::support::{code, pvc};
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Pod};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, PostParams};
use memapi::{MemApi, MemApiConfig, Verb};

const USER: &str = "system:serviceaccount:ctl:ctl";

/// Claims may be created by the ServiceAccount `ctl/ctl`; with
/// `finalizers`, it may also update `pods/finalizers`.
fn rules(finalizers: bool) -> String {
    let extra = if finalizers {
        "  - apiGroups: [\"\"]\n    resources: [pods/finalizers]\n    verbs: [update]\n"
    } else {
        ""
    };
    format!(
        "kind: ClusterRole\nmetadata:\n  name: ctl\nrules:\n  - apiGroups: [\"\"]\n    resources: [persistentvolumeclaims]\n    verbs: [create, get]\n{extra}---\nkind: ClusterRoleBinding\nmetadata:\n  name: ctl\nroleRef:\n  kind: ClusterRole\n  name: ctl\nsubjects:\n  - kind: ServiceAccount\n    namespace: ctl\n    name: ctl\n"
    )
}

/// A claim owned by the pod `web`, blocking its deletion or not.
fn owned_claim(name: &str, block: bool) -> PersistentVolumeClaim {
    let mut claim = pvc("default", name, "1Gi");
    claim.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".to_string(),
        kind: "Pod".to_string(),
        name: "web".to_string(),
        uid: "uid-web".to_string(),
        controller: Some(true),
        block_owner_deletion: Some(block),
    }]);
    claim
}

fn server(enforcement: bool, finalizers: bool) -> (MemApi, Api<PersistentVolumeClaim>) {
    let api = MemApi::with_config(MemApiConfig {
        owner_references_permission_enforcement: enforcement,
        ..MemApiConfig::default()
    });
    api.load_rbac(&rules(finalizers)).unwrap();
    let client = kube::Client::new(api.service_as(USER, &[]), "default");
    (api, Api::namespaced(client, "default"))
}

#[tokio::test]
async fn a_user_gets_what_its_roles_grant_and_403_otherwise() {
    let (api, claims) = server(false, false);
    claims
        .create(&PostParams::default(), &pvc("default", "c1", "1Gi"))
        .await
        .unwrap();
    let pods: Api<Pod> = Api::namespaced(
        kube::Client::new(api.service_as(USER, &[]), "default"),
        "default",
    );
    let error = pods.get("web").await.unwrap_err().to_string();
    assert!(error.contains("403"), "{error}");
    assert!(
        error.contains(
            "pods \"web\" is forbidden: User \"system:serviceaccount:ctl:ctl\" cannot get resource \"pods\" in API group \"\" in the namespace \"default\""
        ),
        "{error}"
    );
    assert_eq!(api.requests().count_code(Verb::Get, "pods", None, 403), 1);
    // A request naming nobody is an administrator's.
    let anyone: Api<Pod> = Api::namespaced(api.client(), "default");
    assert_eq!(code(anyone.get("web").await.unwrap_err()), 404);
    // system:masters may do anything.
    let root: Api<Pod> = Api::namespaced(
        kube::Client::new(api.service_as("root", &["system:masters"]), "default"),
        "default",
    );
    assert_eq!(code(root.get("web").await.unwrap_err()), 404);
}

#[tokio::test]
async fn blocking_an_owners_deletion_needs_update_on_its_finalizers() {
    let (_, claims) = server(true, false);
    let error = claims
        .create(&PostParams::default(), &owned_claim("blocking", true))
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("403"), "{error}");
    assert!(
        error.contains(
            "persistentvolumeclaims \"blocking\" is forbidden: cannot set blockOwnerDeletion if an ownerReference refers to a resource you can't set finalizers on"
        ),
        "{error}"
    );
    // An owner reference that does not block needs nothing more.
    claims
        .create(&PostParams::default(), &owned_claim("plain", false))
        .await
        .unwrap();

    let (_, claims) = server(true, true);
    claims
        .create(&PostParams::default(), &owned_claim("blocking", true))
        .await
        .unwrap();
    // Off, as on a default server.
    let (_, claims) = server(false, false);
    claims
        .create(&PostParams::default(), &owned_claim("blocking", true))
        .await
        .unwrap();
}

/// Not RBAC, but the same kind of server setting: an API group version can
/// be withheld and served again at run time, as across a control-plane
/// upgrade.
#[tokio::test]
async fn a_withheld_group_version_is_not_discovered_nor_served() {
    let api = MemApi::new();
    let client = api.client();
    let served = |client: kube::Client| async move {
        let groups = client.list_api_groups().await.unwrap();
        let listed = groups.groups.iter().any(|g| {
            g.versions
                .iter()
                .any(|v| v.group_version == "resource.k8s.io/v1")
        });
        let resources = client.list_api_group_resources("resource.k8s.io/v1").await;
        (listed, resources.is_ok())
    };
    assert_eq!(served(client.clone()).await, (true, true));
    api.withhold("resource.k8s.io/v1", true);
    assert_eq!(served(client.clone()).await, (false, false));
    let claims: Api<k8s_openapi::api::resource::v1::ResourceClaim> =
        Api::namespaced(client.clone(), "default");
    let error = claims
        .list(&Default::default())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("404"), "{error}");
    api.withhold("resource.k8s.io/v1", false);
    assert_eq!(served(client).await, (true, true));
}
