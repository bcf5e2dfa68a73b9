//! Property: `parse_documents` is total over hostile text. Whatever it is
//! given — arbitrary bytes (made UTF-8), arbitrary Unicode, YAML token
//! soup, or real configuration mutated line by line — it returns instead of
//! panicking, and either
//!
//! - `Ok`, where every resource passes the model's `validate_resource` (the
//!   parser promises to validate; this holds it to that) and `parse_keys`
//!   agrees on the keys, or
//! - `Err`, whose `Display` starts with the source name the caller passed,
//!   so an operator can always tell which file is broken.
//!
//! Why: this parser reads files operators hand to `switchyard apply -f`
//! and, through the same code, objects from live clusters. A panic there
//! takes a coordinator client or a watcher down on one bad object.
//!
//! The seeds of the mutations are real documents: the built-in
//! `default.yaml` and the `gateways`/`routes` of every Gateway API
//! conformance file (`tests/data/gateway-api` of the repository; the test
//! fails rather than skips without it). Mutating valid
//! configuration reaches the translation and validation code, which random
//! bytes almost never do.
//!
//! Cases per property: 256, or `PROPTEST_CASES`. Failures are not persisted
//! to a regressions file (the shrunk input is printed instead, and a real
//! bug becomes a named test); every run prints a seed that
//! `PROPTEST_RNG_SEED` replays.

#[path = "prop_yaml/mutations.rs"]
mod mutations;

use mutations::{mutated_document, token_soup};
use proptest::prelude::*;
use serde_json::Value;
use std::sync::LazyLock;
use switchyard_kubeconfig::{DEFAULT_CONFIG, parse_documents, parse_keys};
use switchyard_proto::model::validate_resource;
use switchyard_test_support::strategies;

/// The name passed as `source`; every error must start with it.
const SOURCE: &str = "hostile-input.yaml";

/// Default cases per property: enough to run in a few seconds in debug on
/// two cores; raise with `PROPTEST_CASES` for a longer hunt.
const CASES: u32 = 256;

fn config() -> ProptestConfig {
    strategies::config(
        CASES,
        "cargo test -p switchyard-kubeconfig --test prop_yaml",
    )
}

/// Real configuration texts to mutate: `default.yaml` as written (with its
/// comments), then one multi-document stream per conformance file.
static CORPUS: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut corpus = vec![DEFAULT_CONFIG.to_string()];
    // Sorted, so a seed replays the same corpus order.
    for path in switchyard_test_support::gateway_api_case_files() {
        let text = std::fs::read_to_string(&path).expect("readable conformance file");
        let data: Value = yaml_serde::from_str(&text).expect("conformance file is YAML");
        let docs: Vec<String> = ["gateways", "routes"]
            .iter()
            .flat_map(|list| data[list].as_array().into_iter().flatten())
            .map(|object| yaml_serde::to_string(object).expect("a value renders as YAML"))
            .collect();
        if !docs.is_empty() {
            corpus.push(docs.join("---\n"));
        }
    }
    assert!(corpus.len() > 10, "too few conformance files found");
    corpus
});

/// The property itself, for one input text.
fn check(text: &str) -> Result<(), TestCaseError> {
    match parse_documents(SOURCE, text) {
        Ok(resources) => {
            for r in &resources {
                if let Err(e) = validate_resource(r) {
                    return Err(TestCaseError::fail(format!(
                        "parse_documents accepted an invalid resource: {e}"
                    )));
                }
            }
        }
        Err(e) => {
            let shown = e.to_string();
            prop_assert!(
                shown.starts_with(SOURCE),
                "error does not name the source: {}",
                shown
            );
            prop_assert_eq!(&e.at.file, SOURCE);
        }
    }
    // `switchyard delete -f` reads files through `parse_keys`: total too.
    if let Err(e) = parse_keys(SOURCE, text) {
        prop_assert!(e.to_string().starts_with(SOURCE), "{}", e);
    }
    Ok(())
}

