//! A run's events as readable progress on a terminal (docs/rules.md AGENT-52): the model's text
//! as it streams, each tool call and its result on a line, a park with the exact command that
//! decides it, the answer and the proposals.
//!
//! Guarantees: text that came from a model, a tool or a caller is shown with its control
//! characters escaped, so it cannot move the cursor, recolour or retitle the operator's terminal;
//! long arguments and results are shortened, never the commands to run.

use std::io::{self, Write};

use airlock_ledger::InvocationId;
use airlock_runtime::agent::{
    ConfirmationNotice, HowToApprove, Proposal, RunEvent, RunReport, RunState,
};

use crate::result::run_state;

/// How many characters of arguments or a result a line shows.
const SHOWN: usize = 160;

/// Writes events to `out` as they come.
pub(crate) struct Progress<W: Write> {
    out: W,
    /// The deployment directory as one shell word, for the commands printed.
    dir: String,
    /// The model's text streamed since the last other event.
    streamed: String,
}

impl<W: Write> Progress<W> {
    pub(crate) fn new(out: W, dir: String) -> Self {
        Self {
            out,
            dir,
            streamed: String::new(),
        }
    }

    /// Shows one event.
    pub(crate) fn event(&mut self, event: &RunEvent) -> io::Result<()> {
        if let RunEvent::Token { text } = event {
            self.streamed.push_str(text);
            write!(self.out, "{}", clean(text))?;
            return self.out.flush();
        }
        let streamed = self.end_stream()?;
        match event {
            RunEvent::Token { .. } => Ok(()),
            RunEvent::Status { status, .. } => writeln!(self.out, "· {}", run_state(*status)),
            RunEvent::ToolCall {
                tool, arguments, ..
            } => writeln!(
                self.out,
                "→ {} {}",
                clean(tool),
                shorten(&arguments.to_string())
            ),
            RunEvent::ToolResult {
                tool,
                content,
                is_error,
                ..
            } => {
                if *is_error {
                    writeln!(self.out, "✗ {} failed: {}", clean(tool), shorten(content))
                } else {
                    writeln!(self.out, "← {}: {}", clean(tool), shorten(content))
                }
            }
            RunEvent::ApprovalRequired {
                invocation_id,
                tool,
                how,
            } => self.approval(*invocation_id, tool, how),
            RunEvent::CredentialRequired {
                invocation_id,
                tool,
                message,
            } => writeln!(
                self.out,
                "⏸ {} ({invocation_id}): {}",
                clean(tool),
                clean(message)
            ),
            RunEvent::ConfirmationRequired { notice } => self.confirmation(notice),
            RunEvent::Done {
                answer, proposals, ..
            } => {
                let answer = answer.as_deref().unwrap_or_default();
                // Streamed text that was the answer is not printed twice.
                if !answer.is_empty() && streamed.trim() != answer.trim() {
                    writeln!(self.out, "{}", clean(answer))?;
                }
                self.proposals(proposals)
            }
        }
    }

    /// Ends a line of streamed text, giving back what was streamed.
    fn end_stream(&mut self) -> io::Result<String> {
        let streamed = std::mem::take(&mut self.streamed);
        if !streamed.is_empty() {
            writeln!(self.out)?;
        }
        Ok(streamed)
    }

    fn approval(&mut self, id: InvocationId, tool: &str, how: &HowToApprove) -> io::Result<()> {
        writeln!(self.out, "⏸ {} waits for a person ({id})", clean(tool))?;
        match &how.cli {
            Some(cli) => writeln!(self.out, "    decide: {}", clean(cli)),
            None => {
                let dir = &self.dir;
                writeln!(self.out, "    approve: airlock approve {id} --dir {dir}")?;
                writeln!(
                    self.out,
                    "    deny:    airlock deny {id} --reason R --dir {dir}"
                )
            }
        }
    }

    /// Told by airlock, not the model (POLICY-32): the held call and how to consent.
    fn confirmation(&mut self, notice: &ConfirmationNotice) -> io::Result<()> {
        writeln!(
            self.out,
            "? {} waits for your confirmation: {}",
            clean(&notice.tool),
            shorten(&notice.arguments.to_string())
        )?;
        let words: Vec<String> = notice.yes_words.iter().map(|w| clean(w)).collect();
        writeln!(
            self.out,
            "    run again in this session with one of: {} (any other message cancels it)",
            words.join(", ")
        )
    }

