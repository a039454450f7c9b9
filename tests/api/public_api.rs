//! The facade's public surface, pinned: every public path of `compaction` (all features on) is
//! listed in `tests/public_api.txt`, so adding, removing or moving a public item is a reviewed
//! change of that file, never an accident.
//!
//! The list is computed from the sources with `syn` (stable toolchain, no rustdoc JSON): it
//! starts at `src/lib.rs`, follows each `pub use` into `compaction-core` and
//! `compaction-derive`, and walks every public module it reaches. Each line is one path, its
//! kind, and the cargo features it needs; a `#[doc(hidden)]` item is listed (marked `hidden`)
//! but not walked. After a deliberate change, accept the new list with
//!
//! ```text
//! UPDATE_PUBLIC_API=1 cargo test --test api public_api::
//! ```
//!
//! (Every `#[cfg(feature = ..)]` counts as on, whatever features the test is built with.)
//!
//! and review its diff.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use syn::{Attribute, Item, UseTree, Visibility};

const SNAPSHOT: &str = "tests/public_api.txt";

/// One crate's modules, parsed: its directory and each module's items by path.
struct Crate {
    name: &'static str,
    modules: BTreeMap<Vec<String>, Vec<Item>>,
}

impl Crate {
    fn load(name: &'static str, src: &Path) -> Crate {
        let mut modules = BTreeMap::new();
        load_module(&src.join("lib.rs"), src, Vec::new(), &mut modules);
        Crate { name, modules }
    }
}

/// Parses the module in `file` (its children in `dir`) and every module below it, skipping
/// `#[cfg(test)]` ones.
fn load_module(
    file: &Path,
    dir: &Path,
    path: Vec<String>,
    modules: &mut BTreeMap<Vec<String>, Vec<Item>>,
) {
    let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file:?}: {e}"));
    load_items(parsed.items, dir, path, modules);
}

fn load_items(
    items: Vec<Item>,
    dir: &Path,
    path: Vec<String>,
    modules: &mut BTreeMap<Vec<String>, Vec<Item>>,
) {
    for item in &items {
        let Item::Mod(module) = item else { continue };
        if is_test_only(&module.attrs) {
            continue;
        }
        let name = module.ident.to_string();
        let mut child = path.clone();
        child.push(name.clone());
        match &module.content {
            Some((_, inline)) => load_items(inline.clone(), &dir.join(&name), child, modules),
            None => {
                let flat = dir.join(format!("{name}.rs"));
                let nested = dir.join(&name).join("mod.rs");
                let file = if flat.exists() { flat } else { nested };
                load_module(&file, &dir.join(&name), child, modules);
            }
        }
    }
    modules.insert(path, items);
}

fn is_test_only(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg")
            && quote::ToTokens::to_token_stream(&a.meta).to_string() == "cfg (test)"
    })
}

fn is_hidden(attrs: &[Attribute]) -> bool {
    attrs.iter().any(|a| match &a.meta {
        syn::Meta::List(list) => a.path().is_ident("doc") && list.tokens.to_string() == "hidden",
        _ => false,
    })
}

/// The features named by the item's `#[cfg(..)]` attributes.
fn features(attrs: &[Attribute]) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for attr in attrs.iter().filter(|a| a.path().is_ident("cfg")) {
        let text = quote::ToTokens::to_token_stream(&attr.meta).to_string();
        let mut rest = text.as_str();
        while let Some(at) = rest.find("feature = \"") {
            rest = &rest[at + "feature = \"".len()..];
            let end = rest.find('"').expect("a closed feature name");
            out.insert(rest[..end].to_owned());
            rest = &rest[end..];
        }
    }
    out
}

fn is_pub(vis: &Visibility) -> bool {
    matches!(vis, Visibility::Public(_))
}

/// What a name in a module is.
#[derive(Clone)]
enum Target {
    /// A module of a crate we walk: (crate index, module path).
    Module(usize, Vec<String>),
    /// An item: its kind, and whether it is `#[doc(hidden)]` where it is defined.
    Item(&'static str, bool),
    /// A path into a crate we do not walk.
    External,
}

struct Walker {
    crates: Vec<Crate>,
    lines: BTreeSet<String>,
}

impl Walker {
    fn crate_index(&self, name: &str) -> Option<usize> {
        self.crates.iter().position(|c| c.name == name)
    }

