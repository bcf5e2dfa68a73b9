//! Read-only views of the state: the proxies' configuration snapshot and
//! the status rows.
