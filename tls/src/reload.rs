//! The live TLS configuration of a process, re-read when its files change.
//!
//! Owns: the current server and client configurations and the poll that
//! replaces them. Every new connection (accepted or opened) takes the
//! configuration current at that moment; established connections keep
//! theirs. A change that does not load (a half-written file, a key that
//! does not match) is logged and the previous configuration stays: a
//! rotation mistake must not take a running fleet down. A certificate
//! that would change the process's identity is refused the same way.

use crate::files::{FileBytes, Material, TlsError, TlsFiles};
use crate::identity::Identity;
use arc_swap::ArcSwap;
use rustls::{ClientConfig, ServerConfig};
use std::sync::Arc;
use std::time::Duration;

/// A process's TLS material, reloadable.
pub struct Tls {
    files: TlsFiles,
    identity: Identity,
    current: ArcSwap<Loaded>,
}

struct Loaded {
    bytes: FileBytes,
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for Tls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls")
            .field("identity", &self.identity)
            .field("files", &self.files)
            .finish_non_exhaustive()
    }
}

/// What [`Tls::reload`] did.
#[derive(Debug, PartialEq, Eq)]
pub enum ReloadOutcome {
    /// The files are as last loaded.
    Unchanged,
    /// New files loaded; new connections use them.
    Changed,
}

impl Tls {
    /// Loads the files; any problem is an error naming the file.
    pub fn load(files: TlsFiles) -> Result<Arc<Tls>, TlsError> {
        let bytes = files.read()?;
        let material = files.parse(&bytes)?;
        let identity = material.identity.clone();
        let loaded = build(&files, bytes, &material)?;
        Ok(Arc::new(Tls {
            files,
            identity,
            current: ArcSwap::from_pointee(loaded),
        }))
    }

    /// Who this process is, by its certificate.
    pub fn identity(&self) -> &Identity {
        &self.identity
    }

    /// The configuration for the next accepted connection.
    pub fn server_config(&self) -> Arc<ServerConfig> {
        self.current.load().server.clone()
    }

    /// The configuration for the next opened connection.
    pub fn client_config(&self) -> Arc<ClientConfig> {
        self.current.load().client.clone()
    }

    /// Re-reads the files and, when their bytes changed and they load,
    /// switches to them. On error the previous configuration stays.
    pub fn reload(&self) -> Result<ReloadOutcome, TlsError> {
        let bytes = self.files.read()?;
        if bytes == self.current.load().bytes {
            return Ok(ReloadOutcome::Unchanged);
        }
        let material = self.files.parse(&bytes)?;
        if material.identity != self.identity {
            return Err(TlsError::Content {
                what: "certificate",
                path: self.files.cert.clone(),
                why: format!(
                    "names {} but this process runs as {}; restart to change identity",
                    material.identity, self.identity
                ),
            });
        }
        let loaded = build(&self.files, bytes, &material)?;
        self.current.store(Arc::new(loaded));
        Ok(ReloadOutcome::Changed)
    }

    /// Polls the files every `interval` for as long as the process runs,
    /// logging each reload and each failed one. Polling (rather than file
    /// notifications) also sees Kubernetes' Secret volume updates, which
    /// swap a symlink rather than write the files.
    pub fn spawn_reloader(self: &Arc<Self>, interval: Duration) -> tokio::task::JoinHandle<()> {
        let tls = self.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(interval);
            ticker.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            ticker.tick().await;
            loop {
                ticker.tick().await;
                match tls.reload() {
                    Ok(ReloadOutcome::Unchanged) => {}
                    Ok(ReloadOutcome::Changed) => tracing::info!(
                        cert = %tls.files.cert.display(),
                        "TLS files changed on disk; new connections use the new certificate"
                    ),
                    Err(e) => tracing::warn!(
                        "TLS files changed but were not loaded, keeping the previous ones: {e}"
                    ),
                }
            }
        })
    }
}

fn build(files: &TlsFiles, bytes: FileBytes, material: &Material) -> Result<Loaded, TlsError> {
    Ok(Loaded {
        bytes,
        server: Arc::new(files.server_config(material)?),
        client: Arc::new(files.client_config(material)?),
    })
}
