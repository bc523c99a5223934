//! The house rules, checked on the source as the compiler cannot: no import cycle among the
//! core's top-level modules (names the crate root re-exports resolved to their module), no
//! source file over 600 lines, a `//!` comment opening every file, `sea_orm` named only by
//! the store, the edge depended on only by the binary, and the architecture page's code map
//! naming exactly the core's modules, each write kind one registered file (`kinds`). Each
//! failure names its offender.
//! `cargo test --test tidy -- --nocapture` prints the core's module graph floor by floor.

mod grpc;
mod kinds;
mod lengths;
mod map;

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

/// The longest a source file may be.
const MAX_LINES: usize = 600;

/// Crates that may name `sea_orm`, and why: the store owns the database; the migrations are
/// the schema, written in sea-orm's migration language; the end-to-end suite reads the
/// database as an outsider would, to prove what the service stored.
const SEA_ORM_ALLOWED: [&str; 3] = ["store", "migrations", "tests"];

/// The one package that may depend on the edge: the binary that serves it.
const EDGE_USER: &str = "walletops";

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, sorted, leaving out build outputs and installed tools.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("reading a directory") {
            let path = entry.expect("a directory entry").path();
            let name = path
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or_default();
            if path.is_dir() {
                if !name.starts_with('.') && !["target", "node_modules"].contains(&name) {
                    stack.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()))
}

fn shown(path: &Path) -> String {
    path.strip_prefix(workspace())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `text` without its `//` comments (doc comments included): what the code itself names.
fn code_of(text: &str) -> String {
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The identifier at the start of `s`.
fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first segments of what a path names after its `crate::` (or root-reaching `super::`)
/// prefix, `rest` starting right after it: one name, or one per item of a `{…}` group.
fn first_segments(rest: &str) -> Vec<String> {
    let Some(group) = rest.strip_prefix('{') else {
        return vec![ident(rest).to_owned()];
    };
    let (mut depth, mut item, mut items) = (0usize, String::new(), Vec::new());
    for c in group.chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut item));
                continue;
            }
            _ => {}
        }
        item.push(c);
    }
    items.push(item);
    items
        .iter()
        .map(|i| ident(i.trim()).to_owned())
        .filter(|i| !i.is_empty())
        .collect()
}

/// The core's top-level modules: the `mod` items of its crate root, test-only ones too.
fn core_modules(lib: &str) -> BTreeSet<String> {
    lib.lines()
        .map(str::trim)
        .filter_map(|line| {
            let decl = line.strip_prefix("pub ").unwrap_or(line);
            decl.strip_prefix("mod ").and_then(|d| d.strip_suffix(';'))
        })
        .map(str::to_owned)
        .collect()
}

/// The names the crate root re-exports, each with the module it comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    for line in lib.lines().map(str::trim) {
        let Some(path) = line
            .strip_prefix("pub use ")
            .and_then(|p| p.strip_suffix(';'))
        else {
            continue;
        };
        let Some((module, rest)) = path.split_once("::") else {
            continue;
        };
        let rest = rest.trim_start_matches("{").trim_end_matches('}');
        for item in rest.split(',') {
            let name = item.rsplit("::").next().unwrap_or_default().trim();
            let name = name.rsplit(" as ").next().unwrap_or(name).trim();
            if !name.is_empty() {
                names.insert(name.to_owned(), module.to_owned());
            }
        }
    }
    names
}

/// The module path of `file`, a file of module `module`'s tree under `src`.
fn module_path(src: &Path, file: &Path) -> Vec<String> {
    let relative = file.strip_prefix(src).expect("a file under src");
    let mut parts: Vec<String> = relative
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap_or_default();
    if last != "mod.rs" {
        parts.push(last.trim_end_matches(".rs").to_owned());
    }
    parts
}

/// Which top-level names `code`, in the file at `path` (its module path), refers to. Tests
/// count as any code does: a test that reaches up makes a loop all the same. The inline test
/// module that, by the house's habit, closes a file sits one level deeper than the file.
fn names_used(code: &str, path: &[String]) -> BTreeSet<String> {
    if let Some(at) = code.find("#[cfg(test)]\nmod tests {") {
        let mut used = names_used_at(&code[..at], path.len());
        used.extend(names_used_at(&code[at..], path.len() + 1));
        return used;
    }
    names_used_at(code, path.len())
}

/// `names_used` for `code` at `depth` modules below the crate root.
fn names_used_at(code: &str, depth: usize) -> BTreeSet<String> {
    let mut used = BTreeSet::new();
    for (at, _) in code.match_indices("crate::") {
        if code[..at].ends_with('$') {
            continue;
        }
        used.extend(first_segments(&code[at + "crate::".len()..]));
    }
    // `super::` repeated as many times as the file is deep reaches the crate root.
    let to_root = "super::".repeat(depth);
    for (at, _) in code.match_indices(&to_root) {
        if code[..at].ends_with("super::") {
            continue;
        }
        used.extend(first_segments(&code[at + to_root.len()..]));
    }
    used
}

