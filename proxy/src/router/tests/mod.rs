//! Scenario tests of the whole router: compile a small world, route
//! requests, assert the decision. One Gateway API rule per test, grouped by
//! topic.

mod attachment;
mod backends;
mod filters;
mod hostnames;
mod isolation;
mod precedence;
mod reuse;

use super::RouteTable;

/// Every compile note, one per line, for `contains` assertions.
fn notes_of(t: &RouteTable) -> String {
    t.notes()
        .iter()
        .map(|n| n.to_string())
        .collect::<Vec<_>>()
        .join("\n")
}
