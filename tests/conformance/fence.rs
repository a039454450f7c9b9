//! The fencing suite every backend runs (`crate::fence`: one agent, one writer), through the
//! public API a user holds: two [`Session`]s of one agent, each on its own handles of the same
//! backend (for SQLite, its own connection to the same file, as a second worker process has).
//!
//! - a later open fences the earlier session: its request, effect claim and heartbeat are
//!   refused with `Superseded`, its own state is left as it was, and nothing it attempted is in
//!   the store or the ledger (the two-session break of issue 43, in both orders);
//! - a takeover while an effect runs: the effect ran once, stays `unknown` for the newer
//!   session (which never runs it again), and the old session reports nothing done;
//! - `OpenMode::RefuseIfLive` refuses while the lease runs, and takes over after it;
//! - every write of a fenced handle is refused at the trait level (store: blob, entry,
//!   checkpoint save and delete, renew; ledger: every write), and a checkpoint is saved only
//!   over the one it was built on;
//! - racing opens and requests from threads lose no message any request made durable.
//!
//! A backend joins with one line in `tests/backends/conformance_fence.rs` and a fixture that
//! opens new handles on one backend.

use compaction::fence::{Fence, OpenMode};
use compaction::session::{EffectCall, EffectOutcome, Session, SessionError};
use compaction::{
    block_on, CheckpointError, CheckpointStore, Compactable, Compactor, ContentHash, Effect,
    EffectError, EffectLedger, EffectLog, EffectStatus, Message, Store, StoreError, ToolCall,
    Transcript,
};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::any::Any;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Opens a new pair of handles (store, ledger) on the backend under test, as a new worker
/// would.
pub type Open<T, L> = Box<dyn Fn() -> (T, L) + Send + Sync>;

/// A backend under test.
pub struct Fixture<T, L> {
    pub open: Open<T, L>,
    pub keep: Box<dyn Any>,
}

/// The agent every case runs: rules it must keep, its conversation, and its deploys.
#[derive(Compactable, Serialize, Deserialize, Default, Debug)]
pub struct Agent {
    #[protected(pin)]
    rules: Vec<String>,
    #[transcript]
    chat: Transcript,
    #[effect(idempotent = false)]
    deploys: EffectLog,
}

const AGENT: &str = "fenced-agent";

fn deploy_call(id: &str, service: &str) -> ToolCall {
    ToolCall::new(id, "deploy", json!({ "service": service }))
}

/// The model's reply: one call (`call_id`) to deploy the api.
fn model_asks_to_deploy(session: &mut Session<Agent>, call_id: &str) {
    let reply = Message::assistant_with_tools("", vec![deploy_call(call_id, "api")]);
    session.push_response(reply).unwrap();
}

/// A session of the agent on `handles`.
pub fn open<T, L>(handles: (T, L), mode: OpenMode) -> Result<Session<Agent>, SessionError>
where
    T: Store + CheckpointStore + Clone + 'static,
    L: EffectLedger + 'static,
{
    let (store, ledger) = handles;
    Session::builder(AGENT)
        .compactor(Compactor::builder().budget(8_000))
        .store(store)
        .ledger(ledger)
        .open_mode(mode)
        .effect_calls(|call: &ToolCall| {
            let service = call.arguments.value().ok()?["service"].as_str()?.to_owned();
            let effect = Effect::new("deploy", &service, format!("deploy-{service}"));
            (call.name == "deploy").then(|| EffectCall::new("deploys", effect))
        })
        .open_blocking(|| Agent {
            rules: vec!["never touch /etc/prod".into()],
            ..Agent::default()
        })
}

fn contents(session: &Session<Agent>) -> Vec<String> {
    session
        .transcript()
        .messages()
        .iter()
        .map(|m| m.content.clone())
        .collect()
}

fn is_superseded(result: Result<impl std::fmt::Debug, SessionError>, epoch: u64, newer: u64) {
    match result {
        Err(SessionError::Superseded { epoch: e, newer: n }) => {
            assert_eq!((e, n), (epoch, newer), "the refusal names both epochs");
        }
        other => panic!("expected Superseded {{ {epoch}, {newer} }}, got {other:?}"),
    }
}

