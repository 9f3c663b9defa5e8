//! "Why is my claim Pending?" on memapi: a claim of class "fast" that every
//! volume of its class misses by one rule. Each rule is named the same way
//! in the claim's event, in `GET /explain/{namespace}/{claim}` and in the
//! table `pv-controller explain` prints (asking the controller's secure
//! port with a token, or reading the cluster itself); a Pending claim under
//! resync gets no new event; an unknown claim is a 404 with a JSON error;
//! the plain-HTTP port serves no `/explain` (nor `/shadow`), and a user
//! without the grant is refused.

use std::time::Duration;

use clap::Parser;
use k8s_openapi::api::core::v1::Event;
use memapi::MemApi;
use pv_controller::{App, AppConfig, ClientOptions, Clients, Command, ObjectKey, Options, pv};
use serde_json::Value;
use testkit::{claim, storage_class, volume};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::process::settle;

fn clients(api: &MemApi) -> Clients {
    Clients::build(
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        kube::client::ClientBuilder::new(api.service(), "default"),
        ClientOptions::default(),
    )
}

fn config() -> AppConfig {
    AppConfig {
        insecure_address: Some("127.0.0.1:0".parse().unwrap()),
        secure: Some(crate::admin::secure_serving()),
        persistentvolume: pv::Config {
            resync_period: Duration::from_secs(5),
            ..pv::Config::default()
        },
        ..AppConfig::default()
    }
}

/// A class of pre-made volumes, and one volume failing each rule for the
/// claim `default/db` (20Gi, ReadWriteOnce, Filesystem, tier=gold, VAC
/// "gold"), plus one of another class that would fit.
fn seed(api: &MemApi) {
    api.create(&storage_class(
        "fast",
        "kubernetes.io/no-provisioner",
        "Immediate",
    ))
    .unwrap();
    let fast = |name: &str, size: &str| {
        volume(name, size)
            .class("fast")
            .labels(&[("tier", "gold")])
            .vac("gold")
    };
    for pv in [
        fast("small", "1Gi").build(),
        fast("readonly", "50Gi").modes(&["ReadOnlyMany"]).build(),
        fast("block", "50Gi").volume_mode("Block").build(),
        volume("silver", "50Gi").class("fast").vac("gold").build(),
        fast("plain", "50Gi").vac("silver").build(),
        fast("taken", "50Gi").bound_to("uid-other", "other").build(),
        fast("promised", "50Gi")
            .claim_ref("default", "later", "")
            .build(),
        fast("going", "50Gi").deleting().build(),
        fast("slow", "50Gi").class("slow").build(),
    ] {
        api.create(&pv).unwrap();
    }
    api.create(
        &claim("db", "uid-db", "20Gi")
            .class("fast")
            .selector(&[("tier", "gold")])
            .vac("gold")
            .build(),
    )
    .unwrap();
}

/// The claim's events' messages, by reason.
fn events(api: &MemApi) -> Vec<(String, String)> {
    api.list::<Event>()
        .into_iter()
        .filter(|e| e.involved_object.name.as_deref() == Some("db"))
        .map(|e| (e.reason.unwrap_or_default(), e.message.unwrap_or_default()))
        .collect()
}

/// Runs the process until the returned sender fires.
fn run(
    app: App,
) -> (
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        app.run(async move {
            let _ = stopped.await;
        })
        .await
        .unwrap();
    });
    (stop, task)
}

/// What each volume is said to miss, in the event, the JSON and the table.
const REASONS: [(&str, &str); 8] = [
    ("small", "too small (1Gi < 20Gi)"),
    ("readonly", "lacks ReadWriteOnce"),
    ("block", "wrong volume mode (Block, not Filesystem)"),
    ("silver", "labels do not match the selector"),
    ("plain", "other VolumeAttributesClass"),
    ("taken", "claimed by default/other"),
    ("promised", "claimed by default/later"),
    ("going", "being deleted"),
];

