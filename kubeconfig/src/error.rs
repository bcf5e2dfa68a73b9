//! [`ParseError`], the one error type of this crate: where the problem is
//! ([`Location`]: file, document, kind, object) and what it is
//! ([`Problem`], which names the field when there is one).
//!
//! It deliberately does not decide how errors are shown to users beyond
//! `Display` (one line, everything needed to find the spot), nor whether a
//! caller retries: every parse error is final for its input.

use std::fmt;
use switchyard_proto::model::{Kind, ValidationError};

/// Where in the input a problem was found. Each part is filled in as soon
/// as it is known, so an error about a malformed document still names the
/// file and the document.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Location {
    /// The file name (or other label) the caller passed as `source`.
    pub file: String,
    /// 0-based index of the YAML document in the file. Empty documents
    /// count, so the index is the document's position in the stream.
    pub document: Option<usize>,
    /// The document's `kind`, when it has a string one.
    pub kind: Option<String>,
    /// `namespace/name` (or just `name`), when the document has a name.
    pub object: Option<String>,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(i) = self.document {
            write!(f, ", document {i} (0-based)")?;
        }
        match (&self.kind, &self.object) {
            (Some(kind), Some(object)) => write!(f, ", {kind} {object}"),
            (Some(kind), None) => write!(f, ", {kind}"),
            (None, Some(object)) => write!(f, ", object {object}"),
            (None, None) => Ok(()),
        }
    }
}

/// What is wrong with the input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// The file could not be read.
    #[error("cannot read the file: {0}")]
    Io(std::io::Error),
    /// The text is not valid YAML.
    #[error("malformed YAML: {0}")]
    Yaml(String),
    /// Flow collections nested deeper than the parser accepts.
    #[error("flow collections ([...] or {{...}}) nest deeper than {max} levels at line {line}")]
    TooDeep {
        /// Where the limit was passed.
        line: usize,
        /// The limit.
        max: usize,
    },
    /// The document is a scalar or a list instead of an object.
    #[error("the document is {found}, expected a mapping with apiVersion, kind and metadata")]
    NotAMapping {
        /// What was found instead (`a list`, `a string`, ...).
        found: &'static str,
    },
    /// A required field is absent (or empty, or not a string).
    #[error("{field} is required")]
    Missing {
        /// Field path, e.g. `metadata.name`.
        field: String,
    },
    /// `kind` names something this crate does not read.
    #[error("unknown kind {kind:?}; supported kinds: {supported}")]
    UnknownKind {
        /// The kind found.
        kind: String,
        /// Every supported kind with its apiVersions.
        supported: String,
    },
    /// A known kind with an apiVersion it is not served under.
    #[error("apiVersion {found:?} is wrong for kind {kind}; expected {expected}")]
    WrongApiVersion {
        /// The kind.
        kind: Kind,
        /// The apiVersion found.
        found: String,
        /// The accepted apiVersions.
        expected: String,
    },
    /// The document does not deserialize into the kind's Kubernetes type
    /// (a missing required field, a wrong type, an unknown enum value).
    /// The message starts with the field path when there is one.
    #[error("does not match the {kind} schema: {message}")]
    Schema {
        /// The kind.
        kind: Kind,
        /// The deserializer's message, including the field path.
        message: String,
    },
    /// Keys the kind's schema does not have (a misspelt field), refused as
    /// `kubectl apply` refuses them with strict field validation. Files
    /// only; objects from a live cluster are not checked.
    #[error("{} (not in the {kind} schema)", unknown_fields(.fields))]
    UnknownFields {
        /// The kind.
        kind: Kind,
        /// Field paths, e.g. `spec.rules[0].matchs`; never empty.
        fields: Vec<String>,
    },
    /// A port outside 1..=65535.
    #[error("{field}: invalid port {value}: must be between 1 and 65535")]
    InvalidPort {
        /// Field path, e.g. `spec.listeners[0].port`.
        field: String,
        /// The number found.
        value: i64,
    },
    /// A value that is well typed but not acceptable.
    #[error("{field}: {message}")]
    Invalid {
        /// Field path.
        field: String,
        /// Why.
        message: String,
    },
    /// The translated object failed the model's validation.
    #[error("{}: {}", .0.field, .0.message)]
    Validation(ValidationError),
    /// Two documents of one file declare the same kind, namespace and name.
    #[error("defined twice in this file: documents {first} and {second} (0-based)")]
    Duplicate {
        /// Index of the first document.
        first: usize,
        /// Index of the second document.
        second: usize,
    },
}

impl Problem {
    /// Shorthand for [`Problem::Invalid`].
    pub(crate) fn invalid(field: impl Into<String>, message: impl Into<String>) -> Problem {
        Problem::Invalid {
            field: field.into(),
            message: message.into(),
        }
    }

    /// Shorthand for [`Problem::Missing`].
    pub(crate) fn missing(field: impl Into<String>) -> Problem {
        Problem::Missing {
            field: field.into(),
        }
    }
}

/// `unknown field "a"` or `unknown fields "a", "b"`, as kubectl words it.
fn unknown_fields(fields: &[String]) -> String {
    let quoted: Vec<String> = fields.iter().map(|f| format!("{f:?}")).collect();
    let noun = if fields.len() == 1 { "field" } else { "fields" };
    format!("unknown {noun} {}", quoted.join(", "))
}

/// A parse failure: where and what. `Display` gives one line such as
/// `routes.yaml, document 2 (0-based), HTTPRoute default/app:
/// spec.rules[0].matches[0].path.value: invalid regular expression: ...`.
#[derive(Debug, thiserror::Error)]
#[error("{at}: {problem}")]
pub struct ParseError {
    /// Where (boxed to keep `Result`s small).
    pub at: Box<Location>,
    /// What.
    pub problem: Problem,
}

impl ParseError {
    /// Builds an error at `at`.
    pub(crate) fn new(at: &Location, problem: Problem) -> ParseError {
        ParseError {
            at: Box::new(at.clone()),
            problem,
        }
    }
}
