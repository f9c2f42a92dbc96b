//! The layering, checked on the source: rnfsd's top-level modules import
//! each other without a cycle and along the declared layers, the other
//! crates gain no module cycle, and the crates depend only downwards.
//!
//! The import graph is read without the compiler, as `crate::` and
//! `super::` paths (`use` groups included) after comments, string literals
//! and `#[cfg(test)]` items are dropped. A name the crate root re-exports
//! (`pub use conn::Spliced`) counts as an import of its module.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The top layer: the configuration and the process around the server,
/// put together by `serve`.
const TOP: &[&str] = &["config", "serve", "cli", "listeners", "live"];

/// rnfsd's layers, as modules that must not reach others through their
/// imports (directly or via any module between).
const RULES: &[(&str, &[&str])] = &[
    // Client rules and the backend choice: below the server state.
    ("access", &["state", "programs"]),
    ("access", TOP),
    ("backend", &["state", "programs"]),
    ("backend", TOP),
    // What every call can reach; the programs' state types are its own.
    ("state", &["programs"]),
    ("state", TOP),
    // The program tables, over the state.
    ("programs", TOP),
    // The configuration, made into the state's types by `serve` and `live`.
    ("config", &["programs", "serve", "cli", "listeners", "live"]),
];

/// Workspace crates that must not depend on others, directly or through
/// another crate ([dependencies] only: tests may reach further).
const CRATE_RULES: &[(&str, &[&str])] = &[
    ("rnfsd-transport", &["rnfsd-rpc", "rnfsd-proto", "rnfsd-fs"]),
    ("rnfsd-transport", &["rnfsd-stats"]),
    ("rnfsd-rpc", &["rnfsd-fs", "rnfsd-lockd"]),
    ("rnfsd-fs", &["rnfsd-transport", "rnfsd-rpc", "rnfsd-proto"]),
    ("rnfsd-fs", &["rnfsd-stats", "rnfsd-lockd"]),
    ("rnfsd-lockd", &["rnfsd-transport", "rnfsd-rpc"]),
    ("rnfsd-stats", &["rnfsd-fs", "rnfsd-rpc"]),
];

/// Module cycles other crates had when this test was written, each as the
/// crate directory and the modules of the cycle. A cycle found must lie
/// within one of these; when one is broken, drop it here.
const KNOWN_CYCLES: &[(&str, &[&str])] = &[];

fn crates_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .to_path_buf()
}

#[test]
fn rnfsd_modules_have_no_import_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    for (root, g) in crate_graphs(&src) {
        let cycles = cycles(&g);
        assert!(
            cycles.is_empty(),
            "import cycles among the modules of {}:\n{}",
            root.display(),
            describe(&g, &cycles)
        );
    }
}

#[test]
fn rnfsd_modules_follow_the_layers() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let g = graph(&src.join("lib.rs"));
    let mut broken = Vec::new();
    for (m, banned) in RULES {
        assert!(
            g.contains_key(*m),
            "rule for {m}, which is no module of src/"
        );
        for b in *banned {
            assert!(
                g.contains_key(*b),
                "rule names {b}, which is no module of src/"
            );
            if let Some(path) = route(&g, m, b) {
                broken.push(format!("{m} must not import {b}: {}", path.join(" -> ")));
            }
        }
    }
    assert!(broken.is_empty(), "layering broken:\n{}", broken.join("\n"));
}

#[test]
fn other_crates_gain_no_module_cycle() {
    let mut found = Vec::new();
    let mut seen = 0;
    for dir in crate_dirs() {
        let name = dir
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("")
            .to_owned();
        if name == "rnfsd" {
            continue;
        }
        for (root, g) in crate_graphs(&dir.join("src")) {
            seen += 1;
            for c in cycles(&g) {
                let known = KNOWN_CYCLES
                    .iter()
                    .any(|(k, ms)| *k == name && c.iter().all(|m| ms.contains(&m.as_str())));
                if !known {
                    found.push(format!("{}:\n{}", root.display(), describe(&g, &[c])));
                }
            }
        }
    }
    // The workspace's other crates with a src/ (a wrong path reads none).
    assert!(seen >= 9, "read only {seen} crate roots");
    assert!(
        found.is_empty(),
        "new module import cycles:\n{}",
        found.join("\n")
    );
}

