//! An open tunnel: after a backend's `101 Switching Protocols`, the
//! client's and the backend's connections, with bytes copied both ways
//! until both are done (`copy_bidirectional`: the end of one side's input
//! is passed on as a half-close to the other; an error on either side ends
//! both). The proxy does not look at the bytes.
//!
//! Lifetime. A tunnel is run by its client connection's own task once hyper
//! has written the 101 and handed the connection over (`conn`), so it is
//! still that connection: it holds its `max_connections` slot, the
//! proxy's drain waits for it, and the drain deadline (`drain_timeout`)
//! closes it like any connection still open then. A configuration change
//! does not touch it: it owns its backend connection (never pooled) and a
//! [`Lease`](crate::upstream::forward::Lease) on that one endpoint, so it
//! stays on the backend it was opened to until a side closes, even after
//! that backend was retired.
//!
//! Counted in `switchyard_proxy_upgrades_total` (`tunnelled` once both
//! sides are handed over, `failed` when the switch breaks off or the
//! tunnel is dropped before it), `…_tunnels_open` and `…_tunnel_bytes_total`.
//!
//! Not here: which requests are upgrades and the 101's headers
//! (`upgrade`), answering the upgrade request (`service`).

use crate::metrics::{BackendLabels, Metrics, UpgradeOutcome};
use crate::upstream::forward::Switched;
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::gauge::Gauge;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tracing::debug;

/// Both ends of an accepted upgrade, waiting to be switched and run.
#[derive(Debug)]
pub(crate) struct Tunnel {
    /// The client's connection, once hyper has written the 101.
    client: OnUpgrade,
    /// The backend's 101, its connection and its lease on the endpoint.
    backend: Switched,
    labels: BackendLabels,
    metrics: Arc<Metrics>,
    /// The outcome was counted; until then, dropping the tunnel counts it
    /// as failed (a drain deadline can drop it mid-switch).
    counted: bool,
}

impl Tunnel {
    /// A tunnel between the client connection `client` will yield and the
    /// backend connection of `backend`.
    pub(crate) fn new(
        client: OnUpgrade,
        backend: Switched,
        labels: BackendLabels,
        metrics: Arc<Metrics>,
    ) -> Tunnel {
        Tunnel {
            client,
            backend,
            labels,
            metrics,
            counted: false,
        }
    }

    /// Waits for both connections to be handed over, then copies bytes
    /// until both sides are done. Dropping the future closes both.
    pub(crate) async fn run(mut self) {
        let upstream = hyper::upgrade::on(&mut self.backend.response);
        let (client, backend) = match tokio::try_join!(&mut self.client, upstream) {
            Ok(both) => both,
            Err(error) => {
                debug!(backend = %self.labels.backend, endpoint = %self.backend.endpoint, %error, "upgrade broke off during the switch");
                return;
            }
        };
        self.counted = true;
        self.metrics
            .record_upgrade(&self.labels, UpgradeOutcome::Tunnelled);
        let _open = Open::new(&self.metrics.tunnels_open);
        let (up, down) = self.metrics.tunnel_byte_counters();
        let mut client = Counted {
            inner: TokioIo::new(client),
            read: up,
            written: down,
        };
        let mut backend = TokioIo::new(backend);
        match tokio::io::copy_bidirectional(&mut client, &mut backend).await {
            Ok((up, down)) => {
                debug!(backend = %self.labels.backend, endpoint = %self.backend.endpoint, up, down, "tunnel closed");
            }
            Err(error) => {
                debug!(backend = %self.labels.backend, endpoint = %self.backend.endpoint, %error, "tunnel broke off");
            }
        }
    }
}

impl Drop for Tunnel {
    fn drop(&mut self) {
        if !self.counted {
            self.metrics
                .record_upgrade(&self.labels, UpgradeOutcome::Failed);
        }
    }
}

/// One open tunnel in the gauge, until dropped (also when the drain
/// deadline drops the tunnel mid-copy).
struct Open(Gauge);

impl Open {
    fn new(gauge: &Gauge) -> Open {
        gauge.inc();
        Open(gauge.clone())
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// The client side of a tunnel, counting bytes as they pass: read from the
/// client is client to backend, written to it backend to client. Counted
/// per read and write rather than at the end, so long-lived tunnels show
/// up while open and a tunnel cut by the drain deadline still counts.
struct Counted<T> {
    inner: T,
    read: Counter,
    written: Counter,
}

impl<T: AsyncRead + Unpin> AsyncRead for Counted<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let n = buf.filled().len().saturating_sub(before);
        if n > 0 {
            self.read.inc_by(n as u64);
        }
        polled
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Counted<T> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = polled {
            self.written.inc_by(n as u64);
        }
        polled
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.inner).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = polled {
            self.written.inc_by(n as u64);
        }
        polled
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn counted_io_counts_both_directions() {
        let (near, mut far) = tokio::io::duplex(64);
        let read = Counter::default();
        let written = Counter::default();
        let mut counted = Counted {
            inner: near,
            read: read.clone(),
            written: written.clone(),
        };
        far.write_all(b"hello").await.unwrap();
        let mut buf = [0u8; 5];
        counted.read_exact(&mut buf).await.unwrap();
        counted.write_all(b"abc").await.unwrap();
        let mut back = [0u8; 3];
        far.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"abc");
        assert_eq!(read.get(), 5);
        assert_eq!(written.get(), 3);
    }
}
