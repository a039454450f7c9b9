//! Unit tests of incremental planning: a re-plan after an append counts only what is new,
//! requests only append between compaction points, and a planner resumed from a checkpoint's
//! memory plans as the warm one. The helpers are in `planner/tests.rs`.

use super::*;
use crate::planner::plan::Request;

/// Counts every text the tokenizer sees.
struct Counting(Arc<AtomicUsize>);

impl TokenCounter for Counting {
    fn count(&self, text: &str) -> usize {
        self.0.fetch_add(text.len(), Ordering::SeqCst);
        text.len().div_ceil(4)
    }
}

/// Issue 20.5/20.6: a re-plan after an append counts (and hashes) only what is new, and a
/// first plan of a long history never counts what it folds.
#[test]
fn replanning_after_an_append_counts_only_what_is_new() {
    let counted = Arc::new(AtomicUsize::new(0));
    let planner = TranscriptPlanner::new(Arc::new(Counting(counted.clone())));
    let mut chat = session();
    for turn in 0..3000 {
        chat.push(Message::assistant(format!("step {turn}: ").repeat(50)));
        chat.push(Message::user(format!("next {turn}")));
    }
    let history: usize = chat.iter().map(|m| m.content.len()).sum();
    let policy = TranscriptPolicy::default();
    let budget = TranscriptBudget::with_marks(20_000, 0.9, 0.6);
    let planned = planner
        .plan_without_summaries(&chat, &policy, budget, &none())
        .unwrap();
    planner.commit(&planned);
    let first = counted.swap(0, Ordering::SeqCst);
    assert!(
        first < history / 5,
        "first plan counted {first} of {history} bytes"
    );
    let mut appended = 0;
    for turn in 0..50 {
        let reply = Message::assistant(format!("one more reply {turn}"));
        appended += reply.content.len();
        chat.push(reply);
        let planned = planner
            .plan_without_summaries(&chat, &policy, budget, &none())
            .unwrap();
        planner.commit(&planned);
    }
    let later = counted.load(Ordering::SeqCst);
    assert!(
        later < 50 * 400 + 20 * appended,
        "50 appends of {appended} bytes counted {later} bytes"
    );
}

/// Issue 20.5 with paging on arrival: a first plan of a long history with large tool results,
/// planned with a page cap, still never counts the results of the turns it folds (only the
/// recent turns' new results are held to the cap).
#[test]
fn a_page_cap_does_not_count_the_results_a_first_plan_folds() {
    let counted = Arc::new(AtomicUsize::new(0));
    let planner = TranscriptPlanner::new(Arc::new(Counting(counted.clone())));
    let mut chat = session();
    for turn in 0..1000 {
        let id = format!("r{turn}");
        chat.push(Message::assistant_with_tools(
            "",
            vec![ToolCall::new(&id, "read", json!({ "turn": turn }))],
        ));
        chat.push(Message::tool_result(
            &id,
            format!("line {turn}\n").repeat(300),
        ));
        chat.push(Message::user(format!("next {turn}")));
    }
    let history: usize = chat.iter().map(|m| m.content.len()).sum();
    let effects = none();
    let request = Request {
        policy: TranscriptPolicy::default(),
        budget: TranscriptBudget::with_marks(20_000, 0.9, 0.6),
        effects: &effects,
        summary_tokens: None,
        update: None,
        compact: false,
        page_over: Some(500),
        verbatim_first: false,
        keep_first: 0,
    };
    let plan = planner.plan_request(&chat, &request).unwrap();
    assert!(plan.planned.tokens() <= 20_000);
    let first = counted.load(Ordering::SeqCst);
    assert!(
        first < history / 5,
        "first plan counted {first} of {history} bytes"
    );
}

