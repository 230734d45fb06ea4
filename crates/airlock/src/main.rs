//! The `airlock` command: thin entry point; every subcommand lives in [`airlock::cli`].

fn main() -> std::process::ExitCode {
    airlock::cli::run()
}
