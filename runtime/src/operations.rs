//! The operation tracker: runs a controller's long operations in the
//! background, at most one per name, with exponential backoff after a
//! failure (upstream's goroutinemap with `exponentialBackOffOnError`).
//!
//! Every sync of an object that needs a long operation asks for the same
//! operation again; the tracker is what keeps the operation from running
//! twice at once for one object, and keeps a failing operation from being
//! retried on every resync. The controller names its operations
//! ([`OperationName::new`]: a kind of work on one object); the tracker
//! knows none of them.

use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use crate::keys::ObjectKey;

/// Wait after an operation's first failure before it may run again.
pub const INITIAL_BACKOFF: Duration = Duration::from_millis(500);

/// Longest wait after repeated failures (upstream: 2 min 2 s).
pub const MAX_BACKOFF: Duration = Duration::from_secs(122);

/// How many operations run at once by default; more wait their turn (a
/// waiting operation counts as running, so it is not started twice).
pub const DEFAULT_CONCURRENCY: usize = 32;

/// The identity of an operation, as the controller that runs it names it:
/// what is done (`kind`, a metrics label) to which object (its key, and
/// its UID, so a re-created object of the same name gets its own
/// operation). The tracker runs at most one operation per name. Shown as
/// `<kind>-<key>[<uid>]`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct OperationName {
    kind: &'static str,
    object: ObjectKey,
    uid: String,
}

impl OperationName {
    /// The operation of kind `kind` on the object `object` of UID `uid`.
    pub fn new(kind: &'static str, object: ObjectKey, uid: &str) -> Self {
        Self {
            kind,
            object,
            uid: uid.to_string(),
        }
    }

    /// What the operation does, e.g. for a metric's label.
    pub fn kind(&self) -> &'static str {
        self.kind
    }

    /// The object it works on.
    pub fn object(&self) -> &ObjectKey {
        &self.object
    }

    /// The UID of the object it works on.
    pub fn uid(&self) -> &str {
        &self.uid
    }
}

impl fmt::Display for OperationName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}[{}]", self.kind, self.object, self.uid)
    }
}

/// Why an operation was not started. Both are expected during normal work:
/// the caller logs them at debug level and relies on a later sync to ask again.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OperationError {
    /// An operation of this name is still running.
    #[error("operation {name} is already running")]
    AlreadyRunning {
        /// The operation that was refused.
        name: OperationName,
    },
    /// The last run of this operation failed and its backoff has not passed.
    #[error("operation {name} failed recently; retry allowed in {remaining:?}")]
    Backoff {
        /// The operation that was refused.
        name: OperationName,
        /// Time left until the operation may start again.
        remaining: Duration,
    },
}

/// How an operation ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OperationOutcome {
    /// The operation's future returned `Ok`.
    Succeeded,
    /// The operation's future returned an error (its message).
    Failed(String),
    /// The operation's task panicked or was cancelled.
    Panicked,
}

impl OperationOutcome {
    /// Whether the operation succeeded, e.g. for a metric's status label.
    pub fn is_success(&self) -> bool {
        matches!(self, Self::Succeeded)
    }
}

/// A finished operation, handed to the completion hook so the caller can
/// record its duration and result in metrics.
#[derive(Debug, Clone)]
pub struct OperationReport {
    /// The operation.
    pub name: OperationName,
    /// How long it ran.
    pub elapsed: Duration,
    /// How it ended.
    pub outcome: OperationOutcome,
}

type CompletionHook = Arc<dyn Fn(&OperationReport) + Send + Sync>;

/// Runs operations in the background, one per name, with backoff after
/// failures. Cloning gives another handle on the same tracker.
#[derive(Clone)]
pub struct OperationTracker {
    inner: Arc<Inner>,
}

struct Inner {
    operations: Mutex<HashMap<OperationName, Operation>>,
    /// Turns to run: bounds how many operations act at once, so a storm of
    /// claims or released volumes cannot flood the API server.
    turns: Arc<Semaphore>,
    /// Woken whenever an operation finishes.
    finished: Notify,
    on_completion: Option<CompletionHook>,
}

