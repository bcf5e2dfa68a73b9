//! `switchyard apply | delete | status`: read YAML with the kubeconfig
//! crate, talk to the coordinators with [`crate::client::AdminClient`],
//! print what happened. Exit code 0 on success; otherwise one line on
//! stderr saying why and a non-zero code.

use crate::client::AdminClient;
use anyhow::bail;
use clap::{Args, ValueEnum};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use switchyard_proto::model::{ClusterStatus, ObjectName, Resource, ResourceKey, parse_duration};
use switchyard_proto::pb;
use switchyard_proxy::control::coordinators::parse_host_port;

/// Where the coordinators are.
#[derive(Debug, Args)]
pub struct Connection {
    /// Coordinator gRPC addresses, HOST:PORT,...; any one is enough, the leader is found. A HOST
    /// without a port means port 7000 (the coordinator's default --listen port).
    #[arg(
        long,
        env = "SWITCHYARD_COORDINATORS",
        value_delimiter = ',',
        required = true,
        value_parser = parse_host_port
    )]
    pub coordinators: Vec<String>,
    /// Give up on a request after this long (sooner when every coordinator refuses the connection
    /// or fails TLS: waiting does not change that).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
    /// TLS as an admin (the certificate must name an admin identity).
    #[command(flatten)]
    pub tls: super::tls::TlsArgs,
}

impl Connection {
    fn client(&self, command: &str) -> anyhow::Result<AdminClient> {
        let security = self.tls.load(command)?;
        if let Some(identity) = super::tls::identity(&security)
            && !matches!(identity, switchyard_tls::Identity::Admin(_))
        {
            bail!(
                "the certificate names {identity}; {command} needs an admin certificate (admin-NAME.pem from `switchyard certs init`)"
            );
        }
        Ok(AdminClient::new(
            self.coordinators.clone(),
            self.timeout,
            security,
        ))
    }
}

/// Flags of `switchyard apply`.
#[derive(Debug, Args)]
pub struct ApplyArgs {
    /// YAML files (multi-document) with GatewayClass, Gateway, HTTPRoute, ReferenceGrant, Namespace,
    /// Service and EndpointSlice objects. Repeatable.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    /// Wait until every route in the files is Ready (all live proxies serve its newest generation);
    /// exit non-zero if its cutover fails or --wait-timeout passes.
    #[arg(long)]
    pub wait: bool,
    /// How long --wait waits.
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub wait_timeout: Duration,
    #[command(flatten)]
    pub connection: Connection,
}

/// Flags of `switchyard delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    /// YAML files naming the objects to delete. Repeatable.
    #[arg(short = 'f', long = "filename", required = true)]
    pub files: Vec<PathBuf>,
    #[command(flatten)]
    pub connection: Connection,
}

/// Output formats of `status`.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum Output {
    /// A table for people.
    Text,
    /// JSON for scripts.
    Json,
}

/// Flags of `switchyard status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Output format.
    #[arg(short = 'o', long, value_enum, default_value = "text")]
    pub output: Output,
    /// Keep printing the status every time it changes (Ctrl-C to stop).
    #[arg(long)]
    pub watch: bool,
    /// Only this route (NAMESPACE/NAME; repeatable). The coordinator then
    /// builds the rows of these routes alone, which matters with thousands
    /// of routes and proxies.
    #[arg(long = "route", value_name = "NAMESPACE/NAME", value_parser = parse_route_name)]
    pub routes: Vec<ObjectName>,
    #[command(flatten)]
    pub connection: Connection,
}

fn parse_route_name(text: &str) -> Result<ObjectName, String> {
    match text.split_once('/') {
        Some((ns, name)) if !ns.is_empty() && !name.is_empty() && !name.contains('/') => {
            Ok(ObjectName::new(ns, name))
        }
        _ => Err(format!("{text:?} is not NAMESPACE/NAME")),
    }
}

fn read_files(files: &[PathBuf]) -> anyhow::Result<Vec<Resource>> {
    let mut all = Vec::new();
    for file in files {
        let resources =
            switchyard_kubeconfig::parse_file(file).map_err(|e| anyhow::anyhow!("{e}"))?;
        all.extend(resources);
    }
    if all.is_empty() {
        bail!("no objects found in {}", display_files(files));
    }
    Ok(all)
}

