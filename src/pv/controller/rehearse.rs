//! A decision rehearsed: decided as a sync would, and its plan carried out
//! on copies of what the API server holds ([`crate::runtime::copies`]), with
//! no server: what a sync would write, record and start, for tests and the
//! scenario tables. A read the decision asks for is answered from the
//! copies, and the volume decided again.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};

use super::{Binder, PvPlan};
use crate::runtime::plan::Copies;
use crate::runtime::plan::{Reads, Then};

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
    pub outcome: Result<Then, String>,
}

/// The volumes and claims as the API server holds them, for a rehearsal.
#[derive(Clone, Debug, Default)]
pub struct Server {
    /// The volumes.
    pub volumes: Vec<PersistentVolume>,
    /// The claims.
    pub claims: Vec<PersistentVolumeClaim>,
}

impl Binder {
    /// The store of volumes and claims the binder decides from.
    pub fn store(&self) -> &Arc<crate::pv::store::PvStore> {
        &self.store
    }

    /// Decides about `claim` and rehearses the plan on copies of `server`.
    pub fn rehearse_claim(&self, claim: &Arc<PersistentVolumeClaim>, server: &Server) -> Rehearsed {
        rehearse(server, |_| self.decide_claim(claim))
    }

    /// Decides about `volume` and rehearses the plan on copies of `server`,
    /// which also answer the reads the decision asks for.
    pub fn rehearse_volume(&self, volume: &Arc<PersistentVolume>, server: &Server) -> Rehearsed {
        rehearse(server, |reads| self.decide_volume(volume, reads))
    }
}

/// Decides with `decide` (answering its reads from the copies of
/// `server`) and carries the plan out on them.
fn rehearse(server: &Server, decide: impl Fn(&Reads) -> PvPlan) -> Rehearsed {
    let mut copies = Copies::default();
    for volume in &server.volumes {
        copies.put(volume.clone());
    }
    for claim in &server.claims {
        copies.put(claim.clone());
    }
    let mut plan = decide(&Reads::none());
    if let Then::Read(requests) = plan.what_then() {
        let mut reads = Reads::none();
        for request in requests {
            reads.insert(request.target(), request.on_copies(&copies));
        }
        plan = decide(&reads);
    }
    let lines = plan.lines();
    let outcome = match copies.carry_out(plan) {
        Ok(Then::Fail(failure)) => Err(failure.reason),
        Ok(then) => Ok(then),
        Err(error) => Err(error.to_string()),
    };
    Rehearsed {
        lines,
        volumes: copies.list(),
        claims: copies.list(),
        events: copies.events,
        started: copies.started,
        outcome,
    }
}
