//! The mock volume plugin of the scenario tables (`kubernetes.io/mock-volume`,
//! after upstream's test framework): it can handle any volume and answers
//! provision, delete and recycle calls with configured results, in order.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use k8s_openapi::api::core::v1::{
    GCEPersistentDiskVolumeSource, PersistentVolume, PersistentVolumeSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pv_controller::pv::PluginError;
use pv_controller::pv::ProvisionRequest;
use pv_controller::pv::RecycleContext;
use pv_controller::pv::VolumePlugin;
use tokio::time::Instant;

use testkit::MOCK_PLUGIN;

/// One provision call's expectation and answer.
#[derive(Clone, Debug)]
pub(crate) struct ProvisionCall {
    pub expected_parameters: BTreeMap<String, String>,
    pub error: Option<String>,
}

/// A provision call of class `gold` (param1=value1) that succeeds.
pub(crate) fn provision1_success() -> ProvisionCall {
    ProvisionCall {
        expected_parameters: [("param1".to_string(), "value1".to_string())].into(),
        error: None,
    }
}

/// A provision call of class `gold` that fails.
pub(crate) fn provision1_error() -> ProvisionCall {
    ProvisionCall {
        error: Some("Mock provisioner error".to_string()),
        ..provision1_success()
    }
}

/// A provision call of class `silver` (param2=value2) that succeeds.
pub(crate) fn provision2_success() -> ProvisionCall {
    ProvisionCall {
        expected_parameters: [("param2".to_string(), "value2".to_string())].into(),
        error: None,
    }
}

/// The configured answers; `None` in a result list is success.
#[derive(Clone, Debug, Default)]
pub(crate) struct MockConfig {
    pub provisions: Vec<ProvisionCall>,
    pub deletes: Vec<Option<String>>,
    pub recycles: Vec<Option<String>>,
    /// How long each delete takes (to hold an operation running).
    pub delete_delay: Duration,
}

impl MockConfig {
    pub(crate) fn provisions(mut self, calls: Vec<ProvisionCall>) -> Self {
        self.provisions = calls;
        self
    }

    pub(crate) fn deletes(mut self, results: &[Option<&str>]) -> Self {
        self.deletes = results.iter().map(|r| r.map(str::to_string)).collect();
        self
    }

    pub(crate) fn recycles(mut self, results: &[Option<&str>]) -> Self {
        self.recycles = results.iter().map(|r| r.map(str::to_string)).collect();
        self
    }

    pub(crate) fn delete_delay(mut self, delay: Duration) -> Self {
        self.delete_delay = delay;
        self
    }
}

/// What the mock was asked, for assertions.
#[derive(Default, Debug)]
pub(crate) struct MockCalls {
    pub provisions: usize,
    pub deletes: Vec<Instant>,
    pub recycles: usize,
}

/// The mock plugin.
pub(crate) struct MockPlugin {
    config: MockConfig,
    provisions: Mutex<VecDeque<ProvisionCall>>,
    deletes: Mutex<VecDeque<Option<String>>>,
    recycles: Mutex<VecDeque<Option<String>>>,
    pub calls: Arc<Mutex<MockCalls>>,
}

impl MockPlugin {
    pub(crate) fn new(config: MockConfig) -> Self {
        Self {
            provisions: Mutex::new(config.provisions.iter().cloned().collect()),
            deletes: Mutex::new(config.deletes.iter().cloned().collect()),
            recycles: Mutex::new(config.recycles.iter().cloned().collect()),
            config,
            calls: Default::default(),
        }
    }
}

fn answer(
    configured: bool,
    queue: &Mutex<VecDeque<Option<String>>>,
    what: &str,
) -> Result<(), PluginError> {
    if !configured {
        return Err(PluginError::Setup(format!(
            "Mock plugin error: no {what}Calls configured"
        )));
    }
    match queue.lock().unwrap().pop_front() {
        None => Err(PluginError::Failed(format!(
            "Mock plugin error: unexpected {what} call"
        ))),
        Some(None) => Ok(()),
        Some(Some(message)) => Err(PluginError::Failed(message)),
    }
}

impl VolumePlugin for MockPlugin {
    fn name(&self) -> &str {
        MOCK_PLUGIN
    }

    fn can_provision(&self) -> bool {
        true
    }

    fn can_delete(&self, _volume: &PersistentVolume) -> bool {
        true
    }

    fn can_recycle(&self, _volume: &PersistentVolume) -> bool {
        true
    }

    fn provision<'a>(
        &'a self,
        request: &'a ProvisionRequest,
    ) -> BoxFuture<'a, Result<PersistentVolume, PluginError>> {
        Box::pin(async move {
            self.calls.lock().unwrap().provisions += 1;
            if self.config.provisions.is_empty() {
                return Err(PluginError::Setup(
                    "Mock plugin error: no provisionCalls configured".to_string(),
                ));
            }
            let Some(call) = self.provisions.lock().unwrap().pop_front() else {
                return Err(PluginError::Failed(
                    "Mock plugin error: unexpected provision call".to_string(),
                ));
            };
            if call.expected_parameters != request.parameters {
                return Err(PluginError::Failed(format!(
                    "Mock plugin error: expected parameters {:?}, got {:?}",
                    call.expected_parameters, request.parameters
                )));
            }
            if let Some(error) = call.error {
                return Err(PluginError::Failed(error));
            }
            let mut volume = provisioned_volume(request);
            if let Some(spec) = volume.spec.as_mut() {
                spec.gce_persistent_disk = Some(GCEPersistentDiskVolumeSource::default());
            }
            Ok(volume)
        })
    }

    fn delete<'a>(
        &'a self,
        _volume: &'a PersistentVolume,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        Box::pin(async move {
            self.calls.lock().unwrap().deletes.push(Instant::now());
            if !self.config.delete_delay.is_zero() {
                tokio::time::sleep(self.config.delete_delay).await;
            }
            answer(!self.config.deletes.is_empty(), &self.deletes, "delete")
        })
    }

    fn recycle<'a>(
        &'a self,
        _volume: &'a PersistentVolume,
        _context: &'a RecycleContext,
    ) -> BoxFuture<'a, Result<(), PluginError>> {
        Box::pin(async move {
            self.calls.lock().unwrap().recycles += 1;
            answer(!self.config.recycles.is_empty(), &self.recycles, "recycle")
        })
    }
}

/// The volume a test plugin provisions for `request`: named as asked, of
/// the claim's size, access modes and volume mode, with the class's reclaim
/// policy and no volume source yet.
pub(crate) fn provisioned_volume(request: &ProvisionRequest) -> PersistentVolume {
    let claim_spec = request.claim.spec.clone().unwrap_or_default();
    PersistentVolume {
        metadata: ObjectMeta {
            name: Some(request.pv_name.clone()),
            ..Default::default()
        },
        spec: Some(PersistentVolumeSpec {
            capacity: claim_spec.resources.and_then(|r| r.requests),
            access_modes: claim_spec.access_modes,
            volume_mode: claim_spec.volume_mode,
            persistent_volume_reclaim_policy: Some(request.reclaim_policy.to_string()),
            ..Default::default()
        }),
        status: None,
    }
}