/// A file `apply -f` accepts must name the same objects to `delete -f`:
/// otherwise delete removes something else, or nothing.
fn check_keys_agree(text: &str) -> Result<(), TestCaseError> {
    if let Ok(resources) = parse_documents(SOURCE, text) {
        let keys = parse_keys(SOURCE, text)
            .map_err(|e| TestCaseError::fail(format!("parse_keys refused it: {e}")))?;
        let expected: Vec<_> = resources.iter().map(|r| r.key()).collect();
        prop_assert_eq!(keys, expected);
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    /// Arbitrary bytes, made UTF-8 the way a lossy reader would (the entry
    /// point takes `&str`; `parse_file` refuses non-UTF-8 before parsing).
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    /// Arbitrary Unicode text.
    #[test]
    fn arbitrary_unicode_never_panics(text in "\\PC{0,400}|(?s:.{0,400})") {
        check(&text)?;
    }

    /// Random sequences of YAML syntax and Kubernetes-looking words.
    #[test]
    fn yaml_token_soup_never_panics(text in token_soup()) {
        check(&text)?;
    }

    /// Real configuration, mutated: the inputs that reach translation and
    /// validation.
    #[test]
    fn mutated_real_configuration_never_panics((text, _mutations) in mutated_document()) {
        check(&text)?;
    }

    /// Several mutated documents in one stream: duplicates across
    /// documents, empty documents, and a broken document after good ones.
    /// `parse_keys` agrees with `parse_documents` on mutated real files.
    #[test]
    fn parse_keys_agrees_with_parse_documents((text, _mutations) in mutated_document()) {
        check_keys_agree(&text)?;
    }

    #[test]
    fn mutated_streams_never_panic(
        docs in prop::collection::vec(mutated_document(), 1..4),
        separator in prop::sample::select(vec!["---\n", "\n---\n", "---\n---\n", "--- \n", "...\n---\n"]),
    ) {
        let text = docs.iter().map(|(t, _)| t.as_str()).collect::<Vec<_>>().join(separator);
        check(&text)?;
    }
}

/// The unmutated corpus parses: otherwise the mutations start from errors
/// and never reach translation.
#[test]
fn every_seed_document_parses() {
    for (i, text) in CORPUS.iter().enumerate() {
        let parsed = parse_documents(SOURCE, text);
        assert!(parsed.is_ok(), "corpus entry {i}: {}", parsed.unwrap_err());
    }
}

/// The minimal case `parse_keys_agrees_with_parse_documents` found: the
/// header pass reads `metadata.namespace` from a generic value and treats a
/// number (or boolean) as absent, so `default`; the typed pass gets the
/// scalar's text, `2024`, which is a valid namespace. `apply -f` then
/// creates `2024/web` and `delete -f` deletes `default/web`.
#[test]
fn numeric_namespace_gives_one_key_to_both_parsers() {
    // Both parsers now refuse a non-string namespace (as the Kubernetes API
    // does), so `apply -f` and `delete -f` can never name different objects.
    let text = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: 2024\n";
    let applied = parse_documents(SOURCE, text).expect_err("a number is not a namespace");
    let deleted = parse_keys(SOURCE, text).expect_err("a number is not a namespace");
    for e in [applied.to_string(), deleted.to_string()] {
        assert!(
            e.contains("metadata.namespace") && e.contains("must be a string"),
            "{e}"
        );
    }
    let quoted = text.replace("2024", "\"2024\"");
    let applied: Vec<_> = parse_documents(SOURCE, &quoted)
        .expect("parses")
        .iter()
        .map(|r| r.key())
        .collect();
    assert_eq!(applied, parse_keys(SOURCE, &quoted).expect("parses"));
}

/// Inputs built to exhaust resources, which random generation is unlikely
/// to hit: deep nesting (recursion) and alias expansion ("billion laughs",
/// memory). Each must end in an error naming the file (and, being refused early or
/// bounded by the parser, cannot hang `apply -f`).
#[test]
fn resource_exhaustion_inputs_fail_cleanly() {
    let mut laughs = String::from("a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n");
    for level in 1..10 {
        let refs = vec![format!("*{}", alias(level - 1)); 9].join(", ");
        laughs.push_str(&format!("{0}: &{0} [{refs}]\n", alias(level)));
    }
    let cases = [
        ("flow sequences", "[".repeat(100_000)),
        ("flow mappings", "{".repeat(100_000)),
        (
            "block sequences",
            (0..2_000)
                .map(|i| format!("{}- \n", " ".repeat(i)))
                .collect::<String>(),
        ),
        (
            "nested metadata",
            format!(
                "apiVersion: v1\nkind: Service\nmetadata: {}",
                "{a: ".repeat(500)
            ),
        ),
        ("billion laughs", laughs),
    ];
    for (what, text) in cases {
        assert_clean_error(what, &text);
    }
}

/// Deeply nested flow mappings *with keys* (`{a: {a: {a: ...`) take time
/// quadratic in the nesting depth inside the YAML scanner (yaml_serde
/// 0.10.7 over libyaml-rs 0.3.0; measured in release: 39 KB 0.4 s, 78 KB
/// 2.4 s, 156 KB 9 s), so nesting is refused before the scanner sees it.
#[test]
fn deep_flow_mapping_keys_are_refused_before_parsing() {
    let err = parse_documents(SOURCE, &"{a: ".repeat(20_000)).expect_err("too deep");
    let text = err.to_string();
    assert!(text.starts_with(SOURCE), "{text}");
    assert!(
        text.contains("nest deeper than 64 levels at line 1"),
        "{text}"
    );
    let keys = parse_keys(SOURCE, &"{a: ".repeat(20_000)).expect_err("too deep");
    assert!(keys.to_string().contains("nest deeper than"), "{keys}");
}

/// `text` fails to parse, with an error naming the file.
fn assert_clean_error(what: &str, text: &str) {
    let err = parse_documents(SOURCE, text).expect_err(what);
    assert!(err.to_string().starts_with(SOURCE), "{what}: {err}");
}

fn alias(level: usize) -> String {
    // Anchor names are letters, one per level: a, b, c...
    char::from(b'a' + u8::try_from(level).expect("few levels")).to_string()
}