fn display_files(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|f| f.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// `switchyard apply`.
pub async fn apply(args: ApplyArgs) -> anyhow::Result<ExitCode> {
    let mut client = args.connection.client("apply")?;
    let resources = read_files(&args.files)?;
    let resources_json = serde_json::to_vec(&resources)?;
    let reply = client
        .call(true, |mut c| {
            let request = pb::ApplyRequest {
                resources_json: resources_json.clone(),
            };
            async move { c.apply(request).await }
        })
        .await?;
    for line in &reply.changes {
        println!("{line}");
    }
    if !args.wait {
        return Ok(ExitCode::SUCCESS);
    }
    let targets: BTreeMap<ObjectName, u64> = reply.routes.iter().map(Into::into).collect();
    client
        .wait_ready(&targets, reply.log_index, args.wait_timeout, |line| {
            eprintln!("waiting: {line}")
        })
        .await?;
    for (name, generation) in &targets {
        println!("route {name} ready at generation {generation}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `switchyard delete`.
pub async fn delete(args: DeleteArgs) -> anyhow::Result<ExitCode> {
    let mut keys: Vec<ResourceKey> = Vec::new();
    for file in &args.files {
        keys.extend(
            switchyard_kubeconfig::parse_file_keys(file).map_err(|e| anyhow::anyhow!("{e}"))?,
        );
    }
    if keys.is_empty() {
        bail!("no objects found in {}", display_files(&args.files));
    }
    let keys_json = serde_json::to_vec(&keys)?;
    let reply = args
        .connection
        .client("delete")?
        .call(true, |mut c| {
            let request = pb::DeleteRequest {
                keys_json: keys_json.clone(),
            };
            async move { c.delete(request).await }
        })
        .await?;
    for line in &reply.changes {
        println!("{line}");
    }
    Ok(ExitCode::SUCCESS)
}

/// `switchyard status`.
pub async fn status(args: StatusArgs) -> anyhow::Result<ExitCode> {
    let mut client = args.connection.client("status")?;
    let only: Option<std::collections::BTreeSet<ObjectName>> =
        (!args.routes.is_empty()).then(|| args.routes.iter().cloned().collect());
    let mut last = None;
    loop {
        let status = client.fetch_status_of(only.as_ref()).await?;
        if last.as_ref() != Some(&status) {
            match args.output {
                Output::Json => println!("{}", serde_json::to_string(&status)?),
                Output::Text => print!("{}", render(&status)),
            }
            last = Some(status);
        }
        if !args.watch {
            return Ok(ExitCode::SUCCESS);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

fn render(s: &ClusterStatus) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let leader = s.leader.map_or("none".to_string(), |l| l.to_string());
    let _ = writeln!(
        out,
        "leader: {leader}  term: {}  applied index: {}  (answered by {})",
        s.term, s.applied_index, s.answered_by
    );
    let members: Vec<String> = s
        .members
        .iter()
        .map(|(id, a)| format!("{id}={a}"))
        .collect();
    let _ = writeln!(out, "coordinators: {}", members.join(", "));
    if let Some(stale) = &s.stale {
        let _ = writeln!(out, "warning: {stale}");
    }
    let _ = writeln!(out, "routes:");
    if s.routes.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    let dash = |g: Option<u64>| g.map_or("-".to_string(), |g| g.to_string());
    for r in &s.routes {
        let _ = writeln!(
            out,
            "  {}/{}  active {}  pending {}  {}{}{}",
            r.namespace,
            r.name,
            dash(r.active_generation),
            dash(r.pending_generation),
            if r.ready { "Ready" } else { "NotReady" },
            r.evidence
                .as_ref()
                .map(|e| format!("  evidence: {e}"))
                .unwrap_or_default(),
            r.last_failure
                .as_ref()
                .map(|e| format!("  last failure: {e}"))
                .unwrap_or_default(),
        );
        if let Some(applied) = &r.applied {
            let _ = writeln!(out, "      {applied}");
        }
    }
    let _ = writeln!(out, "proxies:");
    if s.proxies.is_empty() {
        let _ = writeln!(out, "  (none)");
    }
    for p in &s.proxies {
        let _ = writeln!(
            out,
            "  {}  zone {}  {}  admin {}",
            p.id,
            p.zone,
            if p.live { "live" } else { "silent" },
            p.admin_address
        );
        for socket in p.listeners.iter().flatten() {
            let serves = socket
                .gateway
                .as_ref()
                .map_or("every Gateway".to_string(), |g| format!("Gateway {g}"));
            let state = match (&socket.error, socket.bound) {
                (_, true) => "bound".to_string(),
                (Some(error), false) => format!("NOT BOUND: {error}"),
                (None, false) => "not bound".to_string(),
            };
            let _ = writeln!(
                out,
                "    listener port {} ({serves}) on {}: {state}",
                socket.port, socket.address
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::render;
    use switchyard_proto::model::{ClusterStatus, ListenerBinding, ObjectName, ProxyStatus};

    #[test]
    fn the_text_status_shows_each_proxys_listener_sockets_and_why_one_is_not_bound() {
        let status = ClusterStatus {
            proxies: vec![ProxyStatus {
                id: "p1".into(),
                zone: "a".into(),
                admin_address: "127.0.0.1:9901".into(),
                live: true,
                listeners: Some(vec![
                    ListenerBinding {
                        gateway: None,
                        port: 80,
                        address: "0.0.0.0:8080".into(),
                        bound: true,
                        error: None,
                    },
                    ListenerBinding {
                        gateway: Some(ObjectName::new("shop", "gw")),
                        port: 443,
                        address: "0.0.0.0:8443".into(),
                        bound: false,
                        error: Some("Address in use (os error 98)".into()),
                    },
                ]),
            }],
            ..ClusterStatus::default()
        };
        let text = render(&status);
        assert!(
            text.contains("    listener port 80 (every Gateway) on 0.0.0.0:8080: bound\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "    listener port 443 (Gateway shop/gw) on 0.0.0.0:8443: NOT BOUND: Address in use (os error 98)\n"
            ),
            "{text}"
        );
    }
}
