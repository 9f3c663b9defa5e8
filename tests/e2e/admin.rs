//! The secure admin port against the real API server: a process of the
//! controller, run here as `deploy/`'s ServiceAccount (its binding to
//! `system:auth-delegator` lets it ask TokenReviews and
//! SubjectAccessReviews) and kept a follower (the case holds the Lease it
//! would take), serves `/livez` and `/readyz` to anyone, and `/metrics` to a
//! ServiceAccount bound to `pv-controller-metrics-reader` only: 401
//! without a token or with a forged one, 403 for an account without the
//! binding, 200 with it; a burst of 100 scrapes asks at most a few reviews.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, ensure};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use pv_controller::testing::LeaderElector;
use pv_controller::{
    App, AppConfig, ClientOptions, Clients, ControllerSelection, DelegationConfig, LeaseConfig,
    Metrics, SecureServing, ServingCertificate, WriteGate,
};

use crate::https::https_get;
use crate::support::{Case, RUN_LABEL};

/// The ClusterRole of `deploy/base/metrics-reader.yaml`.
const READER_ROLE: &str = "pv-controller-metrics-reader";

/// Health for anyone, metrics for the bound account only, reviews cached.
pub(crate) async fn secure_port(case: Arc<Case>) -> anyhow::Result<()> {
    let lease = LeaseConfig::new(&case.namespace, "admin-port", "the-case");
    let mut holder = LeaderElector::new(case.client(), lease.clone(), WriteGate::default());
    ensure!(
        holder
            .try_acquire_or_renew()
            .await
            .context("holding the Lease")?,
        "the case holds the Lease"
    );
    let scraper = token(&case, "scraper").await?;
    let stranger = token(&case, "stranger").await?;
    let binding = case.name("metrics-reader");
    bind_reader(&case, &binding).await?;
    let result = with_process(&case, &lease, &scraper, &stranger).await;
    let unbound = Api::<ClusterRoleBinding>::all(case.client())
        .delete(&binding, &DeleteParams::default())
        .await;
    result?;
    unbound.context("removing the case's ClusterRoleBinding")?;
    Ok(())
}

/// Starts the process as a follower, checks it, stops it.
async fn with_process(
    case: &Case,
    lease: &LeaseConfig,
    scraper: &str,
    stranger: &str,
) -> anyhow::Result<()> {
    let config = AppConfig {
        controllers: ControllerSelection::new(["persistentvolume-binder"]),
        instance: "e2e-admin-port".to_string(),
        election: Some(LeaseConfig::new(
            &lease.namespace,
            &lease.name,
            "e2e-admin-port",
        )),
        insecure_address: None,
        secure: Some(SecureServing {
            address: "127.0.0.1:0".parse()?,
            certificate: ServingCertificate::SelfSigned { names: vec![] },
            delegation: DelegationConfig::default(),
            limits: pv_controller::ServingLimits::default(),
        }),
        ..AppConfig::default()
    };
    let app = App::start(controller_clients(case).await?, config)
        .await
        .context("starting the process")?;
    let address = app.secure_address().context("the secure port")?;
    let metrics = app.metrics();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(app.run(async move {
        let _ = stopped.await;
    }));
    let checked = check(address, &metrics, scraper, stranger).await;
    let _ = stop.send(());
    let _ = running.await;
    checked
}

async fn check(
    address: SocketAddr,
    metrics: &Metrics,
    scraper: &str,
    stranger: &str,
) -> anyhow::Result<()> {
    ensure!(
        https_get(address, "/livez", None).await.0 == 200,
        "/livez without a token"
    );
    let (code, body) = https_get(address, "/metrics", None).await;
    ensure!(code == 401, "/metrics without a token: {code} {body}");
    let (code, body) = https_get(address, "/metrics", Some("forged")).await;
    ensure!(code == 401, "/metrics with a forged token: {code} {body}");
    let (code, body) = https_get(address, "/metrics", Some(stranger)).await;
    ensure!(
        code == 403,
        "/metrics for an account without the binding: {code} {body}"
    );
    // The binding was made before the first scrape; the server's RBAC
    // cache may take a moment to see it.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let (code, body) = https_get(address, "/metrics", Some(scraper)).await;
        if code == 200 {
            ensure!(
                body.contains("pv_controller_leader 0"),
                "a follower's metrics: {body}"
            );
            break;
        }
        ensure!(
            tokio::time::Instant::now() < deadline,
            "/metrics for the bound account: {code} {body}"
        );
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let before = reviews(metrics);
    let burst = (0..100).map(|_| https_get(address, "/metrics", Some(scraper)));
    let answers = futures::future::join_all(burst).await;
    ensure!(
        answers.iter().all(|(code, _)| *code == 200),
        "every scrape of the burst answered"
    );
    let asked = reviews(metrics) - before;
    ensure!(asked <= 2.0, "a burst of 100 scrapes asked {asked} reviews");
    Ok(())
}

/// The process's POSTs the server answered 201: a follower writes
/// nothing, so these are its reviews.
fn reviews(metrics: &Metrics) -> f64 {
    let text = metrics.render().unwrap_or_default();
    text.lines()
        .filter(|line| {
            line.starts_with("pv_controller_api_requests_total{")
                && line.contains("client=\"controller\"")
                && line.contains("code=\"201\"")
                && line.contains("method=\"POST\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The clients of a process running as `deploy/`'s ServiceAccount.
async fn controller_clients(case: &Case) -> anyhow::Result<Clients> {
    let path = &case.env.controller_kubeconfig;
    let file =
        Kubeconfig::read_from(path).with_context(|| format!("reading {}", path.display()))?;
    let config = kube::Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
        .await
        .context("loading the controller's kubeconfig")?;
    Ok(Clients::build(
        kube::client::ClientBuilder::try_from(config.clone())?,
        kube::client::ClientBuilder::try_from(config.clone())?,
        kube::client::ClientBuilder::try_from(config)?,
        ClientOptions::default(),
    ))
}

/// A token of a new ServiceAccount `name` of the case (TokenRequest API).
async fn token(case: &Case, name: &str) -> anyhow::Result<String> {
    let accounts: Api<ServiceAccount> = Api::namespaced(case.client(), &case.namespace);
    let account: ServiceAccount = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name },
    }))?;
    accounts
        .create(&PostParams::default(), &account)
        .await
        .with_context(|| format!("creating ServiceAccount {name}"))?;
    let request = TokenRequest {
        spec: TokenRequestSpec {
            audiences: vec![],
            expiration_seconds: Some(600),
            ..TokenRequestSpec::default()
        },
        ..TokenRequest::default()
    };
    let answer = accounts
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .with_context(|| format!("requesting a token of {name}"))?;
    answer
        .status
        .map(|status| status.token)
        .context("the TokenRequest's answer has no token")
}

/// Binds the case's `scraper` account to the metrics reader role.
async fn bind_reader(case: &Case, name: &str) -> anyhow::Result<()> {
    let binding: ClusterRoleBinding = serde_json::from_value(serde_json::json!({
        "metadata": { "name": name, "labels": { RUN_LABEL: case.env.run } },
        "roleRef": { "apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": READER_ROLE },
        "subjects": [ { "kind": "ServiceAccount", "name": "scraper", "namespace": case.namespace } ],
    }))?;
    Api::<ClusterRoleBinding>::all(case.client())
        .create(&PostParams::default(), &binding)
        .await
        .context("binding the scraper to the metrics reader role")?;
    Ok(())
}
