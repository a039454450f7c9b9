//! Rendering the state window: the whole window in its planned form (full, or compact when
//! the full one does not fit), or the changed fields of a state update.

use crate::compactor::{Compactor, Prepared};
use crate::plan::Plan;
use crate::state::schema::Schema;
use crate::window::escape_inline;
use crate::window::{Entry, WindowView};
use std::borrow::Cow;

impl Compactor {
    /// Renders the window in `compact` form or the full one.
    pub(super) fn render(
        &self,
        schema: &Schema,
        number: u64,
        plan: &Plan,
        compact: bool,
    ) -> (Vec<Entry>, String) {
        let entries = plan.entries();
        let window = self.render_view(schema, number, entries.iter(), compact, false, &[]);
        (entries, window)
    }

    /// Renders the window in the prepared form: the full one when it fits, else the compact
    /// one; with its tokens and form.
    pub(super) fn render_fitting(
        &self,
        prepared: &Prepared<'_>,
    ) -> (Vec<Entry>, String, usize, bool) {
        let (schema, number, plan) = (prepared.schema, prepared.number, &prepared.plan);
        let compact = prepared.form.unwrap_or(false);
        let (entries, window) = self.render(schema, number, plan, compact);
        let tokens = self.windows.count(&*self.counter, &window);
        if prepared.form.is_none() && tokens > prepared.window_budget {
            let (entries, window) = self.render(schema, number, plan, true);
            let tokens = self.windows.count(&*self.counter, &window);
            return (entries, window, tokens, true);
        }
        (entries, window, tokens, compact)
    }

    /// Renders `entries` (all of them, or the changed ones of a state update) as the renderer
    /// sees them: paths, pointers and keys escaped (the checkpoint keeps the raw ones).
    pub(super) fn render_view<'e>(
        &self,
        schema: &Schema,
        number: u64,
        entries: impl Iterator<Item = &'e Entry>,
        compact: bool,
        update: bool,
        appended: &[Option<usize>],
    ) -> String {
        let shown: Vec<Cow<'_, Entry>> = entries.map(Entry::for_window).collect();
        let state_type = escape_inline(schema.type_name());
        let view = WindowView {
            compaction: number,
            state_type: &state_type,
            entries: &shown,
            budget: self.budget,
            compact,
            update,
            appended,
        };
        self.renderer.render(&view)
    }
}