#[tokio::test(start_paused = true)]
async fn each_rule_a_volume_fails_is_named_and_a_pending_claim_costs_no_new_events() {
    let api = MemApi::new();
    seed(&api);
    let app = App::start(clients(&api), config()).await.unwrap();
    let idle = app.idle_probe();
    let binder = app.controllers().persistentvolume.clone().unwrap();
    let (stop, task) = run(app);
    settle(&api, &idle).await;

    let explanation = binder
        .explain(&ObjectKey::new("default", "db"))
        .expect("a known claim");
    let json = serde_json::to_value(&explanation).unwrap();
    assert_eq!(json["chosen"], Value::Null);
    assert_eq!(json["provisioner"], "kubernetes.io/no-provisioner");
    assert_eq!(json["requirements"]["request"], "20Gi");
    assert_eq!(json["lastSync"]["outcome"], "waiting for a volume");
    let table = pv_controller::explain_cli::table(&json);
    let said: Vec<(String, String)> = explanation
        .volumes
        .iter()
        .map(|c| (c.name.clone(), c.verdict.describe()))
        .collect();
    for (name, reason) in REASONS {
        assert!(
            said.iter().any(|(n, r)| n == name && r == reason),
            "{name}: {reason} in {said:?}"
        );
        assert!(
            table
                .lines()
                .any(|line| line.starts_with(name) && line.ends_with(reason)),
            "{name}: {reason} in\n{table}"
        );
    }
    assert!(
        !said.iter().any(|(n, _)| n == "slow"),
        "only the claim's class: {said:?}"
    );

    let first = events(&api);
    let [(reason, message)] = first.as_slice() else {
        panic!("one event: {first:?}");
    };
    assert_eq!(reason, "ProvisioningFailed");
    assert!(
        message.starts_with(
            "no provisionable volume plugin matched name: kubernetes.io/no-provisioner; nearest of 8 volumes in class \"fast\": "
        ),
        "{message}"
    );
    // The three nearest named, the rest counted.
    for named in [
        "silver labels do not match the selector",
        "small too small (1Gi < 20Gi)",
    ] {
        assert!(message.contains(named), "{named} in {message}");
    }
    assert!(message.len() <= 1024, "{}", message.len());

    // Resyncs find the same: no new event is written.
    let writes_before = api.requests().log().len();
    tokio::time::sleep(Duration::from_secs(30)).await;
    settle(&api, &idle).await;
    assert_eq!(events(&api), first, "no new event while nothing changed");
    let event_writes = api
        .requests()
        .log()
        .iter()
        .skip(writes_before)
        .filter(|r| r.resource == "events" && r.verb != memapi::Verb::Get)
        .count();
    assert_eq!(event_writes, 0, "no event write under resync");

    // A change of the volumes changes the message: written once more.
    api.create(&volume("near", "19Gi").class("fast").build())
        .unwrap();
    settle(&api, &idle).await;
    let after = events(&api);
    assert_eq!(after.len(), 2, "{after:?}");

    let _ = stop.send(());
    task.await.unwrap();
}

