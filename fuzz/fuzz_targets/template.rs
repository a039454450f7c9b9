//! The pointer-template parser never panics, and a successful parse round-trips: rendering its
//! pieces back (with `{{`/`}}` escaping) and parsing again gives the same pieces.
#![no_main]

#[allow(dead_code)]
#[path = "../../compaction-derive/src/internals/template.rs"]
mod template;

use libfuzzer_sys::fuzz_target;
use template::{parse, Piece};

fn render(pieces: &[Piece]) -> String {
    let mut out = String::new();
    for piece in pieces {
        match piece {
            Piece::Literal(text) => {
                for c in text.chars() {
                    match c {
                        '{' => out.push_str("{{"),
                        '}' => out.push_str("}}"),
                        c => out.push(c),
                    }
                }
            }
            Piece::Field(name) => {
                out.push('{');
                out.push_str(name);
                out.push('}');
            }
        }
    }
    out
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    match parse(text) {
        Ok(pieces) => {
            assert!(
                !pieces.is_empty(),
                "a parsed template has at least one piece"
            );
            for pair in pieces.windows(2) {
                assert!(
                    !matches!(pair, [Piece::Literal(_), Piece::Literal(_)]),
                    "adjacent literals are merged"
                );
            }
            let rendered = render(&pieces);
            let again = parse(&rendered)
                .unwrap_or_else(|e| panic!("re-rendered {rendered:?} fails to parse: {e:?}"));
            assert_eq!(again, pieces, "round trip of {text:?} via {rendered:?}");
        }
        Err(e) => assert!(e.offset <= text.len(), "error offset past the end"),
    }
});
