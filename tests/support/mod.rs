//! Helpers shared by the integration tests. Each test crate uses a subset.
#![allow(dead_code)]

pub mod procfs;

use std::path::Path;

/// Copies a fixture tree (servers write into projects: never into `tests/projects`).
pub fn copy_tree(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap_or_else(|e| panic!("read {}: {e}", from.display()))
    {
        let entry = entry.expect("read a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("file type").is_dir() {
            std::fs::create_dir_all(&target).expect("create a directory");
            copy_tree(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

/// The C fixture's sources (tests/projects/c-project).
pub const C_SOURCES: &[&str] = &["src/geometry.c", "src/main.c"];

/// The C fixture's compiler flags, from its `compile_flags.txt`.
pub fn c_flags(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join("compile_flags.txt"))
        .expect("the C fixture has compile_flags.txt")
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect()
}

/// clangd answers across files only with a compilation database (with just
/// `compile_flags.txt` it sees open files only): write one for the copy.
pub fn write_compile_commands(root: &Path) {
    let flags = c_flags(root);
    let commands: Vec<serde_json::Value> = C_SOURCES
        .iter()
        .map(|file| {
            let mut arguments = vec!["cc".to_string()];
            arguments.extend(flags.iter().cloned());
            arguments.extend(["-c".to_string(), file.to_string()]);
            serde_json::json!({
                "directory": root.display().to_string(),
                "file": file,
                "arguments": arguments,
            })
        })
        .collect();
    std::fs::write(
        root.join("compile_commands.json"),
        serde_json::to_string_pretty(&commands).expect("a Value serializes"),
    )
    .expect("write compile_commands.json");
}
