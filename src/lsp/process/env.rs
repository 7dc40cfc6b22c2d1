//! A server's environment: the allowlist (exact names, toolchain families
//! by prefix or suffix), names that look like credentials refused inside
//! the families, the spec's passthrough and extra variables on top.
//!
//! On Windows variable names are compared ignoring ASCII case (`Path` is
//! `PATH`), as the OS does, and the variables Windows programs cannot start
//! or find their folders without (`SystemRoot`, `APPDATA`, `PATHEXT`, …)
//! are in the list.

use super::*;

/// Variables a server inherits by exact name, each with the reason it is
/// needed. docs/configuration.md ("Server environment") lists the same table.
pub(crate) const ENV_ALLOWED: &[(&str, &str)] = &[
    (
        "PATH",
        "finding the server's own helpers, toolchains and interpreters",
    ),
    (
        "HOME",
        "per-user caches and configuration (~/.cargo, ~/.cache, ~/.npm)",
    ),
    ("USER", "tools that key caches or paths on the user name"),
    (
        "LOGNAME",
        "the same, on systems that set LOGNAME instead of USER",
    ),
    ("SHELL", "servers that run tasks through the user's shell"),
    ("LANG", "locale: text encoding of tool output and messages"),
    ("LANGUAGE", "locale: message language"),
    ("TZ", "time zone of timestamps in messages"),
    ("TERM", "tools that check whether output is a terminal"),
    ("TMPDIR", "where temporary files go"),
    (
        "NETRC",
        "the credentials file git and cargo use to fetch dependencies (a path)",
    ),
    (
        "SSH_AUTH_SOCK",
        "the ssh agent, for git dependencies over ssh",
    ),
    ("GIT_ASKPASS", "the helper git asks for fetch credentials"),
    ("SSH_ASKPASS", "the same for ssh"),
    ("GIT_SSH", "the ssh program git uses to fetch"),
    ("GIT_SSH_COMMAND", "the same, as a command line"),
    (
        "SSL_CERT_FILE",
        "a custom CA bundle for fetching through a TLS proxy",
    ),
    ("SSL_CERT_DIR", "the same, as a directory"),
    (
        "RUSTFLAGS",
        "rust-analyzer's cargo runs must use the user's flags",
    ),
    ("RUSTDOCFLAGS", "the same for rustdoc"),
    ("GOPATH", "gopls: where modules and tools live"),
    ("GOROOT", "gopls: which Go toolchain"),
    ("GOBIN", "gopls: where go tools are installed"),
    ("GOFLAGS", "gopls: the user's default go flags"),
    ("GOPROXY", "gopls: where modules are fetched from"),
    ("GOPRIVATE", "gopls: which modules bypass the proxy"),
    ("GONOPROXY", "gopls: the same, for the proxy only"),
    (
        "GONOSUMDB",
        "gopls: modules not checked against the sum database",
    ),
    ("GOSUMDB", "gopls: the checksum database"),
    ("GOINSECURE", "gopls: modules fetched without TLS"),
    ("GOCACHE", "gopls: the build cache"),
    ("GOMODCACHE", "gopls: the module cache"),
    ("GOENV", "gopls: the go env file"),
    ("GOTOOLCHAIN", "gopls: which toolchain go selects"),
    ("GOWORK", "gopls: the workspace file"),
    ("GO111MODULE", "gopls: module mode"),
    ("GOOS", "gopls: target OS"),
    ("GOARCH", "gopls: target architecture"),
    ("CGO_ENABLED", "gopls: cgo on or off"),
    (
        "VIRTUAL_ENV",
        "pyright/pylsp: the active Python virtual environment",
    ),
    (
        "CC",
        "C compiler for build scripts and clangd's driver queries",
    ),
    ("CXX", "C++ compiler, the same"),
    ("CPATH", "clangd: extra include directories"),
    ("C_INCLUDE_PATH", "clangd: extra C include directories"),
    (
        "CPLUS_INCLUDE_PATH",
        "clangd: extra C++ include directories",
    ),
    (
        "PKG_CONFIG_PATH",
        "build scripts that locate system libraries",
    ),
    (
        "LD_LIBRARY_PATH",
        "servers and toolchains installed outside the system library path",
    ),
    (
        "DEVELOPER_DIR",
        "macOS: which Xcode or command line tools clangd and the toolchain use",
    ),
    (
        "SDKROOT",
        "macOS: the SDK clangd and build scripts compile against",
    ),
    (
        "SystemRoot",
        "Windows: where the system is; nothing starts without it",
    ),
    ("SystemDrive", "Windows: the system drive"),
    ("windir", "Windows: the same as SystemRoot, for older tools"),
    ("ComSpec", "Windows: cmd.exe, which runs npm's .cmd shims"),
    (
        "PATHEXT",
        "Windows: which extensions make a program (.cmd shims)",
    ),
    ("TEMP", "Windows: where temporary files go"),
    ("TMP", "Windows: the same"),
    ("USERPROFILE", "Windows: the user's home directory"),
    ("HOMEDRIVE", "Windows: the drive of the home directory"),
    ("HOMEPATH", "Windows: the home directory on that drive"),
    ("USERNAME", "Windows: the user name"),
    (
        "APPDATA",
        "Windows: per-user configuration (npm's global folder)",
    ),
    ("LOCALAPPDATA", "Windows: per-user caches"),
    ("ProgramData", "Windows: machine-wide data"),
    ("ProgramFiles", "Windows: where programs are installed"),
    (
        "ProgramFiles(x86)",
        "Windows: the same, for 32-bit programs",
    ),
    (
        "ProgramW6432",
        "Windows: the same, seen from 32-bit programs",
    ),
    ("CommonProgramFiles", "Windows: shared program files"),
    (
        "NUMBER_OF_PROCESSORS",
        "Windows: how many threads tools start",
    ),
    ("PROCESSOR_ARCHITECTURE", "Windows: which binaries to run"),
    ("OS", "Windows: tools that check they run on Windows_NT"),
];