#[test]
fn crates_depend_only_downwards() {
    let mut deps: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for dir in crate_dirs() {
        let (name, d) = manifest_deps(&read(&dir.join("Cargo.toml")));
        deps.insert(name, d);
    }
    let names: BTreeSet<String> = deps.keys().cloned().collect();
    // Only the workspace's own crates are layers.
    let g: Graph = deps
        .iter()
        .map(|(k, v)| (k.clone(), v.intersection(&names).cloned().collect()))
        .collect();
    let mut broken = Vec::new();
    for (c, banned) in CRATE_RULES {
        assert!(
            g.contains_key(*c),
            "rule for {c}, which is no workspace crate"
        );
        for b in *banned {
            assert!(
                g.contains_key(*b),
                "rule names {b}, which is no workspace crate"
            );
            if let Some(path) = route(&g, c, b) {
                broken.push(format!("{c} must not depend on {b}: {}", path.join(" -> ")));
            }
        }
    }
    assert!(
        broken.is_empty(),
        "crate layering broken:\n{}",
        broken.join("\n")
    );
}

/// The reader itself: what it must see and what it must not.
#[test]
fn reader_sees_imports_as_rustc_does() {
    let src = r####"
        //! Docs naming crate::doc_only.
        use crate::{a::X, b, c::{d::Y, self}};
        use super::e; // crate::comment_only
        /* crate::block /* nested crate::nested */ still crate::block */
        const S: &str = "crate::string_only \" crate::escaped";
        const R: &str = r#"crate::raw_only "# ;
        const C: char = '"'; fn f<'a>(x: &'a str) -> crate::f::T { crate::g::h(x) }
        const Q: [u8; 2] = [b'\x7f', b'"']; let r#type = '\''; let _ = "crate::q";
        pub(super) fn vis() { let _ = pub_fn; }
        #[cfg(test)]
        mod tests { use crate::test_only; }
        #[cfg(test)]
        fn test_fn() { crate::test_fn_only::x(); }
        #[cfg(test)]
        mod test_file;
        mod child;
        mod inline { use super::super::k; fn q() { super::same(); } }
    "####;
    let scan = scan(&tokens(src), &["m".to_owned()]);
    let tops: BTreeSet<&str> = scan.refs.iter().map(|p| p[0].as_str()).collect();
    let want: BTreeSet<&str> = ["a", "b", "c", "e", "f", "g", "k", "m"].into();
    assert_eq!(tops, want);
    assert_eq!(scan.children, [(Vec::<String>::new(), "child".to_owned())]);
    let manifest = r#"
        [package]
        name = "x"
        [dependencies]
        a.workspace = true
        b = { version = "1" } # c = "1"
        [dev-dependencies]
        c = "1"
        [dependencies.d]
        version = "1"
    "#;
    let deps = ["a", "b", "d"].iter().map(|s| s.to_string()).collect();
    assert_eq!(manifest_deps(manifest), ("x".to_owned(), deps));
    let g: Graph = [("p", &["q"][..]), ("q", &["p"]), ("r", &["p"])]
        .iter()
        .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(cycles(&g), [vec!["p".to_owned(), "q".to_owned()]]);
    assert_eq!(
        route(&g, "r", "q"),
        Some(vec!["r".into(), "p".into(), "q".into()])
    );
    assert_eq!(route(&g, "p", "r"), None);
}

