//! A guard run before YAML parsing: how deeply flow collections (`[`, `{`)
//! nest.
//!
//! Owns: refusing deep nesting up front. The YAML scanner underneath
//! (libyaml-rs) takes time quadratic in the nesting depth of flow mappings
//! with keys (`{a: {a: {a: ...`): 78 KB of it took seconds. No Gateway API
//! or Kubernetes object comes near [`MAX_FLOW_DEPTH`] levels, so deeper
//! input is refused with the line where the limit was passed.
//!
//! The scan is deliberately simple: it skips quoted scalars and comments
//! and counts brackets everywhere else. Brackets inside plain or block
//! scalars may count too; only an unbalanced run of [`MAX_FLOW_DEPTH`]
//! of them could cause a false refusal.

/// The deepest flow nesting accepted.
pub const MAX_FLOW_DEPTH: usize = 64;

/// The 1-based line on which flow nesting first exceeds `max`, if it does.
pub fn first_line_deeper_than(text: &str, max: usize) -> Option<usize> {
    #[derive(PartialEq)]
    enum State {
        Plain,
        Single,
        Double,
        Comment,
    }
    let mut state = State::Plain;
    let mut depth = 0usize;
    let mut line = 1usize;
    // What came before the current character, for deciding whether a
    // quote opens a quoted scalar (`it's` does not) and `#` a comment.
    let mut previous = '\n';
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\n' {
            line += 1;
        }
        match state {
            State::Comment if c == '\n' => state = State::Plain,
            State::Comment => {}
            State::Single if c == '\'' => {
                if chars.peek() == Some(&'\'') {
                    chars.next();
                } else {
                    state = State::Plain;
                }
            }
            State::Single => {}
            State::Double if c == '\\' => {
                if chars.next() == Some('\n') {
                    line += 1;
                }
            }
            State::Double if c == '"' => state = State::Plain,
            State::Double => {}
            State::Plain => {
                let at_token_start = previous.is_whitespace() || "[{,:-".contains(previous);
                match c {
                    '#' if previous.is_whitespace() => state = State::Comment,
                    '\'' if at_token_start => state = State::Single,
                    '"' if at_token_start => state = State::Double,
                    '[' | '{' => {
                        depth += 1;
                        if depth > max {
                            return Some(line);
                        }
                    }
                    ']' | '}' => depth = depth.saturating_sub(1),
                    _ => {}
                }
            }
        }
        previous = c;
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_flow_nesting_and_names_the_line() {
        assert_eq!(first_line_deeper_than("a: [[1], {b: [2]}]", 3), None);
        assert_eq!(first_line_deeper_than("a: [[1], {b: [2]}]", 2), Some(1));
        assert_eq!(
            first_line_deeper_than("x: 1\ny: {a: {b: {c: 1}}}", 2),
            Some(2)
        );
    }

    #[test]
    fn brackets_in_quotes_and_comments_do_not_count() {
        let text = "a: '[[[['\nb: \"{{{{\\\"[[\"\n# [[[[[\nc: it's [1]\nd: 'don''t [[['\n";
        assert_eq!(first_line_deeper_than(text, 1), None);
    }

    #[test]
    fn the_default_is_far_above_real_objects() {
        let route = include_str!("default.yaml");
        assert_eq!(first_line_deeper_than(route, MAX_FLOW_DEPTH), None);
        assert_eq!(first_line_deeper_than(route, 3), None);
    }
}