/// Issue 22.3: between compaction points a request is the previous one plus the new messages;
/// history only moves forward; blocks stay bounded.
#[test]
fn hysteresis_appends_between_compaction_points_and_history_only_moves_forward() {
    let planner = planner();
    let policy = TranscriptPolicy::default();
    let budget = TranscriptBudget::with_marks(3_000, 0.9, 0.6);
    let mut chat = Transcript::new();
    chat.push(Message::system("be careful"));
    let mut previous: Vec<Message> = Vec::new();
    let (mut previous_blocks, mut previous_stable) = (0, 0);
    let mut store: HashMap<crate::store::ContentHash, Vec<u8>> = HashMap::new();
    let (mut points, mut appends) = (0, 0);
    for turn in 0..250 {
        chat.push(Message::user(format!("turn {turn}: do the next thing")));
        let id = format!("c{turn}");
        chat.push(Message::assistant_with_tools(
            "",
            vec![ToolCall::new(&id, "read", json!({"n": turn}))],
        ));
        chat.push(Message::tool_result(
            &id,
            format!("result {turn} ").repeat(turn % 7 * 20 + 5),
        ));
        chat.push(Message::assistant(format!("done {turn}")));
        let planned = planner
            .plan_without_summaries(&chat, &policy, budget, &none())
            .unwrap();
        store.extend(planned.blobs().iter().cloned());
        assert!(planned.tokens() <= 3_000);
        assert_eq!(planned.tokens(), tokens(planned.messages()));
        if turn % 10 == 0 || planned.compacted() {
            let back = rehydrate_transcript(planned.messages(), planned.handles(), &store);
            assert_eq!(back.unwrap(), chat);
        }
        if planned.compacted() {
            points += 1;
            assert!(planned.tokens() <= 2_700, "{}", planned.tokens());
            // New blocks come after the old ones: unless the blocks were consolidated, the old
            // ones are sent again byte for byte.
            if planned.memory().record.blocks.len() > previous_blocks {
                assert!(planned.messages().starts_with(&previous[..previous_stable]));
            }
        } else {
            appends += 1;
            assert!(planned.messages().starts_with(&previous));
            assert_eq!(planned.reused_prefix(), previous.len());
            assert!(planned.tokens() <= 2_700);
        }
        assert!(planned.memory().record.blocks.len() <= MAX_BLOCKS);
        previous = planned.messages().to_vec();
        previous_blocks = planned.memory().record.blocks.len();
        previous_stable = planned.stable_prefix();
        planner.commit(&planned);
    }
    assert!(
        points > 5 && appends > 4 * points,
        "{points} points, {appends} appends"
    );
}

/// Issue 20.6: a planner resumed from a checkpoint's memory plans the next request exactly as
/// the warm one.
#[test]
fn a_resumed_planner_plans_the_next_request_as_the_warm_one() {
    let warm = planner();
    let policy = TranscriptPolicy::default();
    let budget = TranscriptBudget::with_marks(2_000, 0.9, 0.6);
    let mut chat = session();
    for turn in 0..60 {
        chat.push(Message::assistant(
            format!("reply {turn} ").repeat(turn % 9 + 1),
        ));
        chat.push(Message::user(format!("question {turn}")));
        let planned = warm
            .plan_without_summaries(&chat, &policy, budget, &none())
            .unwrap();
        warm.commit(&planned);
        // What a checkpoint carries: the record as JSON, and the messages.
        let record = serde_json::to_string(&planned.memory().record).unwrap();
        let restored = TranscriptMemory::from_record(
            serde_json::from_str(&record).unwrap(),
            planned.messages().to_vec(),
        )
        .unwrap();
        let cold = planner();
        cold.resume(restored);
        // A copy of the transcript, as another process would load it.
        let mut loaded: Transcript =
            serde_json::from_str(&serde_json::to_string(&chat).unwrap()).unwrap();
        let mut grown = chat.clone();
        for next in [
            Message::assistant("x ".repeat(turn * 3)),
            Message::user("y"),
        ] {
            loaded.push(next.clone());
            grown.push(next);
        }
        let a = warm
            .plan_without_summaries(&grown, &policy, budget, &none())
            .unwrap();
        let b = cold
            .plan_without_summaries(&loaded, &policy, budget, &none())
            .unwrap();
        assert_eq!(a.messages(), b.messages(), "turn {turn}");
        assert_eq!(a.memory().record, b.memory().record);
    }
}
