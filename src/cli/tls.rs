//! The TLS flags every gRPC speaker shares (`--ca`, `--cert`, `--key`,
//! `--insecure`, `--tls-reload-interval`) and `switchyard certs init`.
//!
//! Owns: secure by default. Without certificate files a process refuses to
//! start and says both ways out; `--insecure` must be asked for and is
//! warned about at start-up.

use clap::{Args, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;
use switchyard_proto::model::parse_duration;
use switchyard_tls::certs::{Authority, Validity, file_stem, init_dir};
use switchyard_tls::{Identity, Security, Tls, TlsFiles};

/// How this process authenticates itself and its peers.
#[derive(Debug, Clone, Args)]
pub struct TlsArgs {
    /// PEM bundle of the CA(s) that sign switchyard certificates.
    #[arg(long, env = "SWITCHYARD_CA", value_name = "FILE")]
    pub ca: Option<PathBuf>,
    /// PEM certificate of this process, naming its identity in a URI SAN (spiffe://switchyard/ROLE/NAME).
    #[arg(long, env = "SWITCHYARD_CERT", value_name = "FILE")]
    pub cert: Option<PathBuf>,
    /// PEM private key of --cert.
    #[arg(long, env = "SWITCHYARD_KEY", value_name = "FILE")]
    pub key: Option<PathBuf>,
    /// Run without TLS: anyone who can reach the port can move traffic. For local experiments only.
    #[arg(long, conflicts_with_all = ["ca", "cert", "key"])]
    pub insecure: bool,
    /// How often the certificate files are re-read; changed files apply to new connections.
    #[arg(long, default_value = "5s", value_parser = parse_duration)]
    pub tls_reload_interval: Duration,
}

impl TlsArgs {
    /// The security the flags ask for, with the reload poll started. `who`
    /// names the process in messages (`coordinator`, `proxy`, `apply`...).
    pub fn security(&self, who: &str) -> anyhow::Result<Security> {
        let security = self.load(who)?;
        if let Security::Tls(tls) = &security {
            tracing::info!(identity = %tls.identity(), "{who}: mutual TLS on");
            tls.spawn_reloader(self.tls_reload_interval);
        }
        Ok(security)
    }

    /// The security the flags ask for, without the reload poll (one-shot
    /// commands).
    pub fn load(&self, who: &str) -> anyhow::Result<Security> {
        if self.insecure {
            tracing::warn!(
                "{who}: --insecure: gRPC runs without TLS or client certificates; anyone who can reach it can apply routes or pose as a proxy"
            );
            return Ok(Security::Insecure);
        }
        let (Some(ca), Some(cert), Some(key)) = (&self.ca, &self.cert, &self.key) else {
            let missing: Vec<&str> = [
                ("--ca", self.ca.is_none()),
                ("--cert", self.cert.is_none()),
                ("--key", self.key.is_none()),
            ]
            .into_iter()
            .filter_map(|(flag, missing)| missing.then_some(flag))
            .collect();
            anyhow::bail!(
                "{who} needs TLS certificates (missing {}): pass --ca, --cert and --key (or SWITCHYARD_CA, SWITCHYARD_CERT, SWITCHYARD_KEY); `switchyard certs init --dir DIR` creates a set for a local cluster. To run without TLS anyway, pass --insecure.",
                missing.join(", ")
            );
        };
        let tls = Tls::load(TlsFiles {
            ca: ca.clone(),
            cert: cert.clone(),
            key: key.clone(),
        })?;
        // Said once at debug: one-shot commands (apply, status) should
        // print their answer, not this; servers log it in `security`.
        tracing::debug!(identity = %tls.identity(), "{who}: mutual TLS on");
        Ok(Security::Tls(tls))
    }
}

/// The identity `security` carries, if it is TLS.
pub fn identity(security: &Security) -> Option<&Identity> {
    match security {
        Security::Tls(tls) => Some(Tls::identity(tls)),
        Security::Insecure => None,
    }
}

/// Refuses to start when the certificate is for another role or id than
/// the process is told to be: better now than a PERMISSION_DENIED on
/// every call later.
pub fn check_identity(security: &Security, expected: &Identity) -> anyhow::Result<()> {
    match identity(security) {
        Some(actual) if actual != expected => anyhow::bail!(
            "the certificate names {actual}, but this process runs as {expected}; use the certificate issued for {expected}"
        ),
        _ => Ok(()),
    }
}

/// `switchyard certs ...`.
#[derive(Debug, Args)]
pub struct CertsArgs {
    /// What to do.
    #[command(subcommand)]
    pub command: CertsCommand,
}

/// Certificate subcommands.
#[derive(Debug, Subcommand)]
pub enum CertsCommand {
    /// Create a CA and certificates for a local cluster: ca.pem, ca-key.pem, and NAME.pem +
    /// NAME-key.pem for each coordinator, proxy and admin.
    Init(InitArgs),
    /// Issue more certificates from the CA in --dir (made by `init`): a new proxy, admin or
    /// coordinator, or a replacement for one that is about to expire.
    Issue(IssueArgs),
}

/// Flags of `switchyard certs issue`.
#[derive(Debug, Args)]
pub struct IssueArgs {
    /// Directory with ca.pem and ca-key.pem; the new files are written there too (NAME.pem,
    /// NAME-key.pem), replacing existing ones of the same name.
    #[arg(long)]
    pub dir: PathBuf,
    /// Coordinator ids to issue for.
    #[arg(long, value_delimiter = ',')]
    pub coordinators: Vec<u64>,
    /// Proxy ids to issue for.
    #[arg(long, value_delimiter = ',')]
    pub proxies: Vec<String>,
    /// Admin names to issue for.
    #[arg(long, value_delimiter = ',')]
    pub admins: Vec<String>,
    /// How many days the certificates are valid.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u16).range(1..))]
    pub valid_days: u16,
}

/// Flags of `switchyard certs init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// Directory to write into (created if missing).
    #[arg(long)]
    pub dir: PathBuf,
    /// Coordinator ids to issue certificates for (coordinator-ID.pem).
    #[arg(long, value_delimiter = ',', default_value = "1,2,3")]
    pub coordinators: Vec<u64>,
    /// Proxy ids to issue certificates for (proxy-ID.pem); the id is what `switchyard proxy --id` must say.
    #[arg(long, value_delimiter = ',', default_value = "p1,p2,p3")]
    pub proxies: Vec<String>,
    /// Admin names to issue certificates for (admin-NAME.pem), for apply, delete and status.
    #[arg(long, value_delimiter = ',', default_value = "ops")]
    pub admins: Vec<String>,
    /// How many days the CA and certificates are valid.
    #[arg(long, default_value_t = 365, value_parser = clap::value_parser!(u16).range(1..))]
    pub valid_days: u16,
    /// Replace an existing set in --dir (certificates from the old CA stop being trusted).
    #[arg(long)]
    pub force: bool,
}

