//! No function of the core's busiest rooms (the monitor, the write pipelines, the deposit
//! scans) is over `MAX_FN_LINES` lines: a step that long holds several, each worth a name.

use super::{read, rust_files, shown, workspace};

/// The longest a function of those rooms may be, its signature and closing brace included.
const MAX_FN_LINES: usize = 80;

/// The rooms held to it.
const ROOMS: [&str; 3] = ["monitor", "transfers", "deposits"];

/// Each function of `text` (formatted by rustfmt) with its first line and length: from its
/// `fn` line to the brace that closes it at the same indentation.
fn functions(text: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let trimmed = line.trim_start();
        let indent = &line[..line.len() - trimmed.len()];
        let bare = [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "async ",
            "const ",
            "unsafe ",
        ]
        .iter()
        .fold(trimmed, |t, p| t.strip_prefix(p).unwrap_or(t));
        let bare = bare.strip_prefix("async ").unwrap_or(bare);
        let Some(rest) = bare.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') {
            continue;
        }
        let closing = format!("{indent}}}");
        if let Some(end) = lines[i + 1..].iter().position(|l| *l == closing) {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            found.push((name, i + 1, end + 2));
        }
    }
    found
}

#[test]
fn no_function_of_the_busiest_rooms_is_over_80_lines() {
    let mut long = Vec::new();
    for room in ROOMS {
        for file in rust_files(&workspace().join("core-service/src").join(room)) {
            for (name, line, length) in functions(&read(&file)) {
                if length > MAX_FN_LINES {
                    long.push(format!(
                        "{}:{line}: `{name}` is {length} lines",
                        shown(&file)
                    ));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "functions over {MAX_FN_LINES} lines; split them:\n{}",
        long.join("\n")
    );
}
