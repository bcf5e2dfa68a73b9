//! Listening sockets passed from a proxy process to its replacement over a
//! Unix socket (`--handoff-socket`), so that replacing a process loses no
//! connection the kernel has queued.
//!
//! Why: without it a replacement binds its own socket on the shared
//! address (`SO_REUSEPORT`), and the kernel spreads new connections over
//! both sockets until the old one closes. Whatever sits in the old socket's
//! queue then — a handshake completed but not accepted yet, or one still
//! half open — is reset, and its client sees "connection reset" on a
//! request it never got to send (the kernel can move them instead, with
//! `net.ipv4.tcp_migrate_req = 1`, Linux 5.14 and later, but a proxy cannot
//! count on a host setting). With the handoff, the replacement accepts
//! from the very sockets the old process accepts from: when the old one
//! stops accepting and closes its descriptors, the sockets, their queues
//! included, live on in the new process. This is what nginx's binary
//! upgrade, HAProxy's `expose-fd listeners` and Envoy's hot restart do.
//!
//! The exchange, at the replacement's start: it connects to the path, the
//! serving process sends one message — the sockets' local addresses as
//! text, one per line, with the descriptors themselves attached
//! (`SCM_RIGHTS`, same order) — and closes. The replacement keeps those
//! whose address a `--listener` names, then takes the path over and
//! offers its own sockets (the taken ones among them) to the next
//! process. Nothing listens on the path, or a stale file is left there:
//! the first process of the line, which binds its own sockets.
//!
//! Anyone who can connect to the path can take the sockets: the path is
//! created mode 0600, and its directory should be the proxy's own.
//!
//! Not here: which socket serves which listener, when to accept
//! ([`super::sockets`]).

use nix::sys::socket::{
    ControlMessage, ControlMessageOwned, MsgFlags, getsockopt, recvmsg, sendmsg, sockopt,
};
use std::io::{self, IoSlice, IoSliceMut};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tokio::net::UnixListener;
use tracing::{debug, info, warn};

/// Most sockets one handoff carries (the kernel's `SCM_MAX_FD` is 253).
pub const MAX_SOCKETS: usize = 200;
/// How long a replacement waits for the serving process's answer before
/// binding its own sockets (a paused or hung process must not stop it).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(2);
/// Room for the addresses' text: one line each, at most 47 bytes plus
/// brackets and a port per IPv6 address.
const TEXT_ROOM: usize = MAX_SOCKETS * 64;

/// A listening (or at least bound) TCP socket one process hands another,
/// with the local address it is bound to.
#[derive(Debug)]
pub struct HandedSocket {
    /// The socket's local address, as the process that sent it read it.
    pub address: SocketAddr,
    /// The socket.
    pub fd: OwnedFd,
}

