//! `--controllers`, in kube-controller-manager's syntax: a comma-separated
//! list where `*` enables every controller that is on by default, `name`
//! enables one and `-name` disables one; the first entry that names a
//! controller (by its name or one of its aliases) decides for it. Every
//! controller of this binary is on by default, so the default `*` runs them
//! all.

/// A controller's names in `--controllers`: kube-controller-manager's
/// canonical name and the aliases it keeps for older flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ControllerNames {
    /// The canonical name (`persistentvolume-binder-controller`).
    pub(crate) name: &'static str,
    /// Older names still accepted (`persistentvolume-binder`).
    pub(crate) aliases: &'static [&'static str],
}

impl ControllerNames {
    /// Whether `entry` (without a leading `-`) names this controller.
    fn named_by(&self, entry: &str) -> bool {
        self.name == entry || self.aliases.contains(&entry)
    }
}

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
    /// The names of the controllers there are, each with its aliases.
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

    /// Checks every entry is `*` or names one of `known` (by name or alias).
    pub(crate) fn validate(&self, known: &[ControllerNames]) -> Result<(), UnknownController> {
        for entry in &self.0 {
            let name = entry.strip_prefix('-').unwrap_or(entry);
            if entry != "*" && !known.iter().any(|names| names.named_by(name)) {
                let known = known
                    .iter()
                    .map(|names| match names.aliases {
                        [] => names.name.to_string(),
                        aliases => format!("{} (alias {})", names.name, aliases.join(", ")),
                    })
                    .collect::<Vec<_>>()
                    .join(", ");
                return Err(UnknownController {
                    name: entry.clone(),
                    known,
                });
            }
        }
        Ok(())
    }

    /// Whether the controller `names` (on by default) runs: as the first
    /// entry naming it says, else as `*` does.
    pub(crate) fn is_enabled(&self, names: &ControllerNames) -> bool {
        let mut star = false;
        for entry in &self.0 {
            if names.named_by(entry) {
                return true;
            }
            if entry
                .strip_prefix('-')
                .is_some_and(|name| names.named_by(name))
            {
                return false;
            }
            star |= entry == "*";
        }
        star
    }
}

#[cfg(test)]
mod tests;
