//! The control plane in-process: one real coordinator (`server::run` on
//! 127.0.0.1 port 0) and real proxy data planes with the real control
//! client, talking gRPC. Each test is one guarantee of the cutover-safety
//! issue that failed before its fix:
//!
//! - a version-only update (a proxy registering) does not break any
//!   proxy's configuration stream;
//! - watch and status streams end when their clients go;
//! - a proxy started while routes exist says `/ready` only once it serves
//!   them (never ready-then-404);
//! - a route applied while no proxy is live is not lost: it waits, and is
//!   served once a proxy comes.

#[path = "control_plane/harness.rs"]
mod harness;

use anyhow::Context;
use harness::{Coordinator, Proxy, WAIT, backend, proxies_registered};
use std::net::SocketAddr;
use std::time::Duration;
use switchyard::demo::manifests;
use switchyard_proto::model::ObjectName;
use switchyard_proto::pb;
use switchyard_test_support::eventually;
use switchyard_test_support::eventually::holds;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn registrations_elsewhere_do_not_break_a_proxys_configuration_stream() -> anyhow::Result<()>
{
    // Before the fix every registration (a version-only update: nothing a
    // proxy sees changed) made every proxy log "configuration stream
    // failed ... does not decode", reconnect and download everything.
    let coordinator = Coordinator::start().await?;
    coordinator.apply(&manifests::base()).await?;
    let proxy = Proxy::start("p1", &coordinator).await?;
    proxies_registered(&coordinator, 1).await?;
    let errors_before = proxy.metric("switchyard_proxy_coordinator_errors_total");
    let mut fleet = coordinator.fleet_client();
    for i in 0..5 {
        fleet
            .register(pb::RegisterRequest::for_proxy(
                format!("other-{i}"),
                "b",
                "",
            ))
            .await?;
    }
    let last = coordinator.bound.coordinator.status().applied_index;
    eventually("the proxy to hold the newest version", WAIT, async || {
        let held = proxy.metric("switchyard_proxy_config_version_received");
        holds(held >= last as f64, || {
            format!("holds {held}, newest {last}")
        })
    })
    .await?;
    assert_eq!(
        proxy.metric("switchyard_proxy_coordinator_errors_total"),
        errors_before,
        "the stream failed on a version-only update"
    );
    assert_eq!(coordinator.metrics.open_streams("watch"), 1);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_and_status_streams_end_when_their_clients_go() -> anyhow::Result<()> {
    // Before the fix a stream's task ended only when a send failed, so a
    // gone client kept a task (and a snapshot) until the next change.
    let coordinator = Coordinator::start().await?;
    coordinator.apply(&manifests::base()).await?;
    let mut streams = Vec::new();
    let mut statuses = Vec::new();
    for i in 0..3 {
        let mut stream = coordinator
            .fleet_client()
            .watch(pb::WatchRequest {
                proxy_id: format!("watcher-{i}"),
                known_version: 0,
                accepts_deltas: false,
                accepts_lz4: false,
            })
            .await?
            .into_inner();
        stream.message().await?.context("a first update")?;
        streams.push(stream);
    }
    for _ in 0..2 {
        let mut stream = coordinator
            .admin_client()
            .watch_status(pb::StatusRequest::default())
            .await?
            .into_inner();
        stream.message().await?.context("a first status")?;
        statuses.push(stream);
    }
    assert_eq!(coordinator.metrics.open_streams("watch"), 3);
    assert_eq!(coordinator.metrics.open_streams("status"), 2);
    drop(streams);
    drop(statuses);
    // Nothing changes in the store from here on: only the clients leaving
    // can end the streams.
    eventually("every stream to end", Duration::from_secs(5), async || {
        let (w, s) = (
            coordinator.metrics.open_streams("watch"),
            coordinator.metrics.open_streams("status"),
        );
        holds(w == 0 && s == 0, || {
            format!("{w} watch and {s} status streams open")
        })
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_started_while_routes_exist_is_ready_only_once_it_serves_them() -> anyhow::Result<()>
{
    // Before the fix `/ready` said yes as soon as a configuration was
    // installed, while the route still waited for its backend to warm up on
    // this proxy — and the proxy answered 404 for it.
    let coordinator = Coordinator::start().await?;
    let blue = tokio::task::block_in_place(backend)?;
    let address: SocketAddr = blue.address("http")?.parse()?;
    let first = Proxy::start("p1", &coordinator).await?;
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend("blue", address),
        manifests::route("blue", "v1", "30s")
    );
    coordinator.apply(&yaml).await?;
    eventually("the route served by the first proxy", WAIT, async || {
        let code = first.get().await;
        holds(code == 200, || format!("answered {code}"))
    })
    .await?;
    let route = ObjectName::new(manifests::NAMESPACE, manifests::ROUTE);
    let row = coordinator.bound.coordinator.status().routes[0].clone();
    assert!(row.active_generation.is_some(), "{route}: {row:?}");

    // The backend stalls (SIGSTOP) while the second proxy starts: its
    // first health check hangs, so for a while it holds the route but
    // cannot serve it yet. The first proxy keeps it (one slow check is not
    // enough to take an endpoint out).
    blue.pause();
    let second = Proxy::start("p2", &coordinator).await?;
    eventually("the second proxy's configuration", WAIT, async || {
        let held = second.metric("switchyard_proxy_config_version_received");
        holds(held > 0.0, || "nothing yet")
    })
    .await?;
    let stalled_ready = second.dataplane.is_ready();
    // This sleep is the test: `/ready` must stay false for a while the
    // backend is stalled; there is no event that says "not yet".
    tokio::time::sleep(Duration::from_millis(300)).await;
    let stalled_ready = stalled_ready || second.dataplane.is_ready();
    blue.resume();
    assert!(
        !stalled_ready,
        "ready while the route waited for its backend (it would answer 404)"
    );
    // Once ready, every request is served: twenty looks at `/ready`, each
    // followed by a request.
    let mut readies = 0;
    eventually("the second proxy ready (20 times)", WAIT, async || {
        if second.dataplane.is_ready() {
            readies += 1;
            let code = second.get().await;
            assert_eq!(code, 200, "/ready said yes, and the route answered {code}");
        }
        holds(readies >= 20, || format!("ready {readies} times"))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_applied_before_any_proxy_waits_and_is_served_once_one_comes() -> anyhow::Result<()>
{
    // Before the fix the first generation timed out ("0 live proxies"),
    // was abandoned, and the route was never served once proxies came.
    let coordinator = Coordinator::start().await?;
    let blue = tokio::task::block_in_place(backend)?;
    let address: SocketAddr = blue.address("http")?.parse()?;
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend("blue", address),
        manifests::route("blue", "v1", "500ms")
    );
    coordinator.apply(&yaml).await?;
    // Ten timeouts' worth with nobody to judge readiness. This sleep is
    // the test: nothing may happen to the route during it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let row = coordinator.bound.coordinator.status().routes[0].clone();
    assert!(row.pending_generation.is_some(), "{row:?}");
    assert_eq!(row.last_failure, None, "{row:?}");
    assert!(
        row.evidence
            .as_deref()
            .is_some_and(|e| e.contains("0 live proxies")),
        "{row:?}"
    );
    let proxy = Proxy::start("p1", &coordinator).await?;
    eventually("the route served", WAIT, async || {
        let code = proxy.get().await;
        holds(code == 200, || format!("answered {code}"))
    })
    .await?;
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_forced_cutover_is_not_a_successful_wait() -> anyhow::Result<()> {
    // Before: `on-timeout: force` switched to the unwarmed backend and
    // `apply --wait` exited 0, though the README says a timed-out cutover
    // exits non-zero.
    let coordinator = Coordinator::start().await?;
    let _proxy = Proxy::start("p1", &coordinator).await?;
    proxies_registered(&coordinator, 1).await?;
    // Nothing listens on the endpoint: the backend never becomes ready.
    let nobody: SocketAddr = "127.0.0.1:9".parse()?;
    let yaml = format!(
        "{}{}{}",
        manifests::base(),
        manifests::backend("dead", nobody),
        manifests::route("dead", "v1", "1s").replace(
            "annotations: {switchyard.io/cutover-timeout: 1s}",
            "annotations: {switchyard.io/cutover-timeout: 1s, switchyard.io/on-timeout: force}"
        )
    );
    let index = coordinator.apply(&yaml).await?;
    let route = ObjectName::new(manifests::NAMESPACE, manifests::ROUTE);
    let generation = coordinator.bound.coordinator.status().routes[0]
        .pending_generation
        .context("pending")?;
    let waited = coordinator
        .admin()
        .wait_ready(&[(route, generation)].into(), index, WAIT, |_| {})
        .await;
    assert!(
        matches!(waited, Err(switchyard::client::WaitError::Forced { .. })),
        "{waited:?}"
    );
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_a_proxy_holds_back_is_not_counted_served_though_its_configuration_is_newer()
-> anyhow::Result<()> {
    // A proxy's heartbeat says what it serves relative to a configuration
    // version (`applied_through`) and lists only the routes it serves
    // otherwise. A forced commit of a route whose backend is dead is held
    // back by the proxy (until its apply wait limit): the route must stay
    // uncounted while the proxy's version moves past its commit with
    // another route, and count once the proxy serves it.
    let coordinator = Coordinator::start().await?;
    let _proxy = Proxy::start("p1", &coordinator).await?;
    proxies_registered(&coordinator, 1).await?;
    let blue = backend()?;
    let live: SocketAddr = blue.address("http")?.parse()?;
    let nobody: SocketAddr = "127.0.0.1:9".parse()?;
    let forced = manifests::route("dead", "v1", "1s").replace(
        "annotations: {switchyard.io/cutover-timeout: 1s}",
        "annotations: {switchyard.io/cutover-timeout: 1s, switchyard.io/on-timeout: force}",
    );
    let yaml = format!(
        "{}{}{}{forced}",
        manifests::base(),
        manifests::backend("dead", nobody),
        manifests::backend("blue", live),
    );
    coordinator.apply(&yaml).await?;
    let row = |name: &str| {
        let status = coordinator.bound.coordinator.status();
        status.routes.into_iter().find(|r| r.name == name)
    };
    eventually("the dead route's commit forced", WAIT, async || {
        let r = row("app");
        holds(
            r.as_ref()
                .is_some_and(|r| r.active_generation.is_some() && r.pending_generation.is_none()),
            || format!("{r:?}"),
        )
    })
    .await?;
    let held_back = row("app")
        .and_then(|r| r.active_generation)
        .context("active")?;

    // Another route, on a live backend, committed after it and served.
    let other = manifests::route("blue", "v1", "30s").replace("name: app", "name: other");
    coordinator.apply(&other).await?;
    eventually("the other route Ready", WAIT, async || {
        let r = row("other");
        holds(r.as_ref().is_some_and(|r| r.ready), || format!("{r:?}"))
    })
    .await?;
    // The proxy serves a configuration past the forced commit, and lists
    // the route it holds back: not counted.
    let app = row("app").context("stored")?;
    assert_eq!(
        app.applied.as_deref(),
        Some(format!("0 of 1 proxies at generation {held_back}").as_str()),
        "{app:?}"
    );
    assert!(!app.ready);

    // Past its apply wait limit the proxy serves it anyway: counted.
    eventually("the held-back route served", 3 * WAIT, async || {
        let r = row("app");
        let at = format!("1 of 1 proxies at generation {held_back}");
        holds(
            r.as_ref()
                .is_some_and(|r| r.applied.as_deref() == Some(at.as_str())),
            || format!("{r:?}"),
        )
    })
    .await?;
    Ok(())
}

/// A route file with the demo route and a second one, `demo/other`.
fn two_routes() -> String {
    let route = manifests::route("blue", "v1", "30s");
    let other = route.replace("name: app", "name: other");
    format!("{route}{other}")
}

fn status_of(reply: &pb::StatusReply) -> anyhow::Result<switchyard_proto::model::ClusterStatus> {
    Ok(serde_json::from_slice(&reply.status_json)?)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_status_of_some_routes_has_their_rows_alone_and_proxy_rows_unless_left_out()
-> anyhow::Result<()> {
    let coordinator = Coordinator::start().await?;
    coordinator.apply(&manifests::base()).await?;
    coordinator.apply(&two_routes()).await?;
    let mut admin = coordinator.admin_client();
    let names = |s: &switchyard_proto::model::ClusterStatus| {
        s.routes.iter().map(|r| r.name.clone()).collect::<Vec<_>>()
    };

    coordinator
        .fleet_client()
        .register(pb::RegisterRequest::for_proxy("agent", "a", ""))
        .await?;
    let proxy_ids = |s: &switchyard_proto::model::ClusterStatus| {
        s.proxies.iter().map(|p| p.id.clone()).collect::<Vec<_>>()
    };

    let all = status_of(admin.status(pb::StatusRequest::default()).await?.get_ref())?;
    assert_eq!(names(&all), ["app", "other"]);
    assert_eq!(proxy_ids(&all), ["agent"]);
    let only = pb::StatusRequest {
        routes: vec!["demo/other".into(), "demo/not-stored".into()],
        only_routes: true,
        without_proxies: false,
    };
    let some = status_of(admin.status(only.clone()).await?.get_ref())?;
    assert_eq!(names(&some), ["other"], "a name not stored has no row");
    assert_eq!(some.applied_index, all.applied_index);
    assert_eq!(proxy_ids(&some), ["agent"], "proxy rows unless left out");
    let none = pb::StatusRequest {
        routes: vec![],
        only_routes: true,
        without_proxies: false,
    };
    let bare = status_of(admin.status(none).await?.get_ref())?;
    assert!(bare.routes.is_empty() && bare.leader.is_some());
    assert_eq!(proxy_ids(&bare), ["agent"]);
    let routes_alone = pb::StatusRequest {
        without_proxies: true,
        ..only.clone()
    };
    let lean = status_of(admin.status(routes_alone.clone()).await?.get_ref())?;
    assert_eq!(names(&lean), ["other"]);
    assert!(lean.proxies.is_empty(), "{:?}", lean.proxies);
    assert_eq!(lean.routes, some.routes);
    let lean_everything = pb::StatusRequest {
        without_proxies: true,
        ..Default::default()
    };
    let lean_all = status_of(admin.status(lean_everything).await?.get_ref())?;
    assert_eq!(names(&lean_all), ["app", "other"]);
    assert!(lean_all.proxies.is_empty());

    let bad = pb::StatusRequest {
        routes: vec!["no-namespace".into()],
        only_routes: true,
        without_proxies: false,
    };
    let refused = admin.status(bad).await.expect_err("a bad route name");
    assert_eq!(refused.code(), tonic::Code::InvalidArgument);
    assert!(
        refused
            .message()
            .contains("\"no-namespace\" is not namespace/name"),
        "{}",
        refused.message()
    );

    let mut watch = admin.watch_status(only).await?.into_inner();
    let first = watch.message().await?.context("a first status")?;
    assert_eq!(names(&status_of(&first)?), ["other"]);
    assert_eq!(proxy_ids(&status_of(&first)?), ["agent"]);
    let mut lean_watch = admin.watch_status(routes_alone).await?.into_inner();
    let first = status_of(&lean_watch.message().await?.context("a first status")?)?;
    assert_eq!(names(&first), ["other"]);
    assert!(first.proxies.is_empty());
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn heartbeat_changes_on_a_set_the_leader_does_not_hold_are_refused_and_it_asks_for_the_whole()
-> anyhow::Result<()> {
    let coordinator = Coordinator::start().await?;
    coordinator.apply(&manifests::base()).await?;
    coordinator.apply(&two_routes()).await?;
    let mut fleet = coordinator.fleet_client();
    let registration = fleet
        .register(pb::RegisterRequest::for_proxy("agent", "a", ""))
        .await?
        .into_inner()
        .registration;
    let status = || coordinator.bound.coordinator.status();
    let generation = |name: &str| {
        let s = status();
        let r = s.routes.iter().find(|r| r.name == name).expect("stored");
        r.pending_generation
            .or(r.active_generation)
            .expect("a generation")
    };
    let applied = |name: &str| {
        status()
            .routes
            .iter()
            .find(|r| r.name == name)
            .and_then(|r| r.applied.clone())
    };
    let served = |name: &str| pb::AppliedGeneration {
        namespace: "demo".into(),
        name: name.into(),
        generation: generation(name),
    };
    let beat = |seq, base, delta, applied, removed| pb::HeartbeatRequest {
        proxy_id: "agent".into(),
        registration,
        applied,
        applied_delta: delta,
        applied_seq: seq,
        applied_base: base,
        applied_removed: removed,
        config_version: 0,
        applied_digest: Vec::new(),
        // Every generation served, listed (as proxies older than
        // `applied_through` say it).
        applied_through: 0,
    };

    let whole = fleet
        .heartbeat(beat(1, 0, false, vec![served("app")], vec![]))
        .await?
        .into_inner();
    assert!(whole.known);
    assert_eq!(whole.applied_seq, 1);
    let at = |name: &str| format!("1 of 1 proxies at generation {}", generation(name));
    assert_eq!(applied("app"), Some(at("app")));

    // Changes on a set the leader never held: refused, nothing changes.
    let gone = pb::RouteName {
        namespace: "demo".into(),
        name: "app".into(),
    };
    let refused = fleet
        .heartbeat(beat(6, 5, true, vec![], vec![gone.clone()]))
        .await?
        .into_inner();
    assert!(refused.known, "the lease is renewed all the same");
    assert_eq!(refused.applied_seq, 1, "send the whole set");
    assert_eq!(applied("app"), Some(at("app")));

    // Changes on the set held: taken.
    let taken = fleet
        .heartbeat(beat(2, 1, true, vec![served("other")], vec![gone]))
        .await?
        .into_inner();
    assert_eq!(taken.applied_seq, 2);
    assert_eq!(
        applied("app"),
        Some(format!(
            "0 of 1 proxies at generation {}",
            generation("app")
        ))
    );
    assert_eq!(applied("other"), Some(at("other")));
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_digest_another_proxy_was_just_asked_for_waits_for_that_set_and_is_taken_by_digest()
-> anyhow::Result<()> {
    use switchyard_proto::incremental::{AWAIT_WHOLE, SetUpdate, digest};
    let coordinator = Coordinator::start().await?;
    coordinator.apply(&manifests::base()).await?;
    let mut fleet = coordinator.fleet_client();
    let mut registrations = Vec::new();
    for id in ["first", "second", "third"] {
        let reply = fleet
            .register(pb::RegisterRequest::for_proxy(id, "a", ""))
            .await?;
        registrations.push(reply.into_inner().registration);
    }
    let served = |v: u64| -> imbl::OrdMap<ObjectName, u64> {
        (0..100)
            .map(|i| (ObjectName::new("demo", format!("route-{i:03}")), v))
            .collect()
    };
    let (set, never_sent) = (served(7), served(8));
    let beat = |i: usize, update: SetUpdate<ObjectName, u64>| {
        let mut request = pb::HeartbeatRequest {
            proxy_id: ["first", "second", "third"][i].into(),
            registration: registrations[i],
            ..Default::default()
        };
        request.set_applied(update);
        request
    };
    let named = |set: &imbl::OrdMap<ObjectName, u64>| SetUpdate::Known {
        seq: 1,
        digest: digest(set),
    };
    let waits = || -> anyhow::Result<u64> {
        let text = coordinator.metrics_text()?;
        let line = text
            .lines()
            .find(|l| l.starts_with("switchyard_coordinator_proxy_set_digest_waits_total "))
            .with_context(|| format!("no digest waits counted in:\n{text}"))?;
        Ok(line.rsplit(' ').next().unwrap_or_default().parse()?)
    };

    // The first proxy to name the set is asked for it whole at once.
    let asked = fleet.heartbeat(beat(0, named(&set))).await?.into_inner();
    assert_eq!(asked.applied_seq, 0, "asked for the whole set");
    // The second naming it meanwhile is held, not asked for a copy of its own.
    let mut second = coordinator.fleet_client();
    let waiting = tokio::spawn({
        let request = beat(1, named(&set));
        async move { second.heartbeat(request).await }
    });
    let started = std::time::Instant::now();
    while waits()? == 0 {
        anyhow::ensure!(
            started.elapsed() < Duration::from_secs(10),
            "the call never waited"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert!(!waiting.is_finished(), "answered before the set came");
    // The first sends it whole: the held call is taken by digest.
    let whole = SetUpdate::Whole {
        seq: 1,
        entries: set.iter().map(|(k, v)| (k.clone(), *v)).collect(),
    };
    let taken = fleet.heartbeat(beat(0, whole)).await?.into_inner();
    assert_eq!(taken.applied_seq, 1);
    let waited = waiting.await??.into_inner();
    assert_eq!(waited.applied_seq, 1, "taken by digest after waiting");

    // A set nobody sends: the second namer waits, then is asked whole too.
    let asked = fleet
        .heartbeat(beat(2, named(&never_sent)))
        .await?
        .into_inner();
    assert_eq!(asked.applied_seq, 0);
    let before = std::time::Instant::now();
    let refused = fleet
        .heartbeat(beat(1, named(&never_sent)))
        .await?
        .into_inner();
    assert_eq!(refused.applied_seq, 1, "what was held stays; send it whole");
    assert!(
        before.elapsed() >= AWAIT_WHOLE - Duration::from_millis(50),
        "answered after {:?}, before the wait was over",
        before.elapsed()
    );
    assert_eq!(waits()?, 2);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_set_another_proxy_sent_whole_is_taken_by_its_digest_and_an_unknown_one_refused()
-> anyhow::Result<()> {
    use switchyard_proto::incremental::{SetUpdate, digest};
    use switchyard_proto::model::ObjectName;
    let coordinator = Coordinator::start().await?;
    coordinator.apply(&manifests::base()).await?;
    let mut fleet = coordinator.fleet_client();
    let mut register = async |id: &str| -> anyhow::Result<u64> {
        Ok(fleet
            .register(pb::RegisterRequest::for_proxy(id, "a", ""))
            .await?
            .into_inner()
            .registration)
    };
    let (first, second) = (register("first").await?, register("second").await?);
    // A set large enough to be named by digest: 100 served generations.
    let set: imbl::OrdMap<ObjectName, u64> = (0..100)
        .map(|i| (ObjectName::new("demo", format!("route-{i:03}")), 7u64))
        .collect();
    let beat = |proxy: &str, registration: u64, update: SetUpdate<ObjectName, u64>| {
        let mut request = pb::HeartbeatRequest {
            proxy_id: proxy.into(),
            registration,
            ..Default::default()
        };
        request.set_applied(update);
        request
    };
    let mut fleet = coordinator.fleet_client();

    // Nobody sent it yet: the digest is refused, nothing is held.
    let named = SetUpdate::Known {
        seq: 1,
        digest: digest(&set),
    };
    let refused = fleet
        .heartbeat(beat("second", second, named.clone()))
        .await?
        .into_inner();
    assert!(refused.known);
    assert_eq!(refused.applied_seq, 0, "send the whole set");

    // The first proxy sends it whole; now the second's digest is taken.
    let whole = SetUpdate::Whole {
        seq: 1,
        entries: set.iter().map(|(k, v)| (k.clone(), *v)).collect(),
    };
    let taken = fleet
        .heartbeat(beat("first", first, whole))
        .await?
        .into_inner();
    assert_eq!(taken.applied_seq, 1);
    let taken = fleet
        .heartbeat(beat("second", second, named))
        .await?
        .into_inner();
    assert_eq!(taken.applied_seq, 1, "taken by digest");

    // A digest of another set is not.
    let mut other = set.clone();
    other.insert(ObjectName::new("demo", "route-000"), 8);
    let unknown = fleet
        .heartbeat(beat(
            "second",
            second,
            SetUpdate::Known {
                seq: 2,
                digest: digest(&other),
            },
        ))
        .await?
        .into_inner();
    assert_eq!(unknown.applied_seq, 1, "what was held stays");
    let metrics = coordinator.metrics_text()?;
    for series in [
        r#"form="digest",outcome="refused""#,
        r#"form="digest",outcome="taken""#,
        r#"form="whole",outcome="taken""#,
    ] {
        assert!(
            metrics
                .lines()
                .any(|l| l.starts_with("switchyard_coordinator_proxy_sets_total")
                    && l.contains(series)
                    && !l.ends_with(" 0")),
            "no {series} in:\n{metrics}"
        );
    }
    Ok(())
}
