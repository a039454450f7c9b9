//! Connection strings never leak their credentials (issue 21 item 9): whatever the user name
//! and password hold (`@`, `:`, `/`, percent escapes, quotes, spaces) and whatever parts the
//! string leaves out, no error (its `Display`, its `Debug`, through the store and the ledger)
//! and no handle's `Debug` shows a user name or a password, or any piece of one. Every user
//! name and password is built from unique markers joined by hostile separators, so a fragment
//! (the `ssw0rd` of `p@ssw0rd`) is found as well as the whole.
//!
//! Two servers: a closed port on 127.0.0.1 (the client fails), and the test's own cluster
//! (the server answers, naming the role it refuses: `role "..." does not exist`).

mod pg;

use compaction::postgres::PgOptions;
use compaction::{block_on, PgError, PgLedger, PgStore, StoreError};
use pg::harness::cluster;
use proptest::prelude::*;
use std::time::Duration;

fn options() -> PgOptions {
    PgOptions::new()
        .connect_timeout(Duration::from_secs(3))
        .wait_timeout(Duration::from_secs(5))
        .max_connections(1)
}

/// A port nothing listens on: bound once, then closed.
fn closed_port() -> u16 {
    static PORT: std::sync::OnceLock<u16> = std::sync::OnceLock::new();
    *PORT.get_or_init(|| {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    })
}

/// The port of the test's cluster.
fn cluster_port() -> u16 {
    let url = cluster().url("postgres");
    let port = url.rsplit(':').next().unwrap().split('/').next().unwrap();
    port.parse().unwrap()
}

fn connect_store(url: &str) -> Result<PgStore, StoreError> {
    block_on(PgStore::connect_with(url, "ns", &options()))
}

fn connect_ledger(url: &str) -> Result<PgLedger, compaction::PgLedgerError> {
    block_on(PgLedger::connect_with(url, "ns", &options()))
}

/// Everything a caller can print of connecting `url`: the errors (`Display` and `Debug`, the
/// store's and the ledger's, the inner `PgError`'s) or the handles' `Debug` and target.
fn everything_printed(url: &str) -> String {
    let mut out = String::new();
    match connect_store(url) {
        Ok(store) => out.push_str(&format!("{store:?} {}\n", store.target())),
        Err(e) => {
            out.push_str(&format!("{e}\n{e:?}\n"));
            if let Some(pg) = PgError::from_store_error(&e) {
                out.push_str(&format!("{pg}\n{pg:?}\n{}\n", pg.target()));
            }
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                out.push_str(&format!("{cause}\n{cause:?}\n"));
                source = cause.source();
            }
        }
    }
    match connect_ledger(url) {
        Ok(ledger) => out.push_str(&format!("{ledger:?} {}\n", ledger.target())),
        Err(e) => out.push_str(&format!("{e}\n{e:?}\n")),
    }
    out
}

fn assert_hidden(url: &str, secrets: &[&str]) -> String {
    let printed = everything_printed(url);
    for secret in secrets {
        assert!(
            !printed.contains(secret),
            "`{secret}` of {url:?} was printed:\n{printed}"
        );
    }
    printed
}

// ---------------------------------------------------------------------------------------------
// The inputs of the issue

#[test]
fn an_unescaped_at_in_the_password_is_never_printed() {
    let url = format!(
        "postgres://alice:p@ssw0rd@127.0.0.1:{}/agents",
        closed_port()
    );
    let printed = assert_hidden(&url, &["ssw0rd", "alice", "p@ss"]);
    // The refusal says what to do instead.
    assert!(printed.contains("%40"), "{printed}");
    // The exact string (port 1) too.
    assert_hidden(
        "postgres://alice:p@ssw0rd@127.0.0.1:1/agents",
        &["ssw0rd", "alice", "p@ss"],
    );
}

#[test]
fn a_url_without_a_database_never_names_the_user() {
    let url = format!("postgres://alice:secret-pw@127.0.0.1:{}", closed_port());
    let printed = assert_hidden(&url, &["alice", "secret-pw"]);
    assert!(
        printed.contains(&format!("127.0.0.1:{}", closed_port())),
        "{printed}"
    );
    // The server's own answer names the role, and (without a database name) the database
    // named after it: neither reaches the caller.
    let url = format!("postgres://alice@127.0.0.1:{}", cluster_port());
    let printed = assert_hidden(&url, &["alice"]);
    assert!(printed.contains("does not exist"), "{printed}");
}

