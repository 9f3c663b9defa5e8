//! The pure classifications the decisions match on, as tables: where an
//! unbound claim, a bound claim and a volume stand, what a released volume's
//! reclaim is, and why a requested volume cannot serve a claim. No server,
//! no cache: each row is objects in, a situation out.

use std::sync::Arc;

use super::claim::{
    BoundClaimSituation, UnboundClaimSituation, check_volume_satisfies_claim, classify_bound,
    classify_unbound,
};
use super::reclaim::{ReclaimAction, reclaim_action};
use super::volume::{VolumeSituation, classify_volume};
use testkit::{ROX, RWX, claim, volume};

use crate::pv::plugins::VolumePlugins;

#[test]
fn unbound_claims_are_classified_by_the_volume_they_name() {
    let mine = claim("c", "uid-c", "1Gi");
    let cases: Vec<(&str, _, Option<Arc<_>>, &str)> = vec![
        ("names nothing", mine.clone(), None, "NoVolumeRequested"),
        (
            "names a missing volume",
            mine.clone().volume_name("v"),
            None,
            "RequestedVolumeMissing",
        ),
        (
            "names a free volume",
            mine.clone().volume_name("v"),
            Some(volume("v", "1Gi").arc()),
            "RequestedVolumeFree",
        ),
        (
            "names a volume pre-bound to it by name",
            mine.clone().volume_name("v"),
            Some(volume("v", "1Gi").bound_to("", "c").arc()),
            "RequestedVolumeBoundHere",
        ),
        (
            "names a volume bound to it by UID",
            mine.clone().volume_name("v"),
            Some(volume("v", "1Gi").bound_to("uid-c", "c").arc()),
            "RequestedVolumeBoundHere",
        ),
        (
            "names a volume of an earlier claim of that name",
            mine.clone().volume_name("v"),
            Some(volume("v", "1Gi").bound_to("uid-old", "c").arc()),
            "RequestedVolumeBoundElsewhere",
        ),
        (
            "names a volume of another claim",
            mine.volume_name("v"),
            Some(volume("v", "1Gi").bound_to("uid-o", "other").arc()),
            "RequestedVolumeBoundElsewhere",
        ),
    ];
    for (name, claim, requested, expected) in cases {
        let got = match classify_unbound(&claim.build(), requested) {
            UnboundClaimSituation::NoVolumeRequested => "NoVolumeRequested",
            UnboundClaimSituation::RequestedVolumeMissing => "RequestedVolumeMissing",
            UnboundClaimSituation::RequestedVolumeFree(_) => "RequestedVolumeFree",
            UnboundClaimSituation::RequestedVolumeBoundHere(_) => "RequestedVolumeBoundHere",
            UnboundClaimSituation::RequestedVolumeBoundElsewhere(_) => {
                "RequestedVolumeBoundElsewhere"
            }
        };
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn bound_claims_are_classified_by_their_volume() {
    let bound = claim("c", "uid-c", "1Gi").volume_name("v");
    let cases = [
        (
            "lost its volume name",
            claim("c", "uid-c", "1Gi"),
            None,
            "NoVolumeName",
        ),
        ("volume gone", bound.clone(), None, "Missing"),
        (
            "volume unclaimed",
            bound.clone(),
            Some(volume("v", "1Gi").arc()),
            "Unclaimed",
        ),
        (
            "volume points back",
            bound.clone(),
            Some(volume("v", "1Gi").bound_to("uid-c", "c").arc()),
            "BoundHere",
        ),
        (
            "volume went to another claim",
            bound,
            Some(volume("v", "1Gi").bound_to("uid-x", "c").arc()),
            "BoundElsewhere",
        ),
    ];
    for (name, claim, volume, expected) in cases {
        let got = match classify_bound(&claim.build(), volume) {
            BoundClaimSituation::NoVolumeName => "NoVolumeName",
            BoundClaimSituation::Missing => "Missing",
            BoundClaimSituation::Unclaimed(_) => "Unclaimed",
            BoundClaimSituation::BoundHere(_) => "BoundHere",
            BoundClaimSituation::BoundElsewhere => "BoundElsewhere",
        };
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn volumes_are_classified_by_their_claim() {
    let claimed = volume("v", "1Gi").bound_to("uid-c", "c").build();
    let cases = [
        ("no claimRef", volume("v", "1Gi").build(), None, "Unclaimed"),
        (
            "pre-bound by name",
            volume("v", "1Gi").bound_to("", "c").build(),
            None,
            "PreBound",
        ),
        ("claim gone", claimed.clone(), None, "ClaimMissing"),
        (
            "claim not bound yet",
            claimed.clone(),
            Some(claim("c", "uid-c", "1Gi").arc()),
            "ClaimNotBoundYet",
        ),
        (
            "claim bound here",
            claimed.clone(),
            Some(claim("c", "uid-c", "1Gi").volume_name("v").arc()),
            "ClaimBoundHere",
        ),
        (
            "claim bound elsewhere",
            claimed,
            Some(claim("c", "uid-c", "1Gi").volume_name("w").arc()),
            "ClaimBoundElsewhere",
        ),
    ];
    for (name, volume, claim, expected) in cases {
        let got = match classify_volume(&volume, claim) {
            VolumeSituation::Unclaimed => "Unclaimed",
            VolumeSituation::PreBound => "PreBound",
            VolumeSituation::ClaimMissing => "ClaimMissing",
            VolumeSituation::ClaimNotBoundYet(_) => "ClaimNotBoundYet",
            VolumeSituation::ClaimBoundHere(_) => "ClaimBoundHere",
            VolumeSituation::ClaimBoundElsewhere => "ClaimBoundElsewhere",
        };
        assert_eq!(got, expected, "{name}");
    }
}

#[test]
fn released_volumes_are_reclaimed_by_policy_provisioner_and_migration() {
    const BY: &str = "pv.kubernetes.io/provisioned-by";
    let plugins = VolumePlugins::default();
    let released = |policy: &str| volume("v", "1Gi").bound_to("u", "c").policy(policy);
    let cases = [
        ("Retain", released("Retain"), ReclaimAction::Retain),
        ("Recycle", released("Recycle"), ReclaimAction::Recycle),
        ("Delete, static", released("Delete"), ReclaimAction::Delete),
        (
            "Delete, static CSI: fails, no plugin",
            released("Delete").csi("pd.csi.storage.gke.io"),
            ReclaimAction::Delete,
        ),
        (
            "Delete, in-tree provisioner",
            released("Delete").annotation(BY, "kubernetes.io/host-path"),
            ReclaimAction::Delete,
        ),
        (
            "Delete, external provisioner",
            released("Delete").annotation(BY, "example.com/nfs"),
            ReclaimAction::LeaveToExternal,
        ),
        (
            "Delete, migrated plugin",
            released("Delete").annotation(BY, "kubernetes.io/aws-ebs"),
            ReclaimAction::LeaveToExternal,
        ),
        (
            "Retain, migrated plugin",
            released("Retain").annotation(BY, "kubernetes.io/gce-pd"),
            ReclaimAction::LeaveToExternal,
        ),
        (
            "migrated-to set",
            released("Delete").annotation("pv.kubernetes.io/migrated-to", "ebs.csi.aws.com"),
            ReclaimAction::LeaveToExternal,
        ),
        (
            "unknown policy",
            released("Scrub"),
            ReclaimAction::Unknown("Scrub".into()),
        ),
        (
            "no policy",
            volume("v", "1Gi").policy(""),
            ReclaimAction::Unknown(String::new()),
        ),
    ];
    for (name, volume, expected) in cases {
        assert_eq!(
            reclaim_action(&volume.build(), &plugins),
            expected,
            "{name}"
        );
    }
}

#[test]
fn a_requested_volume_is_checked_in_upstreams_order() {
    let wanted = claim("c", "", "5Gi").class("gold");
    let fits = volume("v", "10Gi").class("gold");
    let cases = [
        ("fits", fits.clone(), wanted.clone(), Ok(())),
        (
            "being deleted",
            fits.clone().deleting(),
            wanted.clone(),
            Err("the volume is marked for deletion \"v\""),
        ),
        (
            "too small",
            volume("v", "1Gi").class("gold"),
            wanted.clone(),
            Err("requested PV is too small"),
        ),
        (
            "other class",
            volume("v", "10Gi").class("silver"),
            wanted.clone(),
            Err("storageClassName does not match"),
        ),
        (
            "other attributes class",
            fits.clone().vac("fast"),
            wanted.clone(),
            Err("volumeAttributesClassName does not match"),
        ),
        (
            "block for filesystem",
            fits.clone().volume_mode("Block"),
            wanted.clone(),
            Err("incompatible volumeMode"),
        ),
        (
            "too few modes",
            fits.clone(),
            wanted.clone().modes(&[ROX, RWX]),
            Err("incompatible accessMode"),
        ),
        // A name overrides the label selector, as upstream (2-8).
        (
            "selector ignored",
            fits,
            wanted.selector(&[("tier", "gold")]),
            Ok(()),
        ),
    ];
    for (name, volume, claim, expected) in cases {
        let got = check_volume_satisfies_claim(&volume.build(), &claim.build());
        assert_eq!(got, expected.map_err(str::to_string), "{name}");
    }
}
