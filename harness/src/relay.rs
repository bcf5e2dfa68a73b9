//! A TCP relay the harness owns, put between processes to cut links:
//! refuse or drop connections from chosen source addresses (or all), delay
//! traffic, or let only one direction through. Connections already open
//! are cut the moment a rule starts to apply to them, as a real partition
//! would.
//!
//! Which process a connection comes from is told by its source IP: the
//! harness gives each coordinator its own loopback address (127.0.0.N),
//! and coordinators send Raft traffic from their listen address.

use std::collections::HashSet;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

/// The relay's rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rules {
    /// Refuse and cut everything.
    pub block_all: bool,
    /// Refuse and cut connections from these source IPs.
    pub blocked_sources: HashSet<IpAddr>,
    /// Added to every chunk forwarded, each way.
    pub delay: Duration,
    /// Forward only client-to-target bytes; answers are dropped.
    pub one_way: bool,
}

impl Rules {
    fn blocks(&self, source: IpAddr) -> bool {
        self.block_all || self.blocked_sources.contains(&source)
    }
}

/// A running relay; dropping it stops it and cuts every connection.
pub struct Relay {
    /// Where to connect to reach the target through the relay.
    pub address: SocketAddr,
    rules: Arc<Mutex<Rules>>,
    changes: watch::Sender<u64>,
    task: JoinHandle<()>,
}

impl Relay {
    /// Listens on `listen` (port 0 for any) and forwards to `target`.
    /// Must be called inside a Tokio runtime.
    pub async fn start(listen: SocketAddr, target: SocketAddr) -> io::Result<Relay> {
        let listener = TcpListener::bind(listen).await?;
        let address = listener.local_addr()?;
        let rules = Arc::new(Mutex::new(Rules::default()));
        let (changes, _) = watch::channel(0);
        let task = tokio::spawn(accept_loop(
            listener,
            target,
            rules.clone(),
            changes.clone(),
        ));
        Ok(Relay {
            address,
            rules,
            changes,
            task,
        })
    }

    /// Changes the rules; connections they now block are cut.
    pub fn set(&self, change: impl FnOnce(&mut Rules)) {
        if let Ok(mut rules) = self.rules.lock() {
            change(&mut rules);
        }
        self.changes.send_modify(|v| *v += 1);
    }

    /// Cuts and refuses connections from `source`.
    pub fn block_source(&self, source: IpAddr) {
        self.set(|r| {
            r.blocked_sources.insert(source);
        });
    }

    /// Cuts and refuses everything.
    pub fn block_all(&self) {
        self.set(|r| r.block_all = true);
    }

    /// Back to forwarding everything, without delay.
    pub fn heal(&self) {
        self.set(|r| *r = Rules::default());
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
        // Tell open connections to stop.
        self.set(|r| r.block_all = true);
    }
}

async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    rules: Arc<Mutex<Rules>>,
    changes: watch::Sender<u64>,
) {
    loop {
        let Ok((client, peer)) = listener.accept().await else {
            continue;
        };
        let current = rules.lock().map(|r| r.clone()).unwrap_or_default();
        if current.blocks(peer.ip()) {
            drop(client);
            continue;
        }
        let rules = rules.clone();
        let mut changed = changes.subscribe();
        tokio::spawn(async move {
            let Ok(upstream) = TcpStream::connect(target).await else {
                return;
            };
            let (client_read, client_write) = client.into_split();
            let (up_read, up_write) = upstream.into_split();
            let forward = pump(client_read, up_write, rules.clone(), false);
            let backward = pump(up_read, client_write, rules.clone(), true);
            let cut = async {
                loop {
                    if changed.changed().await.is_err() {
                        return;
                    }
                    let blocked = rules.lock().map(|r| r.blocks(peer.ip())).unwrap_or(true);
                    if blocked {
                        return;
                    }
                }
            };
            tokio::select! {
                _ = forward => {}
                _ = backward => {}
                _ = cut => {}
            }
        });
    }
}

async fn pump(
    mut from: impl AsyncReadExt + Unpin,
    mut to: impl AsyncWriteExt + Unpin,
    rules: Arc<Mutex<Rules>>,
    answers: bool,
) {
    let mut buffer = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let current = rules.lock().map(|r| r.clone()).unwrap_or_default();
        if !current.delay.is_zero() {
            tokio::time::sleep(current.delay).await;
        }
        if answers && current.one_way {
            continue;
        }
        if to.write_all(&buffer[..n]).await.is_err() {
            return;
        }
    }
}
