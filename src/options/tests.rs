use clap::CommandFactory;

use super::*;

#[test]
fn flags_have_upstream_defaults() {
    let options = Options::parse_from(["pv-controller"]);
    assert_eq!(options.resync_period(), Duration::from_secs(15));
    assert!(options.leader_elect());
    assert_eq!(options.leader_elect_lease_duration, Duration::from_secs(15));
    assert_eq!(options.leader_elect_renew_deadline, Duration::from_secs(10));
    assert_eq!(options.leader_elect_retry_period, Duration::from_secs(2));
    assert_eq!(options.leader_elect_resource_namespace, "kube-system");
    assert_eq!(
        options.insecure_address(),
        None,
        "no plain HTTP in a cluster"
    );
    let secure = options.secure_serving().expect("secure by default");
    assert_eq!(secure.address, "0.0.0.0:10281".parse().unwrap());
    assert!(matches!(
        secure.certificate,
        ServingCertificate::SelfSigned { .. }
    ));
    assert_eq!(secure.delegation, DelegationConfig::default());
    assert_eq!(secure.limits, ServingLimits::default());
    assert_eq!(secure.limits.read_header_timeout, Duration::from_secs(32));
    assert_eq!(secure.limits.request_timeout, Duration::from_secs(60));
    assert_eq!(secure.limits.tls_handshake_timeout, Duration::from_secs(10));
    assert_eq!(secure.limits.max_connections, 512);
    assert_eq!(options.verbosity, 2);
    assert_eq!(options.logging_format, LoggingFormat::Text);
    assert_eq!(options.kube_api_qps, 0.0, "no client-side limit");
    assert_eq!(options.kube_api_burst, 30);
    assert_eq!(options.kube_api_timeout, Duration::from_secs(60));
    assert_eq!(options.watch_failure_limit, Duration::from_secs(180));
    assert_eq!(options.api_discovery_period, Duration::from_secs(60));
    assert_eq!(options.max_concurrent_operations, 32);
    assert_eq!(options.concurrent_claim_syncs, 256);
    assert_eq!(options.concurrent_volume_syncs, 4);
    assert_eq!(options.concurrent_ephemeralvolume_syncs, 5);
    assert_eq!(options.concurrent_resourceclaim_syncs, 50);
    assert_eq!(options.feature_gates, FeatureGates::default());
    assert!(options.enable_dynamic_provisioning);
    assert!(!options.enable_hostpath_provisioner);
    assert!(!options.shadow);
    assert_eq!(options.pv_recycler_minimum_timeout_hostpath, 60);
    assert_eq!(options.pv_recycler_timeout_increment_hostpath, 30);
    assert_eq!(options.pv_recycler_minimum_timeout_nfs, 300);
    assert_eq!(options.pv_recycler_increment_timeout_nfs, 30);
    assert!(options.pv_recycler_pod_template_filepath_nfs.is_none());
    let options = Options::parse_from([
        "pv-controller",
        "--pvclaimbinder-sync-period=1m30s",
        "--enable-dynamic-provisioning=false",
    ]);
    assert_eq!(options.resync_period(), Duration::from_secs(90));
    assert!(!options.enable_dynamic_provisioning);
}

#[test]
fn embedded_mode_changes_defaults_unless_asked() {
    let options = Options::parse_from(["pv-controller", "--embedded-cluster", "demo.yaml"]);
    assert!(!options.leader_elect());
    assert_eq!(options.resync_period(), Duration::from_secs(1));
    assert_eq!(options.insecure_address(), Some(EMBEDDED_INSECURE_ADDRESS));
    let secure = options.secure_serving().expect("embedded: a secure port");
    assert_eq!(
        secure.address,
        ([127, 0, 0, 1], 0).into(),
        "a free loopback one"
    );
    let limited = Options::parse_from([
        "pv-controller",
        "--embedded-cluster=demo.yaml",
        "--secure-port=0",
        "--max-connections=7",
    ])
    .secure_serving()
    .expect("embedded: a secure port even at 0");
    assert_eq!(limited.address, ([127, 0, 0, 1], 0).into());
    assert_eq!(limited.limits.max_connections, 7, "the flags' limits");
    let options = Options::parse_from([
        "pv-controller",
        "--embedded-cluster=demo.yaml",
        "--leader-elect",
        "--pvclaimbinder-sync-period=5s",
    ]);
    assert!(options.leader_elect());
    assert_eq!(options.resync_period(), Duration::from_secs(5));
    let options = Options::parse_from(["pv-controller", "--secure-port=0"]);
    assert_eq!(
        options.secure_serving(),
        None,
        "0 turns it off in a cluster"
    );
    let options = Options::parse_from(["pv-controller", "--leader-elect=false", "-v", "4"]);
    assert!(!options.leader_elect());
    assert_eq!(options.verbosity, 4);
    assert!(Options::try_parse_from(["pv-controller", "--exit-when-settled"]).is_err());
}

