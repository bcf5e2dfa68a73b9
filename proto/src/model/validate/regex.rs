//! Route regexes: compiled here exactly as the proxy compiles them
//! ([`compile_route_regex`]), with their compiled heap bounded per match
//! ([`MAX_REGEX_BYTES_PER_MATCH`]) and summed per route
//! ([`MAX_REGEX_BYTES_PER_ROUTE`]); an apply over either is refused naming
//! the rule and match. A single Unicode `\w` compiles to about 50 KB, so
//! `\w{200}` (11 MB) is refused while ordinary patterns take a few KB. The
//! proxy also holds every served route together to
//! [`MAX_REGEX_BYTES_PER_PROXY`].

use regex_automata::meta;
use regex_automata::nfa::thompson::WhichCaptures;
use regex_automata::util::syntax;

/// Compiled heap one regex of a route match may take.
pub const MAX_REGEX_BYTES_PER_MATCH: usize = 256 * 1024;

/// Compiled heap all regexes of one route may take together.
pub const MAX_REGEX_BYTES_PER_ROUTE: usize = 1024 * 1024;

/// Compiled heap all distinct regexes of the routes one proxy serves may
/// take together. The proxy enforces it (oldest routes first; the regex
/// matches of a route past it never match and are noted).
pub const MAX_REGEX_BYTES_PER_PROXY: usize = 32 * 1024 * 1024;

/// Cache each compiled regex may grow per searching thread at run time
/// (the lazy DFA's transition table); not part of the compiled size.
const REGEX_CACHE_BYTES: usize = 512 * 1024;

/// Checks a route regex's syntax only. The pattern must stand on its own:
/// `a)|(.*` would otherwise escape the anchoring group.
pub(super) fn parse_route_regex(pattern: &str) -> Result<(), String> {
    syntax::parse(pattern).map(|_| ()).map_err(|e| {
        // regex's messages draw a caret under the pattern over several
        // lines; errors here are one line.
        let text = e.to_string();
        let last = text.lines().last().unwrap_or_default().trim().to_string();
        format!("invalid regular expression {pattern:?}: {last}")
    })
}

/// A route regex, compiled the one way the proxy and validation share:
/// anchored to the whole input (`^(?:pattern)$`), Rust `regex` syntax,
/// at most [`MAX_REGEX_BYTES_PER_MATCH`] compiled. The error is one line.
pub fn compile_route_regex(pattern: &str) -> Result<meta::Regex, String> {
    parse_route_regex(pattern)?;
    let config = meta::Config::new()
        .nfa_size_limit(Some(MAX_REGEX_BYTES_PER_MATCH))
        .onepass_size_limit(Some(MAX_REGEX_BYTES_PER_MATCH))
        .hybrid_cache_capacity(REGEX_CACHE_BYTES)
        .which_captures(WhichCaptures::Implicit);
    let too_big = || {
        format!(
            "regular expression {pattern:?} compiles to more than {} KiB, the most one match may use",
            MAX_REGEX_BYTES_PER_MATCH / 1024
        )
    };
    let regex = meta::Builder::new()
        .configure(config)
        .syntax(syntax::Config::new().utf8(true))
        .build(&format!("^(?:{pattern})$"))
        .map_err(|e| {
            if e.size_limit().is_some() {
                too_big()
            } else {
                format!("invalid regular expression {pattern:?}: {e}")
            }
        })?;
    if regex.memory_usage() > MAX_REGEX_BYTES_PER_MATCH {
        return Err(too_big());
    }
    Ok(regex)
}
