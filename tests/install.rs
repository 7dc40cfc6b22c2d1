//! `acp-lsp install` against the real registries (npm, PyPI), each in a
//! clean prefix (`ACP_LSP_DATA_DIR`): a server installed with its pinned
//! checksum and found by `acp-lsp servers` without being on PATH; bad
//! input — an unreachable registry (npm and pip pointed at a closed
//! loopback port), a version that does not exist, a checksum that does
//! not match — failing with a clear error and installing nothing; an
//! install killed mid-way never run and repaired by the next one; two
//! installs of one server at once making one install; a trusted project's
//! pinned version; the shared daemon installing on first use.
// Unix only: it needs the Linux tools CI installs, /proc or Unix signals
// and sockets; what runs on Windows, and why the rest does not: docs/testing.md.
#![cfg(unix)]

mod support;

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use support::require;

const BIN: &str = env!("CARGO_BIN_EXE_acp-lsp");

/// A clean prefix and a config file.
struct Prefix {
    dir: tempfile::TempDir,
}

impl Prefix {
    fn new() -> Prefix {
        require("npm", "apt-get install -y nodejs npm");
        Prefix {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn config(&self, text: &str) -> PathBuf {
        let path = self.dir.path().join("config.toml");
        std::fs::write(&path, text).expect("write config");
        path
    }

    fn command(&self, args: &[&str], env: &[(&str, &str)]) -> Command {
        let mut command = Command::new(BIN);
        command
            .args(args)
            .current_dir(self.dir.path())
            .env("ACP_LSP_DATA_DIR", self.data())
            .envs(env.iter().copied())
            .stdin(Stdio::null());
        command
    }

    fn run(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        self.command(args, env).output().expect("run acp-lsp")
    }

    /// Complete installs (directories with their marker) of a package.
    fn installs(&self, package: &str) -> Vec<PathBuf> {
        self.entries(package)
            .into_iter()
            .filter(|p| p.join(".acp-lsp-install.json").is_file())
            .collect()
    }

    /// Everything in a package's directory but its lock file.
    fn entries(&self, package: &str) -> Vec<PathBuf> {
        let dir = self.data().join("servers").join(package);
        let mut out: Vec<PathBuf> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.file_name().is_some_and(|n| n != ".lock"))
            .collect();
        out.sort();
        out
    }
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn describe(output: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        output.status.code(),
        text(&output.stdout),
        text(&output.stderr)
    )
}

/// The one `error:` line about `server`.
fn error_about(output: &Output, server: &str) -> String {
    let stderr = text(&output.stderr);
    stderr
        .lines()
        .find(|l| l.starts_with(&format!("error: installing {server}")))
        .unwrap_or_else(|| panic!("no error about {server}:\n{}", describe(output)))
        .to_string()
}

/// A loopback port nothing listens on.
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    drop(listener);
    port
}

/// A PATH without the globally installed language servers: a directory
/// of links to the tools a recipe runs (node, npm, the real python3 behind
/// any shim, a shell), made once per test binary.
fn path_without_servers() -> String {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    let dir = DIR.get_or_init(|| {
        let dir = tempfile::tempdir().expect("temp dir");
        let python = Command::new("python3")
            .args(["-c", "import sys; print(sys.executable)"])
            .output()
            .ok()
            .map(|o| PathBuf::from(text(&o.stdout).trim()));
        let mut tools: Vec<(&str, PathBuf)> = Vec::new();
        for tool in ["node", "npm", "sh", "bash", "env", "uname"] {
            if let Some(path) = acp_lsp::lsp::detect::find_on_path(tool) {
                tools.push((tool, path));
            }
        }
        if let Some(python) = python.filter(|p| p.is_absolute()) {
            tools.push(("python3", python));
        }
        for (name, target) in tools {
            std::os::unix::fs::symlink(&target, dir.path().join(name)).expect("link a tool");
        }
        dir
    });
    dir.path().display().to_string()
}

/// A folder with a Python project.
fn python_project(root: &Path) {
    std::fs::create_dir_all(root).expect("mkdir");
    std::fs::write(root.join("pyproject.toml"), "[project]\nname = \"p\"\n").expect("write");
    std::fs::write(root.join("m.py"), "x: int = 1\n").expect("write");
}

