//! A client generated from the OpenAPI document a running ingress serves
//! (`GET /openapi.yaml`), by a standard generator (`@hey-api/openapi-ts`), compiled with
//! the program `tests/openapi-client/main.ts` by TypeScript (so every call is checked
//! against the generated types) and run under Node. The npm packages come from
//! `EG_OPENAPI_CLIENT_TOOLS` (a `node_modules` directory) or else
//! `target/test-tools/node_modules`, where `deploy/local/ensure-test-tools.sh` installs
//! them. A test that needs them and finds none fails, saying how to install them.

use eg_testkit::tier::PROXY_VARIABLES;
use std::path::{Path, PathBuf};
use std::process::Output;

/// What the generated client's program did.
#[derive(Debug)]
pub struct ClientRun {
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
}

/// Generates a client from `document` (the YAML text an ingress served) into a fresh
/// directory, compiles `tests/openapi-client/main.ts` against it and runs it with `args`.
/// Generation or compilation failing fails the test with the tool's output: both are
/// what the document must allow.
pub async fn run_generated_client(document: &str, args: &[&str]) -> ClientRun {
    let tools = tools();
    let dir = tempfile::tempdir().expect("a temporary directory");
    let root = dir.path();
    let document_path = root.join("openapi.yaml");
    std::fs::write(&document_path, document).expect("write the document");
    let program = workspace().join("tests/openapi-client");
    for file in ["main.ts", "tsconfig.json"] {
        std::fs::copy(program.join(file), root.join(file)).expect("copy the client program");
    }
    // The packages live outside this directory: TypeScript finds their types, and Node
    // their code, through the tools' node_modules.
    let config = root.join("tsconfig.json");
    let mut tsconfig: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&config).expect("read tsconfig.json"))
            .expect("tsconfig.json is JSON");
    let modules = tools.display().to_string();
    tsconfig["compilerOptions"]["baseUrl"] = ".".into();
    tsconfig["compilerOptions"]["paths"] =
        serde_json::json!({"*": [format!("{modules}/*"), format!("{modules}/@types/*")]});
    tsconfig["compilerOptions"]["typeRoots"] = serde_json::json!([format!("{modules}/@types")]);
    tsconfig["compilerOptions"]["outDir"] = "out".into();
    std::fs::write(&config, tsconfig.to_string()).expect("write tsconfig.json");

    let generated = node(&tools, root)
        .arg(tools.join("@hey-api/openapi-ts/bin/run.js"))
        .args(["-i", "openapi.yaml", "-o", "client"])
        .output()
        .await;
    succeeded("generating a client from the document (@hey-api/openapi-ts)", generated);
    let compiled = node(&tools, root)
        .arg(tools.join("typescript/bin/tsc"))
        .args(["-p", "."])
        .output()
        .await;
    succeeded(
        "compiling tests/openapi-client/main.ts against the generated client (tsc)",
        compiled,
    );
    let ran = node(&tools, root)
        .arg("out/main.js")
        .arg(&document_path)
        .args(args)
        .output()
        .await;
    let output = ran.unwrap_or_else(|e| panic!("cannot run node: {e}"));
    ClientRun {
        success: output.status.success(),
        stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
    }
}

/// `node` in `dir`, finding packages in `tools`, talking to 127.0.0.1 without a proxy.
fn node(tools: &Path, dir: &Path) -> tokio::process::Command {
    let mut command = tokio::process::Command::new("node");
    command.current_dir(dir).env("NODE_PATH", tools).kill_on_drop(true);
    for key in PROXY_VARIABLES {
        command.env_remove(key);
    }
    command
}

fn succeeded(what: &str, output: std::io::Result<Output>) {
    match output {
        Ok(output) if output.status.success() => {}
        Ok(output) => panic!(
            "{what} failed:\n{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ),
        Err(e) => panic!("{what}: cannot run node: {e} (the generated-client test needs Node.js 20+)"),
    }
}

/// The node_modules directory holding the generator, TypeScript, ajv and yaml.
fn tools() -> PathBuf {
    let (modules, from) = match std::env::var_os("EG_OPENAPI_CLIENT_TOOLS") {
        Some(path) => (PathBuf::from(path), "EG_OPENAPI_CLIENT_TOOLS"),
        None => (workspace().join("target/test-tools/node_modules"), "the default place"),
    };
    let needed = [
        "@hey-api/openapi-ts",
        "typescript",
        "ajv",
        "ajv-formats",
        "yaml",
        "@types/node",
    ];
    let missing: Vec<&str> = needed
        .into_iter()
        .filter(|p| !modules.join(p).join("package.json").is_file())
        .collect();
    assert!(
        missing.is_empty(),
        "{} ({from}) lacks {}: run deploy/local/ensure-test-tools.sh (just test does), or set \
         EG_OPENAPI_CLIENT_TOOLS to a node_modules directory with the packages it pins",
        modules.display(),
        missing.join(", ")
    );
    modules
}

/// The workspace root (this crate is `<workspace>/tests`).
fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
}
