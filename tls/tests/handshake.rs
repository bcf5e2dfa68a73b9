//! The TLS listener and connector against each other, in process: who gets
//! through the handshake, what identity the server sees, and reloading.
// Helpers here panic to report a broken fixture, as tests do.
#![allow(clippy::unwrap_used)]

use rustls_pki_types::pem::PemObject;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use switchyard_tls::certs::{Authority, Validity, file_stem};
use switchyard_tls::client::ClientConn;
use switchyard_tls::server::{ServerConn, incoming};
use switchyard_tls::{Identity, Security, Tls, TlsFiles};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_stream::StreamExt;
use tower_service::Service;

/// Writes CA + certificate for `identity` into `dir`; returns the files.
fn files(dir: &Path, ca: &Authority, identity: &Identity, validity: Validity) -> TlsFiles {
    let stem = file_stem(identity);
    let (cert, key) = ca
        .issue(identity, validity)
        .unwrap()
        .write(dir, &stem)
        .unwrap();
    let ca_path = dir.join(format!("{stem}-ca.pem"));
    std::fs::write(&ca_path, ca.cert_pem()).unwrap();
    TlsFiles {
        ca: ca_path,
        cert,
        key,
    }
}

struct Server {
    address: String,
    conns: tokio_stream::wrappers::ReceiverStream<std::io::Result<ServerConn>>,
}

async fn server(security: Security) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap().to_string();
    Server {
        address,
        conns: incoming(listener, security),
    }
}

/// Connects with `security`; on success, the identity the server saw.
async fn connect(server: &mut Server, security: Security) -> Result<Option<Identity>, String> {
    let mut connector = connector(security);
    let uri: http::Uri = format!("http://{}", server.address).parse().unwrap();
    let client = connector.call(uri).await.map_err(|e| e.to_string());
    let mut client = match client {
        Ok(io) => io.into_inner(),
        Err(e) => return Err(e),
    };
    // TLS 1.3 servers verify the client's certificate after the client
    // considers the handshake done: a round trip shows the verdict.
    let accepted = tokio::time::timeout(Duration::from_secs(2), server.conns.next()).await;
    let Ok(Some(Ok(mut conn))) = accepted else {
        return Err("the server accepted no connection".into());
    };
    client.write_all(b"ping").await.map_err(|e| e.to_string())?;
    let mut buf = [0u8; 4];
    conn.read_exact(&mut buf).await.map_err(|e| e.to_string())?;
    let identity = conn.peer.identity.clone();
    drop(client);
    Ok(identity)
}

fn connector(security: Security) -> switchyard_tls::client::Connector {
    switchyard_tls::client::Connector::new(security, None, Duration::from_secs(5))
}

fn tls(files: TlsFiles) -> Security {
    Security::Tls(Tls::load(files).unwrap())
}

fn setup() -> (tempfile::TempDir, Authority, Security) {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::generate("test CA", Validity::days(1)).unwrap();
    let server = tls(files(
        dir.path(),
        &ca,
        &Identity::Coordinator(1),
        Validity::days(1),
    ));
    (dir, ca, server)
}

#[tokio::test]
async fn a_certificate_from_the_ca_gets_through_with_its_identity() {
    let (dir, ca, security) = setup();
    let mut server = server(security).await;
    let proxy = Identity::Proxy("p1".into());
    let client = tls(files(dir.path(), &ca, &proxy, Validity::days(1)));
    assert_eq!(connect(&mut server, client).await, Ok(Some(proxy)));
}

#[tokio::test]
async fn another_ca_an_expired_certificate_and_no_certificate_are_refused() {
    let (dir, ca, security) = setup();
    let mut server = server(security).await;

    let other_dir = tempfile::tempdir().unwrap();
    let other = Authority::generate("other CA", Validity::days(1)).unwrap();
    let mut foreign = files(
        other_dir.path(),
        &other,
        &Identity::Admin("ops".into()),
        Validity::days(1),
    );
    // Trusts our CA (so it accepts the server) but is signed by another.
    std::fs::write(&foreign.ca, ca.cert_pem()).unwrap();
    foreign.ca = foreign.ca.clone();
    assert!(
        connect(&mut server, tls(foreign)).await.is_err(),
        "foreign CA got through"
    );

    let expired = files(
        dir.path(),
        &ca,
        &Identity::Admin("late".into()),
        Validity::expired(),
    );
    assert!(
        connect(&mut server, tls(expired)).await.is_err(),
        "expired certificate got through"
    );

    let plain = connect(&mut server, Security::Insecure).await;
    assert!(plain.is_err(), "plaintext got through: {plain:?}");

    // A client with the CA but no certificate of its own.
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates({
        let mut roots = rustls::RootCertStore::empty();
        for cert in rustls_pki_types::CertificateDer::pem_slice_iter(ca.cert_pem().as_bytes()) {
            roots.add(cert.unwrap()).unwrap();
        }
        roots
    })
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(&server.address)
        .await
        .unwrap();
    let name =
        rustls_pki_types::ServerName::try_from(switchyard_tls::COORDINATOR_SERVER_NAME).unwrap();
    let handshake = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await;
    let refused = match handshake {
        Err(_) => true,
        Ok(mut stream) => {
            let _ = stream.write_all(b"ping").await;
            let mut buf = [0u8; 1];
            !matches!(stream.read(&mut buf).await, Ok(1..))
        }
    };
    assert!(refused, "a client without a certificate got through");
    let accepted = tokio::time::timeout(Duration::from_millis(500), server.conns.next()).await;
    assert!(
        accepted.is_err(),
        "the server handed a refused connection to tonic"
    );
}