    /// Every target `name` has in module `module` of crate `krate` (one per namespace).
    fn lookup(
        &self,
        krate: usize,
        module: &[String],
        name: &str,
    ) -> Vec<(Target, BTreeSet<String>)> {
        let Some(items) = self.crates[krate].modules.get(module) else {
            return Vec::new();
        };
        let mut found = Vec::new();
        for item in items {
            let (ident, kind, attrs) = match item {
                Item::Struct(i) => (&i.ident, "struct", &i.attrs),
                Item::Enum(i) => (&i.ident, "enum", &i.attrs),
                Item::Trait(i) => (&i.ident, "trait", &i.attrs),
                Item::Type(i) => (&i.ident, "type", &i.attrs),
                Item::Const(i) => (&i.ident, "const", &i.attrs),
                Item::Static(i) => (&i.ident, "static", &i.attrs),
                Item::Union(i) => (&i.ident, "union", &i.attrs),
                // A derive is found by the name it derives (`derive_named`), not its fn's.
                Item::Fn(i) => (&i.sig.ident, "fn", &i.attrs),
                Item::Mod(i) => {
                    if i.ident == name && !is_test_only(&i.attrs) {
                        let mut path = module.to_vec();
                        path.push(name.to_owned());
                        found.push((Target::Module(krate, path), features(&i.attrs)));
                    }
                    continue;
                }
                Item::Use(u) => {
                    let mut here = Vec::new();
                    collect_use(&u.tree, Vec::new(), &mut here);
                    for (segments, alias) in here {
                        if alias == name {
                            let mut feats = features(&u.attrs);
                            for (target, more) in self.resolve(krate, module, &segments) {
                                feats.extend(more);
                                found.push((target, feats.clone()));
                            }
                        }
                    }
                    continue;
                }
                _ => continue,
            };
            if ident == name {
                found.push((Target::Item(kind, is_hidden(attrs)), features(attrs)));
            }
        }
        if let Some(derive) = self.derive_named(krate, module, name) {
            found.push(derive);
        }
        found
    }

    /// A `#[proc_macro_derive(Name)]` function of the derive crate's root named `name`.
    fn derive_named(
        &self,
        krate: usize,
        module: &[String],
        name: &str,
    ) -> Option<(Target, BTreeSet<String>)> {
        if !module.is_empty() || self.crates[krate].name != "compaction_derive" {
            return None;
        }
        let items = &self.crates[krate].modules[module];
        items.iter().find_map(|item| {
            let Item::Fn(f) = item else { return None };
            f.attrs
                .iter()
                .filter(|a| a.path().is_ident("proc_macro_derive"))
                .find(|a| {
                    let text = quote::ToTokens::to_token_stream(&a.meta).to_string();
                    text.starts_with(&format!("proc_macro_derive ({name}"))
                })
                .map(|_| (Target::Item("derive", false), BTreeSet::new()))
        })
    }

    /// The targets of a `use` path written in `module` of `krate`.
    fn resolve(
        &self,
        krate: usize,
        module: &[String],
        segments: &[String],
    ) -> Vec<(Target, BTreeSet<String>)> {
        let (mut krate, mut at, rest) = match segments[0].as_str() {
            "crate" => (krate, Vec::new(), &segments[1..]),
            "self" => (krate, module.to_vec(), &segments[1..]),
            "super" => {
                let mut at = module.to_vec();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    at.pop();
                    rest = &rest[1..];
                }
                (krate, at, rest)
            }
            first => match self.crate_index(first) {
                Some(other) => (other, Vec::new(), &segments[1..]),
                None => {
                    // A child module of this one, or an outside crate.
                    let mut child = module.to_vec();
                    child.push(first.to_owned());
                    if self.crates[krate].modules.contains_key(&child) {
                        (krate, module.to_vec(), segments)
                    } else {
                        return vec![(Target::External, BTreeSet::new())];
                    }
                }
            },
        };
        if rest.is_empty() {
            return vec![(Target::Module(krate, at), BTreeSet::new())];
        }
        let mut feats = BTreeSet::new();
        for (i, segment) in rest.iter().enumerate() {
            let found = self.lookup(krate, &at, segment);
            if i + 1 == rest.len() {
                return found
                    .into_iter()
                    .map(|(t, f)| (t, f.union(&feats).cloned().collect()))
                    .collect();
            }
            match found
                .into_iter()
                .find(|(t, _)| matches!(t, Target::Module(..)))
            {
                Some((Target::Module(k, path), f)) => {
                    krate = k;
                    at = path;
                    feats.extend(f);
                }
                _ => return vec![(Target::External, feats)],
            }
        }
        unreachable!("the loop returns at the last segment")
    }

