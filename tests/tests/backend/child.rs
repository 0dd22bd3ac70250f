//! Tests that need a setting ruda reads once per process (an environment variable such as
//! `RUDA_FUSERS` or `RUDA_GELU`) run in a child process of this binary: the test, run by the
//! harness, starts this binary again with the setting and a filter that selects only itself, and
//! the child, seeing its own name in [`CHILD`], does the work. One binary instead of one per
//! setting: each binary that instantiates the whole backend costs CI minutes of compilation.

use std::process::Command;

/// The variable that tells a child process which test it was started for.
const CHILD: &str = "RUDA_TESTS_CHILD";

/// In the harness's process: runs `test` (its path in this binary, `module::function`) in a
/// child process with `vars` set, panics with the child's output unless exactly that one test
/// ran and passed, and returns `false`. In the child started for `test`: returns `true`, and the
/// caller does the work there.
pub fn in_child(test: &str, vars: &[(&str, &str)]) -> bool {
    if std::env::var(CHILD).as_deref() == Ok(test) {
        return true;
    }
    let exe = std::env::current_exe().expect("the path of this test binary");
    let output = Command::new(&exe)
        .args([test, "--exact", "--test-threads=1", "--nocapture"])
        .env(CHILD, test)
        .envs(vars.iter().copied())
        .output()
        .unwrap_or_else(|e| panic!("cannot start {} for {test}: {e}", exe.display()));
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    // A filter that matches nothing also exits 0: require the one test to have run.
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{test} in a child process with {vars:?}: {}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        output.status
    );
    false
}
