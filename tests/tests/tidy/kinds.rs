//! The write kinds' rule: a kind is one file of `core-service/src/writes/kinds/`, declared
//! and registered once in that room's `KINDS`, and the path its requests are kept under is
//! written nowhere else in the core.

use super::{code_of, read, rust_files, shown, workspace};

/// The kinds' room.
const ROOM: &str = "core-service/src/writes/kinds";

#[test]
fn every_write_kind_is_one_registered_file() {
    let room = workspace().join(ROOM);
    let registry = code_of(&read(&room.join("mod.rs")));
    let mut wrong = Vec::new();
    let mut paths = Vec::new();
    for file in rust_files(&room) {
        let name = file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        if name == "mod" {
            continue;
        }
        let code = code_of(&read(&file));
        if !code.contains("impl Kind for") && !code.contains("impl WriteKind for") {
            wrong.push(format!("{}: no `impl Kind for` in it", shown(&file)));
        }
        if !registry.contains(&format!("mod {name};")) {
            wrong.push(format!(
                "{}: not declared (`mod {name};`) in {ROOM}/mod.rs",
                shown(&file)
            ));
        }
        let registered = registry
            .matches(&format!("Registered::of::<{name}::"))
            .count();
        if registered != 1 {
            wrong.push(format!(
                "{}: registered {registered} times in `KINDS`, where once is right",
                shown(&file)
            ));
        }
        match code
            .lines()
            .find_map(|l| l.trim().strip_prefix("const PATH: &'static str = "))
        {
            Some(path) => paths.push((path.trim_end_matches(';').to_owned(), file)),
            None => wrong.push(format!(
                "{}: no `const PATH: &'static str = \"…\";`",
                shown(&file)
            )),
        }
    }
    for file in rust_files(&workspace().join("core-service/src")) {
        let code = code_of(&read(&file));
        let code = code.split("#[cfg(test)]").next().unwrap_or_default();
        for (path, home) in &paths {
            if &file != home && code.contains(path.as_str()) {
                wrong.push(format!(
                    "{}: writes {path}, the path of the kind in {}; name the kind instead",
                    shown(&file),
                    shown(home)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "write kinds out of their room:\n{}",
        wrong.join("\n")
    );
}
