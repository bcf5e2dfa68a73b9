//! The client's request body on its way upstream, watched for pauses.
//!
//! [`TimedBody`] reports to an [`Upload`] when the proxy starts waiting
//! for the client's next bytes, when bytes arrive and when the body ends,
//! so `forward` can time the backend from the end of the body. A pause
//! longer than the body idle timeout ends the body with an error: hyper
//! then abandons the upstream request, and the client gets 408 (or a
//! reset, once the response has started). The timer runs only while the
//! proxy is waiting on the client, never while the backend is slow to
//! take what the proxy already has.
//!
//! Not here: teeing to mirrors and noticing a client that broke the body
//! off (the mirror module's `ClientBody`, which this wraps), the backend's
//! timeout (`forward`).

use crate::body::BoxError;
use crate::upstream::forward::Upload;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::{Instant, Sleep};

/// The error a stalled body ends with.
#[derive(Debug, thiserror::Error)]
#[error("client request body paused longer than {0:?}")]
pub(crate) struct ClientStalled(Duration);

/// A request body that reports its progress and idles out on the client.
pub(crate) struct TimedBody<B> {
    inner: B,
    upload: Arc<Upload>,
    idle: Duration,
    /// Allocated on the first pause only; most bodies arrive whole.
    timer: Option<Pin<Box<Sleep>>>,
    /// The timer is running for the current pause.
    armed: bool,
}

impl<B> TimedBody<B> {
    /// Wraps `inner`, reporting to `upload`.
    pub(crate) fn new(inner: B, upload: Arc<Upload>, idle: Duration) -> TimedBody<B> {
        TimedBody {
            inner,
            upload,
            idle,
            timer: None,
            armed: false,
        }
    }
}

impl<B> Body for TimedBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<BoxError>,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                this.armed = false;
                this.upload.progressed();
                if this.inner.is_end_stream() {
                    this.upload.ended();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => {
                this.upload.ended();
                Poll::Ready(Some(Err(error.into())))
            }
            Poll::Ready(None) => {
                this.upload.ended();
                Poll::Ready(None)
            }
            Poll::Pending => {
                if !this.armed {
                    this.armed = true;
                    this.upload.waiting_on_client();
                    let deadline = Instant::now() + this.idle;
                    match &mut this.timer {
                        Some(timer) => timer.as_mut().reset(deadline),
                        None => this.timer = Some(Box::pin(tokio::time::sleep_until(deadline))),
                    }
                }
                if let Some(timer) = &mut this.timer
                    && timer.as_mut().poll(cx).is_ready()
                {
                    this.upload.stalled();
                    return Poll::Ready(Some(Err(ClientStalled(this.idle).into())));
                }
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}
