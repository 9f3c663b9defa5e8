//! The model-based test: random sequences of user actions (volumes and
//! claims created, claims and volumes deleted) against a reference model
//! of the settled state: which claim binds which volume (the smallest that
//! fits, ties by name), which volumes end Released, Available again or
//! gone, which claims are Lost. The controller runs without faults and
//! settles after every action; proptest shrinks a failure to a minimal
//! sequence. `MODEL_CASES` sets the number of sequences (default 64).

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use memapi::MemApi;
use proptest::prelude::*;
use pv_controller::pv;
use pv_controller::pv::Settings;

use crate::harness::Running;

use super::kubelet::Kubelet;
use super::replicas::plugins;
use super::world::{ChaosPlugin, Policy, static_volume, user_claim};

/// One user action; indexes pick among the objects made so far.
#[derive(Debug, Clone)]
enum Action {
    Volume { gib: u8, policy: Policy },
    Claim { gib: u8 },
    DeleteClaim(usize),
    DeleteVolume(usize),
}

fn action() -> impl Strategy<Value = Action> {
    let policy = prop_oneof![
        Just(Policy::Retain),
        Just(Policy::Delete),
        Just(Policy::Recycle)
    ];
    prop_oneof![
        3 => (prop_oneof![Just(1u8), Just(2), Just(5)], policy)
            .prop_map(|(gib, policy)| Action::Volume { gib, policy }),
        3 => prop_oneof![Just(1u8), Just(2)].prop_map(|gib| Action::Claim { gib }),
        2 => (0usize..8).prop_map(Action::DeleteClaim),
        1 => (0usize..8).prop_map(Action::DeleteVolume),
    ]
}

/// Where the model says a volume is.
#[derive(Debug, Clone, PartialEq)]
enum Place {
    Free,
    Bound(String),
    Released(String),
    Gone,
}

#[derive(Debug)]
struct Volume {
    name: String,
    gib: u8,
    policy: Policy,
    place: Place,
}

#[derive(Debug, Clone, PartialEq)]
enum ClaimState {
    Pending,
    Bound(String),
    Lost,
    Gone,
}

#[derive(Debug)]
struct Claim {
    name: String,
    gib: u8,
    state: ClaimState,
}

/// The reference model of the settled state.
#[derive(Debug, Default)]
struct Model {
    volumes: Vec<Volume>,
    claims: Vec<Claim>,
}

fn claim_ref_name(api: &MemApi, volume: &str) -> Option<String> {
    api.get::<PersistentVolume>(None, volume)?
        .spec?
        .claim_ref?
        .name
}

impl Model {
    /// The smallest free volume that fits `gib` (ties by name).
    fn smallest_free(&self, gib: u8) -> Option<usize> {
        (0..self.volumes.len())
            .filter(|&i| self.volumes[i].place == Place::Free && self.volumes[i].gib >= gib)
            .min_by(|&a, &b| {
                let (a, b) = (&self.volumes[a], &self.volumes[b]);
                (a.gib, &a.name).cmp(&(b.gib, &b.name))
            })
    }

    /// A volume just became free: one of the pending claims it fits may
    /// take it (the model allows any, the server says which).
    fn offer(&mut self, at: usize, api: &MemApi) -> Result<(), String> {
        let fitting: Vec<usize> = (0..self.claims.len())
            .filter(|&c| {
                self.claims[c].state == ClaimState::Pending
                    && self.claims[c].gib <= self.volumes[at].gib
            })
            .collect();
        if fitting.is_empty() {
            return Ok(());
        }
        let taker = claim_ref_name(api, &self.volumes[at].name);
        let Some(c) = fitting
            .into_iter()
            .find(|&c| Some(&self.claims[c].name) == taker.as_ref())
        else {
            return Err(format!(
                "volume {} is free while a pending claim fits it (server: claimRef {taker:?})",
                self.volumes[at].name
            ));
        };
        self.bind(at, c);
        Ok(())
    }