/// Runs every case on a fresh fixture each.
pub fn check<T, L>(fixture: impl Fn() -> Fixture<T, L>)
where
    T: Store + CheckpointStore + Clone + Send + Sync + 'static,
    L: EffectLedger + Send + Sync + 'static,
{
    a_later_open_fences_the_earlier_session(&fixture());
    the_newer_session_keeps_its_deploy_and_the_older_one_is_refused(&fixture());
    a_takeover_while_an_effect_runs_leaves_it_unknown(&fixture());
    refuse_if_live_waits_for_the_lease(&fixture());
    every_fenced_write_is_refused_and_changes_nothing(&fixture());
    a_checkpoint_is_saved_only_over_its_parent(&fixture());
    racing_sessions_lose_no_durable_message(&fixture());
}

/// B opens after A: A's next request, its deploy and its heartbeat are refused, its state is
/// as it was, and the store holds B's conversation, never A's unsaved turn.
fn a_later_open_fences_the_earlier_session<T, L>(fx: &Fixture<T, L>)
where
    T: Store + CheckpointStore + Clone + 'static,
    L: EffectLedger + 'static,
{
    let mut a = open((fx.open)(), OpenMode::TakeOver).unwrap();
    a.push(Message::user("first words"));
    a.next_request_blocking().unwrap();
    assert_eq!(a.epoch(), Some(1));
    let mut b = open((fx.open)(), OpenMode::TakeOver).unwrap();
    assert_eq!(b.epoch(), Some(2));
    assert_eq!(contents(&b), vec!["first words".to_owned()]);

    let (checkpoints, _) = (fx.open)();
    let before = block_on(checkpoints.load_row(AGENT)).unwrap();
    a.push(Message::user("deploy the api"));
    let a_before = contents(&a);
    let sequence = a.sequence();
    is_superseded(a.next_request_blocking(), 1, 2);
    assert_eq!(
        contents(&a),
        a_before,
        "a refused request leaves the state as it was"
    );
    assert_eq!(a.sequence(), sequence);
    is_superseded(a.heartbeat_blocking(), 1, 2);
    model_asks_to_deploy(&mut a, "c1");
    let ran = AtomicUsize::new(0);
    let claimed = a.run_effect_blocking(&deploy_call("c1", "api"), || async {
        ran.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>("deployed".to_owned())
    });
    is_superseded(claimed, 1, 2);
    assert_eq!(
        ran.load(Ordering::SeqCst),
        0,
        "a fenced session runs no effect"
    );
    assert_eq!(
        a.pending_calls().len(),
        1,
        "nothing was pushed for the refused call"
    );
    assert_eq!(block_on(checkpoints.load_row(AGENT)).unwrap(), before);

    b.push(Message::user("hello from b"));
    b.next_request_blocking().unwrap();
    let c = open((fx.open)(), OpenMode::TakeOver).unwrap();
    assert_eq!(c.epoch(), Some(3));
    assert_eq!(
        contents(&c),
        vec!["first words".to_owned(), "hello from b".to_owned()]
    );
    let (_, ledger) = (fx.open)();
    assert_eq!(
        block_on(ledger.status("deploys", "deploy-api")).unwrap(),
        None
    );
}

/// The break with the sessions the other way round: B opened first, A after it runs a
/// deploy and makes it durable; B's later request is refused instead of replacing A's
/// checkpoint with B's conversation.
fn the_newer_session_keeps_its_deploy_and_the_older_one_is_refused<T, L>(fx: &Fixture<T, L>)
where
    T: Store + CheckpointStore + Clone + 'static,
    L: EffectLedger + 'static,
{
    let mut b = open((fx.open)(), OpenMode::TakeOver).unwrap();
    let mut a = open((fx.open)(), OpenMode::TakeOver).unwrap();
    a.push(Message::user("deploy the api"));
    a.next_request_blocking().unwrap();
    model_asks_to_deploy(&mut a, "c1");
    let outcome = a
        .run_effect_blocking(&deploy_call("c1", "api"), || async {
            Ok::<_, String>("deployed api v2".to_owned())
        })
        .unwrap();
    assert!(matches!(outcome, EffectOutcome::Committed));
    a.next_request_blocking().unwrap();

    b.push(Message::user("what is the weather"));
    is_superseded(b.next_request_blocking(), 1, 2);

    let resumed = open((fx.open)(), OpenMode::TakeOver).unwrap();
    let texts = contents(&resumed);
    assert!(texts.contains(&"deploy the api".to_owned()), "{texts:?}");
    assert!(texts.contains(&"deployed api v2".to_owned()), "{texts:?}");
    assert!(
        !texts.contains(&"what is the weather".to_owned()),
        "{texts:?}"
    );
    assert!(resumed
        .transcript()
        .messages()
        .iter()
        .any(|m| m.tool_calls.iter().any(|c| c.id == "c1")));
    let (_, ledger) = (fx.open)();
    assert_eq!(
        block_on(ledger.status("deploys", "deploy-api")).unwrap(),
        Some(EffectStatus::Committed)
    );
}

