//! The folders of `src/` are layers, and the imports between them say so (issue 24): this
//! test reads every source file with the Rust parser (`syn`), resolves each `crate::`,
//! `super::` and child-module path to the file that defines it, and checks the import graph.
//!
//! Run `cargo test --test architecture -- --nocapture` to print the graph's circles and the
//! layer violations it counts. Needs no database.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// A module of the crate: its path from the crate root (`["frontend", "query"]`) and the
/// source file that holds it (an inline `mod x { }` maps to its enclosing file).
type ModPath = Vec<String>;

/// The crate's modules, by path, and the file each one lives in.
struct Crate {
    root: PathBuf,
    modules: BTreeMap<ModPath, PathBuf>,
}

fn module_path(root: &Path, file: &Path) -> ModPath {
    let rel = file.strip_prefix(root).expect("file under src/");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().expect("a file name");
    let stem = last.trim_end_matches(".rs");
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// Collects the inline modules of one file (`mod tests { }`), so paths can resolve to them.
struct InlineModules<'a> {
    stack: ModPath,
    file: &'a Path,
    found: Vec<(ModPath, PathBuf)>,
}

impl<'ast> Visit<'ast> for InlineModules<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.stack.push(m.ident.to_string());
        if m.content.is_some() {
            self.found
                .push((self.stack.clone(), self.file.to_path_buf()));
            syn::visit::visit_item_mod(self, m);
        }
        self.stack.pop();
    }
}

/// Walks one file and records every path into the crate that it names.
struct Imports<'a> {
    krate: &'a Crate,
    stack: ModPath,
    targets: BTreeSet<ModPath>,
}

impl Imports<'_> {
    /// Resolves `segments`, read inside the current module, to an absolute module path, or
    /// `None` for a path outside the crate (another crate, a local name).
    fn absolute(&self, segments: &[String]) -> Option<ModPath> {
        let first = segments.first()?;
        let mut base = self.stack.clone();
        let mut rest = segments;
        match first.as_str() {
            "crate" => {
                base.clear();
                rest = &segments[1..];
            }
            "self" => rest = &segments[1..],
            "super" => {
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
            }
            _ => {
                let mut child = base.clone();
                child.push(first.clone());
                if !self.krate.modules.contains_key(&child) {
                    return None;
                }
            }
        }
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, segments: &[String]) {
        if let Some(path) = self.absolute(segments) {
            // The longest prefix that is a module.
            let mut p = path;
            while !p.is_empty() && !self.krate.modules.contains_key(&p) {
                p.pop();
            }
            self.targets.insert(p);
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => {
                prefix.push(n.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(r) => {
                prefix.push(r.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => self.record(prefix),
            syn::UseTree::Group(g) => {
                for t in &g.items {
                    self.use_tree(prefix, t);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Imports<'_> {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.stack.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.stack.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.leading_colon.is_none() && p.segments.len() > 1 {
            let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
            self.record(&segments);
        }
        syn::visit::visit_path(self, p);
    }
}

/// The import graph: each file (relative to `src/`) and the files it names.
struct Graph {
    edges: BTreeMap<String, BTreeSet<String>>,
}

fn graph() -> Graph {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.retain(|f| f.file_name().is_some_and(|n| n != "main.rs"));
    let mut krate = Crate {
        root: root.clone(),
        modules: BTreeMap::new(),
    };
    let mut parsed = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).expect("read a source file");
        let ast = syn::parse_file(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let path = module_path(&krate.root, f);
        krate.modules.insert(path.clone(), f.clone());
        parsed.push((f.clone(), path, ast));
    }
    for (f, path, ast) in &parsed {
        let mut inline = InlineModules {
            stack: path.clone(),
            file: f,
            found: Vec::new(),
        };
        inline.visit_file(ast);
        krate.modules.extend(inline.found);
    }
    let rel = |f: &Path| f.strip_prefix(&root).unwrap().display().to_string();
    let mut edges = BTreeMap::new();
    for (f, path, ast) in &parsed {
        let mut imports = Imports {
            krate: &krate,
            stack: path.clone(),
            targets: BTreeSet::new(),
        };
        imports.visit_file(ast);
        let to: BTreeSet<String> = imports
            .targets
            .iter()
            .map(|m| rel(&krate.modules[m]))
            .filter(|t| *t != rel(f) && t != "lib.rs")
            .collect();
        edges.insert(rel(f), to);
    }
    Graph { edges }
}

/// The strongly connected components with more than one member (Tarjan), each sorted.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn connect<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on_stack.insert(v);
        for w in s.edges.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                connect(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if s.on_stack.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut component = Vec::new();
            loop {
                let w = s.stack.pop().unwrap();
                s.on_stack.remove(w);
                component.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                s.out.push(component);
            }
        }
    }
    let mut s = State {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !s.index.contains_key(v.as_str()) {
            connect(&mut s, v);
        }
    }
    s.out.sort();
    s.out
}

/// The top folder or file of `src/` a file belongs to (`frontend/query.rs` → `frontend`).
fn top(file: &str) -> String {
    file.split('/')
        .next()
        .unwrap()
        .trim_end_matches(".rs")
        .to_string()
}

fn top_level(g: &Graph) -> BTreeMap<String, BTreeSet<String>> {
    let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, tos) in &g.edges {
        let entry = out.entry(top(from)).or_default();
        for to in tos {
            if top(to) != top(from) {
                entry.insert(top(to));
            }
        }
    }
    out
}

/// Pairs of files that name each other directly.
fn mutual_pairs(g: &Graph) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (a, tos) in &g.edges {
        for b in tos {
            if a < b && g.edges.get(b).is_some_and(|t| t.contains(a)) {
                out.push((a.clone(), b.clone()));
            }
        }
    }
    out
}

