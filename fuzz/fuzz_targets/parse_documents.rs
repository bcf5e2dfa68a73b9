//! Fuzz target: `parse_documents` and `parse_keys` on any bytes (made
//! UTF-8 lossily). Same properties as `kubeconfig/tests/prop_yaml.rs`: no
//! panic; `Ok` resources validate; errors start with the source name; and
//! a text both accept names the same objects to both (`apply -f` and
//! `delete -f` must agree; a non-string `metadata.namespace` once broke
//! this).

#![no_main]

use libfuzzer_sys::fuzz_target;
use switchyard_kubeconfig::{parse_documents, parse_keys};
use switchyard_proto::model::validate_resource;

const SOURCE: &str = "fuzz.yaml";

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse_documents(SOURCE, &text) {
        Ok(resources) => {
            for r in &resources {
                if let Err(e) = validate_resource(r) {
                    panic!("accepted an invalid resource: {e}");
                }
            }
            let keys =
                parse_keys(SOURCE, &text).expect("parse_keys accepts what parse_documents does");
            let expected: Vec<_> = resources.iter().map(|r| r.key()).collect();
            assert_eq!(keys, expected);
        }
        Err(e) => assert!(e.to_string().starts_with(SOURCE), "{e}"),
    }
    if let Err(e) = parse_keys(SOURCE, &text) {
        assert!(e.to_string().starts_with(SOURCE), "{e}");
    }
});