/// Takes the sockets the process serving at `path` offers. Empty when no
/// process answers there (no file, a stale file, nothing listening): the
/// caller binds its own. An answer that cannot be read is an error; the
/// caller should bind its own sockets then too, and say so.
pub fn take(path: &Path) -> io::Result<Vec<HandedSocket>> {
    let stream = match UnixStream::connect(path) {
        Ok(stream) => stream,
        Err(error)
            if matches!(
                error.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            debug!(path = %path.display(), %error, "no process to take listening sockets from");
            return Ok(Vec::new());
        }
        Err(error) => return Err(error),
    };
    stream.set_read_timeout(Some(ANSWER_TIMEOUT))?;
    let mut text = vec![0u8; TEXT_ROOM];
    let mut space = nix::cmsg_space!([RawFd; MAX_SOCKETS]);
    let mut iov = [IoSliceMut::new(&mut text)];
    let message = recvmsg::<()>(
        stream.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(|errno| match errno {
        nix::errno::Errno::EAGAIN => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("handoff: no answer within {ANSWER_TIMEOUT:?}"),
        ),
        other => io::Error::from(other),
    })?;
    let length = message.bytes;
    let mut fds = Vec::new();
    for cmsg in message.cmsgs().map_err(io::Error::from)? {
        if let ControlMessageOwned::ScmRights(raw) = cmsg {
            // SAFETY: the kernel has just installed these descriptors in
            // this process for this message; nothing else knows them, so
            // each is owned here exactly once.
            fds.extend(
                raw.into_iter()
                    .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
            );
        }
    }
    let truncated = message.flags.contains(MsgFlags::MSG_CTRUNC);
    let text =
        std::str::from_utf8(&text[..length]).map_err(|_| invalid("the addresses are not UTF-8"))?;
    let addresses: Vec<SocketAddr> = text
        .lines()
        .map(|line| {
            line.parse()
                .map_err(|_| invalid(&format!("not a socket address: {line:?}")))
        })
        .collect::<io::Result<_>>()?;
    if truncated || addresses.len() != fds.len() {
        return Err(invalid(&format!(
            "{} addresses for {} sockets{}",
            addresses.len(),
            fds.len(),
            if truncated { " (cut short)" } else { "" }
        )));
    }
    addresses
        .into_iter()
        .zip(fds)
        .map(|(address, fd)| {
            // A socket that is not TCP would fail here or at listen; one
            // of another address is the sender's mistake, caught by the
            // caller's address match.
            getsockopt(&fd, sockopt::SockType)
                .map_err(io::Error::from)
                .and_then(|kind| {
                    if kind == nix::sys::socket::SockType::Stream {
                        Ok(HandedSocket { address, fd })
                    } else {
                        Err(invalid(&format!("the socket for {address} is not TCP")))
                    }
                })
        })
        .collect()
}

/// Whether `fd` is listening already (or only bound).
pub fn is_listening(fd: &impl AsFd) -> bool {
    getsockopt(fd, sockopt::AcceptConn).unwrap_or(false)
}

