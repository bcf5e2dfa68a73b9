//! A whole switchyard deployment as child processes on loopback: three
//! coordinators, proxies in several zones, and backend processes. Built on
//! the chaos harness's [`Process`], so every child is stopped by PID and
//! killed when the fleet is dropped — nothing is left running.
//!
//! With [`FleetOptions::tls`] (the default) the fleet runs as production
//! does: a throwaway CA in the fleet's temporary directory, a certificate
//! per coordinator, proxy and the admin client, mutual TLS everywhere.

use crate::client::AdminClient;
use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use switchyard_harness::{Process, ProcessSpec, Relay, free_port};
use switchyard_proto::model::ObjectName;
use switchyard_proto::pb;
use switchyard_tls::certs::{Authority, Validity, file_stem};
use switchyard_tls::{Identity, Security, Tls, TlsFiles};

/// What to start.
#[derive(Debug, Clone)]
pub struct FleetOptions {
    /// The `switchyard` binary.
    pub binary: PathBuf,
    /// Proxies as `(id, zone)`.
    pub proxies: Vec<(String, String)>,
    /// Extra flags for every coordinator.
    pub coordinator_flags: Vec<String>,
    /// Extra flags for every proxy.
    pub proxy_flags: Vec<String>,
    /// Put a [`Relay`] in front of each coordinator for Raft traffic, and
    /// give each coordinator its own loopback address, so tests can cut
    /// one off ([`Fleet::isolate`]). Proxies and clients still connect
    /// directly.
    pub partitionable: bool,
    /// Mutual TLS with a throwaway CA (else every process gets
    /// `--insecure`).
    pub tls: bool,
    /// Extra environment per coordinator (index i is coordinator i+1; a
    /// missing entry means none), e.g. libfaketime's for clock tests.
    pub coordinator_env: Vec<Vec<(String, String)>>,
    /// Extra environment for every proxy.
    pub proxy_env: Vec<(String, String)>,
    /// Coordinators already running (gRPC addresses, plaintext) to start
    /// the proxies against, instead of starting three: for running the
    /// acceptance sequence on a cluster someone else started (the load
    /// tool's, with thousands of routes). Needs `tls: false`; the fleet
    /// then cannot kill or restart coordinators.
    pub external_coordinators: Option<Vec<String>>,
}

impl FleetOptions {
    /// Three proxies in zones a, b, c, with timings shrunk for loopback.
    pub fn three_zones(binary: PathBuf) -> Self {
        FleetOptions {
            binary,
            proxies: ["a", "b", "c"]
                .iter()
                .map(|z| (format!("proxy-{z}"), format!("zone-{z}")))
                .collect(),
            coordinator_flags: [
                "--heartbeat-interval",
                "100ms",
                "--election-timeout-min",
                "300ms",
                "--election-timeout-max",
                "600ms",
                "--rpc-timeout",
                "500ms",
                "--proxy-lease-ttl",
                "2s",
                "--proxy-heartbeat-interval",
                "300ms",
            ]
            .map(String::from)
            .to_vec(),
            proxy_flags: [
                "--health-interval",
                "200ms",
                "--health-timeout",
                "500ms",
                "--rpc-timeout",
                "500ms",
            ]
            .map(String::from)
            .to_vec(),
            partitionable: false,
            tls: true,
            coordinator_env: Vec::new(),
            proxy_env: Vec::new(),
            external_coordinators: None,
        }
    }
}

/// The running deployment.
pub struct Fleet {
    /// Coordinators; index i is id i+1.
    pub coordinators: Vec<Process>,
    /// Their gRPC addresses.
    pub coordinator_addresses: Vec<String>,
    /// Proxies.
    pub proxies: Vec<Process>,
    /// Backends by name.
    pub backends: BTreeMap<String, Process>,
    /// Relays in front of each coordinator's Raft traffic (partitionable
    /// fleets only).
    pub relays: Vec<Relay>,
    options: FleetOptions,
    dir: tempfile::TempDir,
    /// The throwaway CA (TLS fleets only).
    authority: Option<Authority>,
    /// How the fleet's own admin client connects.
    admin_security: Security,
}

/// The identity the fleet's admin client uses.
const ADMIN: &str = "fleet";

/// Where `identity`'s certificate lives in a TLS fleet's directory.
fn tls_files(dir: &std::path::Path, identity: &Identity) -> TlsFiles {
    let stem = file_stem(identity);
    TlsFiles {
        ca: dir.join("ca.pem"),
        cert: dir.join(format!("{stem}.pem")),
        key: dir.join(format!("{stem}-key.pem")),
    }
}

