//! Runs a script of `tests/python/` under a Python that has Azure's official Event Grid
//! SDK (`azure-eventgrid`), so a system test can check that the SDK's own clients work
//! against eg unchanged. Such a Python is found from `EG_PYTHON_SDK` (the path of its
//! interpreter) or else at `target/python-sdk/bin/python` in the workspace, where
//! `.ci/run` installs it. A test that needs it and finds none fails, saying how to
//! install it: it is never skipped.

use eg_testkit::tier::PROXY_VARIABLES;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

/// The SDK version the scripts are written for and `.ci/run` installs.
pub const PYTHON_SDK_VERSION: &str = "4.22.1";

/// What a script did: its exit status and what it printed.
#[derive(Debug, Clone)]
pub struct PythonOutput {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

impl PythonOutput {
    /// The standard output of a script that succeeded; fails the test with the script's
    /// error output otherwise.
    pub fn stdout_of_success(&self) -> &str {
        assert!(
            self.success,
            "the Python SDK script failed:\n{}\n(stdout: {})",
            self.stderr, self.stdout
        );
        &self.stdout
    }
}

/// Runs `tests/python/<script>` with `args` under the SDK's Python and returns what it
/// did, whether it succeeded or not (a test may expect the SDK to raise).
pub async fn run_python_sdk(script: &str, args: &[&str]) -> PythonOutput {
    let python = python_with_sdk();
    let path = workspace().join("tests/python").join(script);
    assert!(path.is_file(), "no Python script {}", path.display());
    let mut command = tokio::process::Command::new(python);
    // The SDK talks to eg on 127.0.0.1: a proxy from the environment must not intercept it.
    for key in PROXY_VARIABLES {
        command.env_remove(key);
    }
    let output = command
        .arg(&path)
        .args(args)
        .kill_on_drop(true)
        .output()
        .await
        .unwrap_or_else(|e| panic!("cannot run {}: {e}", python.display()));
    from_output(output)
}

fn from_output(output: Output) -> PythonOutput {
    PythonOutput {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// The Python interpreter with `azure-eventgrid`, checked once per test binary.
fn python_with_sdk() -> &'static Path {
    static PYTHON: OnceLock<PathBuf> = OnceLock::new();
    PYTHON.get_or_init(|| {
        let (python, from) = match std::env::var_os("EG_PYTHON_SDK") {
            Some(path) => (PathBuf::from(path), "EG_PYTHON_SDK"),
            None => (workspace().join("target/python-sdk/bin/python"), "the default place"),
        };
        let check = std::process::Command::new(&python)
            .args(["-c", "import azure.eventgrid; print(azure.eventgrid.__version__)"])
            .output();
        match check {
            Ok(output) if output.status.success() => python,
            Ok(output) => panic!(
                "{} ({from}) has no azure-eventgrid: {}\n{}",
                python.display(),
                String::from_utf8_lossy(&output.stderr).trim(),
                how_to_install()
            ),
            Err(e) => panic!("no Python at {} ({from}): {e}\n{}", python.display(), how_to_install()),
        }
    })
}

fn how_to_install() -> String {
    format!(
        "The Python SDK tests need a Python with Azure's azure-eventgrid {PYTHON_SDK_VERSION}. In the workspace run\n    \
         python3 -m venv target/python-sdk && target/python-sdk/bin/pip install azure-eventgrid=={PYTHON_SDK_VERSION}\n\
         (.ci/run does this), or set EG_PYTHON_SDK to the python of a virtualenv that has it."
    )
}

/// The workspace root (this crate is `<workspace>/tests`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}