/// Takes `path` over (removing what is there) and answers every process
/// that connects with `sockets`, until the returned task is dropped or
/// the process ends. Offering goes on while this process drains: a
/// replacement started then still gets the sockets, whose queues this
/// process no longer accepts from.
pub fn offer(path: PathBuf, sockets: Vec<HandedSocket>) -> io::Result<tokio::task::JoinHandle<()>> {
    if sockets.len() > MAX_SOCKETS {
        return Err(invalid(&format!(
            "{} listening sockets; a handoff carries at most {MAX_SOCKETS}",
            sockets.len()
        )));
    }
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(error),
    }
    let listener = UnixListener::bind(&path)?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    info!(path = %path.display(), sockets = sockets.len(), "offering the listening sockets to a replacement process");
    let text: String = sockets.iter().map(|s| format!("{}\n", s.address)).collect();
    Ok(tokio::spawn(async move {
        loop {
            match listener.accept().await {
                Ok((stream, _)) => match send(&stream, &text, &sockets) {
                    Ok(()) => info!(
                        sockets = sockets.len(),
                        "handed the listening sockets to a replacement process"
                    ),
                    Err(error) => {
                        warn!(%error, "cannot hand the listening sockets to a replacement process")
                    }
                },
                Err(error) => {
                    warn!(%error, "cannot accept on the handoff socket");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        }
    }))
}

/// One answer: the addresses and the descriptors, in one message (a Unix
/// stream socket keeps the descriptors with the first byte they came with,
/// and the text is far below its buffer, so one send carries both).
fn send(stream: &tokio::net::UnixStream, text: &str, sockets: &[HandedSocket]) -> io::Result<()> {
    let fds: Vec<RawFd> = sockets.iter().map(|s| s.fd.as_raw_fd()).collect();
    let iov = [IoSlice::new(text.as_bytes())];
    let cmsgs: &[ControlMessage] = if fds.is_empty() {
        &[]
    } else {
        &[ControlMessage::ScmRights(&fds)]
    };
    let sent = sendmsg::<()>(stream.as_raw_fd(), &iov, cmsgs, MsgFlags::empty(), None)
        .map_err(io::Error::from)?;
    if sent != text.len() {
        return Err(invalid(&format!("sent {sent} of {} bytes", text.len())));
    }
    Ok(())
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("handoff: {what}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn socket_path() -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("handoff.sock");
        (dir, path)
    }

    #[test]
    fn nothing_at_the_path_or_a_stale_file_hands_over_nothing() {
        let (_dir, path) = socket_path();
        assert!(take(&path).expect("no file").is_empty());
        // A Unix socket whose process is gone leaves its file behind.
        drop(std::os::unix::net::UnixListener::bind(&path).expect("bind"));
        assert!(path.exists());
        assert!(take(&path).expect("stale file").is_empty());
    }

    /// A listening socket of "the old process", offered at `path`: the
    /// socket, its address and the offering task.
    fn offered(path: &Path) -> (TcpListener, SocketAddr, tokio::task::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let address = listener.local_addr().expect("address");
        let copy = listener.as_fd().try_clone_to_owned().expect("dup");
        let offering =
            offer(path.to_path_buf(), vec![HandedSocket { address, fd: copy }]).expect("offer");
        (listener, address, offering)
    }

    /// What a replacement takes from `path`, taken off the runtime.
    async fn taken(path: &Path) -> Vec<HandedSocket> {
        let path = path.to_path_buf();
        tokio::task::spawn_blocking(move || take(&path))
            .await
            .expect("join")
            .expect("take")
    }

    /// The property the handoff exists for: a connection the kernel queued
    /// on the old process's socket, never accepted there, is accepted by
    /// the new process after the old one closed everything it had.
    #[tokio::test]
    async fn a_connection_queued_on_the_old_socket_survives_its_process() {
        let (_dir, path) = socket_path();
        let (old, address, offering) = offered(&path);
        assert_eq!(
            std::fs::metadata(&path).expect("path").permissions().mode() & 0o777,
            0o600
        );

        let handed = taken(&path).await;
        assert_eq!(handed.len(), 1);
        assert_eq!(handed[0].address, address);
        assert!(is_listening(&handed[0].fd));

        // Queued on the socket, not accepted by anyone yet.
        let mut client = TcpStream::connect(address).expect("connect");
        client.write_all(b"ping").expect("write");
        // The old process goes: its socket, its offer.
        drop(old);
        offering.abort();

        let new = TcpListener::from(handed.into_iter().next().expect("one").fd);
        let (mut served, _) = new.accept().expect("the queued connection");
        let mut got = [0u8; 4];
        served.read_exact(&mut got).expect("read");
        assert_eq!(&got, b"ping");
        served.write_all(b"pong").expect("answer");
        client.read_exact(&mut got).expect("the client's answer");
        assert_eq!(&got, b"pong");
    }

    #[tokio::test]
    async fn a_second_replacement_takes_the_sockets_from_the_first() {
        let (_dir, path) = socket_path();
        let (_first, address, _first_offer) = offered(&path);
        let handed = taken(&path).await;
        // The replacement takes the path over and offers what it took.
        let _second_offer = offer(path.clone(), handed).expect("offer again");
        let again = taken(&path).await;
        assert_eq!(again.len(), 1);
        assert_eq!(again[0].address, address);
    }

    #[test]
    fn a_process_that_does_not_answer_is_given_up_on() {
        let (_dir, path) = socket_path();
        // Listening, never accepting: a paused or hung process.
        let _hung = std::os::unix::net::UnixListener::bind(&path).expect("bind");
        let error = take(&path).expect_err("no answer");
        assert_eq!(error.kind(), io::ErrorKind::TimedOut, "{error}");
        assert!(error.to_string().contains("no answer within"), "{error}");
    }

    #[test]
    fn more_sockets_than_one_message_carries_are_refused() {
        let (_dir, path) = socket_path();
        let sockets = (0..=MAX_SOCKETS)
            .map(|_| {
                let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
                HandedSocket {
                    address: listener.local_addr().expect("address"),
                    fd: OwnedFd::from(listener),
                }
            })
            .collect();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let _enter = runtime.enter();
        let error = offer(path, sockets).expect_err("too many");
        assert!(error.to_string().contains("at most 200"), "{error}");
    }
}