fn spec(name: String, binary: &PathBuf, args: Vec<String>) -> ProcessSpec {
    let mut spec = ProcessSpec::new(name, binary, args);
    spec.env = vec![("RUST_LOG".into(), "info".into())];
    spec
}

impl Fleet {
    /// Starts three coordinators, then the proxies. Blocking (process
    /// start-up waits for `LISTENING` lines).
    pub fn start(options: FleetOptions) -> anyhow::Result<Fleet> {
        let dir = tempfile::tempdir().context("cannot create a temporary directory")?;
        let (authority, admin_security) = if options.tls {
            let authority = Authority::generate("switchyard throwaway CA", Validity::days(1))?;
            std::fs::write(dir.path().join("ca.pem"), authority.cert_pem())
                .context("cannot write the CA")?;
            let admin = Identity::Admin(ADMIN.into());
            authority
                .issue(&admin, Validity::days(1))?
                .write(dir.path(), &file_stem(&admin))?;
            let tls = Tls::load(tls_files(dir.path(), &admin))?;
            (Some(authority), Security::Tls(tls))
        } else {
            (None, Security::Insecure)
        };
        let mut fleet = Fleet {
            coordinators: Vec::new(),
            coordinator_addresses: Vec::new(),
            proxies: Vec::new(),
            backends: BTreeMap::new(),
            relays: Vec::new(),
            options,
            dir,
            authority,
            admin_security,
        };
        let options = fleet.options.clone();
        if let Some(external) = &options.external_coordinators {
            if options.tls {
                bail!("a fleet on external coordinators runs without TLS (tls: false)");
            }
            fleet.coordinator_addresses = external.clone();
            for (id, zone) in options.proxies.clone() {
                let proxy = fleet.start_proxy(&id, &zone)?;
                fleet.proxies.push(proxy);
            }
            return Ok(fleet);
        }
        let ip = |i: usize| {
            if options.partitionable {
                format!("127.0.0.{}", 11 + i)
            } else {
                "127.0.0.1".to_string()
            }
        };
        let addresses: Vec<String> = (0..3)
            .map(|i| format!("{}:{}", ip(i), free_port()))
            .collect();
        let mut relays = Vec::new();
        if options.partitionable {
            let runtime = tokio::runtime::Handle::current();
            for address in &addresses {
                let target: SocketAddr = address.parse().context("coordinator address")?;
                let listen: SocketAddr = "127.0.0.1:0".parse().context("relay address")?;
                relays.push(runtime.block_on(Relay::start(listen, target))?);
            }
        }
        let peer_addresses: Vec<String> = if options.partitionable {
            relays.iter().map(|r| r.address.to_string()).collect()
        } else {
            addresses.clone()
        };
        let peers = peer_addresses
            .iter()
            .enumerate()
            .map(|(i, a)| format!("{}={a}", i + 1))
            .collect::<Vec<_>>()
            .join(",");
        fleet.relays = relays;
        fleet.coordinator_addresses = addresses.clone();
        for (i, address) in addresses.iter().enumerate() {
            let data = fleet.dir.path().join(format!("coordinator-{}", i + 1));
            let mut args: Vec<String> = vec![
                "coordinator".into(),
                "--id".into(),
                (i + 1).to_string(),
                "--listen".into(),
                address.clone(),
                "--peers".into(),
                peers.clone(),
                "--data-dir".into(),
                data.to_string_lossy().into_owned(),
            ];
            args.extend(options.coordinator_flags.iter().cloned());
            args.extend(fleet.tls_flags(&Identity::Coordinator(i as u64 + 1))?);
            let mut spec = spec(format!("coordinator-{}", i + 1), &options.binary, args);
            spec.env
                .extend(options.coordinator_env.get(i).cloned().unwrap_or_default());
            let process = Process::start(spec)?;
            fleet.coordinators.push(process);
        }
        for (id, zone) in fleet.options.proxies.clone() {
            let proxy = fleet.start_proxy(&id, &zone)?;
            fleet.proxies.push(proxy);
        }
        Ok(fleet)
    }

    fn start_proxy(&self, id: &str, zone: &str) -> anyhow::Result<Process> {
        self.start_proxy_on(id, zone, "127.0.0.1:0")
    }

