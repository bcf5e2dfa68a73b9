//! Three coordinators in-process on 127.0.0.1: election, forwarding,
//! failover, full restart, adding a fourth by snapshot, and refusing a node
//! formed with different `--peers`.
//!
//! Everything waits by polling with a deadline; nothing sleeps and hopes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, bail, ensure};
use switchyard_coordinator::raft::fingerprint::{PEERS_HEADER, fingerprint, peers_string};
use switchyard_coordinator::raft::{
    CLUSTER_HEADER, Node, NodeConfig, NodeError, ProposeError, RaftSettings, StoreError,
};
use switchyard_coordinator::state::{Command, CommandError, DecisionBasis, ReplicatedState};
use switchyard_proto::pb::RaftPayload;
use switchyard_proto::pb::raft_service_client::RaftServiceClient;
use switchyard_test_support::eventually;
use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;
use tokio_stream::wrappers::TcpListenerStream;

/// How long any one wait of these tests may take.
const DEADLINE: Duration = Duration::from_secs(30);

fn settings() -> RaftSettings {
    RaftSettings {
        heartbeat_interval: Duration::from_millis(50),
        election_timeout_min: Duration::from_millis(300),
        election_timeout_max: Duration::from_millis(600),
        rpc_timeout: Duration::from_millis(500),
        snapshot_after_logs: 10,
        keep_logs_after_snapshot: 0,
        leader_wait: Duration::from_secs(5),
        propose_timeout: Duration::from_secs(5),
        ..RaftSettings::default()
    }
}

fn register(i: u64) -> Command {
    Command::RegisterProxy {
        id: format!("proxy-{i}"),
        zone: format!("zone-{}", i % 3),
        admin_address: format!("127.0.0.1:{}", 20_000 + i),
    }
}

/// One coordinator: the node plus the tonic server it is mounted on.
struct Running {
    node: Node,
    addr: String,
    dir: PathBuf,
    stop: oneshot::Sender<()>,
    server: JoinHandle<Result<(), tonic::transport::Error>>,
}

async fn bind(addr: &str) -> anyhow::Result<(TcpListener, String)> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("bind {addr}"))?;
    let addr = listener.local_addr()?.to_string();
    Ok((listener, addr))
}

async fn start(
    id: u64,
    listener: TcpListener,
    addr: &str,
    peers: &BTreeMap<u64, String>,
    dir: &Path,
) -> anyhow::Result<Running> {
    start_with(id, listener, addr, peers, dir, settings()).await
}

async fn start_with(
    id: u64,
    listener: TcpListener,
    addr: &str,
    peers: &BTreeMap<u64, String>,
    dir: &Path,
    raft: RaftSettings,
) -> anyhow::Result<Running> {
    let node = Node::start(NodeConfig {
        id,
        peers: peers.clone(),
        advertise_addr: addr.to_owned(),
        data_dir: dir.to_path_buf(),
        raft,
        source_ip: None,
        security: switchyard_tls::Security::Insecure,
    })
    .await
    .with_context(|| format!("start node {id}"))?;
    let (stop, stopped) = oneshot::channel::<()>();
    let server = tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(node.raft_service())
            .serve_with_incoming_shutdown(TcpListenerStream::new(listener), async {
                let _ = stopped.await;
            }),
    );
    Ok(Running {
        node,
        addr: addr.to_owned(),
        dir: dir.to_path_buf(),
        stop,
        server,
    })
}

/// Three coordinators formed on fresh loopback ports, each with its data
/// in `root/node-<id>`: their addresses and the running nodes, by id.
async fn start_three(
    root: &Path,
    raft: RaftSettings,
) -> anyhow::Result<(BTreeMap<u64, String>, BTreeMap<u64, Running>)> {
    let mut listeners = Vec::new();
    let mut peers = BTreeMap::new();
    for id in 1..=3u64 {
        let (listener, addr) = bind("127.0.0.1:0").await?;
        peers.insert(id, addr);
        listeners.push((id, listener));
    }
    let mut nodes = BTreeMap::new();
    for (id, listener) in listeners {
        let dir = root.join(format!("node-{id}"));
        let node = start_with(id, listener, &peers[&id], &peers, &dir, raft.clone()).await?;
        nodes.insert(id, node);
    }
    Ok((peers, nodes))
}

impl Running {
    async fn stop(self) {
        self.node.shutdown().await;
        let _ = self.stop.send(());
        let abort = self.server.abort_handle();
        if tokio::time::timeout(Duration::from_secs(5), self.server)
            .await
            .is_err()
        {
            abort.abort();
        }
    }

    fn state(&self) -> Arc<ReplicatedState> {
        self.node.state().borrow().clone()
    }
}

