//! Request mirroring, fire-and-forget: copies of a request go to mirror
//! backends on spawned tasks, and nothing they do can delay or change the
//! main response.
//!
//! The client's body is teed frame by frame into bounded channels with
//! `try_send`; a mirror that falls behind is cut off (its copy ends with an
//! error, so the mirror backend never sees a silently truncated body) while
//! the main request streams on untouched. Mirrors in flight are capped by a
//! semaphore; copies beyond it are skipped and counted.
//!
//! Not here: deciding which requests are mirrored (the router decides,
//! percentages included).

use super::Backend;
use super::forward::forward;
use crate::body::{BoxError, ProxyBody};
use crate::metrics::MirrorLabels;
use bytes::Bytes;
use http::{HeaderMap, Request};
use http_body_util::BodyExt;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll, ready};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, mpsc};
use tracing::debug;

/// Frames buffered per mirror before it is cut off.
const MIRROR_BUFFER_FRAMES: usize = 64;

enum MirrorFrame {
    Data(Bytes),
    Trailers(HeaderMap),
    End,
}

/// The client's request body on its way upstream: records whether the
/// client broke it off (for blame) and tees it to mirrors.
pub struct ClientBody {
    inner: Incoming,
    failed: Arc<AtomicBool>,
    mirrors: Vec<mpsc::Sender<MirrorFrame>>,
}

impl ClientBody {
    /// Wraps `inner`, a body that has not ended yet, creating one body per
    /// mirror. Returns the wrapper, a flag that turns true if the client's
    /// body fails, and the mirror bodies. (hyper never polls an ended body,
    /// so nothing would reach the mirrors' channels: the request stack
    /// sends an ended one, and its mirrors' copies, as empty bodies.)
    pub fn new(inner: Incoming, mirrors: usize) -> (ClientBody, Arc<AtomicBool>, Vec<ProxyBody>) {
        let failed = Arc::new(AtomicBool::new(false));
        let mut senders = Vec::with_capacity(mirrors);
        let mut bodies = Vec::with_capacity(mirrors);
        for _ in 0..mirrors {
            let (tx, rx) = mpsc::channel(MIRROR_BUFFER_FRAMES);
            senders.push(tx);
            bodies.push(MirrorBody { rx, ended: false }.boxed_unsync());
        }
        let body = ClientBody {
            inner,
            failed: Arc::clone(&failed),
            mirrors: senders,
        };
        (body, failed, bodies)
    }

    fn tee(&mut self, frame: &Frame<Bytes>) {
        if self.mirrors.is_empty() {
            return;
        }
        let copy = if let Some(data) = frame.data_ref() {
            MirrorFrame::Data(data.clone())
        } else if let Some(trailers) = frame.trailers_ref() {
            MirrorFrame::Trailers(trailers.clone())
        } else {
            return;
        };
        let last = self.mirrors.len() - 1;
        let mut copy = Some(copy);
        let mut keep = Vec::with_capacity(self.mirrors.len());
        for (i, tx) in self.mirrors.drain(..).enumerate() {
            let item = if i == last {
                copy.take()
            } else {
                copy.as_ref().map(clone_frame)
            };
            if let Some(item) = item
                && tx.try_send(item).is_ok()
            {
                keep.push(tx);
            }
            // A full or closed channel drops the sender: that mirror's body
            // ends with an error.
        }
        self.mirrors = keep;
    }

    fn end_mirrors(&mut self) {
        for tx in self.mirrors.drain(..) {
            let _ = tx.try_send(MirrorFrame::End);
        }
    }
}

fn clone_frame(frame: &MirrorFrame) -> MirrorFrame {
    match frame {
        MirrorFrame::Data(b) => MirrorFrame::Data(b.clone()),
        MirrorFrame::Trailers(h) => MirrorFrame::Trailers(h.clone()),
        MirrorFrame::End => MirrorFrame::End,
    }
}

impl Body for ClientBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let this = &mut *self;
        match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => {
                this.tee(&frame);
                if this.inner.is_end_stream() {
                    this.end_mirrors();
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Some(Err(error)) => {
                this.failed.store(true, Ordering::Relaxed);
                this.mirrors.clear();
                Poll::Ready(Some(Err(error)))
            }
            None => {
                this.end_mirrors();
                Poll::Ready(None)
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

/// A mirror's copy of the client body.
struct MirrorBody {
    rx: mpsc::Receiver<MirrorFrame>,
    ended: bool,
}

impl Body for MirrorBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.ended {
            return Poll::Ready(None);
        }
        match ready!(self.rx.poll_recv(cx)) {
            Some(MirrorFrame::Data(data)) => Poll::Ready(Some(Ok(Frame::data(data)))),
            Some(MirrorFrame::Trailers(t)) => Poll::Ready(Some(Ok(Frame::trailers(t)))),
            Some(MirrorFrame::End) => {
                self.ended = true;
                Poll::Ready(None)
            }
            None => Poll::Ready(Some(Err(
                "mirror fell behind or the client body failed".into()
            ))),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended
    }
}

/// Caps mirrors in flight.
#[derive(Debug)]
pub struct MirrorLimiter {
    permits: Arc<Semaphore>,
    max: usize,
}

impl MirrorLimiter {
    /// At most `max` mirrors in flight.
    pub fn new(max: usize) -> MirrorLimiter {
        MirrorLimiter {
            permits: Arc::new(Semaphore::new(max.max(1))),
            max: max.max(1),
        }
    }

    /// Mirror copies currently in flight.
    pub fn in_flight(&self) -> usize {
        self.max.saturating_sub(self.permits.available_permits())
    }

    fn try_acquire(&self) -> Option<OwnedSemaphorePermit> {
        Arc::clone(&self.permits).try_acquire_owned().ok()
    }
}

/// Sends `req` to `backend` on a spawned task and discards the answer.
pub fn spawn(limiter: &MirrorLimiter, backend: Arc<Backend>, req: Request<ProxyBody>) {
    let ctx = Arc::clone(backend.context());
    let labels = |result: &str| MirrorLabels {
        backend: backend.labels().backend.clone(),
        result: result.to_owned(),
    };
    let Some(permit) = limiter.try_acquire() else {
        ctx.metrics.mirrors.get_or_create(&labels("skipped")).inc();
        return;
    };
    let sent = labels("sent");
    let failed = labels("failed");
    let metrics = Arc::clone(&ctx.metrics);
    ctx.spawn(async move {
        let _permit = permit;
        let never_failed = AtomicBool::new(false);
        match forward(&backend, req, &never_failed).await {
            Ok(resp) => {
                // Read the answer so the connection goes back to the pool.
                let timeout = backend.context().settings.request_timeout;
                let _ = tokio::time::timeout(timeout, resp.into_body().collect()).await;
                metrics.mirrors.get_or_create(&sent).inc();
            }
            Err(error) => {
                debug!(backend = %backend.key(), %error, "mirror request failed");
                metrics.mirrors.get_or_create(&failed).inc();
            }
        }
    });
}
