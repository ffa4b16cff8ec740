//! What the API server refuses at admission, from the generated CRDs' OpenAPI v3 schema, and
//! what only the operator refuses (docs/design/operator.md, "What the API server refuses and
//! what only the operator refuses"; issue 32 item 2).
//!
//! - `durations`: the duration `pattern`s accept exactly what `GoDuration`'s parser accepts.
//! - `rules`: every rule the operator checks (`validate()`, decoding, `database_problem()`,
//!   the annotations) is either a schema keyword, named by its JSON pointer, or runtime-only
//!   with the reason; the docs carry the same table.
//! - `fixtures`: every group and database the fixtures and scenarios apply passes the schema.
//! - `cel`: the CEL rules are simple, standard and bounded, as the API server requires.

mod cel;
mod durations;
mod evaluator;
mod fixtures;
mod rules;

use bloodraven_api::{MysqlDatabase, MysqlFailoverGroup};
use kube::CustomResourceExt;
use serde_json::Value;

/// The JSON pointer of the group's `spec` schema in the generated CRD.
pub const SPEC: &str = "/spec/versions/0/schema/openAPIV3Schema/properties/spec";

/// The generated `MysqlFailoverGroup` CRD as JSON (what `crdgen` writes, and a test checks is
/// committed).
pub fn group_crd() -> Value {
    serde_json::to_value(MysqlFailoverGroup::crd()).expect("group CRD to JSON")
}

/// The generated `MysqlDatabase` CRD as JSON.
pub fn database_crd() -> Value {
    serde_json::to_value(MysqlDatabase::crd()).expect("database CRD to JSON")
}

/// The repository's root directory.
pub fn repository() -> std::path::PathBuf {
    // Read at run time: a test binary reused from a shared target directory must read this
    // checkout's files.
    let manifest = std::env::var("CARGO_MANIFEST_DIR")
        .unwrap_or_else(|_| env!("CARGO_MANIFEST_DIR").to_owned());
    std::path::Path::new(&manifest).join("../..")
}