/// `pv-controller explain` with the arguments after `explain`.
async fn explain_command(args: &[&str]) -> Result<Value, pv_controller::explain_cli::ExplainError> {
    let options = Options::try_parse_from(["pv-controller", "explain"].iter().chain(args))
        .expect("the command's flags");
    let Some(Command::Explain(args)) = options.command else {
        panic!("not the explain command");
    };
    pv_controller::explain_cli::explain(&args).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_endpoint_and_the_command_answer_and_refuse_an_unknown_claim() {
    let api = MemApi::new();
    seed(&api);
    api.add_token("reader-token", "alice", &[]);
    api.grant("alice", "/explain/*", "get");
    api.add_token("nobody-token", "nobody", &[]);
    let (server, _serving) = api.serve("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let master = format!("http://{server}");
    let app = App::start(clients(&api), config()).await.unwrap();
    let plain = app.insecure_address().unwrap();
    let secure = format!("https://{}", app.secure_address().unwrap());
    let ask = |claim: &str| {
        let claim = claim.to_string();
        let secure = secure.clone();
        async move {
            explain_command(&[
                &claim,
                "--admin-address",
                &secure,
                "--token",
                "reader-token",
                "--insecure-skip-tls-verify",
            ])
            .await
        }
    };
    let idle = app.idle_probe();
    let idle_again = app.idle_probe();
    let (stop, task) = run(app);
    settle(&api, &idle).await;
    // The plain-HTTP port: metrics and health, nothing of the cluster's.
    for (path, code) in [
        ("/explain/default/db", 404),
        ("/shadow", 404),
        ("/metrics", 200),
        ("/livez", 200),
    ] {
        assert_eq!(
            plain_get(plain, path).await,
            code,
            "{path} on the plain port"
        );
    }
    let json = ask("default/db").await.expect("an explanation");
    assert_eq!(json["claim"], "default/db");
    assert_eq!(json["phase"], "Pending");
    let table = pv_controller::explain_cli::table(&json);
    assert!(table.contains("small"), "{table}");
    // The admin port over HTTPS, with a token the cluster knows and grants.
    let over_https = explain_command(&[
        "db",
        "-n",
        "default",
        "--admin-address",
        &secure,
        "--token",
        "reader-token",
        "--insecure-skip-tls-verify",
    ])
    .await
    .expect("an explanation over HTTPS");
    assert_eq!(over_https["volumes"], json["volumes"]);
    let refused = explain_command(&[
        "default/db",
        "--admin-address",
        &secure,
        "--token",
        "nobody-token",
        "--insecure-skip-tls-verify",
    ])
    .await
    .expect_err("a user without the grant")
    .to_string();
    assert!(refused.contains("403"), "{refused}");
    let unverified = explain_command(&[
        "default/db",
        "--admin-address",
        &secure,
        "--token",
        "reader-token",
    ])
    .await
    .expect_err("a self-signed certificate, not accepted unasked")
    .to_string();
    assert!(unverified.contains(&secure), "{unverified}");
    // Read from the cluster without a controller: the same verdicts.
    let local = explain_command(&["default/db", "--master", &master])
        .await
        .expect("read from the cluster");
    assert_eq!(local["volumes"], json["volumes"]);
    assert_eq!(local["requirements"], json["requirements"]);
    assert_eq!(local["provisioner"], json["provisioner"]);
    assert_eq!(local["lastSync"], Value::Null);
    let gone = explain_command(&["default/nope", "--server", &master])
        .await
        .expect_err("an unknown claim")
        .to_string();
    assert!(
        gone.contains("persistentvolumeclaims \"nope\" not found"),
        "{gone}"
    );

    let missing = ask("default/nope").await;
    let error = missing.expect_err("an unknown claim").to_string();
    assert!(error.contains("404"), "{error}");
    assert!(
        error.contains("persistentvolumeclaims \"nope\" not found in namespace \"default\""),
        "{error}"
    );
    assert!(ask("a/b/c").await.is_err());
    // A claim naming a volume of another class: that volume is explained.
    api.create(
        &claim("named", "uid-named", "20Gi")
            .class("fast")
            .volume_name("slow")
            .build(),
    )
    .unwrap();
    settle(&api, &idle_again).await;
    let json = ask("default/named").await.expect("an explanation");
    let table = pv_controller::explain_cli::table(&json);
    assert!(
        table
            .lines()
            .any(|line| line.starts_with("slow") && line.ends_with("of class \"slow\"")),
        "{table}"
    );
    assert_eq!(json["requirements"]["volumeName"], "slow");
    let _ = stop.send(());
    task.await.unwrap();
}

/// The status code of a plain-HTTP GET of `path` at `address`.
async fn plain_get(address: std::net::SocketAddr, path: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    stream.read_to_end(&mut answer).await.unwrap();
    String::from_utf8_lossy(&answer)
        .split(' ')
        .nth(1)
        .and_then(|code| code.parse().ok())
        .unwrap_or(0)
}
