//! The server side: accepted TCP connections, TLS-terminated, handed to
//! tonic with the peer's identity attached.
//!
//! Owns: the accept loop (TCP_NODELAY on every accepted socket: Nagle
//! holds small Raft answers back for ~40 ms), a handshake per connection on
//! its own task with a deadline (a client that connects and says nothing
//! cannot hold the accept loop or a slot forever), and [`PeerInfo`], which
//! tonic puts into every request's extensions for [`crate::authz`].

use crate::Security;
use crate::conn::Conn;
use crate::identity::Identity;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_stream::wrappers::ReceiverStream;

/// How long a new connection may take to complete its TLS handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshakes in progress at once; connections beyond are closed at once,
/// so a flood of silent connections costs bounded memory and tasks.
pub const MAX_PENDING_HANDSHAKES: usize = 1024;

/// Who is on the other end of a connection.
#[derive(Clone, Debug)]
pub struct PeerInfo {
    /// The peer's address.
    pub remote: Option<SocketAddr>,
    /// Whether the connection is TLS (false only with `--insecure`).
    pub tls: bool,
    /// The identity the peer's certificate names; `None` on plaintext, or
    /// when a CA-signed certificate names no valid identity (then every
    /// call is refused).
    pub identity: Option<Identity>,
}

/// An accepted connection, TLS or (with `--insecure`) plain, and who is
/// on the other end.
pub struct ServerConn {
    /// The byte stream.
    pub io: Conn<tokio_rustls::server::TlsStream<TcpStream>>,
    /// The peer, as authorization sees it.
    pub peer: PeerInfo,
}

/// Accepts connections on `listener` for as long as the returned stream is
/// polled, terminating TLS when `security` asks for it.
pub fn incoming(
    listener: TcpListener,
    security: Security,
) -> ReceiverStream<io::Result<ServerConn>> {
    let (sender, receiver) = mpsc::channel(64);
    tokio::spawn(accept_loop(listener, security, sender));
    ReceiverStream::new(receiver)
}

async fn accept_loop(
    listener: TcpListener,
    security: Security,
    sender: mpsc::Sender<io::Result<ServerConn>>,
) {
    let pending = std::sync::Arc::new(tokio::sync::Semaphore::new(MAX_PENDING_HANDSHAKES));
    loop {
        let accepted = tokio::select! {
            accepted = listener.accept() => accepted,
            // The server stopped polling (shut down): stop accepting.
            () = sender.closed() => return,
        };
        let (stream, remote) = match accepted {
            Ok(pair) => pair,
            Err(e) => {
                // Out of file descriptors and the like: wait, then go on;
                // a gRPC server that stops accepting for good is worse.
                tracing::warn!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        match &security {
            Security::Insecure => {
                let peer = PeerInfo {
                    remote: Some(remote),
                    tls: false,
                    identity: None,
                };
                if sender
                    .send(Ok(ServerConn {
                        io: Conn::Plain(stream),
                        peer,
                    }))
                    .await
                    .is_err()
                {
                    return;
                }
            }
            Security::Tls(tls) => {
                let Ok(permit) = pending.clone().try_acquire_owned() else {
                    tracing::warn!(%remote, "{MAX_PENDING_HANDSHAKES} TLS handshakes already in progress; connection closed");
                    continue;
                };
                let acceptor = TlsAcceptor::from(tls.server_config());
                let sender = sender.clone();
                tokio::spawn(async move {
                    let conn = handshake(acceptor, stream, remote).await;
                    drop(permit);
                    if let Some(conn) = conn {
                        let _ = sender.send(Ok(conn)).await;
                    }
                });
            }
        }
    }
}

/// Completes a TLS handshake, or logs why not.
async fn handshake(
    acceptor: TlsAcceptor,
    stream: TcpStream,
    remote: SocketAddr,
) -> Option<ServerConn> {
    let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await {
        Ok(Ok(stream)) => stream,
        // A connection closed before saying anything is a TCP probe or a
        // port scan: not worth a warning every few seconds.
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
            tracing::debug!(%remote, "connection closed before a TLS handshake: {e}");
            return None;
        }
        Ok(Err(e)) => {
            tracing::warn!(%remote, "TLS handshake refused: {e}");
            return None;
        }
        Err(_) => {
            tracing::warn!(%remote, "TLS handshake not completed within {HANDSHAKE_TIMEOUT:?}; closed");
            return None;
        }
    };
    let leaf = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first());
    let identity = match leaf.map(Identity::from_certificate) {
        Some(Ok(identity)) => Some(identity),
        Some(Err(e)) => {
            tracing::warn!(%remote, "client certificate accepted by the CA but unusable: {e}; its calls will be refused");
            None
        }
        None => None,
    };
    let peer = PeerInfo {
        remote: Some(remote),
        tls: true,
        identity,
    };
    Some(ServerConn {
        io: Conn::Tls(Box::new(stream)),
        peer,
    })
}

impl tonic::transport::server::Connected for ServerConn {
    type ConnectInfo = PeerInfo;

    fn connect_info(&self) -> PeerInfo {
        self.peer.clone()
    }
}

impl AsyncRead for ServerConn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl AsyncWrite for ServerConn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
}
