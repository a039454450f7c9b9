//! How stored strings reach a terminal: every character that could drive it written as an
//! escape. The bottom of the tool: failures (`fail.rs`) and everything printed (`output.rs`)
//! escape what they show with it, so it imports nothing of the crate.

/// Whether `c` may not reach a terminal as itself: a control character (C0, DEL, C1: ESC
/// starts the sequences that move the cursor and rewrite lines, CR returns to the start of
/// the line, BEL rings), a line or paragraph separator, or an invisible format character (the
/// bidirectional overrides and isolates that reorder what follows, zero-width characters, the
/// byte order mark, tag characters).
fn is_unsafe(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{00AD}'
                | '\u{061C}'
                | '\u{180E}'
                | '\u{200B}'..='\u{200F}'
                | '\u{2028}'..='\u{202E}'
                | '\u{2060}'..='\u{206F}'
                | '\u{FEFF}'
                | '\u{FFF9}'..='\u{FFFB}'
                | '\u{E0000}'..='\u{E007F}'
        )
}

/// `c` written as an escape a reader can undo: `\n`, `\r`, `\t`, or `\u{..}`.
fn escaped(c: char) -> String {
    match c {
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        c => format!("\\u{{{:x}}}", c as u32),
    }
}

/// `text` on one line, every character that could drive the terminal or fake further lines
/// (controls, newlines, bidi overrides, invisible format characters) written as an escape:
/// for every stored string a command prints (keys, actions, targets, scopes, agent ids, field
/// paths, notes, addresses), since any of them may come from a model's tool arguments.
pub fn printable(text: &str) -> String {
    text.chars()
        .map(|c| {
            if is_unsafe(c) {
                escaped(c)
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// [`printable`] for multi-line text (a rendered window): newlines and tabs stay.
pub fn printable_lines(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\n' | '\t' => c.to_string(),
            c if is_unsafe(c) => escaped(c),
            c => c.to_string(),
        })
        .collect()
}

/// JSON text with every unsafe character JSON leaves as itself (DEL, C1 controls, bidi and
/// format characters, line separators) written as a `\uXXXX` escape: the same JSON value, so
/// `--json` output stays exact, and nothing in it drives the terminal it is printed on.
/// (serde_json already escapes C0 controls; unsafe characters occur only inside strings.)
pub fn json_safe(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        if is_unsafe(c) && !matches!(c, '\n' | '\t') {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{:04x}", unit));
            }
        } else {
            out.push(c);
        }
    }
    out
}
