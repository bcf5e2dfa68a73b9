//! The client side: a tonic connector that opens TCP (optionally from a
//! given source address, with TCP_NODELAY) and, with TLS on, performs the
//! handshake as this process's identity, verifying that the server is a
//! coordinator of the same CA.
//!
//! Owns: [`Connector`] and [`channel`], the one way every gRPC client in
//! switchyard (Raft peers, proxies, admin) builds its channel.

use crate::conn::Conn;
use crate::{COORDINATOR_SERVER_NAME, Security};
use hyper_util::rt::TokioIo;
use rustls_pki_types::ServerName;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::net::{TcpSocket, TcpStream};
use tokio_rustls::TlsConnector;
use tonic::transport::{Channel, Endpoint};

/// Opens connections for a tonic channel.
#[derive(Clone, Debug)]
pub struct Connector {
    security: Security,
    source_ip: Option<IpAddr>,
    timeout: Duration,
}

/// A connection a [`Connector`] opened.
pub type ClientConn = Conn<tokio_rustls::client::TlsStream<TcpStream>>;

/// A lazily connected channel to `address` (`HOST:PORT`): connects on first
/// use and reconnects by itself after failures. `endpoint` adjusts the
/// tonic endpoint (keep-alive, timeouts) before the channel is built.
pub fn channel(
    address: &str,
    security: &Security,
    source_ip: Option<IpAddr>,
    connect_timeout: Duration,
    endpoint: impl FnOnce(Endpoint) -> Endpoint,
) -> Result<Channel, tonic::transport::Error> {
    // The scheme stays `http`: TLS happens inside the connector, and
    // tonic's own TLS (which would want `https`) is not compiled in.
    let base = Endpoint::from_shared(format!("http://{address}"))?.connect_timeout(connect_timeout);
    let connector = Connector::new(security.clone(), source_ip, connect_timeout);
    Ok(endpoint(base).connect_with_connector_lazy(connector))
}

impl Connector {
    /// Opens connections as `security` says, from `source_ip` when given,
    /// each within `timeout` (TCP and handshake together).
    pub fn new(security: Security, source_ip: Option<IpAddr>, timeout: Duration) -> Connector {
        Connector {
            security,
            source_ip,
            timeout,
        }
    }
}

impl tower_service::Service<http::Uri> for Connector {
    type Response = TokioIo<ClientConn>;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Self::Response>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let deadline = this.timeout;
            tokio::time::timeout(deadline, this.connect(uri))
                .await
                .map_err(|_| {
                    io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!("connect timed out after {deadline:?}"),
                    )
                })?
                .map(TokioIo::new)
        })
    }
}

impl Connector {
    async fn connect(self, uri: http::Uri) -> io::Result<ClientConn> {
        let host = uri.host().unwrap_or_default().trim_matches(['[', ']']);
        let port = uri.port_u16().unwrap_or(80);
        let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
        let mut last = io::Error::new(
            io::ErrorKind::NotFound,
            format!("{host}:{port} resolves to no address"),
        );
        for address in addresses {
            match self.tcp(address).await {
                Ok(stream) => return self.secure(stream).await,
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    async fn tcp(&self, address: SocketAddr) -> io::Result<TcpStream> {
        let socket = if address.is_ipv4() {
            TcpSocket::new_v4()?
        } else {
            TcpSocket::new_v6()?
        };
        if let Some(ip) = self.source_ip {
            socket.bind(SocketAddr::new(ip, 0))?;
        }
        socket.set_nodelay(true)?;
        socket.connect(address).await
    }

    async fn secure(&self, stream: TcpStream) -> io::Result<ClientConn> {
        match &self.security {
            Security::Insecure => Ok(ClientConn::Plain(stream)),
            Security::Tls(tls) => {
                let name = ServerName::try_from(COORDINATOR_SERVER_NAME).expect("a valid DNS name");
                let stream = TlsConnector::from(tls.client_config())
                    .connect(name, stream)
                    .await
                    .map_err(|e| io::Error::new(e.kind(), format!("TLS handshake failed: {e}")))?;
                Ok(ClientConn::Tls(Box::new(stream)))
            }
        }
    }
}
