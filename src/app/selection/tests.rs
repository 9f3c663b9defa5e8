use super::*;

const KNOWN: [ControllerNames; 3] = [
    ControllerNames {
        name: "persistentvolume-binder-controller",
        aliases: &["persistentvolume-binder"],
    },
    ControllerNames {
        name: "ephemeral-volume-controller",
        aliases: &["ephemeral-volume"],
    },
    ControllerNames {
        name: "resourceclaim-controller",
        aliases: &["resource-claim-controller"],
    },
];

fn enabled(flag: &str) -> Vec<&'static str> {
    let selection = ControllerSelection::new(flag.split(','));
    KNOWN
        .iter()
        .filter(|names| selection.is_enabled(names))
        .map(|names| names.name)
        .collect()
}

#[test]
fn selections_as_kube_controller_manager_reads_them() {
    let all = KNOWN.map(|names| names.name);
    let rows: [(&str, &[&str]); 11] = [
        ("*", &all),
        ("", &[]),
        ("ephemeral-volume", &["ephemeral-volume-controller"]),
        (
            "ephemeral-volume-controller",
            &["ephemeral-volume-controller"],
        ),
        (
            "*,-persistentvolume-binder",
            &["ephemeral-volume-controller", "resourceclaim-controller"],
        ),
        (
            "*,-persistentvolume-binder-controller",
            &["ephemeral-volume-controller", "resourceclaim-controller"],
        ),
        (
            "-resource-claim-controller,*",
            &[
                "persistentvolume-binder-controller",
                "ephemeral-volume-controller",
            ],
        ),
        (
            "resourceclaim-controller,-resource-claim-controller",
            &["resourceclaim-controller"],
        ),
        ("-resourceclaim-controller,resourceclaim-controller", &[]),
        (
            " persistentvolume-binder , resourceclaim-controller",
            &[
                "persistentvolume-binder-controller",
                "resourceclaim-controller",
            ],
        ),
        (
            "*,-persistentvolume-binder,-ephemeral-volume",
            &["resourceclaim-controller"],
        ),
    ];
    for (flag, expected) in rows {
        assert_eq!(enabled(flag), expected, "--controllers={flag}");
    }
}

#[test]
fn the_default_runs_every_controller() {
    let selection = ControllerSelection::default();
    assert!(KNOWN.iter().all(|names| selection.is_enabled(names)));
}

#[test]
fn unknown_names_are_refused_with_or_without_a_minus() {
    for flag in [
        "volume-binder",
        "*,-nope",
        "resourceclaim",
        "-ephemeralvolume",
    ] {
        let error = ControllerSelection::new(flag.split(','))
            .validate(&KNOWN)
            .expect_err(flag);
        assert!(
            error.to_string().contains("not a known controller")
                && error
                    .to_string()
                    .contains("persistentvolume-binder-controller (alias persistentvolume-binder)"),
            "{error}"
        );
    }
    assert_eq!(
        ControllerSelection::new(
            "*,-ephemeral-volume,resource-claim-controller,persistentvolume-binder".split(',')
        )
        .validate(&KNOWN),
        Ok(())
    );
}
