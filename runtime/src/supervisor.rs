//! Tasks that must run as long as the process does (an admin server, the
//! event sender, a side task of a demo): the first to end, by a return or
//! a panic, is reported, so the process stops with an error naming it
//! instead of going on without it, where nothing would notice.

use std::collections::HashMap;
use std::future::Future;

use tokio::task::{AbortHandle, Id, JoinHandle, JoinSet};

/// A task that ended while it should have run on.
#[derive(Debug, thiserror::Error)]
#[error("the {task} stopped unexpectedly: {how}")]
pub struct TaskStopped {
    /// Which task.
    pub task: &'static str,
    /// How it ended (`it returned`, or the panic's message).
    pub how: String,
}

/// Named tasks, each expected to run until [`Supervised::stop_all`]. Their
/// end is reported by [`Supervised::stopped`].
#[derive(Default)]
pub struct Supervised {
    set: JoinSet<Result<(), String>>,
    names: HashMap<Id, &'static str>,
}

impl std::fmt::Debug for Supervised {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Supervised")
            .field("tasks", &self.names.values().collect::<Vec<_>>())
            .finish()
    }
}

/// Aborts a task when dropped: the task a watched handle names ends with
/// its watcher.
struct AbortOnDrop(AbortHandle);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Supervised {
    /// Runs `future` as the task `task`.
    pub fn spawn(&mut self, task: &'static str, future: impl Future<Output = ()> + Send + 'static) {
        let id = self
            .set
            .spawn(async move {
                future.await;
                Ok(())
            })
            .id();
        self.names.insert(id, task);
    }

    /// Supervises a task spawned elsewhere as `task`; it is aborted with
    /// the others.
    pub fn watch(&mut self, task: &'static str, handle: JoinHandle<()>) {
        // Moved into the task, so dropped with it even if never polled.
        let abort = AbortOnDrop(handle.abort_handle());
        let id = self
            .set
            .spawn(async move {
                let _abort = abort;
                handle.await.map_err(|error| error.to_string())
            })
            .id();
        self.names.insert(id, task);
    }

    /// The first task to end, and how. Never resolves while every task
    /// runs, or when there is none.
    pub async fn stopped(&mut self) -> TaskStopped {
        let Some(ended) = self.set.join_next_with_id().await else {
            return std::future::pending().await;
        };
        let (id, how) = match ended {
            Ok((id, Ok(()))) => (id, "it returned".to_string()),
            Ok((id, Err(how))) => (id, how),
            Err(error) => (error.id(), error.to_string()),
        };
        TaskStopped {
            task: self.names.remove(&id).unwrap_or("task"),
            how,
        }
    }

    /// Aborts every task and waits until all have ended.
    pub async fn stop_all(&mut self) {
        self.set.abort_all();
        while self.set.join_next().await.is_some() {}
        self.names.clear();
    }
}

#[cfg(test)]
mod tests;