    /// Starts a proxy `id` in `zone` with the fleet's proxy flags and
    /// certificates, its Gateway listener on `listen` (`HOST:PORT`), and
    /// returns it without adding it to [`Fleet::proxies`]. Two proxies may
    /// share `listen`: the socket is bound with `SO_REUSEPORT`, which is
    /// how a replacement process takes over an address (see
    /// `tests/proxy_process_replacement.rs`).
    pub fn start_proxy_on(&self, id: &str, zone: &str, listen: &str) -> anyhow::Result<Process> {
        let coordinators = self.coordinator_addresses.join(",");
        let mut args: Vec<String> = vec![
            "proxy".into(),
            "--id".into(),
            id.into(),
            "--zone".into(),
            zone.into(),
            "--coordinators".into(),
            coordinators,
            "--listener".into(),
            format!("{}={listen}", super::manifests::GATEWAY_PORT),
            "--admin-listen".into(),
            "127.0.0.1:0".into(),
        ];
        args.extend(self.options.proxy_flags.iter().cloned());
        args.extend(self.tls_flags(&Identity::Proxy(id.into()))?);
        let mut spec = spec(id.to_string(), &self.options.binary, args);
        spec.env.extend(self.options.proxy_env.iter().cloned());
        Process::start(spec)
    }

    /// The TLS flags for a process running as `identity` (issuing its
    /// certificate on first use), or `--insecure`.
    fn tls_flags(&self, identity: &Identity) -> anyhow::Result<Vec<String>> {
        let Some(authority) = &self.authority else {
            return Ok(vec!["--insecure".into()]);
        };
        let files = tls_files(self.dir.path(), identity);
        if !files.cert.exists() {
            authority
                .issue(identity, Validity::days(1))?
                .write(self.dir.path(), &file_stem(identity))?;
        }
        let path = |p: &PathBuf| p.to_string_lossy().into_owned();
        Ok(vec![
            "--ca".into(),
            path(&files.ca),
            "--cert".into(),
            path(&files.cert),
            "--key".into(),
            path(&files.key),
            // Rotation tests should not wait the production 5 s.
            "--tls-reload-interval".into(),
            "500ms".into(),
        ])
    }

    /// Issues every coordinator and proxy a new key and certificate from
    /// the same CA, replacing the files in place (each written beside and
    /// renamed over, as a Secret update would). Returns the new
    /// certificates' PEM by identity.
    pub fn rotate_certificates(&self) -> anyhow::Result<BTreeMap<String, String>> {
        let Some(authority) = &self.authority else {
            bail!("this fleet runs without TLS");
        };
        let mut identities: Vec<Identity> = (1..=self.coordinators.len() as u64)
            .map(Identity::Coordinator)
            .collect();
        identities.extend(
            self.options
                .proxies
                .iter()
                .map(|(id, _)| Identity::Proxy(id.clone())),
        );
        let mut issued = BTreeMap::new();
        for identity in identities {
            let new = authority.issue(&identity, Validity::days(1))?;
            new.write(self.dir.path(), &file_stem(&identity))?;
            issued.insert(file_stem(&identity), new.cert_pem);
        }
        Ok(issued)
    }

    /// The throwaway CA (TLS fleets), for tests that issue certificates of
    /// their own.
    pub fn authority(&self) -> Option<&Authority> {
        self.authority.as_ref()
    }

    /// How the fleet's admin client connects.
    pub fn admin_security(&self) -> &Security {
        &self.admin_security
    }

    /// An admin client for every coordinator.
    pub fn client(&self) -> AdminClient {
        AdminClient::new(
            self.coordinator_addresses.clone(),
            Duration::from_secs(15),
            self.admin_security.clone(),
        )
    }

    /// `http://HOST:PORT` of each proxy's Gateway listener.
    pub fn proxy_urls(&self) -> anyhow::Result<Vec<String>> {
        let port = super::manifests::GATEWAY_PORT.to_string();
        self.proxies
            .iter()
            .map(|p| p.address(&port).map(|a| format!("http://{a}")))
            .collect()
    }

    /// Starts backend `name` with extra flags (e.g. `--unhealthy-for 2s`).
    pub fn start_backend(&mut self, name: &str, extra: &[&str]) -> anyhow::Result<SocketAddr> {
        let mut args: Vec<String> = vec!["backend".into(), "--name".into(), name.into()];
        args.extend(extra.iter().map(|s| s.to_string()));
        let process = Process::start(spec(format!("backend-{name}"), &self.options.binary, args))?;
        let address: SocketAddr = process
            .address("http")?
            .parse()
            .context("backend address")?;
        self.backends.insert(name.to_string(), process);
        Ok(address)
    }

