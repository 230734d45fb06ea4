//! The ledger's integration suite: every ledger rule of docs/rules.md against SQLite, and
//! against PostgreSQL when `AIRLOCK_TEST_DATABASE_URL` is set (required when `CI` is set).

// Case bodies are plain async fns (not #[test]), so clippy's test allowance does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;
mod crash;
mod harness;
mod pg_processes;
mod wake;

harness::both_backends!(
    ledger_7_transactional_commits_with_the_row,
    ledger_5_dedupe_finish_twice_replay,
    ledger_6_siblings_settle_in_order,
    ledger_3_sixteen_claimers,
    ledger_8_expired_lease_in_doubt,
    ledger_9_idempotent_rerun,
    ledger_10_claimed_row_does_not_stay_running,
    decl_11_remote_never_transactional,
    policy_1_always_parks,
    policy_2_never_runs_at_once,
    policy_3_once_identical_call_runs,
    policy_3_once_different_arguments_park,
    policy_4_once_scoped_to_principal,
    policy_5_approved_row_runs_without_policy,
    policy_6_approval_bound_to_digest_and_arguments,
    decide_2_approve_runs_once_waiter_gets_result,
    ledger_46_state_approves_and_claims_once,
    ledger_46_concurrent_uses_one_wins,
    ledger_47_refused_use_writes_nothing,
    decide_3_deny,
    decide_4_resolve_in_doubt,
    decide_4_abandon_in_doubt,
    decide_5_one_decision_stands,
    decide_6_approve_wrong_state,
    policy_15_expiry,
    decide_6_closed_run_refuses_decisions,
    decide_7_run_resumes_once,
    decide_9_wait_for_change,
    ledger_15_story_in_order,
    ledger_16_audit_chain_names_tampered_rows,
    legacy_kind_word_reads_and_still_verifies,
    two_stores_share_the_chain,
    a_transactional_call_after_another_process_decided,
    a_sweep_bigger_than_one_statement,
    a_run_beside_its_new_session,
    question_answer_and_decline,
    fused_claims_an_ungated_call_once,
    fused_racing_duplicates_claim_once,
    fused_leaves_gated_calls_unclaimed,
    fused_batches_stay_exact,
    sessions_and_first_calls_share_batches,
    approved_unclaimed_oldest_first_until_claimed,
    finish_after_another_process_swept_the_call,
    verify_beside_live_writes_reports_no_break,
    policy_16_budget_refills_by_the_store_clock,
    ledger_48_a_refused_call_is_born_denied,
    ledger_49_tool_pins_are_replaced_and_removed,
    policy_16_a_call_takes_from_every_budget_or_none,
    policy_16_stores_on_one_database_share_the_budget,
    ledger_19_unanswered_at_most_once_parks_in_doubt,
    ledger_20_late_answer_wins_over_the_sweep,
    ledger_30_transitions_write_their_notices,
    ledger_30_no_routes_no_rows,
    ledger_31_one_holder_one_delivery,
    ledger_32_retry_then_give_up,
    ledger_56_a_run_holds_its_lease_while_running,
    ledger_57_only_the_holder_renews,
    ledger_58_one_taker_per_expired_run,
    agent_7_parked_listing_skips_runs_still_waiting,
);