#[tokio::test]
async fn a_client_refuses_a_server_that_is_not_a_coordinator() {
    let (dir, ca, _) = setup();
    // An admin certificate has no coordinator DNS name: a client must not
    // take such a server for a coordinator.
    let impostor = tls(files(
        dir.path(),
        &ca,
        &Identity::Admin("x".into()),
        Validity::days(1),
    ));
    let mut server = server(impostor).await;
    let client = tls(files(
        dir.path(),
        &ca,
        &Identity::Proxy("p1".into()),
        Validity::days(1),
    ));
    let result = connect(&mut server, client).await;
    assert!(result.is_err(), "{result:?}");
}

#[tokio::test]
async fn reloaded_files_are_used_by_new_connections() {
    let (dir, ca, _) = setup();
    let identity = Identity::Coordinator(1);
    let server_files = files(dir.path(), &ca, &identity, Validity::days(1));
    let server_tls = Tls::load(server_files.clone()).unwrap();
    let mut server = server(Security::Tls(server_tls.clone())).await;
    let client = tls(files(
        dir.path(),
        &ca,
        &Identity::Admin("ops".into()),
        Validity::days(1),
    ));

    let before = presented_certificate(&server.address, &client).await;
    assert_eq!(
        server_tls.reload().unwrap(),
        switchyard_tls::ReloadOutcome::Unchanged
    );

    // Rotate: a new key and certificate for the same identity.
    ca.issue(&identity, Validity::days(2))
        .unwrap()
        .write(dir.path(), &file_stem(&identity))
        .unwrap();
    assert_eq!(
        server_tls.reload().unwrap(),
        switchyard_tls::ReloadOutcome::Changed
    );
    let after = presented_certificate(&server.address, &client).await;
    assert_ne!(
        before, after,
        "the new connection still saw the old certificate"
    );
    // The two probes above queued their (closed) server ends.
    for _ in 0..2 {
        server.conns.next().await;
    }
    assert_eq!(connect(&mut server, client).await.map(|_| ()), Ok(()));
}

#[tokio::test]
async fn a_reload_that_changes_identity_or_breaks_the_files_keeps_the_old_ones() {
    let (dir, ca, _) = setup();
    let identity = Identity::Coordinator(1);
    let server_files = files(dir.path(), &ca, &identity, Validity::days(1));
    let server_tls = Tls::load(server_files.clone()).unwrap();
    let before = server_tls.server_config();

    let other = ca
        .issue(&Identity::Proxy("p9".into()), Validity::days(1))
        .unwrap();
    std::fs::write(&server_files.cert, &other.cert_pem).unwrap();
    std::fs::write(&server_files.key, &other.key_pem).unwrap();
    let error = server_tls.reload().unwrap_err().to_string();
    assert!(error.contains("restart to change identity"), "{error}");

    std::fs::write(&server_files.key, "not a key").unwrap();
    let error = server_tls.reload().unwrap_err().to_string();
    assert!(error.contains("key file"), "{error}");
    assert!(Arc::ptr_eq(&before, &server_tls.server_config()));
}

#[test]
fn missing_and_unusable_files_name_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Authority::generate("test CA", Validity::days(1)).unwrap();
    let good = files(
        dir.path(),
        &ca,
        &Identity::Proxy("p1".into()),
        Validity::days(1),
    );

    let mut missing = good.clone();
    missing.ca = dir.path().join("nope.pem");
    let error = Tls::load(missing).unwrap_err().to_string();
    assert!(
        error.contains("cannot read CA file") && error.contains("nope.pem"),
        "{error}"
    );

    let empty = dir.path().join("empty.pem");
    std::fs::write(&empty, "").unwrap();
    let mut no_cert = good.clone();
    no_cert.cert = empty;
    let error = Tls::load(no_cert).unwrap_err().to_string();
    assert!(error.contains("holds no certificate"), "{error}");

    // A key that belongs to another certificate.
    let other = ca
        .issue(&Identity::Proxy("p1".into()), Validity::days(1))
        .unwrap();
    let wrong_key = dir.path().join("wrong-key.pem");
    std::fs::write(&wrong_key, other.key_pem).unwrap();
    let mut mismatched = good;
    mismatched.key = wrong_key;
    assert!(Tls::load(mismatched).is_err());
}

/// The DER of the certificate the server at `address` presents to a new
/// connection.
async fn presented_certificate(address: &str, client: &Security) -> Vec<u8> {
    let uri: http::Uri = format!("http://{address}").parse().unwrap();
    let conn = connector(client.clone())
        .call(uri)
        .await
        .unwrap()
        .into_inner();
    let ClientConn::Tls(stream) = conn else {
        panic!("expected TLS")
    };
    stream.get_ref().1.peer_certificates().unwrap()[0].to_vec()
}
