//! Running the shared checks by group, as the GPU suite reports them: each group on its own,
//! a panic caught and reported as that group's failure, so one broken group does not hide the
//! others.

use cubecl::prelude::*;

/// One group of checks on a runtime's client.
pub type Check<Rt> = fn(&ComputeClient<Rt>);

/// The message of a caught panic (empty when it carried none).
pub fn panic_text(panic: &Box<dyn std::any::Any + Send>) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_default()
}

/// Runs every group on `client`, printing `PASS` or `FAIL` and the panic's message per group;
/// returns the number that failed.
pub fn run_groups<Rt: Runtime>(client: &ComputeClient<Rt>, groups: &[(&str, Check<Rt>)]) -> usize {
    let mut failed = 0;
    for (name, group) in groups {
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| group(client))) {
            Ok(()) => println!("PASS\t{name}"),
            Err(panic) => {
                failed += 1;
                println!("FAIL\t{name}: {}", panic_text(&panic));
            }
        }
    }
    failed
}