/// Booleans as Go's flag package takes them: bare, or `=value`; a value
/// after a space is not the flag's (it is an argument, refused here).
#[test]
fn boolean_flags_are_spelled_as_kube_controller_managers() {
    let parse = |args: &[&str]| {
        Options::try_parse_from(std::iter::once("pv-controller").chain(args.iter().copied()))
    };
    let options = parse(&[
        "--enable-dynamic-provisioning",
        "--enable-hostpath-provisioner",
        "--shadow",
    ])
    .unwrap();
    assert!(options.enable_dynamic_provisioning);
    assert!(options.enable_hostpath_provisioner);
    assert!(options.shadow);
    let options = parse(&[
        "--enable-dynamic-provisioning=false",
        "--enable-hostpath-provisioner=True",
        "--shadow=false",
        "--leader-elect=0",
    ])
    .unwrap();
    assert!(!options.enable_dynamic_provisioning);
    assert!(options.enable_hostpath_provisioner);
    assert!(!options.shadow, "--shadow=false");
    assert!(options.shadow_config().is_none());
    assert!(!options.leader_elect());
    assert!(parse(&["--shadow", "false"]).is_err());
    assert!(parse(&["--shadow=maybe"]).is_err());
    let options = parse(&["--embedded-cluster=x.yaml", "--exit-when-settled=false"]).unwrap();
    assert!(!options.exit_when_settled);
}

#[test]
fn logging_format_is_kube_controller_managers_flag_and_log_format_its_alias() {
    for flag in ["--logging-format=json", "--log-format=json"] {
        let options = Options::parse_from(["pv-controller", flag]);
        assert_eq!(options.logging_format, LoggingFormat::Json, "{flag}");
    }
    assert!(Options::try_parse_from(["pv-controller", "--logging-format=yaml"]).is_err());
}

/// Every duration and count flag that has a value which cannot work
/// refuses it when the flags are parsed, naming the flag and what it
/// takes; the review caches' lifetimes alone take 0 (keep nothing).
#[test]
fn values_that_cannot_work_are_refused_naming_the_flag() {
    let command = Options::command();
    let mut checked = 0;
    for arg in command.get_arguments() {
        let Some(long) = arg.get_long() else { continue };
        let value_name = arg
            .get_value_names()
            .and_then(|names| names.first())
            .map(|name| name.as_str().to_string());
        let (bad, accepts) = match value_name.as_deref() {
            Some("duration") if long.ends_with("-ttl") => continue,
            Some("duration") => ("0", "must be more than 0"),
            Some("int") if long == "secure-port" || long.contains("increment") => continue,
            Some("int") => ("0", "must be 1 or more"),
            Some("float") => ("-1", "0 or more"),
            _ => continue,
        };
        let flag = format!("--{long}={bad}");
        let error = Options::try_parse_from(["pv-controller", flag.as_str()])
            .expect_err(&flag)
            .to_string();
        assert!(error.contains(&format!("--{long} <")), "{flag}: {error}");
        assert!(error.contains(accepts), "{flag}: {error}");
        checked += 1;
    }
    assert!(checked >= 20, "only {checked} flags checked");
    let error = Options::try_parse_from(["pv-controller", "--pvclaimbinder-sync-period", "0"])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains(
            "invalid value '0' for '--pvclaimbinder-sync-period <duration>': \
             must be more than 0 (a duration such as 15s, 1m30s or 500ms)"
        ),
        "{error}"
    );
    for flag in [
        "--leader-elect-resource-name=",
        "--authorization-webhook-cache-authorized-ttl=1x",
    ] {
        assert!(
            Options::try_parse_from(["pv-controller", flag]).is_err(),
            "{flag}"
        );
    }
    let zero_ttl = Options::parse_from([
        "pv-controller",
        "--authentication-token-webhook-cache-ttl=0",
    ]);
    assert_eq!(
        zero_ttl.authentication_token_webhook_cache_ttl,
        Duration::ZERO
    );
}

/// `--help` is grouped in kube-controller-manager's sections, in its
/// order, with placeholders a user reads as a type, and fits 100 columns.
#[test]
fn help_is_grouped_as_kube_controller_managers_and_fits_100_columns() {
    let help = Options::command().render_help().to_string();
    let mut last = 0;
    for heading in [
        section::GENERIC,
        section::BINDER,
        section::EPHEMERAL,
        section::RESOURCECLAIM,
        section::SECURE,
        section::INSECURE,
        section::AUTHENTICATION,
        section::AUTHORIZATION,
        section::SHADOW,
        section::EMBEDDED,
        section::MISC,
        section::LOGS,
        section::GLOBAL,
    ] {
        let at = help
            .find(&format!("{heading}:"))
            .unwrap_or_else(|| panic!("no {heading} in\n{help}"));
        assert!(at > last, "{heading} out of order");
        last = at;
    }
    for line in help.lines() {
        assert!(
            line.chars().count() <= 100,
            "{} columns: {line}",
            line.len()
        );
    }
    let placeholders = [
        "bool",
        "dir",
        "duration",
        "file",
        "float",
        "format",
        "host:port",
        "int",
        "ip",
        "key=bool,...",
        "level",
        "string",
        "strings",
        "url",
        "COMMAND",
    ];
    for (at, _) in help.match_indices('<') {
        let name = &help[at + 1..at + help[at..].find('>').unwrap()];
        assert!(placeholders.contains(&name), "placeholder <{name}>");
    }
    let options = Options::command()
        .get_arguments()
        .filter(|arg| arg.get_help_heading().is_none() && !arg.is_positional())
        .map(|arg| arg.get_id().to_string())
        .collect::<Vec<_>>();
    assert!(options.is_empty(), "flags without a section: {options:?}");
}
