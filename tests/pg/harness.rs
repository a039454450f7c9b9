//! A throwaway PostgreSQL cluster for the `pg_*` tests: started by the tests, one per test
//! binary, one database per test, stopped and removed when the binary exits.
//!
//! `initdb` and `pg_ctl` come from the machine's PostgreSQL (`COMPACTION_PG_BIN`, else
//! `pg_config --bindir`, else the newest `/usr/lib/postgresql/*/bin`, else `PATH`). Run as root
//! (CI containers), the cluster runs as the `postgres` system user, in a temporary directory it
//! owns. It listens on a free port of 127.0.0.1 only (its Unix socket sits in the temporary
//! directory), with `trust` authentication.
//!
//! A missing installation is a test failure, never a skip: `.ci/run` installs the `postgresql`
//! Debian package first.
//!
//! Cleanup: the cluster lives in a `OnceLock` for the whole binary, and Rust never drops a
//! static, so a watchdog process (a small `sh` loop started with the cluster) stops the server
//! and removes the directory as soon as the test process is gone: after a normal exit, a
//! failed assertion, or even `SIGKILL`. Each test's database is a `TestDb` guard, dropped (with
//! the database) when the test ends or panics.
#![allow(dead_code)]

use compaction::postgres::tokio_postgres::{self, SimpleQueryMessage};
use std::net::TcpListener;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Set in child processes of the multi-process tests: the database to use, so a child never
/// starts a cluster of its own.
pub const CHILD_URL_ENV: &str = "COMPACTION_PG_CHILD_URL";

/// One running cluster.
pub struct Cluster {
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    as_postgres: bool,
}

/// The cluster of this test binary, started on first use.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(Cluster::start)
}

fn find_bin() -> PathBuf {
    if let Some(dir) = std::env::var_os("COMPACTION_PG_BIN") {
        return PathBuf::from(dir);
    }
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output() {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if out.status.success() && dir.join("initdb").exists() {
            return dir;
        }
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return bin;
    }
    if let Ok(out) = Command::new("sh")
        .args(["-c", "command -v initdb"])
        .output()
    {
        let path = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if let Some(dir) = path.parent().filter(|_| out.status.success()) {
            return dir.to_path_buf();
        }
    }
    panic!(
        "PostgreSQL is not installed (no initdb found): the pg_* tests need a real server. \
         Install it (`apt-get install -y postgresql`) or set COMPACTION_PG_BIN to the directory \
         holding initdb and pg_ctl."
    );
}

fn running_as_root() -> bool {
    std::fs::metadata("/proc/self")
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("no free loopback port")
}

impl Cluster {
    fn start() -> Cluster {
        let bin = find_bin();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let dir = std::env::temp_dir().join(format!(
            "compaction-pg-{}-{}",
            std::process::id(),
            nanos % 1_000_000_000
        ));
        std::fs::create_dir_all(dir.join("socket")).unwrap();
        let as_postgres = running_as_root();
        let mut cluster = Cluster {
            dir,
            bin,
            port: 0,
            as_postgres,
        };
        if as_postgres {
            // PostgreSQL refuses to run as root; its data directory must be its own.
            cluster.checked(
                Command::new("chown")
                    .args(["-R", "postgres:postgres"])
                    .arg(&cluster.dir),
            );
        }
        cluster.spawn_watchdog();
        let data = cluster.dir.join("data");
        cluster.checked(cluster.pg("initdb").arg("-D").arg(&data).args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--locale=C",
            "--no-sync",
        ]));
        // A port can be taken between finding it free and the server binding it: try again.
        for attempt in 0..5 {
            cluster.port = free_port();
            // fsync=off: the tests crash clients, never the server; durability across a
            // power loss is PostgreSQL's promise, not what these tests check. A benchmark sets
            // COMPACTION_PG_DURABLE to measure with the server's default (fsync on).
            let durability = if std::env::var_os("COMPACTION_PG_DURABLE").is_some() {
                ""
            } else {
                " -c fsync=off -c full_page_writes=off"
            };
            let options = format!(
                "-c listen_addresses=127.0.0.1 -p {} -k {} -c max_connections=300 \
                 -c shared_buffers=32MB{durability}",
                cluster.port,
                cluster.dir.join("socket").display()
            );
            let status = cluster
                .pg("pg_ctl")
                .arg("-D")
                .arg(&data)
                .arg("-l")
                .arg(cluster.dir.join("server.log"))
                .args(["-w", "-t", "60", "-o", &options, "start"])
                .stdout(Stdio::null())
                .status()
                .expect("cannot run pg_ctl");
            if status.success() {
                return cluster;
            }
            eprintln!(
                "pg_ctl start failed (attempt {attempt}); log:\n{}",
                cluster.log()
            );
        }
        panic!("PostgreSQL did not start; log:\n{}", cluster.log());
    }

    /// A command running one of the cluster's programs, as `postgres` when this is root.
    fn pg(&self, program: &str) -> Command {
        let path = self.bin.join(program);
        if self.as_postgres {
            let mut command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(path);
            command
        } else {
            Command::new(path)
        }
    }

    fn checked(&self, command: &mut Command) {
        let out = command.output().expect("cannot run a PostgreSQL program");
        assert!(
            out.status.success(),
            "{command:?} failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Stops the server and removes the directory once this process is gone.
    // Never waited for on purpose: the watchdog's job starts when this process has ended.
    #[allow(clippy::zombie_processes)]
    fn spawn_watchdog(&self) {
        let runuser = if self.as_postgres {
            "runuser -u postgres -- "
        } else {
            ""
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 0.3; done; \
             {runuser}\"$0\" -D \"$1/data\" -m immediate stop >/dev/null 2>&1; rm -rf \"$1\"",
            pid = std::process::id(),
        );
        Command::new("sh")
            .arg("-c")
            .arg(script)
            .arg(self.bin.join("pg_ctl"))
            .arg(&self.dir)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("cannot start the cluster's watchdog");
    }

    /// The server log (for failure messages).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("server.log")).unwrap_or_default()
    }

    /// The connection string of database `db` as the superuser.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// The directory the cluster lives in.
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self
            .pg("pg_ctl")
            .arg("-D")
            .arg(self.dir.join("data"))
            .args(["-m", "immediate", "stop"])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A database of its own for one test, dropped (with everything in it) when the guard drops.
pub struct TestDb {
    name: String,
    url: String,
    admin_url: String,
}

impl TestDb {
    /// A fresh database on this binary's cluster.
    pub fn new(tag: &str) -> TestDb {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        let cluster = cluster();
        let tag: String = tag
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let name = format!("t{}_{tag}", COUNTER.fetch_add(1, Ordering::Relaxed));
        let admin_url = cluster.url("postgres");
        sql(&admin_url, &format!("CREATE DATABASE \"{name}\""));
        TestDb {
            url: cluster.url(&name),
            name,
            admin_url,
        }
    }

    /// Its connection string.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Runs SQL in it (see [`sql`]).
    pub fn sql(&self, statements: &str) -> Vec<Vec<Option<String>>> {
        sql(&self.url, statements)
    }
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let _ = try_sql(
            &self.admin_url,
            &format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name),
        );
    }
}