    /// Lists every public name of `module` under `shown` (a path such as `compaction::sqlite`).
    fn walk(&mut self, krate: usize, module: &[String], shown: &str, inherited: &BTreeSet<String>) {
        let items = self.crates[krate].modules[module].clone();
        for item in &items {
            let (name, vis, attrs) = match item {
                Item::Struct(i) => (i.ident.to_string(), &i.vis, &i.attrs),
                Item::Enum(i) => (i.ident.to_string(), &i.vis, &i.attrs),
                Item::Trait(i) => (i.ident.to_string(), &i.vis, &i.attrs),
                Item::Type(i) => (i.ident.to_string(), &i.vis, &i.attrs),
                Item::Const(i) => (i.ident.to_string(), &i.vis, &i.attrs),
                Item::Static(i) => (i.ident.to_string(), &i.vis, &i.attrs),
                Item::Union(i) => (i.ident.to_string(), &i.vis, &i.attrs),
                Item::Fn(i) => (i.sig.ident.to_string(), &i.vis, &i.attrs),
                Item::Mod(i) => (i.ident.to_string(), &i.vis, &i.attrs),
                Item::Use(u) if is_pub(&u.vis) => {
                    let mut here = Vec::new();
                    collect_use(&u.tree, Vec::new(), &mut here);
                    for (segments, alias) in here {
                        let feats: BTreeSet<String> =
                            inherited.union(&features(&u.attrs)).cloned().collect();
                        let hidden = is_hidden(&u.attrs);
                        if alias == "*" {
                            match self.resolve(krate, module, &segments).into_iter().next() {
                                Some((Target::Module(k, path), more)) => {
                                    let feats = feats.union(&more).cloned().collect();
                                    self.walk(k, &path, shown, &feats);
                                }
                                _ => {
                                    self.emit(shown, "*", "glob of an outside crate", false, &feats)
                                }
                            }
                            continue;
                        }
                        let targets = self.resolve(krate, module, &segments);
                        assert!(
                            !targets.is_empty(),
                            "{shown}: `pub use {}` resolves to nothing",
                            segments.join("::")
                        );
                        for (target, more) in targets {
                            let feats: BTreeSet<String> = feats.union(&more).cloned().collect();
                            self.show(&format!("{shown}::{alias}"), target, hidden, &feats);
                        }
                    }
                    continue;
                }
                _ => continue,
            };
            if !is_pub(vis) || is_test_only(attrs) {
                continue;
            }
            let feats: BTreeSet<String> = inherited.union(&features(attrs)).cloned().collect();
            let target = match item {
                Item::Mod(_) => {
                    let mut path = module.to_vec();
                    path.push(name.clone());
                    Target::Module(krate, path)
                }
                _ => self
                    .lookup(krate, module, &name)
                    .into_iter()
                    .map(|(t, _)| t)
                    .find(|t| !matches!(t, Target::Module(..)))
                    .expect("a defined item"),
            };
            self.show(
                &format!("{shown}::{name}"),
                target,
                is_hidden(attrs),
                &feats,
            );
        }
    }

    fn show(&mut self, path: &str, target: Target, hidden: bool, feats: &BTreeSet<String>) {
        match target {
            Target::Module(k, module) => {
                let module_hidden = hidden || self.module_hidden(k, &module);
                self.emit(path, "", "mod", module_hidden, feats);
                if !module_hidden {
                    self.walk(k, &module, path, feats);
                }
            }
            Target::Item(kind, item_hidden) => {
                self.emit(path, "", kind, hidden || item_hidden, feats)
            }
            Target::External => self.emit(path, "", "outside crate", hidden, feats),
        }
    }