/// The layers, lowest first: a top-level module may import only modules of lower layers
/// (`lib.rs` and docs/architecture.md draw the same table).
const LAYERS: &[&[&str]] = &[
    // Leaves: import nothing of the crate.
    &["error", "metrics", "crypto", "id"],
    &["config"],
    // The wire encoding (packets, rows, binary values, status words), client access, the
    // session registry.
    &["protocol", "access", "session_registry"],
    // Exact values and the merge of several shards' rows.
    &["merge"],
    // The statement parser and analysis.
    &["sql"],
    // Per-datasource pools; the router; SQL rewriting; the client connection (its stream,
    // handshake and the encoding of replies).
    &["backend", "route", "rewrite", "wire"],
    // The pure planner; id issuance; the legacy-id tools; the members of clustered
    // datasources.
    &["plan", "issuance", "legacy", "topology"],
    // Running plans on backend connections; moving shards between datasources.
    &["execute", "moves"],
    // The state sessions share.
    &["proxy"],
    // The sessions: each command to its reply.
    &["engine"],
    // A client connection from accept to close: handshake, then the command loop.
    &["frontend"],
    // Around the process: the listener, the admin port, the operator commands.
    &["server", "admin", "tools"],
    &["process"],
];

/// The layer table drawn in `lib.rs`'s module documentation: each numbered line starts a
/// layer, and a continuation line's first word that names a module belongs to it.
fn drawn_layers() -> Vec<Vec<String>> {
    let lib = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs"))
        .expect("read src/lib.rs");
    let drawing = lib
        .split("//! ```text\n")
        .nth(1)
        .and_then(|rest| rest.split("//! ```").next())
        .expect("a text drawing in lib.rs");
    let mut layers: Vec<(usize, Vec<String>)> = Vec::new();
    for line in drawing.lines() {
        let line = line.trim_start_matches("//!");
        let (names, _) = line.split_at(line.len().min(30));
        let mut words = names.split_whitespace().peekable();
        match words.peek().map(|w| w.parse::<usize>()) {
            Some(Ok(n)) => {
                words.next();
                layers.push((n, words.map(str::to_owned).collect()));
            }
            Some(Err(_)) if line.starts_with("    ") && !line.starts_with("      ") => {
                let last = layers.last_mut().expect("a layer before its continuation");
                last.1.extend(words.map(str::to_owned));
            }
            _ => {}
        }
    }
    layers.sort_by_key(|(n, _)| *n);
    layers.into_iter().map(|(_, names)| names).collect()
}

#[test]
fn the_drawing_in_lib_rs_is_the_layer_table() {
    let want: Vec<Vec<String>> = LAYERS
        .iter()
        .map(|l| {
            let mut v: Vec<String> = l.iter().map(|s| (*s).to_owned()).collect();
            v.sort();
            v
        })
        .collect();
    let got: Vec<Vec<String>> = drawn_layers()
        .into_iter()
        .map(|mut v| {
            v.sort();
            v
        })
        .collect();
    assert_eq!(got, want, "lib.rs draws other layers than LAYERS");
}

