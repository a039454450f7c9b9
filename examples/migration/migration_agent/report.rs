//! What the run prints at the end: the verdict table and the closing paragraph.

use crate::naive::NaiveAgent;
use crate::typed::TypedAgent;
use crate::{Options, STEPS};

/// (migrations re-applied, writes to /etc/prod, config reads at a wrong path)
pub(crate) type Damage = (u32, u32, u32);

pub(crate) fn print_table(
    naive: &NaiveAgent,
    naive_damage: Damage,
    typed: &TypedAgent,
    typed_damage: Damage,
) {
    let row = |label: &str, naive: &dyn std::fmt::Display, typed: &dyn std::fmt::Display| {
        println!("{label:<42} {naive:>14} {typed:>14}")
    };
    println!();
    row("after the run", &"naive summary", &"typed");
    row("compactions", &naive.compactions, &typed.reports.len());
    row("migrations re-applied", &naive_damage.0, &typed_damage.0);
    row(
        "writes to /etc/prod (constraint lost)",
        &naive_damage.1,
        &typed_damage.1,
    );
    row(
        "config read at a wrong path",
        &naive_damage.2,
        &typed_damage.2,
    );
    let steps = format!("plan steps completed (of {STEPS})");
    row(&steps, &naive.plan_step(), &typed.state.plan_step);
    let mut timings = typed.timings.clone();
    timings.sort();
    if let Some(median) = timings.get(timings.len() / 2) {
        row(
            "median compaction time (typed, µs)",
            &"-",
            &median.as_micros(),
        );
    }
}

/// The closing paragraph: what this run showed, in words.
pub(crate) fn print_conclusion((n_re, n_prod, n_path): Damage, held: bool, opts: &Options) {
    println!();
    if !held {
        println!("verdict: typed compaction VIOLATED an invariant (see the table above)");
        return;
    }
    println!("verdict: typed compaction held every invariant.\n");
    let proved = format!(
        "What this run proved. Both agents had the same budget and the same summarizer, one that \
         turns facts into fluent prose. The naive agent's memory went through it: it re-applied \
         {n_re} migration(s), wrote to /etc/prod {n_prod} time(s) and read the config at a wrong \
         path {n_path} time(s). The typed agent did none of that: its constraints stayed pinned \
         in every window, its plan step and config path were kept verbatim or spilled behind a \
         verified store:// pointer (never summarized), the migration that timed out stayed \
         `unknown` until it was reconciled against the world, every window fit its budget, and \
         every rehydration restored the protected state byte for byte. Run the same command \
         again: the typed agent resumes from its checkpoint in {} and re-applies nothing.",
        crate::durable::shown(&opts.db)
    );
    println!("{}", wrap(&proved));
}

/// Breaks prose into lines of at most 96 columns, for a terminal.
pub(crate) fn wrap(text: &str) -> String {
    let mut out = String::new();
    let mut line_len = 0;
    for word in text.split_whitespace() {
        let len = word.chars().count();
        if line_len > 0 && line_len + 1 + len > 96 {
            out.push('\n');
            line_len = 0;
        } else if line_len > 0 {
            out.push(' ');
            line_len += 1;
        }
        out.push_str(word);
        line_len += len;
    }
    out
}
