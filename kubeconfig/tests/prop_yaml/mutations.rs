//! The generators of `prop_yaml`: hostile text for the YAML parser —
//! real configuration mutated line by line with hostile scalars, and YAML
//! token soup. Only the generators live here; the properties stay in
//! `prop_yaml.rs`.

use super::CORPUS;
use proptest::prelude::*;
use proptest::sample::Index;

/// One edit of a text. Indexes are resolved against the text as it is when
/// the edit applies, so any sequence of edits is valid.
#[derive(Debug, Clone)]
pub enum Mutation {
    DeleteLine(Index),
    DuplicateLine(Index),
    SwapLines(Index, Index),
    /// Replace one character with another (any Unicode scalar).
    FlipChar(Index, char),
    /// Add (positive) or remove (negative) leading spaces of a line.
    Indent(Index, i8),
    /// Replace the value of a `key: value` or `- value` line.
    ReplaceScalar(Index, String),
    InsertLine(Index, String),
    /// Cut the text at a character.
    Truncate(Index),
}

/// Values that break parsers and translators: numbers out of every integer
/// range, negatives where ports go, long and odd Unicode strings, YAML
/// syntax in scalar position, and strings the validators must reject.
fn hostile_scalar() -> impl Strategy<Value = String> {
    let fixed = prop::sample::select(vec![
        "99999999999999999999999999999",
        "18446744073709551616",
        "-9223372036854775809",
        "4294967296",
        "65536",
        "0",
        "-1",
        "-0",
        "1e309",
        "-.inf",
        ".nan",
        "0x7fffffff",
        "0o777",
        "1_000",
        "~",
        "null",
        "true",
        "[]",
        "{}",
        "[a, [b, {c: d}]]",
        "''",
        "\"\"",
        "*undefined_alias",
        "&anchor value",
        "!!binary aGVsbG8=",
        "!custom tag",
        "!!int not-a-number",
        "? complex key",
        "|",
        ">-",
        "\"unterminated",
        "'unterminated",
        "\"\\u0000\"",
        "\"\\uD800\"",
        "\"\\xff\"",
        "/(",
        "(?P<x",
        "[z-a]",
        "a{1000000}",
        "*.example.com",
        "*",
        "Bad_Name",
        "example.com:8080",
        "[::1]",
        "http://x/y",
        "Gateway",
        "HTTPRoute",
        "gateway.networking.k8s.io/v1",
        "v1",
        "PathPrefix",
        "RegularExpression",
        "RequestRedirect",
        "URLRewrite",
        "\u{202e}rtl",
        "\u{feff}bom",
        "ünïcödé",
        "日本語",
        "🦀",
    ])
    .prop_map(str::to_string);
    prop_oneof![
        4 => fixed,
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => any::<f64>().prop_map(|n| n.to_string()),
        1 => ("[a-z0-9.-]{1,4}", 60usize..5000).prop_map(|(s, n)| s.repeat(n)),
        1 => "\\PC{1,40}",
    ]
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => any::<Index>().prop_map(Mutation::DeleteLine),
        1 => any::<Index>().prop_map(Mutation::DuplicateLine),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(a, b)| Mutation::SwapLines(a, b)),
        2 => (any::<Index>(), any::<char>()).prop_map(|(i, c)| Mutation::FlipChar(i, c)),
        1 => (any::<Index>(), -8i8..=8).prop_map(|(i, d)| Mutation::Indent(i, d)),
        4 => (any::<Index>(), hostile_scalar()).prop_map(|(i, s)| Mutation::ReplaceScalar(i, s)),
        1 => (any::<Index>(), "\\PC{0,40}").prop_map(|(i, s)| Mutation::InsertLine(i, s)),
        1 => any::<Index>().prop_map(Mutation::Truncate),
    ]
}

/// Applies one mutation to `text`.
fn mutate(text: &str, m: &Mutation) -> String {
    let mut lines: Vec<String> = text.split('\n').map(str::to_string).collect();
    // `split` always yields at least one (possibly empty) line.
    let n = lines.len();
    match m {
        Mutation::DeleteLine(i) => {
            lines.remove(i.index(n));
        }
        Mutation::DuplicateLine(i) => {
            let at = i.index(n);
            lines.insert(at, lines[at].clone());
        }
        Mutation::SwapLines(a, b) => lines.swap(a.index(n), b.index(n)),
        Mutation::Indent(i, delta) => {
            let line = &mut lines[i.index(n)];
            if *delta >= 0 {
                line.insert_str(0, &" ".repeat(delta.unsigned_abs().into()));
            } else {
                let trim = line
                    .len()
                    .saturating_sub(line.trim_start_matches(' ').len())
                    .min(delta.unsigned_abs().into());
                line.drain(..trim);
            }
        }
        Mutation::ReplaceScalar(i, value) => {
            let line = &mut lines[i.index(n)];
            let cut = line
                .find(": ")
                .map(|p| p + 2)
                .or_else(|| line.find("- ").map(|p| p + 2))
                .unwrap_or(line.len() - line.trim_start().len());
            line.replace_range(cut.., value);
        }
        Mutation::InsertLine(i, new) => lines.insert(i.index(n + 1), new.clone()),
        Mutation::FlipChar(i, c) => {
            let chars: Vec<char> = text.chars().collect();
            if chars.is_empty() {
                return c.to_string();
            }
            let at = i.index(chars.len());
            return chars[..at]
                .iter()
                .chain(std::iter::once(c))
                .chain(&chars[at + 1..])
                .collect();
        }
        Mutation::Truncate(i) => {
            return text
                .chars()
                .take(i.index(text.chars().count() + 1))
                .collect();
        }
    }
    lines.join("\n")
}

/// A corpus entry with 1..=8 mutations applied, plus the mutations (shown
/// when a case fails, since the text alone hides what was changed).
pub fn mutated_document() -> impl Strategy<Value = (String, Vec<Mutation>)> {
    (any::<Index>(), prop::collection::vec(mutation(), 1..=8)).prop_map(|(pick, mutations)| {
        let mut text = CORPUS[pick.index(CORPUS.len())].clone();
        for m in &mutations {
            text = mutate(&text, m);
        }
        (text, mutations)
    })
}

/// YAML's structural tokens and some valid keys, glued at random: reaches
/// the YAML parser's odd states (flow in block, anchors, tags, directives)
/// far more often than uniform random text.
pub fn token_soup() -> impl Strategy<Value = String> {
    let token = prop::sample::select(vec![
        "\n",
        "\n  ",
        "\n    ",
        "\n- ",
        "- ",
        ": ",
        ":",
        "? ",
        "---\n",
        "...\n",
        "[",
        "]",
        "{",
        "}",
        ",",
        "&a ",
        "*a",
        "!!str ",
        "!t ",
        "%YAML 1.2\n",
        "%TAG ! tag:x,2000:\n",
        "#c\n",
        "|\n",
        ">\n",
        "'",
        "\"",
        "\\",
        "\t",
        "\u{0}",
        "\u{85}",
        "\u{2028}",
        "apiVersion",
        "kind",
        "metadata",
        "name",
        "namespace",
        "spec",
        "rules",
        "matches",
        "path",
        "value",
        "port",
        "HTTPRoute",
        "Gateway",
        "Service",
        "EndpointSlice",
        "v1",
        "gateway.networking.k8s.io/v1",
        "discovery.k8s.io/v1",
        "x",
        "80",
        "-1",
        "1e9",
    ]);
    prop::collection::vec(token, 0..120).prop_map(|t| t.concat())
}