    fn bind(&mut self, volume: usize, claim: usize) {
        self.volumes[volume].place = Place::Bound(self.claims[claim].name.clone());
        self.claims[claim].state = ClaimState::Bound(self.volumes[volume].name.clone());
    }

    /// Applies an action to the server and, once the controller settled,
    /// to the model.
    fn apply(&mut self, action: &Action, api: &MemApi, n: usize) -> Result<bool, String> {
        match *action {
            Action::Volume { gib, policy } => {
                let name = format!("v{n}");
                api.create(&static_volume(&name, &format!("{gib}Gi"), policy))
                    .map_err(|e| e.to_string())?;
                self.volumes.push(Volume {
                    name,
                    gib,
                    policy,
                    place: Place::Free,
                });
            }
            Action::Claim { gib } => {
                let name = format!("c{n}");
                let mut claim = user_claim(&name, false);
                if let Some(spec) = claim.spec.as_mut().and_then(|s| s.resources.as_mut()) {
                    spec.requests = Some(
                        [(
                            "storage".to_string(),
                            k8s_openapi::apimachinery::pkg::api::resource::Quantity(format!(
                                "{gib}Gi"
                            )),
                        )]
                        .into(),
                    );
                }
                api.create(&claim).map_err(|e| e.to_string())?;
                self.claims.push(Claim {
                    name,
                    gib,
                    state: ClaimState::Pending,
                });
            }
            Action::DeleteClaim(i) => {
                let live: Vec<usize> = (0..self.claims.len())
                    .filter(|&c| self.claims[c].state != ClaimState::Gone)
                    .collect();
                let Some(&c) = live.get(i % live.len().max(1)) else {
                    return Ok(false);
                };
                let _ = api.delete::<PersistentVolumeClaim>(Some("default"), &self.claims[c].name);
            }
            Action::DeleteVolume(i) => {
                let live: Vec<usize> = (0..self.volumes.len())
                    .filter(|&v| self.volumes[v].place != Place::Gone)
                    .collect();
                let Some(&v) = live.get(i % live.len().max(1)) else {
                    return Ok(false);
                };
                let _ = api.delete::<PersistentVolume>(None, &self.volumes[v].name);
            }
        }
        Ok(true)
    }

    /// What the action did, by the model's rules, resolving "which pending
    /// claim takes a freed volume" from the server.
    fn settle(&mut self, action: &Action, api: &MemApi) -> Result<(), String> {
        match *action {
            Action::Volume { .. } => self.offer(self.volumes.len() - 1, api),
            Action::Claim { gib } => {
                if let Some(v) = self.smallest_free(gib) {
                    self.bind(v, self.claims.len() - 1);
                }
                Ok(())
            }
            Action::DeleteClaim(i) => self.claim_deleted(i, api),
            Action::DeleteVolume(i) => {
                let live: Vec<usize> = (0..self.volumes.len())
                    .filter(|&v| self.volumes[v].place != Place::Gone)
                    .collect();
                let v = live[i % live.len()];
                if let Place::Bound(claim) = &self.volumes[v].place
                    && let Some(c) = self.claims.iter_mut().find(|c| &c.name == claim)
                {
                    c.state = ClaimState::Lost;
                }
                self.volumes[v].place = Place::Gone;
                Ok(())
            }
        }
    }

    fn claim_deleted(&mut self, i: usize, api: &MemApi) -> Result<(), String> {
        let live: Vec<usize> = (0..self.claims.len())
            .filter(|&c| self.claims[c].state != ClaimState::Gone)
            .collect();
        let c = live[i % live.len()];
        let state = std::mem::replace(&mut self.claims[c].state, ClaimState::Gone);
        let ClaimState::Bound(volume) = state else {
            return Ok(());
        };
        let Some(v) = self.volumes.iter().position(|v| v.name == volume) else {
            return Ok(());
        };
        let claim = self.claims[c].name.clone();
        self.volumes[v].place = match self.volumes[v].policy {
            Policy::Retain => Place::Released(claim),
            Policy::Delete => Place::Gone,
            Policy::Recycle => Place::Free,
        };
        if self.volumes[v].place == Place::Free {
            return self.offer(v, api);
        }
        Ok(())
    }

