//! Pointer templates: `file://{config_path}` -> literal text and placeholders.
//!
//! Kept free of syn so the fuzzer can include this file on its own.

/// One piece of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Literal text (`{{` and `}}` already unescaped).
    Literal(String),
    /// `{field}`: the value of a protected field of the same struct.
    Field(String),
}

/// Why a template is malformed, with the byte offset of the problem.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError {
    pub offset: usize,
    pub message: &'static str,
}

/// Parses a template. `{{` and `}}` are literal braces; `{name}` is a placeholder whose name is
/// a Rust identifier (raw identifiers written without `r#`).
pub fn parse(template: &str) -> Result<Vec<Piece>, TemplateError> {
    if template.trim().is_empty() {
        return Err(TemplateError {
            offset: 0,
            message:
                "the pointer is empty; say where the value can be re-read, e.g. \"file://{path}\"",
        });
    }
    let mut pieces = Vec::new();
    let mut literal = String::new();
    let mut chars = template.char_indices().peekable();
    while let Some((offset, ch)) = chars.next() {
        match ch {
            '{' if chars.peek().map(|&(_, c)| c) == Some('{') => {
                chars.next();
                literal.push('{');
            }
            '}' if chars.peek().map(|&(_, c)| c) == Some('}') => {
                chars.next();
                literal.push('}');
            }
            '}' => {
                return Err(TemplateError {
                    offset,
                    message: "unmatched `}`; open the placeholder with `{`, or write `}}` for a literal brace",
                })
            }
            '{' => {
                let mut name = String::new();
                let mut closed = false;
                for (_, c) in chars.by_ref() {
                    if c == '}' {
                        closed = true;
                        break;
                    }
                    name.push(c);
                }
                if !closed {
                    return Err(TemplateError {
                        offset,
                        message: "unclosed `{`; close the placeholder with `}`, or write `{{` for a literal brace",
                    });
                }
                if !is_identifier(&name) {
                    return Err(TemplateError {
                        offset,
                        message: "a placeholder must name a #[protected] field, like `{config_path}`",
                    });
                }
                if !literal.is_empty() {
                    pieces.push(Piece::Literal(std::mem::take(&mut literal)));
                }
                pieces.push(Piece::Field(name));
            }
            other => literal.push(other),
        }
    }
    if !literal.is_empty() {
        pieces.push(Piece::Literal(literal));
    }
    Ok(pieces)
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    match chars.next() {
        Some(c) if c == '_' || c.is_alphabetic() => {}
        _ => return false,
    }
    name != "_" && chars.all(|c| c == '_' || c.is_alphanumeric())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields_and_escapes() {
        assert_eq!(
            parse("file://{path}/x{{y}}").unwrap(),
            vec![
                Piece::Literal("file://".into()),
                Piece::Field("path".into()),
                Piece::Literal("/x{y}".into()),
            ]
        );
    }

    #[test]
    fn rejects_malformed() {
        assert!(parse("").is_err());
        assert!(parse("a{b").is_err());
        assert!(parse("a}b").is_err());
        assert!(parse("{}").is_err());
        assert!(parse("{a b}").is_err());
        assert!(parse("{_}").is_err());
    }
}