/// Families of variables a server inherits by name prefix, with the reason;
/// a name that [`looks_like_credential`] is refused even so.
pub(crate) const ENV_ALLOWED_PREFIXES: &[(&str, &str)] = &[
    ("LC_", "locale categories"),
    (
        "XDG_",
        "base directories for configuration, caches and runtime files",
    ),
    ("RUSTUP_", "rustup: which toolchain, where it lives"),
    (
        "CARGO_",
        "cargo: home, target directory, offline mode, registries' URLs",
    ),
    (
        "RUSTC",
        "RUSTC, RUSTC_WRAPPER, RUSTC_BOOTSTRAP: the compiler cargo runs",
    ),
    ("RUST_", "RUST_SRC_PATH, RUST_LOG, RUST_BACKTRACE"),
    ("RA_", "rust-analyzer's own variables (RA_LOG)"),
    ("PYTHON", "PYTHONPATH, PYTHONHOME: Python import resolution"),
    ("PYENV_", "pyenv: which Python the shims select"),
    ("CONDA_", "conda: the active environment"),
    (
        "NODE_",
        "Node: NODE_PATH, NODE_OPTIONS, NODE_EXTRA_CA_CERTS",
    ),
    ("NVM_", "nvm: which Node"),
    (
        "npm_config_",
        "npm's configuration (registry, cache, proxy)",
    ),
    ("NPM_CONFIG_", "the same, upper case"),
];

/// Families of variables a server inherits by name suffix (any case), with
/// the reason. A proxy URL may carry a user and password: it is passed all
/// the same, since fetching dependencies through the proxy needs it.
pub(crate) const ENV_ALLOWED_SUFFIXES: &[(&str, &str)] = &[(
    "_PROXY",
    "HTTP_PROXY, HTTPS_PROXY, NO_PROXY, ALL_PROXY: how cargo, npm and go reach the network",
)];

/// Parts of a name (upper case) that mark a variable as a credential even
/// inside an allowed family: anywhere in the name.
const CREDENTIAL_SUBSTRINGS: &[&str] = &[
    "TOKEN",
    "SECRET",
    "PASSWORD",
    "PASSWD",
    "AUTH",
    "CREDENTIAL",
    "COOKIE",
    "SESSION",
    "PRIVATE",
    "KEY",
    "JWT",
];
/// The same, as a whole `_`-separated word of the name.
const CREDENTIAL_WORDS: &[&str] = &["PAT", "PWD", "PASS", "DSN", "PIN"];

/// Whether a variable name looks like it holds a credential.
pub(crate) fn looks_like_credential(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    CREDENTIAL_SUBSTRINGS
        .iter()
        .any(|part| upper.contains(part))
        || upper
            .split(|c: char| !c.is_ascii_alphanumeric())
            .any(|word| CREDENTIAL_WORDS.contains(&word))
}

/// Whether a variable of the proxy's environment is passed to servers by
/// the allowlist (without `env_passthrough`).
pub(crate) fn is_allowed_env(name: &OsStr) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    if ENV_ALLOWED
        .iter()
        .any(|(allowed, _)| same_name(allowed, name))
    {
        return true;
    }
    let upper = name.to_ascii_uppercase();
    let family = ENV_ALLOWED_PREFIXES
        .iter()
        .any(|(prefix, _)| starts_with_name(name, prefix))
        || ENV_ALLOWED_SUFFIXES
            .iter()
            .any(|(suffix, _)| upper.ends_with(suffix));
    family && !looks_like_credential(name)
}

/// Whether two variable names are the same: byte for byte on Unix,
/// ignoring ASCII case on Windows.
fn same_name(a: &str, b: &str) -> bool {
    if cfg!(windows) {
        a.eq_ignore_ascii_case(b)
    } else {
        a == b
    }
}

/// Whether `name` starts with `prefix`, compared as [`same_name`] does.
fn starts_with_name(name: &str, prefix: &str) -> bool {
    name.get(..prefix.len())
        .is_some_and(|start| same_name(start, prefix))
}

/// Whether `name` is one of `passthrough`: an exact name, or `PREFIX*`.
fn is_passed_through(name: &OsStr, passthrough: &[String]) -> bool {
    let Some(name) = name.to_str() else {
        return false;
    };
    passthrough.iter().any(|keep| match keep.strip_suffix('*') {
        Some(prefix) => starts_with_name(name, prefix),
        None => same_name(keep, name),
    })
}

/// The environment a server gets: the allowed variables of `base` and those
/// named in `env_passthrough`, then `env_extra` applied.
pub(crate) fn sanitized_env<I>(base: I, spec: &SpawnSpec) -> Vec<(OsString, OsString)>
where
    I: IntoIterator<Item = (OsString, OsString)>,
{
    let mut env: BTreeMap<OsString, OsString> = base
        .into_iter()
        .filter(|(name, _)| is_allowed_env(name) || is_passed_through(name, &spec.env_passthrough))
        .collect();
    for (name, value) in &spec.env_extra {
        // On Windows `Path` and `PATH` are one variable: the spec's wins.
        env.retain(|have, _| !have.to_str().is_some_and(|have| same_name(have, name)));
        env.insert(OsString::from(name), OsString::from(value));
    }
    env.into_iter().collect()
}
