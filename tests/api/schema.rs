use crate::common;

use common::*;
use compaction::{Compactable, FieldClass};

#[test]
fn schema_lists_every_field_with_its_class() {
    let schema = MigrationState::schema();
    assert_eq!(schema.type_name(), "MigrationState");
    let paths: Vec<&str> = schema.fields().iter().map(|f| f.path.as_str()).collect();
    assert_eq!(
        paths,
        [
            "constraints",
            "plan_step",
            "config_path",
            "config_contents",
            "ci_log",
            "tool_output",
            "migrations",
            "subtask.title",
            "subtask.blocked_on",
            "subtask.notes",
        ]
    );
    let class = |p: &str| schema.field(p).unwrap().class;
    assert_eq!(class("constraints"), FieldClass::Protected { pin: true });
    assert_eq!(class("plan_step"), FieldClass::Protected { pin: false });
    assert_eq!(
        class("config_contents"),
        FieldClass::Derivable {
            pointer_template: "file://{config_path}",
            summarize: false
        }
    );
    assert_eq!(
        class("ci_log"),
        FieldClass::Derivable {
            pointer_template: "https://ci.example/runs/{plan_step}",
            summarize: true
        }
    );
    assert_eq!(
        class("tool_output"),
        FieldClass::Redundant { summarize: false }
    );
    assert_eq!(
        class("migrations"),
        FieldClass::Effect { idempotent: false }
    );
    assert_eq!(
        class("subtask.blocked_on"),
        FieldClass::Protected { pin: false }
    );
    assert_eq!(
        class("subtask.notes"),
        FieldClass::Redundant { summarize: false }
    );
    // Built once: the same static every time.
    assert!(std::ptr::eq(
        MigrationState::schema(),
        MigrationState::schema()
    ));
}