fn layer(module: &str) -> usize {
    LAYERS
        .iter()
        .position(|l| l.contains(&module))
        .unwrap_or_else(|| panic!("src/{module} is in no layer of LAYERS"))
}

#[test]
fn top_level_modules_import_only_lower_layers() {
    let g = graph();
    let mut wrong = Vec::new();
    for (from, tos) in &g.edges {
        if from == "lib.rs" {
            continue;
        }
        for to in tos {
            let (a, b) = (top(from), top(to));
            if a != b && layer(&b) >= layer(&a) {
                wrong.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the layers:\n{}",
        wrong.join("\n")
    );
    assert!(circles(&top_level(&g)).is_empty());
}

/// No file imports another that imports it, directly or around a loop (36 files were in
/// such circles before issue 24: parents that re-exported their children while the
/// children imported the parent's types, and types extended across files).
#[test]
fn no_file_is_in_an_import_circle() {
    let g = graph();
    let found = circles(&g.edges);
    assert!(
        found.is_empty(),
        "import circles (run `cargo test --test architecture report -- --nocapture`):\n{}",
        found
            .iter()
            .map(|c| c.join(" "))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

/// Backend connections are opened and taken from the pools only in `backend/` and
/// `execute/`: everything else asks the doors there (`Transaction::connection` for a
/// session's accesses, `control_connection` and `own_connection` for the proxy's own),
/// with a `Target`.
#[test]
fn only_backend_and_execute_open_backend_connections() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    let mut found = Vec::new();
    for f in files {
        let rel = f.strip_prefix(&root).unwrap().display().to_string();
        if rel.starts_with("backend/") || rel.starts_with("execute/") {
            continue;
        }
        let text = std::fs::read_to_string(&f).unwrap();
        for (n, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            if ["BackendConn::connect", "pools.get(", ".saturated("]
                .iter()
                .any(|p| code.contains(p))
            {
                found.push(format!("{rel}:{}: {}", n + 1, line.trim()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "backend access around the doors:\n{}",
        found.join("\n")
    );
}

/// The frontend and the wire know no plan, no pool and no backend connection: what a
/// command does happens in the engine, below the frontend's command loop.
#[test]
fn frontend_and_wire_know_no_plan_pool_or_backend() {
    let g = graph();
    let below_the_engine = ["plan", "execute", "backend", "route", "rewrite", "merge"];
    let mut wrong = Vec::new();
    for (from, tos) in &g.edges {
        if !["frontend", "wire"].contains(&top(from).as_str()) {
            continue;
        }
        for to in tos {
            if below_the_engine.contains(&top(to).as_str()) {
                wrong.push(format!("{from} -> {to}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "the wire reaching past the engine:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn report() {
    let g = graph();
    let files = circles(&g.edges);
    let modules = circles(&top_level(&g));
    println!("files: {}", g.edges.len());
    println!(
        "file circles: {} (files in them: {})",
        files.len(),
        files.iter().map(Vec::len).sum::<usize>()
    );
    for c in &files {
        println!("  {}", c.join(" "));
    }
    let pairs = mutual_pairs(&g);
    println!("files importing each other directly: {}", pairs.len());
    for (a, b) in &pairs {
        println!("  {a} <-> {b}");
    }
    println!("top-level circles: {}", modules.len());
    for c in &modules {
        println!("  {}", c.join(" "));
    }
    for (from, tos) in top_level(&g) {
        println!(
            "  {from} -> {}",
            tos.into_iter().collect::<Vec<_>>().join(" ")
        );
    }
}

#[test]
fn report_edges() {
    let g = graph();
    let want: Vec<(String, String)> = std::env::var("EDGES")
        .unwrap_or_default()
        .split(',')
        .filter_map(|p| p.split_once('>'))
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
    for (from, tos) in &g.edges {
        for to in tos {
            if want.iter().any(|(a, b)| top(from) == *a && top(to) == *b) {
                println!("  {from} -> {to}");
            }
        }
    }
}

#[test]
fn report_file_edges() {
    let g = graph();
    let Ok(file) = std::env::var("FILE") else {
        return;
    };
    for (from, tos) in &g.edges {
        if *from == file {
            println!(
                "{from} -> {}",
                tos.iter().cloned().collect::<Vec<_>>().join(" ")
            );
        }
        if tos.contains(&file) {
            println!("  <- {from}");
        }
    }
}