/// Runs `statements` (simple-query protocol, so several may be given) on the database `url`
/// names and returns the rows of every result, as text.
pub fn sql(url: &str, statements: &str) -> Vec<Vec<Option<String>>> {
    try_sql(url, statements).unwrap_or_else(|e| panic!("`{statements}` failed: {e:?}"))
}

/// [`sql`] that returns the error instead of panicking.
pub fn try_sql(
    url: &str,
    statements: &str,
) -> Result<Vec<Vec<Option<String>>>, tokio_postgres::Error> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (client, connection) = tokio_postgres::connect(url, tokio_postgres::NoTls).await?;
        let driver = tokio::spawn(connection);
        let messages = client.simple_query(statements).await;
        drop(client);
        let _ = driver.await;
        Ok(messages?
            .into_iter()
            .filter_map(|m| match m {
                SimpleQueryMessage::Row(row) => Some(
                    (0..row.len())
                        .map(|i| row.get(i).map(str::to_string))
                        .collect(),
                ),
                _ => None,
            })
            .collect())
    })
}

/// The single value of a one-row, one-column query.
pub fn scalar(url: &str, query: &str) -> Option<String> {
    let rows = sql(url, query);
    assert_eq!(rows.len(), 1, "`{query}` returned {} rows", rows.len());
    rows[0][0].clone()
}

/// A transaction held open on its own connection (locks stay taken) until the guard drops,
/// which rolls it back.
pub struct Held {
    release: Option<std::sync::mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// Runs `BEGIN; <statements>` on a new connection to `url` and keeps the transaction open.
pub fn hold(url: &str, statements: &str) -> Held {
    let (url, statements) = (url.to_string(), statements.to_string());
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let thread = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async move {
            let (client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
                .await
                .unwrap();
            let driver = tokio::spawn(connection);
            client
                .batch_execute(&format!("BEGIN; {statements}"))
                .await
                .unwrap();
            ready_tx.send(()).unwrap();
            // Blocking this thread is fine: nothing needs the connection until the rollback.
            let _ = release_rx.recv();
            let _ = client.batch_execute("ROLLBACK").await;
            drop(client);
            let _ = driver.await;
        });
    });
    ready_rx.recv().expect("the held transaction did not start");
    Held {
        release: Some(release_tx),
        thread: Some(thread),
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.release.take());
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Waits until a backend of the crate (`application_name = 'compaction'`) waits for a lock in
/// database `db_url`, terminates it from another session (`pg_terminate_backend`), and returns
/// its pid.
pub fn terminate_lock_waiter(db_url: &str) -> i32 {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let rows = sql(
            db_url,
            "SELECT pid FROM pg_stat_activity
             WHERE application_name = 'compaction' AND wait_event_type = 'Lock'
               AND datname = current_database()",
        );
        if let Some(pid) = rows.first().and_then(|r| r[0].clone()) {
            sql(db_url, &format!("SELECT pg_terminate_backend({pid})"));
            return pid.parse().unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no backend of the crate ever waited for the held lock"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