/// The tracker's record of one name: a running operation, or the backoff
/// left by a failed one.
struct Operation {
    /// Start time of the running operation; `None` when nothing runs.
    running_since: Option<Instant>,
    /// Cancels the running operation's task (used at shutdown).
    abort: Option<tokio::task::AbortHandle>,
    /// When the last run failed, and how long to wait after it.
    last_failure: Option<(Instant, Duration)>,
}

impl Default for OperationTracker {
    fn default() -> Self {
        Self::new()
    }
}

impl OperationTracker {
    /// A tracker with nothing running, running at most
    /// [`DEFAULT_CONCURRENCY`] operations at once.
    pub fn new() -> Self {
        Self::build(None, DEFAULT_CONCURRENCY)
    }

    /// A tracker running at most `concurrency` operations at once (at least
    /// one) that calls `hook` each time an operation finishes, e.g. to
    /// observe an operation-duration metric. The hook runs on the
    /// operation's task and should be quick.
    pub fn with_completion_hook(
        concurrency: usize,
        hook: impl Fn(&OperationReport) + Send + Sync + 'static,
    ) -> Self {
        Self::build(Some(Arc::new(hook)), concurrency)
    }

    fn build(on_completion: Option<CompletionHook>, concurrency: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                operations: Mutex::new(HashMap::new()),
                turns: Arc::new(Semaphore::new(concurrency.max(1))),
                finished: Notify::new(),
                on_completion,
            }),
        }
    }

    /// Starts `operation` on a tokio task unless an operation of the same
    /// name is running or in backoff after a failure. An error from the
    /// operation (or a panic) starts a backoff of 500 ms, doubling with each
    /// further failure up to 2 min 2 s; a success clears it. Must be called
    /// from within a tokio runtime, which runs the operation.
    pub fn run<F, E>(&self, name: OperationName, operation: F) -> Result<(), OperationError>
    where
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: fmt::Display + Send + 'static,
    {
        let started = Instant::now();
        self.reserve(&name, started)?;
        tracing::debug!(operation = %name, "operation started");
        let tracker = self.clone();
        let turns = Arc::clone(&self.inner.turns);
        // The operation runs on a task of its own, so that a panic in it ends
        // that task only and reaches the tracker as a join error. It waits
        // for its turn there, holding its name meanwhile.
        let task = tokio::spawn(async move {
            let _turn = turns.acquire_owned().await;
            operation.await
        });
        if let Some(entry) = self.lock().get_mut(&name) {
            entry.abort = Some(task.abort_handle());
        }
        tokio::spawn(async move {
            let outcome = match task.await {
                Ok(Ok(())) => OperationOutcome::Succeeded,
                Ok(Err(error)) => OperationOutcome::Failed(error.to_string()),
                Err(join_error) if join_error.is_cancelled() => {
                    tracing::debug!(operation = %name, "operation cancelled");
                    OperationOutcome::Panicked
                }
                Err(join_error) => {
                    tracing::error!(operation = %name, error = %join_error, "operation panicked");
                    OperationOutcome::Panicked
                }
            };
            tracker.finish(&OperationReport {
                elapsed: started.elapsed(),
                name,
                outcome,
            });
        });
        Ok(())
    }

    /// Whether an operation of this name is running now.
    pub fn is_running(&self, name: &OperationName) -> bool {
        self.lock()
            .get(name)
            .is_some_and(|op| op.running_since.is_some())
    }

    /// A handle that tells which operations run, and can do nothing else:
    /// what a decision reads.
    pub fn running(&self) -> Running {
        Running(self.clone())
    }

    /// How many operations are running now.
    pub fn running_count(&self) -> usize {
        self.lock()
            .values()
            .filter(|op| op.running_since.is_some())
            .count()
    }

    /// Waits until no operation is running (upstream's `WaitForCompletion`),
    /// so tests can check the results of the operations a sync started.
    #[cfg(any(test, feature = "testing"))]
    pub async fn wait_idle(&self) {
        loop {
            let mut finished = std::pin::pin!(self.inner.finished.notified());
            finished.as_mut().enable();
            if self.running_count() == 0 {
                return;
            }
            finished.await;
        }
    }

    /// Cancels every running operation, for a controller that shuts down:
    /// its operations must not go on acting beside the controller that
    /// replaces it. A cancelled operation counts as failed.
    pub fn abort_all(&self) {
        let operations = self.lock();
        // In name order, so the cancelled tasks end in an order that does
        // not depend on the map's hashing (a simulation replays it).
        let mut running: Vec<(String, &tokio::task::AbortHandle)> = operations
            .iter()
            .filter_map(|(name, operation)| Some((name.to_string(), operation.abort.as_ref()?)))
            .collect();
        running.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, abort) in running {
            tracing::info!(operation = %name, "cancelling operation at shutdown");
            abort.abort();
        }
    }

    /// Marks `name` as running, or says why it may not run now.
    fn reserve(&self, name: &OperationName, now: Instant) -> Result<(), OperationError> {
        let mut operations = self.lock();
        match operations.entry(name.clone()) {
            Entry::Vacant(vacant) => {
                vacant.insert(Operation {
                    running_since: Some(now),
                    abort: None,
                    last_failure: None,
                });
                Ok(())
            }
            Entry::Occupied(mut occupied) => {
                let operation = occupied.get_mut();
                if operation.running_since.is_some() {
                    return Err(OperationError::AlreadyRunning { name: name.clone() });
                }
                if let Some((failed_at, backoff)) = operation.last_failure {
                    let retry_at = failed_at + backoff;
                    if now < retry_at {
                        return Err(OperationError::Backoff {
                            name: name.clone(),
                            remaining: retry_at - now,
                        });
                    }
                }
                operation.running_since = Some(now);
                Ok(())
            }
        }
    }

    fn finish(&self, report: &OperationReport) {
        {
            let mut operations = self.lock();
            match &report.outcome {
                OperationOutcome::Succeeded => {
                    operations.remove(&report.name);
                    tracing::debug!(operation = %report.name, elapsed = ?report.elapsed, "operation succeeded");
                }
                OperationOutcome::Failed(_) | OperationOutcome::Panicked => {
                    if let Some(operation) = operations.get_mut(&report.name) {
                        let backoff = next_backoff(operation.last_failure.map(|(_, b)| b));
                        operation.running_since = None;
                        operation.abort = None;
                        operation.last_failure = Some((Instant::now(), backoff));
                        tracing::warn!(
                            operation = %report.name,
                            elapsed = ?report.elapsed,
                            outcome = ?report.outcome,
                            retry_after = ?backoff,
                            "operation failed"
                        );
                    }
                }
            }
        }
        if let Some(hook) = &self.inner.on_completion {
            hook(report);
        }
        self.inner.finished.notify_waiters();
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<OperationName, Operation>> {
        // No code panics while holding the lock, so a poisoned map is still
        // consistent.
        self.inner
            .operations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

/// Which operations of a tracker run now; cheap to clone.
#[derive(Clone)]
pub struct Running(OperationTracker);

impl fmt::Debug for Running {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Running({})", self.0.running_count())
    }
}

impl Default for Running {
    /// Of a tracker that runs nothing.
    fn default() -> Self {
        Self(OperationTracker::new())
    }
}

impl Running {
    /// Whether an operation of this name is running now.
    pub fn is_running(&self, name: &OperationName) -> bool {
        self.0.is_running(name)
    }
}

/// The backoff after a failure, given the backoff after the previous one.
fn next_backoff(previous: Option<Duration>) -> Duration {
    match previous {
        None => INITIAL_BACKOFF,
        Some(previous) => previous.saturating_mul(2).min(MAX_BACKOFF),
    }
}

#[cfg(test)]
mod tests;