/// A takes its deploy's claim, B opens while the tool runs: A's settlement is refused (A
/// reports nothing done and pushes nothing), the claim stays `unknown`, and B, asked for the
/// same deploy, refuses to run it again.
fn a_takeover_while_an_effect_runs_leaves_it_unknown<T, L>(fx: &Fixture<T, L>)
where
    T: Store + CheckpointStore + Clone + 'static,
    L: EffectLedger + 'static,
{
    let mut a = open((fx.open)(), OpenMode::TakeOver).unwrap();
    a.push(Message::user("deploy the api"));
    a.next_request_blocking().unwrap();
    model_asks_to_deploy(&mut a, "c1");
    let ran = AtomicUsize::new(0);
    let mut b_slot = None;
    let settled = a.run_effect_blocking(&deploy_call("c1", "api"), || async {
        // The worker is presumed dead while its deploy runs; another one opens the agent.
        b_slot = Some(open((fx.open)(), OpenMode::TakeOver).unwrap());
        ran.fetch_add(1, Ordering::SeqCst);
        Ok::<_, String>("deployed".to_owned())
    });
    is_superseded(settled, 1, 2);
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(
        a.pending_calls().len(),
        1,
        "the old session reports nothing done"
    );

    let mut b = b_slot.expect("b opened inside the deploy");
    let (_, ledger) = (fx.open)();
    assert_eq!(
        block_on(ledger.status("deploys", "deploy-api")).unwrap(),
        Some(EffectStatus::Unknown)
    );
    model_asks_to_deploy(&mut b, "c2");
    let outcome = b
        .run_effect_blocking(&deploy_call("c2", "api"), || async {
            ran.fetch_add(1, Ordering::SeqCst);
            Ok::<_, String>("deployed again".to_owned())
        })
        .unwrap();
    assert!(
        matches!(outcome, EffectOutcome::OutcomeUnknown),
        "{outcome:?}"
    );
    assert_eq!(ran.load(Ordering::SeqCst), 1, "never run twice");
}

/// `RefuseIfLive` refuses while the live session's lease runs (renewed by a heartbeat too),
/// and opens once it has run out, fencing the old session.
fn refuse_if_live_waits_for_the_lease<T, L>(fx: &Fixture<T, L>)
where
    T: Store + CheckpointStore + Clone + 'static,
    L: EffectLedger + 'static,
{
    let a = open((fx.open)(), OpenMode::TakeOver).unwrap();
    let long = OpenMode::RefuseIfLive {
        lease: Duration::from_secs(600),
    };
    match open((fx.open)(), long) {
        Err(SessionError::Live { epoch, lease, .. }) => {
            assert_eq!(epoch, 1);
            assert_eq!(lease, Duration::from_secs(600));
        }
        other => panic!("expected Live, got {other:?}"),
    }
    a.heartbeat_blocking().unwrap();
    assert!(matches!(
        open((fx.open)(), long),
        Err(SessionError::Live { .. })
    ));
    std::thread::sleep(Duration::from_millis(30));
    let short = OpenMode::RefuseIfLive {
        lease: Duration::from_millis(10),
    };
    let b = open((fx.open)(), short).unwrap();
    assert_eq!(b.epoch(), Some(2));
    is_superseded(a.heartbeat_blocking(), 1, 2);
}