    /// Differences between the model and the server.
    fn compare(&self, api: &MemApi) -> Vec<String> {
        let mut problems = Vec::new();
        for v in &self.volumes {
            let stored = api.get::<PersistentVolume>(None, &v.name);
            let phase = stored
                .as_ref()
                .and_then(|s| s.status.as_ref()?.phase.clone());
            let reference = stored
                .as_ref()
                .and_then(|s| s.spec.as_ref()?.claim_ref.as_ref()?.name.clone());
            let fine = match &v.place {
                Place::Gone => stored.is_none(),
                Place::Free => phase.as_deref() == Some("Available") && reference.is_none(),
                Place::Bound(c) => {
                    phase.as_deref() == Some("Bound") && reference.as_ref() == Some(c)
                }
                Place::Released(c) => {
                    phase.as_deref() == Some("Released") && reference.as_ref() == Some(c)
                }
            };
            if !fine {
                problems.push(format!(
                    "volume {}: model {:?}, server phase {phase:?} claimRef {reference:?}",
                    v.name, v.place
                ));
            }
        }
        for c in &self.claims {
            let stored = api.get::<PersistentVolumeClaim>(Some("default"), &c.name);
            let phase = stored
                .as_ref()
                .and_then(|s| s.status.as_ref()?.phase.clone());
            let volume = stored
                .as_ref()
                .and_then(|s| s.spec.as_ref()?.volume_name.clone());
            let fine = match &c.state {
                ClaimState::Gone => stored.is_none(),
                ClaimState::Pending => phase.as_deref() == Some("Pending") && volume.is_none(),
                ClaimState::Bound(v) => {
                    phase.as_deref() == Some("Bound") && volume.as_ref() == Some(v)
                }
                ClaimState::Lost => phase.as_deref() == Some("Lost"),
            };
            if !fine {
                problems.push(format!(
                    "claim {}: model {:?}, server phase {phase:?} volumeName {volume:?}",
                    c.name, c.state
                ));
            }
        }
        problems
    }
}

/// Runs the actions one by one, each until the controller settled, and
/// returns the first disagreement with the model.
async fn run(actions: Vec<Action>) -> Result<(), String> {
    let api = MemApi::new();
    let storage = Arc::new(ChaosPlugin::default());
    let config = pv::Config {
        settings: Settings {
            plugins: plugins(&storage),
            ..Settings::default()
        },
        ..pv::Config::default()
    };
    let running = Running::binder_with(&api, config).await;
    let kubelet_api = api.clone();
    let kubelet = tokio::spawn(async move {
        let mut kubelet = Kubelet::new(0);
        loop {
            tokio::time::sleep(Duration::from_millis(250)).await;
            kubelet.step(&kubelet_api, false);
        }
    });
    let mut model = Model::default();
    let mut result = Ok(());
    for (n, action) in actions.iter().enumerate() {
        if !model.apply(action, &api, n)? {
            continue;
        }
        running.settle().await;
        model.settle(action, &api)?;
        let problems = model.compare(&api);
        if !problems.is_empty() {
            result = Err(format!("after {action:?}: {}", problems.join("; ")));
            break;
        }
    }
    kubelet.abort();
    running.stop().await;
    result
}

fn cases() -> u32 {
    std::env::var("MODEL_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn settled_state_follows_the_model(actions in prop::collection::vec(action(), 1..10)) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .start_paused(true)
            .build()
            .expect("runtime");
        let outcome = runtime.block_on(run(actions));
        prop_assert!(outcome.is_ok(), "{}", outcome.err().unwrap_or_default());
    }
}