/// Runs `switchyard certs`.
pub fn run(args: CertsArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        CertsCommand::Init(args) => init(args),
        CertsCommand::Issue(args) => issue(args),
    }
}

/// The identities the flags name, each checked. `--proxies ""` names none
/// (proxies may get theirs elsewhere, such as cert-manager's CSI driver in
/// deploy/).
fn identities(
    coordinators: &[u64],
    proxies: &[String],
    admins: &[String],
) -> anyhow::Result<Vec<Identity>> {
    let named = |names: &[String]| -> Vec<String> {
        names.iter().filter(|n| !n.is_empty()).cloned().collect()
    };
    let mut identities: Vec<Identity> = Vec::new();
    identities.extend(coordinators.iter().map(|id| Identity::Coordinator(*id)));
    identities.extend(named(proxies).into_iter().map(Identity::Proxy));
    identities.extend(named(admins).into_iter().map(Identity::Admin));
    for identity in &identities {
        if Identity::parse_uri(&identity.uri()) != Some(Ok(identity.clone())) {
            anyhow::bail!("{identity} is not a valid name: use letters, digits, '-', '_' and '.'");
        }
    }
    Ok(identities)
}

fn issue(args: IssueArgs) -> anyhow::Result<ExitCode> {
    let identities = identities(&args.coordinators, &args.proxies, &args.admins)?;
    if identities.is_empty() {
        anyhow::bail!("name what to issue: --coordinators, --proxies and/or --admins");
    }
    let authority = Authority::load(&args.dir)?;
    let validity = Validity::days(i64::from(args.valid_days));
    for identity in &identities {
        let (cert, key) = authority
            .issue(identity, validity)?
            .write(&args.dir, &file_stem(identity))?;
        println!("{}\n{}", cert.display(), key.display());
    }
    Ok(ExitCode::SUCCESS)
}

fn init(args: InitArgs) -> anyhow::Result<ExitCode> {
    let identities = identities(&args.coordinators, &args.proxies, &args.admins)?;
    let validity = Validity::days(i64::from(args.valid_days));
    let written = init_dir(&args.dir, &identities, validity, args.force)?;
    for path in &written {
        println!("{}", path.display());
    }
    let dir = args.dir.display();
    println!(
        "\nStart each process with --ca {dir}/ca.pem --cert {dir}/NAME.pem --key {dir}/NAME-key.pem.\nKeep ca-key.pem off the cluster's machines: whoever holds it can issue any identity."
    );
    Ok(ExitCode::SUCCESS)
}
