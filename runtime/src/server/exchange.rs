//! A time limit on a whole exchange, the answer's writing included: from
//! the moment a request's headers are in, the answer must be written
//! within the limit. A client that pipelines requests and never reads
//! their answers fills its socket's buffers, and the write that then waits
//! is cut off at the limit: the connection is closed. A write that
//! completes at once is never refused, so an answer due at the limit (a
//! 504) still reaches a client that reads. Reads are left to the header
//! limit: the server reads while a handler runs, to notice a client gone,
//! and that read must not end the exchange before its answer.

use std::io;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// When the connection's current exchange must be done; shared by the
/// connection's service, which starts an exchange with each request, and
/// its [`TimedIo`].
#[derive(Clone, Debug, Default)]
pub(super) struct ExchangeClock(Arc<Mutex<Option<Instant>>>);

impl ExchangeClock {
    /// A request's headers are in: its exchange must be done within
    /// `limit`.
    pub(super) fn start(&self, limit: Duration) {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner) = Instant::now().checked_add(limit);
    }

    fn deadline(&self) -> Option<Instant> {
        *self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A connection's stream whose writes that wait are cut off with a
/// `TimedOut` error at the [`ExchangeClock`]'s deadline.
pub(super) struct TimedIo<IO> {
    io: IO,
    clock: ExchangeClock,
    timer: Pin<Box<Sleep>>,
}

impl<IO> TimedIo<IO> {
    /// `io`, held to `clock`.
    pub(super) fn new(io: IO, clock: ExchangeClock) -> Self {
        Self {
            io,
            clock,
            timer: Box::pin(tokio::time::sleep_until(Instant::now())),
        }
    }

    /// After an operation that must wait: an error once the exchange's
    /// deadline has passed, else the timer armed to wake the task then.
    fn waited<T>(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<T>> {
        let Some(deadline) = self.clock.deadline() else {
            return Poll::Pending;
        };
        if self.timer.deadline() != deadline {
            self.timer.as_mut().reset(deadline);
        }
        match self.timer.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the exchange took longer than its time limit",
            ))),
            Poll::Pending => Poll::Pending,
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for TimedIo<IO> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for TimedIo<IO> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Poll::Ready(written) = Pin::new(&mut this.io).poll_write(cx, buf) {
            return Poll::Ready(written);
        }
        this.waited(cx)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Poll::Ready(flushed) = Pin::new(&mut this.io).poll_flush(cx) {
            return Poll::Ready(flushed);
        }
        this.waited(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Poll::Ready(done) = Pin::new(&mut this.io).poll_shutdown(cx) {
            return Poll::Ready(done);
        }
        ready!(this.waited::<()>(cx))?;
        Poll::Ready(Ok(()))
    }
}

#[cfg(test)]
mod tests;