/// Every write of a handle fenced at an older epoch is refused and changes nothing.
fn every_fenced_write_is_refused_and_changes_nothing<T, L>(fx: &Fixture<T, L>)
where
    T: Store + CheckpointStore + Clone + 'static,
    L: EffectLedger + 'static,
{
    let (store, ledger) = (fx.open)();
    let agent = "trait-level-agent";
    let first = block_on(store.take_epoch(agent, 0, None)).unwrap().unwrap();
    assert_eq!(first.epoch, 1);
    assert!(first.row.is_none());
    let old = Fence::new(agent, first.epoch);
    assert!(block_on(ledger.raise_epoch(&old)).unwrap());
    let old_store = store.fenced(&old).expect("the backend fences");
    let old_ledger = ledger.fenced(&old).expect("the backend fences");
    // While it is the newest, the fenced handles write.
    let bytes = b"a value written under epoch 1";
    block_on(old_store.put(&ContentHash::of(bytes), bytes)).unwrap();
    block_on(old_ledger.record("deploys", &Effect::new("deploy", "db", "k1"))).unwrap();
    block_on(old_store.renew(agent)).unwrap();

    let second = block_on(store.take_epoch(agent, 0, None)).unwrap().unwrap();
    assert_eq!(second.epoch, 2);
    let new = Fence::new(agent, 2);
    assert!(block_on(ledger.raise_epoch(&new)).unwrap());
    // Raising to an epoch below the newest is refused (a session overtaken while it opened).
    assert!(matches!(
        block_on(ledger.raise_epoch(&old)).map_err(|e| L::refusal(&e).cloned()),
        Err(Some(EffectError::Superseded(_)))
    ));

    let store_refused = |result: Result<(), StoreError>| {
        assert!(
            matches!(result, Err(StoreError::Superseded(ref s)) if s.epoch == 1 && s.newer == 2),
            "{result:?}"
        );
    };
    // Even a blob already held (nothing to write) is refused: a fenced handle fails at its
    // first write, whatever it writes, on every backend.
    store_refused(block_on(old_store.put(&ContentHash::of(bytes), bytes)));
    let other = b"a value a zombie spills";
    store_refused(block_on(old_store.put(&ContentHash::of(other), other)));
    assert!(block_on(store.get(&ContentHash::of(other))).is_err());
    store_refused(block_on(old_store.put_entry("summary-cache", b"zombie")));
    assert_eq!(block_on(store.get_entry("summary-cache")).unwrap(), None);
    for result in [
        block_on(old_store.renew(agent)),
        block_on(old_store.delete(agent)).map(drop),
    ] {
        assert!(
            matches!(result, Err(CheckpointError::Superseded(_))),
            "{result:?}"
        );
    }

    let ledger_refused = |result: Result<(), L::Error>| {
        let refusal = result.err().and_then(|e| L::refusal(&e).cloned());
        assert!(
            matches!(refusal, Some(EffectError::Superseded(ref s)) if s.newer == 2),
            "{refusal:?}"
        );
    };
    let effect = Effect::new("deploy", "api", "k2");
    ledger_refused(block_on(old_ledger.record("deploys", &effect)));
    ledger_refused(block_on(old_ledger.begin_effect("deploys", &effect)));
    ledger_refused(block_on(old_ledger.begin("deploys", "k1")));
    ledger_refused(block_on(old_ledger.commit("deploys", "k1")));
    ledger_refused(block_on(old_ledger.fail("deploys", "k1")));
    ledger_refused(block_on(old_ledger.reconcile(
        "deploys",
        "k1",
        EffectStatus::Committed,
    )));
    ledger_refused(block_on(old_ledger.set_payload("deploys", "k1", &json!(1))));
    ledger_refused(block_on(old_ledger.advance_checkpoint(agent, 7)).map(drop));
    let mut log = EffectLog::new();
    log.record(Effect::new("deploy", "web", "k3")).unwrap();
    ledger_refused(block_on(old_ledger.sync_log("deploys", &log)).map(drop));

    let scope = block_on(ledger.load_log("deploys")).unwrap();
    assert_eq!(
        scope.len(),
        1,
        "only the write made under the newest epoch is there"
    );
    assert_eq!(scope.status("k1"), Some(EffectStatus::NotStarted));
    assert_eq!(block_on(ledger.newest_checkpoint(agent)).unwrap(), None);
    // The newer handles write.
    let new_ledger = ledger.fenced(&new).unwrap();
    block_on(new_ledger.begin("deploys", "k1")).unwrap();
    block_on(store.fenced(&new).unwrap().renew(agent)).unwrap();
}

