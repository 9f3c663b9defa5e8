//! Whether a volume fits a claim, by the rules upstream binds with
//! (`checkVolumeSatisfyClaim` and `findMatchingVolume`): what a binding
//! must keep depends on who chose the volume.
//!
//! - The controller matched it (the claim named no volume, the volume was
//!   no claim's): capacity, storage class, volume mode, access modes and
//!   the claim's selector.
//! - The claim named it (`spec.volumeName`) and it was no claim's: all of
//!   those but the selector, which upstream does not check then.
//! - It was pre-bound to the claim (`claimRef` by name) and the claim named
//!   none: capacity, volume mode and access modes; upstream returns a
//!   pre-bound volume before it looks at class or selector.
//! - Both named each other: nothing; upstream completes such a binding as
//!   it finds it.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use quantity::Amount;

/// Who chose the volume of a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Chosen {
    /// The controller, by matching.
    Matched,
    /// The claim, by `spec.volumeName`.
    ByClaim,
    /// The volume's pre-binding (`claimRef` by name).
    PreBound,
    /// Both the claim and the volume named each other.
    Both,
}

impl Chosen {
    /// How a binding was chosen: whether the claim named the volume, and
    /// whether the volume was pre-bound to the claim.
    pub(crate) fn of(named: bool, pre_bound: bool) -> Self {
        match (named, pre_bound) {
            (false, false) => Self::Matched,
            (true, false) => Self::ByClaim,
            (false, true) => Self::PreBound,
            (true, true) => Self::Both,
        }
    }
}

fn storage(
    q: Option<&BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>>,
) -> Option<i128> {
    let q = q?.get("storage")?;
    Amount::from_quantity(q).ok().map(Amount::nanos)
}

fn mode(mode: Option<&str>) -> &str {
    mode.unwrap_or("Filesystem")
}

/// Whether `selector` selects `labels` (matchLabels and the four
/// operators; an unknown operator selects nothing).
pub(crate) fn selects(selector: &LabelSelector, labels: &BTreeMap<String, String>) -> bool {
    let by_label = selector
        .match_labels
        .iter()
        .flatten()
        .all(|(k, v)| labels.get(k) == Some(v));
    let by_expression = selector.match_expressions.iter().flatten().all(|e| {
        let values = e.values.as_deref().unwrap_or_default();
        let value = labels.get(&e.key);
        match e.operator.as_str() {
            "In" => value.is_some_and(|v| values.contains(v)),
            "NotIn" => value.is_none_or(|v| !values.contains(v)),
            "Exists" => value.is_some(),
            "DoesNotExist" => value.is_none(),
            _ => false,
        }
    });
    by_label && by_expression
}

/// What of `volume` does not fit `claim` for a binding chosen as `chosen`,
/// if anything.
pub(crate) fn misfit(
    volume: &PersistentVolume,
    claim: &PersistentVolumeClaim,
    chosen: Chosen,
) -> Option<String> {
    if chosen == Chosen::Both {
        return None;
    }
    let (Some(vs), Some(cs)) = (volume.spec.as_ref(), claim.spec.as_ref()) else {
        return Some("no spec".to_string());
    };
    let offered = storage(vs.capacity.as_ref());
    let asked = storage(cs.resources.as_ref().and_then(|r| r.requests.as_ref()));
    if let (Some(offered), Some(asked)) = (offered, asked)
        && offered < asked
    {
        return Some("capacity below the request".to_string());
    }
    if mode(vs.volume_mode.as_deref()) != mode(cs.volume_mode.as_deref()) {
        return Some("volume mode differs".to_string());
    }
    let modes = vs.access_modes.as_deref().unwrap_or_default();
    if let Some(missing) = cs
        .access_modes
        .iter()
        .flatten()
        .find(|m| !modes.contains(m))
    {
        return Some(format!("access mode {missing} not offered"));
    }
    if chosen == Chosen::PreBound {
        return None;
    }
    let volume_class = vs.storage_class_name.as_deref().unwrap_or("");
    let claim_class = cs.storage_class_name.as_deref().unwrap_or("");
    if volume_class != claim_class {
        return Some(format!(
            "class {volume_class:?} where the claim asks {claim_class:?}"
        ));
    }
    if chosen == Chosen::ByClaim {
        return None;
    }
    let labels = volume.metadata.labels.clone().unwrap_or_default();
    if cs.selector.as_ref().is_some_and(|s| !selects(s, &labels)) {
        return Some("labels not selected by the claim".to_string());
    }
    None
}

#[cfg(test)]
mod tests {
    use testkit::{RWO, claim, volume};

    use super::{Chosen, misfit};

    #[test]
    fn what_a_binding_must_keep_depends_on_who_chose_the_volume() {
        let asked = claim("c", "u", "1Gi")
            .modes(&[RWO])
            .selector(&[("tier", "fast")])
            .build();
        let fits = |v: &k8s_openapi::api::core::v1::PersistentVolume| {
            [
                Chosen::Matched,
                Chosen::ByClaim,
                Chosen::PreBound,
                Chosen::Both,
            ]
            .map(|chosen| misfit(v, &asked, chosen).is_none())
        };
        let labelled = volume("v", "1Gi").modes(&[RWO]).labels(&[("tier", "fast")]);
        assert_eq!(fits(&labelled.clone().build()), [true; 4]);
        assert_eq!(
            fits(&volume("v", "1Gi").modes(&[RWO]).build()),
            [false, true, true, true]
        );
        assert_eq!(
            fits(&labelled.clone().class("gold").build()),
            [false, false, true, true]
        );
        assert_eq!(
            fits(
                &volume("v", "512Mi")
                    .modes(&[RWO])
                    .labels(&[("tier", "fast")])
                    .build()
            ),
            [false, false, false, true]
        );
        assert_eq!(
            fits(
                &volume("v", "1Gi")
                    .modes(&["ReadOnlyMany"])
                    .labels(&[("tier", "fast")])
                    .build()
            ),
            [false, false, false, true]
        );
        assert_eq!(
            fits(&labelled.volume_mode("Block").build()),
            [false, false, false, true]
        );
    }
}
