//! The ledger's integration suite: every case of `shared/ledger-cases.md` against SQLite, and
//! against PostgreSQL when `AIRLOCK_TEST_DATABASE_URL` is set (required when `CI` is set).

// Case bodies are plain async fns (not #[test]), so clippy's test allowance does not reach them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cases;
mod crash;
mod harness;
mod pg_processes;

harness::both_backends!(
    case_01_transactional_commits_with_the_row,
    case_02_dedupe_finish_twice_replay,
    case_03_siblings_settle_in_order,
    case_04_sixteen_claimers,
    case_05_expired_lease_in_doubt,
    case_06_idempotent_rerun,
    case_07_claimed_row_does_not_stay_running,
    case_08_remote_never_transactional,
    case_09_always_parks,
    case_10_never_runs_at_once,
    case_11_once_identical_call_runs,
    case_12_once_different_arguments_park,
    case_13_once_scoped_to_principal,
    case_14_approved_row_runs_without_policy,
    case_15_approval_bound_to_digest_and_arguments,
    case_16_approve_runs_once_waiter_gets_result,
    case_17_deny,
    case_18_resolve_in_doubt,
    case_19_one_decision_stands,
    case_20_approve_wrong_state,
    case_21_expiry,
    case_22_closed_run_refuses_decisions,
    case_23_run_resumes_once,
    case_24_wait_for_change,
    case_25_story_in_order,
    case_26_audit_chain_names_tampered_rows,
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
);