/// `save_row_over` writes only over the row it names as its parent, in every backend: a
/// writer that built on an older row (or on none) never overwrites a newer one.
fn a_checkpoint_is_saved_only_over_its_parent<T, L>(fx: &Fixture<T, L>)
where
    T: Store + CheckpointStore + Clone + 'static,
    L: EffectLedger + 'static,
{
    let mut a = open((fx.open)(), OpenMode::TakeOver).unwrap();
    a.push(Message::user("one"));
    a.next_request_blocking().unwrap();
    let (store, _) = (fx.open)();
    let first = block_on(store.load_row(AGENT)).unwrap().unwrap();
    a.push(Message::user("two"));
    a.next_request_blocking().unwrap();
    let second = block_on(store.load_row(AGENT)).unwrap().unwrap();
    assert_ne!(first.sha256(), second.sha256());

    // Over an older parent, or over none: refused, nothing written.
    for parent in [first.sha256(), None, Some("0".repeat(64).as_str())] {
        let refused = block_on(store.save_row_over(AGENT, &first, parent));
        assert!(
            matches!(refused, Err(CheckpointError::Conflict { ref found, .. })
                if found.as_deref() == second.sha256()),
            "{refused:?}"
        );
        assert_eq!(block_on(store.load_row(AGENT)).unwrap().unwrap(), second);
    }
    // Over the newest: written.
    let unfenced = store.clone();
    block_on(unfenced.save_row_over(AGENT, &first, second.sha256())).unwrap();
    assert_eq!(
        block_on(store.load_row(AGENT)).unwrap().unwrap().sha256(),
        first.sha256()
    );
    // The session built on `second`: its next save is refused, not written over the other's.
    a.push(Message::user("three"));
    match a.next_request_blocking() {
        Err(SessionError::CheckpointConflict { expected, found }) => {
            assert_eq!(expected.as_deref(), second.sha256());
            assert_eq!(found.as_deref(), first.sha256());
        }
        other => panic!("expected CheckpointConflict, got {other:?}"),
    }
}

/// Threads open sessions of the agent on their own handles and make requests at random
/// moments: every message a request made durable (its `next_request` returned `Ok`) is in the
/// agent's final checkpoint, and every failure is a fence refusal.
fn racing_sessions_lose_no_durable_message<T, L>(fx: &Fixture<T, L>)
where
    T: Store + CheckpointStore + Clone + Send + Sync + 'static,
    L: EffectLedger + Send + Sync + 'static,
{
    let open_handles = &fx.open;
    let mut durable = Vec::new();
    for round in 0..4 {
        let results: Vec<Vec<String>> = std::thread::scope(|scope| {
            let workers: Vec<_> = (0..3)
                .map(|worker| {
                    scope.spawn(move || {
                        let mut saved = Vec::new();
                        let mut session = match open(open_handles(), OpenMode::TakeOver) {
                            Ok(session) => session,
                            // Overtaken while it opened.
                            Err(SessionError::Superseded { .. }) => return saved,
                            Err(other) => panic!("not a fence refusal: {other}"),
                        };
                        for turn in 0..3 {
                            let text = format!("round {round} worker {worker} turn {turn}");
                            session.push(Message::user(text.clone()));
                            match session.next_request_blocking() {
                                Ok(_) => saved.push(text),
                                Err(SessionError::Superseded { .. }) => break,
                                Err(other) => panic!("not a fence refusal: {other}"),
                            }
                        }
                        saved
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        durable.extend(results.into_iter().flatten());
    }
    let last = open((fx.open)(), OpenMode::TakeOver).unwrap();
    let texts = contents(&last);
    for text in &durable {
        assert!(texts.contains(text), "`{text}` was made durable, then lost");
    }
    assert!(!durable.is_empty());
}