    /// Whether the module is declared `#[doc(hidden)]` where it is defined.
    fn module_hidden(&self, krate: usize, module: &[String]) -> bool {
        let Some((name, parent)) = module.split_last() else {
            return false;
        };
        self.crates[krate].modules[parent]
            .iter()
            .any(|item| matches!(item, Item::Mod(m) if m.ident == name && is_hidden(&m.attrs)))
    }

    fn emit(
        &mut self,
        path: &str,
        suffix: &str,
        kind: &str,
        hidden: bool,
        feats: &BTreeSet<String>,
    ) {
        let mut line = format!("{path}{suffix} ({kind})");
        if hidden {
            line.push_str(" hidden");
        }
        if !feats.is_empty() {
            let names: Vec<&str> = feats.iter().map(String::as_str).collect();
            let _ = write!(line, " [{}]", names.join(", "));
        }
        self.lines.insert(line);
    }
}

/// Expands a use tree into (path segments, the name it is bound to) pairs.
fn collect_use(tree: &UseTree, prefix: Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    match tree {
        UseTree::Path(p) => {
            let mut prefix = prefix;
            prefix.push(p.ident.to_string());
            collect_use(&p.tree, prefix, out);
        }
        UseTree::Name(n) => {
            let name = n.ident.to_string();
            if name == "self" {
                let alias = prefix.last().cloned().unwrap_or_default();
                out.push((prefix, alias));
            } else {
                let mut path = prefix;
                path.push(name.clone());
                out.push((path, name));
            }
        }
        UseTree::Rename(r) => {
            let mut path = prefix;
            let name = r.ident.to_string();
            if name != "self" {
                path.push(name);
            }
            out.push((path, r.rename.to_string()));
        }
        UseTree::Glob(_) => out.push((prefix, "*".to_owned())),
        UseTree::Group(g) => {
            for tree in &g.items {
                collect_use(tree, prefix.clone(), out);
            }
        }
    }
}

/// Every public path of the facade, one line each, sorted.
fn public_paths() -> Vec<String> {
    let root = std::env::var_os("H1_ROOT")
        .map_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let mut walker = Walker {
        crates: vec![
            Crate::load("compaction", &root.join("src")),
            Crate::load("compaction_core", &root.join("compaction-core/src")),
            Crate::load("compaction_derive", &root.join("compaction-derive/src")),
        ],
        lines: BTreeSet::new(),
    };
    walker.walk(0, &[], "compaction", &BTreeSet::new());
    walker.lines.into_iter().collect()
}

#[test]
fn the_public_surface_is_the_reviewed_one() {
    let now = public_paths();
    // The walker must see the surface at all (a walker that lost its way lists nothing).
    for expected in [
        "compaction::Compactor (struct)",
        "compaction::Compactable (derive)",
        "compaction::Compactable (trait)",
        "compaction::transcript::Transcript (struct)",
    ] {
        assert!(
            now.iter().any(|l| l == expected),
            "the walker did not find `{expected}`: {now:#?}"
        );
    }
    let text = now.join("\n") + "\n";
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(SNAPSHOT);
    if std::env::var_os("UPDATE_PUBLIC_API").is_some() {
        std::fs::write(&path, &text).expect("write the snapshot");
        return;
    }
    let pinned = std::fs::read_to_string(&path).unwrap_or_default();
    if pinned == text {
        return;
    }
    let before: BTreeSet<&str> = pinned.lines().collect();
    let after: BTreeSet<&str> = text.lines().collect();
    let mut diff = String::new();
    for line in after.difference(&before) {
        let _ = writeln!(diff, "+ {line}");
    }
    for line in before.difference(&after) {
        let _ = writeln!(diff, "- {line}");
    }
    panic!(
        "the facade's public surface changed ({SNAPSHOT}):\n{diff}\nIf this is deliberate, \
         review it, then run with UPDATE_PUBLIC_API=1 to accept:\n  UPDATE_PUBLIC_API=1 cargo \
         test --test api public_api::"
    );
}