/// The reader on a crate of files: `mod` declarations found, test modules
/// left out, a root re-export counted as its module.
#[test]
fn reader_builds_a_crate_graph() {
    let d = tempfile::tempdir().expect("tempdir");
    let src = d.path();
    let files = [
        (
            "lib.rs",
            "mod a;\npub mod b;\nmod c;\npub use b::Thing;\n#[cfg(test)]\nmod t;\n",
        ),
        ("a.rs", "use crate::Thing;\n"),
        ("b/mod.rs", "mod inner;\npub struct Thing;\n"),
        ("b/inner.rs", "pub fn f() { super::super::a::g() }\n"),
        (
            "c.rs",
            "use crate::b;\n#[cfg(test)]\nmod tests { use crate::a; }\n",
        ),
        ("t.rs", "use crate::c;\n"),
    ];
    for (f, text) in files {
        let p = src.join(f);
        std::fs::create_dir_all(p.parent().expect("dir")).expect("mkdir");
        std::fs::write(&p, text).expect("write");
    }
    let g = graph(&src.join("lib.rs"));
    let want: Graph = [("a", &["b"][..]), ("b", &["a"]), ("c", &["b"])]
        .iter()
        .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
        .collect();
    assert_eq!(g, want);
    assert_eq!(cycles(&g), [vec!["a".to_owned(), "b".to_owned()]]);
}

type Graph = BTreeMap<String, BTreeSet<String>>;

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The workspace's crate directories (crates/*).
fn crate_dirs() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(crates_dir())
        .expect("crates/")
        .map(|e| e.expect("crates/ entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .collect();
    v.sort();
    v
}

/// The graph of each crate root in `src` (lib.rs, main.rs).
fn crate_graphs(src: &Path) -> Vec<(PathBuf, Graph)> {
    ["lib.rs", "main.rs"]
        .iter()
        .map(|f| src.join(f))
        .filter(|p| p.is_file())
        .map(|p| {
            let g = graph(&p);
            (p, g)
        })
        .collect()
}

// ---- the source reader ----

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    /// `::`
    Sep,
    Punct(char),
}

fn ident_start(c: char) -> bool {
    c == '_' || c.is_alphabetic()
}

fn ident_char(c: char) -> bool {
    c == '_' || c.is_alphanumeric()
}

