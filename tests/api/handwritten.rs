//! Hand-written `Compactable` impls are checked against their own schema: a traversal that
//! skips a field, or hands a field over under another class, is refused before anything is
//! rendered, stored or summarized.

use compaction::{
    Compactable, CompactionError, Compactor, Extractive, FieldClass, Parts, RebuildError, Schema,
    Visitor,
};
use std::sync::OnceLock;

#[derive(Default)]
struct Handwritten {
    constraint: String,
    notes: String,
    mode: u8,
}

fn schema() -> &'static Schema {
    static SCHEMA: OnceLock<Schema> = OnceLock::new();
    SCHEMA.get_or_init(|| {
        Schema::builder("Handwritten")
            .field("constraint", FieldClass::Protected { pin: true }, "String")
            .field(
                "notes",
                FieldClass::Redundant { summarize: false },
                "String",
            )
            .build()
    })
}

impl Compactable for Handwritten {
    fn schema() -> &'static Schema {
        schema()
    }
    fn visit<'a, V: Visitor<'a>>(&'a self, visitor: &mut V) {
        match self.mode {
            // Correct.
            0 => {
                visitor.protected("constraint", true, &self.constraint);
                visitor.redundant("notes", &self.notes);
            }
            // Forgets the protected field: it would silently vanish from the window.
            1 => visitor.redundant("notes", &self.notes),
            // Evicts the protected field as if it were redundant.
            2 => {
                visitor.redundant("constraint", &self.constraint);
                visitor.redundant("notes", &self.notes);
            }
            // Asks for a summary of a field declared without `summarize`.
            3 => {
                visitor.protected("constraint", true, &self.constraint);
                visitor.redundant_summarizable("notes", &self.notes);
            }
            // Visits a field the schema does not know.
            _ => {
                visitor.protected("constraint", true, &self.constraint);
                visitor.redundant("notes", &self.notes);
                visitor.redundant("extra", &self.notes);
            }
        }
    }
    fn rebuild(parts: &mut Parts) -> Result<Self, RebuildError> {
        Ok(Handwritten {
            constraint: parts.protected("constraint")?,
            notes: parts.redundant("notes")?,
            mode: 0,
        })
    }
}

fn compact(mode: u8) -> Result<String, CompactionError> {
    let compactor = Compactor::builder()
        .budget(200)
        .summarizer(Extractive)
        .build()?;
    let state = Handwritten {
        constraint: "never touch /etc/prod".into(),
        notes: "noise ".repeat(2_000),
        mode,
    };
    compactor
        .compact_blocking(&state)
        .map(|c| c.render().to_owned())
}

#[test]
fn a_correct_traversal_compacts() {
    let window = compact(0).unwrap();
    assert!(window.contains(r#"constraint [pinned] = "never touch /etc/prod""#));
    assert!(window.contains("[EVICTED notes recover=no]"));
}

#[test]
fn a_skipped_field_is_refused() {
    match compact(1) {
        Err(CompactionError::SchemaMismatch { field, .. }) => assert_eq!(field, "constraint"),
        other => panic!("expected SchemaMismatch, got {other:?}"),
    }
}

#[test]
fn a_protected_field_visited_as_redundant_is_refused() {
    match compact(2) {
        Err(CompactionError::SchemaMismatch { field, reason }) => {
            assert_eq!(field, "constraint");
            assert!(reason.contains("declared protected"), "{reason}");
        }
        other => panic!("expected SchemaMismatch, got {other:?}"),
    }
}

#[test]
fn a_summary_the_schema_does_not_allow_is_refused() {
    assert!(matches!(
        compact(3),
        Err(CompactionError::ProtectedToSummarizer { field }) if field == "notes"
    ));
}

#[test]
fn a_field_outside_the_schema_is_refused() {
    assert!(matches!(
        compact(4),
        Err(CompactionError::SchemaMismatch { field, .. }) if field == "extra"
    ));
}
