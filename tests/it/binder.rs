//! The binder scenarios: upstream's binder table (unit test sets 1-4 and 13),
//! the volume-mode table (set 14), the multi-sync cases (set 10) and the
//! later VolumeAttributesClass and stale-store additions, each row run once
//! as a single direct sync and once with the whole controller running until
//! it settles.

use crate::harness::{Call, SKIP_STORE, row, run_table};
use k8s_names::{
    ANN_BIND_COMPLETED, ANN_BOUND_BY_CONTROLLER, ANN_DYNAMICALLY_PROVISIONED, ANN_MIGRATED_TO,
    ANN_PRE_RESIZE_CAPACITY, ANN_SELECTED_NODE, ANN_STORAGE_PROVISIONER,
    FINALIZER_EXTERNAL_PROVISIONER, FINALIZER_PV_CONTROLLER,
};
use testkit::*;

const WAIT: &str = "wait";

fn wait_class() -> k8s_openapi::api::storage::v1::StorageClass {
    storage_class(WAIT, "kubernetes.io/no-provisioner", "WaitForFirstConsumer")
}

#[tokio::test(start_paused = true)]
async fn set_1_unbound_claims_without_volume_name() {
    let labeled = [("foo", "true"), ("bar", "false")];
    run_table(vec![
        row("1-1 successful bind")
            .volumes(
                volumes([volume("volume1-1", "1Gi").phase("Available")]),
                volumes([volume("volume1-1", "1Gi")
                    .bound_to("uid1-1", "claim1-1")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim1-1", "uid1-1", "1Gi")]),
                claims([claim("claim1-1", "uid1-1", "1Gi")
                    .volume_name("volume1-1")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("1-2 noop")
            .volumes(
                volumes([volume("volume1-2", "1Gi")]),
                volumes([volume("volume1-2", "1Gi")]),
            )
            .same_claims(claims([claim("claim1-2", "uid1-2", "10Gi")]))
            .events(&["Normal FailedBinding"])
            .settles_with(|s| s.volume("volume1-2", |v| v.phase("Available"))),
        row("1-3 reset to Pending")
            .same_volumes(volumes([volume("volume1-3", "1Gi")]))
            .claims(
                claims([claim("claim1-3", "uid1-3", "10Gi").phase("Bound")]),
                claims([claim("claim1-3", "uid1-3", "10Gi")]),
            )
            .events(&["Normal FailedBinding"])
            .settles_with(|s| s.volume("volume1-3", |v| v.phase("Available"))),
        row("1-4 smallest volume")
            .volumes(
                volumes([volume("volume1-4_1", "10Gi").phase("Available"), volume("volume1-4_2", "1Gi").phase("Available")]),
                volumes([
                    volume("volume1-4_1", "10Gi").phase("Available"),
                    volume("volume1-4_2", "1Gi")
                        .bound_to("uid1-4", "claim1-4")
                        .phase("Bound")
                        .annotations(&[ANN_BOUND_BY_CONTROLLER]),
                ]),
            )
            .claims(
                claims([claim("claim1-4", "uid1-4", "1Gi")]),
                claims([claim("claim1-4", "uid1-4", "1Gi")
                    .volume_name("volume1-4_2")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("1-5 prebound volume by name - success")
            .volumes(
                volumes([volume("volume1-5_1", "10Gi").bound_to("", "claim1-5"), volume("volume1-5_2", "1Gi")]),
                volumes([
                    volume("volume1-5_1", "10Gi").bound_to("uid1-5", "claim1-5").phase("Bound"),
                    volume("volume1-5_2", "1Gi"),
                ]),
            )
            .claims(
                claims([claim("claim1-5", "uid1-5", "1Gi")]),
                claims([claim("claim1-5", "uid1-5", "1Gi")
                    .volume_name("volume1-5_1")
                    .phase("Bound")
                    .capacity("10Gi")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            )
            .settles_with(|s| s.volume("volume1-5_2", |v| v.phase("Available"))),
        row("1-6 prebound volume by UID - success")
            .volumes(
                volumes([volume("volume1-6_1", "10Gi").bound_to("uid1-6", "claim1-6"), volume("volume1-6_2", "1Gi")]),
                volumes([
                    volume("volume1-6_1", "10Gi").bound_to("uid1-6", "claim1-6").phase("Bound"),
                    volume("volume1-6_2", "1Gi"),
                ]),
            )
            .claims(
                claims([claim("claim1-6", "uid1-6", "1Gi")]),
                claims([claim("claim1-6", "uid1-6", "1Gi")
                    .volume_name("volume1-6_1")
                    .phase("Bound")
                    .capacity("10Gi")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            )
            .settles_with(|s| s.volume("volume1-6_2", |v| v.phase("Available"))),
        row("1-7 prebound volume to different claim")
            .same_volumes(volumes([volume("volume1-7", "10Gi").bound_to("uid1-777", "claim1-7")]))
            .same_claims(claims([claim("claim1-7", "uid1-7", "1Gi")]))
            .events(&["Normal FailedBinding"])
            // The volume's claim (UID uid1-777) does not exist: Released.
            .settles_with(|s| s.volume("volume1-7", |v| v.phase("Released"))),
        row("1-8 complete bind after crash - PV bound")
            .volumes(
                volumes([volume("volume1-8", "1Gi")
                    .bound_to("uid1-8", "claim1-8")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
                volumes([volume("volume1-8", "1Gi")
                    .bound_to("uid1-8", "claim1-8")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim1-8", "uid1-8", "1Gi")]),
                claims([claim("claim1-8", "uid1-8", "1Gi")
                    .volume_name("volume1-8")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("1-9 complete bind after crash - PV status saved")
            .same_volumes(volumes([volume("volume1-9", "1Gi")
                .bound_to("uid1-9", "claim1-9")
                .phase("Bound")
                .annotations(&[ANN_BOUND_BY_CONTROLLER])]))
            .claims(
                claims([claim("claim1-9", "uid1-9", "1Gi")]),
                claims([claim("claim1-9", "uid1-9", "1Gi")
                    .volume_name("volume1-9")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("1-10 complete bind after crash - PVC bound")
            .same_volumes(volumes([volume("volume1-10", "1Gi")
                .bound_to("uid1-10", "claim1-10")
                .phase("Bound")
                .annotations(&[ANN_BOUND_BY_CONTROLLER])]))
            .claims(
                claims([claim("claim1-10", "uid1-10", "1Gi")
                    .volume_name("volume1-10")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
                claims([claim("claim1-10", "uid1-10", "1Gi")
                    .volume_name("volume1-10")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("1-11 bind when selector matches")
            .volumes(
                volumes([volume("volume1-1", "1Gi").labels(&labeled).phase("Available")]),
                volumes([volume("volume1-1", "1Gi")
                    .labels(&labeled)
                    .bound_to("uid1-1", "claim1-1")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim1-1", "uid1-1", "1Gi").selector(&labeled)]),
                claims([claim("claim1-1", "uid1-1", "1Gi")
                    .selector(&labeled)
                    .volume_name("volume1-1")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("1-12 do not bind when selector does not match")
            .same_volumes(volumes([volume("volume1-1", "1Gi")]))
            .same_claims(claims([claim("claim1-1", "uid1-1", "1Gi").selector(&labeled)]))
            .events(&["Normal FailedBinding"])
            .settles_with(|s| s.volume("volume1-1", |v| v.phase("Available"))),
        row("1-13 delayed binding")
            .classes(vec![wait_class()])
            .same_volumes(volumes([volume("volume1-1", "1Gi").phase("Available").class(WAIT)]))
            .same_claims(claims([claim("claim1-1", "uid1-1", "1Gi").class(WAIT)]))
            .events(&["Normal WaitForFirstConsumer"]),
        row("1-14 successful prebound PV")
            .classes(vec![wait_class()])
            .volumes(
                volumes([volume("volume1-1", "1Gi").bound_to("", "claim1-1").class(WAIT)]),
                volumes([volume("volume1-1", "1Gi").bound_to("uid1-1", "claim1-1").phase("Bound").class(WAIT)]),
            )
            .claims(
                claims([claim("claim1-1", "uid1-1", "1Gi").class(WAIT)]),
                claims([claim("claim1-1", "uid1-1", "1Gi")
                    .class(WAIT)
                    .volume_name("volume1-1")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("1-15 successful prebound PVC")
            .classes(vec![wait_class()])
            .volumes(
                volumes([volume("volume1-15", "10Gi").class(WAIT)]),
                volumes([volume("volume1-15", "10Gi")
                    .class(WAIT)
                    .bound_to("uid1-15", "claim1-15")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim1-15", "uid1-15", "1Gi").class(WAIT).volume_name("volume1-15")]),
                claims([claim("claim1-15", "uid1-15", "1Gi")
                    .class(WAIT)
                    .volume_name("volume1-15")
                    .phase("Bound")
                    .capacity("10Gi")
                    .annotations(&[ANN_BIND_COMPLETED])]),
            ),
        row("1-16 prebound PVC asking for a mode the volume lacks")
            .classes(vec![wait_class()])
            .same_volumes(volumes([volume("volume1-16", "10Gi").class(WAIT)]))
            .same_claims(claims([claim("claim1-16", "uid1-16", "1Gi")
                .class(WAIT)
                .modes(&[RWX])
                .volume_name("volume1-16")]))
            .events(&["Warning VolumeMismatch Cannot bind to requested volume \"volume1-16\": incompatible accessMode"])
            .settles_with(|s| s.volume("volume1-16", |v| v.phase("Available"))),
        // Upstream skips the Pending volume too, until the controller's own
        // Pending -> Available write lands; here a new volume is offered at
        // once (issue 11), so the claim takes it in its first sync and never
        // sees a volume of the wrong kind first.
        row("1-17 skip Failed and Released PVs; a new PV is offered at once")
            .volumes(
                volumes([
                    volume("volume1-17-failed", "1Gi").phase("Failed"),
                    volume("volume1-17-pending", "1Gi"),
                    volume("volume1-17-released", "1Gi").phase("Released"),
                ]),
                volumes([
                    volume("volume1-17-failed", "1Gi").phase("Failed"),
                    volume("volume1-17-pending", "1Gi")
                        .bound_to("uid1-17", "claim1-17")
                        .phase("Bound")
                        .annotations(&[ANN_BOUND_BY_CONTROLLER]),
                    volume("volume1-17-released", "1Gi").phase("Released"),
                ]),
            )
            .claims(
                claims([claim("claim1-17", "uid1-17", "1Gi")]),
                claims([claim("claim1-17", "uid1-17", "1Gi")
                    .volume_name("volume1-17-pending")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            )
            // Failed and Released volumes without claimRef become Available.
            .settles_with(|s| {
                s.volume("volume1-17-failed", |v| v.phase("Available"))
                    .volume("volume1-17-released", |v| v.phase("Available"))
            }),
        row("1-18 successful pre-bound PV to PVC provisioning")
            .classes(vec![wait_class()])
            .volumes(
                volumes([volume("volume1-18", "1Gi").bound_to("uid1-18", "claim1-18").phase("Available").class(WAIT)]),
                volumes([volume("volume1-18", "1Gi").bound_to("uid1-18", "claim1-18").phase("Bound").class(WAIT)]),
            )
            .claims(
                claims([claim("claim1-18", "uid1-18", "1Gi").class(WAIT).annotation(ANN_SELECTED_NODE, "node1")]),
                claims([claim("claim1-18", "uid1-18", "1Gi")
                    .class(WAIT)
                    .annotation(ANN_SELECTED_NODE, "node1")
                    .volume_name("volume1-18")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
    ])
    .await;
}

#[tokio::test(start_paused = true)]
async fn set_2_claims_asking_for_a_volume() {
    let labeled = [("foo", "true"), ("bar", "false")];
    run_table(vec![
        row("2-1 claim prebound to non-existing volume - noop")
            .same_claims(claims([claim("claim2-1", "uid2-1", "10Gi").volume_name("volume2-1")])),
        row("2-2 claim prebound to non-existing volume - reset status")
            .claims(
                claims([claim("claim2-2", "uid2-2", "10Gi").volume_name("volume2-2").phase("Bound")]),
                claims([claim("claim2-2", "uid2-2", "10Gi").volume_name("volume2-2")]),
            ),
        row("2-3 claim prebound to unbound volume")
            .volumes(
                volumes([volume("volume2-3", "1Gi")]),
                volumes([volume("volume2-3", "1Gi")
                    .bound_to("uid2-3", "claim2-3")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim2-3", "uid2-3", "1Gi").volume_name("volume2-3")]),
                claims([claim("claim2-3", "uid2-3", "1Gi")
                    .volume_name("volume2-3")
                    .phase("Bound")
                    .annotations(&[ANN_BIND_COMPLETED])]),
            ),
        row("2-4 claim prebound to prebound volume by name")
            .volumes(
                volumes([volume("volume2-4", "1Gi").bound_to("", "claim2-4")]),
                volumes([volume("volume2-4", "1Gi").bound_to("uid2-4", "claim2-4").phase("Bound")]),
            )
            .claims(
                claims([claim("claim2-4", "uid2-4", "1Gi").volume_name("volume2-4")]),
                claims([claim("claim2-4", "uid2-4", "1Gi")
                    .volume_name("volume2-4")
                    .phase("Bound")
                    .annotations(&[ANN_BIND_COMPLETED])]),
            ),
        row("2-5 claim prebound to prebound volume by UID")
            .volumes(
                volumes([volume("volume2-5", "1Gi").bound_to("uid2-5", "claim2-5")]),
                volumes([volume("volume2-5", "1Gi").bound_to("uid2-5", "claim2-5").phase("Bound")]),
            )
            .claims(
                claims([claim("claim2-5", "uid2-5", "1Gi").volume_name("volume2-5")]),
                claims([claim("claim2-5", "uid2-5", "1Gi")
                    .volume_name("volume2-5")
                    .phase("Bound")
                    .annotations(&[ANN_BIND_COMPLETED])]),
            ),
        row("2-6 claim prebound to already bound volume")
            .same_volumes(volumes([volume("volume2-6", "1Gi").bound_to("uid2-6_1", "claim2-6_1").phase("Bound")]))
            .claims(
                claims([claim("claim2-6", "uid2-6", "1Gi").volume_name("volume2-6").phase("Bound")]),
                claims([claim("claim2-6", "uid2-6", "1Gi").volume_name("volume2-6")]),
            )
            .events(&["Warning FailedBinding volume \"volume2-6\" already bound to a different claim."])
            // The volume's own claim does not exist: it is Released.
            .settles_with(|s| s.volume("volume2-6", |v| v.phase("Released"))),
        row("2-7 claim bound by controller to already bound volume")
            .same_volumes(volumes([volume("volume2-7", "1Gi").bound_to("uid2-7_1", "claim2-7_1").phase("Bound")]))
            .same_claims(claims([claim("claim2-7", "uid2-7", "1Gi")
                .volume_name("volume2-7")
                .phase("Bound")
                .annotations(&[ANN_BOUND_BY_CONTROLLER])]))
            .events(&["Warning FailedBinding volume \"volume2-7\" already bound to a different claim."])
            .call(Call::SyncClaimError)
            .settles_with(|s| s.volume("volume2-7", |v| v.phase("Released"))),
        row("2-8 claim prebound to unbound volume that does not match the selector")
            .volumes(
                volumes([volume("volume2-3", "1Gi")]),
                volumes([volume("volume2-3", "1Gi")
                    .bound_to("uid2-3", "claim2-3")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim2-3", "uid2-3", "1Gi").selector(&labeled).volume_name("volume2-3")]),
                claims([claim("claim2-3", "uid2-3", "1Gi")
                    .selector(&labeled)
                    .volume_name("volume2-3")
                    .phase("Bound")
                    .annotations(&[ANN_BIND_COMPLETED])]),
            ),
        row("2-9 claim prebound to unbound volume that size is smaller than requested")
            .same_volumes(volumes([volume("volume2-9", "1Gi")]))
            .same_claims(claims([claim("claim2-9", "uid2-9", "10Gi").volume_name("volume2-9")]))
            .events(&["Warning VolumeMismatch Cannot bind to requested volume \"volume2-9\": requested PV is too small"])
            .settles_with(|s| s.volume("volume2-9", |v| v.phase("Available"))),
        row("2-10 claim prebound to unbound volume that class is different")
            .same_volumes(volumes([volume("volume2-10", "1Gi").class("gold")]))
            .same_claims(claims([claim("claim2-10", "uid2-10", "1Gi").volume_name("volume2-10")]))
            .events(&["Warning VolumeMismatch Cannot bind to requested volume \"volume2-10\": storageClassName does not match"])
            .settles_with(|s| s.volume("volume2-10", |v| v.phase("Available"))),
        row("2-11 claim prebound to unbound volume that volume attributes class is different")
            .same_volumes(volumes([volume("volume2-11", "1Gi").vac("fast")]))
            .same_claims(claims([claim("claim2-11", "uid2-11", "1Gi").vac("slow").volume_name("volume2-11")]))
            .events(&[
                "Warning VolumeMismatch Cannot bind to requested volume \"volume2-11\": volumeAttributesClassName does not match",
            ])
            .settles_with(|s| s.volume("volume2-11", |v| v.phase("Available"))),
        row("2-12 claim prebound to unbound volume that volume attributes class is same")
            .volumes(
                volumes([volume("volume2-12", "1Gi").vac("fast")]),
                volumes([volume("volume2-12", "1Gi")
                    .vac("fast")
                    .bound_to("uid2-12", "claim2-12")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim2-12", "uid2-12", "1Gi").vac("fast").volume_name("volume2-12")]),
                claims([claim("claim2-12", "uid2-12", "1Gi")
                    .vac("fast")
                    .volume_name("volume2-12")
                    .phase("Bound")
                    .annotations(&[ANN_BIND_COMPLETED])]),
            ),
    ])
    .await;
}

#[tokio::test(start_paused = true)]
async fn set_3_bound_claims() {
    let labeled = [("foo", "true"), ("bar", "false")];
    run_table(vec![
        row("3-1 bound claim with missing VolumeName")
            .claims(
                claims([claim("claim3-1", "uid3-1", "10Gi")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
                claims([claim("claim3-1", "uid3-1", "10Gi")
                    .phase("Lost")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            )
            .events(&["Warning ClaimLost Bound claim has lost reference to PersistentVolume."]),
        row("3-2 bound claim with missing volume")
            .claims(
                claims([claim("claim3-2", "uid3-2", "10Gi")
                    .volume_name("volume3-2")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
                claims([claim("claim3-2", "uid3-2", "10Gi")
                    .volume_name("volume3-2")
                    .phase("Lost")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            )
            .events(&["Warning ClaimLost Bound claim has lost its PersistentVolume."]),
        row("3-3 bound claim with unbound volume")
            .volumes(
                volumes([volume("volume3-3", "10Gi")]),
                volumes([volume("volume3-3", "10Gi")
                    .bound_to("uid3-3", "claim3-3")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim3-3", "uid3-3", "10Gi")
                    .volume_name("volume3-3")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
                claims([claim("claim3-3", "uid3-3", "10Gi")
                    .volume_name("volume3-3")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("3-4 bound claim with prebound volume")
            .same_volumes(volumes([
                volume("volume3-4", "10Gi").bound_to("claim3-4-x", "claim3-4")
            ]))
            .claims(
                claims([claim("claim3-4", "uid3-4", "10Gi")
                    .volume_name("volume3-4")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
                claims([claim("claim3-4", "uid3-4", "10Gi")
                    .volume_name("volume3-4")
                    .phase("Lost")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            )
            .events(&["Warning ClaimMisbound"])
            .settles_with(|s| s.volume("volume3-4", |v| v.phase("Released"))),
        row("3-5 bound claim with bound volume")
            .volumes(
                volumes([volume("volume3-5", "10Gi").bound_to("uid3-5", "claim3-5")]),
                volumes([volume("volume3-5", "10Gi")
                    .bound_to("uid3-5", "claim3-5")
                    .phase("Bound")]),
            )
            .claims(
                claims([claim("claim3-5", "uid3-5", "10Gi")
                    .volume_name("volume3-5")
                    .annotations(&[ANN_BIND_COMPLETED])]),
                claims([claim("claim3-5", "uid3-5", "10Gi")
                    .volume_name("volume3-5")
                    .phase("Bound")
                    .annotations(&[ANN_BIND_COMPLETED])]),
            ),
        row("3-6 bound claim with bound volume of another claim")
            .same_volumes(volumes([
                volume("volume3-6", "10Gi").bound_to("uid3-6-x", "claim3-6-x")
            ]))
            .claims(
                claims([claim("claim3-6", "uid3-6", "10Gi")
                    .volume_name("volume3-6")
                    .annotations(&[ANN_BIND_COMPLETED])]),
                claims([claim("claim3-6", "uid3-6", "10Gi")
                    .volume_name("volume3-6")
                    .phase("Lost")
                    .annotations(&[ANN_BIND_COMPLETED])]),
            )
            .events(&["Warning ClaimMisbound"])
            .settles_with(|s| s.volume("volume3-6", |v| v.phase("Released"))),
        row("3-7 bound claim with unbound volume where selector doesn't match")
            .volumes(
                volumes([volume("volume3-3", "10Gi")]),
                volumes([volume("volume3-3", "10Gi")
                    .bound_to("uid3-3", "claim3-3")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim3-3", "uid3-3", "10Gi")
                    .selector(&labeled)
                    .volume_name("volume3-3")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
                claims([claim("claim3-3", "uid3-3", "10Gi")
                    .selector(&labeled)
                    .volume_name("volume3-3")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("5-2-3 complete bind when the volume records its size before a resize")
            .same_volumes(volumes([volume("volume5-2-3", "2Gi")
                .bound_to("uid5-2-3", "claim5-2-3")
                .phase("Bound")
                .annotation(ANN_PRE_RESIZE_CAPACITY, "1Gi")]))
            .claims(
                claims([claim("claim5-2-3", "uid5-2-3", "1Gi")
                    .volume_name("volume5-2-3")
                    .annotations(&[ANN_BIND_COMPLETED])]),
                claims([claim("claim5-2-3", "uid5-2-3", "1Gi")
                    .volume_name("volume5-2-3")
                    .phase("Bound")
                    .capacity("1Gi")
                    .annotations(&[ANN_BIND_COMPLETED])]),
            ),
    ])
    .await;
}

#[tokio::test(start_paused = true)]
async fn set_4_volumes() {
    run_table(vec![
        row("4-1 pending volume")
            .volumes(volumes([volume("volume4-1", "10Gi")]), volumes([volume("volume4-1", "10Gi").phase("Available")]))
            .call(Call::SyncVolume),
        row("4-2 pending prebound volume")
            .volumes(
                volumes([volume("volume4-2", "10Gi").bound_to("", "claim4-2")]),
                volumes([volume("volume4-2", "10Gi").bound_to("", "claim4-2").phase("Available")]),
            )
            .call(Call::SyncVolume),
        row("4-3 bound volume with missing claim")
            .volumes(
                volumes([volume("volume4-3", "10Gi").bound_to("uid4-3", "claim4-3").phase("Bound")]),
                volumes([volume("volume4-3", "10Gi").bound_to("uid4-3", "claim4-3").phase("Released")]),
            )
            .call(Call::SyncVolume),
        row("4-4 volume bound to claim with different UID")
            .volumes(
                volumes([volume("volume4-4", "10Gi").bound_to("uid4-4", "claim4-4").phase("Bound")]),
                volumes([volume("volume4-4", "10Gi").bound_to("uid4-4", "claim4-4").phase("Released")]),
            )
            .same_claims(claims([claim("claim4-4", "uid4-4-x", "10Gi")
                .volume_name("volume4-4")
                .phase("Bound")
                .annotations(&[ANN_BIND_COMPLETED])]))
            .call(Call::SyncVolume)
            .settles_with(|s| s.claim("claim4-4", |c| c.phase("Lost")))
            .settled_events(&["Warning ClaimMisbound"]),
        row("4-5 volume bound by controller to unbound claim")
            .same_volumes(volumes([volume("volume4-5", "10Gi")
                .bound_to("uid4-5", "claim4-5")
                .phase("Bound")
                .annotations(&[ANN_BOUND_BY_CONTROLLER])]))
            .same_claims(claims([claim("claim4-5", "uid4-5", "10Gi")]))
            .call(Call::SyncVolume)
            .settles_with(|s| {
                s.claim("claim4-5", |c| {
                    c.volume_name("volume4-5")
                        .phase("Bound")
                        .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])
                })
            }),
        row("4-5 volume bound by user to unbound claim")
            .same_volumes(volumes([volume("volume4-5", "10Gi").bound_to("uid4-5", "claim4-5").phase("Bound")]))
            .same_claims(claims([claim("claim4-5", "uid4-5", "10Gi")]))
            .call(Call::SyncVolume)
            .settles_with(|s| {
                s.claim("claim4-5", |c| {
                    c.volume_name("volume4-5")
                        .phase("Bound")
                        .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])
                })
            }),
        row("4-6 volume bound by to bound claim")
            .volumes(
                volumes([volume("volume4-6", "10Gi").bound_to("uid4-6", "claim4-6").phase("Available")]),
                volumes([volume("volume4-6", "10Gi").bound_to("uid4-6", "claim4-6").phase("Bound")]),
            )
            .same_claims(claims([claim("claim4-6", "uid4-6", "10Gi").volume_name("volume4-6").phase("Bound")]))
            .call(Call::SyncVolume)
            .settles_with(|s| s.claim("claim4-6", |c| c.annotations(&[ANN_BIND_COMPLETED]))),
        row("4-7 volume bound by controller to claim bound somewhere else")
            .volumes(
                volumes([volume("volume4-7", "10Gi")
                    .bound_to("uid4-7", "claim4-7")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
                volumes([volume("volume4-7", "10Gi").phase("Available")]),
            )
            .same_claims(claims([claim("claim4-7", "uid4-7", "10Gi").volume_name("volume4-7-x").phase("Bound")]))
            .call(Call::SyncVolume)
            // The claim is unbound (no bind-completed) and names a missing
            // volume: it is reset to Pending.
            .settles_with(|s| s.claim("claim4-7", |c| c.phase("Pending"))),
        row("4-8 volume bound by user to claim bound somewhere else")
            .volumes(
                volumes([volume("volume4-8", "10Gi").bound_to("uid4-8", "claim4-8").phase("Bound")]),
                volumes([volume("volume4-8", "10Gi").bound_to("", "claim4-8").phase("Available")]),
            )
            .same_claims(claims([claim("claim4-8", "uid4-8", "10Gi").volume_name("volume4-8-x").phase("Bound")]))
            .call(Call::SyncVolume)
            .settles_with(|s| s.claim("claim4-8", |c| c.phase("Pending"))),
        row("4-9 volume bound to bound claim, with PersistentVolumeReclaimDelete")
            .same_volumes(volumes([volume("volume4-9", "10Gi")
                .bound_to("uid4-9", "claim4-9")
                .phase("Bound")
                .policy("Delete")]))
            .same_claims(claims([claim("claim4-9", "uid4-9", "10Gi").volume_name("volume4-9").phase("Bound")]))
            .call(Call::SyncVolume)
            .settles_with(|s| s.claim("claim4-9", |c| c.annotations(&[ANN_BIND_COMPLETED]))),
        row("4-10 volume bound to missing claim")
            .volumes(
                volumes([volume("volume4-10", "10Gi").bound_to("uid4-10", "claim4-10").phase("Bound").policy("Delete")]),
                volumes([volume("volume4-10", "10Gi")
                    .bound_to("uid4-10", "claim4-10")
                    .phase("Failed")
                    .policy("Delete")
                    .message("Error getting deleter volume plugin for volume \"volume4-10\": no volume plugin matched")]),
            )
            .events(&["Warning VolumeFailedDelete Error getting deleter volume plugin for volume \"volume4-10\""])
            .call(Call::SyncVolume),
        row("4-11 volume bound to unknown claim")
            .volumes(
                volumes([volume("volume4-11", "10Gi").bound_to("uid4-11", "claim4-11").phase("Bound").policy("Delete")]),
                volumes([volume("volume4-11", "10Gi").bound_to("uid4-11", "claim4-11").phase("Bound").policy("Delete")]),
            )
            .same_claims(claims([claim("claim4-11", "uid4-11", "10Gi")
                .volume_name("volume4-11")
                .phase("Bound")
                .annotations(&[SKIP_STORE])]))
            .call(Call::SyncVolume)
            .settles_with(|s| s.claim("claim4-11", |c| c.annotations(&[ANN_BIND_COMPLETED]))),
        row("4-12 volume bound to newest claim but not updated to local cache")
            .same_volumes(volumes([volume("volume4-12", "10Gi")
                .bound_to("uid4-12-new", "claim4-12")
                .phase("Bound")
                .policy("Delete")]))
            .same_claims(claims([claim("claim4-12", "uid4-12-new", "10Gi")
                .volume_name("volume4-12")
                .phase("Bound")
                .annotations(&[ANN_BIND_COMPLETED])]))
            .stale_stored_claims(claims([claim("claim4-12", "uid4-12", "10Gi")
                .volume_name("volume4-12")
                .phase("Bound")
                .annotations(&[ANN_BIND_COMPLETED])]))
            .call(Call::SyncVolume),
    ])
    .await;
}

#[tokio::test(start_paused = true)]
async fn set_13_storage_classes() {
    run_table(vec![
        row("13-1 binding to class")
            .volumes(
                volumes([
                    volume("volume13-1-1", "1Gi").phase("Available"),
                    volume("volume13-1-2", "10Gi")
                        .class("gold")
                        .phase("Available"),
                ]),
                volumes([
                    volume("volume13-1-1", "1Gi").phase("Available"),
                    volume("volume13-1-2", "10Gi")
                        .class("gold")
                        .bound_to("uid13-1", "claim13-1")
                        .phase("Bound")
                        .annotations(&[ANN_BOUND_BY_CONTROLLER]),
                ]),
            )
            .claims(
                claims([claim("claim13-1", "uid13-1", "1Gi").class("gold")]),
                claims([claim("claim13-1", "uid13-1", "1Gi")
                    .class("gold")
                    .volume_name("volume13-1-2")
                    .phase("Bound")
                    .capacity("10Gi")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("13-2 binding without a class")
            .volumes(
                volumes([
                    volume("volume13-2-1", "1Gi")
                        .class("gold")
                        .phase("Available"),
                    volume("volume13-2-2", "10Gi").phase("Available"),
                ]),
                volumes([
                    volume("volume13-2-1", "1Gi")
                        .class("gold")
                        .phase("Available"),
                    volume("volume13-2-2", "10Gi")
                        .bound_to("uid13-2", "claim13-2")
                        .phase("Bound")
                        .annotations(&[ANN_BOUND_BY_CONTROLLER]),
                ]),
            )
            .claims(
                claims([claim("claim13-2", "uid13-2", "1Gi")]),
                claims([claim("claim13-2", "uid13-2", "1Gi")
                    .volume_name("volume13-2-2")
                    .phase("Bound")
                    .capacity("10Gi")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("13-3 binding to specific a class")
            .volumes(
                volumes([
                    volume("volume13-3-1", "1Gi")
                        .class("silver")
                        .phase("Available"),
                    volume("volume13-3-2", "10Gi")
                        .class("gold")
                        .phase("Available"),
                ]),
                volumes([
                    volume("volume13-3-1", "1Gi")
                        .class("silver")
                        .phase("Available"),
                    volume("volume13-3-2", "10Gi")
                        .class("gold")
                        .bound_to("uid13-3", "claim13-3")
                        .phase("Bound")
                        .annotations(&[ANN_BOUND_BY_CONTROLLER]),
                ]),
            )
            .claims(
                claims([claim("claim13-3", "uid13-3", "1Gi").class("gold")]),
                claims([claim("claim13-3", "uid13-3", "1Gi")
                    .class("gold")
                    .volume_name("volume13-3-2")
                    .phase("Bound")
                    .capacity("10Gi")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("13-4 empty class")
            .volumes(
                volumes([volume("volume13-4", "1Gi").phase("Available")]),
                volumes([volume("volume13-4", "1Gi")
                    .bound_to("uid13-4", "claim13-4")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim13-4", "uid13-4", "1Gi").class("")]),
                claims([claim("claim13-4", "uid13-4", "1Gi")
                    .class("")
                    .volume_name("volume13-4")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("13-5 nil class")
            .volumes(
                volumes([volume("volume13-5", "1Gi").phase("Available")]),
                volumes([volume("volume13-5", "1Gi")
                    .bound_to("uid13-5", "claim13-5")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim13-5", "uid13-5", "1Gi")]),
                claims([claim("claim13-5", "uid13-5", "1Gi")
                    .volume_name("volume13-5")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
    ])
    .await;
}

/// A volume of the given mode, as the block-volume table builds them.
fn mode_volume(name: &str, mode: &str) -> VolumeBuilder {
    volume(name, "10Gi").volume_mode(mode)
}

/// A claim of the given mode, as the block-volume table builds them.
fn mode_claim(name: &str, uid: &str, mode: &str) -> ClaimBuilder {
    claim(name, uid, "10Gi").volume_mode(mode)
}

const BLOCK: &str = "Block";
const FS: &str = "Filesystem";

#[tokio::test(start_paused = true)]
async fn set_14_volume_modes() {
    let bound_pair =
        |n: &'static str, mode: &str, by_controller_on_volume: bool, claim_anns: &[&str]| {
            let volume_name = format!("volume{n}");
            let claim_name = format!("claim{n}");
            let uid = format!("uid{n}");
            let mut v = mode_volume(&volume_name, mode)
                .bound_to(&uid, &claim_name)
                .phase("Bound");
            if by_controller_on_volume {
                v = v.annotations(&[ANN_BOUND_BY_CONTROLLER]);
            }
            let c = mode_claim(&claim_name, &uid, mode)
                .volume_name(&volume_name)
                .phase("Bound")
                .annotations(claim_anns);
            (v, c)
        };
    let mut rows = vec![];
    for (n, mode) in [("14-1", BLOCK), ("14-2", FS)] {
        let (v, c) = bound_pair(
            n,
            mode,
            true,
            &[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED],
        );
        rows.push(
            row(if n == "14-1" {
                "14-1 binding to volumeMode block"
            } else {
                "14-2 binding to volumeMode filesystem"
            })
            .volumes(
                volumes([mode_volume(&format!("volume{n}"), mode).phase("Available")]),
                volumes([v]),
            )
            .claims(
                claims([mode_claim(&format!("claim{n}"), &format!("uid{n}"), mode)]),
                claims([c]),
            ),
        );
    }
    for (name, n, volume_mode, claim_mode) in [
        (
            "14-3 do not bind pv volumeMode filesystem and pvc volumeMode block",
            "14-3",
            FS,
            BLOCK,
        ),
        (
            "14-4 do not bind pv volumeMode block and pvc volumeMode filesystem",
            "14-4",
            BLOCK,
            FS,
        ),
    ] {
        rows.push(
            row(name)
                .same_volumes(volumes([mode_volume(&format!("volume{n}"), volume_mode)]))
                .same_claims(claims([mode_claim(
                    &format!("claim{n}"),
                    &format!("uid{n}"),
                    claim_mode,
                )]))
                .events(&["Normal FailedBinding"])
                .settles_with(move |s| s.volume(&format!("volume{n}"), |v| v.phase("Available"))),
        );
    }
    rows.push(
        row("14-5 do not bind when matching class but not volumeMode")
            .same_volumes(volumes([mode_volume("volume14-5", BLOCK).class("gold")]))
            .same_claims(claims([
                mode_claim("claim14-5", "uid14-5", FS).class("gold")
            ]))
            .events(&["Warning ProvisioningFailed storageclass.storage.k8s.io \"gold\" not found"])
            .settles_with(|s| s.volume("volume14-5", |v| v.phase("Available"))),
    );
    rows.push(
        row("14-5-1 do not bind when matching volumeModes but class does not match")
            .same_volumes(volumes([mode_volume("volume14-5-1", BLOCK).class("gold")]))
            .same_claims(claims([
                mode_claim("claim14-5-1", "uid14-5-1", BLOCK).class("silver")
            ]))
            .events(&[
                "Warning ProvisioningFailed storageclass.storage.k8s.io \"silver\" not found",
            ])
            .settles_with(|s| s.volume("volume14-5-1", |v| v.phase("Available"))),
    );
    rows.push(
        row("14-5-2 do not bind when pvc is prebound to pv with matching volumeModes but class does not match")
            .same_volumes(volumes([mode_volume("volume14-5-2", BLOCK).class("gold")]))
            .same_claims(claims([mode_claim("claim14-5-2", "uid14-5-2", BLOCK)
                .class("silver")
                .volume_name("volume14-5-2")]))
            .events(&["Warning VolumeMismatch Cannot bind to requested volume \"volume14-5-2\": storageClassName does not match"])
            .settles_with(|s| s.volume("volume14-5-2", |v| v.phase("Available"))),
    );
    rows.push(
        row("14-7 bind when pv volume is prebound and volumeModes match")
            .volumes(
                volumes([mode_volume("volume14-7", BLOCK).bound_to("", "claim14-7")]),
                volumes([mode_volume("volume14-7", BLOCK)
                    .bound_to("uid14-7", "claim14-7")
                    .phase("Bound")]),
            )
            .claims(
                claims([mode_claim("claim14-7", "uid14-7", BLOCK)]),
                claims([mode_claim("claim14-7", "uid14-7", BLOCK)
                    .volume_name("volume14-7")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
    );
    rows.push(
        row("14-8 do not bind when pvc is prebound to pv with mismatching volumeModes")
            .same_volumes(volumes([mode_volume("volume14-8", BLOCK)]))
            .same_claims(claims([mode_claim("claim14-8", "uid14-8", FS).volume_name("volume14-8")]))
            .events(&["Warning VolumeMismatch Cannot bind to requested volume \"volume14-8\": incompatible volumeMode"])
            .settles_with(|s| s.volume("volume14-8", |v| v.phase("Available"))),
    );
    rows.push(
        row("14-8-1 do not bind when pv is prebound to pvc with mismatching volumeModes")
            .same_volumes(volumes([
                mode_volume("volume14-8-1", FS).bound_to("", "claim14-8-1")
            ]))
            .same_claims(claims([mode_claim("claim14-8-1", "uid14-8-1", BLOCK)]))
            .events(&["Normal FailedBinding"])
            .settles_with(|s| s.volume("volume14-8-1", |v| v.phase("Available"))),
    );
    for (name, n, mode) in [
        (
            "14-9 bind when pvc is prebound to pv with matching volumeModes block",
            "14-9",
            BLOCK,
        ),
        (
            "14-11 bind when pvc is prebound to pv with matching volumeModes filesystem",
            "14-11",
            FS,
        ),
    ] {
        let (v, c) = bound_pair(n, mode, true, &[ANN_BIND_COMPLETED]);
        rows.push(
            row(name)
                .volumes(
                    volumes([mode_volume(&format!("volume{n}"), mode)]),
                    volumes([v]),
                )
                .claims(
                    claims([mode_claim(&format!("claim{n}"), &format!("uid{n}"), mode)
                        .volume_name(&format!("volume{n}"))]),
                    claims([c]),
                ),
        );
    }
    for (name, n, mode) in [
        (
            "14-10 bind when pv is prebound to pvc with matching volumeModes block",
            "14-10",
            BLOCK,
        ),
        (
            "14-12 bind when pv is prebound to pvc with matching volumeModes filesystem",
            "14-12",
            FS,
        ),
    ] {
        let (v, c) = bound_pair(
            n,
            mode,
            false,
            &[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED],
        );
        rows.push(
            row(name)
                .volumes(
                    volumes([
                        mode_volume(&format!("volume{n}"), mode).bound_to("", &format!("claim{n}"))
                    ]),
                    volumes([v]),
                )
                .claims(
                    claims([mode_claim(&format!("claim{n}"), &format!("uid{n}"), mode)]),
                    claims([c]),
                ),
        );
    }
    for (name, n, volume_mode, claim_mode) in [
        (
            "14-13 output warning when pv is prebound to pvc with different volumeModes",
            "14-13",
            FS,
            BLOCK,
        ),
        (
            "14-13-1 output warning when pv is prebound to pvc with different volumeModes",
            "14-13-1",
            BLOCK,
            FS,
        ),
    ] {
        let v = mode_volume(&format!("volume{n}"), volume_mode)
            .bound_to(&format!("uid{n}"), &format!("claim{n}"))
            .phase("Available")
            .annotations(&[ANN_BOUND_BY_CONTROLLER]);
        let c = mode_claim(&format!("claim{n}"), &format!("uid{n}"), claim_mode);
        rows.push(
            row(name)
                .same_volumes(volumes([v]))
                .same_claims(claims([c]))
                .events(&["Warning VolumeMismatch", "Warning VolumeMismatch"])
                .call(Call::SyncVolume),
        );
    }
    for (name, n, mode) in [
        (
            "14-14 wait for synClaim without warning when pv is prebound to pvc with matching volumeModes block",
            "14-14",
            BLOCK,
        ),
        (
            "14-14-1 wait for synClaim without warning when pv is prebound to pvc with matching volumeModes file",
            "14-14-1",
            FS,
        ),
    ] {
        let v = mode_volume(&format!("volume{n}"), mode)
            .bound_to(&format!("uid{n}"), &format!("claim{n}"))
            .phase("Available")
            .annotations(&[ANN_BOUND_BY_CONTROLLER]);
        let (bound_v, bound_c) = bound_pair(
            n,
            mode,
            true,
            &[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED],
        );
        rows.push(
            row(name)
                .same_volumes(volumes([v]))
                .same_claims(claims([mode_claim(
                    &format!("claim{n}"),
                    &format!("uid{n}"),
                    mode,
                )]))
                .call(Call::SyncVolume)
                // Settled: the claim's own sync completes the binding.
                .settles_with(move |s| {
                    s.volume(&format!("volume{n}"), |_| bound_v.clone())
                        .claim(&format!("claim{n}"), |_| bound_c.clone())
                }),
        );
    }
    run_table(rows).await;
}

#[tokio::test(start_paused = true)]
async fn set_10_multi_sync() {
    run_table(vec![
        row("10-1 successful bind")
            .volumes(
                volumes([volume("volume10-1", "1Gi").phase("Available")]),
                volumes([volume("volume10-1", "1Gi")
                    .bound_to("uid10-1", "claim10-1")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER])]),
            )
            .claims(
                claims([claim("claim10-1", "uid10-1", "1Gi")]),
                claims([claim("claim10-1", "uid10-1", "1Gi")
                    .volume_name("volume10-1")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]),
            ),
        row("10-2 bind PV race")
            .same_volumes(volumes([
                volume("volume10-2-1", "1Gi")
                    .bound_to("uid10-2", "claim10-2")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER]),
                volume("volume10-2-2", "1Gi")
                    .bound_to("uid10-2", "claim10-2")
                    .phase("Bound")
                    .annotations(&[ANN_BOUND_BY_CONTROLLER]),
            ]))
            .same_claims(claims([claim("claim10-2", "uid10-2", "1Gi")
                .volume_name("volume10-2-1")
                .phase("Bound")
                .annotations(&[ANN_BOUND_BY_CONTROLLER, ANN_BIND_COMPLETED])]))
            // The volume the claim does not name is unbound: a plain
            // Available volume again.
            .settles_with(|s| {
                s.volume("volume10-2-2", |_| {
                    volume("volume10-2-2", "1Gi").phase("Available")
                })
            }),
    ])
    .await;
}

/// CSI migration of bound pairs: a volume an in-tree plugin provisioned and
/// a claim handed to one get `migrated-to` naming the CSI driver (every
/// sync anneals it), and a volume whose `migrated-to` its provisioner does
/// not migrate to loses it again (upstream's 5-9).
#[tokio::test(start_paused = true)]
async fn set_m_migration_of_bound_pairs() {
    const GCE_CSI: &str = "pd.csi.storage.gke.io";
    let bound_claim = |name: &str, uid: &str, volume: &str| {
        claim(name, uid, "10Gi")
            .volume_name(volume)
            .phase("Bound")
            .annotations(&[ANN_BIND_COMPLETED])
    };
    run_table(vec![
        row("m-1 volume provisioned by a migrated plugin gets migrated-to")
            .volumes(
                volumes([volume("volume-m1", "10Gi")
                    .bound_to("uid-m1", "claim-m1")
                    .phase("Bound")
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/gce-pd")]),
                volumes([volume("volume-m1", "10Gi")
                    .bound_to("uid-m1", "claim-m1")
                    .phase("Bound")
                    .annotation(ANN_DYNAMICALLY_PROVISIONED, "kubernetes.io/gce-pd")
                    .annotation(ANN_MIGRATED_TO, GCE_CSI)]),
            )
            .same_claims(claims([bound_claim("claim-m1", "uid-m1", "volume-m1")]))
            .call(Call::SyncVolume),
        row("m-2 claim handed to a migrated plugin gets migrated-to")
            .same_volumes(volumes([volume("volume-m2", "10Gi")
                .bound_to("uid-m2", "claim-m2")
                .phase("Bound")]))
            .claims(
                claims([bound_claim("claim-m2", "uid-m2", "volume-m2")
                    .annotation(ANN_STORAGE_PROVISIONER, "kubernetes.io/gce-pd")]),
                claims([bound_claim("claim-m2", "uid-m2", "volume-m2")
                    .annotation(ANN_STORAGE_PROVISIONER, "kubernetes.io/gce-pd")
                    .annotation(ANN_MIGRATED_TO, GCE_CSI)]),
            ),
        row("5-9 volume has its external deletion finalizer removed as its plugin is not migrated")
            .volumes(
                volumes([volume("volume5-9", "10Gi")
                    .bound_to("uid5-9", "claim5-9")
                    .phase("Bound")
                    .policy("Delete")
                    .annotations(&[ANN_DYNAMICALLY_PROVISIONED])
                    .annotation(ANN_MIGRATED_TO, GCE_CSI)
                    .finalizers(&[FINALIZER_EXTERNAL_PROVISIONER])]),
                volumes([volume("volume5-9", "10Gi")
                    .bound_to("uid5-9", "claim5-9")
                    .phase("Bound")
                    .policy("Delete")
                    .annotations(&[ANN_DYNAMICALLY_PROVISIONED])
                    .finalizers(&[FINALIZER_PV_CONTROLLER])]),
            )
            .same_claims(claims([bound_claim("claim5-9", "uid5-9", "volume5-9")]))
            .call(Call::SyncVolume),
    ])
    .await;
}
