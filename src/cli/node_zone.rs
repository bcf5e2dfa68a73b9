//! `switchyard node-zone`: the zone of the node a pod runs on, read from
//! the Node's `topology.kubernetes.io/zone` label and written to a file,
//! and the reading of that file (`switchyard proxy --zone-file`).
//!
//! Why: a pod cannot see its node's labels through the downward API, and
//! the admission plugin that would copy them onto the pod
//! (`PodTopologyLabelsAdmission`, Kubernetes 1.33) is alpha and off by
//! default. So the proxy's pod runs this as an init container with a
//! ServiceAccount that may `get` nodes, writing into an `emptyDir` the
//! proxy container mounts; the proxy container itself keeps no token.
//!
//! A node without the label is an error unless `--fallback-zone` is given:
//! a proxy counted in a made-up zone would make per-zone readiness
//! policies count wrong without anyone noticing, while a failed init
//! container shows the reason in `kubectl describe pod`. Clusters without
//! zones (one data centre, kind) pass `--fallback-zone default`, the zone
//! a proxy gets without `--zone`, and an INFO line says it was used.
//!
//! Owns: the flags, the fallback rule, the zone syntax (a Kubernetes label
//! value) and the file format (the zone and a newline, written by rename
//! so a reader never sees half of it). The Kubernetes read itself is
//! `switchyard_kubeconfig::node_zone`.

use super::kube::{Location, SourceSpec};
use anyhow::{Context, anyhow, bail};
use clap::Args;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use switchyard_kubeconfig::live::{connect, connect_in_cluster};
use switchyard_kubeconfig::node_zone::{ZONE_LABEL, node_zone};
use switchyard_proto::model::parse_duration;
use tracing::info;

/// Flags of `switchyard node-zone`.
#[derive(Debug, Args)]
pub struct NodeZoneArgs {
    /// The node this pod runs on (in a pod: `spec.nodeName` through the downward API).
    #[arg(long, env = "SWITCHYARD_NODE")]
    pub node: String,
    /// File to write the zone to, for `switchyard proxy --zone-file` (its directory must exist:
    /// an emptyDir both containers mount).
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// The node label that holds the zone.
    #[arg(long, default_value = ZONE_LABEL)]
    pub label: String,
    /// Zone to write when the node lacks the label (or its value is empty). Without it a
    /// missing label is an error naming the node and the label.
    #[arg(long, value_name = "ZONE", value_parser = parse_zone)]
    pub fallback_zone: Option<String>,
    /// Where the API server is: `in-cluster` (the pod's ServiceAccount) or a kubeconfig,
    /// `PATH` or `PATH#CONTEXT`.
    #[arg(long, default_value = "in-cluster", value_parser = SourceSpec::parse, value_name = "SOURCE")]
    pub kubernetes: SourceSpec,
    /// Give up when the API server has not answered within this long (the kubelet restarts a
    /// failed init container with back-off).
    #[arg(long, default_value = "10s", value_parser = parse_duration)]
    pub timeout: Duration,
}

/// A zone as switchyard accepts it: a non-empty Kubernetes label value (at
/// most 63 characters, letters, digits, `-`, `_`, `.`, beginning and ending
/// with a letter or digit), so a zone read from a node always passes.
pub(crate) fn parse_zone(text: &str) -> Result<String, String> {
    let alphanumeric_ends = text.starts_with(|c: char| c.is_ascii_alphanumeric())
        && text.ends_with(|c: char| c.is_ascii_alphanumeric());
    let allowed = text
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if text.is_empty() {
        return Err("a zone must not be empty".into());
    }
    if text.len() > 63 || !alphanumeric_ends || !allowed {
        return Err(format!(
            "{text:?} is not a zone: at most 63 letters, digits, '-', '_' or '.', \
             beginning and ending with a letter or digit (a Kubernetes label value)"
        ));
    }
    Ok(text.to_string())
}

/// Writes `zone` and a newline to `path` through a temporary file in the
/// same directory, renamed over `path`.
fn write_zone_file(path: &Path, zone: &str) -> anyhow::Result<()> {
    let mut temporary = path.as_os_str().to_owned();
    temporary.push(".tmp");
    let temporary = PathBuf::from(temporary);
    std::fs::write(&temporary, format!("{zone}\n"))
        .and_then(|()| std::fs::rename(&temporary, path))
        .with_context(|| format!("--out {}: cannot write the zone", path.display()))
}