#[test]
fn pyright_installs_pinned_and_is_found_without_path() {
    let prefix = Prefix::new();
    let output = prefix.run(&["install", "pyright"], &[]);
    assert!(output.status.success(), "{}", describe(&output));
    let installs = prefix.installs("npm-pyright");
    assert_eq!(installs.len(), 1, "{}", describe(&output));
    let marker: serde_json::Value = serde_json::from_slice(
        &std::fs::read(installs[0].join(".acp-lsp-install.json")).expect("marker"),
    )
    .expect("marker JSON");
    assert_eq!(marker["packages"][0]["version"], "1.1.414", "{marker}");
    assert!(
        marker["packages"][0]["checksums"][0]
            .as_str()
            .is_some_and(|c| c.starts_with("sha512-")),
        "{marker}"
    );
    // Nothing but the marker's install is left (no staging directory).
    assert_eq!(prefix.entries("npm-pyright"), installs);

    // `servers` finds it with a PATH that does not hold it, and says so.
    let project = prefix.dir.path().join("project");
    python_project(&project);
    let path = path_without_servers();
    let output = prefix.run(
        &["servers", "--json", &project.display().to_string()],
        &[("PATH", &path)],
    );
    assert!(output.status.success(), "{}", describe(&output));
    let view: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    let pyright = view["servers"]
        .as_array()
        .and_then(|s| s.iter().find(|s| s["name"] == "pyright"))
        .unwrap_or_else(|| panic!("{view}"));
    assert_eq!(pyright["program"]["origin"], "installed", "{view}");
    assert_eq!(pyright["check"]["starts"], true, "{view}");
    let brief = prefix.run(
        &["servers", &project.display().to_string()],
        &[("PATH", &path)],
    );
    let brief = text(&brief.stdout);
    assert!(
        brief
            .lines()
            .any(|l| l.starts_with("  pyright")
                && l.contains("acp-lsp install: npm pyright 1.1.414")),
        "{brief}"
    );

    // A second install is none; uninstall removes it.
    let again = prefix.run(&["install", "pyright"], &[]);
    assert!(
        text(&again.stdout).contains("installed already"),
        "{}",
        describe(&again)
    );
    let removed = prefix.run(&["uninstall", "pyright"], &[]);
    assert!(removed.status.success(), "{}", describe(&removed));
    assert!(
        text(&removed.stdout).starts_with("removed npm pyright 1.1.414"),
        "{}",
        describe(&removed)
    );
    assert!(prefix.entries("npm-pyright").is_empty());
}