/// Waits until every node in `nodes` names the same leader, one of them.
async fn agreed_leader(nodes: &[&Running]) -> anyhow::Result<u64> {
    let agreed = eventually("a leader all nodes agree on", DEADLINE, async || {
        let leaders: Vec<_> = nodes
            .iter()
            .map(|r| r.node.leader().map(|(id, _)| id))
            .collect();
        let seen = || format!("leaders as each node sees them: {leaders:?}");
        let first = leaders[0].ok_or_else(seen)?;
        let is_member = nodes
            .iter()
            .any(|r| r.node.id() == first && r.node.is_leader());
        let agreed = is_member && leaders.iter().all(|l| *l == Some(first));
        agreed.then_some(first).ok_or_else(seen)
    })
    .await?;
    Ok(agreed)
}

async fn propose_ok(node: &Node, command: Command) -> anyhow::Result<()> {
    let response = node
        .propose(command.clone())
        .await
        .with_context(|| format!("propose via node {}", node.id()))?;
    ensure!(response.0.is_ok(), "{command:?} rejected: {:?}", response.0);
    Ok(())
}

async fn converge(nodes: &[&Running], what: &str) -> anyhow::Result<Arc<ReplicatedState>> {
    let converged = eventually(what, DEADLINE, async || {
        let first = nodes[0].state();
        let applied: Vec<u64> = nodes.iter().map(|r| r.state().last_index).collect();
        let same = nodes.iter().all(|r| *r.state() == *first);
        same.then_some(first)
            .ok_or_else(|| format!("states differ; last applied index per node: {applied:?}"))
    })
    .await?;
    Ok(converged)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_coordinators_elect_forward_fail_over_restart_and_grow() -> anyhow::Result<()> {
    let started = Instant::now();
    // Printed (shown on failure) so a slow or stuck phase is easy to spot.
    let phase = |name: &str| eprintln!("[{:>6.2?}] {name}", started.elapsed());
    let root = tempfile::tempdir()?;
    let (peers, mut nodes) = start_three(root.path(), settings()).await?;

    // --- election, and proposals forwarded by a follower
    phase("election");
    let leader = agreed_leader(&nodes.values().collect::<Vec<_>>()).await?;
    let follower = *nodes
        .keys()
        .find(|id| **id != leader)
        .context("a follower")?;
    for i in 0..15 {
        propose_ok(&nodes[&follower].node, register(i)).await?;
    }
    let state = converge(
        &nodes.values().collect::<Vec<_>>(),
        "15 proposals applied everywhere",
    )
    .await?;
    ensure!(
        state.proxies.len() == 15,
        "proxies: {:?}",
        state.proxies.keys().collect::<Vec<_>>()
    );
    ensure!(state.proxies["proxy-7"].zone == "zone-1");

    // --- a leader's decisions are never forwarded, and count only in the
    // term that made them (the term comes from openraft's log id)
    phase("fenced decisions");
    let refused = nodes[&follower].node.propose_here(register(99)).await;
    ensure!(
        matches!(refused, Err(ProposeError::NotLeader { .. })),
        "a follower proposed a decision: {refused:?}"
    );
    let leader_node = &nodes[&leader].node;
    propose_ok(leader_node, register(99)).await?;
    let registration = leader_node.state().borrow().proxies["proxy-99"].registered_index;
    let term = leader_node.metrics().borrow().current_term;
    let expire = |term| Command::ExpireProxy {
        id: "proxy-99".into(),
        registration,
        basis: DecisionBasis {
            term,
            endpoints: vec![],
        },
    };
    let stale = leader_node.propose_here(expire(term - 1)).await?;
    ensure!(
        matches!(stale.0, Err(CommandError::StaleDecision { .. })),
        "a decision of term {} was carried out in term {term}: {:?}",
        term - 1,
        stale.0
    );
    let fresh = leader_node.propose_here(expire(term)).await?;
    ensure!(fresh.0.is_ok(), "{:?}", fresh.0);
    ensure!(
        !leader_node
            .state()
            .borrow()
            .proxies
            .contains_key("proxy-99")
    );

    // --- the leader stops; the other two elect a new one and keep going
    phase("leader stops");
    let old = nodes.remove(&leader).context("leader")?;
    let old_dir = old.dir.clone();
    let old_addr = old.addr.clone();
    old.stop().await;
    let survivors: Vec<_> = nodes.values().collect();
    let new_leader = agreed_leader(&survivors).await?;
    ensure!(
        new_leader != leader,
        "old leader {leader} still named leader"
    );
    for i in 15..25 {
        propose_ok(&survivors[i as usize % 2].node, register(i)).await?;
    }
    // The old leader comes back on the same address and data and catches up.
    phase("old leader returns");
    let (listener, _) = bind(&old_addr).await?;
    nodes.insert(
        leader,
        start(leader, listener, &old_addr, &peers, &old_dir).await?,
    );
    let before_restart =
        converge(&nodes.values().collect::<Vec<_>>(), "old leader caught up").await?;
    ensure!(before_restart.proxies.len() == 25);

    // --- all three stop and restart on the same data: same state
    phase("full restart");
    let mut addrs = BTreeMap::new();
    for (id, running) in std::mem::take(&mut nodes) {
        addrs.insert(id, (running.addr.clone(), running.dir.clone()));
        running.stop().await;
    }
    for (id, (addr, dir)) in &addrs {
        let (listener, _) = bind(addr).await?;
        nodes.insert(*id, start(*id, listener, addr, &peers, dir).await?);
    }
    for running in nodes.values() {
        ensure!(
            *running.state() == *before_restart,
            "node {} restored a different state",
            running.node.id()
        );
    }
    let leader = agreed_leader(&nodes.values().collect::<Vec<_>>()).await?;
    for i in 25..35 {
        propose_ok(&nodes[&leader].node, register(i)).await?;
    }
    let state = converge(
        &nodes.values().collect::<Vec<_>>(),
        "proposals after restart",
    )
    .await?;
    ensure!(state.proxies.len() == 35);

    // --- a fourth coordinator joins; the log it needs is purged, so it can
    phase("fourth joins");
    // only catch up from a snapshot
    let purged = eventually(
        "leader purged its log after a snapshot",
        DEADLINE,
        async || {
            nodes[&leader]
                .node
                .metrics()
                .borrow()
                .purged
                .filter(|p| p.index > 0)
        },
    )
    .await?;
    let (listener4, addr4) = bind("127.0.0.1:0").await?;
    let dir4 = root.path().join("node-4");
    let node4 = start(4, listener4, &addr4, &BTreeMap::new(), &dir4).await?;
    ensure!(
        node4.node.cluster_fingerprint().is_none(),
        "join mode starts unformed"
    );
    let follower = *nodes
        .keys()
        .find(|id| **id != leader)
        .context("a follower")?;
    match nodes[&follower]
        .node
        .add_coordinator(4, addr4.clone())
        .await
    {
        Err(ProposeError::NotLeader {
            leader: Some((hint, _)),
            ..
        }) if hint == leader => {}
        // Leadership moved to this node meanwhile (short election timeouts
        // on a loaded machine): then succeeding was right.
        Ok(_) if nodes[&follower].node.is_leader() => {}
        other => bail!(
            "add_coordinator on a follower: expected NotLeader with hint {leader}, got {other:?}"
        ),
    }
    // Ask whoever leads now (adding an existing voter again is a no-op).
    let leader = nodes
        .iter()
        .find(|(_, n)| n.node.is_leader())
        .map_or(leader, |(id, _)| *id);
    let voters = nodes[&leader]
        .node
        .add_coordinator(4, addr4.clone())
        .await?;
    ensure!(
        voters.len() == 4 && voters[&4] == addr4,
        "voters after add: {voters:?}"
    );
    // It adopted the cluster's fingerprint from the leader's first contact.
    ensure!(node4.node.cluster_fingerprint() == Some(fingerprint(&peers)));
    nodes.insert(4, node4);
    let state = converge(&nodes.values().collect::<Vec<_>>(), "node 4 caught up").await?;
    ensure!(state.proxies.len() == 35);
    let snapshot = nodes[&4].node.metrics().borrow().snapshot;
    ensure!(
        snapshot.is_some_and(|s| s.index >= purged.index),
        "node 4 has snapshot {snapshot:?}; the leader had purged up to {purged}"
    );
    propose_ok(&nodes[&4].node, register(35)).await?;
    converge(&nodes.values().collect::<Vec<_>>(), "proposal via node 4").await?;

    // --- a node formed with different --peers is refused; nothing changes
    phase("foreign node");
    let term_before = nodes[&leader].node.metrics().borrow().current_term;
    let (listener9, addr9) = bind("127.0.0.1:0").await?;
    let wrong_peers: BTreeMap<u64, String> =
        [(leader, nodes[&leader].addr.clone()), (9, addr9.clone())].into();
    let dir9 = root.path().join("node-9");
    let node9 = start(9, listener9, &addr9, &wrong_peers, &dir9).await?;
    // It campaigns (its term grows) but its vote requests never get through.
    eventually("node 9 campaigned a few times", DEADLINE, async || {
        (node9.node.metrics().borrow().current_term >= 3).then_some(())
    })
    .await?;
    let mut client = RaftServiceClient::connect(format!("http://{}", nodes[&leader].addr)).await?;
    let mut request = tonic::Request::new(RaftPayload {
        json: b"{}".to_vec(),
    });
    request
        .metadata_mut()
        .insert(CLUSTER_HEADER, fingerprint(&wrong_peers).parse()?);
    request
        .metadata_mut()
        .insert(PEERS_HEADER, peers_string(&wrong_peers).parse()?);
    let refusal = client
        .vote(request)
        .await
        .err()
        .context("vote from a foreign cluster accepted")?;
    ensure!(
        refusal.code() == tonic::Code::FailedPrecondition,
        "{refusal:?}"
    );
    ensure!(
        refusal.message().contains(&peers_string(&wrong_peers))
            && refusal.message().contains(&peers_string(&peers)),
        "refusal does not name both peer lists: {}",
        refusal.message()
    );
    propose_ok(&nodes[&follower].node, register(36)).await?;
    let state = converge(
        &nodes.values().collect::<Vec<_>>(),
        "proposal while node 9 knocks",
    )
    .await?;
    ensure!(state.proxies.len() == 37);
    ensure!(
        nodes[&leader].node.is_leader(),
        "leader changed while node 9 campaigned"
    );
    ensure!(
        nodes[&leader].node.metrics().borrow().current_term == term_before,
        "node 9's campaign changed the cluster's term"
    );
    ensure!(nodes[&leader].node.voters().len() == 4);
    node9.stop().await;

    // --- removing the fourth again
    phase("remove fourth");
    let voters = nodes[&leader].node.remove_coordinator(4).await?;
    ensure!(
        voters.len() == 3 && !voters.contains_key(&4),
        "voters after remove: {voters:?}"
    );

    phase("stop all");
    for (_, running) in nodes {
        running.stop().await;
    }
    phase("done");
    Ok(())
}

/// A follower that missed many entries catches up from the log even when
/// every AppendEntries may carry only one of them (a byte budget of one
/// byte): the leader takes each request's partial success and sends the
/// rest. Which entries a cut request carries, and the partial success it
/// reports, are `append_batch`'s unit tests; this drives openraft with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_catches_up_through_appends_cut_to_their_byte_budget() -> anyhow::Result<()> {
    let raft = RaftSettings {
        append_budget_bytes: 1,
        // No snapshot: the follower must catch up from the log.
        snapshot_after_logs: 10_000,
        ..settings()
    };
    let root = tempfile::tempdir()?;
    let (peers, mut nodes) = start_three(root.path(), raft.clone()).await?;
    let dir = |id: u64| root.path().join(format!("node-{id}"));
    let leader = agreed_leader(&nodes.values().collect::<Vec<_>>()).await?;
    let lagging = *nodes
        .keys()
        .find(|id| **id != leader)
        .context("a follower")?;
    nodes.remove(&lagging).context("the follower")?.stop().await;

    for i in 0..40 {
        propose_ok(&nodes[&leader].node, register(i)).await?;
    }
    let (listener, _) = bind(&peers[&lagging]).await?;
    let restarted = start_with(
        lagging,
        listener,
        &peers[&lagging],
        &peers,
        &dir(lagging),
        raft.clone(),
    )
    .await?;
    nodes.insert(lagging, restarted);
    let state = converge(
        &nodes.values().collect::<Vec<_>>(),
        "the restarted follower caught up with 40 entries, one per AppendEntries",
    )
    .await?;
    ensure!(
        state.proxies.len() == 40,
        "proxies: {}",
        state.proxies.len()
    );
    for (_, node) in nodes {
        node.stop().await;
    }
    Ok(())
}

#[tokio::test]
async fn start_refuses_peers_without_self_and_a_locked_store() -> anyhow::Result<()> {
    let root = tempfile::tempdir()?;
    let config = |id: u64, dir: &Path| NodeConfig {
        id,
        peers: [(1, "127.0.0.1:1".to_owned())].into(),
        advertise_addr: "127.0.0.1:1".to_owned(),
        data_dir: dir.to_path_buf(),
        raft: settings(),
        source_ip: None,
        security: switchyard_tls::Security::Insecure,
    };
    match Node::start(config(2, root.path())).await {
        Err(NodeError::NotInPeers { id: 2, .. }) => {}
        other => bail!("expected NotInPeers, got {:?}", other.err()),
    }
    let first = Node::start(config(1, root.path())).await?;
    match Node::start(config(1, root.path())).await {
        Err(NodeError::Store(StoreError::Locked { .. })) => {}
        other => bail!("expected Locked, got {:?}", other.err()),
    }
    first.shutdown().await;
    // Once shut down, the directory opens again.
    Node::start(config(1, root.path())).await?.shutdown().await;
    Ok(())
}