/// The zone in a file [`run`] wrote (surrounding whitespace ignored), for
/// `--zone-file`; errors name the flag and the file.
pub(crate) fn read_zone_file(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow!(
            "--zone-file {}: cannot read it: {e} (it is written by `switchyard node-zone`, \
             an init container)",
            path.display()
        )
    })?;
    parse_zone(text.trim()).map_err(|e| anyhow!("--zone-file {}: {e}", path.display()))
}

/// Reads the node's zone and writes it to `--out`; exits 0 once written.
pub async fn run(args: NodeZoneArgs) -> anyhow::Result<ExitCode> {
    let node = args.node.trim();
    if node.is_empty() {
        bail!("--node must not be empty (in a pod: spec.nodeName through the downward API)");
    }
    if args.timeout.is_zero() {
        bail!("--timeout must be above zero");
    }
    // `anyhow!` with the message: `LiveError` already prints its source.
    let source = match &args.kubernetes.location {
        Location::InCluster => {
            connect_in_cluster("local").map_err(|e| anyhow!("--kubernetes in-cluster: {e}"))?
        }
        Location::File { path, context } => connect(path, context.as_deref())
            .await
            .map_err(|e| anyhow!("--kubernetes {}: {e}", path.display()))?,
    };
    let label = args.label.as_str();
    let found = tokio::time::timeout(args.timeout, node_zone(&source.client, node, label))
        .await
        .map_err(|_| {
            anyhow!(
                "node {node:?}: the API server did not answer within {:?}",
                args.timeout
            )
        })?
        .map_err(|e| anyhow!("{e}"))?;
    let zone = match (found, args.fallback_zone) {
        (Some(zone), _) => {
            parse_zone(&zone).map_err(|e| anyhow!("node {node:?} label {label:?}: {e}"))?
        }
        (None, Some(fallback)) => {
            info!(node, label, zone = %fallback, "the node has no zone label; using --fallback-zone");
            fallback
        }
        (None, None) => bail!(
            "node {node:?} has no label {label:?} (or it is empty): label the node, or pass \
             --fallback-zone ZONE to run on nodes without zones"
        ),
    };
    write_zone_file(&args.out, &zone)?;
    info!(node, zone = %zone, file = %args.out.display(), "zone written");
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::{parse_zone, read_zone_file, write_zone_file};

    #[test]
    fn zones_are_label_values() {
        for good in ["eu-west-1a", "a", "zone_2", "us.east.1", &"z".repeat(63)] {
            assert_eq!(parse_zone(good).as_deref(), Ok(good), "{good}");
        }
        assert_eq!(parse_zone(""), Err("a zone must not be empty".into()));
        for bad in ["-a", "a-", "a b", "a/b", "zone\n2", &"z".repeat(64)] {
            let error = parse_zone(bad).expect_err(bad);
            assert!(error.contains("is not a zone"), "{bad}: {error}");
        }
    }

    #[test]
    fn a_written_zone_reads_back_and_leaves_no_temporary_file() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let path = dir.path().join("zone");
        write_zone_file(&path, "eu-west-1a")?;
        assert_eq!(std::fs::read_to_string(&path)?, "eu-west-1a\n");
        assert_eq!(read_zone_file(&path)?, "eu-west-1a");
        write_zone_file(&path, "eu-west-1b")?;
        assert_eq!(read_zone_file(&path)?, "eu-west-1b");
        assert_eq!(std::fs::read_dir(dir.path())?.count(), 1);
        Ok(())
    }

    #[test]
    fn a_bad_zone_file_is_refused_naming_the_flag_and_the_file() -> anyhow::Result<()> {
        let dir = tempfile::tempdir()?;
        let missing = dir.path().join("absent");
        let error = read_zone_file(&missing).expect_err("no file").to_string();
        assert!(
            error.starts_with(&format!(
                "--zone-file {}: cannot read it",
                missing.display()
            )) && error.contains("switchyard node-zone"),
            "{error}"
        );
        let empty = dir.path().join("empty");
        std::fs::write(&empty, "\n")?;
        let error = read_zone_file(&empty).expect_err("empty").to_string();
        assert_eq!(
            error,
            format!("--zone-file {}: a zone must not be empty", empty.display())
        );
        Ok(())
    }
}