    fn proposals(&mut self, proposals: &[Proposal]) -> io::Result<()> {
        if !proposals.is_empty() {
            writeln!(
                self.out,
                "proposals ({}; nothing executed — a person approves them outside the run):",
                proposals.len()
            )?;
        }
        for proposal in proposals {
            let via = proposal
                .via
                .as_deref()
                .map(|via| format!(" via {}", clean(via)))
                .unwrap_or_default();
            writeln!(
                self.out,
                "  - {} {}{via} {}",
                proposal.id,
                clean(&proposal.tool),
                shorten(&proposal.arguments.to_string())
            )?;
        }
        Ok(())
    }

    /// The last line: what became of the run, and where to read it again.
    pub(crate) fn finish(&mut self, report: &RunReport) -> io::Result<()> {
        self.end_stream()?;
        let at = format!("run {}, session {}", report.run_id, report.session_id);
        match report.status {
            RunState::Completed => writeln!(self.out, "completed ({at})"),
            RunState::Parked => writeln!(
                self.out,
                "parked ({at}): {} call(s) wait for a person; once they are decided a running \
                 `airlock serve` resumes the run (GET /v1/runs/{})",
                report.waiting.len(),
                report.run_id
            ),
            RunState::Failed => writeln!(
                self.out,
                "failed: {} ({at})",
                clean(report.error.as_deref().unwrap_or("no reason recorded"))
            ),
            RunState::Cancelled => writeln!(self.out, "cancelled ({at})"),
            RunState::Running => writeln!(self.out, "still running elsewhere ({at})"),
        }
    }

    /// Gives back the writer (tests read what was written).
    #[cfg(test)]
    fn into_inner(self) -> W {
        self.out
    }
}

