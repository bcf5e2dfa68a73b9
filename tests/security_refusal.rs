//! Mutual TLS refuses what it must, against real coordinator processes:
//! clients without a valid certificate (none, another CA's, an expired
//! one) get no further than the handshake at any service; plaintext
//! against a TLS port fails cleanly; nothing starts without certificates
//! or `--insecure`, and `--insecure` is warned about.
//!
//! The fleets here run exactly as `switchyard demo` does (a throwaway CA,
//! one certificate per process); the acceptance and chaos tests run on the
//! same TLS fleets.

mod security;
mod support;

use security::*;
use std::time::Duration;
use switchyard_harness::{Process, ProcessSpec, free_port};
use switchyard_test_support::eventually_blocking;
use switchyard_tls::Identity;
use switchyard_tls::Security;
use switchyard_tls::certs::{Authority, Validity};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tonic::Code;
use tonic::transport::Channel;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_a_valid_certificate_are_refused_by_every_service() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let fleet = coordinators_only()?;
    fleet.wait_leader(Duration::from_secs(20)).await?;
    let address = fleet.coordinator_addresses[0].clone();
    let authority = fleet.authority().expect("a TLS fleet");
    let other = Authority::generate("another CA", Validity::days(1))?;
    let dir = fleet.dir();

    // Each bad client presents, for each service, the identity that service
    // would accept: what stops it is the certificate, not authorization.
    let clients: Vec<(&str, Vec<Channel>)> = vec![
        (
            "no certificate",
            vec![channel_without_certificate(&address, authority.cert_pem()); 3],
        ),
        (
            "another CA",
            ["coordinator", "proxy", "admin"]
                .iter()
                .map(|role| {
                    let identity = identity_for(role);
                    security(
                        dir,
                        authority.cert_pem(),
                        &other,
                        &identity,
                        Validity::days(1),
                    )
                    .map(|s| channel(&address, &s))
                })
                .collect::<anyhow::Result<_>>()?,
        ),
        (
            "an expired certificate",
            ["coordinator", "proxy", "admin"]
                .iter()
                .map(|role| {
                    let identity = identity_for(role);
                    security(
                        dir,
                        authority.cert_pem(),
                        authority,
                        &identity,
                        Validity::expired(),
                    )
                    .map(|s| channel(&address, &s))
                })
                .collect::<anyhow::Result<_>>()?,
        ),
    ];
    for (what, channels) in clients {
        for (service, channel) in ["RaftService", "FleetService", "AdminService"]
            .iter()
            .zip(channels)
        {
            let codes = call_each_service(channel, "intruder").await;
            let index = ["RaftService", "FleetService", "AdminService"]
                .iter()
                .position(|s| s == service)
                .expect("a service");
            let code = codes[index];
            assert!(
                code != Code::Ok && code != Code::PermissionDenied,
                "{service} with {what}: expected the handshake to fail, got {code:?}"
            );
        }
    }
    let (routes, proxies) = stored_names(&fleet).await?;
    assert!(!routes.contains(&"intruder".to_string()), "{routes:?}");
    assert!(!proxies.contains(&"intruder".to_string()), "{proxies:?}");

    // The same calls with the right certificates go through: what was
    // refused above was a valid request.
    let admin = fleet_security(&fleet, &Identity::Admin("ops".into()))?;
    let proxy = fleet_security(&fleet, &Identity::Proxy("intruder".into()))?;
    assert_eq!(allowed(channel(&address, &admin), "x", 2).await, Code::Ok);
    assert_eq!(
        allowed(channel(&address, &proxy), "intruder", 1).await,
        Code::Ok
    );
    let (routes, proxies) = stored_names(&fleet).await?;
    assert!(routes.contains(&"intruder".to_string()), "{routes:?}");
    assert!(proxies.contains(&"intruder".to_string()), "{proxies:?}");
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plaintext_to_the_tls_port_fails_cleanly() -> anyhow::Result<()> {
    let _serial = SERIAL.lock().await;
    let fleet = coordinators_only()?;
    fleet.wait_leader(Duration::from_secs(20)).await?;
    let address = fleet.coordinator_addresses[0].clone();

    // gRPC without TLS: an error, not a hang.
    let mut plain = switchyard::client::AdminClient::new(
        vec![address.clone()],
        Duration::from_secs(3),
        Security::Insecure,
    );
    assert!(plain.fetch_status().await.is_err());

    // The CLI says so in one line and exits non-zero.
    let out = tokio::task::block_in_place(|| {
        support::cli(&[
            "status",
            "--coordinators",
            &address,
            "--timeout",
            "3s",
            "--insecure",
        ])
    })?;
    assert_ne!(out.code, 0, "{out:?}");
    // One line after the --insecure warning, saying what to do.
    let errors: Vec<&str> = out.stderr.lines().filter(|l| !l.contains("WARN")).collect();
    assert_eq!(errors.len(), 1, "{}", out.stderr);
    assert!(
        errors[0].contains("requires TLS: pass --ca, --cert and --key"),
        "{}",
        out.stderr
    );

    // Raw HTTP: the server closes the connection.
    let mut tcp = tokio::net::TcpStream::connect(&address).await?;
    tcp.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").await?;
    let mut buf = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(15), tcp.read_to_end(&mut buf)).await;
    assert!(read.is_ok(), "the server kept a plaintext connection open");
    assert!(
        !String::from_utf8_lossy(&buf).contains("HTTP/1.1 200"),
        "plaintext got an answer"
    );

    // And the port still serves TLS clients.
    fleet.client().fetch_status().await?;
    Ok(())
}

#[test]
fn without_certificates_or_insecure_nothing_starts() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let data = dir.path().join("data").to_string_lossy().into_owned();
    let runs: [&[&str]; 4] = [
        &[
            "coordinator",
            "--id",
            "1",
            "--peers",
            "1=127.0.0.1:1",
            "--data-dir",
            &data,
        ],
        &[
            "proxy",
            "--id",
            "p1",
            "--listener",
            "80=127.0.0.1:0",
            "--coordinators",
            "127.0.0.1:1",
        ],
        &["status", "--coordinators", "127.0.0.1:1"],
        &["apply", "-f", "x.yaml", "--coordinators", "127.0.0.1:1"],
    ];
    for args in runs {
        let support::Output { code, stderr, .. } = support::cli(args)?;
        assert_ne!(code, 0, "{args:?} started without certificates");
        assert!(
            stderr.contains("--ca, --cert and --key")
                && stderr.contains("switchyard certs init")
                && stderr.contains("--insecure"),
            "{args:?}: the message must name both ways out: {stderr}"
        );
    }
    assert!(
        !dir.path().join("data").exists(),
        "the coordinator created its store"
    );
    Ok(())
}

#[test]
fn insecure_is_warned_about() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let address = format!("127.0.0.1:{}", free_port());
    let args: Vec<String> = [
        "coordinator",
        "--id",
        "1",
        "--peers",
        &format!("1={address}"),
        "--listen",
        &address,
        "--data-dir",
        &dir.path().join("data").to_string_lossy(),
        "--insecure",
    ]
    .map(String::from)
    .to_vec();
    let mut process = Process::start(ProcessSpec::new("insecure", binary(), args))?;
    // stderr is read on its own thread: give it a moment to catch up.
    let warned = eventually_blocking("the --insecure warning", Duration::from_secs(10), || {
        process
            .log_text()
            .contains("--insecure: gRPC runs without TLS")
    });
    let log = process.log_text();
    process.kill();
    assert!(warned.is_ok(), "no warning at start-up: {log}");
    Ok(())
}
