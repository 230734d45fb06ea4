//! `examples/quickstart` serves fully offline: `airlock serve` boots it (no connection to
//! discover) and `/readyz` answers 200.

use std::path::Path;

use crate::examples;
use crate::support::Server;

pub(crate) fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else if !entry.file_name().to_string_lossy().contains(".sqlite") {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

#[tokio::test]
async fn the_quickstart_serves_offline() {
    // A copy, so the ledger file is not created inside the repository.
    let dir = tempfile::tempdir().unwrap();
    copy_dir(&examples().join("quickstart"), dir.path());
    let server = Server::start(dir.path(), &[]);
    let ready = reqwest::get(format!("http://{}/readyz", server.addr))
        .await
        .unwrap();
    assert_eq!(ready.status().as_u16(), 200);
    assert_eq!(ready.text().await.unwrap(), "ready");
    assert!(dir.path().join("airlock.sqlite").exists());
}