/// The core's module graph: each top-level module (test-only ones too) with the modules it
/// uses, and for each arrow a file that makes it.
fn core_graph() -> BTreeMap<String, BTreeMap<String, String>> {
    let src = workspace().join("core-service/src");
    let lib = read(&src.join("lib.rs"));
    let modules = core_modules(&lib);
    let reexported = reexports(&lib);
    let mut graph: BTreeMap<String, BTreeMap<String, String>> = modules
        .iter()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    for file in rust_files(&src) {
        let path = module_path(&src, &file);
        let Some(module) = path.first() else { continue };
        if !graph.contains_key(module) {
            continue;
        }
        for name in names_used(&code_of(&read(&file)), &path) {
            let target = if modules.contains(&name) {
                name
            } else if let Some(module) = reexported.get(&name) {
                module.clone()
            } else {
                continue;
            };
            if &target != module && graph.contains_key(&target) {
                graph
                    .get_mut(module)
                    .expect("a module of the graph")
                    .entry(target)
                    .or_insert_with(|| shown(&file));
            }
        }
    }
    graph
}

/// The strongly connected parts of `graph` with more than one module (Tarjan's algorithm).
fn cycles(graph: &BTreeMap<String, BTreeMap<String, String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a BTreeMap<String, BTreeMap<String, String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        for next in w.graph[v].keys() {
            let next = next.as_str();
            if !w.index.contains_key(next) {
                visit(w, next);
                let low = w.low[v].min(w.low[next]);
                w.low.insert(v, low);
            } else if w.stack.contains(&next) {
                let low = w.low[v].min(w.index[next]);
                w.low.insert(v, low);
            }
        }
        if w.low[v] == w.index[v] {
            let mut part = Vec::new();
            while let Some(top) = w.stack.pop() {
                part.push(top.to_owned());
                if top == v {
                    break;
                }
            }
            if part.len() > 1 {
                part.sort();
                w.found.push(part);
            }
        }
    }
    let mut walk = Walk {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !walk.index.contains_key(v.as_str()) {
            visit(&mut walk, v);
        }
    }
    walk.found
}