/// Rust tokens that matter for paths: no comments, no literals.
fn tokens(src: &str) -> Vec<Tok> {
    let c: Vec<char> = src.chars().collect();
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut out = Vec::new();
    let mut i = 0;
    // Past a "..." whose opening quote is at `i`.
    let string_end = |mut i: usize| {
        i += 1;
        while i < c.len() && c[i] != '"' {
            i += if c[i] == '\\' { 2 } else { 1 };
        }
        i + 1
    };
    // Past a character literal whose opening quote is at `i` (None: a
    // lifetime or label).
    let char_end = |i: usize| {
        if at(i + 1) == '\\' {
            // '\n', '\'', '\u{..}'
            let mut j = i + 3;
            while j < c.len() && c[j] != '\'' {
                j += 1;
            }
            Some(j + 1)
        } else if at(i + 2) == '\'' {
            Some(i + 3)
        } else {
            None
        }
    };
    while i < c.len() {
        let ch = c[i];
        if ch == '/' && at(i + 1) == '/' {
            while i < c.len() && c[i] != '\n' {
                i += 1;
            }
        } else if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < c.len() {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if ch == '"' {
            i = string_end(i);
        } else if ch == '\'' {
            match char_end(i) {
                Some(end) => i = end,
                None => {
                    out.push(Tok::Punct('\''));
                    i += 1;
                }
            }
        } else if ch.is_ascii_digit() {
            // A number, its suffix included.
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
        } else if ident_start(ch) {
            let start = i;
            while i < c.len() && ident_char(c[i]) {
                i += 1;
            }
            let w: String = c[start..i].iter().collect();
            let raw = matches!(w.as_str(), "r" | "br" | "cr");
            if raw && (at(i) == '"' || at(i) == '#') {
                let mut hashes = 0;
                while at(i + hashes) == '#' {
                    hashes += 1;
                }
                if at(i + hashes) != '"' {
                    // A raw identifier, r#name.
                    i += 1;
                    continue;
                }
                i += hashes + 1;
                while i < c.len() && !(c[i] == '"' && (1..=hashes).all(|k| at(i + k) == '#')) {
                    i += 1;
                }
                i += hashes + 1;
            } else if matches!(w.as_str(), "b" | "c") && at(i) == '"' {
                i = string_end(i);
            } else if w == "b" && at(i) == '\'' {
                i = char_end(i).unwrap_or(i + 1);
            } else {
                out.push(Tok::Ident(w));
            }
        } else if ch == ':' && at(i + 1) == ':' {
            out.push(Tok::Sep);
            i += 2;
        } else if ch.is_whitespace() {
            i += 1;
        } else {
            out.push(Tok::Punct(ch));
            i += 1;
        }
    }
    out
}

/// What one file declares and refers to.
#[derive(Debug, Default)]
struct Scan {
    /// Out-of-line child modules (`mod x;`), under the inline modules
    /// they are declared in.
    children: Vec<(Vec<String>, String)>,
    /// Paths from the crate root (`crate::a::B` is ["a", "B"]).
    refs: Vec<Vec<String>>,
    /// At the crate root: `use` paths with the name each brings in.
    uses: Vec<(String, Vec<String>)>,
}

fn is(t: Option<&Tok>, p: char) -> bool {
    t == Some(&Tok::Punct(p))
}

fn ident(t: Option<&Tok>) -> Option<&str> {
    match t {
        Some(Tok::Ident(s)) => Some(s),
        _ => None,
    }
}

/// The index past the token that closes the bracket opened at `i`.
fn close(t: &[Tok], i: usize) -> usize {
    let mut depth = 0i32;
    let mut j = i;
    while j < t.len() {
        match t[j] {
            Tok::Punct('(' | '[' | '{') => depth += 1,
            Tok::Punct(')' | ']' | '}') => {
                depth -= 1;
                if depth == 0 {
                    return j + 1;
                }
            }
            _ => {}
        }
        j += 1;
    }
    j
}

/// The index past the item starting at `i`: up to its `;` or its `{...}`
/// body, or to the `}` of the block around it.
fn item_end(t: &[Tok], mut i: usize) -> usize {
    while i < t.len() {
        match t[i] {
            Tok::Punct('(' | '[') => i = close(t, i),
            Tok::Punct('{') => return close(t, i),
            Tok::Punct(';') => return i + 1,
            Tok::Punct('}') => return i,
            _ => i += 1,
        }
    }
    i
}

/// A use tree (or the rest of a path) starting at `i`: the paths it names
/// and the index past it. `as` renames are kept as the path's last name.
fn tree(t: &[Tok], mut i: usize, prefix: &[String], out: &mut Vec<Vec<String>>) -> usize {
    if is(t.get(i), '{') {
        i += 1;
        while i < t.len() && !is(t.get(i), '}') {
            let next = tree(t, i, prefix, out);
            // Past a separator, or a token no use tree has (a macro's `$x`).
            i = if next == i || is(t.get(next), ',') {
                next + 1
            } else {
                next
            };
        }
        return i + 1;
    }
    if is(t.get(i), '*') {
        let mut p = prefix.to_vec();
        p.push("*".into());
        out.push(p);
        return i + 1;
    }
    let Some(name) = ident(t.get(i)) else {
        out.push(prefix.to_vec());
        return i;
    };
    let mut p = prefix.to_vec();
    if name != "self" {
        p.push(name.to_owned());
    }
    i += 1;
    if t.get(i) == Some(&Tok::Sep)
        && (ident(t.get(i + 1)).is_some() || is(t.get(i + 1), '{') || is(t.get(i + 1), '*'))
    {
        return tree(t, i + 1, &p, out);
    }
    if ident(t.get(i)) == Some("as") {
        if let Some(alias) = ident(t.get(i + 1)) {
            p.push(format!("as {alias}"));
            i += 2;
        }
    }
    out.push(p);
    i
}

/// Reads one file's tokens; `module` is the file's module path from the
/// crate root (empty for the root).
fn scan(t: &[Tok], module: &[String]) -> Scan {
    let mut s = Scan::default();
    // Inline modules open here, with the brace depth inside each.
    let mut inline: Vec<(String, usize)> = Vec::new();
    let mut depth = 0usize;
    let mut test_item = false;
    let mut i = 0;
    while i < t.len() {
        // Attributes: `#[cfg(test)]` drops the item after it.
        let inner_attr = is(t.get(i + 1), '!') && is(t.get(i + 2), '[');
        if is(t.get(i), '#') && (is(t.get(i + 1), '[') || inner_attr) {
            let open = if inner_attr { i + 2 } else { i + 1 };
            let end = close(t, open);
            let inner = &t[open + 1..end.saturating_sub(1).max(open + 1)];
            let cfg_test = inner
                == [
                    Tok::Ident("cfg".into()),
                    Tok::Punct('('),
                    Tok::Ident("test".into()),
                    Tok::Punct(')'),
                ];
            if cfg_test && inner_attr {
                return Scan::default();
            }
            test_item |= cfg_test;
            i = end;
            continue;
        }
        if test_item {
            test_item = false;
            i = item_end(t, i);
            continue;
        }
        match &t[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                if inline.last().is_some_and(|(_, d)| *d == depth) {
                    inline.pop();
                }
                depth = depth.saturating_sub(1);
            }
            Tok::Ident(w) if w == "mod" => {
                if let Some(name) = ident(t.get(i + 1)) {
                    if is(t.get(i + 2), ';') {
                        let within = inline.iter().map(|(n, _)| n.clone()).collect();
                        s.children.push((within, name.to_owned()));
                        i += 3;
                        continue;
                    }
                    if is(t.get(i + 2), '{') {
                        depth += 1;
                        inline.push((name.to_owned(), depth));
                        i += 3;
                        continue;
                    }
                }
            }
            Tok::Ident(w) if w == "use" && module.is_empty() && depth == 0 => {
                let mut paths = Vec::new();
                i = tree(t, i + 1, &[], &mut paths);
                for p in paths {
                    let rel: Vec<String> = match p.first().map(String::as_str) {
                        Some("crate" | "self") => p[1..].to_vec(),
                        _ => p,
                    };
                    if let Some(last) = rel.last() {
                        let name = last.strip_prefix("as ").unwrap_or(last).to_owned();
                        let path = rel.into_iter().filter(|x| !x.starts_with("as ")).collect();
                        s.uses.push((name, path));
                    }
                }
                continue;
            }
            Tok::Ident(w) if w == "crate" && t.get(i + 1) == Some(&Tok::Sep) => {
                let mut paths = Vec::new();
                i = tree(t, i + 2, &[], &mut paths);
                s.refs.extend(paths.into_iter().filter(|p| !p.is_empty()));
                continue;
            }
            Tok::Ident(w)
                if w == "super"
                    && t.get(i + 1) == Some(&Tok::Sep)
                    && i.checked_sub(1).map(|k| &t[k]) != Some(&Tok::Sep) =>
            {
                let mut up = 0;
                let mut j = i;
                while ident(t.get(j)) == Some("super") && t.get(j + 1) == Some(&Tok::Sep) {
                    up += 1;
                    j += 2;
                }
                let here: Vec<String> = module
                    .iter()
                    .cloned()
                    .chain(inline.iter().map(|(n, _)| n.clone()))
                    .collect();
                if up <= here.len() {
                    let base = &here[..here.len() - up];
                    let mut paths = Vec::new();
                    i = tree(t, j, base, &mut paths);
                    s.refs.extend(paths.into_iter().filter(|p| !p.is_empty()));
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    s
}

/// The file of module `name` declared in `dir` (`name.rs` or `name/mod.rs`).
fn module_file(dir: &Path, name: &str) -> Option<PathBuf> {
    [
        dir.join(format!("{name}.rs")),
        dir.join(name).join("mod.rs"),
    ]
    .into_iter()
    .find(|p| p.is_file())
}

/// The graph of the crate whose root file is `root`: each top-level
/// module and the top-level modules it imports.
fn graph(root: &Path) -> Graph {
    let src = root.parent().expect("src/");
    let root_scan = scan(&tokens(&read(root)), &[]);
    let mut g = Graph::new();
    // Files still to read: (path, module path).
    let mut todo: Vec<(PathBuf, Vec<String>)> = Vec::new();
    for (within, name) in &root_scan.children {
        if within.is_empty() {
            let f = module_file(src, name)
                .unwrap_or_else(|| panic!("{}: no file for mod {name}", root.display()));
            g.insert(name.clone(), BTreeSet::new());
            todo.push((f, vec![name.clone()]));
        }
    }
    // The root's `use` names that stand for one of its modules.
    let reexport: BTreeMap<String, String> = root_scan
        .uses
        .iter()
        .filter(|(n, p)| n != "*" && p.len() > 1 && g.contains_key(&p[0]))
        .map(|(n, p)| (n.clone(), p[0].clone()))
        .collect();
    while let Some((file, module)) = todo.pop() {
        let sc = scan(&tokens(&read(&file)), &module);
        // Where this file's children live: beside mod.rs, or in a
        // directory named after the file.
        let dir = match file.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs") => file.parent().expect("dir").to_path_buf(),
            _ => file.with_extension(""),
        };
        for (within, name) in &sc.children {
            let d = within.iter().fold(dir.clone(), |d, n| d.join(n));
            let f = module_file(&d, name)
                .unwrap_or_else(|| panic!("{}: no file for mod {name}", file.display()));
            let mut m = module.clone();
            m.extend(within.iter().cloned());
            m.push(name.clone());
            todo.push((f, m));
        }
        let top = &module[0];
        for r in &sc.refs {
            let to = if g.contains_key(&r[0]) {
                Some(&r[0])
            } else {
                reexport.get(&r[0])
            };
            if let Some(to) = to.filter(|to| *to != top) {
                let to = to.clone();
                g.get_mut(top).expect("a top-level module").insert(to);
            }
        }
    }
    g
}

// ---- graphs ----

/// The cycles of `g`: its strongly connected components of two or more
/// modules, each sorted (Tarjan).
fn cycles(g: &Graph) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Graph,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !t.g.contains_key(w) {
                continue;
            }
            if !t.index.contains_key(w) {
                visit(t, w);
                let l = t.low[v].min(t.low[w]);
                t.low.insert(v, l);
            } else if t.stack.contains(&w) {
                let l = t.low[v].min(t.index[w]);
                t.low.insert(v, l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            while let Some(w) = t.stack.pop() {
                comp.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

/// Each cycle's modules with their imports inside it.
fn describe(g: &Graph, cycles: &[Vec<String>]) -> String {
    let mut s = String::new();
    for c in cycles {
        s.push_str(&format!("  cycle {c:?}\n"));
        for m in c {
            let inside: Vec<&String> = g[m].iter().filter(|d| c.contains(d)).collect();
            s.push_str(&format!("    {m} -> {inside:?}\n"));
        }
    }
    s
}

/// A shortest import path from `from` to `to`, if any.
fn route(g: &Graph, from: &str, to: &str) -> Option<Vec<String>> {
    let mut prev: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = std::collections::VecDeque::from([from]);
    while let Some(v) = queue.pop_front() {
        for w in g.get(v).into_iter().flatten() {
            if w == from || prev.contains_key(w.as_str()) {
                continue;
            }
            prev.insert(w, v);
            if w == to {
                let mut path = vec![to.to_owned()];
                let mut at = to;
                while at != from {
                    at = prev[at];
                    path.push(at.to_owned());
                }
                path.reverse();
                return Some(path);
            }
            queue.push_back(w);
        }
    }
    None
}

/// A Cargo.toml's package name and the names in its [dependencies]
/// (`[dependencies.x]` and per-target tables too; not dev- or
/// build-dependencies).
fn manifest_deps(toml: &str) -> (String, BTreeSet<String>) {
    let mut name = String::new();
    let mut deps = BTreeSet::new();
    let mut section = String::new();
    for line in toml.lines() {
        let line = line.split('#').next().unwrap_or("").trim();
        if let Some(h) = line.strip_prefix('[') {
            section = h.trim_end_matches(']').trim().to_owned();
            if let Some(d) = section.strip_prefix("dependencies.") {
                deps.insert(d.trim_matches('"').to_owned());
            }
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        let key = key.trim();
        if section == "package" && key == "name" {
            name = value.trim().trim_matches('"').to_owned();
        }
        let target = section.starts_with("target.") && section.ends_with(".dependencies");
        if section == "dependencies" || target {
            let dep = key.split('.').next().unwrap_or(key).trim_matches('"');
            deps.insert(dep.to_owned());
        }
    }
    (name, deps)
}
