//! `--controllers`, in kube-controller-manager's syntax: a comma-separated
//! list where `*` enables every controller that is on by default, `name`
//! enables one and `-name` disables one; the first entry that names a
//! controller decides for it. Every controller of this binary is on by
//! default, so the default `*` runs them all.

/// The parsed `--controllers` list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControllerSelection(Vec<String>);

impl Default for ControllerSelection {
    fn default() -> Self {
        Self(vec!["*".to_string()])
    }
}

/// A name in `--controllers` that no controller has.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error("{name:?} in --controllers is not a known controller (known: *, {known})")]
pub struct UnknownController {
    /// The name given.
    pub name: String,
    /// The names of the controllers there are, comma-separated.
    pub known: String,
}

impl ControllerSelection {
    /// The selection of a list of entries (`*`, `name` or `-name`).
    pub fn new<S: Into<String>>(entries: impl IntoIterator<Item = S>) -> Self {
        Self(
            entries
                .into_iter()
                .map(|entry| entry.into().trim().to_string())
                .filter(|entry| !entry.is_empty())
                .collect(),
        )
    }

    /// Checks every entry names one of `known` (or is `*`).
    pub fn validate(&self, known: &[&str]) -> Result<(), UnknownController> {
        for entry in &self.0 {
            let name = entry.strip_prefix('-').unwrap_or(entry);
            if entry != "*" && !known.contains(&name) {
                return Err(UnknownController {
                    name: entry.clone(),
                    known: known.join(", "),
                });
            }
        }
        Ok(())
    }

    /// Whether the controller `name` (on by default) runs: as the first
    /// entry naming it says, else as `*` does.
    pub fn is_enabled(&self, name: &str) -> bool {
        let mut star = false;
        for entry in &self.0 {
            if entry == name {
                return true;
            }
            if entry.strip_prefix('-') == Some(name) {
                return false;
            }
            star |= entry == "*";
        }
        star
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KNOWN: [&str; 3] = [
        "persistentvolume-binder",
        "ephemeral-volume",
        "resourceclaim",
    ];

    fn enabled(flag: &str) -> Vec<&'static str> {
        let selection = ControllerSelection::new(flag.split(','));
        KNOWN
            .into_iter()
            .filter(|name| selection.is_enabled(name))
            .collect()
    }

    #[test]
    fn selections_as_kube_controller_manager_reads_them() {
        let rows: [(&str, &[&str]); 8] = [
            ("*", &KNOWN),
            ("", &[]),
            ("ephemeral-volume", &["ephemeral-volume"]),
            (
                "*,-persistentvolume-binder",
                &["ephemeral-volume", "resourceclaim"],
            ),
            (
                "-resourceclaim,*",
                &["persistentvolume-binder", "ephemeral-volume"],
            ),
            ("resourceclaim,-resourceclaim", &["resourceclaim"]),
            ("-resourceclaim,resourceclaim", &[]),
            (
                " persistentvolume-binder , resourceclaim",
                &["persistentvolume-binder", "resourceclaim"],
            ),
        ];
        for (flag, expected) in rows {
            assert_eq!(enabled(flag), expected, "--controllers={flag}");
        }
    }

    #[test]
    fn the_default_runs_every_controller() {
        let selection = ControllerSelection::default();
        assert!(KNOWN.iter().all(|name| selection.is_enabled(name)));
    }

    #[test]
    fn unknown_names_are_refused_with_or_without_a_minus() {
        for flag in ["volume-binder", "*,-nope"] {
            let error = ControllerSelection::new(flag.split(','))
                .validate(&KNOWN)
                .expect_err(flag);
            assert!(
                error.to_string().contains("not a known controller"),
                "{error}"
            );
        }
        assert_eq!(
            ControllerSelection::new("*,-ephemeral-volume,resourceclaim".split(','))
                .validate(&KNOWN),
            Ok(())
        );
    }
}
