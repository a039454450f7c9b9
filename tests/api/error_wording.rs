//! The wording of every error message the core declares (`#[error("...")]`): a message wrapped
//! in the source must be wrapped with a `\` at each line's end, or the line's indentation
//! becomes part of what the user reads (`write the base          URL as ...`, which
//! `SummarizerError::InsecureTransport` printed).

use std::path::{Path, PathBuf};
use syn::{Attribute, Item, LitStr};

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{dir:?}: {e}")) {
        let path = entry.expect("a directory entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The format string of each `#[error("...", ...)]` among `attrs` (not `#[error(transparent)]`).
fn messages(attrs: &[Attribute], out: &mut Vec<String>) {
    for attr in attrs.iter().filter(|a| a.path().is_ident("error")) {
        let first = attr.parse_args_with(|input: syn::parse::ParseStream| {
            let lit = input.parse::<LitStr>().ok();
            // The format's arguments, if any, are not read.
            input.step(|cursor| {
                let mut rest = *cursor;
                while let Some((_, next)) = rest.token_tree() {
                    rest = next;
                }
                Ok(((), rest))
            })?;
            Ok(lit)
        });
        if let Ok(Some(lit)) = first {
            out.push(lit.value());
        }
    }
}

/// The messages declared on the error types among `items`, in nested modules too.
fn declared(items: &[Item], out: &mut Vec<String>) {
    for item in items {
        match item {
            Item::Enum(e) => {
                messages(&e.attrs, out);
                for variant in &e.variants {
                    messages(&variant.attrs, out);
                }
            }
            Item::Struct(s) => messages(&s.attrs, out),
            Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    declared(items, out);
                }
            }
            _ => {}
        }
    }
}

#[test]
fn no_error_message_carries_the_indentation_of_its_source() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for dir in [
        "compaction-core/src",
        "compaction-cli/src",
        "compaction-derive/src",
        "src",
    ] {
        sources(&root.join(dir), &mut files);
    }
    let mut checked = 0;
    let mut broken = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("reads the source");
        let parsed = syn::parse_file(&text).unwrap_or_else(|e| panic!("{file:?}: {e}"));
        let mut found = Vec::new();
        declared(&parsed.items, &mut found);
        checked += found.len();
        for message in found {
            // Two spaces in a row, other than at a line's start (an indented line of its own).
            let bad = message
                .lines()
                .any(|line| line.trim_start().contains("  ") || line.ends_with(' '));
            if bad {
                broken.push(format!("{}: {message:?}", file.display()));
            }
        }
    }
    // The core declares well over a hundred messages: a walk that found few read nothing.
    assert!(checked > 100, "only {checked} error messages found");
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
