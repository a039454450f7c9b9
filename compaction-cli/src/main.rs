//! `compaction`: the operator's command line for a compaction database. See what each agent's
//! checkpoint holds and where its tokens go, settle effects whose outcome is unknown, resolve
//! pointers, verify every byte, and remove blobs no checkpoint needs.
//!
//! Exit codes, JSON shapes and a walk-through: `compaction --help` and
//! `compaction-cli/README.md`.

#[macro_use]
mod output;
mod backend;
mod backends;
mod blobs;
mod cli;
mod conversation;
mod drift;
mod escape;
mod fail;
mod inspect;
mod ledger_cmd;
mod paging;
mod refusals;
mod resolve;
mod target;
mod verify;

use clap::Parser;
use cli::{Cli, Command};
use fail::Outcome;
use std::process::ExitCode;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli.command) {
        Ok(exit) => exit.into(),
        Err(failure) => {
            eprintln!("{failure}");
            failure.exit.into()
        }
    }
}

fn run(command: Command) -> Outcome {
    match command {
        Command::Agents { target, format } => inspect::agents(&target.open()?, format.json),
        Command::Show {
            target,
            agent,
            budget,
            format,
        } => inspect::show(&target.open()?, &agent, budget, format.json),
        Command::Effects {
            target,
            status,
            scope,
            format,
        } => ledger_cmd::effects(&target.open()?, status, scope.as_deref(), format.json),
        Command::History {
            target,
            key,
            scope,
            format,
        } => ledger_cmd::history(&target.open()?, &key, scope.as_deref(), format.json),
        Command::Reconcile {
            target,
            key,
            to,
            note,
            by,
            scope,
            force,
            min_claim_age,
        } => ledger_cmd::reconcile(
            &target.open()?,
            &ledger_cmd::Settlement {
                key: &key,
                scope: scope.as_deref(),
                to,
                note: &note,
                by: by.as_deref(),
                force,
                min_claim_age,
            },
        ),
        Command::Resolve {
            target,
            pointer,
            agent,
            offset,
            max_bytes,
            format,
        } => resolve::resolve(
            &target.open()?,
            &resolve::Request {
                text: &pointer,
                agent: agent.as_deref(),
                part: paging::Part::asked(offset, max_bytes),
            },
            format.json,
        ),
        Command::Verify { target, format } => verify::verify(&target.open()?, format.json),
        Command::Gc {
            target,
            dry_run,
            min_age,
            format,
        } => blobs::gc(&target.open()?, dry_run, min_age, format.json),
    }
}
