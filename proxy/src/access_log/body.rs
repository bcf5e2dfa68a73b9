//! Body wrappers of the access log: one counts the client's request body
//! on its way upstream, the other counts the response body on its way to
//! the client and sends the request's line when it ends or is dropped.
//!
//! Both pass frames, `is_end_stream` and `size_hint` through unchanged, so
//! hyper frames and ends the bodies exactly as it would without them. They
//! exist only while the access log is on.

use super::record::Pending;
use crate::body::{BoxError, ProxyBody};
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, ready};

/// A request body that adds the data bytes it passes on to `count`.
pub(super) struct CountedBody {
    inner: ProxyBody,
    count: Arc<AtomicU64>,
}

impl CountedBody {
    pub(super) fn new(inner: ProxyBody, count: Arc<AtomicU64>) -> CountedBody {
        CountedBody { inner, count }
    }
}

impl Body for CountedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let frame = ready!(Pin::new(&mut self.inner).poll_frame(cx));
        if let Some(Ok(frame)) = &frame
            && let Some(data) = frame.data_ref()
        {
            self.count.fetch_add(data.len() as u64, Ordering::Relaxed);
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// A response body that counts what it hands to hyper and, when dropped
/// (hyper drops a body once it has its last frame, or when the client
/// went away), sends the request's line.
pub(super) struct LoggedBody {
    inner: ProxyBody,
    sent: u64,
    /// The last frame was handed on (or there was none to hand).
    ended: bool,
    pending: Option<Pending>,
}

impl LoggedBody {
    pub(super) fn new(inner: ProxyBody, pending: Pending) -> LoggedBody {
        LoggedBody {
            inner,
            sent: 0,
            ended: false,
            pending: Some(pending),
        }
    }
}

impl Body for LoggedBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        let frame = ready!(Pin::new(&mut this.inner).poll_frame(cx));
        match &frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    this.sent += data.len() as u64;
                }
                this.ended = this.inner.is_end_stream();
            }
            Some(Err(_)) => {}
            None => this.ended = true,
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl Drop for LoggedBody {
    fn drop(&mut self) {
        if let Some(pending) = self.pending.take() {
            // A body hyper never polled because it was empty ended too.
            let complete = self.ended || self.inner.is_end_stream();
            pending.send(self.sent, complete);
        }
    }
}
