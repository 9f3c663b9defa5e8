//! What every controller of the process is built from: the controllers'
//! client (for reads), the informers (one watch and one store per kind),
//! the one write door, the one event recorder, the one metrics registry and
//! the flag that says whether the process leads.

use std::sync::Arc;

use kube::Client;

use crate::runtime::dry_run::{DryRun, DryRunConfig};
use crate::runtime::events::{EventRecorder, RecorderError};
use crate::runtime::informer::{Informers, WiringError};
use crate::runtime::metrics::{Metrics, MetricsError};
use crate::runtime::runner::Leading;
use crate::runtime::write::Door;

/// The parts of the process a controller is built from.
pub(crate) struct Shared {
    /// The controllers' client (rate-limited, behind the write gate), for
    /// reads; every write goes through [`Shared::writes`].
    pub(crate) client: Client,
    /// The kinds the controllers ask for.
    pub(crate) informers: Informers,
    /// The one write door.
    pub(crate) writes: Door,
    /// The one event recorder; each controller reports through
    /// [`EventRecorder::for_component`].
    pub(crate) recorder: EventRecorder,
    /// The one registry.
    pub(crate) metrics: Arc<Metrics>,
    /// Whether the process leads.
    pub(crate) leading: Leading,
    /// The dry run's journal, when the process runs dry.
    pub(crate) dry_run: Option<Arc<DryRun>>,
}

impl std::fmt::Debug for Shared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shared")
            .field("informers", &self.informers)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// The parts on `client`, with events reported by `instance`, in
    /// a dry run when `dry_run` is given (the door sends nothing, events
    /// are not written); fails when the metrics cannot be set up or there
    /// is no tokio runtime for the event recorder's sender task.
    pub(crate) fn new(
        client: Client,
        instance: &str,
        dry_run: Option<&DryRunConfig>,
    ) -> Result<Self, BuildError> {
        let metrics = Arc::new(Metrics::new()?);
        let mut recorder = EventRecorder::new(
            client.clone(),
            Arc::clone(&metrics),
            "pv-controller",
            instance,
        )?;
        let dry_run = match dry_run {
            Some(config) => {
                recorder = recorder.silenced();
                Some(Arc::new(DryRun::new(config, &metrics)?))
            }
            None => None,
        };
        Ok(Self {
            writes: Door::new(client.clone(), Arc::clone(&metrics), dry_run.clone()),
            client,
            informers: Informers::default(),
            recorder,
            metrics,
            leading: Leading::default(),
            dry_run,
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