#[test]
fn an_unreachable_registry_is_named_and_installs_nothing() {
    let prefix = Prefix::new();
    let registry = format!("http://127.0.0.1:{}/", closed_port());
    let output = prefix.run(
        &["install", "bash-language-server"],
        &[("npm_config_registry", &registry)],
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let error = error_about(&output, "bash-language-server");
    assert!(
        error.contains("the npm registry could not be reached") && error.contains("ECONNREFUSED"),
        "{error}"
    );
    assert!(prefix.entries("npm-bash-language-server").is_empty());

    require("python3", "apt-get install -y python3 python3-venv");
    let index = format!("http://127.0.0.1:{}/simple", closed_port());
    let output = prefix.run(
        &["install", "pylsp"],
        &[
            ("PIP_INDEX_URL", &index),
            ("PIP_FIND_LINKS", ""),
            ("PIP_RETRIES", "0"),
        ],
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let error = error_about(&output, "pylsp");
    assert!(
        error.contains("the PyPI registry could not be reached")
            && error.contains("Connection refused"),
        "{error}"
    );
    assert!(prefix.entries("pypi-python-lsp-server").is_empty());
}

#[test]
fn a_version_that_does_not_exist_and_a_checksum_that_does_not_match() {
    let prefix = Prefix::new();
    let config = prefix.config(
        "[install.pyright]\nversion = \"0.0.999\"\n\
         [install.bash-language-server]\nintegrity = \"sha512-AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==\"\n\
         [servers.six-check]\ncommand = \"six-check\"\nlanguage_ids = [\"x\"]\nfile_extensions = [\"x\"]\n\
         [install.six-check]\npypi = \"six\"\nversion = \"1.16.0\"\nsha256 = { \"six-1.16.0-py2.py3-none-any.whl\" = \"0000000000000000000000000000000000000000000000000000000000000000\" }\n",
    );
    let config = config.display().to_string();
    let output = prefix.run(
        &[
            "install",
            "--config",
            &config,
            "pyright",
            "bash-language-server",
            "six-check",
        ],
        &[("PIP_FIND_LINKS", "")],
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let missing = error_about(&output, "pyright");
    assert!(
        missing.contains("pyright@0.0.999 is not in the npm registry")
            && missing.contains("ETARGET"),
        "{missing}"
    );
    let npm = error_about(&output, "bash-language-server");
    assert!(
        npm.contains("checksum mismatch for bash-language-server@5.8.1")
            && npm.contains("the recipe pins sha512-AAAA")
            && npm.contains("nothing was installed"),
        "{npm}"
    );
    let pypi = error_about(&output, "six-check");
    assert!(
        pypi.contains("checksum mismatch for six-1.16.0-py2.py3-none-any.whl")
            && pypi.contains("sha256:0000"),
        "{pypi}"
    );
    assert!(text(&output.stderr).contains("error: 3 of 3 servers could not be installed"));
    for package in ["npm-pyright", "npm-bash-language-server", "pypi-six"] {
        assert!(
            prefix.entries(package).is_empty(),
            "{package}: {:?}",
            prefix.entries(package)
        );
    }
}

/// Starts `acp-lsp install pyright` and kills it (SIGKILL) once npm is
/// downloading.
fn kill_during_download(prefix: &Prefix) {
    let mut child = prefix
        .command(&["install", "pyright"], &[])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn acp-lsp install");
    let stderr = child.stderr.take().expect("stderr");
    let mut seen = Vec::new();
    for line in BufReader::new(stderr).lines() {
        let line = line.expect("stderr line");
        let downloading = line.contains("npm ci");
        seen.push(line);
        if downloading {
            child.kill().expect("kill -9");
            break;
        }
    }
    let status = child.wait().expect("wait");
    assert!(!status.success(), "it finished before the kill: {seen:?}");
}

#[test]
fn an_install_killed_mid_way_is_never_run_and_is_repaired() {
    let prefix = Prefix::new();
    kill_during_download(&prefix);
    assert!(prefix.installs("npm-pyright").is_empty());
    let left: Vec<PathBuf> = prefix.entries("npm-pyright");
    assert!(
        !left.is_empty()
            && left.iter().all(|p| p
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(".stage-"))),
        "the killed install left its staging directory only: {left:?}"
    );
    // Not run: the half-made install is not pyright's program.
    let project = prefix.dir.path().join("project");
    python_project(&project);
    let path = path_without_servers();
    let view = prefix.run(
        &["servers", "--json", &project.display().to_string()],
        &[("PATH", &path)],
    );
    let view: serde_json::Value = serde_json::from_slice(&view.stdout).expect("JSON");
    assert!(
        view["notInstalled"].as_array().is_some_and(|m| m.contains(
            &serde_json::json!({"name": "pyright", "install": "acp-lsp install pyright", "needed": true})
        )),
        "{view}"
    );
    // The next install repairs: one whole install, the staging gone.
    let output = prefix.run(&["install", "pyright"], &[]);
    assert!(output.status.success(), "{}", describe(&output));
    let installs = prefix.installs("npm-pyright");
    assert_eq!(installs.len(), 1);
    assert_eq!(prefix.entries("npm-pyright"), installs, "staging left over");
}

#[test]
fn two_installs_at_once_make_one_and_both_wait() {
    let prefix = Prefix::new();
    let spawn = || {
        prefix
            .command(&["install", "pyright"], &[])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn")
    };
    let first = spawn();
    let second = spawn();
    let outputs = [
        first.wait_with_output().expect("first"),
        second.wait_with_output().expect("second"),
    ];
    for output in &outputs {
        assert!(output.status.success(), "{}", describe(output));
    }
    let fresh = outputs
        .iter()
        .filter(|o| text(&o.stdout).starts_with("installed pyright"))
        .count();
    let already = outputs
        .iter()
        .filter(|o| text(&o.stdout).contains("pyright is installed already"))
        .count();
    assert_eq!(
        (fresh, already),
        (1, 1),
        "{}\n{}",
        describe(&outputs[0]),
        describe(&outputs[1])
    );
    let waited = outputs
        .iter()
        .any(|o| text(&o.stderr).contains("waiting for another acp-lsp (pid"));
    assert!(
        waited,
        "{}\n{}",
        describe(&outputs[0]),
        describe(&outputs[1])
    );
    assert_eq!(prefix.installs("npm-pyright").len(), 1);
}

#[test]
fn gopls_fails_naming_go_and_a_server_without_recipe_says_so() {
    let prefix = Prefix::new();
    let output = prefix.run(
        &["install", "gopls", "marksman"],
        &[("PATH", &path_without_servers())],
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("error: installing gopls needs `go`, which is not on PATH: install Go"),
        "{stderr}"
    );
    assert!(
        stderr.contains("error: marksman has no install recipe"),
        "{stderr}"
    );
    let unknown = prefix.run(&["install", "no-such-server"], &[]);
    assert_eq!(unknown.status.code(), Some(2), "{}", describe(&unknown));
}

/// A request for a file whose server is not installed: a `warn` naming
/// the fix at once, an error naming the command, and exit code 1 (a
/// failure, not a usage error).
#[test]
fn a_missing_server_is_a_failure_that_names_the_install_command() {
    let prefix = Prefix::new();
    let project = prefix.dir.path().join("project");
    python_project(&project);
    let uri = url::Url::from_file_path(project.join("m.py")).expect("uri");
    let params =
        format!(r#"{{"textDocument":{{"uri":"{uri}"}},"position":{{"line":0,"character":0}}}}"#);
    let root = project.display().to_string();
    let output = prefix.run(
        &["request", "--root", &root, "textDocument/hover", &params],
        &[("PATH", &path_without_servers())],
    );
    assert_eq!(output.status.code(), Some(1), "{}", describe(&output));
    let stderr = text(&output.stderr);
    assert!(
        stderr.lines().any(|l| l.contains("WARN")
            && l.contains("language server not installed: run `acp-lsp install pyright`")),
        "{stderr}"
    );
    assert!(
        stderr.lines().any(|l| l.starts_with("error: ")
            && l.contains("pyright")
            && l.contains("run `acp-lsp install pyright`")),
        "{stderr}"
    );
    assert!(output.stdout.is_empty(), "{}", describe(&output));
}

/// A trusted project's `.acp-lsp.toml` pins a server's version for the
/// team: `install --for` installs that version (not the built-in one, and
/// not the pyright on PATH); in an untrusted checkout it says the file was
/// not read.
#[test]
fn install_for_a_trusted_project_reads_its_pinned_version() {
    let prefix = Prefix::new();
    let project = prefix.dir.path().join("project");
    python_project(&project);
    std::fs::write(
        project.join(".acp-lsp.toml"),
        "[install.pyright]\nversion = \"1.1.407\"\n",
    )
    .expect("write the project file");
    let root = project.display().to_string();

    let untrusted = prefix.run(
        &["install", "--for", &root],
        &[("PATH", &path_without_servers())],
    );
    assert!(
        text(&untrusted.stderr).contains(".acp-lsp.toml was not read")
            && text(&untrusted.stderr).contains("trusted_projects"),
        "{}",
        describe(&untrusted)
    );

    let config = prefix.config(&format!("trusted_projects = [\"{root}\"]\n"));
    let config = config.display().to_string();
    // With the global pyright on PATH: a pin asks for acp-lsp's install.
    let output = prefix.run(&["install", "--config", &config, "--for", &root], &[]);
    assert!(output.status.success(), "{}", describe(&output));
    assert!(
        text(&output.stdout).contains("installed pyright (npm pyright 1.1.407)"),
        "{}",
        describe(&output)
    );
    let installs = prefix.installs("npm-pyright");
    assert!(
        installs.iter().any(|p| p
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with("1.1.407-"))),
        "{installs:?}"
    );
}

/// With `auto_install = true` in the config file, the shared daemon (which
/// reads the same file) installs a needed server as a proxy does: a
/// `request --shared` on a Python project with no Python server anywhere
/// gets its hover from the pyright the daemon installed into the prefix.
#[test]
fn the_shared_daemon_installs_on_first_use() {
    let prefix = Prefix::new();
    let project = prefix.dir.path().join("project");
    python_project(&project);
    let runtime = prefix.dir.path().join("runtime");
    std::fs::create_dir_all(&runtime).expect("mkdir runtime");
    std::fs::set_permissions(
        &runtime,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod runtime");
    let runtime = runtime.display().to_string();
    let config = prefix.config("auto_install = true\n");
    let config = config.display().to_string();
    let uri = url::Url::from_file_path(project.join("m.py")).expect("uri");
    let params =
        format!(r#"{{"textDocument":{{"uri":"{uri}"}},"position":{{"line":0,"character":0}}}}"#);
    let root = project.display().to_string();
    let path = path_without_servers();
    let env = [
        ("PATH", path.as_str()),
        ("XDG_RUNTIME_DIR", runtime.as_str()),
    ];
    let output = prefix.run(
        &[
            "request",
            "--shared",
            "--config",
            &config,
            "--root",
            &root,
            "textDocument/hover",
            &params,
        ],
        &env,
    );
    // The daemon and its servers go with the test.
    let status = prefix.run(&["daemon", "status", "--json", "--config", &config], &env);
    if let Ok(status) = serde_json::from_slice::<serde_json::Value>(&status.stdout) {
        if let Some(pid) = status["pid"].as_u64() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    }
    assert!(output.status.success(), "{}", describe(&output));
    assert!(
        text(&output.stdout).contains("(variable) x"),
        "{}",
        describe(&output)
    );
    assert_eq!(prefix.installs("npm-pyright").len(), 1);
}
