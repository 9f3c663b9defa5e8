//! A decision rehearsed: decided as a sync would, and its plan carried out
//! on copies of what the shadow cache holds, with no server. What a sync
//! would write, record and start, for tests and the scenario tables.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::changes::PvPlan;
use super::volume::Decided;
use super::{Controller, Next};
use crate::runtime::keys::ObjectKey;
use crate::runtime::rehearsal::Rehearsal;

/// What one decision's plan would do.
#[derive(Debug)]
pub struct Rehearsed {
    /// The plan, one line per step.
    pub lines: Vec<String>,
    /// The volumes after the plan.
    pub volumes: Vec<PersistentVolume>,
    /// The claims after the plan.
    pub claims: Vec<PersistentVolumeClaim>,
    /// The events the plan records, as "Type Reason message".
    pub events: Vec<String>,
    /// The operations the plan starts, by name.
    pub started: Vec<String>,
    /// What follows the plan, or why the sync would fail.
    pub outcome: Result<Next, String>,
}

impl Controller {
    /// Decides about `claim` and rehearses the plan on copies of `server`
    /// (the objects as the API server holds them).
    pub fn rehearse_claim(&self, claim: &Arc<PersistentVolumeClaim>, server: &Server) -> Rehearsed {
        rehearse(
            self.decide_claim(claim).map_err(|error| error.to_string()),
            server,
        )
    }

    /// Decides about `volume` and rehearses the plan on copies of `server`,
    /// which also answers when the decision reads the volume's claim from
    /// the API server.
    pub fn rehearse_volume(&self, volume: &Arc<PersistentVolume>, server: &Server) -> Rehearsed {
        let server_claims = &server.claims;
        let decided = match self.decide_volume(volume, None) {
            Ok(Decided::ReadClaim(key)) => {
                let read = server_claims
                    .iter()
                    .find(|claim| ObjectKey::of(*claim) == key)
                    .cloned()
                    .map(Arc::new);
                self.decide_volume(volume, Some(read))
            }
            decided => decided,
        };
        let plan = match decided {
            Ok(Decided::Plan(plan)) => Ok(plan),
            Ok(Decided::ReadClaim(key)) => Err(format!("asked twice for claim {key}")),
            Err(error) => Err(error.to_string()),
        };
        rehearse(plan, server)
    }
}

/// The volumes and claims as the API server holds them, for a rehearsal.
#[derive(Clone, Debug, Default)]
pub struct Server {
    /// The volumes.
    pub volumes: Vec<PersistentVolume>,
    /// The claims.
    pub claims: Vec<PersistentVolumeClaim>,
}

/// Rehearses `plan` on copies of `server`'s volumes and claims.
fn rehearse(plan: Result<PvPlan, String>, server: &Server) -> Rehearsed {
    let mut rehearsal = Rehearsal::default();
    for volume in &server.volumes {
        rehearsal.put(volume.clone());
    }
    for claim in &server.claims {
        rehearsal.put(claim.clone());
    }
    let (lines, outcome) = match plan {
        Ok(plan) => {
            let lines = plan.lines();
            let outcome = plan
                .rehearse(&mut rehearsal)
                .map_err(|error| error.to_string())
                .and_then(|next| match next.inconsistent {
                    Some(problem) => Err(problem),
                    None => Ok(next),
                });
            (lines, outcome)
        }
        Err(error) => (Vec::new(), Err(error)),
    };
    Rehearsed {
        lines,
        volumes: rehearsal.list(),
        claims: rehearsal.list(),
        events: rehearsal.events,
        started: rehearsal.started,
        outcome,
    }
}
