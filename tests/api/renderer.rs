//! A custom renderer: the budget is enforced on its output, not on the default format's.

use crate::common;

use common::*;
use compaction::{
    CompactionError, Compactor, DefaultRenderer, FieldOutcome, FormView, Renderer, TokenCounter,
    Tokenizer, WindowView,
};

/// Wraps the default format in a long preamble, so the planner's estimates are short.
struct Verbose(usize);

impl Renderer for Verbose {
    fn render(&self, view: &WindowView<'_>) -> String {
        format!(
            "{}\n{}",
            "Context follows. ".repeat(self.0),
            DefaultRenderer.render(view)
        )
    }
}

/// A terse format of its own: one line a field.
struct Terse;

impl Renderer for Terse {
    fn render(&self, view: &WindowView<'_>) -> String {
        view.fields()
            .map(|f| match f.form {
                FormView::Verbatim { json, .. } => format!("{}={json}", f.path),
                _ => format!("{}=<{}>", f.path, f.left_window().unwrap_or("?")),
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

fn state() -> MigrationState {
    MigrationState {
        constraints: vec!["never touch /etc/prod".into()],
        plan_step: 2,
        config_path: "/srv/app.toml".into(),
        tool_output: (0..100).map(|i| format!("line {i}")).collect(),
        ..Default::default()
    }
}

#[test]
fn a_longer_custom_format_makes_the_engine_evict_more() {
    let budget = 700;
    let plain = Compactor::builder().budget(budget).build().unwrap();
    let verbose = Compactor::builder()
        .budget(budget)
        .renderer(Verbose(120))
        .build()
        .unwrap();
    let a = plain.compact_blocking(&state()).unwrap();
    let b = verbose.compact_blocking(&state()).unwrap();
    assert_eq!(a.report().outcome("tool_output"), Some(&FieldOutcome::Kept));
    assert_eq!(
        b.report().outcome("tool_output"),
        Some(&FieldOutcome::Tombstoned)
    );
    assert!(b.render().starts_with("Context follows."));
    assert!(b.tokens() <= budget);
    assert_eq!(b.tokens(), Tokenizer::O200kBase.count(b.render()));
}

#[test]
fn a_custom_format_that_cannot_fit_is_refused() {
    let compactor = Compactor::builder()
        .budget(300)
        .renderer(Verbose(400))
        .build()
        .unwrap();
    assert!(matches!(
        compactor.compact_blocking(&state()),
        Err(CompactionError::ProtectedOverBudget { .. })
    ));
}

#[test]
fn a_terse_format_is_used_as_written() {
    let compactor = Compactor::builder()
        .budget(2_000)
        .renderer(Terse)
        .build()
        .unwrap();
    let compacted = compactor.compact_blocking(&state()).unwrap();
    assert!(compacted.render().contains("plan_step=2"));
    assert!(compacted
        .render()
        .contains(r#"constraints=["never touch /etc/prod"]"#));
}