/// One loop through the modules of `part`, each arrow with the file that makes it.
fn one_loop(graph: &BTreeMap<String, BTreeMap<String, String>>, part: &[String]) -> String {
    let start = &part[0];
    let mut path = vec![start.clone()];
    let mut seen = BTreeSet::from([start.clone()]);
    // Depth-first inside the part until an arrow leads back to the start.
    fn search(
        graph: &BTreeMap<String, BTreeMap<String, String>>,
        part: &[String],
        path: &mut Vec<String>,
        seen: &mut BTreeSet<String>,
    ) -> bool {
        let here = path.last().expect("a path").clone();
        for next in graph[&here].keys() {
            if next == &path[0] {
                path.push(next.clone());
                return true;
            }
            if part.contains(next) && seen.insert(next.clone()) {
                path.push(next.clone());
                if search(graph, part, path, seen) {
                    return true;
                }
                path.pop();
            }
        }
        false
    }
    search(graph, part, &mut path, &mut seen);
    path.windows(2)
        .map(|w| format!("{} -> {} ({})", w[0], w[1], graph[&w[0]][&w[1]]))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn no_import_cycle_among_the_core_modules() {
    let graph = core_graph();
    let found = cycles(&graph);
    let told: Vec<String> = found
        .iter()
        .map(|part| {
            format!(
                "cycle of {} modules ({}): {}",
                part.len(),
                part.join(", "),
                one_loop(&graph, part)
            )
        })
        .collect();
    assert!(
        told.is_empty(),
        "core-service's top-level modules import each other in a loop:\n{}",
        told.join("\n")
    );
    // The floors, for docs/architecture.md: each module above everything it uses.
    let mut floor: BTreeMap<&str, usize> = BTreeMap::new();
    while floor.len() < graph.len() {
        for (module, uses) in &graph {
            if floor.contains_key(module.as_str()) {
                continue;
            }
            if uses.keys().all(|u| floor.contains_key(u.as_str())) {
                let f = uses
                    .keys()
                    .map(|u| floor[u.as_str()] + 1)
                    .max()
                    .unwrap_or(1);
                floor.insert(module, f);
            }
        }
    }
    let top = floor.values().copied().max().unwrap_or(1);
    for f in (1..=top).rev() {
        let on: Vec<&str> = floor
            .iter()
            .filter(|(_, g)| **g == f)
            .map(|(m, _)| *m)
            .collect();
        println!("floor {f:2}: {}", on.join(" "));
    }
}

#[test]
fn no_source_file_is_over_600_lines() {
    let long: Vec<String> = rust_files(&workspace())
        .into_iter()
        .filter_map(|file| {
            let lines = read(&file).lines().count();
            (lines > MAX_LINES).then(|| format!("{} has {lines} lines", shown(&file)))
        })
        .collect();
    assert!(
        long.is_empty(),
        "source files over {MAX_LINES} lines (split them by concern):\n{}",
        long.join("\n")
    );
}

#[test]
fn every_rust_file_opens_with_a_module_comment() {
    let bare: Vec<String> = rust_files(&workspace())
        .into_iter()
        .filter(|file| !read(file).starts_with("//!"))
        .map(|file| shown(&file))
        .collect();
    assert!(
        bare.is_empty(),
        "files whose first line is not a `//!` comment saying what they hold:\n{}",
        bare.join("\n")
    );
}

/// The workspace's member folders, from its manifest.
fn members() -> Vec<String> {
    let manifest = read(&workspace().join("Cargo.toml"));
    let line = manifest
        .lines()
        .find(|l| l.trim_start().starts_with("members"))
        .expect("a members list");
    line.split('"')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn only_the_store_names_sea_orm() {
    let mut named = Vec::new();
    for member in members() {
        if SEA_ORM_ALLOWED.contains(&member.as_str()) {
            continue;
        }
        let dir = workspace().join(&member);
        for file in rust_files(&dir) {
            if read(&file).contains("sea_orm") {
                named.push(shown(&file));
            }
        }
        if read(&dir.join("Cargo.toml")).contains("sea-orm") {
            named.push(format!("{member}/Cargo.toml"));
        }
    }
    assert!(
        named.is_empty(),
        "sea_orm named outside walletops-store (take a Txn or call the store):\n{}",
        named.join("\n")
    );
}

#[test]
fn only_the_binary_depends_on_the_edge() {
    let mut users = Vec::new();
    for member in members() {
        let manifest = read(&workspace().join(&member).join("Cargo.toml"));
        let package = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|n| n.strip_suffix('"'))
            .unwrap_or_default();
        let depends = manifest
            .lines()
            .any(|l| l.trim_start().starts_with("walletops-edge"));
        if depends && package != EDGE_USER {
            users.push(format!("{package} ({member}/Cargo.toml)"));
        }
    }
    assert!(
        users.is_empty(),
        "crates other than the `{EDGE_USER}` binary depending on walletops-edge:\n{}",
        users.join("\n")
    );
}

/// What the chain clients' crate may not depend on: it holds no rule, so it never reaches
/// the store, the core, the contract or the edge.
const ABOVE_THE_CHAINS: [&str; 4] = [
    "walletops-store",
    "walletops-core",
    "walletops-proto",
    "walletops-edge",
];

#[test]
fn the_chain_clients_never_import_the_store_or_the_core() {
    let manifest = read(&workspace().join("chains/Cargo.toml"));
    let mut named: Vec<String> = manifest
        .lines()
        .filter_map(|l| l.split([' ', '.', '=']).next())
        .filter(|dep| ABOVE_THE_CHAINS.contains(dep))
        .map(|dep| format!("chains/Cargo.toml: {dep}"))
        .collect();
    for file in rust_files(&workspace().join("chains")) {
        let code = code_of(&read(&file));
        for krate in ABOVE_THE_CHAINS {
            if code.contains(&format!("{}::", krate.replace('-', "_"))) {
                named.push(format!("{}: {krate}", shown(&file)));
            }
        }
    }
    assert!(
        named.is_empty(),
        "walletops-chains reaches above its floor (move the rule into the core):\n{}",
        named.join("\n")
    );
}

#[test]
fn the_architecture_pages_code_map_names_every_core_module() {
    let page = read(&workspace().join("docs/architecture.md"));
    let section = page
        .split("\n### ")
        .find(|s| s.starts_with("`core-service/`"))
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/architecture.md has a `core-service/` section");
    let listed: BTreeSet<String> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .map(|cell| {
            let name = cell.split('`').next().unwrap_or_default();
            name.trim_end_matches('/')
                .trim_end_matches(".rs")
                .to_owned()
        })
        .collect();
    let src = workspace().join("core-service/src");
    let modules = core_modules(&read(&src.join("lib.rs")));
    let missing: Vec<_> = modules.difference(&listed).collect();
    let stale: Vec<_> = listed.difference(&modules).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "docs/architecture.md's code map of core-service is out of date:\n\
         modules it does not list: {missing:?}\nlisted, but no such module: {stale:?}"
    );
}

#[test]
fn the_core_reads_the_time_from_its_one_clock() {
    let mut readers = Vec::new();
    for file in rust_files(&workspace().join("core-service/src")) {
        if file.ends_with("clock.rs") {
            continue;
        }
        if code_of(&read(&file)).contains("Utc::now()") {
            readers.push(shown(&file));
        }
    }
    assert!(
        readers.is_empty(),
        "the core reads the time outside its clock (call crate::clock::now()):\n{}",
        readers.join("\n")
    );
}
