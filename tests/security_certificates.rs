//! Certificates: `certs init` and `certs issue` make a set a real cluster
//! runs on (and refuse what they must), and certificates rotated on disk
//! under traffic are used by new connections with zero failed requests.

mod security;
mod support;

use rustls_pki_types::CertificateDer;
use rustls_pki_types::pem::PemObject;
use security::*;
use std::time::Duration;
use switchyard::demo::fleet::{Fleet, FleetOptions};
use switchyard::demo::manifests;
use switchyard::demo::start_serving;
use switchyard_harness::{Process, ProcessSpec, free_port};
use switchyard_test_support::eventually;
use switchyard_test_support::eventually::holds;
use switchyard_tls::certs::file_stem;
use switchyard_tls::{Identity, Security};

/// Runs the CLI and returns (exit code, stderr).
fn cli(args: &[&str]) -> anyhow::Result<(i32, String)> {
    let out = support::cli(args)?;
    Ok((out.code, out.stderr))
}

#[test]
fn certs_init_and_issue_make_certificates_a_cluster_runs_on() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let certs = dir.path().join("certs");
    let certs_dir = certs.to_string_lossy().into_owned();
    let (code, stderr) = cli(&[
        "certs",
        "init",
        "--dir",
        &certs_dir,
        "--coordinators",
        "1",
        "--proxies",
        "p1",
        "--admins",
        "ops",
    ])?;
    assert_eq!(code, 0, "{stderr}");
    for file in [
        "ca.pem",
        "ca-key.pem",
        "coordinator-1.pem",
        "coordinator-1-key.pem",
        "proxy-p1.pem",
        "proxy-p1-key.pem",
        "admin-ops.pem",
        "admin-ops-key.pem",
    ] {
        assert!(certs.join(file).exists(), "{file} missing");
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(certs.join("ca-key.pem"))?
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "ca-key.pem is readable by others");
    }
    let (code, stderr) = cli(&["certs", "init", "--dir", &certs_dir])?;
    assert_ne!(code, 0);
    assert!(stderr.contains("already exists"), "{stderr}");

    let file = |name: &str| certs.join(name).to_string_lossy().into_owned();
    let tls = |who: &str| -> Vec<String> {
        vec![
            "--ca".into(),
            file("ca.pem"),
            "--cert".into(),
            file(&format!("{who}.pem")),
            "--key".into(),
            file(&format!("{who}-key.pem")),
        ]
    };
    let address = format!("127.0.0.1:{}", free_port());
    let mut args: Vec<String> = [
        "coordinator",
        "--id",
        "1",
        "--peers",
        &format!("1={address}"),
        "--listen",
        &address,
        "--data-dir",
        &dir.path().join("data").to_string_lossy(),
    ]
    .map(String::from)
    .to_vec();
    args.extend(tls("coordinator-1"));
    let mut coordinator = Process::start(ProcessSpec::new("coordinator-1", binary(), args))?;

    let status = |who: &str| {
        let mut args = vec![
            "status".to_string(),
            "--coordinators".into(),
            address.clone(),
            "--timeout".into(),
            "10s".into(),
        ];
        args.extend(tls(who));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&args)
    };
    let (code, stderr) = status("admin-ops")?;
    assert_eq!(code, 0, "{stderr}");

    // More certificates later, from the same CA: a new admin gets in.
    let (code, stderr) = cli(&["certs", "issue", "--dir", &certs_dir, "--admins", "ops2"])?;
    assert_eq!(code, 0, "{stderr}");
    let (code, stderr) = status("admin-ops2")?;
    assert_eq!(code, 0, "{stderr}");
    let empty = dir.path().join("empty").to_string_lossy().into_owned();
    let (code, stderr) = cli(&["certs", "issue", "--dir", &empty, "--admins", "x"])?;
    assert_ne!(code, 0);
    assert!(stderr.contains("cannot use the CA in"), "{stderr}");
    let (code, stderr) = status("proxy-p1")?;
    assert_ne!(code, 0);
    assert!(stderr.contains("needs an admin certificate"), "{stderr}");

    // A proxy whose certificate names another id stops at once.
    let mut args = vec![
        "proxy",
        "--id",
        "p2",
        "--listener",
        "80=127.0.0.1:0",
        "--coordinators",
        &address,
    ];
    let proxy_tls = tls("proxy-p1");
    args.extend(proxy_tls.iter().map(String::as_str));
    let (code, stderr) = cli(&args)?;
    assert_ne!(code, 0);
    assert!(stderr.contains("names proxy \"p1\""), "{stderr}");
    coordinator.kill();
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rotated_certificates_are_used_by_new_connections_with_zero_failed_requests()
-> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let (mut fleet, prober) = start_serving(FleetOptions::three_zones(binary()), &[]).await?;
    let admin = fleet_security(&fleet, &Identity::Admin("ops".into()))?;
    let before: Vec<Vec<u8>> = presented(&fleet, &admin).await?;

    let issued = fleet.rotate_certificates()?;
    // Each coordinator picks the new files up (the fleet polls every
    // 500 ms) and presents them to the next connection.
    for (i, address) in fleet.coordinator_addresses.clone().iter().enumerate() {
        let stem = file_stem(&Identity::Coordinator(i as u64 + 1));
        let expected = CertificateDer::from_pem_slice(issued[&stem].as_bytes())?.to_vec();
        assert_ne!(before[i], expected);
        let what = format!("coordinator {} to present its new certificate", i + 1);
        eventually(&what, Duration::from_secs(20), async || {
            // A connection that fails during rotation fails the test.
            let presented = presented_by(address, &admin)
                .await
                .expect("a TLS connection during rotation");
            holds(presented == expected, || "still the old certificate")
        })
        .await?;
    }
    eventually(
        "the reload in the logs",
        Duration::from_secs(10),
        async || fleet.logs().contains("TLS files changed on disk"),
    )
    .await?;

    // The fleet keeps working on the new certificates: a leader change
    // makes every proxy and coordinator open new connections, and a
    // cutover completes through them.
    let leader = fleet.wait_leader(Duration::from_secs(10)).await?;
    fleet.coordinators[leader].kill();
    let backend = tokio::task::block_in_place(|| fleet.start_backend("v2", &[]))?;
    let yaml = format!(
        "{}{}",
        manifests::backend("v2", backend),
        manifests::route("v2", "h1", "30s")
    );
    let (targets, index) = fleet.apply(&yaml).await?;
    fleet
        .client()
        .wait_ready(&targets, index, Duration::from_secs(60), |_| {})
        .await?;
    let seen = prober
        .observe_after(tokio::time::Instant::now(), Duration::from_secs(10))
        .await
        .expect("responses keep coming");
    assert_eq!(seen.backend, "v2");
    tokio::task::block_in_place(|| fleet.coordinators[leader].restart())?;
    let report = prober.stop().await;
    assert_eq!(report.failed, 0, "failed requests: {:?}", report.failures);
    assert!(report.sent > 100, "the prober barely ran: {}", report.sent);
    Ok(())
}

/// The certificate each coordinator presents to a new connection.
async fn presented(fleet: &Fleet, client: &Security) -> anyhow::Result<Vec<Vec<u8>>> {
    let mut out = Vec::new();
    for address in &fleet.coordinator_addresses {
        out.push(presented_by(address, client).await?);
    }
    Ok(out)
}

async fn presented_by(address: &str, client: &Security) -> anyhow::Result<Vec<u8>> {
    use tower_service::Service;
    let mut connector =
        switchyard_tls::client::Connector::new(client.clone(), None, Duration::from_secs(5));
    let conn = connector
        .call(format!("http://{address}").parse()?)
        .await?
        .into_inner();
    let switchyard_tls::client::ClientConn::Tls(stream) = conn else {
        anyhow::bail!("not TLS");
    };
    let certificate = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|chain| chain.first())
        .map(|c| c.to_vec())
        .ok_or_else(|| anyhow::anyhow!("no server certificate"))?;
    Ok(certificate)
}