#[test]
fn a_well_formed_url_names_its_server_and_database() {
    let url = format!(
        "postgres://alice:p%40ssw0rd@127.0.0.1:{}/agents",
        closed_port()
    );
    let printed = assert_hidden(&url, &["alice", "ssw0rd"]);
    assert!(
        printed.contains(&format!("127.0.0.1:{}/agents", closed_port())),
        "{printed}"
    );
    // Connected: the handles print their server and database, and nothing of the login.
    let url = format!(
        "postgres://postgres:hunter2-Pq@127.0.0.1:{}/postgres",
        cluster_port()
    );
    let printed = assert_hidden(&url, &["hunter2"]);
    assert!(
        printed.contains(&format!("127.0.0.1:{}/postgres", cluster_port())),
        "{printed}"
    );
}

// ---------------------------------------------------------------------------------------------
// Any user name and password, any shape

/// Characters a login may hold that a connection string gives meaning to.
const SEPARATORS: &[&str] = &[
    "", "@", ":", "/", "?", "#", "%", "%40", "%3A", "%zz", " ", "'", "\\", "=", "&", "é", "@@",
    ":@", "@:", "[", "]",
];

/// A user name or password made of unique markers (`{tag}{n}z`) joined by separators.
#[derive(Debug, Clone)]
struct Login {
    text: String,
    markers: Vec<String>,
}

fn login(tag: &'static str) -> impl Strategy<Value = Login> {
    prop::collection::vec((0u32..100_000, prop::sample::select(SEPARATORS)), 1..4).prop_map(
        move |parts| {
            let mut text = String::new();
            let mut markers = Vec::new();
            for (i, (n, separator)) in parts.into_iter().enumerate() {
                let marker = format!("{tag}{i}x{n}z");
                if i > 0 {
                    text.push_str(separator);
                }
                text.push_str(&marker);
                markers.push(marker);
            }
            Login { text, markers }
        },
    )
}

/// Every byte outside the unreserved set as `%XX`.
fn percent_encode(text: &str) -> String {
    text.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

/// A `key=value` value, quoted, with `'` and `\` escaped.
fn quoted(text: &str) -> String {
    format!("'{}'", text.replace('\\', "\\\\").replace('\'', "\\'"))
}

#[derive(Debug, Clone)]
struct Shape {
    key_value: bool,
    encode: bool,
    user: bool,
    password: bool,
    port: bool,
    database: bool,
    live_server: bool,
}

fn shape() -> impl Strategy<Value = Shape> {
    (
        any::<bool>(),
        any::<bool>(),
        prop::bool::weighted(0.9),
        any::<bool>(),
        prop::bool::weighted(0.9),
        any::<bool>(),
        prop::bool::weighted(0.3),
    )
        .prop_map(
            |(key_value, encode, user, password, port, database, live_server)| Shape {
                key_value,
                encode,
                user,
                password,
                port,
                database,
                live_server,
            },
        )
}

fn build(shape: &Shape, user: &Login, password: &Login) -> String {
    let port = if shape.live_server {
        cluster_port()
    } else {
        closed_port()
    };
    if shape.key_value {
        let mut parts = vec!["host=127.0.0.1".to_string()];
        if shape.port {
            parts.push(format!("port={port}"));
        }
        let value = |text: &str| {
            if shape.encode {
                quoted(text)
            } else {
                text.to_string()
            }
        };
        if shape.user {
            parts.push(format!("user={}", value(&user.text)));
        }
        if shape.password {
            parts.push(format!("password={}", value(&password.text)));
        }
        if shape.database {
            parts.push("dbname=agents".into());
        }
        return parts.join(" ");
    }
    let part = |text: &str| {
        if shape.encode {
            percent_encode(text)
        } else {
            text.to_string()
        }
    };
    let mut url = "postgres://".to_string();
    match (shape.user, shape.password) {
        (true, true) => url.push_str(&format!("{}:{}@", part(&user.text), part(&password.text))),
        (true, false) => url.push_str(&format!("{}@", part(&user.text))),
        (false, true) => url.push_str(&format!(":{}@", part(&password.text))),
        (false, false) => {}
    }
    url.push_str("127.0.0.1");
    if shape.port {
        url.push_str(&format!(":{port}"));
    }
    if shape.database {
        url.push_str("/agents");
    }
    url
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases()))]

    #[test]
    fn no_login_reaches_an_error_or_a_debug(
        shape in shape(),
        user in login("Uq"),
        password in login("Pw"),
    ) {
        let url = build(&shape, &user, &password);
        let printed = everything_printed(&url);
        for marker in user.markers.iter().chain(&password.markers) {
            prop_assert!(
                !printed.contains(marker.as_str()),
                "{marker} of {url:?} was printed:\n{printed}"
            );
        }
    }
}

/// `PROPTEST_CASES` when set, else 48: each case connects twice.
fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(48)
}
