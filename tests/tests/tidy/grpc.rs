//! The gRPC room translates and decides nothing: it names no store type (the services
//! answer in domain values) and parses no text or proto enum of a request (`requests/` does,
//! once). Two files read transport metadata rather than a request, and say so below. Calls
//! are admitted once, by the admission layer: no handler admits.

use super::{code_of, read, rust_files, shown, workspace};

/// What parsing looks like in code.
const PARSING: [&str; 6] = [
    ".parse::<",
    ".parse()",
    "parse_address(",
    "parse_amount(",
    "hex::decode(",
    "Uuid::parse_str(",
];

/// Files of `grpc/` that parse transport metadata, not a request's fields, and why.
const METADATA_READERS: [(&str, &str); 2] = [
    (
        "client.rs",
        "the client address a trusted proxy forwards, a header of the connection",
    ),
    (
        "metered.rs",
        "the error code of the service's own answer, for its metrics",
    ),
];

#[test]
fn grpc_names_no_store_type_and_parses_nothing() {
    let mut wrong = Vec::new();
    for file in rust_files(&workspace().join("core-service/src/grpc")) {
        let name = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        let code = code_of(&read(&file));
        let code = code.split("#[cfg(test)]").next().unwrap_or_default();
        if code.contains("walletops_store") {
            wrong.push(format!("{}: names walletops_store", shown(&file)));
        }
        if METADATA_READERS.iter().any(|(reader, _)| *reader == name) {
            continue;
        }
        // A proto enum read from its number (`pb::Scope::try_from(value)`) is parsing too.
        let enum_read = code
            .lines()
            .any(|l| l.contains("pb::") && l.contains("::try_from("));
        if enum_read {
            wrong.push(format!(
                "{}: reads a proto enum from its number; parse in `requests/`",
                shown(&file)
            ));
        }
        for pattern in PARSING {
            if code.contains(pattern) {
                wrong.push(format!(
                    "{}: parses (`{pattern}`); parse in `requests/`",
                    shown(&file)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "grpc/ does more than translate:\n{}",
        wrong.join("\n")
    );
}

/// The one file of the core that admits a call, and the one that answers it.
const ADMITTING: [&str; 2] = [
    "core-service/src/grpc/admission.rs",
    "core-service/src/app.rs",
];

#[test]
fn only_the_admission_layer_admits() {
    let mut wrong = Vec::new();
    for file in rust_files(&workspace().join("core-service/src")) {
        let shown = shown(&file);
        if ADMITTING.contains(&shown.as_str()) {
            continue;
        }
        let code = code_of(&read(&file));
        for call in [
            ".admit_call(",
            "admit_admin(",
            "admit_any(",
            ".admit(metadata",
        ] {
            if code.contains(call) {
                wrong.push(format!("{shown}: calls `{call}`"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "calls are admitted by the admission layer (grpc/admission.rs) alone:\n{}",
        wrong.join("\n")
    );
}
