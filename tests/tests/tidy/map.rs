//! The architecture page's code map, read in full: each crate's row and each row of the
//! core's and the chain clients' modules lists its source files, and every source file of
//! the house is listed once (`docs/architecture.md`, "Code map").

use std::collections::BTreeSet;

use super::{members, read, rust_files, workspace};

/// The backticked names of a table row's last cell.
fn last_cell_names(row: &str) -> Vec<String> {
    let row = row.trim().trim_end_matches('|').trim_end();
    let cell = row.rsplit(" | ").next().unwrap_or_default();
    cell.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

/// The section of `page` whose heading starts with `heading`.
fn section<'a>(page: &'a str, heading: &str) -> &'a str {
    page.split("\n### ")
        .find(|s| s.starts_with(heading))
        .and_then(|s| s.split("\n## ").next())
        .unwrap_or_else(|| panic!("docs/architecture.md has no `### {heading}…` section"))
}

#[test]
fn the_architecture_pages_code_map_lists_every_source_file() {
    let page = read(&workspace().join("docs/architecture.md"));
    let mut listed = Vec::new();
    for row in section(&page, "Crates, and what each").lines() {
        let Some(rest) = row.strip_prefix("| `walletops") else {
            continue;
        };
        let folder = rest
            .split_once("(`")
            .and_then(|(_, f)| f.split_once("/`)"))
            .map(|(f, _)| f)
            .unwrap_or_else(|| panic!("a crate row names no (`folder/`): {row}"));
        listed.extend(
            last_cell_names(row)
                .into_iter()
                .map(|file| format!("{folder}/{file}")),
        );
    }
    for (heading, src) in [
        ("`core-service/`", "core-service/src/"),
        ("`chains/`", "chains/src/"),
    ] {
        for row in section(&page, heading).lines() {
            let Some(rest) = row.strip_prefix("| `") else {
                continue;
            };
            let module = rest.split('`').next().unwrap_or_default();
            let under = if module.ends_with('/') {
                format!("{src}{module}")
            } else {
                src.to_owned()
            };
            listed.extend(
                last_cell_names(row)
                    .into_iter()
                    .map(|file| format!("{under}{file}")),
            );
        }
    }
    let mut twice = Vec::new();
    let mut seen = BTreeSet::new();
    for file in &listed {
        if !seen.insert(file.clone()) {
            twice.push(file.clone());
        }
    }
    let root = workspace();
    let present: BTreeSet<String> = members()
        .iter()
        .flat_map(|member| rust_files(&root.join(member)))
        .map(|f| f.strip_prefix(&root).unwrap_or(&f).display().to_string())
        .collect();
    let missing: Vec<_> = present.difference(&seen).collect();
    let stale: Vec<_> = seen.difference(&present).collect();
    assert!(
        missing.is_empty() && stale.is_empty() && twice.is_empty(),
        "docs/architecture.md's code map is out of date:\n\
         source files it does not list: {missing:?}\n\
         listed, but no such file: {stale:?}\nlisted twice: {twice:?}"
    );
}