/// `text` with every control character but newline and tab escaped (`\u{1b}` and so on).
fn clean(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` cleaned, on one line, at most [`SHOWN`] characters.
fn shorten(text: &str) -> String {
    let one_line = clean(text).replace('\n', "\\n");
    if one_line.chars().count() <= SHOWN {
        return one_line;
    }
    let cut: String = one_line.chars().take(SHOWN - 1).collect();
    format!("{cut}…")
}

#[cfg(test)]
mod tests {
    use airlock_ledger::{RunId, SessionId};
    use airlock_model::Usage;
    use serde_json::json;

    use super::*;

    fn render(events: &[RunEvent]) -> String {
        let mut progress = Progress::new(Vec::new(), "/srv/airlock".to_owned());
        for event in events {
            progress.event(event).unwrap();
        }
        String::from_utf8(progress.into_inner()).unwrap()
    }

    fn finished(report: &RunReport) -> String {
        let mut progress = Progress::new(Vec::new(), "/srv/airlock".to_owned());
        progress.finish(report).unwrap();
        String::from_utf8(progress.into_inner()).unwrap()
    }

    fn done(answer: &str, session_id: SessionId, proposals: Vec<Proposal>) -> RunEvent {
        RunEvent::Done {
            run_id: RunId::new(),
            status: RunState::Completed,
            answer: Some(answer.to_owned()),
            session_id,
            usage: Usage::default(),
            proposals,
        }
    }

    fn result(tool: &str, content: &str, is_error: bool) -> RunEvent {
        RunEvent::ToolResult {
            step: 1,
            call_id: "c1".into(),
            tool: tool.into(),
            content: content.into(),
            is_error,
        }
    }

    #[test]
    fn a_run_reads_as_progress() {
        let session = SessionId::new();
        let out = render(&[
            RunEvent::ToolCall {
                step: 1,
                call_id: "c1".into(),
                tool: "lookup".into(),
                arguments: json!({"q": "a"}),
            },
            result("lookup", "found", false),
            result("other", "no such row", true),
            RunEvent::Token {
                text: "The ".into(),
            },
            RunEvent::Token {
                text: "answer.".into(),
            },
            done("The answer.", session, Vec::new()),
        ]);
        assert_eq!(
            out,
            "→ lookup {\"q\":\"a\"}\n← lookup: found\n✗ other failed: no such row\nThe answer.\n"
        );
    }

    #[test]
    fn a_park_names_the_commands_that_decide_it() {
        let (with, without) = (InvocationId::new(), InvocationId::new());
        let out = render(&[
            RunEvent::ApprovalRequired {
                invocation_id: with,
                tool: "fetch".into(),
                how: HowToApprove {
                    cli: Some(format!("airlock approve {with} --dir /d")),
                    http: format!("POST /v1/invocations/{with}/approve"),
                },
            },
            RunEvent::ApprovalRequired {
                invocation_id: without,
                tool: "fetch".into(),
                how: HowToApprove {
                    cli: None,
                    http: String::new(),
                },
            },
        ]);
        assert!(
            out.contains(&format!("decide: airlock approve {with} --dir /d\n")),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "approve: airlock approve {without} --dir /srv/airlock\n"
            )),
            "{out}"
        );
        assert!(
            out.contains(&format!(
                "deny:    airlock deny {without} --reason R --dir /srv/airlock\n"
            )),
            "{out}"
        );
    }

    #[test]
    fn an_answer_not_streamed_is_printed_with_the_proposals() {
        let session = SessionId::new();
        let proposal = Proposal {
            id: InvocationId::new(),
            tool: "erp_crear".into(),
            kind: "api",
            target: "erp".into(),
            operation: "crear".into(),
            arguments: json!({"n": 1}),
            approved_arguments: None,
            via: Some("orders".into()),
            state: "proposed",
            decision: None,
        };
        let id = proposal.id;
        let out = render(&[done("Drafted.", session, vec![proposal])]);
        assert_eq!(
            out,
            format!(
                "Drafted.\nproposals (1; nothing executed — a person approves them outside the run):\n  - {id} erp_crear via orders {{\"n\":1}}\n"
            )
        );
    }

    #[test]
    fn the_last_line_says_what_became_of_the_run() {
        let mut report = RunReport {
            run_id: RunId::new(),
            session_id: SessionId::new(),
            agent: "a".into(),
            status: RunState::Parked,
            answer: None,
            error: None,
            steps: 1,
            usage: Usage::default(),
            proposals: Vec::new(),
            invocations: Vec::new(),
            waiting: vec![InvocationId::new()],
            drift: None,
            confirmation: None,
        };
        let at = format!("run {}, session {}", report.run_id, report.session_id);
        assert!(
            finished(&report).starts_with(&format!("parked ({at}): 1 call(s) wait")),
            "{}",
            finished(&report)
        );
        report.status = RunState::Failed;
        report.error = Some("provider error: 500 \u{1b}[31m".into());
        assert_eq!(
            finished(&report),
            format!("failed: provider error: 500 \\u{{1b}}[31m ({at})\n")
        );
        report.status = RunState::Completed;
        assert_eq!(finished(&report), format!("completed ({at})\n"));
    }

    #[test]
    fn hostile_text_cannot_drive_the_terminal() {
        let out = render(&[
            RunEvent::Token {
                text: "\u{1b}]0;owned\u{7}hi".into(),
            },
            result("t\u{1b}[2J", &"x".repeat(500), false),
        ]);
        assert!(!out.contains('\u{1b}') && !out.contains('\u{7}'), "{out:?}");
        assert!(out.contains("\\u{1b}]0;owned\\u{7}hi"), "{out:?}");
        let long = out.lines().nth(1).unwrap();
        assert!(long.chars().count() < SHOWN + 20, "{long}");
        assert!(long.ends_with('…'), "{long}");
    }

    #[test]
    fn a_confirmation_shows_the_held_call_and_the_words_that_consent() {
        let out = render(&[RunEvent::ConfirmationRequired {
            notice: ConfirmationNotice {
                tool: "billing_refund\u{1b}[2J".to_owned(),
                arguments: json!({"cents": 500}),
                yes_words: vec!["yes".to_owned(), "go ahead".to_owned()],
            },
        }]);
        assert!(
            out.contains("billing_refund\\u{1b}[2J waits for your confirmation"),
            "{out}"
        );
        assert!(out.contains(r#"{"cents":500}"#), "{out}");
        assert!(
            out.contains("one of: yes, go ahead (any other message cancels it)"),
            "{out}"
        );
        assert!(!out.contains('\u{1b}'), "{out}");
    }
}
