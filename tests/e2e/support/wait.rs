//! Waiting for the cluster to reach a state, with the last state seen in
//! the error when it does not.

use std::future::Future;
use std::time::{Duration, Instant};

use super::PATIENCE;

/// Asks `probe` every quarter second until it answers `Ok(Ok(value))`, for
/// at most [`PATIENCE`]. `Ok(Err(seen))` means not yet, `seen` describing
/// what is there; an `Err` ends the wait at once.
pub(crate) async fn until<T, F, Fut>(what: &str, probe: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<T, String>>>,
{
    until_within(what, PATIENCE, probe).await
}

/// [`until`] for at most `patience`.
pub(crate) async fn until_within<T, F, Fut>(
    what: &str,
    patience: Duration,
    mut probe: F,
) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<T, String>>>,
{
    let deadline = Instant::now() + patience;
    loop {
        let seen = match probe().await? {
            Ok(value) => return Ok(value),
            Err(seen) => seen,
        };
        if Instant::now() > deadline {
            anyhow::bail!("{what}: not within {patience:?}; last seen: {seen}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Checks `probe` every quarter second for `period`: it must hold all along.
pub(crate) async fn holds<F, Fut>(what: &str, period: Duration, mut probe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Result<(), String>>>,
{
    let deadline = Instant::now() + period;
    while Instant::now() < deadline {
        if let Err(seen) = probe().await? {
            anyhow::bail!("{what}: broken after less than {period:?}: {seen}");
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Ok(())
}
