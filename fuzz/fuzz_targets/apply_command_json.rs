//! Fuzz target: log entries as they arrive from peers (JSON) decoded into
//! `Command`s and applied to a state that already holds a route with a
//! pending generation, a Service and a proxy. Property, as in
//! `coordinator/tests/prop_state.rs`: `apply` never panics (debug builds
//! re-check invariants) and a rejected command changes nothing but
//! `last_index`. The input is a JSON array of commands (or one command);
//! seed the corpus with serialized commands so mutations stay near valid
//! JSON.

#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_coordinator::state::{Command, LogPosition, ReplicatedState};
use switchyard_proto::model::*;

fn seeded() -> ReplicatedState {
    let mut state = ReplicatedState::default();
    let route = HttpRoute {
        kind: Default::default(),
        meta: ObjectMeta::named("default", "a"),
        parent_refs: vec![],
        hostnames: vec![],
        rules: vec![RouteRule {
            backend_refs: vec![BackendRef::service("blue", 80)],
            ..Default::default()
        }],
    };
    let service = Service {
        meta: ObjectMeta::named("default", "blue"),
        ports: vec![ServicePort {
            name: None,
            port: 80,
            target_port: None,
            app_protocol: None,
        }],
    };
    let setup = [
        Command::Apply {
            resources: vec![Resource::HttpRoute(route), Resource::Service(service)],
            defaults: CutoverSettings::default(),
            limits: None,
            validation: Some(1),
        },
        Command::RegisterProxy {
            id: "p1".into(),
            zone: "z".into(),
            admin_address: "127.0.0.1:1".into(),
        },
    ];
    for (i, c) in setup.iter().enumerate() {
        let r = state.apply(LogPosition::new(i as u64 + 1, 1), c);
        assert!(r.0.is_ok(), "seed command refused: {r:?}");
    }
    state
}

fuzz_target!(|data: &[u8]| {
    let commands: Vec<Command> = match serde_json::from_slice::<Vec<Command>>(data) {
        Ok(many) => many,
        Err(_) => match serde_json::from_slice::<Command>(data) {
            Ok(one) => vec![one],
            Err(_) => return,
        },
    };
    let mut state = seeded();
    for (i, command) in commands.iter().enumerate() {
        let index = state.last_index + 1 + i as u64;
        let before = state.clone();
        let response = state.apply(LogPosition::new(index, 1), command);
        if response.0.is_err() {
            let mut expected = before;
            expected.last_index = index;
            expected.last_term = 1;
            assert!(state == expected, "rejected {command:?} changed the state");
        }
    }
});