    /// Stops backend `name` the way a pod is deleted: SIGTERM, it finishes
    /// what it is answering and exits.
    pub fn stop_backend(&mut self, name: &str) {
        if let Some(mut backend) = self.backends.remove(name) {
            backend.terminate(Duration::from_secs(6));
        }
    }

    /// Index of the current leader, as the coordinators say.
    pub async fn leader(&self) -> Option<usize> {
        let status = self
            .client()
            .fetch_status_of(Some(&std::collections::BTreeSet::new()))
            .await
            .ok()?;
        status.leader.map(|l| (l - 1) as usize)
    }

    /// Waits for a leader.
    pub async fn wait_leader(&self, timeout: Duration) -> anyhow::Result<usize> {
        let deadline = tokio::time::Instant::now() + timeout;
        while tokio::time::Instant::now() < deadline {
            if let Some(l) = self.leader().await {
                return Ok(l);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!("no coordinator became leader within {timeout:?}")
    }

    /// Waits until the leader counts every proxy of this fleet live. A
    /// proxy whose first registration met an election retries after a
    /// back-off; until it is registered, a policy `all` cutover waits only
    /// for the others, and a scenario that pauses or kills it would test
    /// nothing.
    pub async fn wait_proxies_live(&self, timeout: Duration) -> anyhow::Result<()> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut live = 0;
        while tokio::time::Instant::now() < deadline {
            if let Ok(status) = self
                .client()
                .fetch_status_of(Some(&std::collections::BTreeSet::new()))
                .await
            {
                // Only this fleet's: other proxies (a load tool's agents)
                // may share the coordinators.
                live = status
                    .proxies
                    .iter()
                    .filter(|p| p.live && self.options.proxies.iter().any(|(id, _)| *id == p.id))
                    .count();
                if live == self.proxies.len() {
                    return Ok(());
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        bail!(
            "{live} of {} proxies live after {timeout:?}",
            self.proxies.len()
        )
    }

    /// Applies YAML text; returns each route's new generation and the log
    /// index of the apply (what `wait_ready` takes).
    pub async fn apply(&self, yaml: &str) -> anyhow::Result<(BTreeMap<ObjectName, u64>, u64)> {
        let resources = switchyard_kubeconfig::parse_documents("demo.yaml", yaml)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        let resources_json = serde_json::to_vec(&resources)?;
        let reply = self
            .client()
            .call(true, |mut c| {
                let request = pb::ApplyRequest {
                    resources_json: resources_json.clone(),
                };
                async move { c.apply(request).await }
            })
            .await?;
        let routes = reply.routes.iter().map(Into::into).collect();
        Ok((routes, reply.log_index))
    }

    /// Cuts coordinator `index` off from the other coordinators, both ways
    /// (partitionable fleets only). Proxies and clients still reach it.
    pub fn isolate(&self, index: usize) -> anyhow::Result<()> {
        let ip: std::net::IpAddr = self.coordinator_addresses[index]
            .parse::<SocketAddr>()
            .context("coordinator address")?
            .ip();
        anyhow::ensure!(
            !self.relays.is_empty(),
            "this fleet was not started partitionable"
        );
        for (i, relay) in self.relays.iter().enumerate() {
            if i == index {
                relay.block_all();
            } else {
                relay.block_source(ip);
            }
        }
        Ok(())
    }

    /// Removes every cut.
    pub fn heal(&self) {
        for relay in &self.relays {
            relay.heal();
        }
    }

    /// Every WARN or ERROR line any process of the fleet has logged so far
    /// (a clean run logs none).
    pub fn warnings(&self) -> Vec<String> {
        self.coordinators
            .iter()
            .chain(&self.proxies)
            .chain(self.backends.values())
            .flat_map(Process::warnings)
            .collect()
    }

    /// Every process's log, for a failure report.
    pub fn logs(&self) -> String {
        self.coordinators
            .iter()
            .chain(&self.proxies)
            .chain(self.backends.values())
            .map(|p| format!("===== {} =====\n{}", p.name(), p.log_text()))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Where data dirs live.
    pub fn dir(&self) -> &std::path::Path {
        self.dir.path()
    }
}
