//! What every controller of the process is built from: the controllers'
//! client (for reads), the informers (one watch and one store per kind),
//! the one write door, the one event recorder, the one metrics registry,
//! the flag that says whether the process leads, and, in shadow mode,
//! the shadow the executors hand their plans to instead of acting.

use std::sync::Arc;

use kube::Client;

use crate::events::{EventRecorder, RecorderError};
use crate::informer::{Informers, WiringError};
use crate::metrics::{Metrics, MetricsError};
use crate::runner::Leading;
use crate::shadow::Shadow;
use crate::write::Door;

/// The parts of the process a controller is built from.
pub struct Shared {
    /// The controllers' client (rate-limited, behind the write gate), for
    /// reads; every write goes through [`Shared::writes`].
    pub client: Client,
    /// The kinds the controllers ask for.
    pub informers: Informers,
    /// The one write door.
    pub writes: Door,
    /// The one event recorder; each controller reports through
    /// [`EventRecorder::for_component`].
    pub recorder: EventRecorder,
    /// The one registry.
    pub metrics: Arc<Metrics>,
    /// Whether the process leads.
    pub leading: Leading,
    /// Where the executors hand their plans instead of carrying them out,
    /// in shadow mode.
    pub shadow: Option<Arc<dyn Shadow>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("informers", &self.informers)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The parts on `client` and `metrics`, with events reported by
    /// `instance`; with a `shadow`, the executors hand their plans there
    /// and no event is written. Fails when there is no tokio runtime for
    /// the event recorder's sender task.
    pub fn new(
        client: Client,
        metrics: Arc<Metrics>,
        instance: &str,
        shadow: Option<Arc<dyn Shadow>>,
    ) -> Result<Self, BuildError> {
        let mut recorder = EventRecorder::new(
            client.clone(),
            Arc::clone(&metrics),
            "pv-controller",
            instance,
        )?;
        if shadow.is_some() {
            recorder = recorder.silenced();
        }
        Ok(Self {
            writes: Door::new(client.clone(), Arc::clone(&metrics)),
            client,
            informers: Informers::default(),
            recorder,
            metrics,
            leading: Leading::default(),
            shadow,
        })
    }
}

/// Why a controller could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// Its series could not be registered.
    #[error(transparent)]
    Metrics(#[from] MetricsError),
    /// The event recorder could not start (no tokio runtime).
    #[error(transparent)]
    Events(#[from] RecorderError),
    /// It asked for a kind in a way another controller's wiring excludes.
    #[error(transparent)]
    Wiring(#[from] WiringError),
}
