//! Rebuilds the crate when a migration is added: `sqlx::migrate!` embeds the files of
//! `migrations/` at compile time, but on stable Rust cargo only learns of the files it read, so
//! a new file alone would leave a build with the old set (docs/rules.md OPS-86: the schema a
//! binary migrates to is the one in its source tree).

fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
