//! Clients of the real API server as ServiceAccounts, not as the admin
//! (`--as-service-accounts`): the admin's requests (group system:masters)
//! are exempt from API Priority and Fairness, so a storm and a neighbour
//! both sent as the admin compete with nothing between them; sent as
//! ServiceAccounts, as deployed, the server puts each in the
//! `service-accounts` flow schema's priority level (`workload-low`), one
//! flow each, and queues them fairly against each other.

use std::path::{Path, PathBuf};

use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::PostParams;
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use kube::{Api, Client, Config};
use serde_json::json;

/// The namespace of the bench's ServiceAccounts.
const NAMESPACE: &str = "bind-storm";

/// A ServiceAccount of the bench, with a token.
pub(crate) struct Account {
    /// A kubeconfig naming the server of the admin's, with the account's
    /// token.
    pub(crate) kubeconfig: PathBuf,
    /// A client with the account's token.
    pub(crate) client: Client,
}

/// Creates the ServiceAccount `name` (bound to `cluster-admin`, which
/// grants every request but no exemption), requests a token of it, and
/// writes a kubeconfig for it in `dir`, made from the admin's `admin`.
pub(crate) async fn account(
    admin_client: &Client,
    admin: &Path,
    dir: &Path,
    name: &str,
) -> Account {
    let namespaces: Api<Namespace> = Api::all(admin_client.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
    created(
        namespaces.create(&PostParams::default(), &namespace).await,
        "namespace",
    );
    let accounts: Api<ServiceAccount> = Api::namespaced(admin_client.clone(), NAMESPACE);
    let account = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    created(
        accounts.create(&PostParams::default(), &account).await,
        "ServiceAccount",
    );
    let bindings: Api<ClusterRoleBinding> = Api::all(admin_client.clone());
    let binding = serde_json::from_value(json!({
        "metadata": {"name": format!("bind-storm-{name}")},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}],
    }))
    .unwrap();
    created(
        bindings.create(&PostParams::default(), &binding).await,
        "ClusterRoleBinding",
    );
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(7200),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let token = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .expect("a token")
        .status
        .expect("the token's status")
        .token;
    let mut file = Kubeconfig::read_from(admin).expect("read kubeconfig");
    for named in &mut file.auth_infos {
        named.auth_info = Some(AuthInfo {
            token: Some(token.clone().into()),
            ..AuthInfo::default()
        });
    }
    let kubeconfig = dir.join(format!("{name}.kubeconfig"));
    // JSON is YAML: every kubeconfig reader takes it.
    std::fs::write(&kubeconfig, serde_json::to_string(&file).unwrap()).expect("write kubeconfig");
    let config = Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .expect("the account's kubeconfig");
    let client = Client::try_from(config).expect("the account's client");
    Account { kubeconfig, client }
}

/// Passes a create, or one of an object already there.
fn created<K>(result: Result<K, kube::Error>, what: &str) {
    match result {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(error) => panic!("creating the bench's {what}: {error}"),
    }
}
