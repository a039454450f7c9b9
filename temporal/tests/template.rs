//! The template as its header says to run it, against a real Temporal dev server and a real
//! PostgreSQL: `fleet_temporal run 3` (the stand-in users give three agents their six tasks,
//! with a worker in the same process) and `fleet_temporal plain 3` (the same turns without the
//! engine) each finish, every agent's six deploys happen once, and each mode prints what it
//! measured. (The kill test, `fleet_temporal.rs`, runs the template's `worker` mode.)

mod common;
#[path = "../../tests/pg/harness.rs"]
mod harness;

use common::{template_exe, DevServer};
use std::collections::HashSet;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

/// Runs the template with `args` against the database `db` and the server at `temporal`, its
/// deploys logged to `world`; fails when it runs past `limit` or exits unsuccessfully.
fn run(args: &[&str], db: &str, temporal: &str, world: &Path, limit: Duration) -> Output {
    let mut child = Command::new(template_exe())
        .args(args)
        .env("COMPACTION_PG_URL", db)
        .env("TEMPORAL_ADDRESS", temporal)
        .env("WORLD", world)
        .env_remove("OPENAI_BASE_URL")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the template starts");
    let started = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if started.elapsed() > limit {
            let _ = child.kill();
            let output = child.wait_with_output().unwrap();
            panic!(
                "`fleet_temporal {}` ran past {limit:?}; stdout:\n{}\nstderr:\n{}",
                args.join(" "),
                String::from_utf8_lossy(&output.stdout),
                String::from_utf8_lossy(&output.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let output = child.wait_with_output().unwrap();
    assert!(
        output.status.success(),
        "`fleet_temporal {}` failed; stdout:\n{}\nstderr:\n{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    output
}

/// Every one of `agents` agents deployed each of the six services exactly once.
fn assert_deployed_once(world: &Path, agents: usize) {
    let log = std::fs::read_to_string(world).unwrap();
    let lines: Vec<&str> = log.lines().collect();
    let unique: HashSet<&str> = lines.iter().copied().collect();
    assert_eq!(unique.len(), lines.len(), "a deploy ran twice: {lines:?}");
    assert_eq!(lines.len(), agents * 6, "{lines:?}");
    for n in 0..agents {
        for service in ["billing", "search", "auth", "mailer", "reports", "gateway"] {
            let line = format!("agent-{n} {service}");
            assert!(unique.contains(line.as_str()), "{line} missing: {lines:?}");
        }
    }
}

#[test]
fn the_template_runs_as_its_header_says() {
    let server = DevServer::start();
    let dir = std::env::temp_dir().join(format!("compaction-template-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let limit = Duration::from_secs(180);

    let engine_db = harness::TestDb::new("temporal_template_run");
    let world = dir.join("run.log");
    let output = run(
        &["run", "3"],
        engine_db.url(),
        &server.address,
        &world,
        limit,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let answered = stdout
        .lines()
        .filter(|l| l.ends_with(": every agent answered"));
    assert_eq!(answered.count(), 6, "{stdout}");
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("engine: ") && l.ends_with(" turns/s")),
        "{stdout}"
    );
    assert_deployed_once(&world, 3);

    // Its own database: the same agents' ids, without the engine.
    let plain_db = harness::TestDb::new("temporal_template_plain");
    let world = dir.join("plain.log");
    let output = run(
        &["plain", "3"],
        plain_db.url(),
        &server.address,
        &world,
        limit,
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        stdout
            .lines()
            .any(|l| l.starts_with("plain: ") && l.contains(" turns/s, turn p50 ")),
        "{stdout}"
    );
    assert_deployed_once(&world, 3);
    let _ = std::fs::remove_dir_all(&dir);
}
